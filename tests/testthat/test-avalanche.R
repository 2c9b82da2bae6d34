# The avalanche demonstration starts a webfakes downstream and three plumber
# APIs in background R processes on 127.0.0.1 and loads them for about 11 s
# (plus start-up). The assertions are about behaviour, not timings: the
# machine may be busy.

skip_avalanche <- function() {
  skip_on_cran()
  for (pkg in c("plumber", "webfakes", "callr", "curl", "httpuv", "jsonlite", "later")) {
    skip_if_not_installed(pkg)
  }
}

test_that("breaker_avalanche_demo() shows the breaker opening, answering and closing", {
  skip_avalanche()
  plot_file <- tempfile("avalanche-", fileext = ".png")
  on.exit(unlink(plot_file), add = TRUE)

  res <- breaker_avalanche_demo(
    phase_seconds = c(healthy = 1.5, hanging = 3, failing = 3, recovered = 3),
    concurrency = 4, downstream_timeout = 0.5, recovery_timeout = 1,
    plot_file = plot_file, quiet = TRUE
  )

  expect_named(res, c("requests", "summary", "transitions", "checks", "phases", "turns",
                      "breaker_metrics", "plot_file"))
  req <- res$requests
  expect_named(req, c("endpoint", "phase", "start", "end", "latency_ms", "status",
                      "fallback", "error"))
  expect_setequal(unique(req$endpoint), c("trivial", "guarded", "unguarded"))
  expect_setequal(unique(req$phase), c("healthy", "hanging", "failing", "recovered"))
  expect_equal(nrow(res$summary), 12)
  expect_identical(res$phases$phase, c("healthy", "hanging", "failing", "recovered"))
  # Every endpoint had a turn in every phase.
  expect_equal(nrow(unique(res$turns[, c("endpoint", "phase")])), 12)

  # The breaker opened while the downstream was hanging or failing ...
  tr <- res$transitions
  opened <- tr$from == "CLOSED" & tr$to == "OPEN" & tr$phase %in% c("hanging", "failing")
  expect_true(any(opened))
  first_open <- tr$time[opened][[1]]

  # ... closed again after the downstream recovered, and stayed closed.
  expect_true(any(tr$to == "CLOSED" & tr$phase == "recovered"))
  expect_identical(tr$to[[nrow(tr)]], "CLOSED")
  expect_identical(res$breaker_metrics$state, "CLOSED")
  expect_true(all(diff(tr$time) >= 0))

  # While it was open, /guarded answered with the fallback (HTTP 200).
  recovered_at <- res$phases$start[res$phases$phase == "recovered"]
  guarded <- req[req$endpoint == "guarded", ]
  while_open <- guarded[guarded$start > first_open & guarded$start < recovered_at &
                          !is.na(guarded$end), ]
  expect_gt(nrow(while_open), 0)
  expect_gt(mean(while_open$fallback), 0.5)
  expect_true(all(while_open$status == 200))
  expect_false(any(guarded$fallback & guarded$status != 200))

  # /unguarded failed while the downstream hung: timeouts turned into errors.
  unguarded_hanging <- req[req$endpoint == "unguarded" & req$phase == "hanging", ]
  expect_gt(nrow(unguarded_hanging), 0)
  expect_true(any(unguarded_hanging$error))
  expect_false(any(req$fallback[req$endpoint != "guarded"]))

  # /trivial never calls the downstream.
  expect_false(any(req$fallback[req$endpoint == "trivial"]))

  checks <- res$checks
  expect_type(checks$passed, "logical")
  expect_type(checks$values, "double")
  expect_true(checks$passed[["opened_during_outage"]])
  expect_true(checks$passed[["fallbacks_while_open"]])
  expect_true(checks$passed[["closed_after_recovery"]])
  expect_true(checks$passed[["unguarded_errors_while_hanging"]])

  expect_identical(res$plot_file, plot_file)
  expect_true(file.exists(plot_file))
  expect_gt(file.size(plot_file), 1000)
})

test_that("breaker_avalanche_demo() rejects bad arguments before starting anything", {
  bad <- list(
    list(phase_seconds = c(1, 2, 3)),
    list(phase_seconds = c(healthy = 1, hanging = 1, failing = 1, later = 1)),
    list(phase_seconds = c(healthy = 1, hanging = -1, failing = 1, recovered = 1)),
    list(phase_seconds = c(1, 2, NA, 4)),
    list(phase_seconds = c(1, 2, Inf, 4)),
    list(phase_seconds = c(1, 2, 3, 601)),
    list(phase_seconds = "10"),
    list(concurrency = 0), list(concurrency = 2.5), list(concurrency = 65),
    list(concurrency = NA), list(concurrency = "8"),
    list(downstream_timeout = 0), list(downstream_timeout = -1), list(downstream_timeout = 31),
    list(downstream_timeout = c(1, 2)), list(downstream_timeout = NULL),
    list(recovery_timeout = 0), list(recovery_timeout = Inf), list(recovery_timeout = TRUE),
    list(failure_threshold = 0), list(failure_threshold = 1.5),
    list(slice_seconds = 0), list(slice_seconds = 4), list(slice_seconds = "0.5"),
    list(phase_seconds = c(1, 1, 1, 1), slice_seconds = 0.5),
    list(plot_file = 1), list(plot_file = NA_character_), list(plot_file = ""),
    list(plot_file = c("a.png", "b.png")),
    list(plot_file = file.path(tempfile(), "no-such-dir", "a.png")),
    list(quiet = NA), list(quiet = "yes"), list(quiet = c(TRUE, FALSE))
  )
  for (args in bad) {
    expect_error(do.call(breaker_avalanche_demo, args), class = "circuit_breaker_invalid_argument")
  }
  err <- tryCatch(breaker_avalanche_demo(concurrency = 0), error = identity)
  expect_s3_class(err, "circuit_breaker_error")
  expect_identical(err$argument, "concurrency")
  expect_match(conditionMessage(err), "concurrency")
})
