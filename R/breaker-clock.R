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

# A shared breaker's times are the store's, not this process's: the host
# store's breakers read the host's monotonic clock (every process of the
# host reads the same one), the fleet's take Redis `TIME` (the store says
# which: store_clock(), store.R). So a manual clock cannot drive one, and
# `clock` must be NULL. Checked before the store is touched, with what was
# given (the binding refuses it too, as a last guard, but sees only the
# clock's pointer).
check_shared_clock <- function(clock, store, call = rlang::caller_env()) {
  if (is.null(clock)) return(invisible())
  reads <- store_clock(store)
  if (is.null(reads)) return(invisible())
  given <- if (inherits(clock, "circuit_breaker_manual_clock")) {
    paste0("a manual clock (", format(clock), ")")
  } else {
    describe_value(clock)
  }
  cli::cli_abort(
    c("{.arg clock} must be `NULL` for a breaker of a {store$kind} store, not {given}.",
      i = paste0("A shared breaker reads ", reads, ", so that every process sharing it agrees on its times."),
      i = "Test with a breaker of this process (no {.arg store}) to drive time with {.fn breaker_manual_clock}."),
    class = c("circuit_breaker_shared_clock", "circuit_breaker_invalid_argument", "circuit_breaker_error"),
    argument = "clock",
    value = clock,
    given = given,
    call = call
  )
}
