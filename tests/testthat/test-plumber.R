# The plumber integration, with real processes: a downstream webfakes app
# whose health the tests switch, and the package's example APIs
# (inst/plumber/guarded-api and guarded-api-async) served by plumber in
# background R processes on 127.0.0.1.

test_that("pr_circuit_breakers() and breaker_error_handler() check their arguments", {
  skip_if_not_installed("plumber")
  pr <- plumber::pr()
  expect_error(pr_circuit_breakers(list()), class = "circuit_breaker_invalid_argument")
  bad_paths <- list("circuit-breakers", "/circuit-breakers/", "/", "/a b", "/<name>", c("/a", "/b"), NA_character_, 1)
  for (path in bad_paths) {
    expect_error(pr_circuit_breakers(pr, path = path), class = "circuit_breaker_invalid_argument")
  }
  expect_error(pr_circuit_breakers(pr, authorize = TRUE), class = "circuit_breaker_invalid_argument")
  expect_error(breaker_error_handler(otherwise = "default"), class = "circuit_breaker_invalid_argument")
  # Nothing was added by the failed calls; a valid call returns the router.
  expect_length(pr$endpoints, 0L)
  expect_identical(pr_circuit_breakers(pr, "/ops/breakers"), pr)
  paths <- vapply(pr$endpoints[["__no-preempt__"]], function(e) e$path, character(1))
  expect_setequal(paths, c("/ops/breakers", "/ops/breakers/metrics"))
  pr_circuit_breakers(pr, "/admin/breakers", authorize = function(req) FALSE)
  paths <- vapply(pr$endpoints[["__no-preempt__"]], function(e) e$path, character(1))
  expect_setequal(paths[startsWith(paths, "/admin/")], c(
    "/admin/breakers", "/admin/breakers/metrics", "/admin/breakers/<name>/reset",
    "/admin/breakers/<name>/force-open", "/admin/breakers/<name>/disable"
  ))
  expect_true(is.function(breaker_error_handler()))
})

skip_on_cran()
skip_if_not_installed("plumber")
skip_if_not_installed("webfakes")
skip_if_not_installed("callr")
skip_if_not_installed("curl")
skip_if_not_installed("jsonlite")
skip_if_not_installed("later")

downstream <- local_downstream(quote_downstream_app())

test_that("the synchronous example API degrades to its fallback, then answers 503", {
  api <- local_plumber_api("guarded-api",
    c(DOWNSTREAM_URL = downstream$url("/quote"), ADMIN_TOKEN = "s3cret"))
  res <- http_call(api$url("/ping"))
  expect_equal(res$json, list(ok = TRUE))

  expect_guarded_routes(api, downstream)

  # Other errors keep plumber's default treatment: a 404 from the downstream
  # counts nowhere for the breaker and propagates; the API answers 500.
  http_call(api$url("/circuit-breakers/quotes/reset"), "POST", c(`X-Admin-Token` = "s3cret"))
  set_downstream_mode(downstream, "missing")
  res <- http_call(api$url("/quote"))
  expect_equal(res$status, 500L)
  expect_equal(res$json, list(error = "500 - Internal server error"))
  expect_null(res$headers[["retry-after"]])
  expect_equal(quotes_status(api)$ignored, 1)
})

test_that("control endpoints need the admin token and change the breaker", {
  api <- local_plumber_api("guarded-api",
    c(DOWNSTREAM_URL = downstream$url("/quote"), ADMIN_TOKEN = "s3cret"))
  expect_control_routes(api, downstream, admin = c(`X-Admin-Token` = "s3cret"))
  expect_strict_route_names(api, admin = c(`X-Admin-Token` = "s3cret"))

  # Reading needs no token; the control endpoints only take POST.
  expect_equal(http_call(api$url("/circuit-breakers/quotes/reset"))$status, 405L)
})

test_that("the asynchronous example API behaves the same; without a token it has no control endpoints", {
  skip_if_not_installed("promises")
  api <- local_plumber_api("guarded-api-async",
    c(DOWNSTREAM_URL = downstream$url("/quote"), ADMIN_TOKEN = ""))

  expect_guarded_routes(api, downstream)

  for (action in c("reset", "force-open", "disable")) {
    res <- http_call(api$url(paste0("/circuit-breakers/quotes/", action)), "POST",
                     c(`X-Admin-Token` = "s3cret"))
    expect_equal(res$status, 404L)
  }
  expect_equal(quotes_status(api)$state, "OPEN")
})

test_that("breaker_error_handler() passes other errors on, and shows messages in debug mode", {
  api <- local_plumber_api(function() {
    library(circuitbreaker)
    held <- circuit_breaker(name = "held")
    held$force_open()
    probing <- circuit_breaker(name = "probing", recovery_timeout = 0.5, failure_threshold = 1)
    teapot <- function(req, res, err) {
      res$status <- 418L
      res$serializer <- plumber::serializer_unboxed_json()
      list(error = "teapot", message = conditionMessage(err))
    }
    strict <- plumber::pr() |>
      plumber::pr_get("/held", function() held$execute(function() "not called")) |>
      plumber::pr_get("/wrapped", function() {
        tryCatch(held$execute(function() "not called"),
                 error = function(e) rlang::abort("the quote service failed", parent = e))
      }) |>
      plumber::pr_post("/probing/trip", function() {
        probing$execute(function() stop("down"), function() NULL)
        probing$state
      }) |>
      plumber::pr_get("/probing", function() probing$execute(function() "probe")) |>
      plumber::pr_get("/boom", function() stop("kaboom")) |>
      plumber::pr_set_error(breaker_error_handler(otherwise = teapot))
    # plumber reads the debug flag of the root router.
    plumber::pr() |>
      plumber::pr_get("/ping", function() "pong") |>
      plumber::pr_get("/boom", function() stop("kaboom")) |>
      plumber::pr_get("/held", function() held$execute(function() "not called")) |>
      plumber::pr_set_error(breaker_error_handler()) |>
      plumber::pr_set_debug(TRUE) |>
      plumber::pr_mount("/strict", strict)
  })

  # A breaker forced open: 503 without Retry-After.
  res <- http_call(api$url("/strict/held"))
  expect_equal(res$status, 503L)
  expect_null(res$headers[["retry-after"]])
  expect_equal(res$json[c("error", "breaker", "state", "retry_after")],
               list(error = "503 - Service Unavailable", breaker = "held",
                    state = "FORCED_OPEN", retry_after = NULL))
  # A rejection wrapped in another error (as its `parent`) is still a 503.
  res <- http_call(api$url("/strict/wrapped"))
  expect_equal(res$status, 503L)
  expect_equal(res$json$breaker, "held")

  # Other errors go to `otherwise`.
  res <- http_call(api$url("/strict/boom"))
  expect_equal(res$status, 418L)
  expect_equal(res$json, list(error = "teapot", message = "kaboom"))

  # Without `otherwise`, plumber's default treatment, here in debug mode: the
  # message is shown.
  res <- http_call(api$url("/boom"))
  expect_equal(res$status, 500L)
  expect_equal(res$json$error, "500 - Internal server error")
  expect_match(res$json$message, "kaboom")
  res <- http_call(api$url("/held"))
  expect_equal(res$status, 503L)
  expect_match(res$json$message, "forced open")

  expect_short_retry_after(api, trip = "/strict/probing/trip", probe = "/strict/probing")
})

test_that("a call refused by a full bulkhead answers 503 with Retry-After: 1", {
  api <- local_plumber_api(function() {
    library(circuitbreaker)
    bulk <- circuit_breaker(name = "bulk", max_concurrent = 1)
    plumber::pr() |>
      plumber::pr_get("/ping", function() "pong") |>
      plumber::pr_get("/full", function() bulk$execute(function() bulk$execute(function() "not called"))) |>
      plumber::pr_set_error(breaker_error_handler()) |>
      pr_circuit_breakers()
  })
  res <- http_call(api$url("/full"))
  expect_equal(res$status, 503L)
  expect_identical(res$headers[["retry-after"]], "1")
  expect_equal(res$json[c("error", "breaker", "state")],
               list(error = "503 - Service Unavailable", breaker = "bulk", state = "CLOSED"))
  # The status route shows the bulkhead.
  status <- breaker_status(http_call(api$url("/circuit-breakers")), "bulk")
  expect_identical(status$in_flight, 0L)
  expect_identical(status$max_concurrent, 1L)
  expect_identical(status$rejected_full, 1L)
  expect_identical(status$state, "CLOSED")
})
