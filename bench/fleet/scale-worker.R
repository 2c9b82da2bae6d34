# One R process of bench/fleet/scale.R (started as `Rscript scale-worker.R
# <dir>`). It reads <dir>/config.rds, makes one breaker_store_redis() per
# prefix it is given (over TLS when the config has `tls`: the store's `tls`
# argument, and the probe's connection too) (each prefix is a store of its own in this process:
# its own FleetSync, so its own connections and sync thread), and in each
# store `breakers` fleet breakers. It writes <dir>/created.rds (how long
# each store's breakers took to make) and then, until the file <dir>/stop
# appears:
# * "idle": leaves the breakers alone;
# * "busy": calls every breaker once per sync_interval (spread over the
#   interval in slices of `sample_every`), every tenth call of a breaker failing, never
#   two in a row, so that no breaker trips;
# and every `sample_every` seconds reads each store's link (the sync count,
# failures, the time of the last good sync, the mode, sync_lag) and, while
# the file <dir>/probe exists, times one PING on a connection of its own
# (what a round trip waits at Redis then; scale.R creates the file after
# its CPU window, so that these PINGs do not count as the stores' cost).
# At the stop file it writes <dir>/samples.rds (with the TLS version each
# store's link reports, and, when scale.R preloaded round-trips.c, every
# round trip of the process) and ends. It also ends,
# without writing, when its parent (`parent_pid`) is gone or after
# `lifetime` seconds, whatever happens.

args <- commandArgs(TRUE)
dir <- args[[1]]
cfg <- readRDS(file.path(dir, "config.rds"))
# This worker's session is a scheduling group of its own where Linux has
# autogroups: without the group's niceness, the process's would not keep
# it from taking Redis's CPU (scale.R, --worker-nice).
if (!is.null(cfg$worker_nice) && cfg$worker_nice > 0 && file.exists("/proc/self/autogroup")) {
  try(writeLines(format(cfg$worker_nice), "/proc/self/autogroup"), silent = TRUE)
}
suppressPackageStartupMessages(library(circuitbreaker))
now <- function() as.numeric(Sys.time())
deadline <- now() + cfg$lifetime
parent_alive <- function() file.exists(file.path("/proc", cfg$parent_pid))
keep_going <- function() now() < deadline && parent_alive() && !file.exists(file.path(dir, "stop"))
options(circuitbreaker.max_breakers = length(cfg$prefixes) * cfg$breakers + 100)

# The link of fleet breaker `cb` (its store's sync thread in this process):
# the package's cb_fleet_info() (as the tests' helper-wait.R reads it), or
# what $metrics() shows when a version reads it otherwise. Numeric fields
# only, plus the mode (1 fleet, 0 local).
link_of <- function(cb) {
  info <- tryCatch(circuitbreaker:::cb_fleet_info(cb$.__enclos_env__$core$ptr), error = function(e) NULL)
  if (is.null(info)) {
    m <- cb$metrics()
    info <- list(mode = m$mode, sync_lag = m$sync_lag, last_sync = as.numeric(m$last_sync))
  }
  numeric <- info[vapply(info, function(x) is.numeric(x) && length(x) == 1L, TRUE)]
  c(unlist(numeric), fleet = as.numeric(identical(info$mode, "fleet")))
}

# 1. The stores and their breakers; the threads of the process before and
# after (each store's sync thread is one more).
tasks <- function() length(list.files("/proc/self/task"))
threads_before <- tasks()
stores <- lapply(cfg$prefixes, function(p) {
  # `tls` only when given: a version of the package before TLS has no such argument.
  if (is.null(cfg$tls)) {
    breaker_store_redis(cfg$url, prefix = p, sync_interval = cfg$sync_interval, timeout = cfg$timeout)
  } else {
    breaker_store_redis(cfg$url, prefix = p, sync_interval = cfg$sync_interval, timeout = cfg$timeout,
                        tls = cfg$tls)
  }
})
breakers <- vector("list", length(stores))
created <- data.frame(prefix = cfg$prefixes, seconds = NA_real_, errors = 0L)
warmed <- circuit_breaker(failure_threshold = 3)  # R compiles the call path before anything is timed
for (i in 1:5) warmed$execute(function() if (i > 2) stop("x") else 1, function() NULL)
for (s in seq_along(stores)) {
  t0 <- now()
  made <- vector("list", cfg$breakers)
  for (b in seq_len(cfg$breakers)) {
    if (b %% 100L == 0L && !keep_going()) quit(save = "no", status = 1)
    made[[b]] <- tryCatch(
      circuit_breaker(name = sprintf("w%d-s%d-b%05d", cfg$worker, s, b), store = stores[[s]],
                      failure_threshold = 5, recovery_timeout = 30),
      error = function(e) {
        created$errors[[s]] <<- created$errors[[s]] + 1L
        NULL
      }
    )
  }
  breakers[[s]] <- Filter(Negate(is.null), made)
  created$seconds[[s]] <- now() - t0
}
rm(made)
created$threads_added <- tasks() - threads_before
saveRDS(created, file.path(dir, "created.tmp"))
file.rename(file.path(dir, "created.tmp"), file.path(dir, "created.rds"))

# The R thread alone gets --r-nice (scale.R says why): the sync threads,
# made with the stores, keep the niceness the process started with. On
# Linux, setpriority() of the process id is that of its main thread only.
if (!is.null(cfg$r_nice) && cfg$r_nice > tools::psnice(Sys.getpid())) {
  tools::psnice(Sys.getpid(), cfg$r_nice)
}

# 2. Idle or busy until told to stop; samples all along.
probe <- tryCatch(if (is.null(cfg$tls)) {
  circuitbreaker:::cb_redis_connect(cfg$url, 1)
} else {
  circuitbreaker:::cb_redis_connect(cfg$url, 1, cfg$tls)
}, error = function(e) NULL)
ping <- function() {
  if (is.null(probe)) return(NA_real_)
  t0 <- now()
  ok <- tryCatch(identical(as.character(circuitbreaker:::cb_redis_call(probe, "PING")), "PONG"),
                 error = function(e) FALSE)
  if (ok) now() - t0 else NA_real_
}
firsts <- lapply(breakers, function(bs) if (length(bs)) bs[[1]] else NULL)
busy <- identical(cfg$kind, "busy")
all_breakers <- unlist(breakers, recursive = FALSE)
calls <- 0
slices <- max(1L, round(cfg$sync_interval / cfg$sample_every))
slice_of <- rep_len(seq_len(slices), length(all_breakers))
counts <- integer(length(all_breakers))
fail_every <- 10L
samples <- list()
pings <- list()
max_loops <- ceiling(cfg$lifetime / cfg$sample_every) + 1L
tick <- now()
for (loop in seq_len(max_loops)) {
  if (!keep_going()) break
  if (busy) {
    slice <- (loop - 1L) %% slices + 1L
    for (k in which(slice_of == slice)) {
      counts[[k]] <- counts[[k]] + 1L
      fail <- (counts[[k]] + k) %% fail_every == 0L
      all_breakers[[k]]$execute(function() if (fail) stop("the downstream failed") else "ok", function() NULL)
    }
    calls <- calls + sum(slice_of == slice)
  }
  t <- now()
  for (s in seq_along(firsts)) {
    if (!is.null(firsts[[s]])) samples[[length(samples) + 1L]] <- c(at = t, store = s, link_of(firsts[[s]]))
  }
  probing <- file.exists(file.path(dir, "probe"))
  pings[[length(pings) + 1L]] <- c(at = now(), took = if (probing) ping() else NA_real_, calls = calls,
                                   probing = probing)
  tick <- tick + cfg$sample_every
  wait <- tick - now()
  if (wait > 0) Sys.sleep(wait) else tick <- now()
}
if (file.exists(file.path(dir, "stop"))) {
  fields <- unique(unlist(lapply(samples, names)))
  rows <- do.call(rbind, lapply(samples, function(x) x[fields]))
  colnames(rows) <- fields
  # The TLS version of each store's link ("off" for plain TCP; NA where the
  # version reports none).
  link_tls <- vapply(firsts, function(cb) {
    if (is.null(cb)) return(NA_character_)
    tls <- tryCatch(circuitbreaker:::cb_fleet_info(cb$.__enclos_env__$core$ptr)$tls, error = function(e) NULL)
    if (is.null(tls) || !length(tls)) NA_character_ else as.character(tls)
  }, "")
  out <- list(samples = as.data.frame(rows), pings = as.data.frame(do.call(rbind, pings)), calls = calls,
              pid = Sys.getpid(), tls = link_tls)
  # Every round trip to Redis of this process (round-trips.c, in
  # LD_PRELOAD when scale.R could compile it).
  shim <- Sys.getenv("CB_ROUND_TRIPS_SO")
  if (nzchar(shim)) {
    tsv <- file.path(dir, "round-trips.tsv")
    dyn.load(shim)
    .C("cb_round_trips_dump", tsv)
    out$round_trips <- utils::read.delim(tsv, colClasses = c(name = "character"))
  }
  saveRDS(out, file.path(dir, "samples.tmp"))
  file.rename(file.path(dir, "samples.tmp"), file.path(dir, "samples.rds"))
}
