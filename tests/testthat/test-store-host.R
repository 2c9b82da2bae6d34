# Breakers shared by the R processes of a host (breaker_store_host()): real
# R processes (callr, and forks from parallel), real SIGKILLs, real segment
# files in a private directory of /dev/shm.

test_that("a trip spread over 4 processes opens the breaker for all of them", {
  store <- local_host_store()
  args <- host_args(failure_threshold = 5)
  cb <- local_shared_breaker(store, "trip", args)
  # 2 + 1 + 1 + 1 failures, in four processes at once.
  fails <- collect_children(lapply(c(2, 1, 1, 1), function(n) {
    shared_child(store, "trip", args, function(cb, extra) {
      for (i in seq_len(extra$n)) cb$execute(function() stop("down"), function() "fallback")
      extra$n
    }, extra = list(n = n))
  }))
  expect_identical(sum(unlist(fails)), 5)
  m <- cb$metrics()
  expect_identical(m$state, "OPEN")
  expect_identical(m$failures, 5)
  expect_identical(m$times_opened, 1)
  # Every process, new ones included, is refused without making the call.
  called <- collect_children(lapply(1:4, function(i) {
    shared_child(store, "trip", args, function(cb, extra) {
      ran <- FALSE
      cb$execute(function() ran <<- TRUE, function() "fallback")
      c(ran = ran, state = cb$state)
    })
  }))
  for (r in called) expect_identical(r, c(ran = "FALSE", state = "OPEN"))
  expect_identical(cb$execute(function() "called", function() "fallback"), "fallback")
  expect_identical(cb$metrics()$rejected, 5)
})

test_that("4 processes x 10,000 calls on one breaker give exact counts", {
  store <- local_host_store()
  args <- host_args(failure_threshold = Inf)
  cb <- local_shared_breaker(store, "exact", args)
  start <- tempfile()
  readies <- replicate(4, tempfile())
  procs <- lapply(readies, function(ready) {
    shared_child(store, "exact", args, function(cb, extra) {
      # Start together, so that the processes contend for the lock.
      file.create(extra$ready)
      extra$wait_until(function() file.exists(extra$start), timeout = 30, interval = 0.01, what = "the start")
      for (j in 1:10000) {
        if (j %% 10L == 0L) {
          cb$execute(function() stop("down"), function() "fallback")
        } else {
          cb$execute(function() "ok")
        }
      }
      TRUE
    }, extra = list(start = start, ready = ready, wait_until = child_wait_until()))
  })
  wait_until(function() all(file.exists(readies)), timeout = 30, what = "the 4 children to be ready")
  file.create(start)
  collect_children(procs, timeout = 120)
  m <- cb$metrics()
  expect_identical(m$calls, 40000)
  expect_identical(m$successes, 36000)
  expect_identical(m$failures, 4000)
  expect_identical(m$state, "CLOSED")
  expect_identical(m$late + m$released + m$rejected, 0)
})

test_that("racing processes after the open period admit exactly half_open_max_calls probes", {
  store <- local_host_store()
  args <- host_args(failure_threshold = 1, recovery_timeout = 0.5, half_open_max_calls = 2)
  cb <- local_shared_breaker(store, "race", args)
  cb$execute(function() stop("down"), function() "fallback")
  expect_identical(cb$state, "OPEN")
  race <- local_probe_race(6, probes = 2)
  procs <- lapply(seq_along(race$readies), function(i) {
    shared_child(store, "race", args, function(cb, extra) {
      extra$ready_and_wait(extra)
      # A probe sees HALF_OPEN from inside its request.
      extra$race_call(cb, extra)
    }, extra = race$extra(i))
  })
  wait_until(function() all(file.exists(race$readies)), timeout = 30, what = "the 6 children to be ready")
  wait_for_probe_time(cb)
  file.create(race$start)
  res <- collect_children(procs)
  expect_identical(sum(vapply(res, function(r) identical(r$state, "HALF_OPEN"), TRUE)), 2L)
  expect_identical(cb$state, "CLOSED")
})

test_that("a process killed at random moments 100 times leaves the breaker consistent and unlocked", {
  skip_on_os(c("windows", "mac"))
  store <- local_host_store()
  # Everything runs in one child R process, which forks the victims: if a
  # kill ever left the lock held, that process hangs and callr's timeout
  # fails the test instead of hanging the suite.
  out <- callr::r(function(dir) {
    library(circuitbreaker)
    cb <- circuit_breaker(name = "kills", failure_threshold = Inf, store = breaker_store_host(dir))
    set.seed(42)
    for (i in 1:100) {
      victim <- parallel::mcparallel({
        for (j in 1:1e7) {
          cb$execute(function() if (j %% 3L == 0L) stop("down") else "ok", function() "fallback")
        }
      }, silent = TRUE)
      Sys.sleep(stats::runif(1, 0.002, 0.03))  # a random moment: what the test is about
      tools::pskill(victim$pid, tools::SIGKILL)
      parallel::mccollect(victim, wait = TRUE)
      # The survivor's calls all count, one each.
      before <- cb$metrics()
      for (k in 1:20) cb$execute(function() "ok")
      after <- cb$metrics()
      if (after$calls != before$calls + 20 || after$successes != before$successes + 20) {
        stop("calls were lost after kill ", i)
      }
    }
    m <- cb$metrics()
    list(metrics = m, info = circuitbreaker:::cb_host_info(environment(cb$execute)$ptr))
  }, list(store$path), libpath = .libPaths(), timeout = 240)
  m <- out$metrics
  expect_identical(m$state, "CLOSED")
  expect_identical(m$calls, m$successes + m$failures)
  expect_gte(m$calls, 2000)  # the survivor's own calls
  expect_identical(m$late, 0)
  # A new process attaches and works.
  r <- collect_children(list(shared_child(store, "kills", host_args(failure_threshold = Inf),
                                          function(cb, extra) {
    before <- cb$metrics()$calls
    for (i in 1:10) cb$execute(function() "ok")
    cb$metrics()$calls - before
  })))
  expect_identical(r[[1]], 10)
})

test_that("a process killed while it holds a probe frees it: the next call probes at once", {
  store <- local_host_store()
  args <- host_args(failure_threshold = 1, recovery_timeout = 0.2, half_open_max_calls = 1)
  cb <- local_shared_breaker(store, "probe-kill", args)
  cb$execute(function() stop("down"), function() "fallback")
  wait_for_probe_time(cb)
  marker <- tempfile()
  child <- shared_child(store, "probe-kill", args, function(cb, extra) {
    cb$execute(function() {
      file.create(extra$marker)
      Sys.sleep(60)  # a probe in flight until the test kills it
    })
  }, extra = list(marker = marker))
  withr::defer(if (child$is_alive()) child$kill())
  wait_until(function() file.exists(marker), timeout = 20, what = "the child's probe to start")
  expect_identical(cb$state, "HALF_OPEN")
  # While the probe's owner lives, its slot is taken.
  expect_identical(cb$execute(function() "probed", function() "rejected"), "rejected")
  child$kill()
  expect_false(child$is_alive())
  expect_identical(cb$execute(function() "probed", function() "rejected"), "probed")
  m <- cb$metrics()
  expect_identical(m$state, "CLOSED")
  expect_identical(m$released, 1)
})

test_that("another process's transitions reach this one's listeners: on the next call, and through later", {
  skip_if_not_installed("later")
  store <- local_host_store()
  args <- host_args(failure_threshold = 2)
  cb <- local_shared_breaker(store, "events", args)
  seen <- list()
  cb$on("state_change", function(from, to) seen[[length(seen) + 1L]] <<- c(from, to))
  tripper <- function(cb, extra) {
    for (i in 1:2) cb$execute(function() stop("down"), function() "fallback")
    cb$state
  }
  expect_identical(collect_children(list(shared_child(store, "events", args, tripper)))[[1]], "OPEN")
  expect_length(seen, 0L)
  # On this process's next call (a rejection).
  expect_identical(cb$execute(function() "called", function() "fallback"), "fallback")
  expect_identical(seen, list(c("CLOSED", "OPEN")))

  # Without a call, through the event loop.
  cb$reset()
  seen <- list()
  collect_children(list(shared_child(store, "events", args, tripper)))
  deadline <- Sys.time() + 10
  while (length(seen) == 0L && Sys.time() < deadline) later::run_now(0.1)
  expect_identical(seen, list(c("CLOSED", "OPEN")))
})

test_that("a shared breaker with listeners that nobody holds is collected, and its poll ends", {
  skip_if_not_installed("later")
  withr::local_options(circuitbreaker.host_poll_interval = 0.05)
  store <- local_host_store()
  # Returns a weak reference to the core of a breaker that has a listener
  # (so later polls the shared log for it), after `polls` turns of the event
  # loop, and once the breaker is out of the registry and out of reach.
  listened_to <- function(polls) {
    cb <- local_shared_breaker(store, "collected", host_args())
    cb$on("state_change", function(from, to) NULL)
    for (i in seq_len(polls)) later::run_now(0.05)
    rlang::new_weakref(environment(cb$execute)$core)
  }
  for (polls in c(0L, 5L)) {
    ref <- listened_to(polls)
    gc()
    # A poll used to keep the core alive, and so itself, for ever.
    expect_null(rlang::wref_key(ref), label = paste("the core after", polls, "polls"))
    # The next poll finds the core gone and does not come back.
    for (i in 1:5) later::run_now(0.05)
  }
})

test_that("the state outlives every process; breaker_store_unlink() starts afresh", {
  store <- local_host_store()
  args <- host_args(failure_threshold = 1)
  collect_children(list(shared_child(store, "lifecycle", args, function(cb, extra) {
    cb$execute(function() stop("down"), function() "fallback")
  })))
  later_state <- collect_children(list(shared_child(store, "lifecycle", args, function(cb, extra) {
    cb$metrics()[c("state", "failures", "times_opened")]
  })))[[1]]
  expect_identical(later_state, list(state = "OPEN", failures = 1, times_opened = 1))
  segments <- breaker_store_segments(store)
  expect_identical(segments$name, "lifecycle")
  expect_identical(segments$status, "ok")
  expect_identical(segments$state, "OPEN")
  expect_false(segments$creator_alive)
  expect_true(breaker_store_unlink("lifecycle", store))
  expect_false(file.exists(segments$file))
  expect_false(breaker_store_unlink("lifecycle", store))
  fresh <- local_shared_breaker(store, "lifecycle", args)
  expect_identical(fresh$metrics()[c("state", "failures")], list(state = "CLOSED", failures = 0))
})

test_that("the rule arguments are the shared breaker's identity", {
  store <- local_host_store()
  cb <- local_shared_breaker(store, "identity", host_args())
  expect_snapshot(error = TRUE, {
    circuit_breaker(name = "identity", failure_threshold = 5, recovery_timeout = 60, store = store)
  }, transform = function(x) gsub(store$path, "<store>", x, fixed = TRUE))
  err <- tryCatch(circuit_breaker(name = "identity", failure_threshold = 5, recovery_timeout = 30,
                                  jitter = 0.1, store = store), error = identity)
  expect_s3_class(err, "circuit_breaker_store_wrong_config")
  expect_identical(err$argument, "jitter")
  # Both values: this process's and the segment's.
  expect_identical(c(err$given, err$stored), c("0.1", "0"))
  # The same arguments attach (the existing breaker is replaced in the registry).
  again <- local_shared_breaker(store, "identity", host_args())
  expect_identical(again$metrics()$store, "host")
  # $configure(): the rules are refused, this process's own arguments change.
  expect_error(again$configure(failure_threshold = 2), class = "circuit_breaker_store_configure")
  expect_identical(again$failure_threshold, 5)
  again$configure(timeout = 2, ignore = "my_error")
  expect_identical(again$config$timeout, 2)
  expect_snapshot(error = TRUE, again$configure(recovery_timeout = 1))
})

test_that("a shared breaker needs a name and the host's clock; stores are checked", {
  store <- local_host_store()
  expect_snapshot(error = TRUE, circuit_breaker(store = store))
  expect_error(circuit_breaker(name = "clocked", store = store, clock = breaker_manual_clock()),
               class = "circuit_breaker_shared_clock")
  expect_snapshot(error = TRUE, circuit_breaker(name = "clocked", store = store, clock = breaker_manual_clock()))
  expect_error(circuit_breaker(name = "x", store = "host"), class = "circuit_breaker_invalid_argument")
  expect_error(breaker_store_host(file.path(store$path, "missing")), class = "circuit_breaker_invalid_argument")
  expect_error(breaker_store_unlink("x", breaker_store_process()), class = "circuit_breaker_invalid_argument")
  expect_error(circuit_breaker(name = strrep("n", 300), store = store), class = "circuit_breaker_invalid_argument")
  # Any name maps to one file, and back.
  odd <- local_shared_breaker(store, "api.example.com:443/v1 ü%", host_args())
  expect_identical(breaker_store_segments(store)$name, "api.example.com:443/v1 ü%")
  expect_identical(breaker_store_process()$kind, "process")
  expect_output(print(store), "host")
})

test_that("bad segment files get classed errors, and nothing crashes", {
  store <- local_host_store()
  path <- function(name) file.path(store$path, circuitbreaker:::cb_segment_file_name(name))
  # Files written here are ours, but must have mode 0600 to be looked at.
  private <- function(file) Sys.chmod(file, "0600", use_umask = FALSE)
  # Truncated.
  writeBin(as.raw(1:100), path("short"))
  private(path("short"))
  expect_error(circuit_breaker(name = "short", store = store), class = "circuit_breaker_store_too_small")
  # Not a segment (random bytes of the right size).
  good <- local_shared_breaker(store, "good", host_args())
  size <- file.size(path("good"))
  set.seed(1)
  writeBin(as.raw(sample(0:255, size, replace = TRUE)), path("garbage"))
  private(path("garbage"))
  expect_error(circuit_breaker(name = "garbage", store = store), class = "circuit_breaker_store_corrupt")
  # Another layout version (the word at byte 8).
  file.copy(path("good"), path("future"))
  con <- file(path("future"), "r+b")
  seek(con, 8, rw = "write")
  writeBin(99L, con, size = 4, endian = "little")
  close(con)
  expect_error(circuit_breaker(name = "future", store = store, failure_threshold = 5, recovery_timeout = 30),
               class = "circuit_breaker_store_wrong_layout")
  # A directory where the file should be: not a file of ours.
  dir.create(path("dir"))
  expect_error(circuit_breaker(name = "dir", store = store), class = "circuit_breaker_store_untrusted")
  # Listed with their status.
  seg <- breaker_store_segments(store)
  status <- stats::setNames(seg$status, seg$name)
  expect_identical(status[["short"]], "truncated")
  expect_identical(status[["garbage"]], "not a segment")
  expect_identical(status[["future"]], "other layout")
  expect_identical(status[["good"]], "ok")
  expect_identical(status[["dir"]], "untrusted: it is a directory, not a regular file")
  # The good breaker still works.
  expect_identical(good$execute(function() "ok"), "ok")
})

test_that("a segment overwritten while in use is reported, not used", {
  store <- local_host_store()
  cb <- local_shared_breaker(store, "damaged", host_args())
  cb$execute(function() "ok")
  file <- file.path(store$path, circuitbreaker:::cb_segment_file_name("damaged"))
  con <- file(file, "r+b")
  writeBin(charToRaw("XXXXXXXX"), con)
  close(con)
  expect_error(cb$execute(function() "ok"), class = "circuit_breaker_store_corrupt")
  expect_error(cb$metrics(), class = "circuit_breaker_store_corrupt")
})

test_that("a store directory that cannot be written gives a classed error", {
  store <- local_host_store()
  ro <- file.path(store$path, "ro")
  dir.create(ro)
  mounted <- suppressWarnings(system2("mount", c("-t", "tmpfs", "-o", "size=1m", "tmpfs", ro),
                                      stdout = FALSE, stderr = FALSE))
  skip_if(mounted != 0, "cannot mount a tmpfs here (needs root)")
  withr::defer(system2("umount", ro, stdout = FALSE, stderr = FALSE))
  ro_store <- breaker_store_host(ro)
  # Made read-only after the store was made: the segment's open fails.
  expect_identical(system2("mount", c("-o", "remount,ro", ro), stdout = FALSE, stderr = FALSE), 0L)
  expect_error(circuit_breaker(name = "ro", store = ro_store), class = "circuit_breaker_store_os_error")
  # And a store is not made on it now.
  expect_error(breaker_store_host(ro), class = "circuit_breaker_invalid_argument")
})

test_that("a forked child works on the same shared state; readRDS() re-attaches", {
  skip_on_os(c("windows", "mac"))
  store <- local_host_store()
  cb <- local_shared_breaker(store, "fork", host_args())
  job <- parallel::mcparallel({
    for (i in 1:10) cb$execute(function() "ok")
    cb$metrics()$calls
  })
  expect_identical(parallel::mccollect(job)[[1]], 10)
  expect_identical(cb$metrics()$calls, 10)
  rds <- tempfile(fileext = ".rds")
  withr::defer(unlink(rds))
  saveRDS(cb, rds)
  calls <- callr::r(function(rds) {
    library(circuitbreaker)
    cb <- readRDS(rds)
    cb$execute(function() "ok")
    cb$metrics()$calls
  }, list(rds), libpath = .libPaths())
  expect_identical(calls, 11)
  expect_identical(cb$metrics()$calls, 11)
})

test_that("print(), breaker_list(), Prometheus and the status fields say a breaker is host-shared", {
  store <- local_host_store()
  cb <- local_shared_breaker(store, "shown", host_args())
  local <- local_breaker(name = "shown-local")
  expect_output(print(cb), "shown \\(host-shared\\)")
  listed <- breaker_list()
  expect_identical(listed$store[listed$name == "shown"], "host")
  expect_identical(listed$store[listed$name == "shown-local"], "process")
  prom <- breaker_prometheus(list(cb, local))
  expect_match(prom, 'circuitbreaker_info{breaker="shown",store="host"} 1', fixed = TRUE)
  expect_match(prom, 'circuitbreaker_info{breaker="shown-local",store="process"} 1', fixed = TRUE)
  expect_identical(circuitbreaker:::web_status(cb$metrics())$store, "host")
})

test_that("breaker_for() and circuitbreaker.defaults take a store", {
  store <- local_host_store()
  withr::local_options(circuitbreaker.defaults = list(store = store, failure_threshold = 2))
  api <- local_breaker_for("http://127.0.0.1:9/x")
  expect_identical(api$metrics()$store, "host")
  expect_identical(breaker_store_segments(store)$name, "127.0.0.1:9")
  own <- local_breaker_for("http://127.0.0.1:10/x", store = breaker_store_process())
  expect_identical(own$metrics()$store, "process")
})
