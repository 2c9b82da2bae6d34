# Registry tests clear the registry first and restore nothing: every test
# that depends on its content sets it up itself.
clear_registry <- function() {
  for (n in breaker_list()$name) breaker_remove(n)
}

test_that("breaker_for() keys breakers by host and port", {
  clear_registry()
  a <- breaker_for("http://127.0.0.1:8001/items?x=1")
  expect_identical(a$name, "127.0.0.1:8001")
  expect_identical(breaker_for("http://127.0.0.1:8001/other"), a)
  expect_false(identical(breaker_for("http://127.0.0.1:8002/items"), a))
  expect_identical(breaker_for("https://Example.org/x")$name, "example.org:443")
  expect_identical(breaker_for("http://user:pw@example.org/x")$name, "example.org:80")
  expect_identical(breaker_for("http://[::1]:8080/")$name, "[::1]:8080")
  expect_identical(breaker_for("db.internal:5432")$name, "db.internal:5432")
  skip_if_not_installed("httr2")
  expect_identical(breaker_for(httr2::request("http://127.0.0.1:8001/x")), a)
})

test_that("breaker_for() uses the defaults option and its arguments at creation", {
  clear_registry()
  withr::local_options(circuitbreaker.defaults = list(failure_threshold = 2, timeout = 3))
  cb <- breaker_for("http://127.0.0.1:9001", recovery_timeout = 7)
  expect_identical(cb$failure_threshold, 2)
  expect_identical(cb$recovery_timeout, 7)
  expect_identical(cb$config$timeout, 3)
  # Later calls return the same breaker; their arguments do not reconfigure it.
  expect_identical(breaker_for("http://127.0.0.1:9001", failure_threshold = 9)$failure_threshold, 2)
})

test_that("breaker_get(), breaker_list() and breaker_remove()", {
  clear_registry()
  expect_identical(nrow(breaker_list()), 0L)
  expect_true("state" %in% names(breaker_list()))
  a <- circuit_breaker(name = "alpha")
  b <- circuit_breaker(name = "beta", failure_threshold = 1)
  b$execute(fail, fallback)
  expect_identical(breaker_get("alpha"), a)
  expect_null(breaker_get("gamma"))
  lst <- breaker_list()
  expect_identical(lst$name, c("alpha", "beta"))
  expect_identical(lst$state, c("CLOSED", "OPEN"))
  expect_true(breaker_remove("alpha"))
  expect_false(breaker_remove("alpha"))
  expect_identical(breaker_list()$name, "beta")
  # A new breaker of the same name replaces the old one.
  b2 <- circuit_breaker(name = "beta")
  expect_identical(breaker_get("beta"), b2)
  expect_error(breaker_get(1), class = "circuit_breaker_invalid_argument")
  expect_error(breaker_remove(NA_character_), class = "circuit_breaker_invalid_argument")
  expect_error(breaker_for(42), class = "circuit_breaker_invalid_argument")
  expect_error(breaker_for("not a host!"), class = "circuit_breaker_invalid_argument")
})

test_that("the registry evicts the least recently used CLOSED breaker, never an OPEN one", {
  clear_registry()
  withr::local_options(circuitbreaker.max_breakers = 3)
  one <- circuit_breaker(name = "one", failure_threshold = 1)
  two <- circuit_breaker(name = "two")
  three <- circuit_breaker(name = "three")
  one$execute(fail, fallback)  # OPEN: must survive
  breaker_get("two")           # used: "three" is now the least recently used CLOSED one
  circuit_breaker(name = "four")
  expect_setequal(breaker_list()$name, c("one", "two", "four"))
  circuit_breaker(name = "five")
  expect_setequal(breaker_list()$name, c("one", "four", "five"))
  # When every breaker is open, none is dropped.
  clear_registry()
  for (n in c("a", "b", "c")) circuit_breaker(name = n, failure_threshold = 1)$execute(fail, fallback)
  circuit_breaker(name = "d")
  expect_setequal(breaker_list()$name, c("a", "b", "c", "d"))
  clear_registry()
})

test_that("two servers on two ports get two independent breakers", {
  skip_if_not_installed("curl")
  clear_registry()
  healthy <- local_downstream()
  sick <- local_downstream()
  withr::local_options(circuitbreaker.defaults = list(failure_threshold = 2))
  for (i in 1:3) breaker_fetch(sick$url("/status/503"), fallback = fallback)
  expect_identical(breaker_for(sick$url("/"))$state, "OPEN")
  res <- breaker_fetch(healthy$url("/ok"), fallback = fallback)
  expect_identical(res$status_code, 200L)
  expect_identical(breaker_for(healthy$url("/"))$state, "CLOSED")
  clear_registry()
})
