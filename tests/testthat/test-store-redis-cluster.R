# The fleet store on a Redis Cluster (breaker_store_redis(url = seeds)):
# a real cluster of 3 masters with a replica each on 127.0.0.1
# (inst/redis/redis-cluster.R), real callr processes, a real resharding of
# a busy breaker's slot and a real SIGKILL of a master. Nothing here
# asserts a timing: "returned within 10 s" only detects a hang.

cluster_seeds <- function(cluster, n = 2L) paste0("redis://", cluster$seeds[seq_len(n)], "/0")

cluster_store_args <- function(cluster, ...) {
  utils::modifyList(list(url = cluster_seeds(cluster), sync_interval = 0.05, timeout = 0.2), list(...))
}

# A child process with the store `store_args` makes; runs `body(store, extra)`.
cluster_child <- function(store_args, body, extra = list()) {
  store_child("breaker_store_redis", store_args, NULL, NULL, body, extra)
}


test_that("seed URLs of a cluster share credentials and database 0, or get classed errors naming url", {
  skip_if_not(circuitbreaker:::cb_redis_available(), "built without hiredis")
  expect_snapshot(error = TRUE, {
    breaker_store_redis(c("redis://127.0.0.1:7000/0", "redis://127.0.0.1:7001/1"))
    breaker_store_redis(c("redis://:pw-one@127.0.0.1:7000/0", "redis://:pw-two@127.0.0.1:7001/0"))
    breaker_store_redis(c("redis://127.0.0.1:7000/0", NA))
    breaker_store_redis(character())
    breaker_store_redis(c("redis://127.0.0.1:7000/0", "http://127.0.0.1:7001"))
  })
  err <- tryCatch(breaker_store_redis(c("redis://:hunter2@127.0.0.1:7000/0", "redis://:hunter3@127.0.0.1:7001/0")),
                  error = identity)
  expect_s3_class(err, "circuit_breaker_invalid_argument")
  expect_identical(err$argument, "url")
  expect_false(grepl("hunter", paste(conditionMessage(err), format(err$value))))
  store <- breaker_store_redis(c("redis://:hunter2@127.0.0.1:7000/0", "redis://:hunter2@127.0.0.1:7001/0"))
  expect_false(any(grepl("hunter2", c(format(store), capture.output(print(store), str(store))))))
})

test_that("processes on breakers over every master give exact counts, share a trip and one probe", {
  cluster <- local_redis_cluster()
  store_args <- cluster_store_args(cluster)
  owners <- names_on_every_master(cluster, "span")
  names <- names(owners)

  # Counts: three processes, every breaker.
  counter <- function(store, extra) {
    cbs <- lapply(extra$names, function(n) {
      circuit_breaker(name = n, store = store, failure_threshold = 1e6, recovery_timeout = 30)
    })
    for (cb in cbs) {
      for (i in seq_len(extra$n)) cb$execute(function() if (i %% 10 == 0) stop("down") else "ok", function(e) "fb")
    }
    syncs <- function() circuitbreaker:::cb_fleet_info(cbs[[1]]$.__enclos_env__$core$ptr)$syncs
    done <- syncs()
    extra$wait_until(function() syncs() >= done + 2, timeout = 20, what = "two syncs")
    lapply(cbs, function(cb) cb$metrics()[c("calls", "mode", "topology", "masters")])
  }
  procs <- lapply(1:3, function(i) {
    cluster_child(store_args, counter, list(names = names, n = 20 * i, wait_until = child_wait_until()))
  })
  res <- collect_children(procs)
  for (r in res) {
    expect_true(all(vapply(r, function(m) m$mode, "") == "fleet"))
    expect_true(all(vapply(r, function(m) m$topology, "") == "cluster"))
    expect_true(all(vapply(r, function(m) m$masters, 0) == 3))
  }
  for (name in names) {
    expect_true(wait_until(function() identical(cluster_fleet(cluster, name, "tc"), 120),
                           what = paste("the counts of", name)))
    expect_identical(cluster_fleet(cluster, name, "tf"), 12)
  }

  # Ping and unlink find their node (any seed; the slot's master).
  store <- do.call(breaker_store_redis, store_args)
  expect_true(breaker_store_redis_ping(store))
  for (name in names[1:3]) {
    expect_true(breaker_store_unlink(name, store))
    expect_true(is.na(cluster_fleet(cluster, name, "tc")))
  }
  dead_first <- breaker_store_redis(c("redis://127.0.0.1:1/0", store_args$url), timeout = 0.5)
  expect_true(breaker_store_redis_ping(dead_first))

  # A trip: two failures here, three in another process.
  store <- do.call(breaker_store_redis, store_args)
  trip_name <- "tripper"
  cb <- local_shared_breaker(store, trip_name, fleet_args())
  watcher <- function(store, extra) {
    cb <- circuit_breaker(name = extra$name, store = store, failure_threshold = 5, recovery_timeout = 30)
    file.create(extra$ready)
    extra$wait_until(function() identical(cb$state, "OPEN"), timeout = 20, interval = 0.01, what = "the trip")
    cb$execute(function() "ok", function() "rejected")
  }
  ready <- tempfile()
  child <- cluster_child(store_args, watcher, list(name = trip_name, ready = ready, wait_until = child_wait_until()))
  expect_true(wait_for_file(ready))
  for (i in 1:2) cb$execute(function() stop("down"), function(e) "fb")
  other <- cluster_child(store_args, function(store, extra) {
    cb <- circuit_breaker(name = extra$name, store = store, failure_threshold = 5, recovery_timeout = 30)
    for (i in 1:3) cb$execute(function() stop("down"), function(e) "fb")
    extra$wait_until(function() identical(cb$state, "OPEN"), timeout = 20, interval = 0.01, what = "the trip")
  }, list(name = trip_name, wait_until = child_wait_until()))
  res <- collect_children(list(child, other))
  expect_identical(res[[1]], "rejected")
  expect_true(wait_until(function() identical(cb$state, "OPEN")))
  expect_identical(cluster_fleet(cluster, trip_name, "to"), 1)

  m <- cb$metrics()
  expect_identical(m$topology, "cluster")
  expect_identical(m$masters, 3)
  expect_identical(m$master, paste0("127.0.0.1:", cluster$master_of(fleet_key_of("circuitbreaker", trip_name))))
  printed <- capture.output(print(store), print(cb))
  expect_true(any(grepl("  topology: cluster (3 masters)", printed, fixed = TRUE)))
  expect_true(any(grepl(paste0("Redis topology: cluster (3 masters; this breaker's: ", m$master, ")"),
                        printed, fixed = TRUE)))
  status <- circuitbreaker:::web_statuses()
  status <- status[[which(vapply(status, function(s) identical(s$name, trip_name), logical(1)))]]
  expect_identical(status$topology, "cluster")
  expect_identical(status$masters, 3)

  # One probe fleet-wide: five racers call at the same moment, after the
  # open period.
  probe_name <- "oneprobe"
  args <- fleet_args(failure_threshold = 2, recovery_timeout = 1.5, half_open_max_calls = 1)
  race <- local_probe_race(4)
  racer <- function(store, extra) {
    cb <- do.call(circuit_breaker, c(extra$args, list(name = extra$name, store = store)))
    extra$ready_and_wait(extra, timeout = 20)
    extra$race_call(cb, extra)
  }
  # A generous timeout: a lease that times out is a probe on local rules.
  racer_args <- utils::modifyList(store_args, list(timeout = 2))
  procs <- lapply(seq_along(race$readies), function(i) {
    cluster_child(racer_args, racer, race$extra(i, args = args, name = probe_name))
  })
  expect_true(all(vapply(race$readies, wait_for_file, TRUE)))
  pb <- local_shared_breaker(do.call(breaker_store_redis, racer_args), probe_name, args)
  for (i in 1:2) pb$execute(function() stop("down"), function(e) "fb")
  expect_true(wait_until(function() identical(cluster_fleet(cluster, probe_name, "s"), 1)))
  write_start_time(race$start, as.numeric(Sys.time()) + 2.5)
  res <- collect_children(procs)
  expect_identical(sum(vapply(res, function(r) r$probed, TRUE)), 1L)
  expect_true(wait_until(function() identical(cluster_fleet(cluster, probe_name, "s"), 0)))
})

test_that("a resharding of a busy breaker's slot: syncing resumes on the new master, counts exact", {
  cluster <- local_redis_cluster()
  store_args <- cluster_store_args(cluster)
  store <- do.call(breaker_store_redis, store_args)
  masters <- cluster$nodes$port[cluster$nodes$role == "master"]
  cb <- local_shared_breaker(store, "busy", fleet_args(failure_threshold = 1e6))
  quiet <- local_shared_breaker(store, "quiet", fleet_args(failure_threshold = 1e6))
  key <- fleet_key_of("circuitbreaker", "busy")
  slot <- as.integer(cluster$cli(masters[[1]], "CLUSTER", "KEYSLOT", key))
  from <- cluster$master_of(key)
  to <- masters[masters != from][[1]]
  # Another process calls the breaker all along.
  stop_file <- tempfile()
  child <- cluster_child(store_args, function(store, extra) {
    cb <- circuit_breaker(name = "busy", store = store, failure_threshold = 1e6, recovery_timeout = 30)
    n <- 0
    deadline <- Sys.time() + 60
    while (!file.exists(extra$stop) && Sys.time() < deadline) {
      cb$execute(function() "ok", function() "fb")
      n <- n + 1
      Sys.sleep(0.002)
    }
    n
  }, list(stop = stop_file))
  n <- 0
  slowest <- 0
  call <- function() {
    t <- timed(cb$execute(function() "ok", function() "fb"))
    slowest <<- max(slowest, t$seconds)
    n <<- n + 1
  }
  for (i in 1:50) call()
  expect_true(wait_until(function() isTRUE(cluster_fleet(cluster, "busy", "tc") > 0), what = "a first sync"))
  expect_identical(cluster$move_slot(slot, to), from)
  for (i in 1:50) {
    call()
    Sys.sleep(0.005)
  }
  file.create(stop_file)
  child_calls <- collect_children(list(child))[[1]]
  expect_true(wait_until(function() identical(cluster_fleet(cluster, "busy", "tc"), n + child_calls),
                         timeout = 20, what = "every call counted once"))
  expect_identical(cluster$master_of(key), to)
  expect_true(wait_until(function() identical(cb$metrics()$master, paste0("127.0.0.1:", to))))
  expect_identical(cb$metrics()$mode, "fleet")
  expect_identical(quiet$metrics()$mode, "fleet")
  expect_lt(slowest, 10)  # a hang detector, not a timing
})

test_that("a master killed: its replica is promoted and the fleet resumes; no call hangs", {
  cluster <- local_redis_cluster(node_timeout = 1000)
  store_args <- cluster_store_args(cluster)
  store <- do.call(breaker_store_redis, store_args)
  owners <- names_on_every_master(cluster, "fo", per = 1L)
  cbs <- lapply(names(owners), function(n) local_shared_breaker(store, n, fleet_args(failure_threshold = 1e6)))
  names(cbs) <- names(owners)
  counts <- stats::setNames(numeric(length(cbs)), names(cbs))
  for (n in names(cbs)) {
    for (i in 1:5) cbs[[n]]$execute(function() "ok", function() "fb")
    counts[[n]] <- 5
  }
  for (n in names(cbs)) expect_true(wait_until(function() identical(cluster_fleet(cluster, n, "tc"), 5)))
  victim <- names(owners)[[1]]
  old <- owners[[victim]]
  # Replicated before the master dies (replication is asynchronous).
  expect_identical(cluster$cli(old, "WAIT", 1, 5000), "1")

  cluster$kill(old)
  killed_at <- Sys.time()
  # The whole cluster may refuse writes (CLUSTERDOWN) until the promotion.
  moved <- until_master_moves(cbs[[victim]], old, function() {
    slowest <- 0
    for (n in names(cbs)) {
      t <- timed(cbs[[n]]$execute(function() "ok", function() "fb"))
      expect_identical(t$value, "ok")
      counts[[n]] <<- counts[[n]] + 1
      slowest <- max(slowest, t$seconds)
    }
    made <- timed(circuit_breaker(name = "during", store = store, failure_threshold = 5, recovery_timeout = 30))
    breaker_remove("during")
    max(slowest, made$seconds)
  })
  seconds <- as.numeric(difftime(Sys.time(), killed_at, units = "secs"))
  record_topology_timings("cluster-store-resume", c(seconds = seconds))
  expect_false(is.na(moved$promoted))
  expect_lt(moved$slowest, 10)  # a hang detector, not a timing
  promoted <- cluster$master_of(fleet_key_of("circuitbreaker", victim))
  expect_identical(quietly_alone(cbs[[victim]]$metrics())$master, paste0("127.0.0.1:", promoted))
  # Every call made, before and during the failover, counted once.
  for (n in names(cbs)) {
    expect_true(wait_until(function() identical(cluster_fleet(cluster, n, "tc"), counts[[n]]), timeout = 20,
                           what = paste("the counts of", n)))
  }
  expect_true(all(vapply(cbs, function(cb) identical(quietly_alone(cb$metrics())$mode, "fleet"), TRUE)))
})

test_that("a slot in migration: ASK is followed with ASKING on the node named; the counts wait, then land once", {
  cluster <- local_redis_cluster()
  store <- do.call(breaker_store_redis, cluster_store_args(cluster))
  masters <- cluster$nodes$port[cluster$nodes$role == "master"]
  cb <- local_shared_breaker(store, "asked", fleet_args(failure_threshold = 1e6))
  key <- fleet_key_of("circuitbreaker", "asked")
  slot <- as.integer(cluster$cli(masters[[1]], "CLUSTER", "KEYSLOT", key))
  from <- cluster$master_of(key)
  to <- masters[masters != from][[1]]
  for (i in 1:10) cb$execute(function() "ok", function() "fb")
  expect_true(wait_until(function() identical(cluster_fleet(cluster, "asked", "tc"), 10)))

  # Half a resharding: the slot's keys are on `to`, but the slot is still
  # `from`'s, which answers ASK for them.
  from_id <- cluster$cli(from, "CLUSTER", "MYID")
  to_id <- cluster$cli(to, "CLUSTER", "MYID")
  cluster$cli(to, "CLUSTER", "SETSLOT", slot, "IMPORTING", from_id)
  cluster$cli(from, "CLUSTER", "SETSLOT", slot, "MIGRATING", to_id)
  keys <- cluster$cli(from, "CLUSTER", "GETKEYSINSLOT", slot, 100L)
  keys <- keys[nzchar(keys)]
  expect_gt(length(keys), 0L)
  cluster$cli(from, "MIGRATE", "127.0.0.1", to, "", 0L, 5000L, "KEYS", keys)
  for (port in masters) cluster$cli(port, "CONFIG", "RESETSTAT")
  asking <- function() {
    line <- grep("^cmdstat_asking:", cluster$cli(to, "INFO", "commandstats"), value = TRUE)
    if (length(line) == 0L) 0 else as.numeric(sub("^[^:]*:calls=([0-9]+),.*$", "\\1", line))
  }
  slowest <- 0
  quietly_alone({
    for (i in 1:10) {
      t <- timed(cb$execute(function() "ok", function() "fb"))
      slowest <- max(slowest, t$seconds)
    }
    # The store follows the ASK (Redis may then answer TRYAGAIN for a
    # script whose keys are split between the two nodes: the report waits).
    expect_true(wait_until(function() asking() > 0, what = "an ASKING on the importing node"))
  })
  expect_identical(quietly_alone(cb$metrics())$master, paste0("127.0.0.1:", from))  # ASK keeps the map

  # The resharding ends: the reports go to the new master, counted once.
  for (port in unique(c(to, from, masters))) cluster$cli(port, "CLUSTER", "SETSLOT", slot, "NODE", to_id)
  expect_true(wait_until(function() identical(cluster_fleet(cluster, "asked", "tc"), 20), timeout = 20,
                         what = "every call counted once"))
  expect_true(wait_until(function() identical(quietly_alone(cb$metrics())$master, paste0("127.0.0.1:", to))))
  expect_true(wait_until(function() identical(quietly_alone(cb$metrics())$mode, "fleet")))
  expect_lt(slowest, 10)  # a hang detector, not a timing
})
