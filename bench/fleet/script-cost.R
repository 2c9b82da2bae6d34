# What one busy sync of the fleet store costs Redis, command by command: one
# process, one store, N busy breakers (a call on each every 20 ms, one in
# ten failing at random; a count window that the breakers' calls keep
# full), for `seconds` seconds. From Redis's INFO commandstats (reset at the
# window's start): the SYNC script's calls and Redis time, the commands the
# script itself runs (redis.call()), and the time per breaker reported,
# split into those commands and the rest (the Lua interpreter and the
# calls' own overhead).
#
#   R_LIBS=<library> Rscript bench/fleet/script-cost.R [breakers] [seconds] [window_size]
#
# Defaults: 100 breakers, 5 seconds, window_size 100. The times are
# wall-clock times inside Redis: on a loaded machine they include waiting
# for a CPU. It needs circuitbreaker installed with hiredis, redis-server
# and processx. The redis-server and its files are removed on the way out.

args <- as.numeric(commandArgs(TRUE))
n <- if (length(args) >= 1 && !is.na(args[[1]])) as.integer(args[[1]]) else 100L
seconds <- if (length(args) >= 2 && !is.na(args[[2]])) args[[2]] else 5
window <- if (length(args) >= 3 && !is.na(args[[3]])) as.integer(args[[3]]) else 100L
stopifnot(n >= 1, n <= 5000, seconds >= 1, seconds <= 120, window >= 1)

this_file <- gsub("~+~", " ", sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1]), fixed = TRUE)
# redis_server_start(), then redis_cli():
source(file.path(dirname(this_file), "..", "harness", "redis.R"))
source(file.path(dirname(this_file), "..", "..", "inst", "redis", "redis-cli.R"))
suppressPackageStartupMessages(library(circuitbreaker))
options(circuitbreaker.max_breakers = n + 100)

dir <- tempfile("cb-bench-script-cost-")
dir.create(dir)
server <- NULL
on.exit({
  if (!is.null(server)) server$stop()
  unlink(dir, recursive = TRUE)
}, add = TRUE)
server <- redis_server_start(dir)
store <- breaker_store_redis(server$url, prefix = "script-cost", sync_interval = 0.1, timeout = 0.5)
breakers <- lapply(seq_len(n), function(i) {
  circuit_breaker(name = paste0("b", i), store = store, failure_threshold = Inf,
                  failure_rate_threshold = 0.9, window_size = window)
})
call_all <- function() {
  for (cb in breakers) {
    fail <- stats::runif(1) < 0.1
    cb$execute(function() if (fail) stop("failed") else "ok", function() NULL)
  }
}
# Fill the windows, then measure.
t_fill <- Sys.time()
while (as.numeric(Sys.time() - t_fill, units = "secs") < 2) {
  call_all()
  Sys.sleep(0.02)
}
# Redis's CPU time (INFO cpu), which a busy machine inflates less than
# the wall-clock times of INFO commandstats.
redis_cpu <- function(cli = redis_cli) {
  info <- cli(server$port, c("INFO", "cpu"))
  sum(as.numeric(sub("^[^:]*:", "", grep("^used_cpu_(sys|user):", info, value = TRUE))))
}
redis_cli(server$port, c("CONFIG", "RESETSTAT"))
cpu0 <- redis_cpu()
t0 <- Sys.time()
rounds <- 0L
for (i in seq_len(ceiling(seconds / 0.02) + 1L)) {
  if (as.numeric(Sys.time() - t0, units = "secs") >= seconds) break
  call_all()
  rounds <- rounds + 1L
  Sys.sleep(0.02)
}
stats <- grep("^cmdstat_", redis_cli(server$port, c("INFO", "commandstats")), value = TRUE)
field <- function(line, name) as.numeric(sub(paste0("^.*[:,]", name, "=([0-9.]+).*$"), "\\1", line))
cmd <- sub("^cmdstat_([^:]*):.*$", "\\1", stats)
calls <- stats::setNames(field(stats, "calls"), cmd)
usec <- stats::setNames(field(stats, "usec"), cmd)
inner <- setdiff(cmd, c("evalsha", "ping", "config|resetstat", "info", "script|load", "subscribe", "time"))
# Reports: one HMGET of the breaker's hash per breaker reported
# (fleet/script.hpp; in this version and the ones before it).
reports <- if ("hmget" %in% names(calls)) calls[["hmget"]] else NA_real_
cpu1 <- redis_cpu()
cat(sprintf("circuitbreaker %s (%s); %d breakers, window_size %d; %.1f s, %d rounds of calls\n",
            format(utils::packageVersion("circuitbreaker")), find.package("circuitbreaker"), n, window,
            seconds, rounds))
cat(sprintf("EVALSHA: %d calls, %.0f us each; breakers reported: %d (%.1f per EVALSHA)\n",
            as.integer(calls[["evalsha"]]), usec[["evalsha"]] / calls[["evalsha"]], as.integer(reports),
            reports / calls[["evalsha"]]))
cat(sprintf("per breaker reported: %.1f us of Redis time, %.1f us in its %.1f commands, %.1f us the rest\n",
            usec[["evalsha"]] / reports, sum(usec[inner]) / reports, sum(calls[inner]) / reports,
            (usec[["evalsha"]] - sum(usec[inner])) / reports))
cat(sprintf("Redis CPU (INFO cpu) per breaker reported: %.1f us\n", (cpu1 - cpu0) * 1e6 / reports))
each <- sprintf("%s %.2f (%.2f us)", inner, calls[inner] / reports, usec[inner] / calls[inner])
cat("commands the script ran, per breaker reported:", paste(each, collapse = ", "), "\n")
