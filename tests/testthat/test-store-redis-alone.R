# A fleet store that cannot reach Redis says so, once, with the masked URL
# and the reason, and says again when it rejoins. Real redis-server; a store
# pointed at a closed port on 127.0.0.1.

# Every condition of class `class` that `expr` signals (the others pass on).
conditions_of <- function(expr, class) {
  seen <- list()
  withCallingHandlers(expr, condition = function(c) {
    if (inherits(c, class)) {
      seen[[length(seen) + 1L]] <<- c
      if (inherits(c, "warning")) invokeRestart("muffleWarning")
      if (inherits(c, "message")) invokeRestart("muffleMessage")
    }
  })
  seen
}

without_ports <- function(x) gsub("127\\.0\\.0\\.1:[0-9]+", "127.0.0.1:PORT", x)

test_that("a store pointed at a closed port warns once, at its first breaker", {
  skip_if_not(circuitbreaker:::cb_redis_available(), "this build has no hiredis")
  # Forgotten after the test: a later breaker_list() would otherwise read
  # these alone breakers' metrics, and warn, in another test.
  withr::defer(for (n in c("first", "second", "third", "x")) breaker_remove(n))
  port <- free_port()
  store <- breaker_store_redis(sprintf("redis://user:s3cret@127.0.0.1:%d/0", port),
                               prefix = "alone", sync_interval = 0.05, timeout = 0.2)
  expect_snapshot(cb <- circuit_breaker(name = "first", store = store), transform = without_ports)
  w <- conditions_of(cb2 <- circuit_breaker(name = "second", store = store), "circuit_breaker_store_alone")
  expect_length(w, 0)
  w <- conditions_of(circuit_breaker(name = "third", store = store), "circuit_breaker_warning")
  expect_length(w, 0)
  w <- conditions_of(cb$metrics(), "circuit_breaker_store_alone")
  expect_length(w, 0)
  expect_identical(cb$metrics()$mode, "local")
  # Classed, with the masked URL and the reason; never the password.
  w <- tryCatch(
    circuit_breaker(name = "x", store = breaker_store_redis(sprintf("redis://user:s3cret@127.0.0.1:%d/1", port),
                                                            sync_interval = 0.05, timeout = 0.2)),
    circuit_breaker_store_alone = function(w) w
  )
  expect_s3_class(w, c("circuit_breaker_store_alone", "circuit_breaker_warning", "warning"))
  expect_match(w$url, "redis://***:***@127.0.0.1", fixed = TRUE)
  expect_false(grepl("s3cret", conditionMessage(w), fixed = TRUE))
  expect_true(nzchar(w$reason))
})

test_that("a store that loses Redis warns once after a few sync intervals, and says when it rejoins", {
  server <- local_redis_server()
  store <- breaker_store_redis(server$url, prefix = "alone", sync_interval = 0.05, timeout = 0.2)
  withr::defer(breaker_remove("lost"))
  expect_length(conditions_of(cb <- circuit_breaker(name = "lost", store = store), "condition"), 0)
  expect_identical(cb$metrics()$mode, "fleet")

  server$kill()
  alone <- list()
  # Bounded: the link is alone after max(5 sync intervals, 1 s).
  expect_true(wait_until(function() {
    alone <<- c(alone, conditions_of(cb$metrics(), "circuit_breaker_store_alone"))
    length(alone) > 0
  }, timeout = 15))
  # The link tries again, and fails: that says nothing more.
  failed <- fleet_link(cb)$sync_failures
  wait_until(function() {
    alone <<- c(alone, conditions_of(cb$metrics(), "circuit_breaker_store_alone"))
    fleet_link(cb)$sync_failures > failed
  }, timeout = 15, what = "the link's next failed round trip")
  alone <- c(alone, conditions_of(cb$metrics(), "circuit_breaker_store_alone"))
  expect_length(alone, 1)
  # The reason is the last failure (refused, reset or closed, by timing).
  expect_match(alone[[1]]$reason, ".")
  expect_snapshot(cat(conditionMessage(alone[[1]])), transform = function(x) {
    sub("cannot reach Redis: [^\n]*$", "cannot reach Redis: REASON.", without_ports(x))
  })

  server$start()
  back <- list()
  expect_true(wait_until(function() {
    back <<- c(back, conditions_of(cb$metrics(), "circuit_breaker_store_rejoined"))
    length(back) > 0
  }, timeout = 15))
  expect_length(conditions_of(cb$metrics(), "circuit_breaker_store_rejoined"), 0)
  expect_s3_class(back[[1]], c("circuit_breaker_store_rejoined", "message"))
  expect_snapshot(cat(conditionMessage(back[[1]])), transform = without_ports)
  expect_identical(cb$metrics()$mode, "fleet")
})

test_that("a breaker with listeners hears it on the event loop, without a call", {
  skip_if_not_installed("later")
  # later < 1.4 runs its callbacks outside this test's condition handlers:
  # their warnings and messages are read from the message stream (warn = 1
  # prints a warning at once). Later versions run them inside the caller's
  # handlers: they are caught there (and muffled, or testthat would take
  # them).
  withr::local_options(circuitbreaker.host_poll_interval = 0.05, warn = 1)
  loop_says <- function() {
    caught <- character()
    printed <- capture.output(type = "message", withCallingHandlers(
      later::run_now(0.05),
      warning = function(w) {
        caught <<- c(caught, conditionMessage(w))
        invokeRestart("muffleWarning")
      },
      message = function(m) {
        caught <<- c(caught, conditionMessage(m))
        invokeRestart("muffleMessage")
      }
    ))
    c(caught, printed)
  }
  server <- local_redis_server()
  store <- breaker_store_redis(server$url, prefix = "alone-loop", sync_interval = 0.05, timeout = 0.2)
  cb <- local_shared_breaker(store, "listened", fleet_args())
  cb$on("state_change", function(...) NULL)
  server$kill()
  # Only the event loop runs: no call, no $metrics().
  said <- character()
  expect_true(wait_until(function() {
    said <<- c(said, loop_says())
    any(grepl("cannot reach Redis", said, fixed = TRUE))
  }, timeout = 15))
  for (i in 1:5) said <- c(said, loop_says())
  expect_identical(sum(grepl("cannot reach Redis", said, fixed = TRUE)), 1L)
  server$start()
  expect_true(wait_until(function() {
    said <<- c(said, loop_says())
    any(grepl("reaches Redis again", said, fixed = TRUE))
  }, timeout = 15))
  for (i in 1:5) said <- c(said, loop_says())
  expect_identical(sum(grepl("reaches Redis again", said, fixed = TRUE)), 1L)
  # Said by the loop: a call now has nothing more to say.
  expect_length(conditions_of(cb$metrics(), "condition"), 0)
})
