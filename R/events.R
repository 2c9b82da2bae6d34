#' Breaker events and listeners
#'
#' `breaker$on(event, callback)` registers a listener and returns its id;
#' `breaker$off(id)` removes it (returning `TRUE` if it was registered).
#'
#' Events and the arguments their listeners receive (by name; a listener may
#' declare only the ones it needs, or `...`):
#' * `"state_change"`: `from`, `to` (state names), `breaker`.
#' * `"success"`: `value` (what the request returned), `breaker`.
#' * `"failure"`: `condition` (the error, or a `circuit_breaker_failed_value`
#'   condition), `breaker`.
#' * `"ignored"`: `condition`, `breaker`.
#' * `"rejected"`: `retry_after` (seconds until the next probe), `breaker`.
#'
#' Listeners run after the C++ core has finished the call's bookkeeping and
#' any transition it caused, in registration order. A listener that signals an
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

breaker_event_types <- c("state_change", "success", "failure", "ignored", "rejected")

breaker_on <- function(self, private, event, callback) {
  if (!is.character(event) || length(event) != 1L || !event %in% breaker_event_types) {
    abort_bad_argument("event", paste0("one of ", paste0("\"", breaker_event_types, "\"", collapse = ", ")),
      event, call = rlang::caller_call())
  }
  if (!is.function(callback)) {
    abort_bad_argument("callback", "a function", callback, call = rlang::caller_call())
  }
  id <- private$next_listener_id
  private$next_listener_id <- id + 1L
  if (!private$is_listening()) {
    # Only transitions from now on are reported.
    private$seen_transition <- cb_snapshot(private$ptr)$transitions
  }
  private$listeners[[length(private$listeners) + 1L]] <- list(id = id, event = event, callback = callback)
  private$set_hot("listening", TRUE)
  cb_set_listening(private$ptr, TRUE)
  id
}

breaker_off <- function(self, private, id) {
  ids <- vapply(private$listeners, function(l) l$id, integer(1))
  if (!is.numeric(id) || length(id) != 1L || is.na(id)) {
    abort_bad_argument("id", "a listener id returned by `$on()`", id, call = rlang::caller_call())
  }
  found <- ids == id
  private$listeners <- private$listeners[!found]
  listening <- length(private$listeners) > 0L
  private$set_hot("listening", listening)
  cb_set_listening(private$ptr, listening)
  invisible(any(found))
}

# Calls the listeners of `event` with the arguments they accept.
breaker_emit <- function(self, private, event, args) {
  breaker_emit_transitions(self, private)
  for (listener in private$listeners) {
    if (identical(listener$event, event)) {
      call_listener(listener$callback, event, c(args, list(breaker = self)))
    }
  }
  invisible(NULL)
}

# Reports the transitions the core made since the last report.
breaker_emit_transitions <- function(self, private) {
  tr <- cb_transitions(private$ptr, private$seen_transition)
  n <- length(tr$seq)
  if (n == 0L) return(invisible(NULL))
  private$seen_transition <- tr$seq[[n]]
  for (i in seq_len(n)) {
    for (listener in private$listeners) {
      if (identical(listener$event, "state_change")) {
        call_listener(listener$callback, "state_change",
          list(from = tr$from[[i]], to = tr$to[[i]], breaker = self))
      }
    }
  }
  invisible(NULL)
}

call_listener <- function(callback, event, args) {
  formal_names <- names(formals(callback))
  if (!"..." %in% formal_names) args <- args[names(args) %in% formal_names]
  tryCatch(
    do.call(callback, args),
    error = function(e) warning(listener_warning(event, e))
  )
}
