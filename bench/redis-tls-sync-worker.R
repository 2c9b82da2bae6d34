# The child process of bench/redis-tls.R's part 3 (started as `Rscript
# redis-tls-sync-worker.R <dir>`, with bench/fleet/round-trips.c in
# LD_PRELOAD): it reads <dir>/config.rds and holds four fleet stores at once,
# each with its own prefix, so its own sync thread: plain and TLS (the same
# `tls` for the TLS one as the parent's store), each "busy" (`breakers`
# breakers, every one called once every 20 ms: every sync carries counts)
# and "idle" (one breaker, never called: every sync is a PING). Each
# store's sync thread is the thread that its first breaker added. Once
# every link is in mode "fleet" (at most 10 s) and one more second has
# passed, it calls the busy breakers for `seconds`, then writes
# <dir>/result.rds: every round trip of the process (round-trips.c's
# table), each store's thread ids, the window, the TLS version of each
# link, each store's sync failures in the window, the CPU seconds per second
# of its R thread and of each sync thread, and the calls made. It ends
# without writing when its parent is gone or after `lifetime` seconds.
args <- commandArgs(TRUE)
dir <- args[[1]]
cfg <- readRDS(file.path(dir, "config.rds"))
suppressPackageStartupMessages(library(circuitbreaker))
now <- function() as.numeric(Sys.time())
deadline <- now() + cfg$lifetime
keep_going <- function() now() < deadline && file.exists(file.path("/proc", cfg$parent_pid))
ticks <- as.numeric(system2("getconf", "CLK_TCK", stdout = TRUE))
thread_cpu <- function(tids) {
  sum(vapply(file.path("/proc/self/task", tids, "stat"), function(path) {
    line <- tryCatch(readLines(path, n = 1L, warn = FALSE), error = function(e) "")
    if (!length(line) || !nzchar(line)) return(0)
    sum(as.numeric(strsplit(sub("^.*\\) ", "", line), " ", fixed = TRUE)[[1]][12:13])) / ticks
  }, 0))
}
threads <- function() list.files("/proc/self/task")
info <- function(cb) circuitbreaker:::cb_fleet_info(cb$.__enclos_env__$core$ptr)

kinds <- c(plain_busy = "plain", tls_busy = "tls", plain_idle = "plain", tls_idle = "tls")
stores <- list()
breakers <- list()
tids <- list()
for (s in names(kinds)) {
  kind <- kinds[[s]]
  stores[[s]] <- if (kind == "tls") {
    breaker_store_redis(cfg$urls[["tls"]], prefix = paste0("sync-", s), sync_interval = cfg$sync_interval,
                        timeout = cfg$timeout, tls = cfg$tls)
  } else {
    breaker_store_redis(cfg$urls[["plain"]], prefix = paste0("sync-", s), sync_interval = cfg$sync_interval,
                        timeout = cfg$timeout)
  }
  n <- if (endsWith(s, "busy")) cfg$breakers else 1L
  before <- threads()
  first <- circuit_breaker(name = paste0(s, "-1"), store = stores[[s]])
  tids[[s]] <- setdiff(threads(), before)
  breakers[[s]] <- c(list(first), lapply(seq_len(n - 1L), function(i) {
    circuit_breaker(name = sprintf("%s-%d", s, i + 1L), store = stores[[s]])
  }))
}
linked <- function() all(vapply(breakers, function(bs) identical(bs[[1]]$metrics()$mode, "fleet"), TRUE))
for (i in 1:500) {
  if (linked() || !keep_going()) break
  Sys.sleep(0.02)
}
if (!linked()) stop("not every store reached mode \"fleet\" within 10 s")
Sys.sleep(1)
busy <- unlist(breakers[c("plain_busy", "tls_busy")], recursive = FALSE)
for (cb in busy) cb$execute(function() "ok")  # R compiles the call path before the window

failures0 <- vapply(breakers, function(bs) info(bs[[1]])$sync_failures, 0)
cpu0 <- c(main = thread_cpu(Sys.getpid()), vapply(tids, thread_cpu, 0))
t0 <- now()
calls <- 0
tick <- t0
for (loop in seq_len(ceiling(cfg$seconds / 0.02) + 1L)) {
  if (now() >= t0 + cfg$seconds || !keep_going()) break
  for (cb in busy) cb$execute(function() "ok")
  calls <- calls + length(busy)
  tick <- tick + 0.02
  wait <- tick - now()
  if (wait > 0) Sys.sleep(wait) else tick <- now()
}
t1 <- now()
if (!keep_going()) quit(save = "no", status = 1)
cpu <- (c(main = thread_cpu(Sys.getpid()), vapply(tids, thread_cpu, 0)) - cpu0) / (t1 - t0)
failures <- vapply(breakers, function(bs) info(bs[[1]])$sync_failures, 0) - failures0
tls_versions <- vapply(breakers, function(bs) as.character(bs[[1]]$metrics()$tls), "")

shim <- Sys.getenv("CB_ROUND_TRIPS_SO")
tsv <- file.path(dir, "round-trips.tsv")
dyn.load(shim)
.C("cb_round_trips_dump", tsv)
round_trips <- utils::read.delim(tsv, colClasses = c(name = "character"))
saveRDS(list(round_trips = round_trips, tids = tids, t0 = t0, t1 = t1, tls_versions = tls_versions,
             failures = failures, cpu = cpu, calls = calls, breakers = cfg$breakers, pid = Sys.getpid()),
        file.path(dir, "result.tmp"))
file.rename(file.path(dir, "result.tmp"), file.path(dir, "result.rds"))
