# One R process of bench/redis-tls-reconnect.R (started as `Rscript
# redis-tls-reconnect-worker.R <dir>`). It reads <dir>/config.rds and makes
# one breaker_store_redis() per prefix it is given (each a store of its own:
# its own sync thread and connections; over TLS when the config has `tls`)
# with one breaker each. Once every breaker's $metrics()$mode is "fleet"
# it writes <dir>/ready, and then, every 10 ms until the file <dir>/stop
# appears, calls each breaker once (cb$execute(function() "ok"), each call
# timed), calls an in-process breaker the same way (the control: how long a
# call that never involves Redis takes in this process at that moment), and
# reads each breaker's $metrics() (mode and last_error), keeping every
# change of mode and of the link's last error with the time of the read.
# Every 0.1 s it writes <dir>/status (atomically): the
# time, how many breakers are in mode "fleet" now, and for each the time it
# last turned "local" (NA if never), which the driver waits on. At the stop
# file it writes <dir>/result.rds: every call's start and duration (and the
# control's), the mode changes, the last errors, and the stores' sync counts and failures. It also ends, without
# writing, when its parent (`parent_pid`) is gone or after `lifetime`
# seconds, whatever happens.
args <- commandArgs(TRUE)
dir <- args[[1]]
cfg <- readRDS(file.path(dir, "config.rds"))
suppressPackageStartupMessages(library(circuitbreaker))
now <- function() as.numeric(Sys.time())
deadline <- now() + cfg$lifetime
parent_alive <- function() file.exists(file.path("/proc", cfg$parent_pid))
keep_going <- function() now() < deadline && parent_alive() && !file.exists(file.path(dir, "stop"))
write_atomic <- function(lines, name) {
  tmp <- file.path(dir, paste0(name, ".tmp"))
  writeLines(lines, tmp)
  file.rename(tmp, file.path(dir, name))
}

breakers <- lapply(seq_along(cfg$prefixes), function(i) {
  store <- breaker_store_redis(cfg$url, prefix = cfg$prefixes[[i]], sync_interval = cfg$sync_interval,
                               timeout = cfg$timeout, tls = cfg$tls)
  circuit_breaker(name = sprintf("reconnect-%d", i), store = store)
})
n <- length(breakers)
mode_of <- function(cb) {
  m <- cb$metrics()$mode
  if (is.character(m) && length(m) == 1L && !is.na(m)) m else "unknown"
}
# The mode and the link's last error, from one $metrics().
link_of <- function(cb) {
  m <- cb$metrics()
  mode <- if (is.character(m$mode) && length(m$mode) == 1L && !is.na(m$mode)) m$mode else "unknown"
  error <- if (is.character(m$last_error) && length(m$last_error) == 1L && !is.na(m$last_error)) m$last_error else ""
  c(mode, error)
}
for (i in 1:1000) {  # at most 20 s
  if (all(vapply(breakers, mode_of, "") == "fleet") || !keep_going()) break
  Sys.sleep(0.02)
}
if (!all(vapply(breakers, mode_of, "") == "fleet")) stop("not every store reached mode \"fleet\" within 20 s")
for (i in 1:200) for (cb in breakers) cb$execute(function() "ok")  # R compiles the call path first
write_atomic(format(now(), digits = 15), "ready")

capacity <- ceiling(cfg$lifetime / 0.01) * n
call_at <- numeric(capacity)
call_took <- numeric(capacity)
call_store <- integer(capacity)
calls <- 0L
control <- circuit_breaker(name = "reconnect-control")
for (i in 1:200) control$execute(function() "ok")
control_at <- numeric(capacity %/% n)
control_took <- numeric(capacity %/% n)
control_calls <- 0L
mode <- vapply(breakers, mode_of, "")
error <- rep("", n)
changes <- list()
errors <- list()
last_local <- rep(NA_real_, n)
next_status <- 0
tick <- now()
for (loop in seq_len(ceiling(cfg$lifetime / 0.01) + 1L)) {
  if (!keep_going()) break
  for (k in seq_len(n)) {
    t0 <- now()
    breakers[[k]]$execute(function() "ok")
    t1 <- now()
    if (calls < capacity) {
      calls <- calls + 1L
      call_at[[calls]] <- t0
      call_took[[calls]] <- t1 - t0
      call_store[[calls]] <- k
    }
  }
  # The control: an in-process breaker, timed the same way. A long call of
  # its own is this process waiting for a core, not the store.
  t0 <- now()
  control$execute(function() "ok")
  t1 <- now()
  if (control_calls < length(control_at)) {
    control_calls <- control_calls + 1L
    control_at[[control_calls]] <- t0
    control_took[[control_calls]] <- t1 - t0
  }
  for (k in seq_len(n)) {
    link <- link_of(breakers[[k]])
    m <- link[[1]]
    t <- now()  # after the read: a change is never stamped before it happened
    if (!identical(link[[2]], error[[k]])) {
      errors[[length(errors) + 1L]] <- data.frame(store = k, at = t, error = link[[2]])
      error[[k]] <- link[[2]]
    }
    if (!identical(m, mode[[k]])) {
      changes[[length(changes) + 1L]] <- data.frame(store = k, at = t, from = mode[[k]], to = m)
      mode[[k]] <- m
      if (m == "local") last_local[[k]] <- t
    }
  }
  if (t >= next_status) {
    write_atomic(c(format(t, digits = 15), sum(mode == "fleet"),
                   paste(format(last_local, digits = 15), collapse = " ")), "status")
    next_status <- t + 0.1
  }
  tick <- tick + 0.01
  wait <- tick - now()
  if (wait > 0) Sys.sleep(wait) else tick <- now()
}
if (file.exists(file.path(dir, "stop"))) {
  info <- lapply(breakers, function(cb) circuitbreaker:::cb_fleet_info(cb$.__enclos_env__$core$ptr))
  out <- list(calls = data.frame(at = call_at[seq_len(calls)], took = call_took[seq_len(calls)],
                                 store = call_store[seq_len(calls)]),
              control = data.frame(at = control_at[seq_len(control_calls)],
                                   took = control_took[seq_len(control_calls)]),
              changes = if (length(changes)) do.call(rbind, changes) else
                data.frame(store = integer(), at = numeric(), from = character(), to = character()),
              errors = if (length(errors)) do.call(rbind, errors) else
                data.frame(store = integer(), at = numeric(), error = character()),
              syncs = vapply(info, function(x) as.numeric(x$syncs), 0),
              sync_failures = vapply(info, function(x) as.numeric(x$sync_failures), 0),
              tls = vapply(info, function(x) as.character(x$tls), ""),
              prefixes = cfg$prefixes, pid = Sys.getpid())
  saveRDS(out, file.path(dir, "result.tmp"))
  file.rename(file.path(dir, "result.tmp"), file.path(dir, "result.rds"))
}
