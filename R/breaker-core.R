# One breaker's R-side state, in one place: its `core` environment.
#
#   ptr                   the external pointer to the C++ state machine (which
#                         owns every rule, the counts and the listening flag)
#   name                  NULL or the registry name
#   watching              TRUE while a shared breaker's listeners are
#                         polled through later (breaker-events.R)
#   failure_when, ignore, timeout, failure_statuses, respect_retry_after
#                         the R-side arguments (r_arguments below), each
#                         present only when it differs from its default: a
#                         registered breaker should cost a few KB, and each
#                         binding is 56 bytes (read them with r_setting())
#   listeners, next_listener_id, seen_transition
#                         listeners (breaker-events.R); created on first $on()
#   reporter              NULL, or the OpenTelemetry reporting (otel.R), which
#                         hears events as listeners do (breaker-events.R)
#   store                 the store the breaker was made with, which answers
#                         for itself (store.R); absent for the process
#                         store (read it with core_store())
#   health_scheduled, health_running
#                         the health check's loop (breaker-health.R)
#   view                  a weak reference to the R6 object (breaker_view())
#   used                  registry recency (registry.R)
#
# The R6 object (breaker-class.R) is a view of a core; the registry keeps
# cores. Environments are used because the state is shared and mutable: the
# view, the registry and the listeners all see the same one.

#' @include checks.R http-outcome.R store.R store-process.R store-host.R store-redis.R otel.R
#' @include breaker-health.R
NULL

# The C++ core's arguments (names from its argument table, fetched once).
core_argument_names <- function() the$core_argument_names

# The arguments the R layer owns (they say how R values and conditions become
# outcomes; the core never sees them), with their defaults and checks.
r_arguments <- list(
  failure_when = list(
    default = NULL,
    check = function(x, call) {
      check_function(x, "failure_when", allow_null = TRUE, what = "a function of the returned value",
                     call = call)
    }
  ),
  ignore = list(
    default = NULL,
    check = function(x, call) check_ignore(x, call = call)
  ),
  timeout = list(
    default = NULL,
    check = function(x, call) {
      check_number_decimal(x, "timeout", min = 0, max = 1e6, min_exclusive = TRUE, allow_null = TRUE,
                           must = "NULL or a number of seconds in (0, 1e6]", call = call)
    }
  ),
  failure_statuses = list(
    default = quote(c(408L, 429L, 500:599)),
    check = function(x, call) {
      x <- check_integers(x, "failure_statuses", min = 100, max = 599, call = call,
                          must = "a vector of HTTP status codes (whole numbers from 100 to 599)")
      # Breakers with the default share one vector (a registered breaker
      # should cost a few KB, and this one is 400 bytes).
      if (identical(x, default_failure_statuses)) default_failure_statuses else x
    }
  ),
  respect_retry_after = list(
    default = TRUE,
    check = function(x, call) check_bool(x, "respect_retry_after", call = call)
  ),
  health_check = list(
    default = NULL,
    check = function(x, call) check_health_check(x, call = call)
  )
)

default_failure_statuses <- c(408L, 429L, 500:599)

# Each R-side argument's default value (evaluated once).
r_defaults <- lapply(r_arguments, function(a) eval(a$default))

# An R-side argument of a breaker: its own value, or the default.
r_setting <- function(core, name) {
  get0(name, envir = core, inherits = FALSE, ifnotfound = r_defaults[[name]])
}

set_r_setting <- function(core, name, value) {
  if (identical(value, r_defaults[[name]])) {
    if (exists(name, envir = core, inherits = FALSE)) rm(list = name, envir = core)
  } else {
    assign(name, value, envir = core)
  }
}

check_ignore <- function(x, call = rlang::caller_env()) {
  if (is.null(x) || is.function(x)) return(x)
  if (!is.character(x) || length(x) == 0L || anyNA(x) || !all(nzchar(x))) {
    abort_bad_argument("ignore", "NULL, a character vector of condition classes, or a predicate function",
                       x, call = call)
  }
  x
}

# A new core from the arguments of circuit_breaker(). Everything is checked
# before the C++ breaker is made, so a bad argument leaves nothing behind.
new_breaker_core <- function(args, call) {
  core <- new.env(parent = emptyenv(), hash = FALSE)
  core$name <- check_string(args$name, "name", allow_null = TRUE, call = call)
  if (!is.null(core$name)) cb_check_name(core$name, shared = FALSE)
  for (arg in names(r_arguments)) set_r_setting(core, arg, r_arguments[[arg]]$check(args[[arg]], call))
  store <- check_store(args$store, call = call) %||% process_store
  check_shared_clock(args$clock, store, call = call)
  segment <- store_location(store, core$name, call = call)
  core$ptr <- cb_create(args[core_argument_names()], clock_pointer(args$clock, call = call), store$kind, segment)
  if (!identical(store, process_store)) core$store <- store
  store_link_news(store)
  otel_attach(core)  # nothing at all unless OpenTelemetry is on (otel.R)
  health_start(core)
  core
}

# $configure(): every change is checked before any is applied, so a rejected
# change changes nothing. The C++ core merges its arguments into the ones in
# effect, validates them and applies them (reseeding jitter) in one step.
breaker_configure <- function(core, changes, call) {
  if (length(changes) && (is.null(names(changes)) || !all(nzchar(names(changes))))) {
    abort_bad_argument("...", "named arguments", changes, call = call)
  }
  allowed <- c(core_argument_names(), names(r_arguments))
  unknown <- setdiff(names(changes), allowed)
  if (length(unknown)) {
    abort_bad_argument(unknown[[1]], paste("one of the breaker's arguments:", toString(allowed)),
                       changes[[unknown[[1]]]], call = call)
  }
  r_changes <- changes[intersect(names(changes), names(r_arguments))]
  for (arg in names(r_changes)) r_changes[arg] <- list(r_arguments[[arg]]$check(r_changes[[arg]], call))
  core_changes <- changes[intersect(names(changes), core_argument_names())]
  if (length(core_changes)) cb_reconfigure(core$ptr, core_changes)
  for (arg in names(r_changes)) set_r_setting(core, arg, r_changes[[arg]])
  if ("health_check" %in% names(r_changes)) health_start(core)
  invisible(core)
}

# $config: every argument in effect (the core's with defaults filled in).
breaker_config <- function(core) {
  c(cb_effective_config(core$ptr),
    lapply(stats::setNames(nm = names(r_arguments)), r_setting, core = core))
}

# The store a breaker was made with (store.R).
core_store <- function(core) core$store %||% process_store

breaker_metrics <- function(core) {
  store <- core_store(core)
  m <- c(list(name = core$name %||% NA_character_, store = cb_store_kind(core$ptr)), cb_snapshot(core$ptr),
         store_metrics(store, core$ptr))
  store_link_news(store)
  m
}

breaker_transitions <- function(core) {
  tr <- cb_transitions(core$ptr, 0)
  data.frame(seq = tr$seq, seconds_ago = tr$seconds_ago, from = tr$from, to = tr$to,
             reason = tr$reason, stringsAsFactors = FALSE)
}

breaker_history <- function(core) {
  h <- cb_history(core$ptr)
  data.frame(seconds_ago = h$seconds_ago, calls = h$calls, failures = h$failures,
             slow_calls = h$slow_calls, rejected = h$rejected,
             bucket_seconds = rep(h$bucket_seconds, length(h$calls)))
}

# Values the binding hands out once per session: names of the core's
# arguments, states and rejection reasons (filled in by .onLoad()).
the <- new.env(parent = emptyenv())
