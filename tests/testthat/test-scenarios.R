# Scenarios taken from the test suites of other circuit-breaker libraries
# (gobreaker, pybreaker, resilience4j, opossum, Polly), and the rules that
# have one home: defaults, jitter seeding.

never_settles <- function() promises::promise(function(resolve, reject) NULL)

open_error <- function(expr) {
  tryCatch({
    expr
    NULL
  }, circuit_breaker_open = identity)
}

test_that("`ignore` takes a predicate of the condition", {
  m <- manual_breaker(failure_threshold = 1,
                      ignore = function(cond) grepl("not found", conditionMessage(cond)))
  cb <- m$cb
  expect_error(cb$execute(function() stop("item not found")), "item not found")
  # An ignored error propagates even with a fallback, and counts nowhere.
  expect_error(cb$execute(function() stop("item not found"), fallback), "item not found")
  expect_equal(cb$state, "CLOSED")
  expect_equal(cb$metrics()$ignored, 2)
  expect_equal(cb$metrics()$calls, 0)
  # Any other error is a failure.
  expect_equal(cb$execute(fail, fallback), "fallback")
  expect_equal(cb$state, "OPEN")

  # Reconfigured from classes to a predicate and back.
  cb$reset()
  cb$configure(ignore = function(cond) inherits(cond, "my_class"))
  expect_error(cb$execute(function() rlang::abort("x", class = "my_class")), class = "my_class")
  expect_equal(cb$state, "CLOSED")
  cb$configure(ignore = "other_class")
  expect_equal(cb$execute(function() rlang::abort("x", class = "my_class"), fallback), "fallback")
  expect_equal(cb$state, "OPEN")
})

test_that("an `ignore` predicate that fails counts the error as a failure and warns", {
  cb <- circuit_breaker(failure_threshold = 1, ignore = function(cond) stop("broken predicate"))
  expect_warning(res <- cb$execute(fail, fallback), class = "circuit_breaker_predicate_error")
  expect_equal(res, "fallback")
  expect_equal(cb$state, "OPEN")
})

test_that("`ignore` must be classes or a function", {
  expect_error(circuit_breaker(ignore = 1), class = "circuit_breaker_invalid_argument")
  cb <- circuit_breaker()
  expect_error(cb$configure(ignore = NA_character_), class = "circuit_breaker_invalid_argument")
  expect_null(cb$config$ignore)
})

test_that("a DISABLED breaker sends no success, failure or ignored events", {
  cb <- circuit_breaker(failure_threshold = 1, ignore = "ignored_class")
  heard <- character()
  for (event in c("success", "failure", "ignored")) {
    local({
      e <- event
      cb$on(e, function() heard <<- c(heard, e))
    })
  }
  cb$disable()
  expect_equal(cb$execute(succeed), "ok")
  expect_equal(cb$execute(fail, fallback), "fallback")
  expect_error(cb$execute(function() rlang::abort("x", class = "ignored_class")))
  cb$on_success()
  cb$on_failure()
  expect_identical(heard, character())
  expect_equal(cb$metrics()$calls, 0)

  # Once enabled again, every outcome is heard.
  cb$reset()
  cb$execute(succeed)
  expect_error(cb$execute(function() rlang::abort("x", class = "ignored_class")))
  cb$execute(fail, fallback)
  expect_identical(heard, c("success", "ignored", "failure"))
})

test_that("an async probe that never settles expires after recovery_timeout", {
  skip_if_not_installed("promises")
  m <- manual_breaker(failure_threshold = 1, recovery_timeout = 30)
  cb <- m$cb
  trip(cb)
  m$clock$advance(31)
  lost <- cb$execute_async(never_settles)
  expect_equal(cb$state, "HALF_OPEN")

  # Other calls are refused, and told the truth: the probe slot frees when
  # the lost probe's lease ends, 30 s from now.
  err <- open_error(cb$execute(succeed))
  expect_equal(err$reason, "half_open_full")
  expect_equal(err$retry_after, 30)
  expect_no_match(conditionMessage(err), "in 0 s")

  # The lease ends at t = 61: the breaker re-opened then, for 30 s.
  m$clock$advance(30.5)
  err <- open_error(cb$execute(succeed))
  expect_equal(err$state, "OPEN")
  expect_equal(err$retry_after, 29.5)
  expect_equal(cb$metrics()$expired_probes, 1)

  # At t = 91.5 the next call is a probe, and it closes the breaker.
  m$clock$advance(30)
  expect_equal(cb$execute(succeed), "ok")
  expect_equal(cb$state, "CLOSED")
})

test_that("an async probe's lease is the breaker's timeout, or half_open_max_wait", {
  skip_if_not_installed("promises")
  m <- manual_breaker(failure_threshold = 1, recovery_timeout = 30, timeout = 5)
  trip(m$cb)
  m$clock$advance(31)
  m$cb$execute_async(never_settles)
  expect_equal(open_error(m$cb$execute(succeed))$retry_after, 5)

  m <- manual_breaker(failure_threshold = 1, recovery_timeout = 30, timeout = 5, half_open_max_wait = 12)
  trip(m$cb)
  m$clock$advance(31)
  m$cb$execute_async(never_settles)
  expect_equal(open_error(m$cb$execute(succeed))$retry_after, 12)
})

test_that("a lost probe noticed late re-opens the breaker as of its expiry", {
  skip_if_not_installed("promises")
  m <- manual_breaker(failure_threshold = 1, recovery_timeout = 30, half_open_max_wait = 30)
  cb <- m$cb
  trip(cb)                     # at t = 0
  m$clock$advance(31)
  cb$execute_async(never_settles)  # the probe, lost at t = 31
  m$clock$advance(3600 - 31)   # first noticed an hour later
  # It expired at t = 61, re-opened the breaker until t = 91: this call is
  # the next probe, not a rejection.
  expect_equal(cb$execute(succeed), "ok")
  expect_equal(cb$state, "CLOSED")
  tr <- cb$transitions()
  expect_equal(tail(tr$to, 4), c("HALF_OPEN", "OPEN", "HALF_OPEN", "CLOSED"))
  # The re-opening is dated at the expiry, not when it was noticed.
  reopened <- tr[tr$to == "OPEN", ]
  expect_equal(reopened$seconds_ago[[nrow(reopened)]], 3600 - 61)
})

test_that("a synchronous probe never expires, and a call nested in it is told a probe is in flight", {
  m <- manual_breaker(failure_threshold = 1, recovery_timeout = 30)
  cb <- m$cb
  trip(cb)
  m$clock$advance(31)
  inner <- NULL
  cb$execute(function() {
    m$clock$advance(1000)
    inner <<- open_error(cb$execute(succeed))
    "probe"
  })
  expect_equal(inner$reason, "half_open_full")
  expect_true(is.na(inner$retry_after))
  expect_match(conditionMessage(inner), "probe in flight settles")
  expect_equal(cb$state, "CLOSED")
})

test_that("a call refused by ramp-up says so", {
  m <- manual_breaker(failure_threshold = 1, recovery_timeout = 1, ramp_up = 10)
  cb <- m$cb
  trip(cb)
  m$clock$advance(1.5)
  expect_equal(cb$execute(succeed), "ok")
  expect_equal(cb$state, "CLOSED")
  err <- open_error(cb$execute(succeed))
  expect_s3_class(err, "circuit_breaker_open")
  expect_equal(err$reason, "ramp_up")
  expect_equal(err$state, "CLOSED")
  expect_match(conditionMessage(err), "ramping up")
  expect_no_match(conditionMessage(err), "next probe")
})

test_that("an async rejection describes the breaker at the moment of refusal", {
  skip_if_not_installed("promises")
  skip_if_not_installed("later")
  m <- manual_breaker(failure_threshold = 1, recovery_timeout = 30)
  cb <- m$cb
  trip(cb)
  m$clock$advance(10)
  p <- cb$execute_async(function() "not called")
  # Before the promise's callbacks run, time passes and the breaker closes.
  m$clock$advance(15)
  cb$reset()
  err <- tryCatch(promise_value(p), circuit_breaker_open = identity)
  expect_s3_class(err, "circuit_breaker_open")
  expect_equal(err$state, "OPEN")
  expect_equal(err$retry_after, 20)

  # And the fallback gets the same condition.
  trip(cb)
  got <- promise_value(cb$execute_async(function() "not called", function(cond) cond$retry_after))
  expect_equal(got, 30)
})

test_that("jitter set by configure() spreads the open durations of identical breakers", {
  durations <- vapply(1:3, function(i) {
    cb <- circuit_breaker(failure_threshold = 1, recovery_timeout = 60, jitter = 0)
    cb$configure(jitter = 0.9)
    trip(cb)
    cb$metrics()$open_duration
  }, numeric(1))
  expect_equal(length(unique(durations)), 3)
  expect_true(all(durations <= 60 & durations >= 6))
})

test_that("defaults have one home: the article's values reach formals, config and docs", {
  f <- formals(circuit_breaker)
  # The R6 class from the article this package follows: 5 failures, 30 s.
  expect_identical(f$failure_threshold, 5)
  expect_identical(f$recovery_timeout, 30)
  expect_identical(names(f), names(formals(CircuitBreaker$public_methods$initialize)))

  # A breaker made with no arguments has exactly the defaults the formals show.
  args <- circuitbreaker:::cb_arguments(circuit_breaker()$.__enclos_env__$ptr)
  for (arg in names(args)) expect_identical(args[[arg]], eval(f[[arg]]), label = arg)

  # The installed documentation shows the same defaults (stale docs fail).
  rd <- tools::Rd_db("circuitbreaker")[["circuit_breaker.Rd"]]
  skip_if(is.null(rd), "no installed Rd database")
  usage <- paste(as.character(rd[[which(vapply(rd, attr, "", "Rd_tag") == "\\usage")]]), collapse = "")
  usage <- gsub("\\s+", " ", usage)
  for (arg in names(f)) {
    shown <- paste(arg, "=", paste(deparse(f[[arg]]), collapse = " "))
    expect_true(grepl(shown, usage, fixed = TRUE), label = shown)
  }
})
