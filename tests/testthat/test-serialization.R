test_that("a breaker read back with readRDS() is rebuilt from its configuration", {
  cb <- circuit_breaker(failure_threshold = 2, recovery_timeout = 7, name = "saved")
  trip(cb)
  expect_identical(cb$state, "OPEN")
  path <- tempfile(fileext = ".rds")
  on.exit(unlink(path))
  saveRDS(cb, path)
  restored <- readRDS(path)

  ptr <- get("ptr", environment(restored$execute))
  expect_false(circuitbreaker:::cb_is_live(ptr))  # NULL until first use
  # State is not carried over (it lives in C++); configuration is.
  expect_identical(restored$state, "CLOSED")
  expect_true(circuitbreaker:::cb_is_live(ptr))
  expect_identical(restored$failure_threshold, 2)
  expect_identical(restored$recovery_timeout, 7)
  expect_identical(restored$name, "saved")
  trip(restored)
  expect_identical(restored$state, "OPEN")
  expect_identical(restored$execute(succeed, fallback), "fallback")
  # The original is untouched.
  expect_identical(cb$metrics()$calls, 2)
})

test_that("every entry point rebuilds a restored pointer instead of crashing", {
  cb <- circuit_breaker(failure_threshold = 1)
  methods <- list(
    function(x) x$execute(succeed, fallback),
    function(x) x$metrics(),
    function(x) x$state,
    function(x) x$reset(),
    function(x) x$force_open(),
    function(x) x$disable(),
    function(x) x$on_failure(),
    function(x) x$configure(failure_threshold = 3),
    function(x) format(x),
    function(x) as.data.frame(x)
  )
  for (m in methods) {
    restored <- unserialize(serialize(cb, NULL))
    expect_no_error(m(restored))
  }
})

test_that("a manual clock and the breakers sharing it are restored together", {
  clock <- breaker_manual_clock(100)
  a <- circuit_breaker(failure_threshold = 1, recovery_timeout = 5, clock = clock)
  b <- circuit_breaker(failure_threshold = 1, recovery_timeout = 5, clock = clock)
  both <- unserialize(serialize(list(a = a, b = b, clock = clock), NULL))
  expect_identical(both$clock$now(), 0)  # restarts at 0
  trip(both$a, 1)
  trip(both$b, 1)
  both$clock$advance(6)
  expect_identical(both$a$execute(succeed, fallback), "ok")
  expect_identical(both$b$execute(succeed, fallback), "ok")
})

test_that("a pointer that is not a breaker's gives a classed error, not a crash", {
  cb <- circuit_breaker()
  env <- environment(cb$execute)
  assign("ptr", "not a pointer", envir = env)
  expect_error(cb$execute(succeed), class = "circuit_breaker_invalid_object")
  clock <- breaker_manual_clock()
  assign("ptr", clock$ptr, envir = env)
  expect_error(cb$execute(succeed), class = "circuit_breaker_invalid_object")
  expect_error(circuitbreaker:::cb_snapshot(clock$ptr), class = "circuit_breaker_invalid_object")
  other <- circuit_breaker()
  expect_error(circuitbreaker:::cb_clock_now(get("ptr", environment(other$execute))),
               class = "circuit_breaker_invalid_object")
  expect_error(circuitbreaker:::cb_state(NULL), class = "circuit_breaker_invalid_object")
})

test_that("the binding makes a breaker only of a store kind it knows, with its location", {
  make <- function(kind, location) circuitbreaker:::cb_create(list(), NULL, kind, location)
  expect_identical(circuitbreaker:::cb_store_kind(make("process", NULL)), "process")
  expect_error(make("nope", NULL), class = "circuit_breaker_invalid_object")
  expect_error(make(NA_character_, NULL), class = "circuit_breaker_invalid_object")
  expect_error(make(c("process", "host"), NULL), class = "circuit_breaker_invalid_object")
  # A location that is not its kind's.
  expect_error(make("process", "/tmp/x"), class = "circuit_breaker_invalid_object")
  expect_error(make("host", NULL), class = "circuit_breaker_invalid_object")
  expect_error(make("redis", "/tmp/x"), class = "circuit_breaker_invalid_object")
})

test_that("forked children get their own copy of the breaker", {
  skip_on_os("windows")
  cb <- circuit_breaker(failure_threshold = 2)
  results <- parallel::mclapply(1:2, function(i) {
    trip(cb)
    c(state = cb$state, calls = cb$metrics()$calls)
  }, mc.cores = 2)
  for (r in results) {
    expect_identical(r[["state"]], "OPEN")
    expect_identical(r[["calls"]], "2")
  }
  # The parent's breaker did not see the children's calls.
  expect_identical(cb$state, "CLOSED")
  expect_identical(cb$metrics()$calls, 0)
})
