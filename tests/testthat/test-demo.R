test_that("breaker_demo() shows the breaker sparing a hanging service", {
  skip_on_cran()
  skip_if_not_installed("webfakes")
  skip_if_not_installed("httr")
  skip_if_not_installed("callr")

  # 30 requests, not fewer: once open, the breaker waits 1 s (20 intervals of
  # 0.05 s) before it probes, so with much fewer requests the run ends before
  # it can close again. About 4 s unguarded + 2 s guarded.
  res <- breaker_demo(failing_for = 0.5, requests = 30, interval = 0.05,
    timeout = 0.3, quiet = TRUE)

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
  expect_equal(plain$short_circuited, 0)
  expect_gte(plain$failures, 10)

  # The breaker calls the service less, answers some requests at once, and
  # blocks the process for less time in all.
  expect_lt(guarded$server_calls, plain$server_calls)
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

test_that("breaker_demo() rejects bad arguments", {
  bad <- list(
    list(failing_for = 0), list(failing_for = -1), list(failing_for = NA_real_),
    list(failing_for = Inf), list(failing_for = "3"), list(failing_for = c(1, 2)),
    list(requests = 0), list(requests = 1.5), list(requests = 10001),
    list(requests = NA), list(requests = "60"), list(requests = Inf),
    list(interval = 0), list(interval = NULL), list(interval = TRUE),
    list(timeout = -0.1), list(timeout = numeric()),
    list(quiet = NA), list(quiet = "yes"), list(quiet = c(TRUE, FALSE)), list(quiet = 1)
  )
  for (args in bad) {
    expect_error(do.call(breaker_demo, args), class = "circuit_breaker_invalid_argument")
  }
  err <- tryCatch(breaker_demo(requests = 0), error = identity)
  expect_s3_class(err, "circuit_breaker_error")
  expect_match(conditionMessage(err), "requests")
})
