# A host segment is untrusted input: bytes that another process
# (or a crafted file) wrote give classed errors within a bound, in child R
# processes (callr) that must not crash and go on with their other breakers;
# a lock held by a stopped process makes another process's calls busy, not
# hung. Offsets come from the C++ layout (cb_segment_layout()), never from
# numbers written here.

# Writes `value` (4-byte integers) at byte `offset` of `file`.
poke_segment <- function(file, offset, value) {
  con <- file(file, "r+b")
  on.exit(close(con))
  seek(con, offset, rw = "write")
  writeBin(as.integer(value), con, size = 4L, endian = .Platform$endian)
}

# The slot index a segment file says is committed.
committed_slot <- function(file, layout) {
  con <- file(file, "rb")
  on.exit(close(con))
  seek(con, layout$committed)
  readBin(con, "integer", size = 4L, endian = .Platform$endian)
}

test_that("a crafted value in a live segment gives circuit_breaker_store_corrupt; the process goes on", {
  store <- local_host_store()
  out <- callr::r(function(dir, poke_segment, committed_slot) {
    library(circuitbreaker)
    store <- breaker_store_host(dir)
    layout <- circuitbreaker:::cb_segment_layout()
    file_of <- function(name) file.path(dir, circuitbreaker:::cb_segment_file_name(name))
    # Each damage: where (relative to the committed state, or absolute) and what.
    damages <- list(
      window_index = function(file) {
        slot <- layout$slots[[committed_slot(file, layout) + 1L]]
        poke_segment(file, slot + layout$count_window_position, -16L)  # 0xFFFFFFF0
      },
      state_enum = function(file) {
        slot <- layout$slots[[committed_slot(file, layout) + 1L]]
        poke_segment(file, slot + layout$state, 0x07070707L)
      },
      committed_index = function(file) poke_segment(file, layout$committed, 5L)
    )
    bystander <- circuit_breaker(name = "bystander", store = store)
    result <- list()
    for (what in names(damages)) {
      cb <- circuit_breaker(name = what, failure_rate_threshold = 0.5, window_size = 10,
                            store = store)
      cb$execute(function() "ok")
      damages[[what]](file_of(what))
      started <- Sys.time()
      err <- tryCatch(cb$execute(function() "ok"), error = function(e) e)
      again <- tryCatch(cb$metrics(), error = function(e) e)
      listed <- breaker_store_segments(store)
      result[[what]] <- list(
        class = class(err),
        again = class(again),
        seconds = as.numeric(difftime(Sys.time(), started, units = "secs")),
        listed = listed$status[listed$name == what],
        attach = class(tryCatch(
          circuit_breaker(name = what, failure_rate_threshold = 0.5, window_size = 10,
                          store = store),
          error = function(e) e
        ))
      )
      breaker_remove(what)
    }
    result$bystander <- bystander$execute(function() "still works")
    result
  }, list(dir = store$path, poke_segment = poke_segment, committed_slot = committed_slot),
  libpath = .libPaths(), timeout = 60)

  for (what in c("window_index", "state_enum", "committed_index")) {
    r <- out[[what]]
    expect_true("circuit_breaker_store_corrupt" %in% r$class, info = what)
    expect_true("circuit_breaker_store_error" %in% r$class, info = what)
    expect_true("circuit_breaker_store_corrupt" %in% r$again, info = what)
    expect_lt(r$seconds, 30)  # a hang detector, not a timing
    expect_identical(r$listed, "not a segment", info = what)
    expect_true("circuit_breaker_store_corrupt" %in% r$attach, info = what)
  }
  expect_identical(out$bystander, "still works")
})

test_that("a forged lock owner makes calls busy for at most the bound, and the breaker recovers", {
  store <- local_host_store()
  out <- callr::r(function(dir, poke_segment) {
    library(circuitbreaker)
    store <- breaker_store_host(dir, lock_timeout = 0.25)
    layout <- circuitbreaker:::cb_segment_layout()
    cb <- circuit_breaker(name = "forged", store = store)
    other <- circuit_breaker(name = "other", store = store)
    cb$execute(function() "ok")
    file <- file.path(dir, circuitbreaker:::cb_segment_file_name("forged"))
    # glibc's lock word, the first of the mutex: pid 1, alive and never unlocking.
    poke_segment(file, layout$mutex, 1L)
    started <- Sys.time()
    busy <- tryCatch(cb$execute(function() "ok"), error = function(e) e)
    seconds <- as.numeric(difftime(Sys.time(), started, units = "secs"))
    busy_metrics <- tryCatch(cb$metrics(), error = function(e) e)
    bystander <- other$execute(function() "still works")
    poke_segment(file, layout$mutex, 0L)
    list(class = class(busy), seconds = seconds, bound = busy$seconds,
         metrics = class(busy_metrics), bystander = bystander,
         after = cb$execute(function() "works again"), state = cb$state)
  }, list(dir = store$path, poke_segment = poke_segment), libpath = .libPaths(), timeout = 60)
  expect_true(all(c("circuit_breaker_store_busy", "circuit_breaker_store_error",
                    "circuit_breaker_error") %in% out$class))
  expect_identical(out$bound, 0.25)  # the store's lock_timeout
  expect_lt(out$seconds, 30)  # a hang detector, not a timing
  expect_true("circuit_breaker_store_busy" %in% out$metrics)
  expect_identical(out$bystander, "still works")
  expect_identical(out$after, "works again")  # busy is not damage
  expect_identical(out$state, "CLOSED")
})

test_that("a stopped process holding the lock makes another process's calls busy, not hung", {
  skip_on_os("windows")
  store <- local_host_store()
  cb <- local_shared_breaker(store, "held", host_args())
  cb$execute(function() "ok")
  ready <- tempfile("cb-held-")
  withr::defer(unlink(ready))
  holder <- callr::r_bg(function(dir, ready) {
    library(circuitbreaker)
    cb <- circuit_breaker(name = "held", failure_threshold = 5, recovery_timeout = 30,
                          store = breaker_store_host(dir))
    file <- file.path(dir, circuitbreaker:::cb_segment_file_name("held"))
    if (!circuitbreaker:::cb_segment_hold_lock(file)) stop("could not take the lock")
    writeLines("held", ready)
    tools::pskill(Sys.getpid(), tools::SIGSTOP)  # alive, holding the lock, stopped
    Sys.sleep(60)  # stays alive if ever continued; the test kills it
  }, list(dir = store$path, ready = ready), libpath = .libPaths(), supervise = TRUE)
  withr::defer(if (holder$is_alive()) holder$kill())
  wait_until(function() file.exists(ready) && holder$get_status() == "stopped", timeout = 30,
             interval = 0.05, what = "the holder to take the lock and stop")

  started <- Sys.time()
  expect_error(cb$execute(function() "ok"), class = "circuit_breaker_store_busy")
  expect_error(cb$metrics(), class = "circuit_breaker_store_busy")
  expect_lt(as.numeric(difftime(Sys.time(), started, units = "secs")), 30)  # not hung

  # Its death frees the lock: the next call recovers it and works.
  holder$kill()
  expect_identical(cb$execute(function() "ok"), "ok")
  expect_identical(cb$state, "CLOSED")
})

test_that("busy and corrupt segments have clear messages", {
  expect_snapshot(error = TRUE, circuitbreaker:::abort_host_busy("/dev/shm/cb-inventory", 1))
  expect_snapshot(error = TRUE, circuitbreaker:::abort_host_broken("/dev/shm/cb-inventory"))
})

test_that("lock_timeout is a positive number of seconds, at most 60", {
  skip_if_not(circuitbreaker:::cb_host_supported(), "host-shared breakers need Linux")
  expect_identical(breaker_store_host(tempdir())$lock_timeout, 1)
  expect_identical(breaker_store_host(tempdir(), lock_timeout = 0.005)$lock_timeout, 0.005)
  for (bad in list(0, -1, 61, Inf, NA, "1", c(1, 2), NULL)) {
    expect_error(breaker_store_host(tempdir(), lock_timeout = bad),
                 class = "circuit_breaker_invalid_argument")
  }
  expect_snapshot(error = TRUE, breaker_store_host(tempdir(), lock_timeout = 0))
})
