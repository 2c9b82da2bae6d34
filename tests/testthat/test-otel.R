# OpenTelemetry reporting (R/otel.R), recorded with otelsdk's in-memory
# providers; and nothing attached when OpenTelemetry is off or absent.

core_of <- function(cb) environment(cb$execute)$core
listener_count <- function(cb) length(core_of(cb)$listeners)

test_that("with OpenTelemetry off or absent, nothing is attached to a breaker", {
  # Lane 1 has no otel; lane 2 has it, with no exporter configured.
  if (requireNamespace("otel", quietly = TRUE)) {
    skip_if(otel::is_tracing_enabled() || otel::is_measuring_enabled(), "OpenTelemetry is on in this session")
  }
  cb <- local_breaker(failure_threshold = 1, recovery_timeout = 1e6)
  expect_identical(listener_count(cb), 0L)
  expect_null(core_of(cb)$reporter)
  cb$execute(fail, fallback)
  expect_identical(cb$execute(fail, fallback), "fallback")
  expect_identical(listener_count(cb), 0L)
  expect_null(core_of(cb)$reporter)
})

test_that("calls, state and transitions are reported through otel", {
  skip_if_not_installed("otel", "0.2.0")
  skip_if_not_installed("otelsdk", "0.2.4")
  withr::local_options(circuitbreaker.otel = NULL)
  recorded <- otel_record({
    cb <- local_breaker(name = "inventory", failure_threshold = 2, recovery_timeout = 1e6)
    served <- function(request_func) {
      # A request being served: the breaker's events land on its span.
      span <- otel::start_local_active_span("GET /stock")
      cb$execute(request_func, fallback)
    }
    served(function() "ok")
    served(function() "ok")
    served(fail)
    served(fail) # trips: CLOSED -> OPEN, on this request's span
    served(function() "never made")
    served(function() "never made")
    cb$configure(ignore = "cb_test_ignored")
    cb$reset()
    # An ignored error propagates (it says nothing of the downstream).
    try(served(function() stop(structure(class = c("cb_test_ignored", "error", "condition"), list(message = "x")))),
        silent = TRUE)
    NULL
  })

  spans <- recorded$traces
  expect_length(spans, 7L)
  events <- unlist(lapply(spans, function(s) vapply(s$events, function(e) e$name, "")))
  expect_identical(sum(events == "circuit_breaker.state_change"), 1L)
  expect_identical(sum(events == "circuit_breaker.rejected"), 2L)
  all_events <- unlist(lapply(spans, `[[`, "events"), recursive = FALSE)
  change <- Filter(function(e) e$name == "circuit_breaker.state_change", all_events)[[1]]
  expect_identical(change$attributes$circuit_breaker.name, "inventory")
  expect_identical(change$attributes$circuit_breaker.state.from, "CLOSED")
  expect_identical(change$attributes$circuit_breaker.state.to, "OPEN")
  rejected <- Filter(function(e) e$name == "circuit_breaker.rejected", all_events)
  expect_identical(rejected[[1]]$attributes$circuit_breaker.state, "OPEN")
  expect_gt(rejected[[1]]$attributes$circuit_breaker.retry_after, 1e5)

  calls <- otel_points(recorded$metrics, "circuit_breaker.calls")
  by_outcome <- stats::setNames(calls$value, calls$circuit_breaker.outcome)
  expect_identical(as.list(by_outcome[order(names(by_outcome))]),
                   list(failure = 2, ignored = 1, rejected = 2, success = 2))
  expect_true(all(calls$circuit_breaker.name == "inventory"))
  state <- otel_points(recorded$metrics, "circuit_breaker.state")
  last <- stats::setNames(state$value, state$circuit_breaker.state)
  # After the reset: CLOSED is 1, OPEN (which it left) 0.
  expect_identical(unname(last[c("CLOSED", "OPEN")]), c(1, 0))
})

test_that("a breaker that reports keeps its listeners apart from $on()/$off()", {
  skip_if_not_installed("otel", "0.2.0")
  skip_if_not_installed("otelsdk", "0.2.4")
  recorded <- otel_record({
    cb <- local_breaker(failure_threshold = 1)
    heard <- character()
    expect_identical(listener_count(cb), 0L)
    id <- cb$on("failure", function() heard <<- c(heard, "failure"))
    expect_identical(listener_count(cb), 1L)
    expect_false(cb$off(0))
    cb$execute(fail, fallback)
    expect_true(cb$off(id))
    expect_identical(listener_count(cb), 0L)
    cb$reset()
    cb$execute(fail, fallback)
    # With no listener left, the reporter still hears the rejection.
    expect_identical(cb$execute(function() "never made", function() "fallback"), "fallback")
    heard
  }, what = "metrics")
  expect_identical(recorded$value, "failure")
  calls <- otel_points(recorded$metrics, "circuit_breaker.calls")
  expect_identical(calls$value[calls$circuit_breaker.outcome == "failure"], 2)
  expect_identical(calls$value[calls$circuit_breaker.outcome == "rejected"], 1)
  expect_identical(unique(calls$circuit_breaker.name), "")
})

test_that("options(circuitbreaker.otel = FALSE) keeps breakers from reporting", {
  skip_if_not_installed("otel", "0.2.0")
  skip_if_not_installed("otelsdk", "0.2.4")
  withr::local_options(circuitbreaker.otel = FALSE)
  recorded <- otel_record({
    cb <- local_breaker()
    cb$execute(function() "ok")
    listener_count(cb)
  }, what = "metrics")
  expect_identical(recorded$value, 0L)
  expect_null(otel_points(recorded$metrics, "circuit_breaker.calls"))
})

test_that("a transition another process makes reaches this process's report through later", {
  skip_if_not_installed("otel", "0.2.0")
  skip_if_not_installed("otelsdk", "0.2.4")
  skip_if_not_installed("later")
  skip_if_not_installed("callr")
  withr::local_options(circuitbreaker.otel = NULL, circuitbreaker.host_poll_interval = 0.05)
  store <- local_host_store()
  args <- host_args(failure_threshold = 2, recovery_timeout = 1e6)
  # The breaker lives in this function only, so that the test can check
  # that its poll ends with it: a poll left on later's loop would keep
  # later::loop_empty() FALSE, which shiny::testServer() waits for.
  trip_elsewhere <- function() {
    cb <- local_shared_breaker(store, "otel-shared", args)
    core <- core_of(cb)
    # No listener: the reporter alone makes the poll run.
    expect_identical(listener_count(cb), 0L)
    tripper <- shared_child(store, "otel-shared", args, function(cb, extra) {
      for (i in 1:2) cb$execute(function() stop("down"), function() "fallback")
      cb$state
    })
    expect_identical(collect_children(list(tripper))[[1]], "OPEN")
    # This process makes no call: only the event loop runs (bounded).
    deadline <- Sys.time() + 10
    while (core$seen_transition == 0 && Sys.time() < deadline) later::run_now(0.05)
    list(heard = core$seen_transition > 0, core = rlang::new_weakref(core))
  }
  recorded <- otel_record(trip_elsewhere(), what = "metrics")
  expect_true(recorded$value$heard)
  state <- otel_points(recorded$metrics, "circuit_breaker.state")
  last <- stats::setNames(state$value, state$circuit_breaker.state)
  expect_identical(unname(last[c("OPEN", "CLOSED")]), c(1, 0))
  expect_true(all(state$circuit_breaker.name == "otel-shared"))
  # The child's calls are its own: this process counted none.
  expect_null(otel_points(recorded$metrics, "circuit_breaker.calls"))

  # Gone from the registry and from every frame, the breaker is collected,
  # and its poll, which holds it weakly, sees that and stops.
  gc()
  expect_null(rlang::wref_key(recorded$value$core))
  for (i in 1:10) later::run_now(0.05)
})
