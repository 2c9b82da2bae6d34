# The bulkhead (max_concurrent, max_wait): permits per process for the
# process store, host-wide for the host store (the fleet store's, also
# host-wide: test-bulkhead-fleet.R), leases that come back when a call ends
# however it ends (or its process dies), and a full bulkhead that is not a
# failure of the dependency.

# --- the process store ------------------------------------------------------

test_that("a full bulkhead runs the fallback with circuit_breaker_full and moves no breaker state", {
  cb <- circuit_breaker(max_concurrent = 2)
  seen <- NULL
  inner <- function() {
    before <- cb$metrics()
    value <- cb$execute(function() "not called", function(e) {
      seen <<- e
      "fallback"
    })
    list(value = value, before = before, after = cb$metrics())
  }
  got <- cb$execute(function() cb$execute(inner))
  expect_identical(got$value, "fallback")
  expect_s3_class(seen, c("circuit_breaker_full", "circuit_breaker_rejected", "error", "condition"),
                  exact = TRUE)
  expect_false(inherits(seen, "circuit_breaker_open"))
  expect_identical(seen$reason, "full")
  expect_identical(seen$state, "CLOSED")
  expect_identical(got$after$in_flight, 2)
  expect_identical(got$after$max_concurrent, 2)
  expect_identical(got$after$rejected_full, 1)
  # Not a failure, not a breaker rejection, not a call: the state is as it was.
  for (field in c("state", "generation", "rejected", "failures", "calls", "window_calls", "failure_count")) {
    expect_identical(got$after[[field]], got$before[[field]], label = field)
  }
  m <- cb$metrics()
  expect_identical(m$in_flight, 0)
  expect_identical(m$calls, 2)  # the two calls that held permits
  expect_identical(m$state, "CLOSED")
})

test_that("without a fallback a full bulkhead signals circuit_breaker_full; open is also rejected", {
  cb <- circuit_breaker(max_concurrent = 1)
  err <- cb$execute(function() tryCatch(cb$execute(function() 1), error = identity))
  expect_s3_class(err, "circuit_breaker_full")
  expect_s3_class(err, "circuit_breaker_rejected")
  expect_snapshot(cb$execute(function() cb$execute(function() 1)), error = TRUE)
  # The open condition is a circuit_breaker_rejected too.
  open <- circuit_breaker()
  open$force_open()
  expect_error(open$execute(function() 1), class = "circuit_breaker_rejected")
  expect_error(open$execute(function() 1), class = "circuit_breaker_open")
  # A fallback without an argument is called without a condition.
  expect_identical(cb$execute(function() cb$execute(function() 1, function() "plain")), "plain")
})

test_that("an open breaker rejects as open first, even with a full bulkhead", {
  cb <- circuit_breaker(max_concurrent = 1, failure_threshold = 1)
  reason <- cb$execute(function() {
    cb$on_failure()  # trips it while this call holds the only permit
    tryCatch(cb$execute(function() 1), error = function(e) class(e)[[1]])
  })
  expect_identical(reason, "circuit_breaker_open")
  expect_identical(cb$metrics()$rejected_full, 0)
  expect_identical(cb$metrics()$in_flight, 0)
})

test_that("permits come back on return, error, an unwinding condition and an interrupt", {
  cb <- circuit_breaker(max_concurrent = 1, failure_threshold = 100)
  expect_identical(cb$execute(function() "ok"), "ok")
  expect_error(cb$execute(function() stop("down")), "down")
  expect_identical(cb$execute(function() stop("down"), function() "fb"), "fb")
  tryCatch(cb$execute(function() warning("abandoned")), warning = function(w) NULL)
  tryCatch(cb$execute(function() rlang::interrupt()), interrupt = function(i) NULL)
  expect_identical(cb$metrics()$in_flight, 0)
  expect_identical(cb$execute(function() "still admitted"), "still admitted")
  expect_identical(cb$metrics()$rejected_full, 0)
})

test_that("max_wait waits, then rejects (nobody frees the permit in this process)", {
  cb <- circuit_breaker(max_concurrent = 1, max_wait = 0.3)
  started <- Sys.time()
  err <- cb$execute(function() tryCatch(cb$execute(function() 1), error = identity))
  waited <- as.numeric(difftime(Sys.time(), started, units = "secs"))
  expect_s3_class(err, "circuit_breaker_full")
  expect_gte(waited, 0.3)  # the wait is the bound itself, not a timing claim
  expect_lt(waited, 10)    # hang detector
  expect_identical(cb$metrics()$rejected_full, 1)  # counted once, not per poll
  expect_identical(cb$metrics()$in_flight, 0)
})

test_that("share(p) resolves to at least one permit in one process", {
  cb <- circuit_breaker(max_concurrent = share(0.25))
  expect_identical(cb$metrics()$max_concurrent, 1)
  expect_s3_class(cb$config$max_concurrent, "circuit_breaker_share")
  expect_identical(format(cb$config$max_concurrent), "share(0.25)")
  expect_match(paste(format(cb), collapse = "\n"), "bulkhead: 0 of 1 in flight (share(0.25))", fixed = TRUE)
  expect_identical(circuit_breaker()$metrics()$max_concurrent, NA_real_)
  expect_identical(circuit_breaker()$metrics()$in_flight, 0)
})

test_that("the rejected event says why; listeners without `reason` still work", {
  cb <- circuit_breaker(max_concurrent = 1)
  reasons <- character()
  cb$on("rejected", function(reason) reasons <<- c(reasons, reason))
  calls <- 0
  cb$on("rejected", function(retry_after) calls <<- calls + 1)
  cb$execute(function() cb$execute(function() 1, function() NULL))
  expect_identical(reasons, "full")
  expect_identical(calls, 1)
})

test_that("breaker_for() and configure() take the bulkhead's arguments", {
  withr::local_options(circuitbreaker.defaults = list(max_concurrent = 3, max_wait = 0.5))
  b <- breaker_for("bulkhead-defaults.example:443")
  withr::defer(breaker_remove("bulkhead-defaults.example:443"))
  expect_identical(b$config$max_concurrent, 3)
  expect_identical(b$config$max_wait, 0.5)
  expect_identical(b$metrics()$max_concurrent, 3)
  cb <- circuit_breaker()
  cb$configure(max_concurrent = share(1))
  expect_identical(format(cb$config$max_concurrent), "share(1)")
  cb$configure(max_concurrent = NULL)
  expect_null(cb$config$max_concurrent)
})

test_that("bad bulkhead arguments get classed errors that name them", {
  expect_snapshot(error = TRUE, {
    circuit_breaker(max_concurrent = 0)
    circuit_breaker(max_concurrent = -1)
    circuit_breaker(max_concurrent = NA)
    circuit_breaker(max_concurrent = "a")
    circuit_breaker(max_concurrent = 65)
    circuit_breaker(max_concurrent = 1.5)
    circuit_breaker(max_wait = -1)
    share(0)
    share(2)
    share("a")
  })
  for (bad in list(0, -1, NA, "a", 65, 1.5, -0.5)) {
    expect_error(circuit_breaker(max_concurrent = bad), class = "circuit_breaker_invalid_argument")
  }
  expect_error(circuit_breaker(max_wait = -1), class = "circuit_breaker_invalid_argument")
  expect_error(share(0), class = "circuit_breaker_invalid_argument")
  expect_error(share(2), class = "circuit_breaker_invalid_argument")
  # A share made by hand, outside (0, 1], is refused where it is used.
  expect_error(circuit_breaker(max_concurrent = structure(2, class = "circuit_breaker_share")),
               class = "circuit_breaker_invalid_argument")
})

# --- asynchronous calls -----------------------------------------------------

test_that("an asynchronous call holds its permit until its promise settles", {
  skip_if_not_installed("promises")
  skip_if_not_installed("later")
  cb <- circuit_breaker(max_concurrent = 1)
  resolve <- NULL
  p <- cb$execute_async(function() promises::promise(function(res, rej) resolve <<- res))
  expect_identical(cb$metrics()$in_flight, 1)
  full <- cb$execute_async(function() promises::promise_resolve("not called"), function(e) class(e)[[1]])
  expect_identical(promise_value(full), "circuit_breaker_full")
  expect_identical(cb$metrics()$in_flight, 1)
  resolve("done")
  expect_identical(promise_value(p), "done")
  expect_identical(cb$metrics()$in_flight, 0)
  # A request that fails before it returns a promise frees it too.
  failed <- cb$execute_async(function() stop("no promise"), function(e) "fallback")
  expect_identical(promise_value(failed), "fallback")
  expect_identical(cb$metrics()$in_flight, 0)
})

test_that("a cancelled mirai gives its permit back", {
  local_mirai_daemons(1)
  cb <- circuit_breaker(max_concurrent = 1)
  m <- mirai::mirai(Sys.sleep(30))
  p <- cb$execute_async(function() m)
  expect_identical(cb$metrics()$in_flight, 1)
  mirai::stop_mirai(m)
  expect_error(promise_value(p))
  expect_true(pump_until(function() cb$metrics()$in_flight == 0))
  expect_identical(cb$metrics()$released, 1)
})

# --- the host store: real processes -----------------------------------------

test_that("racing processes never hold more permits than the host-wide limit", {
  skip_on_cran()
  store <- local_host_store()
  name <- "bulkhead-race"
  args <- host_args(max_concurrent = 2)
  marks <- withr::local_tempdir()
  start <- tempfile("start")
  withr::defer(unlink(start))
  extra <- list(dir = marks, start = start, calls = 15L)
  procs <- lapply(1:4, function(i) shared_child(store, name, args, racing_body, extra))
  file.create(start)
  results <- collect_children(procs, timeout = 90)
  seen <- vapply(results, function(r) r$seen, integer(1))
  admitted <- vapply(results, function(r) r$admitted, integer(1))
  full <- vapply(results, function(r) r$full, integer(1))
  expect_gt(sum(admitted), 0L)
  expect_lte(max(seen), 2L)
  expect_identical(sum(admitted) + sum(full), 60L)
  cb <- local_shared_breaker(store, name, args)
  m <- cb$metrics()
  expect_identical(m$in_flight, 0)
  expect_identical(m$rejected_full, as.numeric(sum(full)))
  expect_identical(m$state, "CLOSED")
  expect_identical(m$failures, 0)
})

test_that("a SIGKILLed holder's permit comes back at the next admission", {
  skip_on_cran()
  store <- local_host_store()
  name <- "bulkhead-kill"
  args <- host_args(max_concurrent = 1)
  holding <- tempfile("holding")
  withr::defer(unlink(holding))
  child <- shared_child(store, name, args, holding_body, list(holding = holding, hold = 60))
  withr::defer(if (child$is_alive()) child$kill())
  wait_until(function() file.exists(holding) || !child$is_alive(), timeout = 30, what = "the child holds the permit")
  cb <- local_shared_breaker(store, name, args)
  expect_identical(cb$execute(function() "not called", function(e) class(e)[[1]]), "circuit_breaker_full")
  expect_identical(cb$metrics()$in_flight, 1)
  child$kill()  # SIGKILL: no on.exit, no release
  wait_until(function() !child$is_alive(), timeout = 10, what = "the child is dead")
  child$wait(5000)
  expect_identical(cb$execute(function() "admitted"), "admitted")
  m <- cb$metrics()
  expect_identical(m$in_flight, 0)
  expect_identical(m$released, 1)  # the dead holder's permit
})

test_that("max_wait admits a call once another process frees the permit, or rejects", {
  skip_on_cran()
  store <- local_host_store()
  name <- "bulkhead-wait"
  args <- host_args(max_concurrent = 1, max_wait = 20)
  holding <- tempfile("holding")
  withr::defer(unlink(holding))
  # The holder releases after a second: the waiting call is then admitted.
  child <- shared_child(store, name, args, holding_body, list(holding = holding, hold = 1))
  withr::defer(if (child$is_alive()) child$kill())
  wait_until(function() file.exists(holding) || !child$is_alive(), timeout = 30, what = "the child holds the permit")
  cb <- local_shared_breaker(store, name, args)
  started <- Sys.time()
  expect_identical(cb$execute(function() "admitted after waiting"), "admitted after waiting")
  expect_lt(as.numeric(difftime(Sys.time(), started, units = "secs")), 20)  # hang detector
  expect_identical(collect_children(list(child))[[1]], "released")
  expect_identical(cb$metrics()$rejected_full, 1)

  # A holder that keeps it: the wait ends in a rejection.
  unlink(holding)
  short <- host_args(max_concurrent = 1, max_wait = 20)
  child2 <- shared_child(store, name, short, holding_body, list(holding = holding, hold = 60))
  withr::defer(if (child2$is_alive()) child2$kill())
  wait_until(function() file.exists(holding) || !child2$is_alive(), timeout = 30, what = "the child holds the permit")
  # The same breaker (max_wait is its identity), interrupted by a timeout of
  # our own: setTimeLimit() ends the wait like a user's Ctrl-C would.
  err <- tryCatch({
    setTimeLimit(elapsed = 0.5, transient = TRUE)
    cb$execute(function() "not called")
  }, error = identity)
  setTimeLimit(elapsed = Inf)
  expect_false(identical(err, "not called"))
  expect_identical(cb$metrics()$in_flight, 1)  # only the child's
  child2$kill()
})

test_that("a short max_wait rejects with circuit_breaker_full when the holder keeps the permit", {
  skip_on_cran()
  store <- local_host_store()
  name <- "bulkhead-wait-reject"
  args <- host_args(max_concurrent = 1, max_wait = 0.3)
  holding <- tempfile("holding")
  withr::defer(unlink(holding))
  child <- shared_child(store, name, args, holding_body, list(holding = holding, hold = 60))
  withr::defer(if (child$is_alive()) child$kill())
  wait_until(function() file.exists(holding) || !child$is_alive(), timeout = 30, what = "the child holds the permit")
  cb <- local_shared_breaker(store, name, args)
  err <- cb$execute(function() "not called", function(e) e)
  expect_s3_class(err, "circuit_breaker_full")
  child$kill()
})

test_that("share(p) on the host store is a share of the processes using the breaker", {
  skip_on_cran()
  store <- local_host_store()
  name <- "bulkhead-share"
  args <- host_args(max_concurrent = share(0.5))
  holding <- tempfile("holding")
  withr::defer(unlink(holding))
  cb <- local_shared_breaker(store, name, args)
  cb$execute(function() NULL)
  expect_identical(cb$metrics()$max_concurrent, 1)  # one process: one permit
  procs <- lapply(1:3, function(i) {
    shared_child(store, name, args, function(cb, extra) {
      cb$execute(function() NULL, function() NULL)
      Sys.sleep(60)
    })
  })
  withr::defer(for (p in procs) if (p$is_alive()) p$kill())
  wait_until(function() cb$metrics()$max_concurrent == 2, timeout = 30,
             what = "four processes count: two permits")
  for (p in procs) p$kill()
  for (p in procs) p$wait(5000)
  # Dead members are dropped by the next admission that finds it full (the
  # third of three nested calls, with two permits).
  cb$execute(function() cb$execute(function() cb$execute(function() NULL, function() NULL)))
  expect_identical(cb$metrics()$max_concurrent, 1)
})

test_that("a process that ends normally stops counting for share(p)", {
  skip_on_cran()
  store <- local_host_store()
  name <- "bulkhead-share-leave"
  args <- host_args(max_concurrent = share(1))
  cb <- local_shared_breaker(store, name, args)
  cb$execute(function() NULL)
  expect_identical(cb$metrics()$max_concurrent, 1)
  # The child makes one call (it counts: two processes, two permits), then
  # ends; its breaker is closed as R exits, and it leaves the count.
  seen <- collect_children(list(shared_child(store, name, args, function(cb, extra) {
    cb$execute(function() cb$metrics()$max_concurrent)
  })))[[1]]
  expect_identical(seen, 2)
  expect_identical(cb$metrics()$max_concurrent, 1)
})

test_that("the dashboard's card shows a bulkhead's permits, and only where there is one", {
  skip_if_not_installed("shiny")
  cb <- circuit_breaker(max_concurrent = 2)
  card <- function(b) as.character(circuitbreaker:::card_info(circuitbreaker:::breaker_snapshot(b, "b")))
  expect_match(cb$execute(function() card(cb)), "1 of 2 (0 full)", fixed = TRUE)
  expect_no_match(card(circuit_breaker()), "in flight", fixed = TRUE)
})
