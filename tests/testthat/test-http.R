# httr, httr2 and curl against a real server on 127.0.0.1.

server <- local_downstream()

# A port that was free a moment ago: nothing listens there now.
refused_url <- function() paste0("http://127.0.0.1:", free_port(), "/")

test_that("httr responses are classified by status inside execute()", {
  skip_if_not_installed("httr")
  cb <- circuit_breaker(failure_threshold = 2)
  ok <- cb$execute(function() httr::GET(server$url("/ok")), fallback)
  expect_identical(httr::status_code(ok), 200L)
  nf <- cb$execute(function() httr::GET(server$url("/status/404")), fallback)
  expect_identical(httr::status_code(nf), 404L)  # the downstream answered: healthy
  expect_identical(cb$metrics()$successes, 2)

  cond <- cb$execute(function() httr::GET(server$url("/status/503")), function(cond) cond)
  expect_s3_class(cond, "circuit_breaker_http_failure")
  expect_identical(cond$status, 503L)
  expect_s3_class(cond$response, "response")
  # Without a fallback the response itself comes back, recorded as a failure.
  r <- cb$execute(function() httr::GET(server$url("/status/500")))
  expect_identical(httr::status_code(r), 500L)
  expect_identical(cb$state, "OPEN")
  expect_identical(cb$metrics()$failures, 2)
})

test_that("httr's stop_for_status() errors follow the same statuses", {
  skip_if_not_installed("httr")
  cb <- circuit_breaker(failure_threshold = 1)
  get_checked <- function(path) function() httr::stop_for_status(httr::GET(server$url(path)))
  expect_error(cb$execute(get_checked("/status/404"), fallback), class = "http_404")
  expect_identical(cb$metrics()$ignored, 1)
  expect_identical(cb$execute(get_checked("/status/502"), fallback), "fallback")
  expect_identical(cb$state, "OPEN")
})

test_that("breaker_perform() classifies httr2 responses and errors", {
  skip_if_not_installed("httr2")
  cb <- circuit_breaker(failure_threshold = 2, name = "httr2 test")
  resp <- breaker_perform(httr2::request(server$url("/ok")), cb)
  expect_s3_class(resp, "httr2_response")
  # A 404 raises httr2's own error, which propagates and counts nowhere.
  err <- expect_error(breaker_perform(httr2::request(server$url("/status/404")), cb, fallback))
  expect_s3_class(err, "httr2_http_404")
  expect_identical(cb$metrics()$ignored, 1)
  # A 503 is a failure; the fallback receives httr2's error.
  cond <- breaker_perform(httr2::request(server$url("/status/503")), cb, function(cond) cond)
  expect_s3_class(cond, "httr2_http_503")
  expect_identical(cb$failure_count, 1)
  # A response returned (httr2 told not to raise) is classified by status.
  no_raise <- httr2::req_error(httr2::request(server$url("/status/500")), is_error = function(resp) FALSE)
  cond <- breaker_perform(no_raise, cb, function(cond) cond)
  expect_s3_class(cond, "circuit_breaker_http_failure")
  expect_identical(cb$state, "OPEN")
  expect_identical(breaker_perform(httr2::request(server$url("/ok")), cb, fallback), "fallback")
})

test_that("breaker_fetch() classifies curl responses", {
  skip_if_not_installed("curl")
  cb <- circuit_breaker(failure_threshold = 2)
  res <- breaker_fetch(server$url("/ok"), breaker = cb)
  expect_identical(res$status_code, 200L)
  cond <- breaker_fetch(server$url("/status/500"), breaker = cb, fallback = function(cond) cond)
  expect_s3_class(cond, "circuit_breaker_http_failure")
  expect_identical(cond$response$status_code, 500L)
  res <- breaker_fetch(server$url("/status/408"), breaker = cb)
  expect_identical(res$status_code, 408L)  # returned as is, recorded as failure
  expect_identical(cb$state, "OPEN")
  # A custom set of failing statuses.
  strict <- circuit_breaker(failure_threshold = 1, failure_statuses = 404)
  expect_identical(breaker_fetch(server$url("/status/404"), breaker = strict, fallback = fallback), "fallback")
  lenient <- circuit_breaker(failure_threshold = 1, failure_statuses = integer())
  expect_identical(breaker_fetch(server$url("/status/503"), breaker = lenient)$status_code, 503L)
  expect_identical(lenient$state, "CLOSED")
})

test_that("Retry-After on 429 and 503 sets how long the breaker stays open", {
  skip_if_not_installed("curl")
  cb <- circuit_breaker(failure_threshold = 1, recovery_timeout = 1)
  breaker_fetch(server$url("/status/429?retry_after=120"), breaker = cb, fallback = fallback)
  expect_identical(cb$state, "OPEN")
  expect_equal(cb$metrics()$open_duration, 120)

  capped <- circuit_breaker(failure_threshold = 1, recovery_timeout = 1, max_recovery_timeout = 10)
  breaker_fetch(server$url("/status/503?retry_after=120"), breaker = capped, fallback = fallback)
  expect_equal(capped$metrics()$open_duration, 10)

  deaf <- circuit_breaker(failure_threshold = 1, recovery_timeout = 1, respect_retry_after = FALSE)
  breaker_fetch(server$url("/status/503?retry_after=120"), breaker = deaf, fallback = fallback)
  expect_equal(deaf$metrics()$open_duration, 1)

  skip_if_not_installed("httr2")
  via_error <- circuit_breaker(failure_threshold = 1, recovery_timeout = 1)
  breaker_perform(httr2::request(server$url("/status/429?retry_after=60")), via_error, fallback)
  expect_equal(via_error$metrics()$open_duration, 60)
})

test_that("Retry-After dates are understood", {
  now <- as.POSIXct("2026-01-01 12:00:00", tz = "GMT")
  expect_equal(retry_after_seconds("Thu, 01 Jan 2026 12:00:30 GMT", now), 30)
  expect_identical(retry_after_seconds("45"), 45)
  expect_null(retry_after_seconds("soon"))
  expect_null(retry_after_seconds(NULL))
})

test_that("the breaker's timeout bounds each call and a timeout is a failure", {
  skip_if_not_installed("httr2")
  skip_if_not_installed("curl")
  cb <- circuit_breaker(failure_threshold = 2, timeout = 0.3, slow_call_duration = 0.2)
  cond <- breaker_fetch(server$url("/hang?seconds=1"), breaker = cb, fallback = function(cond) cond)
  expect_match(conditionMessage(cond), "[Tt]imeout|timed out")
  cond <- breaker_perform(httr2::request(server$url("/hang?seconds=1")), cb, function(cond) cond)
  expect_s3_class(cond, "error")
  m <- cb$metrics()
  expect_identical(m$failures, 2)
  expect_identical(m$slow_calls, 2)
  expect_identical(cb$state, "OPEN")
  # A timeout the caller set is kept.
  patient <- circuit_breaker(timeout = 0.2)
  resp <- breaker_perform(httr2::req_timeout(httr2::request(server$url("/hang?seconds=0.5")), 5), patient)
  expect_identical(httr2::resp_status(resp), 200L)
})

test_that("transport errors from every client are failures", {
  skip_if_not_installed("httr")
  skip_if_not_installed("httr2")
  skip_if_not_installed("curl")
  dropping <- local_dropping_server()
  for (url in c(refused_url(), paste0(dropping, "/"))) {
    cb <- circuit_breaker(failure_threshold = 3, timeout = 5)
    errors <- list(
      curl = breaker_fetch(url, breaker = cb, fallback = function(cond) cond),
      httr = cb$execute(function() httr::GET(url, httr::timeout(5)), function(cond) cond),
      httr2 = breaker_perform(httr2::request(url), cb, function(cond) cond)
    )
    for (client in names(errors)) {
      expect_s3_class(errors[[client]], "error")
    }
    # httr2 wraps transport errors: httr2_failed before 1.0, httr2_failure after.
    expect_true(inherits(errors$httr2, "httr2_failed") || inherits(errors$httr2, "httr2_failure"))
    expect_identical(cb$state, "OPEN", label = url)
    expect_identical(cb$metrics()$failures, 3)
  }
})

test_that("HTTP error conditions of current and older httr2 and httr are recognised", {
  # Condition objects as each version builds them (no client is mocked: these
  # are the shapes the classifier reads).
  new_httr2 <- structure(class = c("httr2_http_503", "httr2_http", "httr2_error", "rlang_error", "error", "condition"),
                         list(message = "HTTP 503",
                              resp = structure(list(status_code = 503L), class = "httr2_response")))
  old_httr2 <- structure(class = c("httr2_http_404", "httr2_http", "httr2_error", "rlang_error", "error", "condition"),
                         list(message = "HTTP 404"))
  httr_cond <- structure(class = c("http_429", "http_400", "http_error", "error", "condition"),
                         list(message = "Too Many Requests"))
  expect_identical(http_error_status(new_httr2), 503L)
  expect_identical(http_error_status(old_httr2), 404L)
  expect_identical(http_error_status(httr_cond), 429L)
  expect_null(http_error_status(simpleError("Failed to connect to 127.0.0.1 port 1")))
  curl6 <- structure(class = c("curl_error_couldnt_connect", "curl_error", "error", "condition"),
                     list(message = "Could not connect"))
  expect_null(http_error_status(curl6))
})

test_that("the HTTP wrappers check their arguments", {
  skip_if_not_installed("httr2")
  expect_error(breaker_perform("http://127.0.0.1/"), class = "circuit_breaker_invalid_argument")
  expect_error(breaker_perform(httr2::request(server$url("/ok")), breaker = "x"),
               class = "circuit_breaker_invalid_argument")
  expect_error(breaker_fetch(42), class = "circuit_breaker_invalid_argument")
  expect_error(breaker_fetch("not a url"), class = "circuit_breaker_invalid_argument")
  expect_error(breaker_fetch(server$url("/ok"), handle = "h", breaker = circuit_breaker()),
               class = "circuit_breaker_invalid_argument")
})
