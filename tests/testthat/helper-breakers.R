# Shared helpers for the tests.

succeed <- function() "ok"
fail <- function() stop("downstream failed")
fallback <- function() "fallback"

# circuit_breaker(...), withr-style: a breaker with a name is removed from
# the registry when `env` (by default the calling test) ends. Tests leave the
# rest of the registry alone.
local_breaker <- function(..., env = parent.frame()) {
  cb <- circuit_breaker(...)
  name <- cb$name
  if (!is.null(name)) withr::defer(breaker_remove(name), envir = env)
  cb
}

# breaker_for(x, ...), withr-style: its breaker (found or created) is removed
# from the registry when `env` ends.
local_breaker_for <- function(x, ..., env = parent.frame()) {
  cb <- breaker_for(x, ...)
  withr::defer(breaker_remove(cb$name), envir = env)
  cb
}

# A breaker on a manual clock, with the clock attached for the test to drive;
# named breakers are removed from the registry when `env` ends.
manual_breaker <- function(..., env = parent.frame()) {
  clock <- breaker_manual_clock()
  cb <- local_breaker(..., clock = clock, env = env)
  list(cb = cb, clock = clock)
}

# Opens `cb` with consecutive failures (the rule of the original R6 class).
trip <- function(cb, n = cb$failure_threshold) {
  for (i in seq_len(n)) cb$execute(fail, fallback)
  invisible(cb)
}
