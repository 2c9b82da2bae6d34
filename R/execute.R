# The hot path: `CircuitBreaker$execute()`. Its body is a method of the R6
# class (see circuit_breaker.R); it lives here with the helpers it needs.
#
# Cost budget (bench/RESULTS.md): about one withCallingHandlers() plus two
# .Call()s. The request runs under a *calling* handler for errors instead of
# tryCatch(): that is about 1.5 us cheaper, lets an unhandled error propagate
# untouched (same condition, same backtrace) when there is no fallback, and
# still unwinds the request's frames before the fallback runs, as tryCatch()
# would (see run_guarded()).

# Outcome codes shared with src/breaker_binding.cpp.
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

# A fallback takes no argument (as in the seed document) or one, which
# receives the condition that explains why it was called.
call_fallback <- function(fallback_func, condition) {
  if (length(formals(fallback_func)) == 0L) fallback_func() else fallback_func(condition)
}

breaker_execute <- function(request_func, fallback_func = NULL) {
  # `ptr`, `listening` and `failure_when` live in the method's enclosing
  # environment (see initialize()): found without `private$`, which costs a
  # lookup and a `$` call.
  permit <- .Call(cb_acquire, ptr, request_func, fallback_func)
  if (is.null(permit)) {
    # Rejected, the fallback takes no argument and nobody listens: no
    # condition object is built (that is the expensive part).
    return(fallback_func())
  }
  if (is.integer(permit)) return(private$rejected(fallback_func))
  if (listening) private$emit_transitions()

  # Settled exactly once: by the error handler, by the success path, or here
  # when the call ends any other way (an interrupt, a restart, an outer
  # handler catching a warning): then the permit is released, counting nothing.
  settled <- FALSE
  on.exit(if (!settled) private$release(permit))

  failure <- NULL
  value <- run_guarded(request_func, function(cond) {
    ignored <- private$is_ignored(cond)
    if (!settled) {
      settled <<- TRUE
      private$record_error(permit, cond, ignored)
    }
    if (is.null(fallback_func) || ignored) return(FALSE)
    failure <<- cond
    TRUE
  })
  if (!is.null(failure)) return(call_fallback(fallback_func, failure))
  if (settled) return(value)  # recovered through a restart after an error

  # HTTP responses (classed, or the plain list curl::curl_fetch_memory()
  # returns) and users' failure_when() rules may turn a value into a failure.
  failed <- if (is.object(value) || is.list(value) || !is.null(failure_when)) {
    private$classify_value(value)
  }
  settled <- TRUE
  if (is.null(failed)) {
    if (.Call(cb_record, ptr, permit, OUTCOME_SUCCESS, -1)) {
      private$emit("success", value = value)
    }
    return(value)
  }
  if (.Call(cb_record, ptr, permit, OUTCOME_FAILURE, failed$open_for %||% -1)) {
    private$emit("failure", condition = failed)
  }
  if (is.null(fallback_func)) value else call_fallback(fallback_func, failed)
}
