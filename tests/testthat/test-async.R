# execute_async() and the async wrappers, pumping later's event loop.

test_that("execute_async() settles the permit when the promise settles", {
  skip_if_not_installed("promises")
  skip_if_not_installed("later")
  cb <- circuit_breaker(failure_threshold = 2)
  late <- function() promises::promise(function(resolve, reject) later::later(function() resolve("late ok"), 0.05))
  p <- cb$execute_async(late)
  expect_s3_class(p, "promise")
  expect_identical(cb$metrics()$calls, 0)  # not settled yet
  expect_identical(promise_value(p), "late ok")
  expect_identical(cb$metrics()$successes, 1)

  failing <- function() {
    promises::promise(function(resolve, reject) later::later(function() reject(simpleError("async down")), 0.01))
  }
  expect_identical(promise_value(cb$execute_async(failing, fallback)), "fallback")
  expect_error(promise_value(cb$execute_async(failing)), "async down")
  expect_identical(cb$state, "OPEN")
  # Rejected at once: the fallback, or a circuit_breaker_open rejection.
  expect_identical(promise_value(cb$execute_async(failing, function() "open fallback")), "open fallback")
  expect_error(promise_value(cb$execute_async(failing)), class = "circuit_breaker_open")
})

test_that("execute_async() accepts plain values and synchronous errors", {
  skip_if_not_installed("promises")
  cb <- circuit_breaker(failure_threshold = 5)
  expect_identical(promise_value(cb$execute_async(function() 42)), 42)
  expect_identical(promise_value(cb$execute_async(function() stop("sync"), function(e) conditionMessage(e))), "sync")
  expect_identical(cb$metrics()$failures, 1)
  expect_error(cb$execute_async("nope"), class = "circuit_breaker_invalid_argument")
})

test_that("in HALF_OPEN exactly half_open_max_calls concurrent probes go through", {
  skip_if_not_installed("curl")
  skip_if_not_installed("later")
  server <- local_downstream()
  b <- manual_breaker(failure_threshold = 1, recovery_timeout = 1, half_open_max_calls = 2)
  cb <- b$cb
  breaker_fetch(server$url("/status/500"), breaker = cb, fallback = fallback)
  expect_identical(cb$state, "OPEN")
  b$clock$advance(2)
  hits_before <- jsonlite::fromJSON(rawToChar(curl::curl_fetch_memory(server$url("/hits"))$content))$hits
  promises <- lapply(1:5, function(i) {
    breaker_fetch_async(server$url("/counted"), breaker = cb, fallback = function() "fallback")
  })
  values <- lapply(promises, promise_value)
  reached <- vapply(values, is.list, logical(1))
  expect_identical(sum(reached), 2L)
  expect_identical(sum(vapply(values, identical, logical(1), "fallback")), 3L)
  hits_after <- jsonlite::fromJSON(rawToChar(curl::curl_fetch_memory(server$url("/hits"))$content))$hits
  expect_identical(hits_after - hits_before, 2L)  # counted by the server itself
  expect_identical(cb$state, "CLOSED")
})

test_that("a promise that never settles is covered by half_open_max_wait", {
  skip_if_not_installed("promises")
  b <- manual_breaker(failure_threshold = 1, recovery_timeout = 1, half_open_max_wait = 5)
  cb <- b$cb
  cb$execute(fail, fallback)
  b$clock$advance(2)
  settle <- NULL
  p <- cb$execute_async(function() promises::promise(function(resolve, reject) settle <<- resolve))
  expect_identical(cb$metrics()$probes_in_flight, 1)
  expect_identical(promise_value(cb$execute_async(function() "x", fallback)), "fallback")  # slot taken
  b$clock$advance(6)
  expect_identical(promise_value(cb$execute_async(function() "x", fallback)), "fallback")  # expired: open
  expect_identical(cb$metrics()$expired_probes, 1)
  b$clock$advance(30)  # long after: the lost probe finally answers
  settle("very late")
  expect_identical(promise_value(p), "very late")
  expect_identical(cb$metrics()$late, 1)
  expect_identical(cb$state, "OPEN")  # a late result does not move the state
})

test_that("breaker_fetch_async() classifies curl responses", {
  skip_if_not_installed("curl")
  skip_if_not_installed("later")
  server <- local_downstream()
  cb <- circuit_breaker(failure_threshold = 1, timeout = 0.3)
  res <- promise_value(breaker_fetch_async(server$url("/ok"), breaker = cb))
  expect_identical(res$status_code, 200L)
  cond <- promise_value(breaker_fetch_async(server$url("/hang?seconds=1"), breaker = cb, fallback = function(e) e))
  expect_s3_class(cond, "error")
  expect_identical(cb$state, "OPEN")
})

test_that("breaker_fetch_async() runs one poller per pool, which stops when the pool is idle", {
  skip_if_not_installed("curl")
  skip_if_not_installed("later")
  server <- local_downstream()
  pollers <- circuitbreaker:::async_pollers
  watched <- function(pool) {
    sum(endsWith(names(pollers$pools), paste0(":", rlang::obj_address(pool))))
  }
  # Both ways of waiting: later_fd() where later has it, and the shared tick
  # of older later (forced here).
  modes <- if (circuitbreaker:::has_later_fd()) c("later_fd", "tick") else "tick"
  for (mode in modes) {
    if (mode == "tick") {
      saved <- pollers$later_fd
      pollers$later_fd <- FALSE
      withr::defer(pollers$later_fd <- saved)
    }
    cb <- circuit_breaker(failure_threshold = 10, timeout = 5)
    pool <- curl::new_pool()
    ps <- lapply(1:4, function(i) breaker_fetch_async(server$url("/hang?seconds=0.3"), breaker = cb, pool = pool))
    ps[[5]] <- breaker_fetch_async(server$url("/ok"), breaker = cb)  # a pool of its own
    expect_identical(watched(pool), 1L, info = mode)
    values <- lapply(ps, promise_value)
    expect_identical(vapply(values, function(r) r$status_code, integer(1)), rep(200L, 5), info = mode)
    expect_identical(cb$metrics()$successes, 5, info = mode)
    expect_identical(watched(pool), 0L, info = mode)

    # A transfer added to a pool with another in flight is run as well.
    slow <- breaker_fetch_async(server$url("/hang?seconds=0.5"), breaker = cb, pool = pool)
    fast <- breaker_fetch_async(server$url("/ok"), breaker = cb, pool = pool)
    expect_identical(watched(pool), 1L, info = mode)
    expect_identical(promise_value(fast)$status_code, 200L, info = mode)
    expect_identical(promise_value(slow)$status_code, 200L, info = mode)
    expect_identical(watched(pool), 0L, info = mode)

    # A cancelled transfer never calls back: its poller stops all the same.
    p <- breaker_fetch_async(server$url("/hang?seconds=2"), breaker = cb, pool = pool)
    expect_identical(watched(pool), 1L, info = mode)
    for (h in curl::multi_list(pool)) curl::multi_cancel(h)
    pump_until(function() watched(pool) == 0L, 5)
    expect_identical(watched(pool), 0L, info = mode)
  }
})

test_that("execute_async() works with future_promise()", {
  skip_if_not_installed("future")
  skip_if_not_installed("promises")
  skip_on_cran()
  old <- future::plan(future::multisession, workers = 2)  # 1 would run sequentially
  on.exit(future::plan(old), add = TRUE)
  cb <- circuit_breaker(failure_threshold = 1)
  value <- promise_value(cb$execute_async(function() promises::future_promise(Sys.getpid())), seconds = 30)
  expect_true(is.numeric(value) && value != Sys.getpid())
  # The failing call hands over the future itself (a future is one of the
  # things as.promise() accepts): a rejected future_promise() also rejects a
  # finally() of promises' own work queue that has no handler, which prints
  # "Unhandled promise error" although the breaker handled the rejection.
  msg <- promise_value(cb$execute_async(function() future::future(stop("in a worker")),
                                        function(e) conditionMessage(e)), seconds = 30)
  expect_match(msg, "in a worker")
  expect_identical(cb$state, "OPEN")
})

test_that("breaker_perform_async() uses req_perform_promise() where httr2 has it", {
  skip_if_not_installed("httr2")
  if (!exists("req_perform_promise", envir = asNamespace("httr2"))) {
    expect_error(breaker_perform_async(httr2::request("http://127.0.0.1:1/")),
                 class = "circuit_breaker_missing_package")
    skip(paste("httr2", utils::packageVersion("httr2"), "has no req_perform_promise() (added in httr2 1.0.0)"))
  }
  server <- local_downstream()
  cb <- circuit_breaker(failure_threshold = 1)
  resp <- promise_value(breaker_perform_async(httr2::request(server$url("/ok")), cb))
  expect_identical(httr2::resp_status(resp), 200L)
  cond <- promise_value(breaker_perform_async(httr2::request(server$url("/status/503")), cb, function(e) e))
  expect_s3_class(cond, "httr2_http_503")
  expect_identical(cb$state, "OPEN")
})

test_that("immediate_fallback answers a rejected call with a plain value", {
  skip_if_not_installed("promises")
  cb <- circuit_breaker(failure_threshold = 1)
  cb$execute(fail, fallback)
  expect_identical(cb$execute_async(function() "not called", fallback, immediate_fallback = TRUE), "fallback")
  expect_error(cb$execute_async(function() "not called", immediate_fallback = TRUE), class = "circuit_breaker_open")
  expect_s3_class(cb$execute_async(function() "not called", fallback), "promise")
  expect_error(cb$execute_async(function() 1, fallback, immediate_fallback = "yes"),
               class = "circuit_breaker_invalid_argument")
  # Calls that are made still return promises.
  cb$reset()
  p <- cb$execute_async(function() "made", fallback, immediate_fallback = TRUE)
  expect_s3_class(p, "promise")
  expect_identical(promise_value(p), "made")
})
