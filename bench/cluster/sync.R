# What a sync of the fleet store costs a Redis Cluster (3 masters with a
# replica each, inst/redis/redis-cluster.R, on 127.0.0.1), and how long one
# takes:
#   1. commands per sync (INFO commandstats of the 3 masters, reset, then
#      5 s of one store with sync_interval 0.1 s; divided by the store's
#      syncs): N idle breakers, for N = 1 and 100, then 100 busy ones (a
#      call on every breaker every 0.1 s, every tenth failing);
#   2. one sync's round trip with 100 busy breakers over the 3 masters,
#      timed by bench/cluster/sync_round_trip.cpp (the store's transport
#      without R), 50 syncs.
#
#   R_LIBS=<library with circuitbreaker> Rscript bench/cluster/sync.R
# (from the repository root; needs redis-server, redis-cli, processx, g++
# and hiredis's headers).
this_file <- gsub("~+~", " ", sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1]),
                  fixed = TRUE)
root <- normalizePath(file.path(dirname(this_file), "..", ".."))
topology <- new.env()
for (f in c("redis-server.R", "redis-cli.R", "redis-cluster.R")) {
  sys.source(file.path(root, "inst", "redis", f), envir = topology, keep.source = FALSE)
}
suppressMessages(library(circuitbreaker))
dir <- tempfile("cb-bench-cluster-")
dir.create(dir)
cluster <- topology$redis_cluster_start(dir)
on.exit({
  cluster$stop()
  unlink(dir, recursive = TRUE)
}, add = TRUE)
masters <- cluster$nodes$port[cluster$nodes$role == "master"]
url <- paste0("redis://", cluster$seeds[[1]], "/0")

commandstats <- function() {
  out <- list()
  for (port in masters) {
    lines <- cluster$cli(port, "INFO", "commandstats")
    for (l in grep("^cmdstat_", lines, value = TRUE)) {
      name <- sub("^cmdstat_([^:]+):.*$", "\\1", l)
      calls <- as.numeric(sub("^[^:]*:calls=([0-9]+),.*$", "\\1", l))
      out[[name]] <- (if (is.null(out[[name]])) 0 else out[[name]]) + calls
    }
  }
  unlist(out)
}

measure <- function(n, busy, seconds = 5) {
  prefix <- sprintf("bench-%d-%s", n, if (busy) "busy" else "idle")
  store <- breaker_store_redis(url, prefix = prefix, sync_interval = 0.1, timeout = 0.1)
  cbs <- lapply(seq_len(n), function(i) {
    circuit_breaker(name = paste0("b", i), store = store, failure_threshold = 1e6, recovery_timeout = 30)
  })
  Sys.sleep(1.5)  # registrations and the first reads done
  for (port in masters) cluster$cli(port, "CONFIG", "RESETSTAT")
  syncs0 <- circuitbreaker:::cb_fleet_store_info(circuitbreaker:::fleet_store_spec(store))$syncs
  end <- Sys.time() + seconds
  k <- 0
  while (Sys.time() < end) {
    if (busy) {
      k <- k + 1
      for (cb in cbs) cb$execute(function() if (k %% 10 == 0) stop("down") else "ok", function(e) "fb")
    }
    Sys.sleep(0.1)
  }
  syncs <- circuitbreaker:::cb_fleet_store_info(circuitbreaker:::fleet_store_spec(store))$syncs - syncs0
  stats <- commandstats()
  stats <- stats[setdiff(names(stats), c("info", "config|resetstat", "config", "cluster|info", "cluster|nodes"))]
  # The store's sync thread ends with its last breaker: gone before the
  # next measure, which would count its PINGs too.
  for (i in seq_along(cbs)) breaker_remove(paste0("b", i))
  rm(cbs)
  gc()
  Sys.sleep(0.5)
  cat(sprintf("%4d %s breakers: %d syncs; per sync: %s\n", n, if (busy) "busy" else "idle", syncs,
              paste(sprintf("%s %.2f", names(stats), stats / syncs), collapse = ", ")))
}

cat("Commands per sync on the 3 masters (INFO commandstats, summed):\n")
measure(1, FALSE)
measure(100, FALSE)
measure(100, TRUE)

cat("\nOne sync, 100 busy breakers (bench/cluster/sync_round_trip.cpp):\n")
exe <- file.path(dir, "sync_round_trip")
cflags <- system2("pkg-config", c("--cflags", "hiredis"), stdout = TRUE)
status <- system2("g++", c("-std=c++17", "-O2", "-I", file.path(root, "inst", "include"),
                           "-DCIRCUITBREAKER_HAVE_HIREDIS", cflags,
                           file.path(root, "bench", "cluster", "sync_round_trip.cpp"), "-o", exe,
                           "-lhiredis", "-pthread"))
stopifnot(status == 0)
system2(exe, c(cluster$seeds[[1]], "100", "50"))
