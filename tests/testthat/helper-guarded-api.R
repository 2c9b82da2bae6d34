# What every example API guarding the downstream "quotes" must show (and, last,
# a test API's short open period), whatever serves it: the plumber examples
# (inst/plumber, test-plumber.R) and the plumber2 example (inst/plumber2,
# test-plumber2.R) answer the same, because both translate R/web-answers.R.
# One home for the story, so that the two frameworks cannot drift apart
# unnoticed.
#
# `api` is what local_background_api() returns; `downstream` is the webfakes
# app of quote_downstream_app() (helper-plumber.R).

# The state the API's status route shows for its breaker "quotes".
quotes_status <- function(api) {
  res <- http_call(api$url("/circuit-breakers"))
  expect_equal(res$status, 200L)
  breaker_status(res, "quotes")
}

# From a healthy downstream to an open breaker, through `route` (which has a
# fallback) and `{route}/live` (which has none), in a process where the
# breaker has not been called yet.
expect_guarded_routes <- function(api, downstream, route = "/quote") {
  set_downstream_mode(downstream, "up")
  live <- paste0(route, "/live")

  # Healthy: real data.
  res <- http_call(api$url(route))
  expect_equal(res$status, 200L)
  expect_equal(res$json$source, "downstream")
  expect_equal(res$json$quote$price, 42.5)
  status <- quotes_status(api)
  expect_equal(status$state, "CLOSED")
  expect_equal(status$successes, 1)
  expect_equal(status$failure_rate, 0)

  # Failing: the fallback answers, the failures are counted.
  set_downstream_mode(downstream, "down")
  for (i in 1:2) {
    res <- http_call(api$url(route))
    expect_equal(res$status, 200L)
    expect_equal(res$json$source, "fallback")
    # A short reason of the API's own: no internal address or port.
    expect_equal(res$json$reason, "downstream unavailable")
    expect_no_internal_address(res$body, downstream)
  }
  expect_equal(quotes_status(api)$failure_count, 2)
  # Without fallback, a failed call is a 502 (and the third failure).
  res <- http_call(api$url(live))
  expect_equal(res$status, 502L)
  expect_equal(res$json$error, "502 - Bad Gateway")
  expect_equal(res$json$reason, "downstream unavailable")
  expect_no_internal_address(res$body, downstream)

  # Open after three consecutive failures: visible in the status route.
  status <- quotes_status(api)
  expect_equal(status$state, "OPEN")
  expect_equal(status$failures, 3)
  expect_equal(status$times_opened, 1)
  expect_gt(status$seconds_until_probe, 0)
  expect_lte(status$seconds_until_probe, 30)

  # The downstream is healthy again, but the open breaker does not call it:
  # the fallback answers at once...
  set_downstream_mode(downstream, "up")
  res <- http_call(api$url(route))
  expect_equal(res$json$source, "fallback")
  expect_equal(res$json$reason, "breaker open")
  # ...and without a fallback the API answers 503 with Retry-After.
  res <- http_call(api$url(live))
  expect_equal(res$status, 503L)
  retry_after <- as.integer(res$headers[["retry-after"]])
  expect_true(retry_after >= 1L && retry_after <= 30L)
  expect_named(res$json, c("error", "breaker", "state", "retry_after"))
  expect_equal(res$json$error, "503 - Service Unavailable")
  expect_equal(res$json$breaker, "quotes")
  expect_equal(res$json$state, "OPEN")
  expect_true(res$json$retry_after > 0 && res$json$retry_after <= 30)
  expect_lte(abs(ceiling(res$json$retry_after) - retry_after), 1)
  expect_equal(quotes_status(api)$rejected, 2)

  # Prometheus: the right content type, valid text, the breaker's values.
  res <- http_call(api$url("/circuit-breakers/metrics"))
  expect_equal(res$status, 200L)
  expect_equal(res$headers[["content-type"]], "text/plain; version=0.0.4; charset=utf-8")
  expect_equal(res$headers[["cache-control"]], "no-store")
  lines <- strsplit(res$body, "\n", fixed = TRUE)[[1]]
  expect_true('circuitbreaker_state{breaker="quotes",state="OPEN"} 1' %in% lines)
  expect_true('circuitbreaker_calls_total{breaker="quotes",outcome="failure"} 3' %in% lines)
  expect_true('circuitbreaker_calls_total{breaker="quotes",outcome="rejected"} 2' %in% lines)
  expect_true('circuitbreaker_opened_total{breaker="quotes"} 1' %in% lines)
  expect_promtool_ok(res$body)
}

# The control routes under /circuit-breakers, given the admin token's header
# `admin`: refused without it, 404 for an unknown breaker, then force-open
# (every route in `live`, which have no fallback, answers 503), reset and
# disable. Leaves the breaker DISABLED and the downstream down.
expect_control_routes <- function(api, downstream, admin, live = "/quote/live") {
  set_downstream_mode(downstream, "up")
  control <- function(action, name = "quotes", headers = admin) {
    http_call(api$url(paste0("/circuit-breakers/", name, "/", action)), "POST", headers)
  }

  # Refused: no token, a wrong one.
  for (headers in list(character(), c(`X-Admin-Token` = "guess"))) {
    res <- control("force-open", headers = headers)
    expect_equal(res$status, 403L)
    expect_equal(res$json, list(error = "403 - Forbidden"))
  }
  expect_equal(quotes_status(api)$state, "CLOSED")

  # Unknown breaker.
  res <- control("reset", name = "nope")
  expect_equal(res$status, 404L)
  expect_equal(res$json, list(error = "404 - Circuit breaker not found", breaker = "nope"))

  # Forced open: every call is rejected, with no Retry-After (it stays open
  # until reset).
  res <- control("force-open")
  expect_equal(res$status, 200L)
  expect_equal(res$headers[["cache-control"]], "no-store")
  expect_equal(res$json$name, "quotes")
  expect_equal(res$json$state, "FORCED_OPEN")
  expect_null(res$json$seconds_until_probe)
  for (route in live) {
    res <- http_call(api$url(route))
    expect_equal(res$status, 503L, label = route)
    expect_null(res$headers[["retry-after"]])
    expect_equal(res$json$state, "FORCED_OPEN")
    expect_null(res$json$retry_after)
  }
  expect_equal(quotes_status(api)$state, "FORCED_OPEN")
  expect_promtool_ok(http_call(api$url("/circuit-breakers/metrics"))$body)

  # Reset: closed, calls go through again.
  expect_equal(control("reset")$json$state, "CLOSED")
  expect_equal(http_call(api$url(live[[1]]))$json$source, "downstream")

  # Disabled: calls go through and nothing is recorded.
  expect_equal(control("disable")$json$state, "DISABLED")
  set_downstream_mode(downstream, "down")
  for (i in 1:4) expect_equal(http_call(api$url("/quote"))$json$source, "fallback")
  status <- quotes_status(api)
  expect_equal(status$state, "DISABLED")
  expect_equal(status$failures, 0)
}

# A breaker with recovery_timeout = 0.5 that POST `trip` opens and GET
# `probe` calls (without fallback; both routes of a test's own API): while it
# is open, the 503's Retry-After is 1 s, never 0, though less time is left;
# once the open period is over, the probe goes through.
expect_short_retry_after <- function(api, trip, probe) {
  expect_equal(http_call(api$url(trip), "POST")$json, list("OPEN"))
  res <- http_call(api$url(probe))
  expect_equal(res$status, 503L)
  expect_equal(res$headers[["retry-after"]], "1")
  expect_equal(res$json$state, "OPEN")
  expect_lte(res$json$retry_after, 0.5)
  # Bounded: at most 5 s of asking.
  deadline <- Sys.time() + 5
  repeat {
    res <- http_call(api$url(probe))
    if (res$status == 200L || Sys.time() > deadline) break
    Sys.sleep(0.1)
  }
  expect_equal(res$status, 200L)
}

# Breaker names on the control routes are decoded strictly: a NUL byte in the
# decoded name (alone, or trailing, which must not reach "quotes") or a
# malformed escape (`%G1`, a lone `%`) is an unknown breaker (404) and
# changes nothing, while a well-escaped name is the breaker it spells.
expect_strict_route_names <- function(api, admin) {
  control <- function(name, action = "force-open") {
    http_call(api$url(paste0("/circuit-breakers/", name, "/", action)), "POST", admin)
  }
  before <- quotes_status(api)$state
  for (name in c("%00", "quotes%00", "quo%00tes", "%G1", "quotes%G1", "%", "quotes%", "quotes%4")) {
    res <- control(name)
    expect_equal(res$status, 404L, label = name)
    expect_equal(res$json$error, "404 - Circuit breaker not found", label = name)
  }
  expect_equal(quotes_status(api)$state, before)
  res <- control("quot%65s", "reset")
  expect_equal(res$status, 200L)
  expect_equal(res$json$name, "quotes")
  expect_equal(res$json$state, "CLOSED")
}

# The body an API answers its clients with names neither the downstream's
# address nor its port (the detail is in the API's log only).
expect_no_internal_address <- function(body, downstream) {
  port <- sub("^.*:([0-9]+).*$", "\\1", downstream$url("/"))
  expect_false(grepl("127.0.0.1", body, fixed = TRUE))
  expect_false(grepl(port, body, fixed = TRUE))
}
