# One R process of bench/fleet/run.R, on a simulated host (run.R starts it
# with `ip netns exec <host> Rscript worker.R <dir>`, or directly on
# 127.0.0.1 without root). It makes the Redis store from <dir>/config.rds,
# then runs jobs in order: <dir>/job-<n>.rds holds list(job = name, args),
# it writes <dir>/started-<n> when it begins one and <dir>/out-<n>.rds with
# list(ok, value or error) when it ends. It stops at the file <dir>/stop, or
# after `lifetime` seconds whatever happens. Times it reports are
# as.numeric(Sys.time()): CLOCK_REALTIME, the same in every namespace of
# the machine, so run.R compares them across processes.

args <- commandArgs(TRUE)
dir <- args[[1]]
cfg <- readRDS(file.path(dir, "config.rds"))
suppressPackageStartupMessages(library(circuitbreaker))
store <- breaker_store_redis(cfg$url, prefix = cfg$prefix, sync_interval = cfg$sync_interval,
                             timeout = cfg$timeout)
# This script's path (Rscript passes it as --file=), to find bench/harness/.
this_file <- gsub("~+~", " ", sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1]), fixed = TRUE)
source(file.path(dirname(this_file), "..", "harness", "clock.R"))  # now(), the wall clock

# Breakers by name: fleet-shared (the Redis store), or this process's own
# (`shared = FALSE`), with `failure_threshold` and a recovery timeout long
# enough that no probe goes out during a run.
breakers <- new.env(parent = emptyenv())
breaker <- function(name, shared = TRUE, failure_threshold = 5) {
  if (!exists(name, envir = breakers, inherits = FALSE)) {
    args <- list(name = name, failure_threshold = failure_threshold, recovery_timeout = 30)
    if (shared) args$store <- store
    assign(name, do.call(circuit_breaker, args), envir = breakers)
  }
  get(name, envir = breakers, inherits = FALSE)
}

# One call through `cb` to a downstream that answers (or fails, `fail`);
# TRUE when the call was made, FALSE when the breaker rejected it.
call_once <- function(cb, fail = FALSE) {
  ran <- FALSE
  cb$execute(function() {
    ran <<- TRUE
    if (fail) stop("the downstream is down")
    "ok"
  }, function() NULL)
  ran
}

jobs <- list(
  # `n` PINGs on a connection of its own: the round trip to Redis, seconds.
  ping = function(a) {
    conn <- circuitbreaker:::cb_redis_connect(cfg$url, 1)
    took <- numeric(a$n)
    for (i in seq_len(a$n)) {
      t0 <- now()
      circuitbreaker:::cb_redis_call(conn, "PING")
      took[[i]] <- now() - t0
    }
    took
  },

  # Makes the breaker (a fleet breaker registers with one round trip) and
  # waits (at most 10 s) for its first sync. First a few calls through a
  # breaker of this process alone, so that R has compiled the call path
  # before it is timed (a fresh process's first calls are slow).
  prepare = function(a) {
    scratch <- circuit_breaker(failure_threshold = 3)
    for (i in 1:5) call_once(scratch, fail = i > 2)
    cb <- breaker(a$name, a$shared, a$failure_threshold)
    if (!isTRUE(a$shared)) return("process")
    for (i in 1:1000) {
      if (identical(cb$metrics()$mode, "fleet")) break
      Sys.sleep(0.01)
    }
    cb$metrics()$mode
  },

  # After `delay` s, fails until the breaker opens (at most 100 calls): the
  # time it opened.
  trip = function(a) {
    cb <- breaker(a$name)
    Sys.sleep(a$delay)
    for (i in 1:100) {
      call_once(cb, fail = TRUE)
      if (identical(cb$state, "OPEN")) return(list(at = now(), calls = i))
    }
    list(at = NA_real_, calls = 100L)
  },

  # Calls (that would succeed) every `gap` s until one is rejected, within
  # `seconds`: the time of the first rejection, or NA.
  wait_reject = function(a) {
    cb <- breaker(a$name)
    deadline <- now() + a$seconds
    for (i in seq_len(ceiling(a$seconds / a$gap) + 1L)) {
      if (!call_once(cb)) return(now())
      if (now() > deadline) break
      Sys.sleep(a$gap)
    }
    NA_real_
  },

  reset = function(a) {
    breaker(a$name)$reset()
    TRUE
  },

  # Waits (at most `seconds`) until the breaker is CLOSED (without calls).
  wait_closed = function(a) {
    cb <- breaker(a$name)
    deadline <- now() + a$seconds
    for (i in seq_len(ceiling(a$seconds / 0.005) + 1L)) {
      if (identical(cb$state, "CLOSED")) return(TRUE)
      if (now() > deadline) break
      Sys.sleep(0.005)
    }
    FALSE
  },

  # From `start` (a shared time), one call every `period` s to a dead
  # downstream for `seconds`, on schedule (a late call does not make the
  # next one early). Returns how many calls reached the downstream, the
  # time of the last one, and of the first rejection (the breaker opened),
  # and the time of the last sync before the start.
  dead_loop = function(a) {
    cb <- breaker(a$name, a$shared, a$failure_threshold)
    hits <- 0L
    last_hit <- first_reject <- NA_real_
    wait <- a$start - now() - 0.01
    if (wait > 0) Sys.sleep(wait)
    # When this process last synced, just before the start: its sync phase.
    synced <- if (isTRUE(a$shared)) as.numeric(cb$metrics()$last_sync) else NA_real_
    for (k in seq_len(ceiling(a$seconds / a$period))) {
      wait <- a$start + (k - 1) * a$period - now()
      if (wait > 0) Sys.sleep(wait)
      if (call_once(cb, fail = TRUE)) {
        hits <- hits + 1L
        last_hit <- now()
      } else if (is.na(first_reject)) {
        first_reject <- now()
      }
    }
    list(hits = hits, last_hit = last_hit, first_reject = first_reject, state = cb$state, synced = synced)
  }
)

file.create(file.path(dir, "ready"))
n <- 0L
deadline <- now() + cfg$lifetime
for (i in seq_len(cfg$lifetime * 400)) {
  if (now() > deadline || file.exists(file.path(dir, "stop"))) break
  job_file <- file.path(dir, sprintf("job-%d.rds", n + 1L))
  if (!file.exists(job_file)) {
    Sys.sleep(0.0025)
    next
  }
  n <- n + 1L
  job <- readRDS(job_file)
  file.create(file.path(dir, sprintf("started-%d", n)))
  res <- tryCatch(list(ok = TRUE, value = jobs[[job$job]](job$args)),
                  error = function(e) list(ok = FALSE, error = conditionMessage(e)))
  saveRDS(res, file.path(dir, "out.tmp"))
  file.rename(file.path(dir, "out.tmp"), file.path(dir, sprintf("out-%d.rds", n)))
}
