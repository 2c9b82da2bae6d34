#' A clock that moves only when told to
#'
#' Breakers measure time (open durations, slow calls, time windows) on a
#' monotonic clock. Give a breaker a manual clock to test code that uses it
#' without sleeping: time stands still until you call `$advance()`.
#'
#' A manual clock may be shared by several breakers. Saved with `saveRDS()`
#' and read back, a manual clock starts again at 0.
#'
#' @param start Seconds the clock shows at first.
#' @return An object of class `circuit_breaker_manual_clock` with methods
#'   `$now()` (seconds) and `$advance(seconds)` (moves time forward and returns
#'   the new time, invisibly).
#' @examples
#' clock <- breaker_manual_clock()
#' cb <- circuit_breaker(failure_threshold = 1, recovery_timeout = 30, clock = clock)
#' cb$execute(function() stop("down"), function() "fallback")
#' cb$state
#' clock$advance(30)    # exactly 30 s: not yet *more than* the timeout
#' cb$execute(function() "up", function() "fallback")
#' clock$advance(0.001)
#' cb$execute(function() "up", function() "fallback")
#' cb$state
#' @export
breaker_manual_clock <- function(start = 0) {
  ptr <- cb_clock_create(start)
  structure(
    list(
      now = function() cb_clock_now(ptr),
      advance = function(seconds) invisible(cb_clock_advance(ptr, seconds)),
      ptr = ptr
    ),
    class = c("circuit_breaker_manual_clock", "circuit_breaker_clock")
  )
}

#' @export
format.circuit_breaker_manual_clock <- function(x, ...) {
  paste0("<circuit_breaker_manual_clock> at ", format(x$now(), digits = 15), " s")
}

#' @export
print.circuit_breaker_manual_clock <- function(x, ...) {
  cat(format(x, ...), "\n", sep = "")
  invisible(x)
}

# The pointer a breaker keeps for its clock (NULL: the system clock).
clock_pointer <- function(clock, call = rlang::caller_env()) {
  if (is.null(clock)) return(NULL)
  if (!inherits(clock, "circuit_breaker_manual_clock")) {
    abort_bad_argument("clock", "NULL or a clock from `breaker_manual_clock()`", clock, call = call)
  }
  clock$ptr
}
