# $execute_async() with mirai (a real daemon pool) and other promise-able
# objects: anything promises::as.promise() accepts.

test_that("a mirai's value is a success, its error a failure with the fallback", {
  local_mirai_daemons(2)
  cb <- local_breaker(failure_threshold = 3)
  expect_identical(promise_value(cb$execute_async(function() mirai::mirai(21 * 2))), 42)
  expect_identical(cb$metrics()$successes, 1)

  # An error inside the daemon is a failure; the fallback receives mirai's
  # condition, and without a fallback the promise rejects with it.
  broken <- function() mirai::mirai(stop("inventory is down"))
  seen <- promise_value(cb$execute_async(broken, function(e) conditionMessage(e)))
  expect_match(seen, "inventory is down")
  expect_error(promise_value(cb$execute_async(broken)), "inventory is down")
  expect_identical(cb$metrics()$failures, 2)
  promise_value(cb$execute_async(broken, fallback))
  expect_identical(cb$state, "OPEN")

  # Rejected: the request function does not run, so no task reaches a daemon.
  ran <- FALSE
  answer <- cb$execute_async(function() {
    ran <<- TRUE
    mirai::mirai(1)
  }, fallback)
  expect_identical(promise_value(answer), "fallback")
  expect_false(ran)
  expect_identical(cb$metrics()$rejected, 1)
})

test_that("a mirai that times out is a failure and a slow call", {
  local_mirai_daemons(1)
  cb <- local_breaker(failure_threshold = 5, slow_call_duration = 0.1)
  slow <- function() mirai::mirai(Sys.sleep(5), .timeout = 300)
  err <- tryCatch(promise_value(cb$execute_async(slow)), error = identity)
  expect_s3_class(err, "error")
  m <- cb$metrics()
  expect_identical(c(m$calls, m$failures, m$slow_calls), c(1, 1, 1))
})

test_that("a probe whose mirai is stopped releases its permit", {
  local_mirai_daemons(1)
  b <- manual_breaker(failure_threshold = 1, recovery_timeout = 5, half_open_max_calls = 1)
  cb <- b$cb
  trip(cb)
  b$clock$advance(6)

  task <- mirai::mirai(Sys.sleep(10))
  probe <- cb$execute_async(function() task)
  expect_identical(cb$state, "HALF_OPEN")
  # The one probe slot is taken.
  blocked <- tryCatch(promise_value(cb$execute_async(function() mirai::mirai(1))), error = identity)
  expect_s3_class(blocked, "circuit_breaker_open")

  mirai::stop_mirai(task)
  err <- tryCatch(promise_value(probe), error = identity)
  expect_s3_class(err, "error")
  m <- cb$metrics()
  expect_identical(c(m$released, m$failures), c(1, 1))  # the trip's one failure only
  expect_identical(cb$state, "HALF_OPEN")
  # The slot is free at once: the next probe goes out and closes the breaker.
  expect_identical(promise_value(cb$execute_async(function() mirai::mirai("healthy"))), "healthy")
  expect_identical(cb$state, "CLOSED")
})

test_that("any object with an as.promise() method is awaited", {
  skip_if_not_installed("promises")
  skip_if_not_installed("later")
  # A class that only as.promise() knows (older promises' is.promising()
  # knows nothing of it).
  registerS3method("as.promise", "cb_test_deferred", function(x) {
    promises::promise(function(resolve, reject) {
      later::later(function() if (is.null(x$error)) resolve(x$value) else reject(simpleError(x$error)), 0.01)
    })
  }, envir = asNamespace("promises"))
  deferred <- function(value = NULL, error = NULL) {
    structure(list(value = value, error = error), class = "cb_test_deferred")
  }

  cb <- local_breaker(failure_threshold = 2)
  expect_identical(promise_value(cb$execute_async(function() deferred(value = "ok"))), "ok")
  expect_identical(promise_value(cb$execute_async(function() deferred(error = "down"), fallback)), "fallback")
  m <- cb$metrics()
  expect_identical(c(m$successes, m$failures), c(1, 1))
  # A plain object without a method is a value, as before.
  plain <- structure(list(), class = "cb_test_not_promising")
  expect_identical(promise_value(cb$execute_async(function() plain)), plain)
})
