# How long the Redis topologies of the tests take to start and to fail over
# (inst/redis/redis-cluster.R, inst/redis/redis-sentinel.R), on this
# machine: the figures that bound the fleet store's "resumes within" in a
# cluster or behind sentinels.
#
#   Rscript bench/redis-topologies.R      (from the repository root; needs
#                                          redis-server, redis-cli and
#                                          processx; no hiredis, no package)
#
# Environment: CB_TOPO_ROUNDS (3) rounds of each; CB_TOPO_NODE_TIMEOUTS
# ("1000"), comma-separated cluster-node-timeout values in ms for the
# cluster; CB_TOPO_DOWN_AFTER (1000), the sentinels' down-after-milliseconds.
#
# Each cluster round: 3 masters with a replica each (redis-cli --cluster
# create), ready when every node says cluster_state:ok, knows every other
# node and every replica's link is up; then a key's master is SIGKILLed and
# the clock runs until its replica says it is a master and every live node
# says cluster_state:ok again. Each sentinel round: a master, a replica and 3
# sentinels (quorum 2), ready when every sentinel knows both and CKQUORUM
# passes; then the master is SIGKILLed and the clock runs until every
# sentinel names the replica and it says it is a master. Times are wall
# clock, polled every 50 ms with redis-cli (each poll costs a few ms).
this_file <- gsub("~+~", " ", sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1]),
                  fixed = TRUE)
topology <- new.env()
for (f in c("redis-server.R", "redis-cli.R", "redis-cluster.R", "redis-sentinel.R")) {
  sys.source(file.path(dirname(this_file), "..", "inst", "redis", f), envir = topology, keep.source = FALSE)
}
rounds <- as.integer(Sys.getenv("CB_TOPO_ROUNDS", "3"))
node_timeouts <- as.integer(strsplit(Sys.getenv("CB_TOPO_NODE_TIMEOUTS", "1000"), ",", fixed = TRUE)[[1]])
down_after <- as.integer(Sys.getenv("CB_TOPO_DOWN_AFTER", "1000"))

figures <- list()
record <- function(what, seconds) {
  figures[[what]] <<- c(figures[[what]], seconds)
  cat(sprintf("  %-36s %6.2f s\n", what, seconds))
}

for (node_timeout in node_timeouts) {
  for (round in seq_len(rounds)) {
    cat(sprintf("cluster, cluster-node-timeout %d ms, round %d\n", node_timeout, round))
    dir <- tempfile("cb-bench-cluster-")
    dir.create(dir)
    cluster <- topology$redis_cluster_start(dir, node_timeout = node_timeout)
    tryCatch({
      record(sprintf("cluster start (servers) [%d ms]", node_timeout), cluster$timings[["start"]])
      record(sprintf("cluster create (redis-cli) [%d ms]", node_timeout), cluster$timings[["create"]])
      record(sprintf("cluster ready [%d ms]", node_timeout), cluster$timings[["ready"]])
      record(sprintf("cluster total [%d ms]", node_timeout), cluster$timings[["total"]])
      owner <- cluster$master_of("bench-key")
      cluster$kill(owner)
      promoted <- cluster$wait_failover(owner, timeout = 60)
      if (is.na(promoted)) stop("no replica was promoted within 60 s")
      record(sprintf("cluster failover [%d ms]", node_timeout), attr(promoted, "seconds"))
    }, finally = {
      cluster$stop()
      unlink(dir, recursive = TRUE)
    })
  }
}

for (round in seq_len(rounds)) {
  cat(sprintf("sentinel, down-after-milliseconds %d, round %d\n", down_after, round))
  dir <- tempfile("cb-bench-sentinel-")
  dir.create(dir)
  sentinel <- topology$redis_sentinel_start(dir, down_after = down_after)
  tryCatch({
    record("sentinel start (servers)", sentinel$timings[["start"]])
    record("sentinel ready", sentinel$timings[["ready"]])
    record("sentinel total", sentinel$timings[["total"]])
    sentinel$kill(sentinel$master$port)
    promoted <- sentinel$wait_failover(sentinel$master$port, timeout = 60)
    if (is.na(promoted)) stop("the sentinels named no new master within 60 s")
    record(sprintf("sentinel failover [%d ms]", down_after), attr(promoted, "seconds"))
  }, finally = {
    sentinel$stop()
    unlink(dir, recursive = TRUE)
  })
}

cat(sprintf("\n%-36s %8s %8s %8s  (%d rounds)\n", "", "median", "min", "max", rounds))
for (what in names(figures)) {
  x <- figures[[what]]
  cat(sprintf("%-36s %7.2fs %7.2fs %7.2fs\n", what, stats::median(x), min(x), max(x)))
}
