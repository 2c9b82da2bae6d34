test_that("transitions() and history() describe what happened", {
  clock <- breaker_manual_clock()
  cb <- circuit_breaker(failure_threshold = 2, recovery_timeout = 10, clock = clock)
  cb$execute(succeed)
  trip(cb)
  clock$advance(6)
  cb$execute(succeed, fallback)  # rejected
  clock$advance(5)
  cb$execute(succeed, fallback)  # probe: closes
  tr <- cb$transitions()
  expect_identical(tr$from, c("CLOSED", "OPEN", "HALF_OPEN"))
  expect_identical(tr$to, c("OPEN", "HALF_OPEN", "CLOSED"))
  expect_equal(tr$seconds_ago, c(11, 0, 0))
  h <- cb$history()
  expect_identical(sum(h$calls), 4)
  expect_identical(sum(h$failures), 2)
  expect_identical(sum(h$rejected), 1)
  expect_identical(unique(h$bucket_seconds), 5)
  clock$advance(400)  # older than the five minutes kept
  expect_identical(nrow(cb$history()), 0L)
})

test_that("plot() draws the state timeline and the failure rate", {
  clock <- breaker_manual_clock()
  cb <- circuit_breaker(failure_threshold = 3, recovery_timeout = 20, clock = clock, name = "plotted")
  for (i in 1:90) {
    healthy <- i < 30 || i > 60
    cb$execute(function() if (healthy) "ok" else stop("down"), fallback)
    clock$advance(2)
  }
  path <- tempfile(fileext = ".png")
  on.exit(unlink(path))
  grDevices::png(path, width = 600, height = 400)
  expect_identical(withVisible(plot(cb))$visible, FALSE)
  grDevices::dev.off()
  expect_gt(file.size(path), 1000)
  # A breaker with no history at all plots too.
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off(), add = TRUE)
  expect_no_error(plot(circuit_breaker()))
})
