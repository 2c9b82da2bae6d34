# With default arguments the package must behave exactly like the R6
# CircuitBreaker class from the article this package follows. The model below
# restates that original R6 class's rules in plain R (written for this test
# from the article's description); random traces of
# successes, failures, manual on_success()/on_failure() calls and waits
# around the recovery timeout must give the same value, the same decision to
# run the request, and the same state and failure_count after every step.

original_model <- function(failure_threshold, recovery_timeout) {
  m <- new.env()
  m$failure_threshold <- failure_threshold
  m$recovery_timeout <- recovery_timeout
  m$state <- "CLOSED"
  m$failure_count <- 0
  m$last_failure <- NULL
  m
}

original_on_success <- function(m) {
  m$failure_count <- 0
  m$state <- "CLOSED"
}

original_on_failure <- function(m, now) {
  m$failure_count <- m$failure_count + 1
  m$last_failure <- now
  if (m$failure_count >= m$failure_threshold) m$state <- "OPEN"
}

# Returns list(ran = whether the request ran, value = what execute returned).
original_execute <- function(m, now, succeeds) {
  if (m$state == "OPEN") {
    if (!is.null(m$last_failure) && now - m$last_failure > m$recovery_timeout) {
      m$state <- "HALF_OPEN"
    } else {
      return(list(ran = FALSE, value = "fallback"))
    }
  }
  if (succeeds) {
    original_on_success(m)
    list(ran = TRUE, value = "ok")
  } else {
    original_on_failure(m, now)
    list(ran = TRUE, value = "fallback")
  }
}

# Runs one random trace; returns NULL if the package matched the model at
# every step, else a description of the first divergence and the trace.
run_original_trace <- function(seed, steps) {
  set.seed(seed)
  threshold <- sample(1:6, 1)
  timeout <- sample(c(0, 0.5, 1, 5, 30), 1)
  clock <- breaker_manual_clock()
  cb <- if (threshold == 5 && timeout == 30) {
    circuit_breaker(clock = clock)  # the defaults themselves
  } else {
    CircuitBreaker$new(failure_threshold = threshold, recovery_timeout = timeout, clock = clock)
  }
  m <- original_model(threshold, timeout)
  now <- 0
  # Waits are multiples of 1/4 s so that the model's doubles and the core's
  # nanoseconds agree exactly, boundaries (exactly the timeout) included.
  waits <- c(0, 0.25, 0.5, 1, timeout - 0.25, timeout, timeout + 0.25, 2 * timeout + 1)
  waits <- waits[waits >= 0]
  trace <- character(steps)
  for (step in seq_len(steps)) {
    op <- sample(c("success", "failure", "wait", "on_success", "on_failure"), 1,
                 prob = c(0.3, 0.4, 0.22, 0.04, 0.04))
    trace[step] <- op
    mismatch <- NULL
    if (op == "wait") {
      dt <- sample(waits, 1)
      trace[step] <- paste0("wait(", dt, ")")
      now <- now + dt
      clock$advance(dt)
      next
    }
    if (op == "on_success") {
      original_on_success(m)
      cb$on_success()
    } else if (op == "on_failure") {
      original_on_failure(m, now)
      cb$on_failure()
    } else {
      succeeds <- op == "success"
      ran <- FALSE
      got <- cb$execute(function() {
        ran <<- TRUE
        if (succeeds) "ok" else stop("down")
      }, function() "fallback")
      want <- original_execute(m, now, succeeds)
      if (!identical(ran, want$ran)) mismatch <- c(mismatch, sprintf("ran %s, original %s", ran, want$ran))
      if (!identical(got, want$value)) mismatch <- c(mismatch, sprintf("returned %s, original %s", got, want$value))
    }
    if (!identical(cb$state, m$state)) mismatch <- c(mismatch, sprintf("state %s, original %s", cb$state, m$state))
    if (!identical(cb$failure_count, m$failure_count)) {
      mismatch <- c(mismatch, sprintf("failure_count %s, original %s", cb$failure_count, m$failure_count))
    }
    if (!identical(is.null(cb$last_failure_time), is.null(m$last_failure))) {
      mismatch <- c(mismatch, "last_failure_time set in one but not the other")
    }
    if (length(mismatch)) {
      return(sprintf("seed %d (failure_threshold %d, recovery_timeout %s), step %d: %s\ntrace: %s",
                     seed, threshold, timeout, step, paste(mismatch, collapse = "; "),
                     paste(trace[seq_len(step)], collapse = " ")))
    }
  }
  NULL
}

test_that("defaults are the original R6 class's: 5 failures, 30 s", {
  cb <- CircuitBreaker$new()
  expect_identical(cb$failure_threshold, 5)
  expect_identical(cb$recovery_timeout, 30)
  expect_identical(cb$state, "CLOSED")
  expect_identical(cb$failure_count, 0)
  expect_null(cb$last_failure_time)
})

test_that("the original R6 class's story, step by step, on a manual clock", {
  b <- manual_breaker()
  cb <- b$cb
  for (i in 1:4) expect_identical(cb$execute(fail, fallback), "fallback")
  expect_identical(cb$state, "CLOSED")
  expect_identical(cb$failure_count, 4)
  expect_identical(cb$execute(fail, fallback), "fallback")
  expect_identical(cb$state, "OPEN")
  expect_s3_class(cb$last_failure_time, "POSIXct")

  called <- FALSE
  probe <- function() {
    called <<- TRUE
    "ok"
  }
  b$clock$advance(30)  # exactly the timeout: not yet *more than*
  expect_identical(cb$execute(probe, fallback), "fallback")
  expect_false(called)
  expect_identical(cb$state, "OPEN")  # the move to HALF_OPEN is lazy

  b$clock$advance(0.001)
  expect_identical(cb$state, "OPEN")  # still lazy: no call yet
  expect_identical(cb$execute(fail, fallback), "fallback")  # the probe fails
  expect_identical(cb$state, "OPEN")
  expect_identical(cb$failure_count, 6)  # counts on past the threshold, as in the original R6 class

  b$clock$advance(30.5)
  expect_identical(cb$execute(probe, fallback), "ok")
  expect_true(called)
  expect_identical(cb$state, "CLOSED")
  expect_identical(cb$failure_count, 0)
})

test_that("random traces match the model of the original R6 class exactly", {
  divergences <- Filter(Negate(is.null), lapply(1:100, run_original_trace, steps = 150))
  expect_identical(divergences, list())
})

test_that("the trace checker notices a divergence", {
  # A model with an off-by-one threshold must be caught: the check can fail.
  real <- original_on_failure
  original_on_failure <<- function(m, now) {
    m$failure_threshold <- m$failure_threshold + 1
    on.exit(m$failure_threshold <- m$failure_threshold - 1)
    real(m, now)
  }
  on.exit(original_on_failure <<- real)
  found <- Filter(Negate(is.null), lapply(1:10, run_original_trace, steps = 150))
  expect_gt(length(found), 0)
  expect_match(found[[1]], "trace: ")
})
