test_that("listeners hear state changes in order, after the transition", {
  b <- manual_breaker(failure_threshold = 2, recovery_timeout = 1)
  cb <- b$cb
  seen <- character()
  states_seen_by_listener <- character()
  cb$on("state_change", function(from, to, breaker) {
    seen <<- c(seen, paste(from, "->", to))
    states_seen_by_listener <<- c(states_seen_by_listener, breaker$state)
  })
  trip(cb)
  b$clock$advance(2)
  cb$execute(succeed, fallback)
  expect_identical(seen, c("CLOSED -> OPEN", "OPEN -> HALF_OPEN", "HALF_OPEN -> CLOSED"))
  # The listener ran once the core had finished: it reads the new state.
  expect_identical(states_seen_by_listener[1], "OPEN")
  expect_identical(states_seen_by_listener[3], "CLOSED")
  cb$force_open()
  cb$reset()
  expect_identical(tail(seen, 2), c("CLOSED -> FORCED_OPEN", "FORCED_OPEN -> CLOSED"))
})

test_that("success, failure, rejected and ignored events carry their arguments", {
  cb <- circuit_breaker(failure_threshold = 1, ignore = "not_my_problem")
  log <- list()
  cb$on("success", function(value) log[[length(log) + 1]] <<- list("success", value))
  cb$on("failure", function(condition) log[[length(log) + 1]] <<- list("failure", conditionMessage(condition)))
  cb$on("ignored", function(condition) log[[length(log) + 1]] <<- list("ignored", class(condition)[1]))
  cb$on("rejected", function(retry_after, ...) log[[length(log) + 1]] <<- list("rejected", retry_after > 0))
  cb$execute(succeed)
  not_my_problem <- structure(class = c("not_my_problem", "error", "condition"),
                              list(message = "bad request", call = NULL))
  try(cb$execute(function() stop(not_my_problem)), silent = TRUE)
  cb$execute(fail, fallback)
  cb$execute(succeed, fallback)
  expect_identical(log, list(
    list("success", "ok"),
    list("ignored", "not_my_problem"),
    list("failure", "downstream failed"),
    list("rejected", TRUE)
  ))
})

test_that("listeners run in registration order and off() removes them", {
  cb <- circuit_breaker()
  order <- character()
  id1 <- cb$on("success", function() order <<- c(order, "first"))
  id2 <- cb$on("success", function() order <<- c(order, "second"))
  cb$execute(succeed)
  expect_identical(order, c("first", "second"))
  expect_true(cb$off(id1))
  expect_false(cb$off(id1))
  cb$execute(succeed)
  expect_identical(order, c("first", "second", "second"))
  cb$off(id2)
  cb$execute(succeed)
  expect_length(order, 3)
})

test_that("a failing listener becomes a warning and changes nothing", {
  cb <- circuit_breaker(failure_threshold = 1)
  cb$on("state_change", function(...) stop("listener bug"))
  expect_warning(value <- cb$execute(fail, fallback), class = "circuit_breaker_listener_error")
  expect_identical(value, "fallback")
  expect_identical(cb$state, "OPEN")
  w <- tryCatch(cb$reset(), warning = function(w) w)
  expect_match(conditionMessage(w), "listener bug")
  expect_identical(cb$state, "CLOSED")
})

test_that("transitions made before a listener was registered are not replayed", {
  cb <- circuit_breaker(failure_threshold = 1)
  trip(cb, 1)
  seen <- character()
  cb$on("state_change", function(to) seen <<- c(seen, to))
  cb$reset()
  expect_identical(seen, "CLOSED")
})
