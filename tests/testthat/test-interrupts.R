# An interrupt (Ctrl-C) during a request must release its permit: a leaked
# half-open probe slot would leave the breaker rejecting forever.

interrupting_request <- function(real_signal) {
  function() {
    if (real_signal) {
      # A real SIGINT to this process, delivered at R's next interrupt check.
      tools::pskill(Sys.getpid(), tools::SIGINT)
      for (i in 1:200) Sys.sleep(0.005)  # bounded: the signal arrives first
      stop("the interrupt never arrived")
    }
    rlang::interrupt()
  }
}

test_that("1,000 interrupted calls, many of them half-open probes, leak no permit", {
  skip_on_os("windows")
  b <- manual_breaker(failure_threshold = 1, recovery_timeout = 1, half_open_max_calls = 2)
  cb <- b$cb
  set.seed(42)
  probes_interrupted <- 0
  for (i in seq_len(1000)) {
    # Half of the time, put the breaker in HALF_OPEN first.
    if (i %% 2 == 0) {
      if (cb$state == "CLOSED") cb$execute(fail, fallback)
      b$clock$advance(2)
      cb$execute(succeed, fallback)  # a probe that succeeds: one slot used up, half open still
      if (cb$state == "HALF_OPEN") probes_interrupted <- probes_interrupted + 1
    }
    state_before <- cb$state
    real <- i %% 50 == 0
    got <- tryCatch(cb$execute(interrupting_request(real), fallback), interrupt = function(e) "interrupted")
    if (state_before %in% c("CLOSED", "HALF_OPEN")) expect_identical(got, "interrupted")
    expect_identical(cb$metrics()$probes_in_flight, 0)
  }
  expect_gt(probes_interrupted, 200)
  m <- cb$metrics()
  expect_gte(m$released, 1000 - m$rejected)
  # The breaker still works: the last probe slot is free and closes it.
  if (cb$state == "OPEN") b$clock$advance(2)
  expect_identical(cb$execute(succeed, fallback), "ok")
  expect_identical(cb$state, "CLOSED")
})

test_that("an interrupt inside the fallback leaves the breaker consistent", {
  cb <- circuit_breaker(failure_threshold = 1)
  got <- tryCatch(cb$execute(fail, function() rlang::interrupt()), interrupt = function(e) "interrupted")
  expect_identical(got, "interrupted")
  m <- cb$metrics()
  expect_identical(c(m$failures, m$released), c(1, 0))  # recorded once, not released
  expect_identical(cb$state, "OPEN")
})
