# The wording of representative user-facing errors, pinned with snapshots
# (_snaps/errors.md). After changing a message on purpose, review and accept
# the new wording with testthat::snapshot_review() / snapshot_accept("errors").

test_that("a bad argument to circuit_breaker() says what it must be", {
  expect_snapshot(error = TRUE, {
    circuit_breaker(failure_threshold = 0)
  })
  expect_snapshot(error = TRUE, {
    circuit_breaker(window_size = 10, minimum_calls = 11)
  })
})

test_that("a rejected call without a fallback says when the breaker will probe", {
  b <- manual_breaker(failure_threshold = 1, recovery_timeout = 30, name = "errors-api")
  trip(b$cb)
  b$clock$advance(10)
  expect_snapshot(error = TRUE, {
    b$cb$execute(succeed)
  })
})

test_that("assigning a read-only field says how to change it", {
  cb <- circuit_breaker()
  expect_snapshot(error = TRUE, {
    cb$state <- "OPEN"
  })
  expect_snapshot(error = TRUE, {
    cb$failure_count <- 0
  })
})

test_that("configure() names an unknown argument", {
  cb <- circuit_breaker()
  expect_snapshot(error = TRUE, {
    cb$configure(colour = "red")
  })
})

test_that("breaker_get() rejects an empty name", {
  expect_snapshot(error = TRUE, {
    breaker_get("")
  })
})

test_that("a missing package is named, with how to get it", {
  skip_if_not_installed("httr2")
  skip_if(exists("req_perform_promise", asNamespace("httr2")),
          "this httr2 has req_perform_promise(): breaker_perform_async() needs nothing more")
  # The installed httr2's version is not part of the wording.
  hide_version <- function(lines) {
    text <- gsub("(this is httr2\\s+)[0-9][0-9.-]*", "\\1<version>", paste(lines, collapse = "\n"))
    strsplit(text, "\n", fixed = TRUE)[[1]]
  }
  expect_snapshot(error = TRUE, transform = hide_version, {
    breaker_perform_async(httr2::request("http://127.0.0.1:1/"), breaker = circuit_breaker())
  })
})

test_that("a rejected call says why: a probe in flight, ramp-up, forced open", {
  m <- manual_breaker(failure_threshold = 1, recovery_timeout = 30, ramp_up = 10)
  trip(m$cb)
  m$clock$advance(31)
  m$cb$execute(function() {
    expect_snapshot(m$cb$execute(succeed), error = TRUE)
    "probe"
  })
  expect_snapshot(m$cb$execute(succeed), error = TRUE)
  m$cb$force_open()
  expect_snapshot(m$cb$execute(succeed), error = TRUE)
})

test_that("echoed values are cut short, and the condition keeps them whole", {
  long <- strrep("y", 1e5)
  expect_snapshot(error = TRUE, {
    circuit_breaker(failure_threshold = long)
  })
  err <- tryCatch(circuit_breaker(failure_threshold = long), error = identity)
  expect_s3_class(err, "circuit_breaker_invalid_argument")
  expect_lt(nchar(conditionMessage(err)), 200)
  expect_identical(err$value, long)
  # Control characters are escaped, not written to the console.
  expect_snapshot(error = TRUE, {
    circuit_breaker(window_type = "count\n\033[31mred")
  })
  # A name given to $configure() is the user's too.
  cb <- circuit_breaker()
  expect_snapshot(error = TRUE, {
    do.call(cb$configure, stats::setNames(list(1), strrep("z", 300)))
  })
})

test_that("a rejected call cuts a long breaker name", {
  b <- manual_breaker(failure_threshold = 1, recovery_timeout = 30, name = strrep("long-name-", 30))
  withr::defer(breaker_remove(strrep("long-name-", 30)))
  trip(b$cb)
  expect_snapshot(error = TRUE, {
    b$cb$execute(succeed)
  })
})

test_that("a name too long for a store names the argument and the limit", {
  expect_snapshot(error = TRUE, {
    circuit_breaker(name = strrep("n", 1001))
  })
  skip_if_not(circuitbreaker:::cb_host_supported(), "no host store on this platform")
  store <- breaker_store_host(tempdir())
  expect_snapshot(error = TRUE, {
    circuit_breaker(name = strrep("n", 81), store = store)
  })
  # The limit is in bytes: 41 two-byte characters are 82.
  expect_error(circuit_breaker(name = strrep("\u00e9", 41), store = store),
               class = "circuit_breaker_name_too_long")
  err <- tryCatch(circuit_breaker(name = strrep("n", 81), store = store), error = identity)
  expect_s3_class(err, "circuit_breaker_name_too_long")
  expect_identical(err$limit, 80L)
  expect_s3_class(circuit_breaker(name = strrep("n", 80), store = store), "CircuitBreaker")
  breaker_remove(strrep("n", 80))
  breaker_store_unlink(strrep("n", 80), store)
})

test_that("a refused URL for breaker_for() does not show its password", {
  expect_snapshot(error = TRUE, {
    breaker_for("https://user:PW-secret@bad host/items")
  })
})
