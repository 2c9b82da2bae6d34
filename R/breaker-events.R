#' Breaker events and listeners
#'
#' `breaker$on(event, callback)` registers a listener and returns its id;
#' `breaker$off(id)` removes it (returning `TRUE` if it was registered).
#'
#' Events and the arguments their listeners receive (by name; a listener may
#' declare only the ones it needs, or `...`):
#' * `"state_change"`: `from`, `to` (state names), `reason` (`"health_check"`
#'   when a passing health check closed the breaker, else `NA`), `breaker`.
#' * `"success"`: `value` (what the request returned), `breaker`.
#'   A `DISABLED` breaker records nothing, and sends no `success`, `failure`
#'   or `ignored` events.
#' * `"failure"`: `condition` (the error, or a `circuit_breaker_failed_value`
#'   condition), `breaker`.
#' * `"ignored"`: `condition`, `breaker`.
#' * `"rejected"`: `retry_after` (seconds until the next probe), `reason`
#'   (`"open"`, `"half_open_full"`, `"forced_open"`, `"ramp_up"`, or `"full"`
#'   when the bulkhead, `max_concurrent`, had no free permit), `breaker`.
#' * `"health_check"`: `result` (`"passed"`: it closed the breaker;
#'   `"failed"`; `"late"`: the breaker had left that open period before the
#'   check returned), `condition` (the error the check raised, or `NULL`),
#'   `breaker`. See `health_check` in [circuit_breaker()]. The condition is
#'   passed as it is: log what you need of it, mindful of secrets in messages.
#'
#' Listeners run after the C++ core has finished the call's bookkeeping and
#' any transition it caused, in registration order. On a host- or
#' fleet-shared breaker ([breaker_store_host()], [breaker_store_redis()])
#' `"state_change"` also reports transitions made by other processes: on
#' this process's next call, and within about a second
#' while an event loop runs (plumber, Shiny: through `later`). A listener that signals an
#' error does not change the breaker: the error becomes a warning of class
#' `circuit_breaker_listener_error`.
#'
#' @name breaker_events
#' @examples
#' cb <- circuit_breaker(failure_threshold = 1)
#' id <- cb$on("state_change", function(from, to) message(from, " -> ", to))
#' cb$execute(function() stop("down"), function() NULL)
#' cb$off(id)
NULL

breaker_event_types <- c("state_change", "success", "failure", "ignored", "rejected", "health_check")

# Listeners live in the breaker's core, next to at most one reporter (the
# OpenTelemetry reporting of otel.R, `core$reporter`: a list of functions by
# event, called before the listeners and never seen by $on()/$off()). The C++
# core keeps one flag, whether anybody hears events (so that a rejection with
# a zero-argument fallback needs nothing from R); update_listening() is the
# one place that sets it, from the two.
update_listening <- function(core) {
  cb_set_listening(core$ptr, hears_events(core))
}

# A breaker with a health check hears its own transitions, to start the
# check when it opens (breaker-health.R).
hears_events <- function(core) {
  length(core$listeners) > 0L || !is.null(core$reporter) || !is.null(core$health_check)
}

set_listeners <- function(core, listeners) {
  core$listeners <- listeners
  update_listening(core)
}

# Makes `reporter` (a list of functions by event type) hear this core's
# events from now on.
set_reporter <- function(core, reporter) {
  if (!hears_events(core)) core$seen_transition <- cb_snapshot(core$ptr)$transitions
  core$reporter <- reporter
  update_listening(core)
  watch_shared_transitions(core)
}

breaker_on <- function(core, event, callback, call) {
  if (!is.character(event) || length(event) != 1L || !event %in% breaker_event_types) {
    abort_bad_argument("event", paste0("one of ", paste0("\"", breaker_event_types, "\"", collapse = ", ")),
                       event, call = call)
  }
  check_function(callback, "callback", call = call)
  if (!hears_events(core)) {
    # Only transitions from now on are reported.
    core$seen_transition <- cb_snapshot(core$ptr)$transitions
  }
  id <- core$next_listener_id %||% 1L
  core$next_listener_id <- id + 1L
  set_listeners(core, c(core$listeners, list(list(id = id, event = event, callback = callback))))
  watch_shared_transitions(core)
  id
}

breaker_off <- function(core, id, call) {
  if (!is.numeric(id) || length(id) != 1L || is.na(id)) {
    abort_bad_argument("id", "a listener id returned by `$on()`", id, call = call)
  }
  ids <- vapply(core$listeners, function(l) l$id, integer(1))
  found <- ids == id
  set_listeners(core, core$listeners[!found])
  invisible(any(found))
}

# Tells the reporter, then the listeners of `event` (with the arguments they
# accept), after reporting any transition the core made first.
emit <- function(core, event, ...) {
  emit_transitions(core)
  if (identical(event, "rejected")) health_watch(core)
  report <- core$reporter[[event]]
  if (!is.null(report)) call_reporter(report, event, ...)
  args <- list(...)
  for (listener in core$listeners) {
    if (identical(listener$event, event)) {
      call_listener(listener$callback, event, c(args, list(breaker = breaker_view(core))))
    }
  }
  invisible(NULL)
}

# Reports the transitions the core made since the last report.
emit_transitions <- function(core) {
  tr <- cb_transitions(core$ptr, core$seen_transition %||% 0)
  n <- length(tr$seq)
  if (n == 0L) return(invisible(NULL))
  core$seen_transition <- tr$seq[[n]]
  report <- core$reporter$state_change
  for (i in seq_len(n)) {
    if (!is.null(report)) call_reporter(report, "state_change", tr$from[[i]], tr$to[[i]], tr$reason[[i]])
    for (listener in core$listeners) {
      if (identical(listener$event, "state_change")) {
        call_listener(listener$callback, "state_change",
                      list(from = tr$from[[i]], to = tr$to[[i]], reason = tr$reason[[i]],
                           breaker = breaker_view(core)))
      }
    }
  }
  if (any(tr$to == "OPEN")) health_watch(core)
  invisible(NULL)
}

# Another process may move a shared breaker (its store polls: store.R) while
# this one makes no call. With listeners and the later package, the shared transition log is
# read every `circuitbreaker.host_poll_interval` seconds on the event loop
# (it costs one read of the log). The loop holds the core weakly and stops
# when the core is gone or has no listeners left.
watch_shared_transitions <- function(core) {
  if (isTRUE(core$watching) || !store_polls(core_store(core)) ||
      !requireNamespace("later", quietly = TRUE)) {
    return(invisible())
  }
  core$watching <- TRUE
  schedule_transition_poll(rlang::new_weakref(core))
}

schedule_transition_poll <- function(ref) {
  # Forced here, not in the callback: an unforced argument would keep the
  # caller's frame, which holds the core (watch_shared_transitions()'s, then
  # each poll's), and so the core alive for as long as it is polled, which
  # is forever.
  force(ref)
  interval <- getOption("circuitbreaker.host_poll_interval", 0.5)
  if (!is.numeric(interval) || length(interval) != 1L || !isTRUE(interval > 0)) interval <- 0.5
  later::later(function() poll_shared_transitions(ref), interval)
  invisible()
}

poll_shared_transitions <- function(ref) {
  core <- rlang::wref_key(ref)
  if (is.null(core)) return(invisible())
  if (!hears_events(core)) {
    core$watching <- FALSE
    return(invisible())
  }
  # A broken segment stops the loop (the next call reports it); a busy one
  # (its lock held too long) is tried again at the next poll.
  ok <- tryCatch({
    emit_transitions(core)
    store_link_news(core_store(core))
    TRUE
  }, circuit_breaker_store_busy = function(e) TRUE,
  circuit_breaker_error = function(e) FALSE)
  if (ok) schedule_transition_poll(ref) else core$watching <- FALSE
  invisible()
}

# A reporter's functions take the event's arguments as emit() gives them: no
# formals() matching, no do.call() and no breaker view, since it runs on every
# call. Its errors (otelsdk's, say, once its provider is shut down) are
# reported like a listener's: a call never fails because reporting did.
call_reporter <- function(report, event, ...) {
  tryCatch(
    report(...),
    error = function(e) warning(listener_warning(event, e))
  )
}

call_listener <- function(callback, event, args) {
  formal_names <- names(formals(callback))
  if (!"..." %in% formal_names) args <- args[names(args) %in% formal_names]
  tryCatch(
    do.call(callback, args),
    error = function(e) warning(listener_warning(event, e))
  )
}
