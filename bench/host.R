# Cost of a host-shared breaker (store = breaker_store_host()) against an
# in-process one, on the R hot path and under contention from several R
# processes, with baselines measured in the same run.
#
#   Rscript bench/host.R         (from the repository root, after
#                                 bash tools/setup.sh; Linux only)
#
# 1. cb$execute(function() "ok") in CLOSED, in-process vs host-shared, and
#    the bare tryCatch(f(), error = function(e) fb()) of bench/execute.R.
#    Budget: host at most 1.3x in-process.
# 2. cb$execute(function() "ok", function() "fallback") in OPEN (tripped by
#    failures, recovery_timeout = 1e6), in-process vs host-shared.
#    Budget: host at most 1.5x in-process.
#    1 and 2 are bench::mark medians (CB_BENCH_ITERATIONS, 200,000, per
#    expression), in CB_BENCH_RUNS (4) runs whose order alternates
#    (in-process first, then host first); the table gives each run, the
#    median and the range.
# 3. Throughput: N = 1, 2 and 4 R processes (callr::r_bg) each call
#    cb$execute(function() "ok") in a tight loop for CB_BENCH_SECONDS (3) s
#    of wall time from a common start (a file naming the start time), on one
#    host-shared breaker, and, as the no-sharing baseline, each on its own
#    in-process breaker; CB_BENCH_ROUNDS (4) rounds, alternating which kind
#    goes first and the order of N. Total calls/s, calls per CPU-second, and
#    the CPU that other processes used meanwhile. Budget: 4 processes on the
#    shared breaker at least 2x one process. The machine has 2 cores, so 2x
#    is the ceiling: 4 processes share 2 cores. Afterwards the shared
#    breaker's $metrics()$calls must equal the sum of the calls the
#    processes counted (no call lost or counted twice under contention).
#
# The in-process breakers have a name too, so that the two kinds differ only
# in their store. The store is a fresh directory under /dev/shm, removed on
# exit with every child process. Whole run: about three minutes.
suppressPackageStartupMessages(library(circuitbreaker))
stopifnot(circuitbreaker:::cb_host_supported())
# This script's path (Rscript passes it as --file=), to find bench/harness/.
this_file <- gsub("~+~", " ", sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1]), fixed = TRUE)
for (file in c("format.R", "clock.R")) source(file.path(dirname(this_file), "harness", file))

iterations <- as.integer(Sys.getenv("CB_BENCH_ITERATIONS", "200000"))
runs <- as.integer(Sys.getenv("CB_BENCH_RUNS", "4"))
seconds <- as.numeric(Sys.getenv("CB_BENCH_SECONDS", "3"))
rounds <- as.integer(Sys.getenv("CB_BENCH_ROUNDS", "4"))
process_counts <- c(1L, 2L, 4L)

# One process of the throughput test. Runs in a fresh R (callr), so it is
# self-contained. It creates its breaker and warms up on another breaker of
# the same kind (so that the measured breaker sees only timed calls), says
# it is ready, waits for the start file and then for the start time written
# in it, and calls execute() until the deadline, looking at the clock every
# 256 calls. Every wait and the loop are bounded.
hammer <- function(kind, dir, name, ready_file, start_file, seconds, max_calls) {
  suppressPackageStartupMessages(library(circuitbreaker))
  make <- function(name) {
    if (kind == "host") circuit_breaker(name = name, store = breaker_store_host(dir))
    else circuit_breaker(name = name)
  }
  warm <- make(paste0(name, "-warm-up-", Sys.getpid()))
  for (i in 1:20000) warm$execute(function() "ok")
  cb <- make(if (kind == "host") name else paste0(name, "-", Sys.getpid()))
  writeLines(as.character(Sys.getpid()), ready_file)
  give_up <- unclass(Sys.time()) + 120
  while (!file.exists(start_file)) {
    if (unclass(Sys.time()) > give_up) stop("no start signal within 120 s")
    Sys.sleep(0.002)
  }
  start <- as.numeric(readLines(start_file))
  while ((now <- unclass(Sys.time())) < start) Sys.sleep(min(0.01, start - now))
  deadline <- start + seconds
  cpu0 <- proc.time()
  calls <- 0
  repeat {
    for (i in 1:256) cb$execute(function() "ok")
    calls <- calls + 256
    now <- unclass(Sys.time())
    if (now >= deadline || calls >= max_calls) break
  }
  cpu <- proc.time() - cpu0
  list(calls = calls, elapsed = now - start, cpu = unname(cpu[["user.self"]] + cpu[["sys.self"]]),
       sys = unname(cpu[["sys.self"]]), state = cb$state)
}

main <- function() {
  store_dir <- tempfile("cb-bench-", tmpdir = "/dev/shm")
  dir.create(store_dir, mode = "0700")
  store <- breaker_store_host(store_dir)
  children <- list()
  on.exit({
    for (p in children) if (p$is_alive()) p$kill()
    unlink(store_dir, recursive = TRUE)
  })

  # 1 and 2: the hot path ------------------------------------------------------
  f <- function() 1
  fb <- function() 2
  failing <- function() stop("down")
  closed_process <- circuit_breaker(name = "closed-process")
  closed_host <- circuit_breaker(name = "closed-host", store = store)
  open_process <- circuit_breaker(name = "open-process", recovery_timeout = 1e6)
  open_host <- circuit_breaker(name = "open-host", recovery_timeout = 1e6, store = store)
  for (i in 1:5) {
    open_process$execute(failing, fb)
    open_host$execute(failing, fb)
  }
  for (i in 1:2000) {  # warm-up: byte-compiling, method caches
    closed_process$execute(function() "ok")
    closed_host$execute(function() "ok")
    open_process$execute(function() "ok", function() "fallback")
    open_host$execute(function() "ok", function() "fallback")
  }
  stopifnot(identical(tryCatch(f(), error = function(e) fb()), 1),
            open_process$state == "OPEN", open_host$state == "OPEN",
            identical(closed_host$execute(function() "ok"), "ok"),
            identical(open_host$execute(function() "ok", function() "fallback"), "fallback"))

  base_name <- "tryCatch(f(), error = function(e) fb())"
  names_in_order <- c(base_name,
                      "CLOSED, in-process: cb$execute(function() \"ok\")",
                      "CLOSED, host: cb$execute(function() \"ok\")",
                      "OPEN, in-process: cb$execute(function() \"ok\", function() \"fallback\")",
                      "OPEN, host: cb$execute(function() \"ok\", function() \"fallback\")")
  micro <- matrix(NA_real_, length(names_in_order), runs, dimnames = list(names_in_order, NULL))
  for (run in seq_len(runs)) {
    process_first <- run %% 2 == 1
    exprs <- list(
      base = quote(tryCatch(f(), error = function(e) fb())),
      cp = quote(closed_process$execute(function() "ok")),
      ch = quote(closed_host$execute(function() "ok")),
      op = quote(open_process$execute(function() "ok", function() "fallback")),
      oh = quote(open_host$execute(function() "ok", function() "fallback"))
    )
    order <- if (process_first) c("base", "cp", "ch", "op", "oh") else c("base", "ch", "cp", "oh", "op")
    results <- bench::mark(exprs = exprs[order], iterations = iterations, check = FALSE,
                           filter_gc = TRUE)
    medians <- setNames(as.numeric(results$median) * 1e9, order)
    micro[, run] <- medians[c("base", "cp", "ch", "op", "oh")]
    message(sprintf("micro-benchmark run %d of %d done (%s first)", run, runs,
                    if (process_first) "in-process" else "host"))
  }
  stopifnot(closed_host$state == "CLOSED", open_host$state == "OPEN")
  closed_ratio <- micro[3, ] / micro[2, ]
  open_ratio <- micro[5, ] / micro[4, ]

  # 3: throughput under contention ------------------------------------------------
  run_config <- function(kind, n, round) {
    name <- sprintf("tp-%s-%d-%d", kind, n, round)
    shared <- if (kind == "host") circuit_breaker(name = name, store = store) else NULL
    signal_dir <- file.path(store_dir, paste0("signal-", name))
    dir.create(signal_dir)
    ready <- file.path(signal_dir, sprintf("ready-%d", seq_len(n)))
    start_file <- file.path(signal_dir, "start")
    procs <- lapply(seq_len(n), function(i) {
      callr::r_bg(hammer, args = list(kind = kind, dir = store_dir, name = name,
                                      ready_file = ready[i], start_file = start_file,
                                      seconds = seconds, max_calls = 1e8),
                  supervise = TRUE, package = FALSE)
    })
    children <<- c(children, procs)
    give_up <- Sys.time() + 120
    while (!all(file.exists(ready))) {
      dead <- !vapply(procs, function(p) p$is_alive(), logical(1)) & !file.exists(ready)
      if (any(dead)) procs[[which(dead)[1]]]$get_result()  # raises the child's error
      if (Sys.time() > give_up) stop("the processes were not ready within 120 s")
      Sys.sleep(0.05)
    }
    Sys.sleep(0.2)  # let the children settle into their polling sleep
    start <- unclass(Sys.time()) + 0.3
    writeLines(format(start, digits = 15), paste0(start_file, ".tmp"))
    file.rename(paste0(start_file, ".tmp"), start_file)
    # The machine's busy CPU time over the window, to tell how much of it
    # went to processes other than ours (the machine is shared).
    Sys.sleep(max(0, start - unclass(Sys.time())))
    busy0 <- busy_cpu_seconds()
    Sys.sleep(max(0, start + seconds - unclass(Sys.time())))
    busy1 <- busy_cpu_seconds()
    out <- lapply(procs, function(p) {
      p$wait(timeout = (seconds + 60) * 1000)
      if (p$is_alive()) stop("a process did not finish within ", seconds + 60, " s")
      p$get_result()
    })
    calls <- vapply(out, `[[`, numeric(1), "calls")
    rate <- sum(calls / vapply(out, `[[`, numeric(1), "elapsed"))
    cpu <- sum(vapply(out, `[[`, numeric(1), "cpu"))
    sys <- sum(vapply(out, `[[`, numeric(1), "sys"))
    others <- max(0, (busy1 - busy0) - cpu) / seconds
    metrics_calls <- if (is.null(shared)) NA_real_ else shared$metrics()$calls
    if (!is.null(shared)) {
      m <- shared$metrics()
      stopifnot(m$failures == 0, m$rejected == 0, m$state == "CLOSED")
      breaker_remove(name)
      breaker_store_unlink(name, store)
    }
    unlink(signal_dir, recursive = TRUE)
    message(sprintf("throughput round %d, %s breaker, %d process(es): %s calls/s (other processes: %.2f cores)",
                    round, kind, n, fmt_n(rate), others))
    data.frame(round = round, kind = kind, n = n, rate = rate, per_cpu_second = sum(calls) / cpu,
               fewest = min(calls), most = max(calls), counted = sum(calls),
               metrics_calls = metrics_calls, cpu_share = cpu / (n * seconds), sys_share = sys / cpu,
               others = others)
  }
  tp <- list()
  for (round in seq_len(rounds)) {
    kinds <- if (round %% 2 == 1) c("process", "host") else c("host", "process")
    ns <- if (round %% 2 == 1) process_counts else rev(process_counts)
    for (kind in kinds) for (n in ns) tp[[length(tp) + 1]] <- run_config(kind, n, round)
  }
  tp <- do.call(rbind, tp)

  # Report -----------------------------------------------------------------------
  run_cols <- paste("run", seq_len(runs))
  micro_rows <- vapply(names_in_order, function(name) {
    x <- micro[name, ]
    paste0("| ", name, " | ", paste(vapply(x, fmt, ""), collapse = " | "), " | **", fmt(median(x)),
           "** | ", fmt_range(x, fmt), " | ", fmt_x(median(x / micro[base_name, ])), " |")
  }, "")
  tp_row <- function(kind, n) {
    rows <- tp[tp$kind == kind & tp$n == n, ]
    one <- tp[tp$kind == kind & tp$n == 1, ]
    vs_one <- rows$rate / one$rate[match(rows$round, one$round)]
    process <- tp[tp$kind == "process" & tp$n == n, ]
    vs_process <- rows$rate / process$rate[match(rows$round, process$round)]
    exact <- if (kind == "host") {
      sprintf("%s in %d of %d rounds (%s calls in all)",
              if (all(rows$metrics_calls == rows$counted)) "equal" else "**DIFFERENT**",
              sum(rows$metrics_calls == rows$counted), nrow(rows), fmt_n(sum(rows$counted)))
    } else {
      "-"
    }
    paste0("| ", if (kind == "host") "host-shared (one for all)" else "in-process (one each)", " | ", n,
           " | **", fmt_n(median(rows$rate)), "** (", fmt_range(rows$rate, fmt_n), ") | ",
           fmt_x(median(vs_one)), " (", fmt_range(vs_one, fmt_x), ") | ",
           fmt_x(median(vs_process)), " | ", fmt_n(median(rows$per_cpu_second)), " | ",
           sprintf("%.2f", median(rows$fewest / rows$most)), " | ",
           sprintf("%.0f%%", 100 * median(rows$cpu_share)), " | ",
           sprintf("%.0f%%", 100 * median(rows$sys_share)), " | ",
           sprintf("%.2f", median(rows$others)), " | ", exact, " |")
  }
  host <- tp[tp$kind == "host", ]
  ratio4 <- host$rate[host$n == 4] / host$rate[host$n == 1]
  process <- tp[tp$kind == "process", ]
  ratio4_process <- process$rate[process$n == 4] / process$rate[process$n == 1]
  exact_all <- all(host$metrics_calls == host$counted)

  cat(
    sprintf("R %s, circuitbreaker %s, bench %s, callr %s, %d iterations per expression, %d runs; %s\n",
            getRversion(), packageVersion("circuitbreaker"), packageVersion("bench"),
            packageVersion("callr"), iterations, runs, format(Sys.time(), "%Y-%m-%d")),
    sprintf("%d cores (parallel::detectCores()); store %s\n\n", parallel::detectCores(), store_dir),
    "execute() medians (bench::mark), odd runs in-process first, even runs host first:\n\n",
    "| expression | ", paste(run_cols, collapse = " | "), " | median | range | vs tryCatch |\n",
    "|---|", strrep("---|", runs + 3), "\n",
    paste0(micro_rows, "\n"),
    "\n| ratio | ", paste(run_cols, collapse = " | "), " | median | range | budget | |\n",
    "|---|", strrep("---|", runs + 4), "\n",
    ratio_row("CLOSED: host / in-process", closed_ratio, 1.3), "\n",
    ratio_row("OPEN with fallback: host / in-process", open_ratio, 1.5), "\n",
    sprintf(paste("\nThroughput: N processes calling cb$execute(function() \"ok\") for %g s of wall time",
                  "each, from a common start; %d rounds:\n\n"), seconds, rounds),
    "| breaker | N | calls/s: median (range) | vs N = 1, median (range) | vs in-process, same N ",
    "| calls per CPU-second | fewest / most calls of a process | CPU share per process | of it in the kernel ",
    "| other processes' load, cores | shared $metrics()$calls vs sum counted |\n",
    "|---|---|", strrep("---|", 9), "\n",
    paste0(c(vapply(process_counts, function(n) tp_row("process", n), ""),
             vapply(process_counts, function(n) tp_row("host", n), "")), "\n"),
    sprintf("\nCLOSED: host %s the in-process breaker (budget <= 1.3x): %s\n",
            fmt_x(median(closed_ratio)), verdict(median(closed_ratio) <= 1.3)),
    sprintf("OPEN with fallback: host %s the in-process breaker (budget <= 1.5x): %s\n",
            fmt_x(median(open_ratio)), verdict(median(open_ratio) <= 1.5)),
    sprintf(paste("4 processes on one host-shared breaker: %s the calls/s of one (range %s;",
                  "budget >= 2x, the ceiling on %d cores): %s\n"),
            fmt_x(median(ratio4)), fmt_range(ratio4, fmt_x), parallel::detectCores(),
            verdict(median(ratio4) >= 2)),
    sprintf("  (in-process breakers, no sharing: %s, range %s)\n", fmt_x(median(ratio4_process)),
            fmt_range(ratio4_process, fmt_x)),
    sprintf(paste("Calls per CPU-second, 4 processes / 1 (the cost per call of contention, whatever",
                  "the scheduler gave): host-shared %s, in-process %s\n"),
            fmt_x(median(host$per_cpu_second[host$n == 4] / host$per_cpu_second[host$n == 1])),
            fmt_x(median(process$per_cpu_second[process$n == 4] / process$per_cpu_second[process$n == 1]))),
    if (median(tp$others) > 0.2) {
      sprintf(paste("Other processes kept %.2f cores busy during the windows (median; range %.2f-%.2f):",
                    "the wall-clock ratios measure the scheduler's shares as much as the breaker.\n"),
              median(tp$others), min(tp$others), max(tp$others))
    },
    sprintf("Shared $metrics()$calls equal to the sum of the calls counted, in every host run: %s\n",
            if (exact_all) "yes" else "NO"),
    sep = ""
  )
  invisible(list(micro = micro, throughput = tp))
}

main()
