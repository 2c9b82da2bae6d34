# Redis for the benchmarks: redis_server_start(), from the repository's
# inst/redis/redis-server.R, the one way the package's tests and benchmarks
# start a redis-server (see that file). Sourced from the repository rather
# than the installed package, so that a benchmark runs the same with any
# version of the package installed. The file is found from this one's path
# (source() keeps it in `ofile`): two folders up, then inst/redis/.
redis_server_file <- local({
  frame <- Find(function(i) identical(sys.function(i), base::source), rev(seq_len(sys.nframe())))
  if (is.null(frame)) stop("source() bench/harness/redis.R from its file")
  file.path(dirname(get("ofile", envir = sys.frame(frame))), "..", "..", "inst", "redis", "redis-server.R")
})
source(redis_server_file, local = environment())

# What a fleet breaker's link says (cb_fleet_info(): mode, syncs,
# sync_failures, key, ...).
fleet_info <- function(cb) circuitbreaker:::cb_fleet_info(environment(cb$execute)$ptr)

# Waits (bounded: `seconds`, polling every 20 ms) until `ok()` holds;
# returns whether it did.
wait_until <- function(ok, seconds) {
  deadline <- Sys.time() + seconds
  repeat {
    if (ok()) return(TRUE)
    if (Sys.time() > deadline) return(FALSE)
    Sys.sleep(0.02)
  }
}
