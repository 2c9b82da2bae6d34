# The rules beyond the original R6 class, each driven by a manual clock.

test_that("failure rate over a count window trips once minimum_calls is reached", {
  b <- manual_breaker(failure_threshold = Inf, failure_rate_threshold = 0.5,
                      window_size = 10, minimum_calls = 4)
  cb <- b$cb
  cb$execute(fail, fallback)
  cb$execute(fail, fallback)
  cb$execute(fail, fallback)
  expect_identical(cb$state, "CLOSED")  # 3 calls < minimum_calls
  cb$execute(succeed, fallback)          # 3/4 failed
  expect_identical(cb$state, "OPEN")
  expect_identical(cb$failure_count, 0)  # the consecutive count is separate
})

test_that("the count window forgets calls older than its size", {
  b <- manual_breaker(failure_threshold = Inf, failure_rate_threshold = 0.5,
                      window_size = 4, minimum_calls = 4)
  cb <- b$cb
  cb$execute(fail, fallback)
  for (i in 1:3) cb$execute(succeed, fallback)    # window: f s s s -> 1 of 4
  cb$execute(fail, fallback)                       # window: s s s f -> 1/4
  expect_identical(cb$metrics()$window_failures, 1)
  cb$execute(fail, fallback)                       # s s f f -> 2/4: trips
  expect_identical(cb$state, "OPEN")
})

test_that("the rate rule and the consecutive rule work together", {
  b <- manual_breaker(failure_threshold = 3, failure_rate_threshold = 0.9, minimum_calls = 10)
  cb <- b$cb
  trip(cb, 3)
  expect_identical(cb$state, "OPEN")  # consecutive rule first
})

test_that("a time window drops old buckets as time passes, without calls", {
  b <- manual_breaker(failure_threshold = Inf, failure_rate_threshold = 0.5,
                      window_type = "time", window_size = 10, minimum_calls = 3)
  cb <- b$cb
  cb$execute(fail, fallback)
  cb$execute(fail, fallback)
  expect_identical(cb$metrics()$window_calls, 2)
  b$clock$advance(11)
  expect_identical(cb$metrics()$window_calls, 0)   # gone with time alone
  expect_true(is.na(cb$metrics()$failure_rate))
  cb$execute(fail, fallback)
  cb$execute(succeed, fallback)
  expect_identical(cb$state, "CLOSED")  # 2 calls in the window
  b$clock$advance(5)
  cb$execute(fail, fallback)            # 2 failures / 3 calls
  expect_identical(cb$state, "OPEN")
})

test_that("slow calls are counted and the slow rate trips the breaker", {
  b <- manual_breaker(failure_threshold = Inf, slow_call_duration = 1,
                      slow_call_rate_threshold = 0.5, minimum_calls = 2)
  cb <- b$cb
  slow <- function() {
    b$clock$advance(2)
    "slow but fine"
  }
  expect_identical(cb$execute(slow, fallback), "slow but fine")
  expect_identical(cb$metrics()$slow_calls, 1)
  cb$execute(succeed, fallback)
  expect_identical(cb$state, "OPEN")  # 1 slow of 2 calls
  expect_identical(cb$metrics()$failures, 0)
})

test_that("slow calls are only counted when no slow rate is set", {
  b <- manual_breaker(slow_call_duration = 0.5)
  b$cb$execute(function() b$clock$advance(1))
  b$cb$execute(function() b$clock$advance(0.5))  # not *more than* 0.5 s
  m <- b$cb$metrics()
  expect_identical(m$slow_calls, 1)
  expect_identical(m$slow_call_rate, 0.5)
  expect_identical(m$state, "CLOSED")
})

test_that("half_open_max_calls probes must all succeed to close", {
  b <- manual_breaker(failure_threshold = 1, recovery_timeout = 1, half_open_max_calls = 3)
  cb <- b$cb
  trip(cb, 1)
  b$clock$advance(2)
  expect_identical(cb$execute(succeed, fallback), "ok")
  expect_identical(cb$state, "HALF_OPEN")
  expect_identical(cb$execute(succeed, fallback), "ok")
  expect_identical(cb$execute(succeed, fallback), "ok")
  expect_identical(cb$state, "CLOSED")

  trip(cb, 1)
  b$clock$advance(2)
  cb$execute(succeed, fallback)
  cb$execute(fail, fallback)  # any probe failure re-opens
  expect_identical(cb$state, "OPEN")
})

test_that("concurrent probes beyond half_open_max_calls are rejected", {
  b <- manual_breaker(failure_threshold = 1, recovery_timeout = 1, half_open_max_calls = 2)
  cb <- b$cb
  trip(cb, 1)
  b$clock$advance(2)
  inner <- NULL
  outer <- cb$execute(function() {
    inner <<- cb$execute(function() {
      cb$execute(succeed, function() "third rejected")
    }, fallback)
    "outer ok"
  }, fallback)
  expect_identical(inner, "third rejected")
  expect_identical(outer, "outer ok")
  expect_identical(cb$state, "CLOSED")
})

test_that("a probe not settled within half_open_max_wait counts as failed", {
  b <- manual_breaker(failure_threshold = 1, recovery_timeout = 1, half_open_max_wait = 5)
  cb <- b$cb
  trip(cb, 1)
  b$clock$advance(2)
  # The probe's request "hangs": while it runs, time passes and other callers
  # are rejected; once max_wait has passed, the probe is given up.
  seen <- NULL
  cb$execute(function() {
    expect_identical(cb$execute(succeed, fallback), "fallback")  # slot taken
    b$clock$advance(6)
    seen <<- cb$execute(succeed, fallback)  # probe expired: open again
    "late"
  }, fallback)
  expect_identical(seen, "fallback")
  expect_identical(cb$state, "OPEN")
  m <- cb$metrics()
  expect_identical(m$expired_probes, 1)
  expect_identical(m$late, 1)  # the probe's own result came too late to count
})

test_that("backoff grows the open duration up to the cap, and closing resets it", {
  b <- manual_breaker(failure_threshold = 1, recovery_timeout = 10, backoff_multiplier = 2,
                      max_recovery_timeout = 35)
  cb <- b$cb
  trip(cb, 1)
  expect_equal(cb$metrics()$open_duration, 10)
  for (expected in c(20, 35, 35)) {
    b$clock$advance(cb$metrics()$open_duration + 0.001)
    cb$execute(fail, fallback)  # the probe fails: open again, longer
    expect_equal(cb$metrics()$open_duration, expected)
  }
  b$clock$advance(36)
  cb$execute(succeed, fallback)
  trip(cb, 1)
  expect_equal(cb$metrics()$open_duration, 10)
})

test_that("jitter shortens open durations by at most its share", {
  set.seed(1)
  durations <- vapply(1:20, function(i) {
    b <- manual_breaker(failure_threshold = 1, recovery_timeout = 10, jitter = 0.5)
    trip(b$cb, 1)
    b$cb$metrics()$open_duration
  }, numeric(1))
  expect_true(all(durations > 5 & durations <= 10))
  expect_gt(length(unique(durations)), 10)
})

test_that("ramp_up admits a growing share of calls after closing", {
  b <- manual_breaker(failure_threshold = 1, recovery_timeout = 1, ramp_up = 10)
  cb <- b$cb
  trip(cb, 1)
  b$clock$advance(2)
  cb$execute(succeed, fallback)
  expect_identical(cb$state, "CLOSED")
  admitted <- function(n) {
    sum(vapply(seq_len(n), function(i) identical(cb$execute(succeed, fallback), "ok"), logical(1)))
  }
  b$clock$advance(1)                 # 10% of the way
  early <- admitted(100)
  b$clock$advance(7)                 # 80%
  late <- admitted(100)
  b$clock$advance(3)                 # done
  expect_identical(admitted(20), 20L)
  expect_equal(early, 10, tolerance = 0.2)
  expect_equal(late, 80, tolerance = 0.1)
  expect_gt(cb$metrics()$rejected, 100)
})

test_that("failure_when turns a returned value into a failure", {
  cb <- circuit_breaker(failure_threshold = 2, failure_when = function(x) identical(x$status, 500))
  bad <- function() list(status = 500)
  cond <- cb$execute(bad, function(cond) cond)
  expect_s3_class(cond, "circuit_breaker_failed_value")
  expect_identical(cond$value, list(status = 500))
  # Without a fallback the value is returned, recorded as a failure.
  expect_identical(cb$execute(bad), list(status = 500))
  expect_identical(cb$state, "OPEN")
  expect_identical(cb$metrics()$failures, 2)
})

test_that("ignored error classes propagate and count nowhere", {
  b <- manual_breaker(failure_threshold = 1, recovery_timeout = 1, ignore = c("http_404", "other"))
  cb <- b$cb
  not_found_error <- structure(class = c("http_404", "error", "condition"), list(message = "not found", call = NULL))
  not_found <- function() stop(not_found_error)
  expect_error(cb$execute(not_found, fallback), class = "http_404")
  expect_identical(cb$state, "CLOSED")
  m <- cb$metrics()
  expect_identical(c(m$calls, m$ignored), c(0, 1))
  # An ignored probe frees its slot without deciding anything.
  trip(cb, 1)
  b$clock$advance(2)
  expect_error(cb$execute(not_found), class = "http_404")
  expect_identical(cb$state, "HALF_OPEN")
  expect_identical(cb$execute(succeed, fallback), "ok")
  expect_identical(cb$state, "CLOSED")
})

test_that("a result from before a transition does not move the new state", {
  b <- manual_breaker(failure_threshold = 2, recovery_timeout = 1)
  cb <- b$cb
  value <- cb$execute(function() {
    trip(cb, 2)         # the breaker opens while this call is in flight
    stop("late failure")
  }, fallback)
  expect_identical(value, "fallback")
  m <- cb$metrics()
  expect_identical(m$late, 1)
  expect_identical(m$times_opened, 1)
  expect_identical(cb$failure_count, 2)
})

# Where the defaults come from (one table in C++) is tested in
# test-scenarios.R; these are the window defaults in effect.
test_that("the windows' defaults are 100 calls or 60 s, with 20 calls minimum", {
  cfg <- circuit_breaker()$config
  expect_identical(cfg$window_size, 100)
  expect_identical(cfg$minimum_calls, 20)
  expect_identical(circuit_breaker(window_type = "time")$config$window_size, 60)
  expect_identical(circuit_breaker(window_size = 10)$config$minimum_calls, 10)
})
