# The Redis store: arguments, the client library, a checked round trip, and
# fleet breakers shared by real R processes through a real redis-server on
# 127.0.0.1 (started by each test on a random port), with its faults: killed,
# hung, scripts flushed, restarted empty; processes killed holding a probe
# lease; skewed clocks. Several hosts: test-store-redis-hosts.R.

test_that("breaker_store_redis() checks its arguments", {
  skip_if_not(circuitbreaker:::cb_redis_available(), "this build has no hiredis")
  store <- breaker_store_redis("redis://:pw@127.0.0.1:6390/2", prefix = "app:v1")
  expect_s3_class(store, "circuit_breaker_store_redis")
  expect_identical(store$endpoint[c("host", "port", "db", "has_password")],
                   list(host = "127.0.0.1", port = 6390L, db = 2L, has_password = TRUE))
  expect_error(breaker_store_redis("http://127.0.0.1"), class = "circuit_breaker_invalid_argument")
  # rediss:// is TLS (test-store-redis-tls.R); a bad TLS parameter is refused.
  expect_error(breaker_store_redis("rediss://127.0.0.1?ssl_cert_reqs=maybe"),
               class = "circuit_breaker_invalid_argument")
  expect_error(breaker_store_redis(prefix = "a b"), class = "circuit_breaker_invalid_argument")
  expect_error(breaker_store_redis(timeout = 0), class = "circuit_breaker_invalid_argument")
  expect_error(breaker_store_redis(sync_interval = "1"), class = "circuit_breaker_invalid_argument")
})

test_that("a real redis-server answers PING, with a password and a database", {
  server <- local_redis_server(password = "s3cr3t/@")
  store <- breaker_store_redis(server$url, timeout = 0.5)
  expect_true(breaker_store_redis_ping(store))
  wrong <- breaker_store_redis(sprintf("redis://:nope@127.0.0.1:%d/0", server$port), timeout = 0.5)
  res <- breaker_store_redis_ping(wrong)
  expect_false(res)
  expect_match(attr(res, "message"), "WRONGPASS|invalid", ignore.case = TRUE)
  db <- breaker_store_redis(sprintf("redis://:s3cr3t%%2F%%40@127.0.0.1:%d/3", server$port), timeout = 0.5)
  expect_true(breaker_store_redis_ping(db))
})

test_that("a dead or hung redis-server costs at most the timeout", {
  server <- local_redis_server()
  store <- breaker_store_redis(server$url, timeout = 0.2)
  expect_true(breaker_store_redis_ping(store))
  # Hung (SIGSTOP): the connection is accepted by the kernel, the reply never comes.
  server$process$signal(tools::SIGSTOP)
  # The ping gives up with the timeout's error instead of waiting (a hang
  # would stop the suite; tests assert no timings).
  res <- breaker_store_redis_ping(store)
  expect_false(res)
  expect_match(attr(res, "message"), "timed out|temporarily unavailable", ignore.case = TRUE)
  server$process$signal(tools::SIGCONT)
  expect_true(breaker_store_redis_ping(store))
  # Dead: the connection is refused at once.
  server$process$kill()
  res <- breaker_store_redis_ping(store)
  expect_false(res)
  expect_match(attr(res, "message"), "refused", ignore.case = TRUE)
})

test_that("processes on one breaker give exact fleet counts", {
  server <- local_redis_server()
  body <- function(cb, extra) {
    for (i in seq_len(extra$n)) {
      cb$execute(function() if (i %% 10 == 0) stop("down") else "ok", function(e) "fallback")
    }
    # Two more round trips of its link (the second began after the calls):
    # mode "fleet" is a fact, not a hope. The rest goes out when the breaker
    # is freed.
    syncs <- function() circuitbreaker:::cb_fleet_info(cb$.__enclos_env__$core$ptr)$syncs
    done <- syncs()
    extra$wait_until(function() syncs() >= done + 2, timeout = 20, what = "two syncs")
    cb$metrics()[c("calls", "failures", "mode")]
  }
  args <- fleet_args(failure_threshold = 1e6)
  procs <- lapply(1:3, function(i) {
    fleet_child(server$url, "counts", args, body, list(n = 300 * i, wait_until = child_wait_until()))
  })
  res <- collect_children(procs)
  expect_equal(vapply(res, function(r) r$calls, 0), c(300, 600, 900))
  expect_true(all(vapply(res, function(r) r$mode, "") == "fleet"))
  # Every count reached the fleet exactly once (each child flushed on exit).
  expect_true(wait_until(function() identical(server$fleet("counts", "tc"), 1800)))
  expect_identical(server$fleet("counts", "tf"), 180)
  expect_identical(server$fleet("counts", "s"), 0)  # CLOSED
})

test_that("a trip in one process opens the breaker in every process", {
  server <- local_redis_server()
  store <- breaker_store_redis(server$url, sync_interval = 0.05, timeout = 0.2)
  cb <- local_shared_breaker(store, "trip", fleet_args())
  res <- fleet_trip_race(cb, server$url, "trip")
  expect_identical(res$result, "rejected")
  expect_identical(res$state, "OPEN")
  expect_true("OPEN" %in% res$heard)
  expect_true(wait_until(function() identical(cb$state, "OPEN")))
  expect_identical(server$fleet("trip", "to"), 1)  # opened once, fleet-wide
  expect_true(cb$metrics()$calls == 2)
})

test_that("exactly half_open_max_calls probes go out across the fleet", {
  for (hom in c(1, 2)) {
    server <- local_redis_server()
    name <- paste0("probe", hom)
    args <- fleet_args(failure_threshold = 2, recovery_timeout = 1.5, half_open_max_calls = hom)
    race <- local_probe_race(5, probes = hom)
    racer <- function(cb, extra) {
      extra$ready_and_wait(extra, timeout = 20)
      extra$race_call(cb, extra)
    }
    # A generous timeout: a lease that times out is a probe on local rules
    # (by design), which is not what this test is about.
    procs <- lapply(seq_along(race$readies), function(i) {
      fleet_child(server$url, name, args, racer, race$extra(i), timeout = 2)
    })
    expect_true(all(vapply(race$readies, wait_for_file, TRUE)))
    store <- breaker_store_redis(server$url, sync_interval = 0.05, timeout = 0.2)
    cb <- local_shared_breaker(store, name, args)
    for (i in 1:2) cb$execute(function() stop("down"), function(e) "fb")
    expect_true(wait_until(function() identical(server$fleet(name, "s"), 1)))
    # Every racer calls at the same moment, after the open period.
    write_start_time(race$start, as.numeric(Sys.time()) + 2.5)
    res <- collect_children(procs)
    expect_identical(sum(vapply(res, function(r) r$probed, TRUE)), as.integer(hom))
    expect_identical(sum(vapply(res, function(r) identical(r$result, "ok"), TRUE)), as.integer(hom))
    # Their successes closed the fleet.
    expect_true(wait_until(function() identical(server$fleet(name, "s"), 0)))
    breaker_remove(name)
    server$kill()
  }
})

test_that("manual control is fleet-wide, and listeners hear it through later", {
  skip_if_not_installed("later")
  server <- local_redis_server()
  store <- breaker_store_redis(server$url, sync_interval = 0.05, timeout = 0.2)
  cb <- local_shared_breaker(store, "manual", fleet_args())
  listener <- function(cb, extra) {
    options(circuitbreaker.host_poll_interval = 0.05)
    heard <- character()
    cb$on("state_change", function(from, to, ...) {
      heard <<- c(heard, to)
      cat(to, "\n", sep = "", file = extra$heard, append = TRUE)
    })
    # Ready once its link has made two round trips with the listener on: it
    # is in the fleet, and has the fleet's state.
    syncs <- function() circuitbreaker:::cb_fleet_info(cb$.__enclos_env__$core$ptr)$syncs
    done <- syncs()
    extra$wait_until(function() syncs() >= done + 2, timeout = 20, what = "two syncs")
    file.create(extra$ready)
    # No calls: only the event loop runs.
    deadline <- Sys.time() + 20
    while (!file.exists(extra$done) && Sys.time() < deadline) later::run_now(0.05)
    heard
  }
  ready <- tempfile()
  done <- tempfile()
  heard_file <- tempfile()
  child <- fleet_child(server$url, "manual", fleet_args(), listener,
                       list(ready = ready, done = done, heard = heard_file, wait_until = child_wait_until()))
  expect_true(wait_for_file(ready))
  # Each change waits until the child has heard the one before: a child
  # slowed down by a busy machine could otherwise sync only after two
  # changes, and rightly report just the last.
  child_heard <- function(states) {
    wait_until(function() {
      file.exists(heard_file) && identical(readLines(heard_file, warn = FALSE), states)
    })
  }
  cb$force_open()
  expect_true(wait_until(function() identical(server$fleet("manual", "s"), 3)))
  expect_true(child_heard("FORCED_OPEN"))
  cb$disable()
  expect_true(wait_until(function() identical(server$fleet("manual", "s"), 4)))
  expect_true(child_heard(c("FORCED_OPEN", "DISABLED")))
  cb$reset()
  expect_true(wait_until(function() identical(server$fleet("manual", "s"), 0)))
  expect_true(child_heard(c("FORCED_OPEN", "DISABLED", "CLOSED")))
  file.create(done)
  heard <- collect_children(list(child))[[1]]
  expect_identical(heard, c("FORCED_OPEN", "DISABLED", "CLOSED"))
})

test_that("with Redis killed, calls go on with local rules, and the fleet rebuilds when it is back", {
  server <- local_redis_server()
  store <- breaker_store_redis(server$url, sync_interval = 0.05, timeout = 0.2)
  cb <- local_shared_breaker(store, "killed", fleet_args(failure_threshold = 3, recovery_timeout = 60))
  expect_identical(cb$execute(function() "ok"), "ok")
  expect_true(wait_until(function() identical(cb$metrics()$mode, "fleet")))
  # Alone for a while: the store's notices are tested in test-store-redis-alone.R.
  quietly_alone({
    server$kill()
    # Calls go on; the link notices, and the mode turns local.
    for (i in 1:5) expect_identical(cb$execute(function() "ok"), "ok")
    expect_true(wait_until(function() identical(cb$metrics()$mode, "local")))
    # The local rules still trip.
    for (i in 1:3) cb$execute(function() stop("down"), function(e) "fb")
    expect_identical(cb$state, "OPEN")
    expect_identical(cb$execute(function() "ok", function() "rejected"), "rejected")
    expect_gt(cb$metrics()$sync_lag, 0)
    # Restarted empty: the breaker's report rebuilds the fleet state, open.
    server$start()
    expect_true(wait_until(function() identical(cb$metrics()$mode, "fleet"), 20))
    expect_true(wait_until(function() identical(server$fleet("killed", "s"), 1)))
    # 6 successes and 3 failures, merged (the first one also reached the old
    # server, which forgot it).
    expect_true(wait_until(function() server$fleet("killed", "tc") %in% c(8, 9)))
  })
  # A process that joins now finds the breaker open.
  joiner <- fleet_child(server$url, "killed", fleet_args(failure_threshold = 3, recovery_timeout = 60),
                        function(cb, extra) cb$execute(function() "ok", function() "rejected"))
  res <- collect_children(list(joiner))
  expect_identical(res[[1]], "rejected")
})

test_that("with Redis hung (SIGSTOP), no call waits longer than the timeout", {
  server <- local_redis_server()
  store <- breaker_store_redis(server$url, sync_interval = 0.05, timeout = 0.2)
  cb <- local_shared_breaker(store, "hung", fleet_args(failure_threshold = 2, recovery_timeout = 0.5))
  for (i in 1:2) cb$execute(function() stop("down"), function(e) "fb")
  expect_true(wait_until(function() identical(server$fleet("hung", "s"), 1)))
  wait_for_probe_time(cb)  # the next call is a probe, which asks Redis
  server$process$signal(tools::SIGSTOP)
  on.exit(server$process$signal(tools::SIGCONT), add = TRUE)
  elapsed <- system.time(res <- cb$execute(function() "ok", function() "rejected"))[["elapsed"]]
  # The lease gave up within the timeout and the probe went out on local
  # rules. (A bound on hanging, far above the 0.2 s timeout; not a timing.)
  expect_lt(elapsed, 1.5)
  expect_identical(res, "ok")
  expect_identical(cb$state, "CLOSED")
  times <- vapply(1:50, function(i) system.time(cb$execute(function() "ok"))[["elapsed"]], 0)
  expect_lt(max(times), 1.5)
  quietly_alone(expect_true(wait_until(function() identical(cb$metrics()$mode, "local"))))
  server$process$signal(tools::SIGCONT)
  quietly_alone(expect_true(wait_until(function() identical(cb$metrics()$mode, "fleet"), 20)))
})

test_that("a report retried after a timeout is counted once", {
  server <- local_redis_server()
  store <- breaker_store_redis(server$url, sync_interval = 0.05, timeout = 0.1)
  cb <- local_shared_breaker(store, "retry", fleet_args(failure_threshold = 1e6))
  for (i in 1:100) cb$execute(function() "ok")
  expect_true(wait_until(function() identical(server$fleet("retry", "tc"), 100)))
  # Hung for a while: the syncs in flight time out, and are sent again (same
  # ids) on new connections; on SIGCONT Redis runs every copy it received.
  failed <- fleet_link(cb)$sync_failures
  server$process$signal(tools::SIGSTOP)
  for (i in 1:100) cb$execute(function() "ok")
  # Two syncs time out: the second is a copy sent again.
  wait_until(function() fleet_link(cb)$sync_failures >= failed + 2, what = "two syncs to time out")
  server$process$signal(tools::SIGCONT)
  for (i in 1:100) cb$execute(function() "ok")
  quietly_alone(expect_true(wait_until(function() identical(cb$metrics()$mode, "fleet"), 20)))
  expect_gt(fleet_link(cb)$sync_failures, 0)
  expect_true(wait_until(function() identical(server$fleet("retry", "tc"), 300)))
  # And no copy counts again later.
  wait_for_syncs(cb)
  expect_identical(server$fleet("retry", "tc"), 300)
})

test_that("SCRIPT FLUSH is survived (NOSCRIPT reloads the scripts)", {
  server <- local_redis_server()
  store <- breaker_store_redis(server$url, sync_interval = 0.05, timeout = 0.2)
  cb <- local_shared_breaker(store, "flush", fleet_args(failure_threshold = 2, recovery_timeout = 0.3))
  for (i in 1:10) cb$execute(function() "ok")
  expect_true(wait_until(function() identical(server$fleet("flush", "tc"), 10)))
  expect_identical(server$call("SCRIPT", "FLUSH"), "OK")
  for (i in 1:10) cb$execute(function() "ok")
  expect_true(wait_until(function() identical(server$fleet("flush", "tc"), 20)))
  # The lease script is reloaded too.
  for (i in 1:2) cb$execute(function() stop("down"), function(e) "fb")
  expect_true(wait_until(function() identical(server$fleet("flush", "s"), 1)))
  expect_identical(server$call("SCRIPT", "FLUSH"), "OK")
  wait_for_probe_time(cb)
  expect_identical(cb$execute(function() "ok", function() "rejected"), "ok")
  expect_true(wait_until(function() identical(server$fleet("flush", "s"), 0)))
})

test_that("the probe lease of a process killed while probing expires", {
  server <- local_redis_server()
  args <- fleet_args(failure_threshold = 2, recovery_timeout = 0.5, half_open_max_wait = 1.5)
  # A generous timeout: a lease that timed out would be a probe on local rules.
  store <- breaker_store_redis(server$url, sync_interval = 0.05, timeout = 1)
  cb <- local_shared_breaker(store, "lease", args)
  for (i in 1:2) cb$execute(function() stop("down"), function(e) "fb")
  expect_true(wait_until(function() identical(server$fleet("lease", "s"), 1)))
  started <- tempfile()
  prober <- function(cb, extra) {
    extra$wait_until(function() {
      m <- cb$metrics()
      identical(m$state, "OPEN") && m$seconds_until_probe <= 0
    }, timeout = 20, what = "the fleet's OPEN state, and the end of its open period")
    cb$execute(function() {
      file.create(extra$started)
      Sys.sleep(60)  # a probe in flight until the test kills it
    }, function() "rejected")
  }
  child <- fleet_child(server$url, "lease", args, prober, list(started = started, wait_until = child_wait_until()))
  on.exit(if (child$is_alive()) child$kill(), add = TRUE)
  expect_true(wait_for_file(started))
  lease_key <- paste0(fleet_key_of("circuitbreaker", "lease"), ":p:0")
  expect_identical(server$call("EXISTS", lease_key), 1)
  # While the lease is held, this process's calls are rejected.
  expect_identical(cb$execute(function() "ok", function() "rejected"), "rejected")
  child$signal(tools::SIGKILL)
  child$wait(5000)
  # The lease expires (half_open_max_wait); then this process probes.
  expect_true(wait_until(function() identical(server$call("EXISTS", lease_key), 0)))
  expect_true(wait_until(function() identical(cb$execute(function() "ok", function() "rejected"), "ok")))
  expect_true(wait_until(function() identical(server$fleet("lease", "s"), 0)))
  expect_identical(cb$state, "CLOSED")
})

test_that("clocks skewed by 30 s either way change nothing", {
  server <- local_redis_server()
  args <- fleet_args(failure_threshold = 2, recovery_timeout = 2)
  tripper <- function(cb, extra) {
    for (i in 1:2) cb$execute(function() stop("down"), function(e) "fb")
    extra$wait_until(function() isTRUE(cb$metrics()$fleet_failures >= 2), timeout = 20,
                     what = "the fleet to hear both failures (it opens on them)")
    cb$metrics()[c("state", "seconds_until_probe")]
  }
  # It makes no call until its copy says OPEN: a success here would end the
  # fleet's run of failures (failure_threshold counts the whole fleet).
  observer <- function(cb, extra) {
    file.create(extra$ready)
    extra$wait_until(function() identical(cb$state, "OPEN"), timeout = 20, interval = 0.01,
                     what = "the fleet's trip")
    open <- cb$metrics()[c("state", "seconds_until_probe")]
    # After the open period, one probe closes the fleet.
    extra$wait_until(function() {
      cb$execute(function() "ok", function() "rejected")
      identical(cb$state, "CLOSED")
    }, timeout = 20, interval = 0.05, what = "a probe to close the fleet")
    list(open = open, final = cb$state)
  }
  ready <- tempfile()
  watch <- fleet_child(server$url, "skew", args, observer, list(ready = ready, wait_until = child_wait_until()),
                       env = c(CIRCUITBREAKER_TEST_CLOCK_OFFSET = "-30"))
  # The observer is in the fleet before the trip.
  wait_for_file(ready)
  trip <- fleet_child(server$url, "skew", args, tripper, list(wait_until = child_wait_until()),
                      env = c(CIRCUITBREAKER_TEST_CLOCK_OFFSET = "30"))
  res <- collect_children(list(trip, watch))
  expect_identical(res[[1]]$state, "OPEN")
  expect_identical(res[[2]]$open$state, "OPEN")
  # The observer waits what is left of the fleet's 2 s, not 2 s +/- 60 s.
  expect_gte(res[[2]]$open$seconds_until_probe, 0)
  expect_lte(res[[2]]$open$seconds_until_probe, 2)
  expect_identical(res[[2]]$final, "CLOSED")
})

test_that("a fleet breaker checks its identity, name and clock", {
  server <- local_redis_server()
  store <- breaker_store_redis(server$url, timeout = 0.5)
  cb <- local_shared_breaker(store, "identity", fleet_args())
  expect_snapshot(circuit_breaker(name = "identity", store = store, failure_threshold = 4),
                  error = TRUE)
  expect_error(circuit_breaker(name = "identity", store = store, failure_threshold = 4),
               class = "circuit_breaker_store_wrong_config")
  expect_error(circuit_breaker(store = store), class = "circuit_breaker_store_needs_name")
  err <- tryCatch(circuit_breaker(name = "identity", store = store, failure_threshold = 4), error = identity)
  expect_identical(c(err$argument, err$given, err$stored), c("failure_threshold", "4", "5"))
  expect_error(circuit_breaker(name = "clocked", store = store, clock = breaker_manual_clock()),
               class = "circuit_breaker_shared_clock")
  expect_snapshot(error = TRUE, circuit_breaker(name = "clocked", store = store, clock = breaker_manual_clock()))
  expect_error(cb$configure(failure_threshold = 9), class = "circuit_breaker_store_configure")
  cb$configure(timeout = 2)  # a per-process argument
  expect_identical(cb$metrics()$store, "redis")
  expect_match(format(cb)[[1]], "fleet-shared, fleet")
  expect_true(is.numeric(cb$metrics()$sync_lag))
  expect_s3_class(cb$metrics()$last_sync, "POSIXct")
})

test_that("a fleet breaker restored by readRDS() rejoins the fleet", {
  server <- local_redis_server()
  store <- breaker_store_redis(server$url, sync_interval = 0.05, timeout = 0.5)
  cb <- local_shared_breaker(store, "saved", fleet_args(failure_threshold = 2))
  for (i in 1:2) cb$execute(function() stop("down"), function(e) "fb")
  expect_true(wait_until(function() identical(server$fleet("saved", "s"), 1)))
  path <- tempfile(fileext = ".rds")
  saveRDS(cb, path)
  back <- readRDS(path)
  expect_identical(back$execute(function() "ok", function() "rejected"), "rejected")
  expect_identical(back$metrics()$store, "redis")
})

test_that("print(), breaker_list(), Prometheus and the status route show a fleet breaker's mode", {
  server <- local_redis_server()
  store <- breaker_store_redis(server$url, sync_interval = 0.05, timeout = 0.2)
  cb <- local_shared_breaker(store, "shown", fleet_args())
  local <- local_breaker(name = "shown-local")
  expect_true(wait_until(function() identical(cb$metrics()$mode, "fleet")))
  expect_output(print(cb), "shown \\(fleet-shared, fleet\\)")
  listed <- breaker_list()
  expect_identical(listed$store[listed$name == "shown"], "redis")
  expect_identical(listed$mode[listed$name == "shown"], "fleet")
  expect_true(is.na(listed$mode[listed$name == "shown-local"]))
  prom <- breaker_prometheus(list(cb, local))
  expect_match(prom, 'circuitbreaker_info{breaker="shown",store="redis"} 1', fixed = TRUE)
  expect_match(prom, 'circuitbreaker_fleet_mode{breaker="shown",mode="fleet"} 1', fixed = TRUE)
  expect_match(prom, 'circuitbreaker_fleet_mode{breaker="shown",mode="local"} 0', fixed = TRUE)
  expect_match(prom, 'circuitbreaker_fleet_sync_lag_seconds{breaker="shown"} ', fixed = TRUE)
  expect_false(grepl('circuitbreaker_fleet_mode{breaker="shown-local"', prom, fixed = TRUE))
  status <- circuitbreaker:::web_status(cb$metrics())
  expect_identical(status$store, "redis")
  expect_identical(status$mode, "fleet")
  expect_match(status$last_sync, "^\\d{4}-\\d{2}-\\d{2}T")
  quietly_alone({
    server$kill()
    expect_true(wait_until(function() {
      cb$execute(function() "ok")
      identical(cb$metrics()$mode, "local")
    }))
    expect_match(breaker_prometheus(list(cb)), 'circuitbreaker_fleet_mode{breaker="shown",mode="local"} 1',
                 fixed = TRUE)
    if (nzchar(Sys.which("promtool"))) {
      out <- system2("promtool", c("check", "metrics"), input = breaker_prometheus(list(cb, local)),
                     stdout = TRUE, stderr = TRUE)
      expect_identical(attr(out, "status"), NULL)
    }
  })
})

test_that("breaker_for() and circuitbreaker.defaults take a Redis store", {
  server <- local_redis_server()
  store <- breaker_store_redis(server$url, timeout = 0.5)
  withr::local_options(circuitbreaker.defaults = list(store = store, failure_threshold = 2))
  api <- local_breaker_for("http://127.0.0.1:9/x")
  expect_identical(api$metrics()$store, "redis")
  own <- local_breaker_for("http://127.0.0.1:10/x", store = breaker_store_process())
  expect_identical(own$metrics()$store, "process")
  expect_identical(server$call("EXISTS", fleet_key_of("circuitbreaker", "127.0.0.1:9")), 1)
})

test_that("a fork()ed child runs on local rules and leaves the parent's connections alone", {
  skip_on_os("windows")
  server <- local_redis_server()
  store <- breaker_store_redis(server$url, sync_interval = 0.05, timeout = 0.2)
  cb <- local_shared_breaker(store, "forked", fleet_args(failure_threshold = 2, recovery_timeout = 0.3))
  for (i in 1:2) cb$execute(function() stop("down"), function(e) "fb")
  expect_true(wait_until(function() identical(server$fleet("forked", "s"), 1)))
  wait_for_probe_time(cb)  # the next call is a probe: in the child it must not ask Redis
  job <- parallel::mcparallel({
    r <- cb$execute(function() "ok", function() "rejected")
    list(result = r, state = cb$state, mode = cb$metrics()$mode)
  })
  res <- parallel::mccollect(job, wait = TRUE, timeout = 20)[[1]]
  expect_identical(res$result, "ok")
  expect_identical(res$mode, "local")
  # The parent's link still works: its own probe closes the fleet.
  expect_identical(cb$execute(function() "ok", function() "rejected"), "ok")
  expect_true(wait_until(function() identical(server$fleet("forked", "s"), 0)))
  expect_identical(cb$metrics()$mode, "fleet")
})

test_that("a refused URL never shows its password, parsed or not", {
  skip_if_not(circuitbreaker:::cb_redis_available(), "this build has no hiredis")
  expect_snapshot(error = TRUE, {
    breaker_store_redis("redis://:PW-secret@127.0.0.1:bad/0")
  })
  expect_snapshot(error = TRUE, {
    breaker_store_redis("redis://app:PW-secret@127.0.0.1:99999/0")
  })
  expect_snapshot(error = TRUE, {
    breaker_store_redis("redis://:PW%ZZsecret@127.0.0.1/0")
  })
  expect_snapshot(error = TRUE, {
    breaker_store_redis("redis://:PW/secret@127.0.0.1/0")
  })
  expect_snapshot(error = TRUE, {
    breaker_store_redis("rediss://app:PW-secret@127.0.0.1/0?ssl_cert_reqs=maybe")
  })
  for (url in c("redis://:PW-secret@h:bad/0", "redis://u:PW@secret@h#x", "PW-secret@h", "http://u:PW-secret@h")) {
    err <- tryCatch(breaker_store_redis(url), error = identity)
    expect_s3_class(err, "circuit_breaker_invalid_argument")
    expect_false(grepl("PW", conditionMessage(err)), label = url)
    expect_false(grepl("PW", paste(deparse(unclass(err)[setdiff(names(err), "call")]), collapse = "")),
                 label = url)
  }
  # A store that parses: neither print(), format(), str() nor dput() show it.
  store <- breaker_store_redis("redis://app:PW-secret@127.0.0.1:6390/2")
  expect_snapshot(print(store))
  shown <- c(format(store), capture.output(print(store)), capture.output(str(store)),
             deparse(unclass(store)[setdiff(names(store), "secret")]))
  expect_false(any(grepl("PW|app", shown)))
})

test_that("a wrong password is shown as the last error, never the password", {
  server <- local_redis_server(password = "right-one")
  hide_port <- function(x) {
    gsub(paste0(":", server$port), ":<port>", gsub("(syncs|failed): \\d+", "\\1: <n>", x), fixed = TRUE)
  }
  wrong <- breaker_store_redis(sprintf("redis://:PW-wrong@127.0.0.1:%d/0", server$port),
                               sync_interval = 0.05, timeout = 0.5)
  # Refused at its first breaker: the store says it is alone, once.
  expect_warning(cb <- local_shared_breaker(wrong, "wrongpass", fleet_args()), "WRONGPASS",
                 class = "circuit_breaker_store_alone")
  expect_true(wait_until(function() !is.na(cb$metrics()$last_error)))
  m <- cb$metrics()
  expect_identical(m$mode, "local")
  expect_match(m$last_error, "^WRONGPASS")
  expect_snapshot(print(wrong), transform = hide_port)
  expect_snapshot(cb$metrics()[c("mode", "last_error")])
  expect_output(print(cb), "last error of the link to Redis: WRONGPASS", fixed = TRUE)
  status <- circuitbreaker:::web_status(m)
  expect_match(status$last_error, "^WRONGPASS")
  listed <- breaker_list()
  expect_match(listed$last_error[listed$name == "wrongpass"], "^WRONGPASS")
  statuses <- circuitbreaker:::web_statuses()
  texts <- c(capture.output(print(wrong)), capture.output(print(cb)), capture.output(str(wrong)),
             capture.output(print(m)), capture.output(print(listed)),
             jsonlite::toJSON(statuses, auto_unbox = TRUE), breaker_prometheus(),
             attr(breaker_store_redis_ping(wrong), "message"))
  expect_false(any(grepl("PW-wrong", texts, fixed = TRUE)))

  # No password against a server that needs one: NOAUTH.
  none <- breaker_store_redis(sprintf("redis://127.0.0.1:%d/0", server$port),
                              sync_interval = 0.05, timeout = 0.5)
  expect_warning(cb2 <- local_shared_breaker(none, "noauth", fleet_args()), "NOAUTH",
                 class = "circuit_breaker_store_alone")
  expect_true(wait_until(function() !is.na(cb2$metrics()$last_error)))
  expect_match(cb2$metrics()$last_error, "NOAUTH")

  # The right password: linked, and the store's print says so.
  right <- breaker_store_redis(server$url, sync_interval = 0.05, timeout = 0.5)
  cb3 <- local_shared_breaker(right, "rightpass", fleet_args())
  expect_true(wait_until(function() identical(cb3$metrics()$mode, "fleet")))
  expect_true(is.na(cb3$metrics()$last_error))
  expect_match(format(right)[[2]], "mode: fleet")
  expect_false(any(grepl("right-one", capture.output(print(right)), fixed = TRUE)))
})

test_that("the fleet store takes names of at most 80 bytes, as the host store does", {
  skip_if_not(circuitbreaker:::cb_redis_available(), "this build has no hiredis")
  store <- breaker_store_redis()
  expect_snapshot(error = TRUE, {
    circuit_breaker(name = strrep("n", 81), store = store)
  })
  expect_error(circuit_breaker(name = strrep("\u00e9", 41), store = store),
               class = "circuit_breaker_name_too_long")
})

test_that("the binding refuses a fleet store whose settings were changed past the core's limits", {
  server <- local_redis_server()
  store <- breaker_store_redis(server$url, prefix = "myapp")
  for (change in list(list(prefix = "my app"), list(prefix = strrep("p", 101)),
                      list(sync_interval = 0.001), list(timeout = 120))) {
    forged <- utils::modifyList(unclass(store), change)
    class(forged) <- class(store)
    expect_error(circuit_breaker(name = "forged", store = forged), class = "circuit_breaker_invalid_object")
    expect_false("forged" %in% breaker_list()$name)
  }
  # The same limits for the user's arguments, named.
  err <- tryCatch(breaker_store_redis(server$url, prefix = "my app"), error = identity)
  expect_s3_class(err, "circuit_breaker_invalid_argument")
  expect_identical(err$argument, "prefix")
  err <- tryCatch(breaker_store_redis(server$url, sync_interval = Inf), error = identity)
  expect_identical(err$argument, "sync_interval")
})
