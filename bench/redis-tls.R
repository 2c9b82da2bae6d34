# The fleet store (breaker_store_redis()) over TLS: what rediss:// costs on
# the R hot path and per round trip, against plain redis:// and against an
# in-process breaker, every baseline measured in the same run
# (bench/RESULTS.md section 16).
#
#   R_LIBS=<library> Rscript bench/redis-tls.R   (from the repository root,
#                                                 after bash tools/setup.sh;
#                                                 needs hiredis, OpenSSL, a
#                                                 redis-server built with TLS,
#                                                 the openssl command, processx;
#                                                 Linux only)
#
# The script makes a CA and a server certificate (redis_tls_certs() of
# inst/redis/redis-tls.R, in a private temporary folder) and starts two
# redis-servers on 127.0.0.1, each on a random free port with no
# persistence and checked to be the one answering (INFO's process_id): one
# plain, one TLS-only with that certificate (bench/harness/redis.R,
# bench/harness/redis-tls.R). Both are stopped and the folder removed on
# exit, error included. No traffic goes anywhere else.
#
# 1. execute() through three breakers that differ only in their store: an
#    in-process one, a fleet one on the plain server (redis://) and a fleet
#    one on the TLS server (rediss://, tls = list(ca_file = <the CA>)), both
#    stores sync_interval = 0.1 s, timeout = 0.1 s:
#    * CLOSED: cb$execute(function() "ok");
#    * OPEN: cb$execute(function() stop("x"), function() "fallback"), each
#      breaker tripped by five failures first (recovery_timeout = 1e6), the
#      fleet's hash checked to say open on each server (the read script).
#    bench::mark medians (CB_BENCH_ITERATIONS, 50,000, per expression) in
#    CB_BENCH_RUNS (12) runs whose order alternates (odd runs: in-process,
#    control, plain, TLS; even runs the reverse), then the median of the
#    runs and their range, as bench/redis.R does. A second in-process
#    breaker (the control) shows how far noise alone moves a ratio in the
#    same run. Targets: TLS at most 1.05x plain, and at most 1.2x
#    in-process, in CLOSED and in OPEN.
# 2. One round trip on the package's own test connection
#    (circuitbreaker:::cb_redis_connect(url, timeout, tls) and
#    cb_redis_call()), TLS against plain: PING, and EVALSHA of the fleet's
#    read script (cb_fleet_read_script(), SCRIPT LOAD first) on the open
#    breaker's key. bench::mark over CB_BENCH_RT_ITERATIONS (2,000) per
#    expression in the same runs as 1 (alternating before or after them and
#    the order plain/TLS); its `time` column (iterations with a GC left
#    out, as for the median) gives each run's median and p99; the table
#    gives the median of the runs and the range, and the p99 of every
#    iteration of every run. Also a new connection: cb_redis_connect() (TCP,
#    and for TLS the handshake with the certificate's verification) and one
#    PING on it, CB_BENCH_CONNECT_ITERATIONS (200) per run, the
#    connections closed (gc()) after each run: what a store pays to
#    reconnect, before any other round trip.
# 3. The stores' sync round trips, measured: a child process
#    (bench/redis-tls-sync-worker.R) with bench/fleet/round-trips.c
#    preloaded (compiled with `cc`; skipped, and said, without one), which
#    times every round trip that goes through hiredis's RESP writer and
#    reader, per thread. It holds four stores at once, for
#    CB_BENCH_SYNC_SECONDS (30; 0 skips): plain and TLS, each "busy"
#    (CB_BENCH_SYNC_BREAKERS, 10, breakers called every 20 ms: every sync
#    carries counts, an EVALSHA) and "idle" (one breaker never called: a
#    PING per sync). A store's round trips are those of its own sync
#    thread (found as the thread its first breaker added), but for the
#    connection's set-up (SUBSCRIBE, AUTH, SELECT, SCRIPT, HELLO, CLIENT,
#    ROLE, SENTINEL); the TLS handshake is not a round trip here.
# 4. The machine during the runs of 1 (CPU seconds per second from /proc:
#    this process's R thread, each store's sync thread, each redis-server,
#    the rest of the machine), the syncs and sync failures of each store,
#    the TLS version each store's link reports ($metrics()$tls), and
#    whether each fleet's totals in Redis equal the local counts at the end.
#
# Whole run: about 3 minutes with the defaults on the project's 2-core
# machine.
suppressPackageStartupMessages(library(circuitbreaker))
read_script <- circuitbreaker:::cb_fleet_read_script()
stopifnot(circuitbreaker:::cb_redis_available(), circuitbreaker:::cb_redis_tls_available(),
          nzchar(Sys.which("redis-server")), nzchar(Sys.which("openssl")),
          requireNamespace("processx", quietly = TRUE), file.exists("/proc/self/task"))
this_file <- gsub("~+~", " ", sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1]), fixed = TRUE)
home <- normalizePath(dirname(this_file), mustWork = TRUE)
# fmt(), fmt_x(), fmt_range(), fmt_n(), verdict(); threads(), thread_cpu(),
# process_cpu(), busy_cpu_seconds(); redis_server_start(); redis_tls_certs(),
# redis_tls_server_start():
for (file in c("format.R", "clock.R", "redis.R", "redis-tls.R")) source(file.path(home, "harness", file))

iterations <- as.integer(Sys.getenv("CB_BENCH_ITERATIONS", "50000"))
runs <- as.integer(Sys.getenv("CB_BENCH_RUNS", "12"))
rt_iterations <- as.integer(Sys.getenv("CB_BENCH_RT_ITERATIONS", "2000"))
connect_iterations <- as.integer(Sys.getenv("CB_BENCH_CONNECT_ITERATIONS", "200"))
sync_seconds <- as.numeric(Sys.getenv("CB_BENCH_SYNC_SECONDS", "30"))
sync_breakers <- as.integer(Sys.getenv("CB_BENCH_SYNC_BREAKERS", "10"))
stopifnot(iterations > 0, runs > 0, rt_iterations > 0, connect_iterations > 0, is.finite(sync_seconds),
          sync_seconds >= 0, sync_seconds <= 600, sync_breakers > 0, sync_breakers <= 1000)
sync_interval <- 0.1
store_timeout <- 0.1

redis_call <- circuitbreaker:::cb_redis_call
rcall <- function(conn, args) {
  reply <- redis_call(conn, args)
  if (isTRUE(attr(reply, "redis_error"))) stop("Redis: ", paste(args, collapse = " "), ": ", reply)
  reply
}
q <- function(x, p) if (length(x)) unname(stats::quantile(x, p, type = 7, na.rm = TRUE)) else NA_real_
# A bench::mark result's iterations without a GC (what its median is of), in ns.
no_gc_times <- function(results, i) {
  t <- as.numeric(results$time[[i]]) * 1e9
  gc <- results$gc[[i]]
  keep <- if (is.null(gc) || !nrow(gc)) rep(TRUE, length(t)) else rowSums(gc) == 0
  if (!any(keep)) t else t[keep]
}

# The stores' sync round trips (part 3): the child's table, per store.
measure_sync_round_trips <- function(dir, urls, tls) {
  so <- file.path(dir, "round-trips.so")
  cc <- Sys.which(c("cc", "gcc"))
  cc <- cc[nzchar(cc)]
  res <- if (length(cc)) {
    processx::run(cc[[1]], c("-O2", "-shared", "-fPIC", "-pthread", "-o", so,
                             file.path(home, "fleet", "round-trips.c"), "-ldl"),
                  error_on_status = FALSE, timeout = 60)
  }
  if (is.null(res) || res$status != 0 || !file.exists(so)) {
    return(list(skipped = "no C compiler, or bench/fleet/round-trips.c did not compile"))
  }
  child_dir <- file.path(dir, "sync-child")
  dir.create(child_dir)
  saveRDS(list(urls = urls, tls = tls, seconds = sync_seconds, breakers = sync_breakers,
               sync_interval = sync_interval, timeout = store_timeout, parent_pid = Sys.getpid(),
               lifetime = sync_seconds + 120),
          file.path(child_dir, "config.rds"))
  proc <- processx::process$new(
    file.path(R.home("bin"), "Rscript"), c("--vanilla", file.path(home, "redis-tls-sync-worker.R"), child_dir),
    env = c("current", R_LIBS = paste(.libPaths(), collapse = .Platform$path.sep), LD_PRELOAD = so,
            CB_ROUND_TRIPS_SO = so),
    stdout = file.path(child_dir, "log"), stderr = "2>&1", cleanup = TRUE, supervise = TRUE
  )
  on.exit(if (proc$is_alive()) proc$kill(), add = TRUE)
  done <- file.path(child_dir, "result.rds")
  deadline <- Sys.time() + sync_seconds + 120
  while (!file.exists(done) && proc$is_alive() && Sys.time() < deadline) Sys.sleep(0.2)
  if (!file.exists(done)) {
    log <- file.path(child_dir, "log")
    stop("the sync round-trip child wrote no result:\n",
         paste(utils::tail(if (file.exists(log)) readLines(log, warn = FALSE) else "", 20), collapse = "\n"))
  }
  proc$wait(10000)
  out <- readRDS(done)
  setup <- c("SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "AUTH", "SELECT", "SCRIPT", "HELLO", "CLIENT", "ROLE",
             "SENTINEL")
  rt <- out$round_trips
  rt <- rt[!toupper(rt$name) %in% setup & rt$start >= out$t0 & rt$start <= out$t1, , drop = FALSE]
  out$per_store <- lapply(stats::setNames(names(out$tids), names(out$tids)), function(store) {
    r <- rt[rt$tid %in% out$tids[[store]], , drop = FALSE]
    list(all = r, evalsha = r[toupper(r$name) == "EVALSHA", , drop = FALSE],
         ping = r[toupper(r$name) == "PING", , drop = FALSE])
  })
  out
}

main <- function() {
  dir <- tempfile("cb-bench-redis-tls-")
  dir.create(dir, mode = "0700")
  servers <- list()
  on.exit({
    for (s in servers) try(s$stop(), silent = TRUE)
    unlink(dir, recursive = TRUE)
  })
  for (sub in c("certs", "plain", "tls")) dir.create(file.path(dir, sub))
  certs <- redis_tls_certs(file.path(dir, "certs"))
  servers$plain <- redis_server_start(file.path(dir, "plain"))
  servers$tls <- redis_tls_server_start(file.path(dir, "tls"), certs)
  client_tls <- servers$tls$client_tls
  conn <- list(plain = circuitbreaker:::cb_redis_connect(servers$plain$url, 1),
               tls = circuitbreaker:::cb_redis_connect(servers$tls$url, 1, client_tls))
  stopifnot(identical(rcall(conn$plain, "PING"), "PONG"), identical(rcall(conn$tls, "PING"), "PONG"))
  prefix <- sprintf("cb-bench-tls-%d", Sys.getpid())
  load_before <- trimws(system2("uptime", stdout = TRUE))
  version <- sub("^.*redis_version:([^\r\n]*).*$", "\\1",
                 paste(rcall(conn$plain, c("INFO", "server")), collapse = "\n"))

  fb <- function() "fallback"
  failing <- function() stop("x")
  stores <- list(
    plain = breaker_store_redis(servers$plain$url, prefix = prefix, sync_interval = sync_interval,
                                timeout = store_timeout),
    tls = breaker_store_redis(servers$tls$url, prefix = prefix, sync_interval = sync_interval,
                              timeout = store_timeout, tls = list(ca_file = certs$ca))
  )
  closed <- list(process = circuit_breaker(name = "closed-process"),
                 control = circuit_breaker(name = "closed-process-control"))
  open <- list(process = circuit_breaker(name = "open-process", recovery_timeout = 1e6),
               control = circuit_breaker(name = "open-process-control", recovery_timeout = 1e6))
  sync_tids <- list()
  for (kind in c("plain", "tls")) {
    before <- threads()
    closed[[kind]] <- circuit_breaker(name = paste0("closed-", kind), store = stores[[kind]])
    sync_tids[[kind]] <- setdiff(threads(), before)
    open[[kind]] <- circuit_breaker(name = paste0("open-", kind), store = stores[[kind]], recovery_timeout = 1e6)
  }
  stopifnot(lengths(sync_tids) == 1L)
  for (cb in open) for (i in 1:5) cb$execute(failing, fb)
  stopifnot(all(vapply(open, function(cb) cb$state == "OPEN", TRUE)))
  open_key <- lapply(open[c("plain", "tls")], function(cb) fleet_info(cb)$key)
  for (kind in c("plain", "tls")) {
    fleet_open <- function() identical(rcall(conn[[kind]], c("EVAL", read_script, "1", open_key[[kind]], "s")), "1")
    if (!wait_until(fleet_open, 2)) stop("the ", kind, " fleet did not open ", open_key[[kind]], " within 2 s")
  }
  Sys.sleep(0.5)
  for (i in 1:2000) {  # warm-up: byte-compiling, method caches
    for (cb in closed) cb$execute(function() "ok")
    for (cb in open) cb$execute(function() stop("x"), function() "fallback")
  }
  stopifnot(vapply(closed, function(cb) identical(cb$execute(function() "ok"), "ok"), TRUE),
            vapply(open, function(cb) identical(cb$execute(function() stop("x"), function() "fallback"), "fallback"),
                   TRUE),
            identical(closed$plain$metrics()$mode, "fleet"), identical(closed$tls$metrics()$mode, "fleet"))
  tls_version <- vapply(closed[c("plain", "tls")], function(cb) as.character(cb$metrics()$tls), "")

  # The round trips' script.
  sha <- lapply(conn, function(cn) rcall(cn, c("SCRIPT", "LOAD", read_script)))
  stopifnot(identical(sha$plain, sha$tls),
            identical(rcall(conn$plain, c("EVALSHA", sha$plain, "1", open_key$plain, "s")), "1"),
            identical(rcall(conn$tls, c("EVALSHA", sha$tls, "1", open_key$tls, "s")), "1"))
  for (i in 1:200) for (cn in conn) rcall(cn, "PING")

  exprs <- list(
    cp = quote(closed$process$execute(function() "ok")),
    cq = quote(closed$control$execute(function() "ok")),
    cr = quote(closed$plain$execute(function() "ok")),
    ct = quote(closed$tls$execute(function() "ok")),
    op = quote(open$process$execute(function() stop("x"), function() "fallback")),
    oq = quote(open$control$execute(function() stop("x"), function() "fallback")),
    or = quote(open$plain$execute(function() stop("x"), function() "fallback")),
    ot = quote(open$tls$execute(function() stop("x"), function() "fallback"))
  )
  # Local copies for the round trips' expressions (bench::mark evaluates in
  # this frame; the linter does not look inside quote()).
  # nolint start: object_usage_linter.
  conn_plain <- conn$plain
  conn_tls <- conn$tls
  evalsha_plain <- c("EVALSHA", sha$plain, "1", open_key$plain, "s")
  evalsha_tls <- c("EVALSHA", sha$tls, "1", open_key$tls, "s")
  rt_exprs <- list(
    ping_plain = quote(redis_call(conn_plain, "PING")),
    ping_tls = quote(redis_call(conn_tls, "PING")),
    eval_plain = quote(redis_call(conn_plain, evalsha_plain)),
    eval_tls = quote(redis_call(conn_tls, evalsha_tls))
  )
  url_plain <- servers$plain$url
  url_tls <- servers$tls$url
  # nolint end
  connect_exprs <- list(
    connect_plain = quote(redis_call(circuitbreaker:::cb_redis_connect(url_plain, 1), "PING")),
    connect_tls = quote(redis_call(circuitbreaker:::cb_redis_connect(url_tls, 1, client_tls), "PING"))
  )
  for (i in 1:20) for (e in connect_exprs) eval(e)
  invisible(gc())
  micro <- matrix(NA_real_, length(exprs), runs, dimnames = list(names(exprs), NULL))
  rt_names <- c(names(rt_exprs), names(connect_exprs))
  rt_median <- matrix(NA_real_, length(rt_names), runs, dimnames = list(rt_names, NULL))
  rt_p99 <- rt_median
  rt_all <- stats::setNames(vector("list", length(rt_names)), rt_names)
  cpu <- c(wall = 0, main = 0, sync_plain = 0, sync_tls = 0, redis_plain = 0, redis_tls = 0, machine = 0)
  cpu_now <- function() {
    c(wall = unclass(Sys.time()), main = thread_cpu(Sys.getpid()), sync_plain = thread_cpu(sync_tids$plain),
      sync_tls = thread_cpu(sync_tids$tls), redis_plain = process_cpu(servers$plain$pid),
      redis_tls = process_cpu(servers$tls$pid), machine = busy_cpu_seconds())
  }
  syncs0 <- vapply(closed[c("plain", "tls")], function(cb) fleet_info(cb)$syncs, 0)
  failures0 <- vapply(closed[c("plain", "tls")], function(cb) fleet_info(cb)$sync_failures, 0)
  local_runs <- c(plain = 0, tls = 0)
  t_start <- Sys.time()
  for (run in seq_len(runs)) {
    forward <- run %% 2 == 1
    measure_rt <- function() {
      order <- if (forward) names(rt_exprs) else c("ping_tls", "ping_plain", "eval_tls", "eval_plain")
      results <- bench::mark(exprs = rt_exprs[order], iterations = rt_iterations, check = FALSE, filter_gc = TRUE)
      keep <- function(results, order) {
        for (i in seq_along(order)) {
          t <- no_gc_times(results, i)
          rt_median[order[[i]], run] <<- stats::median(t)
          rt_p99[order[[i]], run] <<- q(t, 0.99)
          rt_all[[order[[i]]]] <<- c(rt_all[[order[[i]]]], t)
        }
      }
      keep(results, order)
      order <- if (forward) names(connect_exprs) else rev(names(connect_exprs))
      results <- bench::mark(exprs = connect_exprs[order], iterations = connect_iterations, check = FALSE,
                             filter_gc = TRUE)
      keep(results, order)
      invisible(gc())  # the connections made are closed
    }
    if (!forward) measure_rt()
    order <- if (forward) names(exprs) else c("ct", "cr", "cq", "cp", "ot", "or", "oq", "op")
    t0 <- cpu_now()
    results <- bench::mark(exprs = exprs[order], iterations = iterations, check = FALSE, filter_gc = TRUE)
    cpu <- cpu + (cpu_now() - t0)
    micro[, run] <- stats::setNames(as.numeric(results$median) * 1e9, order)[rownames(micro)]
    for (kind in c("plain", "tls")) {
      if (!identical(closed[[kind]]$metrics()$mode, "fleet")) local_runs[[kind]] <- local_runs[[kind]] + 1
    }
    if (forward) measure_rt()
    message(sprintf("run %d of %d done (%s first)", run, runs, if (forward) "in-process" else "TLS"))
  }
  bench_seconds <- as.numeric(difftime(Sys.time(), t_start, units = "secs"))
  syncs <- vapply(closed[c("plain", "tls")], function(cb) fleet_info(cb)$syncs, 0) - syncs0
  sync_failures <- vapply(closed[c("plain", "tls")], function(cb) fleet_info(cb)$sync_failures, 0) - failures0

  # The fleets' totals against the local copies' (after the last sync).
  exact <- vapply(c(plain = "plain", tls = "tls"), function(kind) {
    fleet_counts <- function() {
      c(closed = as.numeric(rcall(conn[[kind]], c("EVAL", read_script, "1", fleet_info(closed[[kind]])$key, "tc"))),
        open = as.numeric(rcall(conn[[kind]], c("EVAL", read_script, "1", open_key[[kind]], "tr"))))
    }
    local_counts <- function() c(closed = closed[[kind]]$metrics()$calls, open = open[[kind]]$metrics()$rejected)
    wait_until(function() identical(fleet_counts(), local_counts()), 3)
  }, TRUE)

  # Part 3, with this process's breakers still there but idle.
  sync <- if (sync_seconds > 0) {
    message(sprintf("sync round trips: a child process for %g s", sync_seconds))
    measure_sync_round_trips(dir, urls = c(plain = servers$plain$url, tls = servers$tls$url),
                             tls = list(ca_file = certs$ca))
  }
  load_after <- trimws(system2("uptime", stdout = TRUE))

  # Report ---------------------------------------------------------------------
  run_cols <- paste("run", seq_len(runs))
  labels <- c(cp = "CLOSED, in-process: cb$execute(function() \"ok\")",
              cq = "CLOSED, in-process, a second breaker (control)",
              cr = "CLOSED, plain fleet store (redis://)",
              ct = "CLOSED, TLS fleet store (rediss://)",
              op = "OPEN, in-process: cb$execute(function() stop(\"x\"), function() \"fallback\")",
              oq = "OPEN, in-process, a second breaker (control)",
              or = "OPEN, plain fleet store (redis://)",
              ot = "OPEN, TLS fleet store (rediss://)")
  m <- micro
  ratios <- list(
    c("CLOSED: TLS / plain", "ct", "cr", 1.05), c("CLOSED: TLS / in-process", "ct", "cp", 1.2),
    c("CLOSED: plain / in-process", "cr", "cp", 1.2), c("control, CLOSED: second in-process / first", "cq", "cp", NA),
    c("OPEN: TLS / plain", "ot", "or", 1.05), c("OPEN: TLS / in-process", "ot", "op", 1.2),
    c("OPEN: plain / in-process", "or", "op", 1.2), c("control, OPEN: second in-process / first", "oq", "op", NA)
  )
  ratio_values <- lapply(ratios, function(r) m[r[[2]], ] / m[r[[3]], ])
  wall <- cpu[["wall"]]
  others <- max(0, cpu[["machine"]] - cpu[["main"]] - cpu[["sync_plain"]] - cpu[["sync_tls"]] -
                  cpu[["redis_plain"]] - cpu[["redis_tls"]]) / wall
  rt_row <- function(label, k) {
    sprintf("| %s | %s (%s) | %s (%s) | %s | %s |", label, fmt(median(rt_median[k, ])), fmt_range(rt_median[k, ], fmt),
            fmt(median(rt_p99[k, ])), fmt_range(rt_p99[k, ], fmt), fmt(q(rt_all[[k]], 0.99)),
            fmt_n(length(rt_all[[k]])))
  }
  rt_ratio_row <- function(label, a, b) {
    med <- rt_median[a, ] / rt_median[b, ]
    p99 <- rt_p99[a, ] / rt_p99[b, ]
    sprintf("| %s | **%s** (%s) | **%s** (%s) | %s |", label, fmt_x(median(med)), fmt_range(med, fmt_x),
            fmt_x(median(p99)), fmt_range(p99, fmt_x), fmt_x(q(rt_all[[a]], 0.99) / q(rt_all[[b]], 0.99)))
  }
  ms <- function(x) if (is.finite(x)) sprintf("%.2f ms", 1000 * x) else "-"
  sync_rows <- if (is.null(sync)) {
    "(part 3 skipped: CB_BENCH_SYNC_SECONDS=0)\n"
  } else if (!is.null(sync$skipped)) {
    paste0("(part 3 not measured: ", sync$skipped, ")\n")
  } else {
    rows <- vapply(c("plain_busy", "tls_busy", "plain_idle", "tls_idle"), function(s) {
      p <- sync$per_store[[s]]
      kind <- if (startsWith(s, "plain")) "plain" else "TLS"
      busy <- endsWith(s, "busy")
      r <- if (busy) p$evalsha else p$ping
      sprintf("| %s, %s (%s) | %s | %s | %s / %s / %s | %s of %s | %s | %.1f |", kind,
              if (busy) sprintf("busy: %d breakers called every 20 ms", sync$breakers) else
                "idle: one breaker, never called",
              sync$tls_versions[[s]], if (busy) "EVALSHA" else "PING", fmt_n(nrow(r)),
              ms(q(r$seconds, 0.5)), ms(q(r$seconds, 0.99)), ms(max(r$seconds, -Inf)),
              fmt_n(sum(p$all$ok == 0)), fmt_n(nrow(p$all)), fmt_n(sync$failures[[s]]),
              nrow(p$all) / (sync$t1 - sync$t0))
    }, "")
    ratio <- function(a, b, sel, p) {
      x <- sync$per_store[[a]][[sel]]$seconds
      y <- sync$per_store[[b]][[sel]]$seconds
      q(x, p) / q(y, p)
    }
    paste0(
      sprintf(paste0("Stores' sync round trips over %.1f s in one child process (round-trips.c preloaded; ",
                     "R thread's calls: %s):\n\n"),
              sync$t1 - sync$t0, fmt_n(sync$calls)),
      "| store | sync's command | syncs timed | round trip p50 / p99 / max | failed of all round trips ",
      "| sync failures (link) | round trips/s |\n",
      "|---|---|---|---|---|---|---|\n", paste0(rows, "\n", collapse = ""),
      sprintf("\nTLS / plain, busy (EVALSHA): p50 %s, p99 %s; idle (PING): p50 %s, p99 %s\n",
              fmt_x(ratio("tls_busy", "plain_busy", "evalsha", 0.5)),
              fmt_x(ratio("tls_busy", "plain_busy", "evalsha", 0.99)),
              fmt_x(ratio("tls_idle", "plain_idle", "ping", 0.5)),
              fmt_x(ratio("tls_idle", "plain_idle", "ping", 0.99))),
      sprintf(paste0("Child's CPU over the window: R thread %.3f, sync threads plain busy %.4f, TLS busy %.4f, ",
                     "plain idle %.4f, TLS idle %.4f cores\n"),
              sync$cpu[["main"]], sync$cpu[["plain_busy"]], sync$cpu[["tls_busy"]], sync$cpu[["plain_idle"]],
              sync$cpu[["tls_idle"]])
    )
  }
  cat(
    sprintf(paste("R %s, circuitbreaker %s, bench %s, processx %s, redis-server %s (two: plain and TLS-only);",
                  "%d iterations per execute() expression, %d per round trip, %d per new connection, %d runs; %s\n"),
            getRversion(), packageVersion("circuitbreaker"), packageVersion("bench"), packageVersion("processx"),
            version, iterations, rt_iterations, connect_iterations, runs,
            format(Sys.time(), "%Y-%m-%d %H:%M UTC", tz = "UTC")),
    sprintf("%d cores; stores sync_interval = %g s, timeout = %g s; links: plain %s, TLS %s\n",
            parallel::detectCores(), sync_interval, store_timeout, tls_version[["plain"]], tls_version[["tls"]]),
    "Load before: ", load_before, "\nLoad after:  ", load_after, "\n\n",
    "execute() medians (bench::mark), odd runs in-process first, even runs TLS first:\n\n",
    "| expression | ", paste(run_cols, collapse = " | "), " | median | range |\n",
    "|---|", strrep("---|", runs + 2), "\n",
    paste0(vapply(rownames(m), function(k) time_row(labels[[k]], m[k, ]), ""), "\n"),
    "\n| ratio | ", paste(run_cols, collapse = " | "), " | median | range | target | |\n",
    "|---|", strrep("---|", runs + 4), "\n",
    paste0(vapply(seq_along(ratios),
                  function(i) ratio_row(ratios[[i]][[1]], ratio_values[[i]], as.numeric(ratios[[i]][[4]])), ""),
           "\n"),
    "\nOne round trip on the package's test connection (bench::mark `time`, GC iterations left out):\n\n",
    "| round trip | median of the runs' medians (range) | median of the runs' p99 (range) | p99 of every iteration ",
    "| iterations |\n",
    "|---|---|---|---|---|\n",
    rt_row("PING, plain", "ping_plain"), "\n", rt_row("PING, TLS", "ping_tls"), "\n",
    rt_row("EVALSHA (read script), plain", "eval_plain"), "\n", rt_row("EVALSHA (read script), TLS", "eval_tls"), "\n",
    rt_row("a new connection and a PING, plain", "connect_plain"), "\n",
    rt_row("a new connection (TLS handshake, verified) and a PING, TLS", "connect_tls"), "\n",
    "\n| TLS / plain | median (range of runs) | p99 (range of runs) | p99 of every iteration |\n|---|---|---|---|\n",
    rt_ratio_row("PING", "ping_tls", "ping_plain"), "\n", rt_ratio_row("EVALSHA", "eval_tls", "eval_plain"), "\n",
    rt_ratio_row("a new connection and a PING", "connect_tls", "connect_plain"), "\n",
    sprintf(paste("\nThe machine during the execute() runs (%.1f s of %.1f s; CPU seconds per second):",
                  "R main thread %.2f, sync thread plain %.4f, TLS %.4f; redis-server plain %.4f, TLS %.4f;",
                  "other processes %.2f\n"),
            wall, bench_seconds, cpu[["main"]] / wall, cpu[["sync_plain"]] / wall, cpu[["sync_tls"]] / wall,
            cpu[["redis_plain"]] / wall, cpu[["redis_tls"]] / wall, others),
    sprintf(paste0("Syncs during the runs: plain %s (%s failed), TLS %s (%s failed); ",
                   "runs ending in mode \"local\": plain %d, TLS %d of %d\n"),
            fmt_n(syncs[["plain"]]), fmt_n(sync_failures[["plain"]]), fmt_n(syncs[["tls"]]),
            fmt_n(sync_failures[["tls"]]), local_runs[["plain"]], local_runs[["tls"]], runs),
    sprintf("Fleet totals equal to the local counts: plain %s, TLS %s\n\n",
            if (exact[["plain"]]) "yes" else "NO", if (exact[["tls"]]) "yes" else "NO"),
    sync_rows,
    sep = ""
  )
  invisible(list(micro = micro, rt_median = rt_median, rt_p99 = rt_p99, sync = sync))
}

main()
