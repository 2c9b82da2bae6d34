# The hot path, `$execute()`, and the steps it shares with `$execute_async()`:
# classifying and settling an outcome, answering a rejected call.
#
# Cost budget (bench/RESULTS.md): about one withCallingHandlers() plus two
# .Call()s. The request runs under a *calling* handler for errors instead of
# tryCatch(): that is about 1.5 us cheaper, lets an unhandled error propagate
# untouched (same condition, same backtrace) when there is no fallback, and
# still unwinds the request's frames before the fallback runs, as tryCatch()
# would (see run_guarded()).
#
# What cb_acquire() returns (src/breaker_binding.cpp):
#   a raw vector       a permit: make the call
#   a list(permit)     a permit, and listeners to tell of the transition the
#                      admission may have made (OPEN -> HALF_OPEN)
#   NULL               rejected; the fallback takes no argument and nobody
#                      listens, so no condition object is needed (the
#                      expensive part of a rejection)
#   a double vector    rejected: state, retry_after, reason, listening and
#                      max_wait (read by name: REJECTION_* below), the
#                      breaker as it was at the moment of refusal; max_wait
#                      > 0: the bulkhead was full and the call may wait that
#                      long for a permit (R/bulkhead.R)

#' @include conditions.R http-outcome.R bulkhead.R
NULL

# The binding's codes, read by name when the package loads
# (install_core_codes()): the core's outcomes, which cb_record() and cb_note()
# check, and the positions of a rejection vector's fields. Constants in the
# namespace, so that the hot path looks up a symbol and nothing more.
OUTCOME_SUCCESS <- NULL
OUTCOME_FAILURE <- NULL
OUTCOME_IGNORED <- NULL
REJECTION_STATE <- NULL
REJECTION_RETRY_AFTER <- NULL
REJECTION_REASON <- NULL
REJECTION_LISTENING <- NULL
REJECTION_MAX_WAIT <- NULL
REJECTION_FULL <- NULL

# Sets the constants above from cb_codes(); a name the binding no longer
# gives fails here, when the package loads, not in a call.
install_core_codes <- function(ns, codes) {
  code <- function(kind, name) {
    value <- codes[[kind]][name]
    if (is.na(value)) stop("the binding gives no ", kind, " code named ", name, call. = FALSE)
    unname(value)
  }
  ns$OUTCOME_SUCCESS <- code("outcome", "success")
  ns$OUTCOME_FAILURE <- code("outcome", "failure")
  ns$OUTCOME_IGNORED <- code("outcome", "ignored")
  ns$REJECTION_STATE <- code("rejection_field", "state")
  ns$REJECTION_RETRY_AFTER <- code("rejection_field", "retry_after")
  ns$REJECTION_REASON <- code("rejection_field", "reason")
  ns$REJECTION_LISTENING <- code("rejection_field", "listening")
  ns$REJECTION_MAX_WAIT <- code("rejection_field", "max_wait")
  # A reason as the rejection vector holds it (a double).
  ns$REJECTION_FULL <- as.double(code("rejection", "full"))
  invisible(ns)
}

# Runs request_func(). On an error, on_error(condition) is called while the
# error is being signalled; if it returns TRUE, run_guarded() returns NULL at
# once (unwinding the request's frames and running their on.exit code);
# otherwise the error continues to propagate as if nothing had seen it.
run_guarded <- function(request_func, on_error) {
  # `return(NULL)` is a promise evaluated in this frame: forcing it from the
  # handler returns from run_guarded(), the same mechanism tryCatch() uses.
  run_guarded_until(request_func, on_error, return(NULL))
}

run_guarded_until <- function(request_func, on_error, exit) {
  withCallingHandlers(
    request_func(),
    error = function(cond) if (on_error(cond)) exit
  )
}

# `ptr` and `core` are found in the method's enclosing environment (see
# CircuitBreaker's initialize()).
breaker_execute <- function(request_func, fallback_func = NULL) {
  permit <- .Call(cb_acquire, ptr, request_func, fallback_func, NULL)
  if (is.null(permit)) return(fallback_func())
  if (is.double(permit)) {
    if (permit[[REJECTION_MAX_WAIT]] > 0) permit <- wait_for_permit(ptr, permit, request_func, NULL)
    if (is.double(permit)) return(answer_rejected(core, permit, fallback_func))
  }
  if (is.list(permit)) {
    emit_transitions(core)
    permit <- permit[[1L]]
  }

  # Settled exactly once (which also gives back a bulkhead permit): by the error handler, by the success path, or here
  # when the call ends any other way (an interrupt, a restart, an outer
  # handler catching a warning): then the permit is released, counting nothing.
  settled <- FALSE
  on.exit(if (!settled) release_permit(core, permit))

  failure <- NULL
  value <- run_guarded(request_func, function(cond) {
    ignored <- is_ignored(core, cond)
    if (!settled) {
      settled <<- TRUE
      record_error(core, permit, cond, ignored)
    }
    if (is.null(fallback_func) || ignored) return(FALSE)
    failure <<- cond
    TRUE
  })
  if (!is.null(failure)) return(call_fallback(fallback_func, failure))
  if (settled) return(value)  # recovered through a restart after an error
  settled <- TRUE
  # The common case without a function call: a plain value, and no
  # failure_when, is a success (classify_value()'s first test; two calls
  # would add a fifth to the cost of the CLOSED path).
  if (!is.object(value) && !is.list(value) && is.null(.subset2(core, "failure_when"))) {
    if (.Call(cb_record, ptr, permit, OUTCOME_SUCCESS, -1)) emit(core, "success", value = value)
    return(value)
  }
  settle_value(core, permit, value, fallback_func)
}

# Records a returned value (a success, unless classify_value() says it is a
# failure) and returns what the caller gets: the value, or the fallback's.
settle_value <- function(core, permit, value, fallback_func) {
  failed <- classify_value(core, value)
  if (is.null(failed)) {
    if (.Call(cb_record, core$ptr, permit, OUTCOME_SUCCESS, -1)) emit(core, "success", value = value)
    return(value)
  }
  if (.Call(cb_record, core$ptr, permit, OUTCOME_FAILURE, failed$open_for %||% -1)) {
    emit(core, "failure", condition = failed)
  }
  if (is.null(fallback_func)) value else call_fallback(fallback_func, failed)
}

# Records an error: a failure, or nothing but `ignored` when is_ignored().
record_error <- function(core, permit, cond, ignored = is_ignored(core, cond)) {
  outcome <- if (ignored) OUTCOME_IGNORED else OUTCOME_FAILURE
  open_for <- if (!ignored && inherits(cond, "httr2_http")) retry_after_hint(core, cond$resp) else -1
  if (.Call(cb_record, core$ptr, permit, outcome, open_for)) {
    emit(core, if (ignored) "ignored" else "failure", condition = cond)
  }
}

release_permit <- function(core, permit) {
  if (.Call(cb_release, core$ptr, permit)) emit_transitions(core)
}

# Errors that count nowhere: those `ignore` names (classes, or a predicate),
# and HTTP errors raised for a status that does not mean the downstream is
# unhealthy (a 404).
is_ignored <- function(core, cond) {
  ignore <- core$ignore  # NULL, its default, when absent (r_setting())
  if (is.function(ignore)) {
    if (ignore_predicate(ignore, cond)) return(TRUE)
  } else if (!is.null(ignore) && inherits(cond, ignore)) {
    return(TRUE)
  }
  status <- http_error_status(cond)
  !is.null(status) && !status %in% r_setting(core, "failure_statuses")
}

# A predicate that fails does not change the outcome (the call counts as a
# failure) and is reported as a warning.
ignore_predicate <- function(ignore, cond) {
  tryCatch(isTRUE(ignore(cond)), error = function(e) {
    warning(predicate_warning(e))
    FALSE
  })
}

# NULL when a returned value is a success, else a condition describing the
# failure (given to the fallback): an HTTP response with a failing status,
# or a value failure_when() rejects.
classify_value <- function(core, value) {
  failure_when <- core$failure_when  # NULL, its default, when absent (r_setting())
  if (!is.object(value) && !is.list(value) && is.null(failure_when)) return(NULL)
  status <- response_status(value)
  if (!is.null(status) && status %in% r_setting(core, "failure_statuses")) {
    return(http_failure_condition(value, status, core$name, retry_after_hint(core, value)))
  }
  if (!is.null(failure_when) && isTRUE(failure_when(value))) {
    return(failed_value_condition(value, core$name))
  }
  NULL
}

# Seconds a 429 or 503 response asks callers to stay away (Retry-After), or -1
# when it does not say or the breaker is told not to listen.
retry_after_hint <- function(core, response) {
  if (!r_setting(core, "respect_retry_after") || is.null(response)) return(-1)
  status <- response_status(response)
  if (is.null(status) || !status %in% c(429L, 503L)) return(-1)
  retry_after_seconds(response_header(response, "retry-after")) %||% -1
}

# The condition for a rejection as cb_acquire() described it.
rejection_condition <- function(core, rejection) {
  open_condition(core$name, the$state_names[[rejection[[REJECTION_STATE]] + 1L]],
                 rejection[[REJECTION_RETRY_AFTER]], rejection_reason(rejection))
}

# The name of a rejection vector's reason ("open", "full", ...).
rejection_reason <- function(rejection) the$rejection_names[[rejection[[REJECTION_REASON]] + 1L]]

# Tells the listeners of a rejection (as it was at the moment of refusal).
notify_rejected <- function(core, rejection) {
  if (rejection[[REJECTION_LISTENING]] != 0) {
    emit_transitions(core)
    emit(core, "rejected", retry_after = rejection[[REJECTION_RETRY_AFTER]],
         reason = rejection_reason(rejection))
  }
}

# What a rejected call returns: the fallback's value, or the
# circuit_breaker_open error when there is no fallback.
answer_rejected <- function(core, rejection, fallback_func) {
  notify_rejected(core, rejection)
  if (!is.null(fallback_func) && !fallback_takes_condition(fallback_func)) return(fallback_func())
  cond <- rejection_condition(core, rejection)
  if (is.null(fallback_func)) stop(cond)
  fallback_func(cond)
}

# A fallback takes no argument (as in the original R6 class) or one, which
# receives the condition that explains why it was called. The binding's rule
# (the same one cb_acquire() applies on the fast path).
fallback_takes_condition <- function(fallback_func) cb_takes_argument(fallback_func)

call_fallback <- function(fallback_func, condition) {
  if (fallback_takes_condition(fallback_func)) fallback_func(condition) else fallback_func()
}
