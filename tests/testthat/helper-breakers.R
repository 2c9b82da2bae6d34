# Shared helpers for the tests.

succeed <- function() "ok"
fail <- function() stop("downstream failed")
fallback <- function() "fallback"

# A breaker on a manual clock, with the clock attached for the test to drive.
manual_breaker <- function(...) {
  clock <- breaker_manual_clock()
  cb <- circuit_breaker(..., clock = clock)
  list(cb = cb, clock = clock)
}

# Opens `cb` with consecutive failures (seed rule).
trip <- function(cb, n = cb$failure_threshold) {
  for (i in seq_len(n)) cb$execute(fail, fallback)
  invisible(cb)
}
