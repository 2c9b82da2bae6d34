# The Redis topologies that the fleet store's tests and benchmarks run on
# (inst/redis/redis-cluster.R, inst/redis/redis-sentinel.R): they start,
# serve, fail over when a master is killed, and leave no process behind.
# Set CB_TOPOLOGY_TIMINGS to a file name to have the start and failover
# times written there (record_topology_timings()).

# Every process of a topology is gone: its processx handle says so and, on
# Linux, /proc has no entry for its PID.
expect_all_gone <- function(servers) {
  for (server in servers) {
    expect_false(server$process$is_alive())
    if (dir.exists("/proc/self")) expect_false(dir.exists(file.path("/proc", server$pid)))
  }
}

test_that("a cluster of 3 masters with a replica each serves keys and promotes a replica when a master dies", {
  cluster <- local_redis_cluster(node_timeout = 1000)
  record_topology_timings("cluster-create", cluster$timings)
  nodes <- cluster$nodes
  expect_identical(nrow(nodes), 6L)
  expect_identical(sum(nodes$role == "master"), 3L)
  masters <- nodes$port[nodes$role == "master"]
  # One replica per master.
  expect_setequal(nodes$master_port[nodes$role == "replica"], masters)
  expect_true(all(vapply(nodes$port, cluster$state, character(1)) == "ok"))

  # Every key of a fleet breaker hashes to one slot (its hash tag), as the
  # cluster itself computes it.
  key <- fleet_key_of("circuitbreaker", "api")
  slots <- vapply(c(key, paste0(key, c(":b", ":p:0", ":p:15"))),
                  function(k) cluster$cli(masters[[1]], "CLUSTER", "KEYSLOT", k), character(1))
  expect_length(unique(slots), 1L)

  # A key set through any node lands on the master that serves its slot.
  expect_identical(cluster$cli(nodes$port[[6]], "SET", key, "v1", cluster = TRUE), "OK")
  owner <- cluster$master_of(key)
  expect_true(owner %in% masters)
  expect_identical(cluster$cli(owner, "GET", key), "v1")
  # Replicated before the master dies (replication is asynchronous).
  expect_identical(cluster$cli(owner, "WAIT", 1, 5000), "1")

  cluster$kill(owner)
  promoted <- cluster$wait_failover(owner, timeout = 30)
  record_topology_timings("cluster-failover", c(seconds = attr(promoted, "seconds")))
  expect_false(is.na(promoted))
  promoted <- as.integer(promoted)  # without its "seconds"
  expect_identical(promoted, nodes$port[nodes$master_port %in% owner])
  expect_identical(cluster$role(promoted), "master")
  expect_identical(cluster$master_of(key), promoted)
  expect_identical(cluster$cli(masters[masters != owner][[1]], "GET", key, cluster = TRUE), "v1")

  cluster$stop()
  expect_all_gone(cluster$servers)
})

test_that("a slot moved to another master takes its keys, and its old master answers MOVED", {
  cluster <- local_redis_cluster()
  masters <- cluster$nodes$port[cluster$nodes$role == "master"]
  key <- fleet_key_of("circuitbreaker", "moved")
  slot <- as.integer(cluster$cli(masters[[1]], "CLUSTER", "KEYSLOT", key))
  expect_identical(cluster$cli(masters[[1]], "SET", key, "v", cluster = TRUE), "OK")
  from <- cluster$master_of(key)
  to <- masters[masters != from][[1]]

  expect_identical(cluster$move_slot(slot, to), from)
  expect_identical(cluster$master_of(key), to)
  expect_identical(cluster$cli(to, "GET", key), "v")
  expect_error(cluster$cli(from, "GET", key), sprintf("MOVED %d 127.0.0.1:%d", slot, to), fixed = TRUE)
  expect_identical(cluster$cli(from, "GET", key, cluster = TRUE), "v")
})

test_that("sentinels with passwords name the master, and the replica after the master dies", {
  sentinel <- local_redis_sentinel(password = "master secret", sentinel_password = "sentinel secret",
                                   quorum = 2, sentinels = 3, down_after = 1000)
  record_topology_timings("sentinel-start", sentinel$timings)
  master <- paste0("127.0.0.1:", sentinel$master$port)
  sentinel_ports <- sentinel$nodes$port[sentinel$nodes$role == "sentinel"]
  expect_length(sentinel_ports, 3L)
  for (port in sentinel_ports) expect_identical(sentinel$master_addr(port), master)
  expect_identical(sentinel$role(sentinel$replica$port), "replica")

  # Neither the servers nor the sentinels answer without their password.
  expect_error(redis_cli(sentinel$master$port, "PING"), "NOAUTH")
  expect_error(redis_cli(sentinel_ports[[1]], c("SENTINEL", "MASTERS")), "NOAUTH")
  # Their configuration files, which hold the passwords, are the owner's only.
  confs <- list.files(dirname(sentinel$sentinels[[1]]$log), "sentinel.conf", full.names = TRUE)
  if (.Platform$OS.type == "unix") expect_identical(format(file.mode(confs)), "600")

  expect_identical(sentinel$cli(sentinel$master$port, "SET", "k", "v"), "OK")
  expect_identical(sentinel$cli(sentinel$master$port, "WAIT", 1, 5000), "1")
  sentinel$kill(sentinel$master$port)
  promoted <- sentinel$wait_failover(sentinel$master$port, timeout = 30)
  record_topology_timings("sentinel-failover", c(seconds = attr(promoted, "seconds")))
  promoted <- as.integer(promoted)  # without its "seconds"
  expect_identical(promoted, as.integer(sentinel$replica$port))
  for (port in sentinel_ports) expect_identical(sentinel$master_addr(port), paste0("127.0.0.1:", promoted))
  expect_identical(sentinel$cli(promoted, "GET", "k"), "v")

  sentinel$stop()
  expect_all_gone(c(list(sentinel$master, sentinel$replica), sentinel$sentinels))
})

test_that("sentinels without passwords start as well", {
  sentinel <- local_redis_sentinel(sentinels = 1, quorum = 1)
  expect_identical(sentinel$master_addr(sentinel$nodes$port[[3]]), paste0("127.0.0.1:", sentinel$master$port))
  expect_identical(redis_cli(sentinel$master$port, "PING"), "PONG")
})
