# The fleet store's bulkhead is counted per host: every process of the host
# that uses the same fleet breaker (the same Redis server and database, prefix
# and name) takes its permits from one host segment, in this user's default
# host store directory, with no round trip to Redis per call. Real processes
# (callr), a real redis-server, real SIGKILLs; the racing and holding bodies
# are helper-bulkhead.R's, as for the host store (test-bulkhead.R).

# The file of fleet breaker `name`'s permits on this host (whether or not
# it exists).
fleet_bulkhead_path <- function(store, name) {
  circuitbreaker:::cb_fleet_bulkhead_path(circuitbreaker:::store_location(store, name, call = NULL))
}

# A fleet bulkhead test's name: its breaker is forgotten here, and its keys
# and its host file removed (breaker_store_unlink()), when `env` ends; the
# default directory too, when the test made it. Needs the host store.
local_fleet_bulkhead <- function(store, name, env = parent.frame()) {
  skip_if_not(circuitbreaker:::cb_host_supported(), "a fleet bulkhead is per host only with robust mutexes")
  local_default_store_directory(env)
  withr::defer({
    breaker_remove(name)
    gc()  # closes this process's breaker (it leaves the bulkhead's members)
    breaker_store_unlink(name, store)
  }, envir = env)
  name
}

test_that("racing processes never hold more permits than the host-wide limit of a fleet breaker", {
  skip_on_cran()
  server <- local_redis_server()
  store <- breaker_store_redis(server$url)
  name <- local_fleet_bulkhead(store, "fleet-bulkhead-race")
  args <- fleet_args(max_concurrent = 2)
  marks <- withr::local_tempdir()
  start <- tempfile("start")
  withr::defer(unlink(start))
  extra <- list(dir = marks, start = start, calls = 15L)
  procs <- lapply(1:4, function(i) fleet_child(server$url, name, args, racing_body, extra))
  withr::defer(for (p in procs) if (p$is_alive()) p$kill())
  file.create(start)
  results <- collect_children(procs, timeout = 90)
  seen <- vapply(results, function(r) r$seen, integer(1))
  admitted <- vapply(results, function(r) r$admitted, integer(1))
  full <- vapply(results, function(r) r$full, integer(1))
  expect_gt(sum(admitted), 0L)
  expect_gt(sum(full), 0L)  # four processes, two permits: the host's limit applied
  expect_lte(max(seen), 2L)
  expect_identical(sum(admitted) + sum(full), 60L)
  # This process sees the host's count: every full rejection of the children.
  cb <- do.call(circuit_breaker, c(args, list(name = name, store = store)))
  m <- cb$metrics()
  expect_identical(m$in_flight, 0)
  expect_identical(m$max_concurrent, 2)
  expect_identical(m$rejected_full, as.numeric(sum(full)))
  expect_identical(m$state, "CLOSED")
  expect_identical(m$failures, 0)
  expect_true(file.exists(fleet_bulkhead_path(store, name)))
})

test_that("a SIGKILLed holder's permit of a fleet breaker comes back at the next admission", {
  skip_on_cran()
  server <- local_redis_server()
  store <- breaker_store_redis(server$url)
  name <- local_fleet_bulkhead(store, "fleet-bulkhead-kill")
  args <- fleet_args(max_concurrent = 1)
  holding <- tempfile("holding")
  withr::defer(unlink(holding))
  child <- fleet_child(server$url, name, args, holding_body, list(holding = holding, hold = 60))
  withr::defer(if (child$is_alive()) child$kill())
  wait_until(function() file.exists(holding) || !child$is_alive(), timeout = 30, what = "the child holds the permit")
  cb <- do.call(circuit_breaker, c(args, list(name = name, store = store)))
  before <- cb$metrics()
  expect_identical(cb$execute(function() "not called", function(e) class(e)[[1]]), "circuit_breaker_full")
  m <- cb$metrics()
  expect_identical(m$in_flight, 1)  # the child's, on this host
  expect_identical(m$rejected_full, 1)
  # A full bulkhead moved nothing of the breaker.
  for (field in c("state", "generation", "rejected", "failures", "calls")) {
    expect_identical(m[[field]], before[[field]], label = field)
  }
  child$kill()  # SIGKILL: no on.exit, no release
  wait_until(function() !child$is_alive(), timeout = 10, what = "the child is dead")
  child$wait(5000)
  expect_identical(cb$execute(function() "admitted"), "admitted")
  expect_identical(cb$metrics()$in_flight, 0)
})

test_that("share(p) of a fleet breaker is a share of the host's processes using it", {
  skip_on_cran()
  server <- local_redis_server()
  store <- breaker_store_redis(server$url)
  name <- local_fleet_bulkhead(store, "fleet-bulkhead-share")
  args <- fleet_args(max_concurrent = share(0.5))
  cb <- do.call(circuit_breaker, c(args, list(name = name, store = store)))
  cb$execute(function() NULL)
  expect_identical(cb$metrics()$max_concurrent, 1)  # one process: one permit
  procs <- lapply(1:3, function(i) {
    fleet_child(server$url, name, args, function(cb, extra) {
      cb$execute(function() NULL, function() NULL)
      Sys.sleep(60)
    })
  })
  withr::defer(for (p in procs) if (p$is_alive()) p$kill())
  wait_until(function() cb$metrics()$max_concurrent == 2, timeout = 30,
             what = "four processes count: two permits")
  # Two permits: a third call in flight at once is refused.
  got <- cb$execute(function() cb$execute(function() cb$execute(function() "not called", function(e) class(e)[[1]])))
  expect_identical(got, "circuit_breaker_full")
  for (p in procs) p$kill()
  for (p in procs) p$wait(5000)
  # Dead members are dropped by the next admission that finds it full.
  cb$execute(function() cb$execute(function() cb$execute(function() NULL, function() NULL)))
  expect_identical(cb$metrics()$max_concurrent, 1)
})

test_that("a process that ends normally stops counting for a fleet breaker's share(p)", {
  skip_on_cran()
  server <- local_redis_server()
  store <- breaker_store_redis(server$url)
  name <- local_fleet_bulkhead(store, "fleet-bulkhead-leave")
  args <- fleet_args(max_concurrent = share(1))
  cb <- do.call(circuit_breaker, c(args, list(name = name, store = store)))
  cb$execute(function() NULL)
  seen <- collect_children(list(fleet_child(server$url, name, args, function(cb, extra) {
    cb$execute(function() cb$metrics()$max_concurrent)
  })))[[1]]
  expect_identical(seen, 2)
  expect_identical(cb$metrics()$max_concurrent, 1)
})

test_that("a fleet breaker without a bulkhead makes no host file; unlinking removes one", {
  server <- local_redis_server()
  store <- breaker_store_redis(server$url)
  plain <- local_fleet_bulkhead(store, "fleet-no-bulkhead")
  cb <- circuit_breaker(name = plain, store = store)
  expect_identical(cb$execute(function() "ok"), "ok")
  expect_false(file.exists(fleet_bulkhead_path(store, plain)))
  expect_identical(cb$metrics()$max_concurrent, NA_real_)

  limited <- local_fleet_bulkhead(store, "fleet-bulkhead-unlink")
  b <- circuit_breaker(name = limited, store = store, max_concurrent = 1)
  b$execute(function() NULL)
  path <- fleet_bulkhead_path(store, limited)
  expect_true(file.exists(path))
  expect_identical(dirname(path), file.path("/dev/shm", paste0("circuitbreaker-", effective_uid())))
  expect_match(basename(path), "^cbf-[0-9a-f]{16}-fleet-bulkhead-unlink$")
  # Closing the breaker leaves the file (as a host store's segment stays):
  # breaker_store_unlink() removes it, with the breaker's keys.
  breaker_remove(limited)
  rm(b)
  gc()
  expect_true(file.exists(path))
  expect_true(breaker_store_unlink(limited, store))
  expect_false(file.exists(path))
  # The host store does not list it as one of its breakers.
  expect_false(any(grepl("^cbf-", breaker_store_segments()$file)))
})

test_that("two Redis fleets on one host do not share a bulkhead; the password is not part of the file", {
  a <- local_redis_server()
  b <- local_redis_server(password = "s3cret-pw")
  store_a <- breaker_store_redis(a$url)
  store_b <- breaker_store_redis(b$url)
  name <- local_fleet_bulkhead(store_a, "fleet-bulkhead-two")
  local_fleet_bulkhead(store_b, name)
  expect_false(identical(fleet_bulkhead_path(store_a, name), fleet_bulkhead_path(store_b, name)))
  expect_no_match(fleet_bulkhead_path(store_b, name), "s3cret", fixed = TRUE)
  # The same server without the password: the same breaker, the same file.
  bare <- breaker_store_redis(sub(":s3cret-pw@", "", b$url, fixed = TRUE))
  expect_identical(fleet_bulkhead_path(bare, name), fleet_bulkhead_path(store_b, name))
  # Another prefix or database: another breaker.
  expect_false(identical(fleet_bulkhead_path(breaker_store_redis(a$url, prefix = "other"), name),
                         fleet_bulkhead_path(store_a, name)))
  expect_false(identical(fleet_bulkhead_path(breaker_store_redis(sub("/0$", "/1", a$url)), name),
                         fleet_bulkhead_path(store_a, name)))
  # A process on fleet B takes B's only permit; fleet A's breaker of the same
  # name still admits.
  holding <- tempfile("holding")
  withr::defer(unlink(holding))
  child <- fleet_child(b$url, name, fleet_args(max_concurrent = 1), holding_body,
                       list(holding = holding, hold = 60))
  withr::defer(if (child$is_alive()) child$kill())
  wait_until(function() file.exists(holding) || !child$is_alive(), timeout = 30, what = "the child holds the permit")
  cb <- do.call(circuit_breaker, c(fleet_args(max_concurrent = 1), list(name = name, store = store_a)))
  expect_identical(cb$execute(function() "admitted"), "admitted")
  child$kill()
  child$wait(5000)
})

test_that("a planted file in place of a fleet breaker's host file is refused", {
  server <- local_redis_server()
  store <- breaker_store_redis(server$url)
  name <- local_fleet_bulkhead(store, "fleet-bulkhead-planted")
  dir <- file.path("/dev/shm", paste0("circuitbreaker-", effective_uid()))
  if (!dir.exists(dir)) dir.create(dir, mode = "0700")
  path <- fleet_bulkhead_path(store, name)
  target <- tempfile("target")
  file.create(target)
  withr::defer(unlink(c(path, target)))
  file.symlink(target, path)
  err <- expect_untrusted(circuit_breaker(name = name, store = store, max_concurrent = 1))
  expect_match(conditionMessage(err), basename(path), fixed = TRUE)
  expect_identical(err$reason, "untrusted")
  expect_true(file.exists(target))  # nothing written through the link
  expect_identical(file.size(target), 0)
})

test_that("a fleet breaker's stuck host file raises circuit_breaker_store_busy and moves nothing", {
  skip_on_cran()
  server <- local_redis_server()
  store <- breaker_store_redis(server$url)
  name <- local_fleet_bulkhead(store, "fleet-bulkhead-busy")
  cb <- circuit_breaker(name = name, store = store, max_concurrent = 1)
  path <- fleet_bulkhead_path(store, name)
  ready <- tempfile("ready")
  withr::defer(unlink(ready))
  holder <- callr::r_bg(function(path, ready) {
    if (!circuitbreaker:::cb_segment_hold_lock(path)) stop("could not take the lock")
    writeLines("held", ready)
    tools::pskill(Sys.getpid(), tools::SIGSTOP)  # alive, holding the lock, stopped
    Sys.sleep(60)  # stays alive if ever continued; the test kills it
  }, list(path = path, ready = ready), libpath = .libPaths(), supervise = TRUE)
  withr::defer(if (holder$is_alive()) holder$kill())
  wait_until(function() file.exists(ready) && holder$get_status() == "stopped", timeout = 30,
             interval = 0.05, what = "the holder to take the lock and stop")

  started <- Sys.time()
  err <- expect_error(cb$execute(function() "not called"), class = "circuit_breaker_store_busy")
  expect_match(conditionMessage(err), basename(path), fixed = TRUE)
  expect_error(cb$metrics(), class = "circuit_breaker_store_busy")
  expect_lt(as.numeric(difftime(Sys.time(), started, units = "secs")), 30)  # not hung

  # Its death frees the lock; the refused call moved nothing of the breaker.
  holder$kill()
  expect_identical(cb$execute(function() "ok"), "ok")
  m <- cb$metrics()
  expect_identical(m$state, "CLOSED")
  expect_identical(m$calls, 1)
  expect_identical(m$rejected, 0)
  expect_identical(m$in_flight, 0)
})
