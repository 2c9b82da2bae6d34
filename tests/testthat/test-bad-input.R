# Every argument of every exported function, tried with the bad-looking
# values of helper-bad-input.R: each value that is not documented as valid
# for that argument must give an error inheriting from circuit_breaker_error
# that names the argument, and nothing may crash. Valid values are called only
# where that starts nothing (no servers, no demonstrations); the other test
# files exercise them.

test_that("every exported function with arguments has a bad-input spec", {
  exported <- exported_functions()
  expect_identical(setdiff(exported, c(names(bad_input_specs), bad_input_not_walked)), character())
  for (name in intersect(bad_input_not_walked, exported)) {
    expect_length(formals(getExportedValue("circuitbreaker", name)), 0L)
  }
  # Every argument of each walked function is tried (but `...`).
  for (name in intersect(exported, names(bad_input_specs))) {
    expect_setequal(setdiff(names(bad_input_specs[[name]]$valid), "..."),
                    setdiff(names(formals(getExportedValue("circuitbreaker", name))), "..."))
  }
})

test_that("the specs of circuit_breaker() and CircuitBreaker$new() agree", {
  expect_setequal(names(breaker_arguments_valid), names(formals(circuit_breaker)))
  expect_identical(formals(circuit_breaker), formals(CircuitBreaker$public_methods$initialize))
})

test_that("every argument of circuit_breaker() and the manual clock rejects bad values with a classed error", {
  walked <- walk_exported("breaker", must_be = TRUE)
  expect_setequal(walked, c("circuit_breaker", "breaker_manual_clock", "share"))
})

test_that("cross-argument rules name the argument", {
  expect_rejects(circuit_breaker(slow_call_rate_threshold = 0.5), "slow_call_rate_threshold", "no duration",
                 must_be = TRUE)
  expect_rejects(circuit_breaker(window_size = 10, minimum_calls = 11), "minimum_calls", "min > window",
                 must_be = TRUE)
  expect_rejects(circuit_breaker(recovery_timeout = 10, max_recovery_timeout = 5), "max_recovery_timeout",
                 "cap < timeout", must_be = TRUE)
  expect_rejects(circuit_breaker(window_type = "time", window_size = 0), "window_size", "time window 0",
                 must_be = TRUE)
  expect_no_error(circuit_breaker(window_type = "time", window_size = 2000, minimum_calls = 500))
  expect_no_error(circuit_breaker(slow_call_duration = 1, slow_call_rate_threshold = 1))
})

test_that("execute() checks its arguments before doing anything", {
  cb <- circuit_breaker()
  walk_bad_input(cb$execute, list(request_func = succeed, fallback_func = fallback),
                 list(request_func = is.function, fallback_func = is_fn_or_null),
                 label = "execute", must_be = TRUE)
  m <- cb$metrics()
  expect_identical(m$calls + m$rejected + m$released, 0)  # nothing was counted
  expect_identical(cb$state, "CLOSED")
})

test_that("configure(), on() and off() reject bad input without changing the breaker", {
  cb <- circuit_breaker(failure_threshold = 3)
  before <- cb$config
  configurable <- breaker_arguments_valid[setdiff(names(breaker_arguments_valid), c("clock", "name"))]
  # Valid values are not applied here: each would change the breaker.
  walk_bad_input(cb$configure, list(), configurable, label = "configure", must_be = TRUE)
  expect_identical(cb$config, before)
  expect_rejects(cb$configure(3), "...", "unnamed", must_be = TRUE)
  expect_rejects(cb$configure(colour = "red"), "colour", "unknown", must_be = TRUE)
  walk_bad_input(cb$on, list(event = "success", callback = function() NULL),
                 list(event = nothing, callback = is.function), label = "on", must_be = TRUE)
  walk_bad_input(cb$off, list(id = 1), list(id = is_single_number), label = "off", must_be = TRUE)
  expect_identical(cb$execute(succeed), "ok")
})

test_that("the manual clock's advance() rejects bad input", {
  clock <- breaker_manual_clock()
  walk_bad_input(clock$advance, list(), list(seconds = function(x) is_seconds(x, TRUE) && x <= 4e9),
                 label = "advance", must_be = TRUE)
  expect_identical(clock$now(), 0)
  expect_rejects(circuit_breaker(clock = list(ptr = NULL)), "clock", "fake clock", must_be = TRUE)
})

test_that("the registry functions reject bad input", {
  walk_exported("registry")
})

test_that("the host store functions reject bad input", {
  skip_if_not(circuitbreaker:::cb_host_supported(), "host-shared breakers need Linux")
  local_default_store_directory()  # breaker_store_host() makes it: removed after
  walk_exported("store", must_be = TRUE)
})

test_that("the Redis store functions reject bad input", {
  skip_if_not(circuitbreaker:::cb_redis_available(), "this build has no hiredis")
  walk_exported("fleet_store", must_be = TRUE)
})

test_that("the HTTP wrappers reject bad input", {
  skip_if_not_installed("httr2")
  skip_if_not_installed("curl")
  walk_exported("http")
})

test_that("breaker_perform_async() rejects bad input", {
  skip_if_not_installed("httr2")
  skip_if_not_installed("promises")
  skip_if_not(exists("req_perform_promise", asNamespace("httr2")),
              "this httr2 has no req_perform_promise(): breaker_perform_async() refuses every call")
  walk_exported("http_async")
})

test_that("the plumber and Shiny helpers reject bad input", {
  skip_if_not_installed("plumber")
  skip_if_not_installed("shiny")
  walk_exported("plumber_shiny")
})

test_that("the plumber2 helper rejects bad input", {
  skip_without_plumber2()
  walk_exported("plumber2")
})
