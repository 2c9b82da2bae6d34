# The Redis store's connection (in development): arguments, the client
# library, and a checked round trip to a real redis-server on 127.0.0.1.

test_that("breaker_store_redis() checks its arguments", {
  skip_if_not(circuitbreaker:::cb_redis_available(), "this build has no hiredis")
  store <- breaker_store_redis("redis://:pw@127.0.0.1:6390/2", prefix = "app:v1")
  expect_s3_class(store, "circuit_breaker_store_redis")
  expect_identical(store$endpoint[c("host", "port", "db", "has_password")],
                   list(host = "127.0.0.1", port = 6390L, db = 2L, has_password = TRUE))
  expect_error(breaker_store_redis("http://127.0.0.1"), class = "circuit_breaker_invalid_argument")
  expect_error(breaker_store_redis("rediss://127.0.0.1"), "TLS")
  expect_error(breaker_store_redis(prefix = "a b"), class = "circuit_breaker_invalid_argument")
  expect_error(breaker_store_redis(timeout = 0), class = "circuit_breaker_invalid_argument")
  expect_error(breaker_store_redis(sync_interval = "1"), class = "circuit_breaker_invalid_argument")
  expect_error(circuit_breaker(name = "x", store = store), class = "circuit_breaker_store_unavailable")
})

test_that("a real redis-server answers PING, with a password and a database", {
  server <- local_redis_server(password = "s3cr3t/@")
  store <- breaker_store_redis(server$url, timeout = 0.5)
  expect_true(breaker_store_redis_ping(store))
  wrong <- breaker_store_redis(sprintf("redis://:nope@127.0.0.1:%d/0", server$port), timeout = 0.5)
  res <- breaker_store_redis_ping(wrong)
  expect_false(res)
  expect_match(attr(res, "message"), "WRONGPASS|invalid", ignore.case = TRUE)
  db <- breaker_store_redis(sprintf("redis://:s3cr3t%%2F%%40@127.0.0.1:%d/3", server$port), timeout = 0.5)
  expect_true(breaker_store_redis_ping(db))
})

test_that("a dead or hung redis-server costs at most the timeout", {
  server <- local_redis_server()
  store <- breaker_store_redis(server$url, timeout = 0.2)
  expect_true(breaker_store_redis_ping(store))
  # Hung (SIGSTOP): the connection is accepted by the kernel, the reply never comes.
  server$process$signal(tools::SIGSTOP)
  # The ping gives up with the timeout's error instead of waiting (a hang
  # would stop the suite; tests assert no timings).
  res <- breaker_store_redis_ping(store)
  expect_false(res)
  expect_match(attr(res, "message"), "timed out|temporarily unavailable", ignore.case = TRUE)
  server$process$signal(tools::SIGCONT)
  expect_true(breaker_store_redis_ping(store))
  # Dead: the connection is refused at once.
  server$process$kill()
  res <- breaker_store_redis_ping(store)
  expect_false(res)
  expect_match(attr(res, "message"), "refused", ignore.case = TRUE)
})
