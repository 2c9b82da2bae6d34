# health_check / health_interval: while a breaker is OPEN a check runs on
# later's event loop and a pass closes it (the rules are the core's,
# inst/include/circuitbreaker/health.hpp; tests/cpp/test_health.cpp tests
# them with fake times). Here: real time, the event loop run by
# later::run_now() in bounded loops, and real processes for a host-shared
# breaker.

skip_if_not_installed("later")

# Runs the event loop until `condition()` holds (bounded: wait_until()).
run_loop_until <- function(condition, timeout = 10, what = NULL) {
  wait_until(function() {
    later::run_now(0.02)
    condition()
  }, timeout = timeout, interval = 0.001, what = what %||% paste(deparse(body(condition)), collapse = " "))
}

trip <- function(cb) cb$execute(function() stop("down"), function() NULL)

test_that("a passing check closes an open breaker long before recovery_timeout", {
  calls <- 0L
  cb <- circuit_breaker(failure_threshold = 1, recovery_timeout = 600, health_interval = 0.05,
                        half_open_max_calls = 3, health_check = function() {
                          calls <<- calls + 1L
                          calls >= 2L
                        })
  seen <- list()
  cb$on("health_check", function(result, condition) seen[[length(seen) + 1L]] <<- list(result, condition))
  changes <- list()
  cb$on("state_change", function(from, to, reason) changes[[length(changes) + 1L]] <<- c(from, to, reason))
  trip(cb)
  expect_identical(cb$state, "OPEN")
  run_loop_until(function() cb$state == "CLOSED")
  expect_identical(calls, 2L)
  expect_identical(vapply(seen, `[[`, "", 1L), c("failed", "passed"))
  expect_null(seen[[1]][[2]])
  expect_identical(changes, list(c("CLOSED", "OPEN", NA), c("OPEN", "CLOSED", "health_check")))
  tr <- cb$transitions()
  expect_identical(tr$reason, c(NA, "health_check"))
  m <- cb$metrics()
  expect_identical(m[c("health_checks_passed", "health_checks_failed", "health_checks_late")],
                   list(health_checks_passed = 1, health_checks_failed = 1, health_checks_late = 0))
  expect_identical(m$last_health_check, "passed")
  expect_identical(m$consecutive_opens, 0)
  expect_match(format(cb), "last health check: passed", all = FALSE)
  # Closed: the loop stopped, and no check runs.
  for (i in 1:5) later::run_now(0.05)
  expect_identical(calls, 2L)
  # Opened again: a new loop.
  trip(cb)
  run_loop_until(function() cb$state == "CLOSED")
  expect_identical(calls, 3L)
})

test_that("a check that fails, returns anything but TRUE or errors keeps the breaker open", {
  answers <- list(FALSE, NA, "TRUE", c(TRUE, TRUE), 1, NULL)
  i <- 0L
  cb <- circuit_breaker(failure_threshold = 1, recovery_timeout = 600, health_interval = 0.02,
                        health_check = function() {
                          i <<- i + 1L
                          if (i > length(answers)) stop("connection refused") else answers[[i]]
                        })
  conditions <- list()
  cb$on("health_check", function(result, condition) {
    expect_identical(result, "failed")
    conditions[[length(conditions) + 1L]] <<- condition
  })
  trip(cb)
  before <- cb$metrics()
  run_loop_until(function() cb$metrics()$health_checks_failed >= length(answers) + 2)
  after <- cb$metrics()
  expect_identical(after$state, "OPEN")
  expect_identical(after$health_checks_passed, 0)
  expect_identical(after$last_health_check, "failed")
  # The open timer and the backoff are left alone; nothing counts as a call.
  expect_identical(after$open_duration, before$open_duration)
  expect_identical(after$consecutive_opens, before$consecutive_opens)
  expect_identical(after$generation, before$generation)
  expect_identical(after$calls, before$calls)
  expect_lt(after$seconds_until_probe, before$seconds_until_probe)
  errors <- Filter(Negate(is.null), conditions)
  expect_gte(length(errors), 2L)
  expect_s3_class(errors[[1]], "simpleError")
  expect_identical(conditionMessage(errors[[1]]), "connection refused")
})

test_that("a result that comes after the breaker left that open period closes nothing", {
  ran <- 0L
  cb <- NULL
  cb <- circuit_breaker(failure_threshold = 1, recovery_timeout = 600, health_interval = 0.02,
                        health_check = function() {
                          ran <<- ran + 1L
                          if (ran == 1L) {
                            cb$reset()  # while the check runs: reset, then open again
                            trip(cb)
                          }
                          ran >= 3L
                        })
  results <- character()
  cb$on("health_check", function(result) results <<- c(results, result))
  trip(cb)
  run_loop_until(function() length(results) >= 1L)
  expect_identical(results[[1]], "late")
  expect_identical(cb$state, "OPEN")  # the new opening stands
  expect_identical(cb$metrics()$health_checks_late, 1)
  # The new open period gets its own checks.
  run_loop_until(function() cb$state == "CLOSED")
  expect_identical(results, c("late", "failed", "passed"))
})

test_that("one breaker never runs two checks at once, even when a check runs the loop", {
  depth <- 0L
  deepest <- 0L
  calls <- 0L
  cb <- circuit_breaker(failure_threshold = 1, recovery_timeout = 600, health_interval = 0.01,
                        health_check = function() {
                          depth <<- depth + 1L
                          on.exit(depth <<- depth - 1L)
                          deepest <<- max(deepest, depth)
                          calls <<- calls + 1L
                          for (k in 1:5) later::run_now(0.02)  # a check that waits on the loop
                          calls >= 3L
                        })
  trip(cb)
  run_loop_until(function() cb$state == "CLOSED")
  expect_identical(deepest, 1L)
})

test_that("the loop ends when the breaker is gone", {
  counter <- new.env()
  counter$n <- 0L
  make <- function(counter) {
    cb <- circuit_breaker(failure_threshold = 1, recovery_timeout = 600, health_interval = 0.02,
                          health_check = function() {
                            counter$n <- counter$n + 1L
                            FALSE
                          })
    trip(cb)
    invisible(NULL)
  }
  make(counter)
  run_loop_until(function() counter$n >= 1L)
  gc()
  gc()
  n <- counter$n
  for (i in 1:10) later::run_now(0.03)
  expect_lte(counter$n, n + 1L)  # at most one more turn already under way
})

test_that("without a check, nothing is scheduled and nothing listens", {
  cb <- circuit_breaker(failure_threshold = 1)
  trip(cb)
  expect_false(isTRUE(cb$.__enclos_env__$core$health_scheduled))
  expect_identical(cb$metrics()$last_health_check, NA_character_)
  expect_identical(cb$transitions()$reason, NA_character_)
})

test_that("$configure() adds and removes a check", {
  cb <- circuit_breaker(failure_threshold = 1, recovery_timeout = 600, health_interval = 0.02)
  trip(cb)
  cb$configure(health_check = function() TRUE)
  run_loop_until(function() cb$state == "CLOSED")
  cb$configure(health_check = NULL)
  trip(cb)
  for (i in 1:5) later::run_now(0.03)
  expect_identical(cb$state, "OPEN")
  expect_identical(cb$config$health_interval, 0.02)
})

test_that("breaker_for() takes the check from circuitbreaker.defaults", {
  withr::local_options(circuitbreaker.defaults = list(health_check = function() TRUE, health_interval = 0.02,
                                                      failure_threshold = 1, recovery_timeout = 600))
  cb <- breaker_for("http://127.0.0.1:9/health-defaults")
  withr::defer(breaker_remove(cb$name))
  trip(cb)
  run_loop_until(function() cb$state == "CLOSED")
  expect_identical(cb$transitions()$reason[[2]], "health_check")
})

test_that("bad health_check and health_interval values get classed errors naming them", {
  expect_snapshot(error = TRUE, circuit_breaker(health_check = 1))
  expect_snapshot(error = TRUE, circuit_breaker(health_check = "a"))
  for (bad in list(0, -1, NA, Inf, "a", c(1, 2))) {
    expect_error(circuit_breaker(health_interval = bad), class = "circuit_breaker_error")
  }
  expect_snapshot(error = TRUE, circuit_breaker(health_interval = 0))
  expect_snapshot(error = TRUE, circuit_breaker(health_interval = -1))
  expect_snapshot(error = TRUE, circuit_breaker(health_interval = NA))
  expect_snapshot(error = TRUE, circuit_breaker(health_interval = Inf))
  cb <- circuit_breaker()
  expect_snapshot(error = TRUE, cb$configure(health_check = "a"))
})

test_that("host-shared: one process runs each interval's check, and every process sees the close", {
  skip_on_cran()
  store <- local_host_store()
  name <- "health-shared"
  dir <- withr::local_tempdir()
  log <- file.path(dir, "checks")
  healthy <- file.path(dir, "healthy")
  interval <- 0.4
  args <- host_args(failure_threshold = 1, recovery_timeout = 600, health_interval = interval)
  here <- local_shared_breaker(store, name, args)
  trip(here)
  expect_identical(here$state, "OPEN")

  check <- eval(bquote(function() {
    cat(Sys.getpid(), format(as.numeric(Sys.time()), digits = 15), "\n", file = .(log), append = TRUE)
    file.exists(.(healthy))
  }))
  environment(check) <- globalenv()
  procs <- lapply(1:3, function(i) {
    shared_child(store, name, c(args, list(health_check = check)), function(cb, extra) {
      deadline <- Sys.time() + 40
      while (cb$state != "CLOSED" && Sys.time() < deadline) later::run_now(0.05)
      list(pid = Sys.getpid(), state = cb$state, reason = utils::tail(cb$transitions()$reason, 1))
    })
  })
  withr::defer(for (p in procs) if (p$is_alive()) p$kill())
  checks <- function() {
    if (!file.exists(log)) return(0L)
    length(readLines(log, warn = FALSE))
  }
  wait_until(function() checks() >= 6L, timeout = 30, what = "six failed checks")
  file.create(healthy)
  results <- collect_children(procs, timeout = 60)
  expect_identical(vapply(results, `[[`, "", "state"), rep("CLOSED", 3))
  expect_identical(vapply(results, `[[`, "", "reason"), rep("health_check", 3))
  expect_identical(here$state, "CLOSED")
  expect_identical(utils::tail(here$transitions()$reason, 1), "health_check")

  lines <- strsplit(trimws(readLines(log)), " +")
  pids <- vapply(lines, `[[`, "", 1L)
  at <- as.numeric(vapply(lines, `[[`, "", 2L))
  expect_true(all(pids %in% as.character(vapply(results, `[[`, 0L, "pid"))))
  # The lease: never two checks in one interval, whichever process ran them
  # (three processes without it would run three per interval). Half an
  # interval of slack for the time between the claim and the log line.
  expect_true(all(diff(sort(at)) >= interval / 2))
  m <- here$metrics()
  expect_identical(m$health_checks_passed, 1)
  expect_identical(m$health_checks_failed + m$health_checks_passed + m$health_checks_late, as.numeric(length(at)))
})

test_that("fleet-shared: a pass in one process closes the breaker in every process", {
  server <- local_redis_server()
  store <- breaker_store_redis(server$url, sync_interval = 0.05, timeout = 0.2)
  healthy <- FALSE
  cb <- local_shared_breaker(store, "health-fleet",
                             fleet_args(failure_threshold = 1, recovery_timeout = 600, health_interval = 0.1,
                                        health_check = function() healthy))
  watcher <- function(cb, extra) {
    file.create(extra$ready)
    extra$wait_until(function() identical(cb$state, "OPEN"), timeout = 20, interval = 0.01, what = "the trip")
    file.create(extra$open)
    extra$wait_until(function() identical(cb$state, "CLOSED"), timeout = 30, interval = 0.01,
                     what = "the close")
    cb$state
  }
  ready <- tempfile()
  open <- tempfile()
  withr::defer(unlink(c(ready, open)))
  child <- fleet_child(server$url, "health-fleet", fleet_args(failure_threshold = 1, recovery_timeout = 600,
                                                              health_interval = 0.1),
                       watcher, list(ready = ready, open = open, wait_until = child_wait_until()))
  expect_true(wait_for_file(ready))
  trip(cb)
  expect_true(wait_for_file(open))
  run_loop_until(function() cb$metrics()$health_checks_failed >= 1)
  expect_identical(cb$state, "OPEN")
  healthy <- TRUE
  run_loop_until(function() cb$state == "CLOSED")
  expect_identical(utils::tail(cb$transitions()$reason, 1), "health_check")
  expect_identical(collect_children(list(child))[[1]], "CLOSED")
  expect_identical(server$fleet("health-fleet", "s"), 0)
})

test_that("fleet-shared: one process of the fleet runs each interval's check, and every process sees the close", {
  skip_on_cran()
  server <- local_redis_server()
  store <- breaker_store_redis(server$url, sync_interval = 0.05, timeout = 0.2)
  name <- "health-fleet-lease"
  dir <- withr::local_tempdir()
  log <- file.path(dir, "checks")
  healthy <- file.path(dir, "healthy")
  interval <- 0.4
  args <- fleet_args(failure_threshold = 1, recovery_timeout = 600, health_interval = interval)
  here <- local_shared_breaker(store, name, args)

  check <- eval(bquote(function() {
    cat(Sys.getpid(), format(as.numeric(Sys.time()), digits = 15), "\n", file = .(log), append = TRUE)
    file.exists(.(healthy))
  }))
  environment(check) <- globalenv()
  procs <- lapply(1:3, function(i) {
    fleet_child(server$url, name, c(args, list(health_check = check)), function(cb, extra) {
      deadline <- Sys.time() + 40
      while (cb$state != "CLOSED" && Sys.time() < deadline) later::run_now(0.05)
      list(pid = Sys.getpid(), state = cb$state, reason = utils::tail(cb$transitions()$reason, 1))
    })
  })
  withr::defer(for (p in procs) if (p$is_alive()) p$kill())
  trip(here)
  expect_identical(here$state, "OPEN")
  checks <- function() {
    if (!file.exists(log)) return(0L)
    length(readLines(log, warn = FALSE))
  }
  wait_until(function() checks() >= 6L, timeout = 30, what = "six failed checks")
  # The lease is in Redis, for one interval.
  lease <- paste0(fleet_key_of("circuitbreaker", name), ":h")
  expect_true(wait_until(function() {
    ttl <- server$call("PTTL", lease)
    ttl > 0 && ttl <= interval * 1000
  }, what = "the lease in Redis"))
  file.create(healthy)
  results <- collect_children(procs, timeout = 60)
  expect_identical(vapply(results, `[[`, "", "state"), rep("CLOSED", 3))
  # The process whose check passed logged the reason; the others (and this
  # one) took the close from the fleet, which does not carry the reason.
  expect_true("health_check" %in% vapply(results, `[[`, "", "reason"))
  expect_true(wait_until(function() identical(here$state, "CLOSED")))
  expect_identical(server$fleet(name, "s"), 0)

  lines <- strsplit(trimws(readLines(log)), " +")
  pids <- vapply(lines, `[[`, "", 1L)
  at <- as.numeric(vapply(lines, `[[`, "", 2L))
  expect_true(all(pids %in% as.character(vapply(results, `[[`, 0L, "pid"))))
  # The lease: one check per interval for the fleet, whichever process ran
  # it. Three processes without it would each run one per interval (about
  # three times as many); two intervals' worth of slack for the start and
  # the end.
  expect_lte(length(at), (max(at) - min(at)) / interval + 2)
})
