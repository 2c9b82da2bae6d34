test_that("a successful call returns the request's value and resets failure_count", {
  cb <- circuit_breaker()
  cb$execute(fail, fallback)
  expect_identical(cb$failure_count, 1)
  expect_identical(cb$execute(function() list(a = 1), fallback), list(a = 1))
  expect_identical(cb$failure_count, 0)
  expect_identical(cb$execute(function() NULL, fallback), NULL)
  expect_identical(cb$execute(function() invisible(3)), 3)
})

test_that("the fallback may take the condition", {
  cb <- circuit_breaker(failure_threshold = 1)
  err <- cb$execute(fail, function(e) e)
  expect_s3_class(err, "simpleError")
  expect_identical(conditionMessage(err), "downstream failed")

  rejected <- cb$execute(succeed, function(cond) cond)
  expect_s3_class(rejected, "circuit_breaker_open")
  expect_identical(rejected$state, "OPEN")
  expect_equal(rejected$retry_after, 30, tolerance = 0.5)

  # Zero-argument fallbacks (the original R6 class's form) and primitives get no argument.
  expect_identical(cb$execute(succeed, function() "zero"), "zero")
  expect_identical(cb$execute(succeed, list), list())
  # `...` counts as taking the condition.
  expect_s3_class(cb$execute(succeed, function(...) ..1), "circuit_breaker_open")
})

test_that("without a fallback a rejected call signals circuit_breaker_open", {
  b <- manual_breaker(failure_threshold = 2, recovery_timeout = 10, name = "api")
  trip(b$cb)
  b$clock$advance(4)
  cond <- expect_error(b$cb$execute(succeed), class = "circuit_breaker_open")
  expect_identical(cond$breaker, "api")
  expect_identical(cond$state, "OPEN")
  expect_equal(cond$retry_after, 6)
  expect_match(conditionMessage(cond), "Circuit breaker \"api\" is OPEN")
  expect_false(inherits(cond, "circuit_breaker_error"))  # a rejection is not misuse
})

test_that("without a fallback a failed call's own error propagates, recorded", {
  cb <- circuit_breaker(failure_threshold = 3)
  my_error <- structure(class = c("my_error", "error", "condition"),
                        list(message = "custom", call = NULL, detail = 42))
  caught <- tryCatch(cb$execute(function() stop(my_error)), error = function(e) e)
  expect_identical(caught, my_error)
  expect_identical(cb$failure_count, 1)
  # An outer calling handler sees the original error exactly once.
  seen <- 0
  try(withCallingHandlers(cb$execute(fail), error = function(e) seen <<- seen + 1), silent = TRUE)
  expect_identical(seen, 1)
  expect_identical(cb$failure_count, 2)
})

test_that("the request's frames are unwound before the fallback runs", {
  cb <- circuit_breaker()
  log <- character()
  cb$execute(
    function() {
      on.exit(log <<- c(log, "request cleanup"))
      stop("boom")
    },
    function() log <<- c(log, "fallback")
  )
  expect_identical(log, c("request cleanup", "fallback"))
})

test_that("errors in the fallback propagate", {
  cb <- circuit_breaker(failure_threshold = 1)
  expect_error(cb$execute(fail, function() stop("fallback broke")), "fallback broke")
  expect_identical(cb$state, "OPEN")
  expect_error(cb$execute(succeed, function() stop("fallback broke again")), "fallback broke again")
})

test_that("warnings and messages from the request pass through untouched", {
  cb <- circuit_breaker()
  expect_warning(value <- cb$execute(function() {
    warning("careful")
    "done"
  }, fallback), "careful")
  expect_identical(value, "done")
  expect_message(cb$execute(function() message("hello")), "hello")
  expect_identical(cb$metrics()$successes, 2)
  expect_identical(cb$metrics()$failures, 0)
})

test_that("execute() can be called from inside a request on the same breaker", {
  cb <- circuit_breaker(failure_threshold = 2)
  value <- cb$execute(function() {
    inner <- cb$execute(fail, function() "inner fallback")
    paste("outer saw", inner)
  }, fallback)
  expect_identical(value, "outer saw inner fallback")
  expect_identical(cb$metrics()$calls, 2)
  expect_identical(cb$failure_count, 0)  # the outer success came last
})

test_that("an interrupted call releases its permit and counts nothing", {
  cb <- circuit_breaker()
  res <- tryCatch(cb$execute(function() rlang::interrupt(), fallback), interrupt = function(e) "interrupted")
  expect_identical(res, "interrupted")
  m <- cb$metrics()
  expect_identical(m$calls, 0)
  expect_identical(m$released, 1)
  expect_identical(cb$execute(succeed, fallback), "ok")
})

test_that("an interrupted half-open probe does not leave the breaker stuck", {
  b <- manual_breaker(failure_threshold = 1, recovery_timeout = 1)
  trip(b$cb)
  b$clock$advance(2)
  res <- tryCatch(b$cb$execute(function() rlang::interrupt(), fallback), interrupt = function(e) "interrupted")
  expect_identical(res, "interrupted")
  expect_identical(b$cb$state, "HALF_OPEN")
  expect_identical(b$cb$metrics()$probes_in_flight, 0)
  # The next call is admitted as the probe and closes the breaker.
  expect_identical(b$cb$execute(succeed, fallback), "ok")
  expect_identical(b$cb$state, "CLOSED")
})

test_that("a warning caught outside execute() releases the permit", {
  b <- manual_breaker(failure_threshold = 1, recovery_timeout = 1)
  trip(b$cb)
  b$clock$advance(2)
  res <- tryCatch(b$cb$execute(function() warning("escape")), warning = function(w) "caught")
  expect_identical(res, "caught")
  expect_identical(b$cb$metrics()$probes_in_flight, 0)
  expect_identical(b$cb$execute(succeed, fallback), "ok")
  expect_identical(b$cb$state, "CLOSED")
})

test_that("a restart invoked after an error does not record the call twice", {
  cb <- circuit_breaker()
  value <- withCallingHandlers(
    cb$execute(function() withRestarts(stop("recoverable"), use_default = function() "default")),
    error = function(e) invokeRestart("use_default")
  )
  expect_identical(value, "default")
  expect_identical(cb$metrics()$calls, 1)
  expect_identical(cb$metrics()$failures, 1)
})

test_that("state changes go through methods; fields are read-only", {
  cb <- circuit_breaker()
  expect_error(cb$state <- "OPEN", class = "circuit_breaker_read_only")
  expect_error(cb$failure_count <- 0, class = "circuit_breaker_read_only")
  expect_error(cb$last_failure_time <- Sys.time(), class = "circuit_breaker_read_only")
  expect_error(cb$name <- "x", class = "circuit_breaker_read_only")
  expect_error(cb$state <- "OPEN", "reset")
  expect_identical(cb$state, "CLOSED")

  cb$force_open()
  expect_identical(cb$state, "FORCED_OPEN")
  expect_identical(cb$execute(succeed, fallback), "fallback")
  cond <- expect_error(cb$execute(succeed), class = "circuit_breaker_open")
  expect_identical(cond$retry_after, Inf)

  cb$disable()
  expect_identical(cb$state, "DISABLED")
  expect_identical(cb$execute(fail, fallback), "fallback")
  expect_identical(cb$execute(succeed, fallback), "ok")
  expect_identical(cb$metrics()$calls, 0)  # disabled: nothing recorded

  cb$reset()
  expect_identical(cb$state, "CLOSED")
})

test_that("writing a configuration field reconfigures the breaker", {
  b <- manual_breaker()
  cb <- b$cb
  cb$failure_threshold <- 2
  expect_identical(cb$failure_threshold, 2)
  trip(cb, 2)
  expect_identical(cb$state, "OPEN")
  # As in the original R6 class, a new recovery_timeout applies to the current opening.
  cb$recovery_timeout <- 5
  b$clock$advance(5.5)
  expect_identical(cb$execute(succeed, fallback), "ok")
  expect_identical(cb$state, "CLOSED")
  expect_error(cb$failure_threshold <- 0, class = "circuit_breaker_invalid_argument")
  expect_identical(cb$failure_threshold, 2)  # a rejected change changes nothing
})

test_that("on_success() and on_failure() record by hand, like the original R6 class", {
  cb <- circuit_breaker(failure_threshold = 2)
  cb$on_failure()
  cb$on_failure()
  expect_identical(cb$state, "OPEN")
  expect_identical(cb$failure_count, 2)
  cb$on_success()
  expect_identical(cb$state, "CLOSED")
  expect_identical(cb$failure_count, 0)
})

test_that("print() and format() show name, state and counts", {
  cb <- local_breaker(name = "inventory", failure_threshold = 2)
  cb$execute(fail, fallback)
  out <- capture.output(print(cb))
  expect_match(out[1], "<CircuitBreaker> inventory: CLOSED")
  expect_match(out[2], "failure_count: 1 \\(opens at 2\\)")
  expect_match(out[3], "1 failed")
  expect_snapshot(print(circuit_breaker(name = "snap")))
})

test_that("as.data.frame() gives one row of metrics", {
  cb <- local_breaker(name = "a")
  cb$execute(succeed)
  df <- as.data.frame(cb)
  expect_identical(nrow(df), 1L)
  expect_identical(df$name, "a")
  expect_identical(df$calls, 1)
  expect_setequal(names(df), names(cb$metrics()))
})

test_that("metrics() reports what happened", {
  b <- manual_breaker(failure_threshold = 2, recovery_timeout = 10)
  cb <- b$cb
  cb$execute(succeed)
  trip(cb)
  cb$execute(succeed, fallback)
  b$clock$advance(3)
  m <- cb$metrics()
  expect_identical(m$state, "OPEN")
  expect_identical(m$calls, 3)
  expect_identical(m$successes, 1)
  expect_identical(m$failures, 2)
  expect_identical(m$rejected, 1)
  expect_identical(m$times_opened, 1)
  expect_equal(m$seconds_in_state, 3)
  expect_equal(m$seconds_until_probe, 7)
  expect_equal(m$open_duration, 10)
  expect_equal(m$seconds_since_failure, 3)
})

test_that("the codes R passes to the binding and reads from it come from the binding, by name", {
  codes <- cb_codes()
  expect_identical(OUTCOME_FAILURE, codes$outcome[["failure"]])
  expect_identical(REJECTION_FULL, as.double(codes$rejection[["full"]]))
  # Each field of a rejection vector is where R reads it.
  cb <- circuit_breaker(failure_threshold = 1, recovery_timeout = 60)
  cb$force_open()
  cond <- tryCatch(cb$execute(function() "never"), circuit_breaker_open = identity)
  expect_identical(cond$state, "FORCED_OPEN")
  expect_identical(cond$reason, "forced_open")
  # A name the binding no longer gives fails when the package loads.
  renamed <- codes
  names(renamed$rejection_field)[names(renamed$rejection_field) == "max_wait"] <- "wait"
  expect_error(install_core_codes(new.env(), renamed), "no rejection_field code named max_wait")
})
