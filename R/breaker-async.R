# `$execute_async()`: a call whose request returns a promise, or anything
# promises::as.promise() accepts (a mirai, a future, a class with its own
# as.promise() method).
#
# The permit is taken when the call starts and settled when the promise
# settles. In CLOSED a permit holds nothing, so an abandoned promise costs
# nothing there. A half-open probe holds a slot: unless half_open_max_wait
# says otherwise, an async probe expires after the breaker's `timeout` (or
# `recovery_timeout`) so that a promise that never settles cannot hold the
# breaker in HALF_OPEN (the rule is the core's; R passes `timeout`). A result
# that arrives after the breaker changed state only updates the counters (the
# core's generations). A mirai stopped with mirai::stop_mirai() was
# abandoned, which says nothing about the downstream: its permit is released,
# counting nothing, so that a probe's slot is free at once.
#
# A bulkhead's permit (max_concurrent) is held the same way: until the promise
# settles, or is released when the mirai is cancelled or the request is
# interrupted before it returns. An asynchronous call never waits for a
# permit (max_wait applies to `$execute()` only): waiting would block the
# event loop that the permits' holders need to settle.

#' @include breaker-execute.R
NULL

breaker_execute_async <- function(request_func, fallback_func = NULL, immediate_fallback = FALSE) {
  check_installed("promises", "$execute_async()")
  check_bool(immediate_fallback)
  permit <- .Call(cb_acquire, ptr, request_func, fallback_func, r_setting(core, "timeout") %||% NA_real_)
  if (is.null(permit) || is.double(permit)) {
    # Rejected. The condition and the listeners' "rejected" event describe the
    # breaker now, at the moment of refusal, not when the promise runs.
    answer <- if (is.null(permit)) {
      function() fallback_func()
    } else {
      notify_rejected(core, permit)
      cond <- rejection_condition(core, permit)
      function() {
        if (is.null(fallback_func)) stop(cond)
        call_fallback(fallback_func, cond)
      }
    }
    # With immediate_fallback, the fallback's value itself (or the error,
    # now): plumber answers a plain value synchronously, which costs several
    # times less than a promise (bench/RESULTS.md, the avalanche section).
    if (isTRUE(immediate_fallback)) return(answer())
    return(promises::then(promises::promise_resolve(NULL), function(value) answer()))
  }
  if (is.list(permit)) {
    emit_transitions(core)
    permit <- permit[[1L]]
  }

  value <- NULL
  settle_error <- function(cond) {
    if (is_cancelled_mirai(value)) {
      release_permit(core, permit)
      stop(cond)
    }
    ignored <- is_ignored(core, cond)
    record_error(core, permit, cond, ignored)
    if (is.null(fallback_func) || ignored) stop(cond)
    call_fallback(fallback_func, cond)
  }
  # The request may fail before it returns a promise: that is a failure too.
  # An interrupt (or another condition unwinding) before it returns releases
  # the permit.
  started <- NULL
  on.exit(if (is.null(started)) release_permit(core, permit))
  started <- tryCatch(list(value = request_func()), error = function(e) list(error = e))
  if (!is.null(started$error)) {
    return(promises::then(promises::promise_resolve(NULL), function(value) settle_error(started$error)))
  }
  value <- started$value
  promises::then(
    if (is_promise_able(value)) promises::as.promise(value) else promises::promise_resolve(value),
    onFulfilled = function(value) settle_value(core, permit, value, fallback_func),
    onRejected = settle_error
  )
}

# TRUE for what promises::as.promise() turns into a promise: what
# is.promising() knows (promises, mirai, futures), and any object with an
# as.promise() method of its own, which older promises' is.promising() does
# not consult.
is_promise_able <- function(x) {
  if (!is.object(x)) return(FALSE)
  if (promises::is.promising(x)) return(TRUE)
  ns <- asNamespace("promises")
  for (cl in class(x)) {
    if (!is.null(utils::getS3method("as.promise", cl, optional = TRUE, envir = ns))) return(TRUE)
  }
  FALSE
}

# A mirai that mirai::stop_mirai() cancelled resolves to errorValue 20
# ("operation canceled"); a timed-out one to 5, which is a failure like any
# other error.
MIRAI_CANCELLED <- 20L

is_cancelled_mirai <- function(x) {
  if (!inherits(x, "mirai")) return(FALSE)
  data <- x$data
  inherits(data, "errorValue") && is.integer(data) && identical(data[[1L]], MIRAI_CANCELLED)
}
