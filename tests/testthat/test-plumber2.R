# The plumber2 integration, with real processes: a downstream webfakes app
# whose health the tests switch (quote_downstream_app(), helper-plumber.R),
# and plumber2 APIs (the package's example inst/plumber2/guarded-api, and
# one built here) served in background R processes on 127.0.0.1.

test_that("without plumber2, api_circuit_breakers() says which package it needs", {
  skip_if(requireNamespace("plumber2", quietly = TRUE), "plumber2 is installed")
  expect_error(api_circuit_breakers(list()), class = "circuit_breaker_missing_package")
})

test_that("api_circuit_breakers() checks its arguments", {
  skip_without_plumber2()
  api <- plumber2::api()
  expect_error(api_circuit_breakers(list()), class = "circuit_breaker_invalid_argument")
  expect_error(api_circuit_breakers(structure(list(), class = "Plumber")), class = "circuit_breaker_invalid_argument")
  bad_paths <- list("circuit-breakers", "/circuit-breakers/", "/", "/a b", "/<name>", "/:name", "/a/*",
                    c("/a", "/b"), NA_character_, 1)
  for (path in bad_paths) {
    expect_error(api_circuit_breakers(api, path = path), class = "circuit_breaker_invalid_argument")
  }
  expect_error(api_circuit_breakers(api, authorize = TRUE), class = "circuit_breaker_invalid_argument")
  expect_snapshot(error = TRUE, {
    api_circuit_breakers(list())
    api_circuit_breakers(api, path = "/circuit-breakers/")
    api_circuit_breakers(api, authorize = "s3cret")
  })
  # Nothing was added by the failed calls.
  expect_length(api$request_router$routes, 0L)
})

test_that("api_circuit_breakers() adds its routes, the control routes only with `authorize`", {
  skip_without_plumber2()
  api <- suppressMessages(plumber2::api())
  # (plumber2 says when it creates the API's first route, as for api_get().)
  expect_identical(suppressMessages(api_circuit_breakers(api, "/ops/breakers")), api)
  route <- api$request_router$get_route(api$request_router$routes[[1]])
  has <- function(method, path) !is.null(route$get_handler(method, path))
  expect_true(has("get", "/ops/breakers"))
  expect_true(has("get", "/ops/breakers/metrics"))
  expect_false(has("post", "/ops/breakers/:name/reset"))
  api_circuit_breakers(api, "/admin/breakers", authorize = function(request) FALSE)
  for (action in c("reset", "force-open", "disable")) {
    expect_true(has("post", paste0("/admin/breakers/:name/", action)))
  }
})

skip_on_cran()
skip_without_plumber2()
skip_if_not_installed("webfakes")
skip_if_not_installed("callr")
skip_if_not_installed("curl")
skip_if_not_installed("jsonlite")
skip_if_not_installed("later")
skip_if_not_installed("promises")

downstream <- local_downstream(quote_downstream_app())
admin <- c(`X-Admin-Token` = "s3cret")

test_that("rejected calls answer 503 with Retry-After; other errors keep plumber2's treatment", {
  api <- local_plumber2_api(function() {
    library(circuitbreaker)
    held <- circuit_breaker(name = "held")
    held$force_open()
    probing <- circuit_breaker(name = "probing", recovery_timeout = 0.5, failure_threshold = 1)
    circuit_breaker(name = "team/orders")
    # api_circuit_breakers() comes first: the handlers added after it are
    # guarded too.
    suppressMessages(plumber2::api()) |>
      api_circuit_breakers("/ops/breakers", authorize = function(request) {
        identical(request$get_header("X-Admin-Token"), "s3cret")
      }) |>
      plumber2::api_get("/ping", function() list(ok = TRUE)) |>
      plumber2::api_get("/held", function() held$execute(function() "not called")) |>
      plumber2::api_get("/held/fallback", function() held$execute(function() "not called", function() "fallback")) |>
      plumber2::api_get("/wrapped", function() {
        tryCatch(held$execute(function() "not called"),
                 error = function(e) rlang::abort("the quote service failed", parent = e))
      }) |>
      plumber2::api_get("/held/promise", function() {
        held$execute_async(function() promises::promise_resolve("not called"))
      }) |>
      plumber2::api_get("/held/text", function() held$execute(function() "not called"),
                        serializers = plumber2::get_serializers("text")) |>
      plumber2::api_get_header("/held/header", function() held$execute(function() "not called")) |>
      plumber2::api_post("/probing/trip", function() {
        probing$execute(function() stop("down"), function() NULL)
        probing$state
      }) |>
      plumber2::api_get("/probing", function() probing$execute(function() "probe")) |>
      plumber2::api_get("/boom", function() stop("kaboom")) |>
      plumber2::api_get("/boom/promise", function() promises::promise_reject(simpleError("kaboom"))) |>
      plumber2::api_get("/teapot", function() plumber2::abort_status(418L))
  })

  # A breaker forced open: 503 without Retry-After, the body of
  # breaker_error_handler().
  rejected_body <- list(error = "503 - Service Unavailable", breaker = "held", state = "FORCED_OPEN",
                        retry_after = NULL)
  res <- http_call(api$url("/held"))
  expect_equal(res$status, 503L)
  expect_null(res$headers[["retry-after"]])
  expect_match(res$headers[["content-type"]], "^application/json")
  expect_equal(res$json, rejected_body)
  expect_identical(res$body, paste0('{"error":"503 - Service Unavailable","breaker":"held",',
                                    '"state":"FORCED_OPEN","retry_after":null}'))
  # The same from a rejected promise, from a handler whose serializer is not
  # JSON, for a rejection wrapped in another error (as its `parent`), and
  # from a header handler (run before the body is read).
  for (path in c("/held/promise", "/held/text", "/wrapped", "/held/header")) {
    res <- http_call(api$url(path))
    expect_equal(res$status, 503L, label = path)
    expect_equal(res$json, rejected_body, label = path)
  }
  # A fallback answers as usual.
  expect_equal(http_call(api$url("/held/fallback"))$json, list("fallback"))

  # Other errors: plumber2's 500, its abort_*() answers.
  for (path in c("/boom", "/boom/promise")) {
    res <- http_call(api$url(path))
    expect_equal(res$status, 500L, label = path)
    expect_null(res$headers[["retry-after"]])
  }
  expect_equal(http_call(api$url("/teapot"))$status, 418L)

  expect_short_retry_after(api, trip = "/probing/trip", probe = "/probing")

  # The status route: every registered breaker, the fields of
  # pr_circuit_breakers()'s.
  res <- http_call(api$url("/ops/breakers"))
  expect_equal(res$status, 200L)
  expect_match(res$headers[["content-type"]], "^application/json")
  expect_equal(res$headers[["cache-control"]], "no-store")
  expect_setequal(vapply(res$json, function(b) b$name, ""), c("held", "probing", "team/orders"))
  held <- breaker_status(res, "held")
  expect_setequal(names(held), names(circuitbreaker:::web_status(circuit_breaker()$metrics())))
  expect_equal(held$state, "FORCED_OPEN")
  expect_null(held$seconds_until_probe)
  expect_equal(held$rejected, 6)
  expect_equal(breaker_status(res, "probing")$state, "CLOSED")

  # Control routes: a name with a `/`, percent-encoded.
  res <- http_call(api$url("/ops/breakers/team%2Forders/force-open"), "POST", admin)
  expect_equal(res$status, 200L)
  expect_equal(res$json$name, "team/orders")
  expect_equal(res$json$state, "FORCED_OPEN")
  expect_equal(res$headers[["cache-control"]], "no-store")
  res <- http_call(api$url("/ops/breakers/held/reset"), "POST", admin)
  expect_equal(res$json$state, "CLOSED")
  expect_equal(http_call(api$url("/held"))$json, list("not called"))
})

example_env <- function(token = "s3cret", recovery = 30) {
  c(DOWNSTREAM_URL = downstream$url("/quote"), ADMIN_TOKEN = token, RECOVERY_TIMEOUT = recovery)
}

test_that("the example API's synchronous routes degrade to the fallback, then answer 503", {
  api <- local_plumber2_api("guarded-api", example_env())
  expect_equal(http_call(api$url("/ping"))$json, list(ok = TRUE))

  expect_guarded_routes(api, downstream)

  # Other errors keep plumber2's treatment: a 404 from the downstream counts
  # nowhere for the breaker and propagates; the API answers 500.
  http_call(api$url("/circuit-breakers/quotes/reset"), "POST", admin)
  set_downstream_mode(downstream, "missing")
  res <- http_call(api$url("/quote"))
  expect_equal(res$status, 500L)
  expect_null(res$headers[["retry-after"]])
  expect_equal(quotes_status(api)$ignored, 1)
})

test_that("the example API's asynchronous routes behave the same", {
  skip_if_not_installed("httr2", "1.0.0")
  skip_if_not_installed("later", "1.4.0")
  api <- local_plumber2_api("guarded-api", example_env())
  expect_guarded_routes(api, downstream, "/quote/async")
})

test_that("the example API's control routes need the admin token and change the breaker", {
  api <- local_plumber2_api("guarded-api", example_env())
  expect_control_routes(api, downstream, admin, live = c("/quote/live", "/quote/async/live"))
  expect_strict_route_names(api, admin)
})

test_that("the example API recovers once the downstream is back; without a token it has no control routes", {
  skip_if_not_installed("httr2", "1.0.0")
  skip_if_not_installed("later", "1.4.0")
  api <- local_plumber2_api("guarded-api", example_env(token = "", recovery = 0.5))
  for (action in c("reset", "force-open", "disable")) {
    res <- http_call(api$url(paste0("/circuit-breakers/quotes/", action)), "POST", admin)
    expect_equal(res$status, 404L)
  }

  set_downstream_mode(downstream, "down")
  for (i in 1:3) expect_equal(http_call(api$url("/quote/async"))$json$source, "fallback")
  expect_equal(quotes_status(api)$times_opened, 1)
  set_downstream_mode(downstream, "up")
  # Once the recovery timeout has passed, a probe finds the downstream
  # healthy and the breaker closes. Bounded: at most 10 s of asking.
  deadline <- Sys.time() + 10
  repeat {
    res <- http_call(api$url("/quote/async"))
    if (identical(res$json$source, "downstream") || Sys.time() > deadline) break
    Sys.sleep(0.1)
  }
  expect_equal(res$json$source, "downstream")
  expect_equal(res$json$quote$price, 42.5)
  expect_equal(quotes_status(api)$state, "CLOSED")
  expect_equal(http_call(api$url("/quote"))$json$source, "downstream")
})

test_that("the example API's mirai route is guarded by the breaker in the API's process", {
  skip_if_not_installed("mirai")
  api <- local_plumber2_api("guarded-api", example_env(), wait = 60)
  set_downstream_mode(downstream, "up")
  res <- http_call(api$url("/quote/mirai"), timeout = 30)
  expect_equal(res$status, 200L)
  expect_equal(res$json$source, "downstream")
  expect_equal(res$json$quote$price, 42.5)

  set_downstream_mode(downstream, "down")
  for (i in 1:3) {
    res <- http_call(api$url("/quote/mirai"), timeout = 30)
    expect_equal(res$json$source, "fallback")
  }
  status <- quotes_status(api)
  expect_equal(status$state, "OPEN")
  expect_equal(status$successes, 1)
  expect_equal(status$failures, 3)
  # Open: the fallback answers without a call to the daemon.
  set_downstream_mode(downstream, "up")
  res <- http_call(api$url("/quote/mirai"), timeout = 30)
  expect_equal(res$json$source, "fallback")
  expect_identical(res$json$reason, "breaker open")
  expect_equal(quotes_status(api)$rejected, 1)
})

test_that("a call refused by a full bulkhead answers 503 with Retry-After: 1 (plumber2)", {
  api <- local_plumber2_api(function() {
    library(circuitbreaker)
    bulk <- circuit_breaker(name = "bulk", max_concurrent = 1)
    suppressMessages(plumber2::api()) |>
      api_circuit_breakers("/ops/breakers") |>
      plumber2::api_get("/ping", function() list(ok = TRUE)) |>
      plumber2::api_get("/full", function() bulk$execute(function() bulk$execute(function() "not called")))
  })
  res <- http_call(api$url("/full"))
  expect_equal(res$status, 503L)
  expect_identical(res$headers[["retry-after"]], "1")
  expect_equal(res$json[c("error", "breaker", "state")],
               list(error = "503 - Service Unavailable", breaker = "bulk", state = "CLOSED"))
})
