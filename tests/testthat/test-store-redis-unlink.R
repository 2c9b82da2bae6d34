# breaker_store_unlink() with a fleet store: every key of one breaker goes
# (the core lists them), another breaker's stay; a new breaker of that name
# starts afresh. Real redis-server.

breaker_keys_on <- function(server, prefix, name) {
  keys <- unlist(server$call("KEYS", "cb2:*"))
  own <- circuitbreaker:::cb_fleet_breaker_keys(prefix, name)
  sort(intersect(keys, own))
}

test_that("the core lists every key a fleet breaker may have", {
  skip_if_not(circuitbreaker:::cb_redis_available(), "this build has no hiredis")
  keys <- circuitbreaker:::cb_fleet_breaker_keys("myapp", "pay:ments")
  expect_identical(keys[1:3], c("cb2:{myapp:pay%3Aments}", "cb2:{myapp:pay%3Aments}:p:0",
                                "cb2:{myapp:pay%3Aments}:p:1"))
  expect_true("cb2:{myapp:pay%3Aments}:p:0" %in% keys)
  expect_identical(keys[[length(keys)]], "cb2:{myapp:pay%3Aments}:h")
  expect_identical(keys[[1]], fleet_key_of("myapp", "pay:ments"))
})

test_that("breaker_store_unlink() removes one fleet breaker's keys, and only its", {
  server <- local_redis_server()
  store <- breaker_store_redis(server$url, sync_interval = 0.05, timeout = 0.5)
  args <- fleet_args(failure_threshold = 1, recovery_timeout = 30)
  # Breaker "gone" is used by another process, which trips it and exits (so
  # no process uses it any more); "kept" is used by this one.
  child <- fleet_child(server$url, "gone", args, function(cb, extra) {
    cb$execute(function() stop("down"), function(e) "fb")
    extra$wait_until(function() identical(cb$metrics()$fleet_failures, 1), timeout = 10,
                     what = "the fleet to hear the failure")
    cb$state
  }, list(wait_until = child_wait_until()))
  withr::defer(child$kill())
  child$wait(20000)
  expect_identical(child$get_result(), "OPEN")
  kept <- local_shared_breaker(store, "kept", args)
  kept$execute(function() stop("down"), function(e) "fb")
  expect_true(wait_until(function() identical(server$fleet("kept", "s"), 1)))
  expect_identical(server$fleet("gone", "s"), 1)
  # A probe lease, so that a ":p:<slot>" key exists too.
  server$call("SET", paste0(fleet_key_of("circuitbreaker", "gone"), ":p:0"), "token", "PX", "60000")
  # And a health check's lease (":h").
  server$call("SET", paste0(fleet_key_of("circuitbreaker", "gone"), ":h"), "token", "PX", "60000")
  kept_before <- breaker_keys_on(server, "circuitbreaker", "kept")
  # The hash, the probe lease and the health check's lease.
  expect_gte(length(breaker_keys_on(server, "circuitbreaker", "gone")), 3)

  expect_true(breaker_store_unlink("gone", store))
  expect_length(breaker_keys_on(server, "circuitbreaker", "gone"), 0)
  expect_identical(server$call("EXISTS", paste0(fleet_key_of("circuitbreaker", "gone"), ":h")), 0)
  expect_identical(breaker_keys_on(server, "circuitbreaker", "kept"), kept_before)
  expect_identical(server$fleet("kept", "s"), 1)
  expect_false(breaker_store_unlink("gone", store))

  # A breaker of that name starts afresh, with other rule arguments too.
  fresh <- local_shared_breaker(store, "gone", fleet_args(failure_threshold = 3))
  expect_identical(fresh$state, "CLOSED")
  expect_identical(fresh$metrics()$mode, "fleet")
  expect_identical(server$fleet("gone", "s"), 0)
})

test_that("breaker_store_unlink() says when Redis cannot be reached", {
  skip_if_not(circuitbreaker:::cb_redis_available(), "this build has no hiredis")
  store <- breaker_store_redis(sprintf("redis://:s3cret@127.0.0.1:%d/0", free_port()), timeout = 0.5)
  expect_error(breaker_store_unlink("x", store), class = "circuit_breaker_store_unreachable")
  expect_snapshot(error = TRUE, breaker_store_unlink("x", store))
  expect_error(breaker_store_unlink("x", "redis"), class = "circuit_breaker_invalid_argument")
})
