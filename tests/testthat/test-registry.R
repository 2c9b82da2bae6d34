# Registry tests leave the rest of the registry alone: each creates its
# breakers with local_breaker() or local_breaker_for(), which remove them when
# the test ends, and looks only at the names it created.

# The registered breakers among `names`, as breaker_list() gives them.
listed <- function(names) {
  lst <- breaker_list()
  lst[lst$name %in% names, , drop = FALSE]
}

test_that("breaker_for() keys breakers by host and port", {
  a <- local_breaker_for("http://127.0.0.1:8001/items?x=1")
  expect_identical(a$name, "127.0.0.1:8001")
  expect_identical(breaker_for("http://127.0.0.1:8001/other"), a)
  expect_false(identical(local_breaker_for("http://127.0.0.1:8002/items"), a))
  expect_identical(local_breaker_for("https://Example.org/x")$name, "example.org:443")
  expect_identical(local_breaker_for("http://user:pw@example.org/x")$name, "example.org:80")
  expect_identical(local_breaker_for("http://[::1]:8080/")$name, "[::1]:8080")
  expect_identical(local_breaker_for("db.internal:5432")$name, "db.internal:5432")
  skip_if_not_installed("httr2")
  expect_identical(breaker_for(httr2::request("http://127.0.0.1:8001/x")), a)
})

test_that("breaker_for() uses the defaults option and its arguments at creation", {
  expect_null(breaker_get("127.0.0.1:9001"))
  withr::local_options(circuitbreaker.defaults = list(failure_threshold = 2, timeout = 3))
  cb <- local_breaker_for("http://127.0.0.1:9001", recovery_timeout = 7)
  expect_identical(cb$failure_threshold, 2)
  expect_identical(cb$recovery_timeout, 7)
  expect_identical(cb$config$timeout, 3)
  # Later calls return the same breaker; their arguments do not reconfigure it.
  expect_identical(breaker_for("http://127.0.0.1:9001", failure_threshold = 9)$failure_threshold, 2)
})

test_that("breaker_get(), breaker_list() and breaker_remove()", {
  mine <- c("registry-alpha", "registry-beta", "registry-gamma")
  expect_identical(nrow(listed(mine)), 0L)
  expect_true("state" %in% names(breaker_list()))
  a <- local_breaker(name = "registry-alpha")
  b <- local_breaker(name = "registry-beta", failure_threshold = 1)
  b$execute(fail, fallback)
  expect_identical(breaker_get("registry-alpha"), a)
  expect_null(breaker_get("registry-gamma"))
  lst <- listed(mine)
  expect_identical(lst$name, c("registry-alpha", "registry-beta"))
  expect_identical(lst$state, c("CLOSED", "OPEN"))
  expect_true(breaker_remove("registry-alpha"))
  expect_false(breaker_remove("registry-alpha"))
  expect_identical(listed(mine)$name, "registry-beta")
  # A new breaker of the same name replaces the old one.
  b2 <- local_breaker(name = "registry-beta")
  expect_identical(breaker_get("registry-beta"), b2)
  expect_error(breaker_get(1), class = "circuit_breaker_invalid_argument")
  expect_error(breaker_remove(NA_character_), class = "circuit_breaker_invalid_argument")
  expect_error(breaker_for(42), class = "circuit_breaker_invalid_argument")
  expect_error(breaker_for("not a host!"), class = "circuit_breaker_invalid_argument")
})

test_that("an empty registry lists no breakers, with the columns of $metrics()", {
  skip_if_not_installed("callr")
  # A fresh R process has an empty registry; this one keeps its breakers.
  empty <- callr::r(function() circuitbreaker::breaker_list())
  expect_identical(nrow(empty), 0L)
  expect_setequal(names(empty), names(circuit_breaker()$metrics()))
})

test_that("the registry evicts the least recently used CLOSED breaker, never an OPEN one", {
  skip_if_not_installed("callr")
  # Eviction depends on every breaker in the registry, so it runs in a fresh R
  # process, through public functions only (the circuitbreaker.max_breakers
  # option), and returns the names registered after each step.
  steps <- callr::r(function() {
    library(circuitbreaker)
    fail <- function() stop("downstream failed")
    fallback <- function() "fallback"
    options(circuitbreaker.max_breakers = 3)
    registered <- function() breaker_list()$name
    out <- list()
    circuit_breaker(name = "one", failure_threshold = 1)$execute(fail, fallback)  # OPEN: must survive
    circuit_breaker(name = "two")
    circuit_breaker(name = "three")
    breaker_get("two")  # used: "three" is now the least recently used CLOSED one
    circuit_breaker(name = "four")
    out$four <- registered()
    circuit_breaker(name = "five")
    out$five <- registered()
    # When every breaker is open, none is dropped.
    for (n in registered()) breaker_remove(n)
    for (n in c("a", "b", "c")) circuit_breaker(name = n, failure_threshold = 1)$execute(fail, fallback)
    circuit_breaker(name = "d")
    out$all_open <- registered()
    out
  })
  expect_setequal(steps$four, c("one", "two", "four"))
  expect_setequal(steps$five, c("one", "four", "five"))
  expect_setequal(steps$all_open, c("a", "b", "c", "d"))
})

test_that("two servers on two ports get two independent breakers", {
  skip_if_not_installed("curl")
  healthy <- local_downstream()
  sick <- local_downstream()
  withr::local_options(circuitbreaker.defaults = list(failure_threshold = 2))
  sick_breaker <- local_breaker_for(sick$url("/"))
  healthy_breaker <- local_breaker_for(healthy$url("/"))
  for (i in 1:3) breaker_fetch(sick$url("/status/503"), fallback = fallback)
  expect_identical(breaker_for(sick$url("/")), sick_breaker)
  expect_identical(sick_breaker$state, "OPEN")
  res <- breaker_fetch(healthy$url("/ok"), fallback = fallback)
  expect_identical(res$status_code, 200L)
  expect_identical(healthy_breaker$state, "CLOSED")
})
