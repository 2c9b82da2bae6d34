# demo("getting-started"): the short story of the breaker sparing a hanging
# service, with a webfakes service in a background R process on 127.0.0.1.
# The script is installed with the package (demo/), so this runs from the
# tarball too.

test_that("demo/getting-started.R shows the breaker sparing a hanging service", {
  skip_on_cran()
  skip_if_not_installed("webfakes")
  skip_if_not_installed("curl")
  skip_if_not_installed("callr")
  skip_if_not_installed("jsonlite")
  script <- system.file("demo", "getting-started.R", package = "circuitbreaker")
  if (!nzchar(script)) script <- test_path("..", "..", "demo", "getting-started.R")
  skip_if_not(file.exists(script), "demo/getting-started.R is neither installed nor here")

  # 30 requests, not fewer: once open, the breaker waits 1 s (20 intervals of
  # 0.05 s) before it probes, so with much fewer requests the run ends before
  # it can close again. About 4 s unguarded + 2 s guarded.
  withr::local_options(circuitbreaker.demo = list(failing_for = 0.5, requests = 30,
                                                  interval = 0.05, timeout = 0.3))
  env <- new.env(parent = globalenv())
  output <- capture.output(sys.source(script, envir = env))
  res <- env$demo_result
  expect_true(any(grepl("kept .* requests away from the hanging service", output)))

  expect_named(res$calls, c("scenario", "i", "started", "elapsed", "outcome"))
  expect_equal(nrow(res$calls), 60)
  expect_true(all(res$calls$outcome %in% c("ok", "failed", "short-circuited")))

  s <- res$summary
  plain <- s[s$scenario == "no_breaker", ]
  guarded <- s[s$scenario == "breaker", ]
  expect_equal(nrow(plain), 1)
  expect_equal(nrow(guarded), 1)
  expect_false(any(s$capped))

  # Without a breaker every request reaches the service, and the ten planned
  # in the first 0.5 s hang until the client's timeout.
  expect_equal(plain$server_calls, 30)
  expect_equal(plain$server_hits, 30)
  expect_equal(plain$short_circuited, 0)
  expect_gte(plain$failures, 10)

  # The breaker calls the service less, answers some requests at once, and
  # blocks the process for less time in all.
  expect_lt(guarded$server_calls, plain$server_calls)
  expect_equal(guarded$server_hits, guarded$server_calls)
  expect_gt(guarded$short_circuited, 0)
  expect_lt(guarded$failures, plain$failures)
  expect_lt(guarded$blocked, plain$blocked)
  expect_equal(guarded$short_circuited, res$breaker_metrics$rejected)

  # It opened, then closed again once the service was back.
  tr <- res$transitions
  opened <- which(tr$from == "CLOSED" & tr$to == "OPEN")
  expect_gt(length(opened), 0)
  expect_true(any(tr$to[-seq_len(opened[[1]])] == "CLOSED"))
  expect_identical(res$breaker_metrics$state, "CLOSED")
  expect_true(all(diff(tr$time) >= 0))
})

test_that("demo/getting-started.R uses only the package's exported functions", {
  script <- system.file("demo", "getting-started.R", package = "circuitbreaker")
  if (!nzchar(script)) script <- test_path("..", "..", "demo", "getting-started.R")
  skip_if_not(file.exists(script), "demo/getting-started.R is neither installed nor here")
  code <- readLines(script, warn = FALSE)
  expect_false(any(grepl("circuitbreaker:::", code, fixed = TRUE)))
})
