# The fleet store when the server closes connections behind the processes'
# backs (CLIENT KILL, Redis's idle `timeout`, a restart) and when two
# (prefix, name) pairs read alike. Real redis-server, real callr processes:
# probe executions are counted by appending to a file, one line each.

# Trips fleet breaker `name` from this process, lets `fault()` cut the
# connections while it is OPEN, then releases `n` racing processes (idle all
# along) at one instant after the end of the fleet's open period. Returns
# the racers' results, the probe count and the fleet's state before and
# after the fault. `fault()` may return a bound (seconds) on how long the
# racers should wait for their link to come back.
race_after_fault <- function(server, name, fault, n = 4, recovery = 2, env = parent.frame()) {
  args <- fleet_args(failure_threshold = 1, recovery_timeout = recovery)
  counter <- withr::local_tempfile(pattern = "probes-", .local_envir = env)
  race <- local_probe_race(n, env = env)
  opens <- paste0(race$readies, "-open")
  racer <- function(cb, extra) {
    # Idle meanwhile (no call); says when its copy has the fleet's OPEN state.
    extra$ready_and_wait(extra, idle = function() {
      if (!file.exists(extra$open) && identical(cb$state, "OPEN")) file.create(extra$open)
    })
    # A link that is down (a restart) comes back within a second or so; a
    # probe sent meanwhile would rightly go on local rules.
    extra$wait_until(function() identical(cb$metrics()$mode, "fleet"), timeout = 20, interval = 0.01,
                     what = "the link to be up")
    mode <- cb$metrics()$mode
    call <- extra$race_call(cb, extra, on_call = function() {
      cat(Sys.getpid(), "\n", file = extra$counter, append = TRUE)
    }, timeout = 30)
    # Like a long-lived worker, stay until the fleet's close reaches this
    # copy.
    # When it never does, what this copy and its link saw says why.
    seen <- tryCatch({
      extra$wait_until(function() identical(cb$state, "CLOSED"), timeout = 10, what = "the fleet's close")
      NULL
    }, wait_until_timeout = function(e) {
      link <- circuitbreaker:::cb_fleet_info(cb$.__enclos_env__$core$ptr)
      paste(c(conditionMessage(e), utils::capture.output(utils::str(link)),
              utils::capture.output(utils::str(cb$metrics()))), collapse = "\n")
    })
    list(result = call$result, mode = mode, state = cb$state, seen = seen)
  }
  # A generous timeout: a lease that timed out on a slow machine would be a
  # probe on local rules, which is not what these tests are about.
  procs <- lapply(seq_len(n), function(i) {
    fleet_child(server$url, name, args, racer, race$extra(i, open = opens[[i]], counter = counter),
                timeout = 1)
  })
  withr::defer(for (p in procs) if (p$is_alive()) p$kill(), envir = env)
  expect_true(all(vapply(race$readies, wait_for_file, TRUE)))

  store <- breaker_store_redis(server$url, sync_interval = 0.05, timeout = 1)
  cb <- local_shared_breaker(store, name, args, env = env)
  cb$execute(function() stop("down"), function(e) "fb")
  expect_true(wait_until(function() identical(server$fleet(name, "s"), 1)))
  before <- list(g = server$fleet(name, "g"), until = server$fleet(name, "oa") + server$fleet(name, "od"))
  wait_until(function() all(file.exists(opens)), what = "every racer's copy to take the fleet's OPEN state")

  fault()

  # The fleet is OPEN (again); the racers go at the end of its open period,
  # by Redis's clock.
  expect_true(wait_until(function() identical(server$fleet(name, "s"), 1)))
  after <- list(g = server$fleet(name, "g"), until = server$fleet(name, "oa") + server$fleet(name, "od"))
  time <- unlist(server$call("TIME"))
  redis_now <- as.numeric(time[[1]]) * 1000 + floor(as.numeric(time[[2]]) / 1000)
  wait <- max(0, after$until - redis_now) / 1000 + 0.3
  write_start_time(race$start, as.numeric(Sys.time()) + wait)
  res <- collect_children(procs, timeout = 30)
  probes <- if (file.exists(counter)) length(readLines(counter)) else 0L
  list(res = res, probes = probes, before = before, after = after)
}

# The ids of the connections that `server` has now (CLIENT LIST).
client_ids <- function(server) {
  lines <- strsplit(server$call("CLIENT", "LIST"), "\n", fixed = TRUE)[[1]]
  as.numeric(sub("^id=([0-9]+) .*", "\\1", grep("^id=[0-9]+ ", lines, value = TRUE)))
}

expect_one_probe_and_closed <- function(server, name, race) {
  expect_identical(vapply(race$res, function(r) r$mode, ""), rep("fleet", length(race$res)))
  expect_identical(race$probes, 1L)
  expect_identical(sum(vapply(race$res, function(r) identical(r$result, "ok"), TRUE)), 1L)
  # The probe's success closed the fleet breaker, and every copy of it.
  expect_true(wait_until(function() identical(server$fleet(name, "s"), 0)))
  seen <- unlist(lapply(race$res, function(r) r$seen))
  expect_identical(vapply(race$res, function(r) r$state, ""), rep("CLOSED", length(race$res)),
                   info = paste(seen, collapse = "\n\n"))
}

test_that("after CLIENT KILL, exactly one probe goes out across the fleet and closes it", {
  server <- local_redis_server()
  race <- race_after_fault(server, "killed-clients", function() {
    killed <- server$call("CLIENT", "KILL", "TYPE", "normal")
    expect_true(killed >= 5)  # each process's sync and caller connections
  })
  expect_one_probe_and_closed(server, "killed-clients", race)
})

test_that("after Redis's idle timeout closed idle processes' connections, exactly one probe goes out", {
  server <- local_redis_server()
  race <- race_after_fault(server, "idle-clients", function() {
    before <- setdiff(client_ids(server), server$call("CLIENT", "ID"))
    server$call("CONFIG", "SET", "timeout", "1")
    # A second of idling is the fault: wait until Redis has closed the caller
    # connection of each of the 5 processes (4 racers and this one), idle
    # since they joined. Their sync connections are busy, and stay.
    wait_until(function() length(setdiff(before, client_ids(server))) >= 5,
               what = "Redis to close the idle caller connections")
    expect_identical(server$call("CONFIG", "GET", "timeout")[[2]], "1")
  }, recovery = 3)
  expect_one_probe_and_closed(server, "idle-clients", race)
})

test_that("after a Redis restart while OPEN, the fleet is rebuilt OPEN and one probe closes it", {
  server <- local_redis_server()
  race <- race_after_fault(server, "restarted", function() {
    server$restart()  # empty: no persistence
  })
  # The processes' reports rebuild it: the open-until time and the generation
  # are not lost (the later and the higher win; ms of rounding aside).
  expect_true(race$after$g >= race$before$g)
  expect_true(race$after$until >= race$before$until - 100)
  expect_one_probe_and_closed(server, "restarted", race)
})

test_that("(prefix, name) pairs that once shared a key are different breakers", {
  server <- local_redis_server()
  args <- fleet_args(failure_threshold = 1)
  a <- breaker_store_redis(server$url, prefix = "a", sync_interval = 0.05, timeout = 1)
  ab <- breaker_store_redis(server$url, prefix = "a:b", sync_interval = 0.05, timeout = 1)
  one <- local_shared_breaker(a, "b:c", args)
  two <- local_shared_breaker(ab, "c", args)
  expect_false(identical(fleet_key_of("a", "b:c"), fleet_key_of("a:b", "c")))
  one$execute(function() stop("down"), function(e) "fb")
  expect_true(wait_until(function() identical(server$fleet("b:c", "s", prefix = "a"), 1)))
  expect_true(wait_until(function() identical(server$fleet("c", "s", prefix = "a:b"), 0)))
  wait_for_syncs(two)  # a shared key would have spread the trip
  expect_identical(one$state, "OPEN")
  expect_identical(two$state, "CLOSED")
  expect_identical(two$execute(function() "ok", function() "rejected"), "ok")
  # Both keys follow the documented scheme, and nothing else was written.
  keys <- sort(unlist(server$call("KEYS", "*")))
  expect_true(all(startsWith(keys, "cb2:{")))
  expect_true(all(c(fleet_key_of("a", "b:c"), fleet_key_of("a:b", "c")) %in% keys))
})

test_that("a probe sent on local rules while Redis was away closes the fleet when it is back", {
  server <- local_redis_server()
  args <- fleet_args(failure_threshold = 1, recovery_timeout = 1)
  store <- breaker_store_redis(server$url, sync_interval = 0.05, timeout = 0.2)
  cb <- local_shared_breaker(store, "away", args)
  cb$execute(function() stop("down"), function(e) "fb")
  expect_true(wait_until(function() identical(server$fleet("away", "s"), 1)))
  # Redis hangs (it keeps the fleet's OPEN state): the link goes down.
  server$process$signal(tools::SIGSTOP)
  withr::defer(if (server$process$is_alive()) server$process$signal(tools::SIGCONT))
  quietly_alone(expect_true(wait_until(function() identical(cb$metrics()$mode, "local"), 5)))
  quietly_alone(wait_for_probe_time(cb))
  # The probe goes out on local rules, and closes this process's copy.
  expect_identical(cb$execute(function() "ok", function() "rejected"), "ok")
  expect_identical(cb$state, "CLOSED")
  # Back: its success reaches the fleet, which closes (and stays closed here).
  server$process$signal(tools::SIGCONT)
  quietly_alone(expect_true(wait_until(function() identical(cb$metrics()$mode, "fleet"), 10)))
  expect_true(wait_until(function() identical(server$fleet("away", "s"), 0)))
  expect_identical(cb$state, "CLOSED")
})

test_that("a slow Redis (CLIENT PAUSE) keeps the subscription, and its messages still arrive", {
  server <- local_redis_server()
  args <- fleet_args(failure_threshold = 1, recovery_timeout = 60)
  pubsub_ids <- function() {
    list <- server$call("CLIENT", "LIST", "TYPE", "pubsub")
    sort(regmatches(list, gregexpr("(?<=id=)[0-9]+", list, perl = TRUE))[[1]])
  }
  store <- breaker_store_redis(server$url, sync_interval = 0.02, timeout = 0.1)
  # 50 breakers: the sync that reads one breaker a second, in turn, does not
  # reach the last one within this test; only a message can.
  names <- sprintf("slow%02d", 1:50)
  cbs <- lapply(names, function(n) local_shared_breaker(store, n, args))
  expect_true(wait_until(function() length(pubsub_ids()) == 1))
  before <- pubsub_ids()
  # No command is served for 0.3 s: the syncs time out (timeout 0.1 s).
  expect_identical(server$call("CLIENT", "PAUSE", "300", "ALL"), "OK")
  quietly_alone(expect_true(wait_until(function() !is.na(cbs[[1]]$metrics()$last_error), 5)))
  quietly_alone(expect_true(wait_until(function() identical(cbs[[1]]$metrics()$mode, "fleet"), 10)))
  # The same subscribed client: not dropped, so no read of every breaker.
  expect_identical(pubsub_ids(), before)
  # Another process trips the last breaker; the message reaches this one.
  child <- fleet_child(server$url, names[[50]], args, function(cb, extra) {
    cb$execute(function() stop("down"), function(e) "fb")
    Sys.sleep(20)  # killed by the test once its trip is seen
  })
  withr::defer(if (child$is_alive()) child$kill())
  expect_true(wait_until(function() identical(cbs[[50]]$state, "OPEN"), 15))
})
