# Every argument of every exported function, tried with a set of bad-looking
# values: each value that is not documented as valid for that argument must
# give an error inheriting from circuit_breaker_error that names the argument,
# and nothing may crash.

candidates <- list(
  `NA` = NA, `NA_real_` = NA_real_, `NA_integer_` = NA_integer_, `NULL` = NULL,
  negative = -1, zero = 0, fraction = 0.5, one = 1, `Inf` = Inf, `-Inf` = -Inf,
  `NaN` = NaN, huge = 1e300, string = "a", empty_string = "",
  two_numbers = c(1, 2), empty_numeric = numeric(), `TRUE` = TRUE,
  list = list(1), a_function = function() 1, a_date = Sys.Date(),
  factor = factor("a")
)

is_single_number <- function(x) {
  is.numeric(x) && !is.object(x) && length(x) == 1L && !is.na(x)
}
is_whole <- function(x) is_single_number(x) && is.finite(x) && x == floor(x)
is_seconds <- function(x, zero_ok) {
  is_single_number(x) && is.finite(x) && (if (zero_ok) x >= 0 else x > 0) && x <= 1e9
}
null_or <- function(pred) function(x) is.null(x) || pred(x)

# What the documentation says each argument accepts (with the other
# arguments at their defaults).
valid <- list(
  failure_threshold = function(x) (is_whole(x) && x >= 1) || identical(x, Inf),
  recovery_timeout = function(x) is_seconds(x, TRUE),
  failure_rate_threshold = null_or(function(x) is_single_number(x) && x > 0 && x <= 1),
  window_type = function(x) identical(x, "count") || identical(x, "time"),
  window_size = null_or(function(x) is_whole(x) && x >= 1 && x <= 1024),
  minimum_calls = null_or(function(x) is_whole(x) && x >= 1 && x <= 100),
  slow_call_duration = null_or(function(x) is_seconds(x, FALSE)),
  slow_call_rate_threshold = is.null,  # needs slow_call_duration, unset here
  half_open_max_calls = function(x) is_whole(x) && x >= 1 && x <= 32,
  half_open_max_wait = null_or(function(x) is_seconds(x, FALSE)),
  backoff_multiplier = function(x) is_single_number(x) && is.finite(x) && x >= 1 && x <= 1e6,
  max_recovery_timeout = null_or(function(x) is_seconds(x, TRUE) && x >= 30),
  jitter = function(x) is_single_number(x) && x >= 0 && x <= 1,
  ramp_up = function(x) is_seconds(x, TRUE),
  failure_when = null_or(is.function),
  ignore = null_or(function(x) is.character(x) && length(x) > 0 && !anyNA(x) && all(nzchar(x)) && !is.object(x)),
  timeout = null_or(function(x) is_single_number(x) && is.finite(x) && x > 0 && x <= 1e6),
  failure_statuses = function(x) is.numeric(x) && !is.object(x) && !anyNA(x) && all(x == floor(x)) && all(x >= 100 & x <= 599),
  respect_retry_after = function(x) isTRUE(x) || isFALSE(x),
  clock = is.null,
  name = null_or(function(x) is.character(x) && length(x) == 1 && !is.na(x) && nzchar(x) && !is.object(x))
)

expect_rejects <- function(expr, arg, label) {
  err <- tryCatch({
    expr
    NULL
  }, error = function(e) e)
  if (is.null(err)) {
    testthat::fail(paste0(label, ": no error"))
    return(invisible())
  }
  expect_s3_class(err, "circuit_breaker_error")
  expect_true(grepl(arg, conditionMessage(err), fixed = TRUE),
              label = paste0(label, ": message names `", arg, "`: ", conditionMessage(err)))
  expect_true(grepl("must be", conditionMessage(err), fixed = TRUE), label = label)
}

test_that("valid() covers every argument of circuit_breaker()", {
  expect_setequal(names(valid), names(formals(circuit_breaker)))
  expect_identical(formals(circuit_breaker), formals(CircuitBreaker$public_methods$initialize))
})

test_that("every argument of circuit_breaker() rejects bad values with a classed error", {
  for (arg in names(valid)) {
    for (label in names(candidates)) {
      value <- candidates[label]  # a list, so NULL survives
      names(value) <- arg
      what <- paste0(arg, " = ", label)
      if (valid[[arg]](value[[1]])) {
        expect_no_error(do.call(circuit_breaker, value), message = what)
      } else {
        expect_rejects(do.call(circuit_breaker, value), arg, what)
        expect_rejects(do.call(CircuitBreaker$new, value), arg, what)
      }
    }
  }
})

test_that("cross-argument rules name the argument", {
  expect_rejects(circuit_breaker(slow_call_rate_threshold = 0.5), "slow_call_rate_threshold", "no duration")
  expect_rejects(circuit_breaker(window_size = 10, minimum_calls = 11), "minimum_calls", "min > window")
  expect_rejects(circuit_breaker(recovery_timeout = 10, max_recovery_timeout = 5), "max_recovery_timeout", "cap < timeout")
  expect_rejects(circuit_breaker(window_type = "time", window_size = 0), "window_size", "time window 0")
  expect_no_error(circuit_breaker(window_type = "time", window_size = 2000, minimum_calls = 500))
  expect_no_error(circuit_breaker(slow_call_duration = 1, slow_call_rate_threshold = 1))
})

test_that("execute() checks its arguments before doing anything", {
  cb <- circuit_breaker()
  for (label in names(candidates)) {
    value <- candidates[[label]]
    if (!is.function(value)) {
      expect_rejects(cb$execute(value, fallback), "request_func", label)
      if (!is.null(value)) expect_rejects(cb$execute(succeed, value), "fallback_func", label)
    }
  }
  m <- cb$metrics()
  expect_identical(m$calls + m$rejected + m$released, 0)  # nothing was counted
  expect_identical(cb$state, "CLOSED")
})

test_that("configure(), on() and off() reject bad input without changing the breaker", {
  cb <- circuit_breaker(failure_threshold = 3)
  before <- cb$config
  for (arg in setdiff(names(valid), c("clock", "name"))) {
    for (label in names(candidates)) {
      value <- candidates[label]
      names(value) <- arg
      if (!valid[[arg]](value[[1]])) {
        expect_rejects(do.call(cb$configure, value), arg, paste("configure", arg, label))
      }
    }
  }
  expect_identical(cb$config, before)
  expect_rejects(cb$configure(3), "...", "unnamed")
  expect_rejects(cb$configure(colour = "red"), "colour", "unknown")
  for (label in names(candidates)) {
    expect_rejects(cb$on(candidates[[label]], function() NULL), "event", label)
    if (!is.function(candidates[[label]])) {
      expect_rejects(cb$on("success", candidates[[label]]), "callback", label)
    }
    if (!is_single_number(candidates[[label]])) {
      expect_rejects(cb$off(candidates[[label]]), "id", label)
    }
  }
  expect_identical(cb$execute(succeed), "ok")
})

test_that("the manual clock rejects bad input", {
  for (label in names(candidates)) {
    value <- candidates[[label]]
    if (!is_seconds(value, TRUE) || value > 4e9) {
      expect_rejects(breaker_manual_clock(value), "start", label)
    }
  }
  clock <- breaker_manual_clock()
  for (label in names(candidates)) {
    value <- candidates[[label]]
    if (!is_seconds(value, TRUE) || value > 4e9) {
      expect_rejects(clock$advance(value), "seconds", label)
    }
  }
  expect_identical(clock$now(), 0)
  expect_rejects(circuit_breaker(clock = list(ptr = NULL)), "clock", "fake clock")
})
