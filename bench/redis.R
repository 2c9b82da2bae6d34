# Cost of a fleet-shared breaker (store = breaker_store_redis()) on the R hot
# path, against an in-process breaker and against a per-call design on the
# same Redis, with every baseline measured in the same run.
#
#   R_LIBS=<library> Rscript bench/redis.R     (from the repository root,
#                                               after bash tools/setup.sh;
#                                               needs hiredis, redis-server
#                                               and processx; Linux only)
#
# The script starts its own redis-server on 127.0.0.1, on a random free port
# (--save '' --appendonly no, a private --dir under tempdir()), checks that
# the server answering is the one it started (INFO's process_id), and stops
# it on exit, error included: redis_server_start() (bench/harness/redis.R),
# as the tests start theirs. No traffic goes anywhere else.
#
# 1. cb$execute(function() "ok") in CLOSED, in-process vs Redis store
#    (breaker_store_redis(url, prefix, sync_interval = 0.1, timeout = 0.1)).
#    Both breakers are named, so they differ only in their store.
#    Budget: Redis at most 1.2x in-process.
# 2. cb$execute(function() "ok", function() "fallback") in OPEN (tripped by
#    five failures, recovery_timeout = 1e6, then 0.5 s for the fleet to sync;
#    the script checks that the fleet's hash says open), Redis vs in-process.
#    Budget: Redis at most 1.2x in-process.
#    1 and 2 are bench::mark medians (CB_BENCH_ITERATIONS, 50,000, per
#    expression) in CB_BENCH_RUNS (12) runs whose order alternates (in-process
#    first, then Redis first); the table gives each run, the median and the
#    range. More and shorter runs than bench/host.R's (4 of 200,000): on this
#    shared 2-core machine the load of other processes changes within
#    seconds, and a ratio is only as good as the two medians are close in
#    time. As a control, each run also times a second in-process breaker
#    (between the two): its ratio to the first shows how far noise alone
#    moves a ratio in this run.
# 3. The per-call design as the baseline (what pybreaker's Redis storage
#    does: the state is read from Redis on every call), written below with the
#    package's plain connection (cb_redis_connect(), cb_redis_call()): HGET
#    the state; if closed run the function, then HINCRBY a success or failure
#    counter, and on a failure at the threshold HSET the state to open. Two
#    round trips per call in CLOSED, one in OPEN. bench::mark medians over
#    CB_BENCH_BASELINE_ITERATIONS (1,000) per run, in the same runs as 1
#    and 2 (alternating whether it goes before or after them), with one bare
#    PING for the round trip's cost. Budget: execute() with the Redis store
#    at least 10x faster per call, in CLOSED; OPEN is reported the same way.
# 4. Whether the sync thread competes for the two cores: during 1 and 2 the
#    CPU time of the sync thread, of redis-server, of this process's main
#    thread and of the rest of the machine (/proc), the syncs made, and the
#    report marks (fields of the {prefix:name}:b hashes) left in Redis. Then
#    1 and 2 again (CB_BENCH_RUNS runs each) with a store of another
#    sync_interval, one at a time, after the previous store's breakers are
#    gone and its sync thread has ended: CB_BENCH_SYNC_INTERVALS ("0.01,1";
#    empty to skip).
# After each store's runs, the fleet's totals in Redis (calls, rejected) must
# equal the local copies' counts: no call lost or counted twice.
#
# Whole run: about two minutes on the project's 2-core machine (2 min 42 s
# while other processes kept more than one core busy).
suppressPackageStartupMessages(library(circuitbreaker))
# The fleet state is packed (fleet/script.hpp): read through the core's read script.
read_script <- circuitbreaker:::cb_fleet_read_script()
stopifnot(circuitbreaker:::cb_redis_available(), nzchar(Sys.which("redis-server")),
          requireNamespace("processx", quietly = TRUE), file.exists("/proc/self/task"))
# This script's path (Rscript passes it as --file=), to find bench/harness/.
this_file <- gsub("~+~", " ", sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1]), fixed = TRUE)
# fmt(), fmt_x(), fmt_range(), fmt_n(), verdict(); threads(), thread_cpu(),
# process_cpu(), busy_cpu_seconds(); redis_server_start():
for (file in c("format.R", "clock.R", "redis.R")) source(file.path(dirname(this_file), "harness", file))

iterations <- as.integer(Sys.getenv("CB_BENCH_ITERATIONS", "50000"))
runs <- as.integer(Sys.getenv("CB_BENCH_RUNS", "12"))
baseline_iterations <- as.integer(Sys.getenv("CB_BENCH_BASELINE_ITERATIONS", "1000"))
other_intervals <- Sys.getenv("CB_BENCH_SYNC_INTERVALS", "0.01,1")
other_intervals <- if (nzchar(other_intervals)) as.numeric(strsplit(other_intervals, ",")[[1]]) else numeric()
stopifnot(iterations > 0, runs > 0, baseline_iterations > 0, all(is.finite(other_intervals)))
main_interval <- 0.1
store_timeout <- 0.1

redis_call <- circuitbreaker:::cb_redis_call
# A command whose error reply stops the script.
rcall <- function(conn, args) {
  reply <- redis_call(conn, args)
  if (isTRUE(attr(reply, "redis_error"))) stop("Redis: ", paste(args, collapse = " "), ": ", reply)
  reply
}

# The per-call design: the state lives in Redis only, and every call reads it.
# One hash per breaker: state ("closed" or "open"), successes, failures.
per_call_breaker <- function(conn, key, failure_threshold = 5) {
  rcall(conn, c("HSET", key, "state", "closed", "successes", "0", "failures", "0"))
  function(request_func, fallback_func = NULL) {
    if (identical(rcall(conn, c("HGET", key, "state")), "open")) {
      if (is.null(fallback_func)) stop("circuit open")
      return(fallback_func())
    }
    value <- tryCatch(request_func(), error = function(e) e)
    if (inherits(value, "error")) {
      if (rcall(conn, c("HINCRBY", key, "failures", "1")) >= failure_threshold) {
        rcall(conn, c("HSET", key, "state", "open"))
      }
      if (is.null(fallback_func)) stop(value)
      return(fallback_func())
    }
    rcall(conn, c("HINCRBY", key, "successes", "1"))
    value
  }
}

main <- function() {
  dir <- tempfile("cb-bench-redis-")
  dir.create(dir, mode = "0700")
  server <- NULL
  on.exit({
    if (!is.null(server)) server$stop()
    unlink(dir, recursive = TRUE)
  })
  # On a free port; checked to be the server answering (INFO's process_id).
  server <- redis_server_start(dir)
  conn <- circuitbreaker:::cb_redis_connect(server$url, 0.5)
  prefix <- sprintf("cb-bench-%d", Sys.getpid())
  redis_pid <- server$pid

  fb <- function() 2
  failing <- function() stop("down")
  closed_process <- circuit_breaker(name = "closed-process")
  open_process <- circuit_breaker(name = "open-process", recovery_timeout = 1e6)
  closed_control <- circuit_breaker(name = "closed-process-control")
  open_control <- circuit_breaker(name = "open-process-control", recovery_timeout = 1e6)
  for (i in 1:5) {
    open_process$execute(failing, fb)
    open_control$execute(failing, fb)
  }
  stopifnot(open_process$state == "OPEN", open_control$state == "OPEN")

  # One store's breakers (a closed and an open one), its sync thread and its
  # runs. Returns the medians (ns) per run and what the machine did meanwhile.
  measure_store <- function(sync_interval, with_baseline) {
    store <- breaker_store_redis(server$url, prefix = prefix, sync_interval = sync_interval,
                                 timeout = store_timeout)
    tag <- format(sync_interval)
    before <- threads()
    closed_redis <- circuit_breaker(name = paste0("closed-redis-", tag), store = store)
    sync_tids <- setdiff(threads(), before)
    open_redis <- circuit_breaker(name = paste0("open-redis-", tag), store = store, recovery_timeout = 1e6)
    for (i in 1:5) open_redis$execute(failing, fb)
    open_key <- fleet_info(open_redis)$key
    fleet_open <- function() identical(rcall(conn, c("EVAL", read_script, "1", open_key, "s")), "1")
    if (!wait_until(fleet_open, 0.5 + 10 * sync_interval)) {
      stop("the fleet did not open ", open_key, " within ", 0.5 + 10 * sync_interval, " s")
    }
    Sys.sleep(0.5)
    for (i in 1:2000) {  # warm-up: byte-compiling, method caches
      closed_process$execute(function() "ok")
      closed_control$execute(function() "ok")
      closed_redis$execute(function() "ok")
      open_process$execute(function() "ok", function() "fallback")
      open_control$execute(function() "ok", function() "fallback")
      open_redis$execute(function() "ok", function() "fallback")
    }
    stopifnot(length(sync_tids) == 1L, closed_redis$state == "CLOSED", open_redis$state == "OPEN",
              identical(closed_redis$execute(function() "ok"), "ok"),
              identical(open_redis$execute(function() "ok", function() "fallback"), "fallback"),
              identical(closed_redis$metrics()$mode, "fleet"))

    if (with_baseline) {
      per_call_closed <- per_call_breaker(conn, paste0(prefix, ":per-call:closed"))
      per_call_open <- per_call_breaker(conn, paste0(prefix, ":per-call:open"))
      for (i in 1:5) per_call_open(failing, fb)
      stopifnot(identical(rcall(conn, c("HGET", paste0(prefix, ":per-call:open"), "state")), "open"),
                identical(per_call_closed(function() "ok"), "ok"),
                identical(per_call_open(function() "ok", function() "fallback"), "fallback"))
      for (i in 1:200) {
        per_call_closed(function() "ok")
        per_call_open(function() "ok", function() "fallback")
      }
    }

    exprs <- list(
      cp = quote(closed_process$execute(function() "ok")),
      cq = quote(closed_control$execute(function() "ok")),
      cr = quote(closed_redis$execute(function() "ok")),
      op = quote(open_process$execute(function() "ok", function() "fallback")),
      oq = quote(open_control$execute(function() "ok", function() "fallback")),
      or = quote(open_redis$execute(function() "ok", function() "fallback"))
    )
    baseline_exprs <- list(
      ping = quote(rcall(conn, "PING")),
      pc = quote(per_call_closed(function() "ok")),
      po = quote(per_call_open(function() "ok", function() "fallback"))
    )
    micro <- matrix(NA_real_, length(exprs), runs, dimnames = list(names(exprs), NULL))
    baseline <- matrix(NA_real_, 3, runs, dimnames = list(names(baseline_exprs), NULL))
    cpu <- c(wall = 0, main = 0, sync = 0, redis = 0, machine = 0)
    syncs <- 0
    failures0 <- fleet_info(closed_redis)$sync_failures
    local_runs <- 0
    for (run in seq_len(runs)) {
      process_first <- run %% 2 == 1
      measure_baseline <- function() {
        if (!with_baseline) return()
        order <- if (process_first) c("ping", "pc", "po") else c("ping", "po", "pc")
        results <- bench::mark(exprs = baseline_exprs[order], iterations = baseline_iterations,
                               check = FALSE, filter_gc = TRUE)
        baseline[, run] <<- setNames(as.numeric(results$median) * 1e9, order)[rownames(baseline)]
      }
      if (!process_first) measure_baseline()
      order <- if (process_first) c("cp", "cq", "cr", "op", "oq", "or") else c("cr", "cq", "cp", "or", "oq", "op")
      syncs0 <- fleet_info(closed_redis)$syncs
      t0 <- c(wall = unclass(Sys.time()), main = thread_cpu(Sys.getpid()), sync = thread_cpu(sync_tids),
              redis = process_cpu(redis_pid), machine = busy_cpu_seconds())
      results <- bench::mark(exprs = exprs[order], iterations = iterations, check = FALSE, filter_gc = TRUE)
      t1 <- c(wall = unclass(Sys.time()), main = thread_cpu(Sys.getpid()), sync = thread_cpu(sync_tids),
              redis = process_cpu(redis_pid), machine = busy_cpu_seconds())
      cpu <- cpu + (t1 - t0)
      syncs <- syncs + fleet_info(closed_redis)$syncs - syncs0
      if (!identical(closed_redis$metrics()$mode, "fleet")) local_runs <- local_runs + 1
      micro[, run] <- setNames(as.numeric(results$median) * 1e9, order)[rownames(micro)]
      if (process_first) measure_baseline()
      message(sprintf("sync_interval %s: run %d of %d done (%s first)", tag, run, runs,
                      if (process_first) "in-process" else "Redis"))
    }
    stopifnot(closed_redis$state == "CLOSED", open_redis$state == "OPEN")

    # The fleet's totals against the local copies' (after the last sync).
    fleet_counts <- function() {
      c(closed = as.numeric(rcall(conn, c("EVAL", read_script, "1", fleet_info(closed_redis)$key, "tc"))),
        open = as.numeric(rcall(conn, c("EVAL", read_script, "1", open_key, "tr"))))
    }
    local_counts <- function() c(closed = closed_redis$metrics()$calls, open = open_redis$metrics()$rejected)
    exact <- wait_until(function() identical(fleet_counts(), local_counts()), 2 + 5 * sync_interval)
    counts <- rbind(local = local_counts(), fleet = fleet_counts())
    sync_failures <- fleet_info(closed_redis)$sync_failures - failures0
    # What makes a retried report count once: one field per process in the
    # hash cb2:{prefix:name}:b (the last report applied), summed over the
    # breakers (the prefix and names here need no encoding).
    mark_keys <- unlist(rcall(conn, c("KEYS", sprintf("cb2:{%s:*-redis-%s}:b", prefix, tag))))
    marks <- sum(vapply(mark_keys, function(k) as.numeric(rcall(conn, c("HLEN", k))), 0))

    # Gone: the next store's sync thread runs alone.
    breaker_remove(closed_redis$name)
    breaker_remove(open_redis$name)
    rm(closed_redis, open_redis)
    invisible(gc())
    ended <- wait_until(function() !any(sync_tids %in% threads()), 2 + 2 * sync_interval)
    list(sync_interval = sync_interval, micro = micro, baseline = if (with_baseline) baseline,
         cpu = cpu, syncs = syncs, sync_failures = sync_failures, local_runs = local_runs,
         exact = exact, counts = counts, thread_ended = ended, marks = marks)
  }

  main_store <- measure_store(main_interval, with_baseline = TRUE)
  others <- lapply(other_intervals, measure_store, with_baseline = FALSE)

  # Report -----------------------------------------------------------------------
  run_cols <- paste("run", seq_len(runs))
  labels <- c(cp = "CLOSED, in-process: cb$execute(function() \"ok\")",
              cq = "CLOSED, in-process, a second breaker (control)",
              cr = "CLOSED, Redis store: cb$execute(function() \"ok\")",
              op = "OPEN, in-process: cb$execute(function() \"ok\", function() \"fallback\")",
              oq = "OPEN, in-process, a second breaker (control)",
              or = "OPEN, Redis store: cb$execute(function() \"ok\", function() \"fallback\")",
              ping = "one round trip: PING",
              pc = "CLOSED, per-call design (HGET + HINCRBY)",
              po = "OPEN, per-call design (HGET)")
  m <- main_store$micro
  b <- main_store$baseline
  closed_ratio <- m["cr", ] / m["cp", ]
  open_ratio <- m["or", ] / m["op", ]
  closed_control <- m["cq", ] / m["cp", ]
  open_control <- m["oq", ] / m["op", ]
  per_call_closed_ratio <- b["pc", ] / m["cr", ]
  per_call_open_ratio <- b["po", ] / m["or", ]
  machine_row <- function(s) {
    cpu <- s$cpu
    wall <- cpu[["wall"]]
    others <- max(0, cpu[["machine"]] - cpu[["main"]] - cpu[["sync"]] - cpu[["redis"]]) / wall
    sprintf("| %s s | %.1f s | %.2f | %.3f | %.3f | %.2f | %s (%.1f/s) | %d | %d of %d | %s | %s | %s |",
            format(s$sync_interval), wall, cpu[["main"]] / wall, cpu[["sync"]] / wall, cpu[["redis"]] / wall,
            others, fmt_n(s$syncs), s$syncs / wall, s$sync_failures, s$local_runs, runs, fmt_n(s$marks),
            if (s$exact) "equal" else sprintf("**DIFFERENT** (local %s, fleet %s)",
                                             paste(fmt_n(s$counts["local", ]), collapse = "/"),
                                             paste(fmt_n(s$counts["fleet", ]), collapse = "/")),
            if (s$thread_ended) "yes" else "**no**")
  }
  interval_rows <- vapply(c(list(main_store), others), function(s) {
    x <- s$micro
    cr <- x["cr", ] / x["cp", ]
    or <- x["or", ] / x["op", ]
    sprintf("| %s s | %s, %s | **%s** (%s) | %s | %s, %s | **%s** (%s) | %s |", format(s$sync_interval),
            fmt(median(x["cp", ])), fmt(median(x["cr", ])), fmt_x(median(cr)), fmt_range(cr, fmt_x),
            fmt_x(median(x["cq", ] / x["cp", ])),
            fmt(median(x["op", ])), fmt(median(x["or", ])), fmt_x(median(or)), fmt_range(or, fmt_x),
            fmt_x(median(x["oq", ] / x["op", ])))
  }, "")

  cat(
    sprintf(paste("R %s, circuitbreaker %s, bench %s, processx %s, redis-server %s;",
                  "%d iterations per expression (per-call design: %d), %d runs; %s\n"),
            getRversion(), packageVersion("circuitbreaker"), packageVersion("bench"), packageVersion("processx"),
            sub("^.*v=([^ ]+).*$", "\\1", system2(Sys.which("redis-server"), "--version", stdout = TRUE)),
            iterations, baseline_iterations, runs, format(Sys.time(), "%Y-%m-%d")),
    sprintf(paste("%d cores (parallel::detectCores()); redis-server on 127.0.0.1:%d;",
                  "store sync_interval = %g s, timeout = %g s\n\n"),
            parallel::detectCores(), server$port, main_interval, store_timeout),
    "execute() medians (bench::mark), odd runs in-process first, even runs Redis first:\n\n",
    "| expression | ", paste(run_cols, collapse = " | "), " | median | range |\n",
    "|---|", strrep("---|", runs + 2), "\n",
    paste0(vapply(c("cp", "cq", "cr", "op", "oq", "or", "ping", "pc", "po"), function(k) {
      time_row(labels[[k]], if (k %in% rownames(m)) m[k, ] else b[k, ])
    }, ""), "\n"),
    "\n| ratio | ", paste(run_cols, collapse = " | "), " | median | range | budget | |\n",
    "|---|", strrep("---|", runs + 4), "\n",
    ratio_row("CLOSED: Redis store / in-process", closed_ratio, 1.2), "\n",
    ratio_row("OPEN with fallback: Redis store / in-process", open_ratio, 1.2), "\n",
    ratio_row("control, CLOSED: second in-process breaker / first", closed_control), "\n",
    ratio_row("control, OPEN: second in-process breaker / first", open_control), "\n",
    ratio_row("CLOSED: per-call design / Redis store (x faster)", per_call_closed_ratio, 10, at_most = FALSE), "\n",
    ratio_row("OPEN: per-call design / Redis store (x faster)", per_call_open_ratio, 10, at_most = FALSE), "\n",
    "\nThe machine during the execute() runs (CPU seconds per second of wall time, from /proc):\n\n",
    "| sync_interval | wall | R main thread | sync thread | redis-server | other processes | syncs | sync failures ",
    "| runs ending in mode \"local\" | report marks left in Redis | fleet totals vs local counts ",
    "| sync thread ended once its breakers were gone |\n",
    "|---|", strrep("---|", 11), "\n",
    paste0(vapply(c(list(main_store), others), machine_row, ""), "\n"),
    "\nThe same execute() runs with stores of other sync intervals, one store at a time (medians of the runs):\n\n",
    "| sync_interval | CLOSED: in-process, Redis | Redis / in-process (range) | control | ",
    "OPEN: in-process, Redis | Redis / in-process (range) | control |\n",
    "|---|---|---|---|---|---|---|\n",
    paste0(interval_rows, "\n"),
    sprintf("\nCLOSED: the Redis store %s the in-process breaker (budget <= 1.2x): %s\n",
            fmt_x(median(closed_ratio)), verdict(median(closed_ratio) <= 1.2)),
    sprintf("OPEN with fallback: the Redis store %s the in-process breaker (budget <= 1.2x): %s\n",
            fmt_x(median(open_ratio)), verdict(median(open_ratio) <= 1.2)),
    sprintf("CLOSED: the Redis store %s faster per call than the per-call design (budget >= 10x): %s\n",
            fmt_x(median(per_call_closed_ratio)), verdict(median(per_call_closed_ratio) >= 10)),
    sprintf("OPEN: the Redis store %s faster per call than the per-call design (reported; >= 10x): %s\n",
            fmt_x(median(per_call_open_ratio)), verdict(median(per_call_open_ratio) >= 10)),
    sprintf("Fleet totals equal to the local counts after every store's runs: %s\n",
            if (all(vapply(c(list(main_store), others), `[[`, TRUE, "exact"))) "yes" else "NO"),
    sep = ""
  )
  invisible(list(main = main_store, others = others))
}

main()
