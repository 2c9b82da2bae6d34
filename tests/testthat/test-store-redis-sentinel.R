# The fleet store on a master with a replica behind Redis Sentinel
# (breaker_store_redis(sentinel = , master = )): real servers and sentinels
# on 127.0.0.1 (inst/redis/redis-sentinel.R), real callr processes, a real
# SIGKILL of the master. Nothing here asserts a timing: "returned within
# 10 s" only detects a hang.

sentinel_store <- function(sentinel, ..., url = NULL, sentinel_password = NULL) {
  breaker_store_redis(url, sync_interval = 0.05, timeout = 0.2, sentinel = sentinel$sentinel_addrs,
                      master = sentinel$master_name, sentinel_password = sentinel_password, ...)
}

# A child process with a breaker of a store through `sentinels`; runs
# `body(cb, extra)`.
sentinel_child <- function(store_args, name, args, body, extra = list()) {
  store_child("breaker_store_redis", store_args, name, args, body, extra)
}


test_that("bad Sentinel arguments get classed errors naming them", {
  skip_if_not(circuitbreaker:::cb_redis_available(), "built without hiredis")
  expect_snapshot(error = TRUE, {
    breaker_store_redis(sentinel = 26379)
    breaker_store_redis(sentinel = character())
    breaker_store_redis(sentinel = "127.0.0.1")
    breaker_store_redis(sentinel = c("127.0.0.1:26379", "127.0.0.1:99999"))
    breaker_store_redis(sentinel = "redis://:hunter2@127.0.0.1:26379")
    breaker_store_redis(sentinel = "127.0.0.1:26379", master = "my master")
    breaker_store_redis(sentinel = "127.0.0.1:26379", master = NA)
    breaker_store_redis(sentinel = "127.0.0.1:26379", sentinel_password = "")
    breaker_store_redis(sentinel_password = "hunter2")
  })
  err <- tryCatch(breaker_store_redis(sentinel = "redis://:hunter2@127.0.0.1:26379"), error = identity)
  expect_s3_class(err, "circuit_breaker_invalid_argument")
  expect_identical(err$argument, "sentinel")
  expect_false(grepl("hunter2", conditionMessage(err), fixed = TRUE))
  err <- tryCatch(breaker_store_redis(sentinel_password = "hunter2"), error = identity)
  expect_s3_class(err, "circuit_breaker_invalid_argument")
  expect_false(grepl("hunter2", paste(conditionMessage(err), format(err$value)), fixed = TRUE))
})

test_that("a store with no sentinel reachable, or a wrong master name, runs alone on local rules", {
  skip_if_not(circuitbreaker:::cb_redis_available(), "built without hiredis")
  # Ports 1 and 2: nothing listens there (only root could).
  store <- breaker_store_redis(sentinel = c("127.0.0.1:1", "127.0.0.1:2"), master = "mymaster",
                               sentinel_password = "sentinel secret", timeout = 0.2)
  pinged <- timed(breaker_store_redis_ping(store))
  expect_false(pinged$value)
  expect_lt(pinged$seconds, 10)
  expect_match(attr(pinged$value, "message"), 'no master "mymaster" found', fixed = TRUE)
  expect_no_match(attr(pinged$value, "message"), "sentinel secret")
  w <- NULL
  made <- timed(withCallingHandlers(
    cb <- local_shared_breaker(store, "nosentinel", fleet_args()),
    circuit_breaker_store_alone = function(cnd) {
      w <<- cnd
      invokeRestart("muffleWarning")
    }
  ))
  expect_lt(made$seconds, 10)
  expect_s3_class(w, "circuit_breaker_store_alone")
  expect_match(w$reason, 'no master "mymaster" found', fixed = TRUE)
  expect_no_match(conditionMessage(w), "sentinel secret")
  expect_identical(cb$execute(function() "ok", function() "fb"), "ok")
  m <- quietly_alone(cb$metrics())
  expect_identical(m$mode, "local")
  expect_identical(m$topology, "sentinel")
  expect_true(is.na(m$master))
  expect_match(paste(capture.output(print(store)), collapse = "\n"), "sentinel (no master found yet)", fixed = TRUE)

  # Real sentinels that do not know the name.
  sentinel <- local_redis_sentinel(sentinels = 1, quorum = 1)
  wrong <- breaker_store_redis(sentinel = sentinel$sentinel_addrs, master = "nosuchmaster", timeout = 0.2)
  res <- breaker_store_redis_ping(wrong)
  expect_false(res)
  expect_match(attr(res, "message"), "does not know this master name", fixed = TRUE)
  expect_warning(local_shared_breaker(wrong, "wrongname", fleet_args()), class = "circuit_breaker_store_alone")
  expect_true(breaker_store_redis_ping(sentinel_store(sentinel)))
})

test_that("a fleet store through sentinels shares a trip between processes and hides both passwords", {
  sentinel <- local_redis_sentinel(password = "master secret", sentinel_password = "sentinel secret",
                                   sentinels = 3, quorum = 2)
  url <- "redis://:master%20secret@mymaster/0"  # the host is not used: the sentinels name it
  store_args <- list(url = url, sync_interval = 0.05, timeout = 0.2, sentinel = sentinel$sentinel_addrs,
                     master = sentinel$master_name, sentinel_password = "sentinel secret")
  store <- do.call(breaker_store_redis, store_args)
  expect_true(breaker_store_redis_ping(store))
  cb <- local_shared_breaker(store, "sentineltrip", fleet_args())
  master <- paste0("127.0.0.1:", sentinel$master$port)

  watcher <- function(cb, extra) {
    file.create(extra$ready)
    extra$wait_until(function() identical(cb$state, "OPEN"), timeout = 20, interval = 0.01,
                     what = "the fleet's trip")
    list(result = cb$execute(function() "ok", function() "rejected"), master = cb$metrics()$master)
  }
  ready <- tempfile()
  child <- sentinel_child(store_args, "sentineltrip", fleet_args(), watcher,
                          list(ready = ready, wait_until = child_wait_until()))
  expect_true(wait_for_file(ready))
  other <- sentinel_child(store_args, "sentineltrip", fleet_args(), function(cb, extra) {
    for (i in 1:5) cb$execute(function() stop("down"), function(e) "fb")
    extra$wait_until(function() identical(cb$state, "OPEN"), timeout = 20, interval = 0.01,
                     what = "the fleet's trip")
  }, list(wait_until = child_wait_until()))
  res <- collect_children(list(child, other))
  expect_identical(res[[1]]$result, "rejected")
  expect_identical(res[[1]]$master, master)
  expect_true(wait_until(function() identical(cb$state, "OPEN")))

  m <- cb$metrics()
  expect_identical(m$mode, "fleet")
  expect_identical(m$topology, "sentinel")
  expect_identical(m$master, master)
  status <- circuitbreaker:::web_statuses()
  status <- status[[which(vapply(status, function(s) identical(s$name, "sentineltrip"), logical(1)))]]
  expect_identical(status$topology, "sentinel")
  expect_identical(status$master, master)
  printed <- capture.output(print(store), print(cb))
  expect_true(any(grepl(paste0("  topology: sentinel (master ", master, ")"), printed, fixed = TRUE)))
  expect_true(any(grepl(paste0("  Redis topology: sentinel (master ", master, ")"), printed, fixed = TRUE)))
  listed <- breaker_list()
  expect_identical(listed$master[listed$name == "sentineltrip"], master)
  shown <- c(printed, capture.output(str(store), dput(store), print(m), print(listed), str(status)),
             breaker_prometheus(list(cb)), format(store))
  # (The store's field `secret` holds them out of sight: look for the words.)
  expect_false(any(grepl("(master|sentinel)( |%20)secret", shown)))
})

test_that("the master killed: the store follows the promotion, keeps the state, and no call hangs", {
  sentinel <- local_redis_sentinel(sentinels = 3, quorum = 2, down_after = 1000)
  store_args <- list(url = NULL, sync_interval = 0.05, timeout = 0.2, sentinel = sentinel$sentinel_addrs,
                     master = sentinel$master_name)
  store <- do.call(breaker_store_redis, store_args)
  cb <- local_shared_breaker(store, "failover", fleet_args(recovery_timeout = 120))
  busy <- local_shared_breaker(store, "busy", fleet_args())
  for (i in 1:5) cb$execute(function() stop("down"), function(e) "fb")
  expect_identical(cb$state, "OPEN")
  key <- fleet_key_of("circuitbreaker", "failover")
  old <- sentinel$master$port
  expect_true(wait_until(function() identical(sentinel$cli(old, "EXISTS", key), "1"),
                         what = "the breaker to reach the master"))
  expect_true(wait_until(function() identical(cb$metrics()$fleet_failures, 5), what = "the trip to reach the master"))
  # The replica has it (replication is asynchronous: WAIT makes sure).
  expect_identical(sentinel$cli(old, "WAIT", 1, 5000), "1")
  expect_identical(cb$metrics()$master, paste0("127.0.0.1:", old))

  sentinel$kill(old)
  # While the sentinels fail over: calls and a new breaker never hang.
  moved <- until_master_moves(cb, old, function() {
    call <- timed(busy$execute(function() "ok", function() "fb"))
    expect_identical(call$value, "ok")
    made <- timed(circuit_breaker(name = "during", store = store, failure_threshold = 5, recovery_timeout = 30))
    breaker_remove("during")
    max(call$seconds, made$seconds)
  })
  expect_lt(moved$slowest, 10)  # a hang detector, not a timing
  expect_identical(moved$promoted, paste0("127.0.0.1:", sentinel$replica$port))
  expect_identical(sentinel$role(sentinel$replica$port), "master")
  # The fleet's state survived on the promoted replica: a new process sees
  # the trip.
  child <- sentinel_child(store_args, "failover", fleet_args(recovery_timeout = 120), function(cb, extra) {
    extra$wait_until(function() identical(cb$metrics()$mode, "fleet"), timeout = 20, what = "a sync")
    list(state = cb$state, master = cb$metrics()$master)
  }, list(wait_until = child_wait_until()))
  res <- collect_children(list(child))
  expect_identical(res[[1]]$state, "OPEN")
  expect_identical(res[[1]]$master, moved$promoted)
  expect_identical(cb$state, "OPEN")
})
