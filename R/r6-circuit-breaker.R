# The CircuitBreaker R6 class and circuit_breaker(). This file's name sorts
# after execute.R, async.R and events.R, whose functions become the class's
# methods when R6Class() runs at install time.

#' Circuit breakers
#'
#' @description
#' A circuit breaker guards calls to a dependency (an HTTP service, a
#' database). While the dependency works, calls go through (`CLOSED`). After
#' `failure_threshold` consecutive failures the breaker opens (`OPEN`): calls
#' are not made and `execute()` answers at once with the fallback. Once more
#' than `recovery_timeout` seconds have passed, the next call goes through as a
#' probe (`HALF_OPEN`): its success closes the breaker, its failure opens it
#' again.
#'
#' With default arguments a breaker behaves exactly like the `CircuitBreaker`
#' R6 class of the document this package grew from: same states, same
#' `failure_count`, same moment of the `OPEN` to `HALF_OPEN` move (lazily, on
#' the next call once *more than* `recovery_timeout` seconds have passed). The
#' state machine runs in C++; the R object is a thin wrapper around it.
#'
#' `circuit_breaker()` and `CircuitBreaker$new()` take the same arguments and
#' return the same object.
#'
#' @section Rules beyond the seed:
#' * **Failure rate**: with `failure_rate_threshold`, the breaker also opens
#'   when the share of failures among the calls in a sliding window reaches the
#'   threshold, once the window holds at least `minimum_calls` calls. The
#'   window holds the last `window_size` calls (`window_type = "count"`, at most
#'   1024) or the calls of the last `window_size` seconds (`"time"`, kept in 10
#'   buckets). Use `failure_threshold = Inf` to rely on the rate alone.
#' * **Slow calls**: a call taking longer than `slow_call_duration` seconds
#'   (on the breaker's clock) is slow; with `slow_call_rate_threshold`, the
#'   share of slow calls in the window opens the breaker like the failure rate.
#' * **Probes**: `half_open_max_calls` probes are admitted in `HALF_OPEN`; the
#'   breaker closes when that many have succeeded and opens again on the first
#'   failure (or slow probe, when the slow-call rule is on). A probe not settled
#'   within `half_open_max_wait` seconds counts as failed, so a lost probe can
#'   never leave the breaker stuck.
#' * **Backoff**: each consecutive re-opening multiplies the open duration by
#'   `backoff_multiplier`, up to `max_recovery_timeout`; `jitter` shortens each
#'   opening by a random share of up to `jitter` so that many processes do not
#'   probe at once. Closing resets the duration.
#' * **Ramp-up**: for `ramp_up` seconds after closing, only a linearly growing
#'   share of calls is admitted (the others are rejected as if open), so that a
#'   recovering dependency is not hit by the whole backlog at once.
#'
#' @section Outcomes:
#' An error in `request_func` is a failure, unless it inherits from one of the
#' classes in `ignore`, or is an HTTP error (httr2's `httr2_http_*`, httr's
#' `http_*`) for a status not in `failure_statuses`: then it propagates
#' unchanged and counts nowhere. A returned value is a success, unless it is an
#' HTTP response (httr's `response`, httr2's `httr2_response`, the list from
#' `curl::curl_fetch_memory()`) whose status is in `failure_statuses`, or
#' `failure_when(value)` is `TRUE`. A failed value goes to the fallback as the
#' `value` field of a `circuit_breaker_failed_value` condition
#' (`circuit_breaker_http_failure` for a response, which also has `response`
#' and `status`); without a fallback the value itself is returned.
#'
#' @param failure_threshold Consecutive failures that open the breaker: a whole
#'   number of at least 1, or `Inf` to turn this rule off.
#' @param recovery_timeout Seconds the breaker stays open before the next call
#'   may probe (the probe happens once *more than* this has passed).
#' @param failure_rate_threshold `NULL` (off) or a share in (0, 1]: open when
#'   failures / calls in the window reach it.
#' @param window_type `"count"` (the last `window_size` calls) or `"time"`
#'   (the calls of the last `window_size` seconds).
#' @param window_size Calls (count window, 1 to 1024, default 100) or seconds
#'   (time window, default 60). `NULL` for the default.
#' @param minimum_calls Calls the window must hold before the rate rules apply.
#'   `NULL` for the default, 20 (or the window size, if smaller).
#' @param slow_call_duration `NULL` or seconds: calls slower than this are slow.
#' @param slow_call_rate_threshold `NULL` (off) or a share in (0, 1]: open when
#'   slow calls / calls in the window reach it. Needs `slow_call_duration`.
#' @param half_open_max_calls Probes admitted in `HALF_OPEN`, 1 to 32.
#' @param half_open_max_wait `NULL` or seconds after which an unsettled probe
#'   counts as failed.
#' @param backoff_multiplier Factor (at least 1) applied to the open duration
#'   on each consecutive re-opening.
#' @param max_recovery_timeout `NULL` or the longest open duration in seconds
#'   (at least `recovery_timeout`).
#' @param jitter Share (0 to 1) by which each open duration may be randomly
#'   shortened.
#' @param ramp_up Seconds over which calls are let back in after closing; 0 is
#'   off.
#' @param failure_when `NULL` or a function of the request's return value that
#'   returns `TRUE` when the value counts as a failure.
#' @param ignore `NULL` or a character vector of condition classes that count
#'   neither as success nor as failure.
#' @param timeout `NULL` or seconds: the longest an HTTP call made through
#'   [breaker_perform()] or [breaker_fetch()] may take (set on the request or
#'   handle unless it already has a timeout). A timed-out call is a failure.
#' @param failure_statuses HTTP status codes that make a response (or an
#'   httr2/httr HTTP error) a failure. Other statuses are successes (the
#'   downstream answered); HTTP errors raised for them propagate and count
#'   nowhere.
#' @param respect_retry_after If `TRUE`, a 429 or 503 response with a
#'   `Retry-After` header that opens the breaker keeps it open at least that
#'   long, up to `max_recovery_timeout` (one hour when that is `NULL`).
#' @param clock `NULL` (the monotonic system clock) or a clock from
#'   [breaker_manual_clock()].
#' @param name `NULL` or a single string naming the breaker in messages and
#'   metrics.
#' @return A `CircuitBreaker` object.
#'
#' @examples
#' cb <- circuit_breaker(failure_threshold = 2, recovery_timeout = 10)
#' flaky <- function() stop("connection refused")
#' cb$execute(flaky, function() "cached answer")
#' cb$execute(flaky, function() "cached answer")
#' cb$state
#' # Open: the request is not even called.
#' cb$execute(function() stop("not called"), function() "cached answer")
#'
#' # The fallback may take the condition that explains why it was called.
#' cb$execute(flaky, function(cond) class(cond)[1])
#' @export
circuit_breaker <- function() {
  do.call(CircuitBreaker$new, as.list(environment()))
}

#' @rdname circuit_breaker
#' @format NULL
#' @usage NULL
#' @section Methods:
#' * `$execute(request_func, fallback_func = NULL)`: calls `request_func()`
#'   through the breaker. Returns its value, or the fallback's when the call
#'   was rejected or failed. Without a fallback, a rejected call signals a
#'   `circuit_breaker_open` error and a failed call's error propagates
#'   unchanged (after being recorded). `fallback_func` takes no argument, or
#'   one: the condition (the request's error, a `circuit_breaker_open`
#'   condition, or a `circuit_breaker_failed_value` condition).
#' * `$execute_async(request_func, fallback_func = NULL, immediate_fallback = FALSE)`:
#'   the same for a `request_func` that returns a promise (or a plain value);
#'   returns a promise (see [breaker_perform_async()] for `immediate_fallback`).
#' * `$on_success()`, `$on_failure()`: record an outcome by hand, as in the
#'   seed document (a success closes an open breaker).
#' * `$reset()`: back to `CLOSED`, failure count zeroed. `$force_open()`:
#'   reject every call until `$reset()`. `$disable()`: let every call through
#'   and record nothing until `$reset()`.
#' * `$configure(...)`: change arguments (same names as above except `clock`
#'   and `name`); the state is kept.
#' * `$metrics()`: a named list: state, counts, rates, timings.
#' * `$transitions()`: the last 32 state transitions (a data frame: `seq`,
#'   `seconds_ago`, `from`, `to`). `$history()`: calls, failures, slow calls
#'   and rejections in 5-second buckets over the last five minutes. See
#'   [plot.CircuitBreaker()].
#' * `$on(event, callback)`, `$off(id)`: listeners, see [breaker_events].
#'
#' Fields: `state`, `failure_count`, `last_failure_time` (`POSIXct`, or `NULL`
#' before any failure), `failure_threshold`, `recovery_timeout`, `name`,
#' `config`. They are read from the C++ state on each access. Assigning
#' `failure_threshold` or `recovery_timeout` reconfigures the breaker;
#' `state` and `failure_count` are read-only (use the methods).
#' @export
CircuitBreaker <- R6::R6Class("CircuitBreaker",
  cloneable = FALSE,
  public = list(
    #' @description Create a breaker; see [circuit_breaker()] for arguments.
    initialize = function(failure_threshold = 5, recovery_timeout = 30,
                          failure_rate_threshold = NULL, window_type = "count",
                          window_size = NULL, minimum_calls = NULL,
                          slow_call_duration = NULL,
                          slow_call_rate_threshold = NULL,
                          half_open_max_calls = 1, half_open_max_wait = NULL,
                          backoff_multiplier = 1, max_recovery_timeout = NULL,
                          jitter = 0, ramp_up = 0, failure_when = NULL,
                          ignore = NULL, timeout = NULL,
                          failure_statuses = c(408L, 429L, 500:599),
                          respect_retry_after = TRUE, clock = NULL, name = NULL) {
      private$name_ <- check_name(name)
      failure_when <- check_failure_when(failure_when)
      private$ignore <- check_ignore(ignore)
      private$timeout <- check_timeout(timeout)
      private$failure_statuses <- check_failure_statuses(failure_statuses)
      private$respect_retry_after <- check_flag(respect_retry_after, "respect_retry_after")
      core_args <- as.list(environment())[core_argument_names]
      core_args$seed <- if (is.numeric(jitter) && length(jitter) == 1L && isTRUE(jitter > 0)) {
        floor(stats::runif(1) * 2^52)
      }
      private$ptr <- cb_create(core_args, clock_pointer(clock))
      # What execute() reads on every call lives in the methods' shared
      # enclosing environment (beside `self` and `private`), where a method
      # finds it as a plain variable: no `private$` lookup and `$` call.
      private$set_hot("ptr", private$ptr)
      private$set_hot("failure_when", failure_when)
      private$set_hot("listening", FALSE)
      private$clock <- clock
      if (!is.null(name)) registry_add(self)
      invisible(self)
    },

    execute = breaker_execute,
    execute_async = breaker_execute_async,

    on_success = function() {
      cb_note(private$ptr, OUTCOME_SUCCESS)
      if (listening) private$emit_transitions()
      invisible(self)
    },
    on_failure = function() {
      cb_note(private$ptr, OUTCOME_FAILURE)
      if (listening) private$emit_transitions()
      invisible(self)
    },

    reset = function() {
      cb_reset(private$ptr)
      if (listening) private$emit_transitions()
      invisible(self)
    },
    force_open = function() {
      cb_force_open(private$ptr)
      if (listening) private$emit_transitions()
      invisible(self)
    },
    disable = function() {
      cb_disable(private$ptr)
      if (listening) private$emit_transitions()
      invisible(self)
    },

    configure = function(...) {
      changes <- list(...)
      if (length(changes) && (is.null(names(changes)) || any(!nzchar(names(changes))))) {
        abort_bad_argument("...", "named arguments", changes, call = rlang::current_call())
      }
      allowed <- c(core_argument_names, names(r_argument_checks))
      unknown <- setdiff(names(changes), allowed)
      if (length(unknown)) {
        abort_bad_argument(unknown[[1]], paste("one of the breaker's arguments:", toString(allowed)),
          changes[[unknown[[1]]]], call = rlang::current_call())
      }
      # Check everything first, then apply: a rejected change changes nothing.
      r_changes <- changes[intersect(names(changes), names(r_argument_checks))]
      for (arg in names(r_changes)) {
        value <- r_argument_checks[[arg]](changes[[arg]])
        r_changes[arg] <- list(value)
      }
      core_changes <- changes[intersect(names(changes), core_argument_names)]
      if (length(core_changes)) {
        args <- cb_arguments(private$ptr)
        args[names(core_changes)] <- core_changes
        cb_reconfigure(private$ptr, args)
      }
      for (arg in names(r_changes)) {
        if (arg == "failure_when") private$set_hot(arg, r_changes[[arg]]) else private[[arg]] <- r_changes[[arg]]
      }
      invisible(self)
    },

    metrics = function() {
      c(list(name = private$name_ %||% NA_character_), cb_snapshot(private$ptr))
    },

    transitions = function() {
      tr <- cb_transitions(private$ptr, 0)
      data.frame(seq = tr$seq, seconds_ago = tr$seconds_ago, from = tr$from, to = tr$to,
                 stringsAsFactors = FALSE)
    },

    history = function() {
      h <- cb_history(private$ptr)
      data.frame(seconds_ago = h$seconds_ago, calls = h$calls, failures = h$failures,
                 slow_calls = h$slow_calls, rejected = h$rejected,
                 bucket_seconds = rep(h$bucket_seconds, length(h$calls)))
    },

    on = function(event, callback) breaker_on(self, private, event, callback),
    off = function(id) breaker_off(self, private, id),

    format = function(...) format_breaker(self$metrics(), self$config),
    print = function(...) {
      cat(self$format(), sep = "\n")
      invisible(self)
    }
  ),

  active = list(
    state = function(value) {
      if (!missing(value)) {
        abort_read_only("state", "Use `$reset()`, `$force_open()` or `$disable()` to change it.")
      }
      cb_state(private$ptr)
    },
    failure_count = function(value) {
      if (!missing(value)) {
        abort_read_only("failure_count", "Use `$reset()` to zero it.")
      }
      cb_snapshot(private$ptr)$failure_count
    },
    last_failure_time = function(value) {
      if (!missing(value)) {
        abort_read_only("last_failure_time", "It is set when a call fails.")
      }
      ago <- cb_snapshot(private$ptr)$seconds_since_failure
      if (is.na(ago)) NULL else Sys.time() - ago
    },
    failure_threshold = function(value) {
      if (missing(value)) return(cb_arguments(private$ptr)$failure_threshold)
      self$configure(failure_threshold = value)
    },
    recovery_timeout = function(value) {
      if (missing(value)) return(cb_arguments(private$ptr)$recovery_timeout)
      self$configure(recovery_timeout = value)
    },
    name = function(value) {
      if (!missing(value)) abort_read_only("name", "Give the name when creating the breaker.")
      private$name_
    },
    config = function(value) {
      if (!missing(value)) abort_read_only("config", "Use `$configure()` to change it.")
      c(cb_effective_config(private$ptr),
        list(failure_when = failure_when, ignore = private$ignore, timeout = private$timeout,
             failure_statuses = private$failure_statuses,
             respect_retry_after = private$respect_retry_after))
    }
  ),

  private = list(
    ptr = NULL,
    clock = NULL,
    name_ = NULL,
    ignore = NULL,
    timeout = NULL,
    failure_statuses = NULL,
    respect_retry_after = TRUE,
    listeners = list(),
    next_listener_id = 1L,
    seen_transition = 0,

    # Sets one of the variables of the methods' enclosing environment (`ptr`,
    # `failure_when`, `listening`), which methods read as free variables.
    set_hot = function(name, value) {
      assign(name, value, envir = parent.env(environment()))
    },
    is_listening = function() listening,

    release = function(permit) {
      if (.Call(cb_release, private$ptr, permit)) private$emit_transitions()
    },

    # Errors that count nowhere: the classes in `ignore`, and HTTP errors
    # raised for a status that does not mean the downstream is unhealthy.
    is_ignored = function(cond) {
      if (!is.null(private$ignore) && inherits(cond, private$ignore)) return(TRUE)
      status <- http_error_status(cond)
      !is.null(status) && !status %in% private$failure_statuses
    },

    record_error = function(permit, cond, ignored = private$is_ignored(cond)) {
      outcome <- if (ignored) OUTCOME_IGNORED else OUTCOME_FAILURE
      open_for <- if (!ignored && inherits(cond, "httr2_http")) private$open_for(cond$resp) else -1
      if (.Call(cb_record, private$ptr, permit, outcome, open_for)) {
        private$emit(if (ignored) "ignored" else "failure", condition = cond)
      }
    },

    # NULL when the value is a success, else a condition describing the
    # failure (given to the fallback): an HTTP response with a failing status,
    # or a value failure_when() rejects.
    classify_value = function(value) {
      status <- response_status(value)
      if (!is.null(status) && status %in% private$failure_statuses) {
        return(http_failure_condition(value, status, private$name_, private$open_for(value)))
      }
      if (!is.null(failure_when) && isTRUE(failure_when(value))) {
        return(failed_value_condition(value, private$name_))
      }
      NULL
    },

    # Seconds a 429 or 503 response asks callers to stay away (Retry-After),
    # or -1 when it does not say or the breaker is told not to listen.
    open_for = function(response) {
      if (!private$respect_retry_after || is.null(response)) return(-1)
      status <- response_status(response)
      if (is.null(status) || !status %in% c(429L, 503L)) return(-1)
      retry_after_seconds(response_header(response, "retry-after")) %||% -1
    },

    rejected = function(fallback_func) {
      if (listening) {
        private$emit_transitions()
        private$emit("rejected", retry_after = cb_rejection(private$ptr)[[2]])
      }
      if (!is.null(fallback_func) && length(formals(fallback_func)) == 0L) {
        return(fallback_func())
      }
      why <- cb_rejection(private$ptr)
      cond <- open_condition(private$name_, why[[1]], why[[2]])
      if (is.null(fallback_func)) stop(cond)
      fallback_func(cond)
    },

    emit = function(event, ...) breaker_emit(self, private, event, list(...)),
    emit_transitions = function() breaker_emit_transitions(self, private)
  )
)

# Arguments that configure the C++ core (the rest are R-side: failure_when,
# ignore, clock, name).
core_argument_names <- c(
  "failure_threshold", "recovery_timeout", "failure_rate_threshold",
  "window_type", "window_size", "minimum_calls", "slow_call_duration",
  "slow_call_rate_threshold", "half_open_max_calls", "half_open_max_wait",
  "backoff_multiplier", "max_recovery_timeout", "jitter", "ramp_up"
)

# R-side arguments (not the core's) and their checks, for configure().
r_argument_checks <- list(
  failure_when = function(x) check_failure_when(x),
  ignore = function(x) check_ignore(x),
  timeout = function(x) check_timeout(x),
  failure_statuses = function(x) check_failure_statuses(x),
  respect_retry_after = function(x) check_flag(x, "respect_retry_after")
)

check_name <- function(name, call = rlang::caller_env()) {
  if (is.null(name)) return(NULL)
  if (!is.character(name) || length(name) != 1L || is.na(name) || !nzchar(name)) {
    abort_bad_argument("name", "NULL or a single non-empty string", name, call = call)
  }
  name
}

check_failure_when <- function(failure_when, call = rlang::caller_env()) {
  if (!is.null(failure_when) && !is.function(failure_when)) {
    abort_bad_argument("failure_when", "NULL or a function of the returned value", failure_when, call = call)
  }
  failure_when
}

check_ignore <- function(ignore, call = rlang::caller_env()) {
  if (is.null(ignore)) return(NULL)
  if (!is.character(ignore) || length(ignore) == 0L || anyNA(ignore) || !all(nzchar(ignore))) {
    abort_bad_argument("ignore", "NULL or a character vector of condition classes", ignore, call = call)
  }
  ignore
}

# circuit_breaker() takes exactly the arguments of CircuitBreaker$new(),
# written out once, in initialize().
formals(circuit_breaker) <- formals(CircuitBreaker$public_methods$initialize)
