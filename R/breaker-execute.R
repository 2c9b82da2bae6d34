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
#   a double vector    rejected: c(state, retry_after, reason, listening,
#                      max_wait), the breaker as it was at the moment of
#                      refusal; max_wait > 0: the bulkhead was full and the
#                      call may wait that long for a permit (R/bulkhead.R)

#' @include conditions.R http-outcome.R bulkhead.R
NULL

# Outcome codes of the core's Outcome enum (types.hpp); the binding checks
# that a code is one of them.
OUTCOME_SUCCESS <- 0L
OUTCOME_FAILURE <- 1L
OUTCOME_IGNORED <- 2L

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
    if (permit[[5L]] > 0) permit <- wait_for_permit(ptr, permit, request_func, NULL)
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
  open_condition(core$name, the$state_names[[rejection[[1L]] + 1L]], rejection[[2L]],
                 the$rejection_names[[rejection[[3L]] + 1L]])
}

# Tells the listeners of a rejection (as it was at the moment of refusal).
notify_rejected <- function(core, rejection) {
  if (rejection[[4L]] != 0) {
    emit_transitions(core)
    emit(core, "rejected", retry_after = rejection[[2L]],
         reason = the$rejection_names[[rejection[[3L]] + 1L]])
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
