# redis_cli(), redis_cluster_start() and redis_sentinel_start(): how the
# tests start a Redis Cluster, or a master and a replica behind sentinels
# (inst/redis/, installed with the package, beside helper-redis.R's
# redis_server_start(), which they use).
for (redis_topology_file in c("redis-cli.R", "redis-cluster.R", "redis-sentinel.R")) {
  redis_topology_path <- system.file("redis", redis_topology_file, package = "circuitbreaker")
  if (nzchar(redis_topology_path)) source(redis_topology_path, local = environment())
}
rm(redis_topology_file, redis_topology_path)

# Skips a test where a topology cannot be started: no redis-server or
# redis-cli, no processx, or a package installed without inst/redis/.
skip_if_no_redis_topologies <- function() {
  skip_on_cran()
  skip_if(!nzchar(Sys.which("redis-server")), "redis-server is not installed")
  skip_if(!nzchar(Sys.which("redis-cli")), "redis-cli is not installed")
  skip_if_not_installed("processx")
  skip_if_not(exists("redis_cluster_start", mode = "function") && exists("redis_server_start", mode = "function"),
              "the package has no inst/redis/redis-cluster.R")
}

# A Redis Cluster for one test (redis_cluster_start(): 3 masters with a
# replica each by default), in a private directory; stopped, and the
# directory removed, when `env` ends.
local_redis_cluster <- function(..., env = parent.frame()) {
  skip_if_no_redis_topologies()
  dir <- tempfile("cb-cluster-")
  dir.create(dir)
  withr::defer(unlink(dir, recursive = TRUE), envir = env)
  cluster <- redis_cluster_start(dir, ...)
  withr::defer(cluster$stop(), envir = env)
  cluster
}

# A master, a replica and sentinels for one test (redis_sentinel_start()),
# in a private directory; stopped, and the directory removed, when `env`
# ends.
local_redis_sentinel <- function(..., env = parent.frame()) {
  skip_if_no_redis_topologies()
  skip_if_not(exists("redis_sentinel_start", mode = "function"), "the package has no inst/redis/redis-sentinel.R")
  dir <- tempfile("cb-sentinel-")
  dir.create(dir)
  withr::defer(unlink(dir, recursive = TRUE), envir = env)
  sentinel <- redis_sentinel_start(dir, ...)
  withr::defer(sentinel$stop(), envir = env)
  sentinel
}

# Appends `seconds` (named figures) to the file CB_TOPOLOGY_TIMINGS names,
# when set: how long a topology took to start or fail over, for whoever
# measures (tests assert no timing).
record_topology_timings <- function(what, seconds) {
  path <- Sys.getenv("CB_TOPOLOGY_TIMINGS")
  if (nzchar(path)) {
    cat(sprintf("%s %s %.3f\n", what, names(seconds), seconds), sep = "", file = path, append = TRUE)
  }
  invisible(seconds)
}

# A field of the fleet state of breaker `name`, read through the cluster
# (redis-cli -c follows the redirect); NA when absent.
cluster_fleet <- function(cluster, name, field) {
  for (port in as.integer(sub("^.*:", "", cluster$seeds))) {
    v <- tryCatch(cluster$cli(port, "EVAL", fleet_read_script(), "1", fleet_key_of("circuitbreaker", name), field,
                              cluster = TRUE),
                  error = function(e) NULL)
    if (!is.null(v)) return(if (length(v) == 0L || !nzchar(v[[1]])) NA_real_ else as.numeric(v[[1]]))
  }
  NA_real_
}

# Names of breakers whose keys are served by every master (`per` each, at
# least), as the cluster itself says (master_of()).
names_on_every_master <- function(cluster, prefix_name, per = 2L) {
  masters <- cluster$nodes$port[cluster$nodes$role == "master"]
  out <- character()
  owners <- integer()
  for (i in seq_len(200L)) {
    name <- paste0(prefix_name, i)
    out <- c(out, name)
    owners <- c(owners, cluster$master_of(fleet_key_of("circuitbreaker", name)))
    if (all(tabulate(match(owners, masters), length(masters)) >= per)) break
  }
  expect_setequal(unique(owners), masters)
  stats::setNames(owners, out)
}

# Elapsed seconds of `expr`, and its value (for hang detectors: tests assert
# no timing).
timed <- function(expr) {
  t0 <- Sys.time()
  value <- expr
  list(value = value, seconds = as.numeric(difftime(Sys.time(), t0, units = "secs")))
}

# While a master fails over: runs `calls()` (which returns the longest time,
# in seconds, that one of its calls took) every 50 ms until fleet breaker
# `cb`'s link is back in mode "fleet" on a master other than 127.0.0.1:`old`,
# for at most `timeout` seconds. The store may be alone meanwhile (the
# warning is expected, not what these tests are about). Returns the master
# it resumed on (NA: it did not) and the slowest call.
until_master_moves <- function(cb, old, calls, timeout = 60) {
  deadline <- Sys.time() + timeout
  slowest <- 0
  promoted <- NA_character_
  quietly_alone({
    while (Sys.time() < deadline) {
      slowest <- max(slowest, calls())
      m <- cb$metrics()
      if (identical(m$mode, "fleet") && !identical(m$master, paste0("127.0.0.1:", old))) {
        promoted <- m$master
        break
      }
      Sys.sleep(0.05)
    }
  })
  list(promoted = promoted, slowest = slowest)
}
