# The tests' own wait (helper-wait.R): it returns what it waited for, and a
# condition that never holds fails the test, naming it, within its bounds.

test_that("wait_until() returns the condition's value once it holds", {
  tries <- 0
  value <- wait_until(function() {
    tries <<- tries + 1
    if (tries >= 3) "ready"
  }, timeout = 5, interval = 0.01, what = "the third try")
  expect_identical(value, "ready")
  expect_identical(tries, 3)
  expect_true(wait_until(function() TRUE, timeout = 0, what = "at once"))
})

test_that("wait_until() fails, naming what it waited for, when its bounds run out", {
  tries <- 0
  never <- function() {
    tries <<- tries + 1
    NA
  }
  err <- expect_error(wait_until(never, timeout = 0.1, interval = 0.02, what = "a thing that never comes"),
                      class = "wait_until_timeout")
  expect_match(conditionMessage(err), "waiting for a thing that never comes", fixed = TRUE)
  # At most timeout / interval calls, and one more.
  expect_gte(tries, 2)
  expect_lte(tries, 6)
  # Without `what`, the message shows the condition's code.
  expect_error(wait_until(function() identical(1, 2), timeout = 0.05), "identical\\(1, 2\\)",
               class = "wait_until_timeout")
})
