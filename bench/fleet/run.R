# Fleet-shared breakers (breaker_store_redis()) on simulated hosts: how fast
# a trip spreads, and how many calls a fleet sends a dead downstream.
#
#   Rscript bench/fleet/run.R [options]
#
# Options (each also read from an environment variable, the command line
# winning; --name value or --name=value):
#   --trips N                FLEET_TRIPS              trips measured for propagation, 5 to 500
#                                                     (default 50)
#   --repeats N              FLEET_REPEATS            runs per configuration of the wasted-calls
#                                                     part, 1 to 50 (default 5)
#   --sync-interval S        FLEET_SYNC_INTERVAL      the store's sync_interval, 0.02 to 1
#                                                     (default 0.1)
#   --period S               FLEET_PERIOD             seconds between two calls of one process to
#                                                     the dead downstream, 0.001 to 0.1 (default 0.005)
#   --local                  FLEET_LOCAL=true         processes on 127.0.0.1 even as root
#   --help                   this text
#
# Where it runs: as root with iproute2, three network namespaces (made and
# deleted by this script, named cbbench<pid>-*): one runs redis-server on a
# bridge (10.213.0.1:6379, a subnet that exists only inside these
# namespaces), and two stand for hosts a (10.213.0.11) and b (10.213.0.12),
# each linked to the bridge by a veth pair. The R processes run inside the
# host namespaces (`ip netns exec`), so every sync crosses a network stack
# and a bridge, as between machines (without the wire: the round trip is
# tens of microseconds). Without root (or with --local) everything runs on
# 127.0.0.1, with redis-server on a free port, and the output says so; the
# "hosts" are then labels.
#
# 1. Propagation. Four processes, two per host, share breaker "prop"
#    (failure_threshold 5, recovery_timeout 30). For each trip one process
#    (in turn) fails until its breaker opens; the other three call every
#    millisecond until a call is rejected. Reported: the time from the
#    tripping process's opening to each other process's first rejection
#    (per process, and the slowest of the three: "every other process
#    rejects"), p50/p90/p99/max, against the budget sync_interval + 2 round
#    trips (PING, timed from every process). Then the tripper resets the
#    breaker and every process waits until its copy is CLOSED.
#
# 2. Wasted calls. Eight processes, four per host, call a dead downstream (a
#    function that fails) once every --period seconds, from a shared start
#    time, for about a second. Counted: the calls that reached the
#    downstream (no call does once a process's breaker is open, and no
#    probe goes out within a run), with one fleet breaker (the Redis store)
#    and with a breaker per process (store NULL), for failure_threshold 5
#    and 20. Budgets: fleet failure_threshold + 8 * sync_interval / period
#    (the calls of one sync interval); per process exactly 8 *
#    failure_threshold.
#
# About 2 minutes with the defaults. It needs circuitbreaker installed with
# hiredis, redis-server, redis-cli and processx. Times across processes are
# differences of Sys.time() (CLOCK_REALTIME: one clock for every namespace
# of the machine). Exit status: 0 when the run completed (whether or not a
# budget was met), 2 for a bad option, 1 for any other error. Every process,
# namespace, link and file it made is removed on the way out, also on an
# error or an interrupt.

spec <- list(
  trips = list(env = "FLEET_TRIPS", flag = FALSE, min = 5, max = 500, whole = TRUE),
  repeats = list(env = "FLEET_REPEATS", flag = FALSE, min = 1, max = 50, whole = TRUE),
  "sync-interval" = list(env = "FLEET_SYNC_INTERVAL", flag = FALSE, min = 0.02, max = 1, whole = FALSE),
  period = list(env = "FLEET_PERIOD", flag = FALSE, min = 0.001, max = 0.1, whole = FALSE),
  local = list(env = "FLEET_LOCAL", flag = TRUE),
  help = list(env = NA_character_, flag = TRUE)
)
defaults <- list(trips = 50, repeats = 5, "sync-interval" = 0.1, period = 0.005)

# This script's path (Rscript passes it as --file=), to find bench/harness/.
this_file <- gsub("~+~", " ", sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1]), fixed = TRUE)
# usage(), bad_option(), parse_options(), as_flag(), as_bounded_number();
# new_stoppers(); now(); redis_server_start():
for (file in c("options.R", "processes.R", "clock.R", "redis.R")) {
  source(file.path(dirname(this_file), "..", "harness", file))
}
home <- normalizePath(dirname(this_file), mustWork = TRUE)

# ---------------------------------------------------------------------------
# Processes, namespaces and the Redis server

sh <- function(command, args, must = TRUE) {
  res <- processx::run(command, args, error_on_status = FALSE, timeout = 10)
  if (must && res$status != 0) {
    stop("`", command, " ", paste(args, collapse = " "), "` failed: ", res$stdout, res$stderr)
  }
  res$status == 0
}

can_use_netns <- function() {
  if (!identical(Sys.info()[["sysname"]], "Linux") || !identical(Sys.info()[["effective_user"]], "root") ||
      !nzchar(Sys.which("ip"))) {
    return(FALSE)
  }
  ns <- sprintf("cbbenchprobe%d", Sys.getpid())
  if (!sh("ip", c("netns", "add", ns), must = FALSE)) return(FALSE)
  sh("ip", c("netns", "del", ns), must = FALSE)
  TRUE
}

# The namespaces of the top of this file. Returns how to reach Redis and how
# to start a process on a host.
setup_netns <- function(dir, cleanup) {
  id <- sprintf("cbbench%d", Sys.getpid())
  made <- character()
  links <- list()
  # Registered first, so run last: after every process is gone.
  cleanup$add(function() {
    for (ns in made) {
      pids <- suppressWarnings(as.integer(strsplit(trimws(
        processx::run("ip", c("netns", "pids", ns), error_on_status = FALSE, timeout = 5)$stdout), "\\s+")[[1]]))
      for (pid in pids[!is.na(pids)]) try(tools::pskill(pid, tools::SIGKILL), silent = TRUE)
    }
    for (l in links) sh("ip", c("-n", l$ns, "link", "del", "dev", l$dev), must = FALSE)
    for (ns in rev(made)) sh("ip", c("netns", "del", ns), must = FALSE)
  })
  new_ns <- function(name) {
    sh("ip", c("netns", "add", name))
    made <<- c(made, name)
    sh("ip", c("-n", name, "link", "set", "lo", "up"))
    name
  }
  ns <- c(redis = new_ns(paste0(id, "-redis")))
  sh("ip", c("-n", ns[["redis"]], "link", "add", "br0", "type", "bridge"))
  sh("ip", c("-n", ns[["redis"]], "addr", "add", "10.213.0.1/24", "dev", "br0"))
  sh("ip", c("-n", ns[["redis"]], "link", "set", "br0", "up"))
  for (i in 1:2) {
    h <- c("a", "b")[[i]]
    ns[[h]] <- new_ns(paste0(id, "-", h))
    dev <- sprintf("h%d%s", Sys.getpid(), h)
    port <- sprintf("p%d%s", Sys.getpid(), h)
    sh("ip", c("link", "add", "name", dev, "netns", ns[[h]], "type", "veth", "peer", "name", port,
               "netns", ns[["redis"]]))
    links[[length(links) + 1L]] <- list(ns = ns[[h]], dev = dev)
    sh("ip", c("-n", ns[["redis"]], "link", "set", port, "master", "br0"))
    sh("ip", c("-n", ns[["redis"]], "link", "set", port, "up"))
    sh("ip", c("-n", ns[[h]], "addr", "add", sprintf("10.213.0.%d/24", 10L + i), "dev", dev))
    sh("ip", c("-n", ns[[h]], "link", "set", dev, "up"))
  }
  spawn <- function(where, command, args, log) {
    p <- processx::process$new("ip", c("netns", "exec", ns[[where]], command, args),
                               env = c("current", R_LIBS = paste(.libPaths(), collapse = .Platform$path.sep)),
                               stdout = log, stderr = "2>&1", cleanup = TRUE)
    cleanup$add(function() if (p$is_alive()) p$kill())
    p
  }
  # This process cannot reach the bridge: a command to Redis runs redis-cli
  # inside the namespace.
  redis_call <- function(url, command) {
    res <- processx::run("ip", c("netns", "exec", ns[["redis"]], "redis-cli", "-h", "10.213.0.1", "-p", "6379",
                                 command), error_on_status = FALSE, timeout = 5)
    if (res$status != 0) stop("redis-cli: ", res$stderr)
    trimws(res$stdout)
  }
  list(kind = "netns", host = "10.213.0.1", port = 6379L, spawn = spawn,
       redis_wrap = c("ip", "netns", "exec", ns[["redis"]]), redis_call = redis_call,
       where = "network namespaces: Redis on a bridge, hosts a and b on veth links")
}

setup_local <- function(dir, cleanup) {
  spawn <- function(where, command, args, log) {
    p <- processx::process$new(command, args, stdout = log, stderr = "2>&1", cleanup = TRUE,
                               env = c("current", R_LIBS = paste(.libPaths(), collapse = .Platform$path.sep)))
    cleanup$add(function() if (p$is_alive()) p$kill())
    p
  }
  # Redis on a free port, reached with the package's client.
  list(kind = "local", host = "127.0.0.1", port = NULL, spawn = spawn, redis_wrap = character(), redis_call = NULL,
       where = "127.0.0.1 (no network namespaces: not root, or --local); hosts a and b are labels")
}

# The Redis server, as the tests start theirs (redis_server_start()); stopped
# by `cleanup`. Returns its URL.
start_redis <- function(net, dir, cleanup) {
  server <- redis_server_start(dir, port = net$port, host = net$host, args = c("--protected-mode", "no"),
                               wrap = net$redis_wrap, call = net$redis_call)
  cleanup$add(server$stop)
  server$url
}

# ---------------------------------------------------------------------------
# Workers (worker.R) and their jobs

start_workers <- function(net, url, hosts, dir, sync_interval, prefix) {
  workers <- lapply(seq_along(hosts), function(i) {
    w <- new.env(parent = emptyenv())
    w$host <- hosts[[i]]
    w$id <- i
    w$dir <- file.path(dir, sprintf("worker-%d", i))
    w$n <- 0L
    dir.create(w$dir)
    saveRDS(list(url = url, prefix = prefix, sync_interval = sync_interval, timeout = 0.1, lifetime = 900),
            file.path(w$dir, "config.rds"))
    w$proc <- net$spawn(w$host, file.path(R.home("bin"), "Rscript"),
                        c("--vanilla", file.path(home, "worker.R"), w$dir), file.path(w$dir, "log"))
    w
  })
  for (w in workers) wait_file(w, "ready", 60)
  workers
}

wait_file <- function(w, name, timeout) {
  path <- file.path(w$dir, name)
  deadline <- now() + timeout
  for (i in seq_len(timeout * 500)) {
    if (file.exists(path) || now() > deadline || !w$proc$is_alive()) break
    Sys.sleep(0.002)
  }
  if (!file.exists(path)) {
    log <- if (file.exists(file.path(w$dir, "log"))) readLines(file.path(w$dir, "log")) else ""
    stop("worker ", w$id, " (host ", w$host, ") ", if (w$proc$is_alive()) "did not write " else "died before ",
         name, ":\n", paste(utils::tail(log, 20), collapse = "\n"))
  }
  path
}

# Sends a job; returns its number once the worker has started it.
send <- function(w, job, args = list()) {
  w$n <- w$n + 1L
  tmp <- file.path(w$dir, "job.tmp")
  saveRDS(list(job = job, args = args), tmp)
  file.rename(tmp, file.path(w$dir, sprintf("job-%d.rds", w$n)))
  wait_file(w, sprintf("started-%d", w$n), 30)
  w$n
}

result <- function(w, n, timeout = 30) {
  res <- readRDS(wait_file(w, sprintf("out-%d.rds", n), timeout))
  if (!res$ok) stop("job ", n, " of worker ", w$id, " failed: ", res$error)
  res$value
}

run_job <- function(w, job, args = list(), timeout = 30) result(w, send(w, job, args), timeout)

# ---------------------------------------------------------------------------
# The measurements

q <- function(x, p) unname(stats::quantile(x, p, type = 7, na.rm = TRUE))
ms <- function(x) sprintf("%.1f", 1000 * x)

measure_rtt <- function(workers) {
  took <- lapply(workers, function(w) run_job(w, "ping", list(n = 300))[-(1:20)])
  hosts <- vapply(workers, function(w) w$host, "")
  lapply(split(took, hosts), unlist)
}

measure_propagation <- function(workers, trips, sync_interval, say) {
  name <- "prop"
  for (w in workers) run_job(w, "prepare", list(name = name, shared = TRUE, failure_threshold = 5))
  rows <- list()
  for (i in seq_len(trips)) {
    tripper <- workers[[(i - 1L) %% length(workers) + 1L]]
    others <- Filter(function(w) !identical(w$id, tripper$id), workers)
    jobs <- vapply(others, function(w) send(w, "wait_reject", list(name = name, seconds = 5, gap = 0.001)), 1L)
    # At a random moment of the tripper's sync period: its sync thread
    # ticks on its own schedule, which the reset of the previous trip moved.
    tr <- run_job(tripper, "trip", list(name = name, delay = stats::runif(1, 0, sync_interval)))
    seen <- vapply(seq_along(others), function(k) result(others[[k]], jobs[[k]], 10), 1)
    for (k in seq_along(others)) {
      rows[[length(rows) + 1L]] <- data.frame(
        trip = i, tripper = tripper$id, observer = others[[k]]$id,
        same_host = identical(others[[k]]$host, tripper$host), latency = seen[[k]] - tr$at
      )
    }
    run_job(tripper, "reset", list(name = name))
    closed <- vapply(workers, function(w) send(w, "wait_closed", list(name = name, seconds = 10)), 1L)
    ok <- vapply(seq_along(workers), function(k) isTRUE(result(workers[[k]], closed[[k]], 15)), TRUE)
    if (!all(ok)) stop("after trip ", i, ", the reset did not reach every process within 10 s")
    if (i %% 10L == 0L) say(sprintf("  %d trips\n", i))
  }
  do.call(rbind, rows)
}

measure_waste <- function(workers, kind, failure_threshold, period, sync_interval, rep) {
  name <- sprintf("dead-%s-%d-%d", kind, failure_threshold, rep)
  shared <- identical(kind, "redis")
  for (w in workers) run_job(w, "prepare", list(name = name, shared = shared, failure_threshold = failure_threshold))
  start <- now() + 0.5
  jobs <- vapply(workers, function(w) {
    send(w, "dead_loop", list(name = name, shared = shared, failure_threshold = failure_threshold,
                              start = start, period = period, seconds = 1))
  }, 1L)
  res <- lapply(seq_along(workers), function(k) result(workers[[k]], jobs[[k]], 20))
  hits <- vapply(res, function(r) r$hits, 1L)
  opened <- vapply(res, function(r) r$first_reject, 1)
  hosts <- vapply(workers, function(w) w$host, "")
  # How far apart the processes' sync schedules are: the phases (last sync
  # modulo the interval) on a circle, and the smallest arc holding them all.
  synced <- vapply(res, function(r) r$synced, 1)
  spread <- NA_real_
  if (!anyNA(synced)) {
    phases <- sort((synced - start) %% sync_interval)
    spread <- sync_interval - max(diff(c(phases, phases[[1]] + sync_interval)))
  }
  data.frame(kind = kind, failure_threshold = failure_threshold, rep = rep, hits = sum(hits),
             hits_a = sum(hits[hosts == "a"]), hits_b = sum(hits[hosts == "b"]),
             told = sum(hits < failure_threshold), spread = spread,
             all_open = max(opened) - start, last_hit = max(vapply(res, function(r) r$last_hit, 1)) - start,
             all_open_state = all(vapply(res, function(r) identical(r$state, "OPEN"), TRUE)))
}

# ---------------------------------------------------------------------------
# The report

report <- function(where, rtt, prop, waste, opts) {
  si <- opts$sync_interval
  cat("\n## Round trip to Redis (PING, 280 per process after 20 unmeasured)\n\n")
  cat("| host | p50 | p99 | max |\n|---|---|---|---|\n")
  us <- function(x) sprintf("%.0f us", 1e6 * x)
  for (h in names(rtt)) {
    cat(sprintf("| %s | %s | %s | %s |\n", h, us(q(rtt[[h]], 0.5)), us(q(rtt[[h]], 0.99)), us(max(rtt[[h]]))))
  }
  rtt50 <- max(vapply(rtt, function(x) q(x, 0.5), 1))
  budget <- si + 2 * rtt50
  cat(sprintf("\n## 1. Propagation: %d trips, 4 processes (2 per host), sync_interval %s s\n\n",
              length(unique(prop$trip)), format(si)))
  cat(sprintf("Budget: sync_interval + 2 round trips (p50 of the slower host) = %s ms\n\n", ms(budget)))
  cat("| measured from the tripping process's opening | n | p50 | p90 | p99 | max | within budget |\n")
  cat("|---|---|---|---|---|---|---|\n")
  line <- function(label, x) {
    cat(sprintf("| %s | %d | %s ms | %s ms | %s ms | %s ms | %d of %d |\n", label, length(x), ms(q(x, 0.5)),
                ms(q(x, 0.9)), ms(q(x, 0.99)), ms(max(x)), sum(x <= budget), length(x)))
  }
  line("to a process on the same host", prop$latency[prop$same_host])
  line("to a process on the other host", prop$latency[!prop$same_host])
  line("until every other process rejects (per trip)", tapply(prop$latency, prop$trip, max))
  cat("\n## 2. Wasted calls: 8 processes (4 per host), one call every ", format(opts$period),
      " s each, dead downstream\n\n", sep = "")
  cat("| breaker | failure_threshold | budget | calls reaching the downstream, per run | host a + host b |",
      "processes opened before their own threshold | every breaker open after | sync phases within |\n")
  cat("|---|---|---|---|---|---|---|---|\n")
  for (ft in unique(waste$failure_threshold)) {
    for (kind in c("per-process", "redis")) {
      w <- waste[waste$kind == kind & waste$failure_threshold == ft, ]
      budget <- if (kind == "redis") ft + 8 * si / opts$period else 8 * ft
      label <- if (kind == "redis") "fleet (Redis store)" else "per process (store NULL)"
      cat(sprintf("| %s | %d | %s %s | %s | %s | %s | %s ms | %s |\n", label, ft,
                  if (kind == "redis") "at most" else "exactly", format(budget), paste(w$hits, collapse = ", "),
                  paste(w$hits_a, "+", w$hits_b, collapse = ", "), paste(w$told, collapse = ", "),
                  paste(ms(w$all_open), collapse = ", "),
                  if (kind == "redis") paste(ms(w$spread), "ms", collapse = ", ") else "-"))
    }
  }
  if (!all(waste$all_open_state)) cat("\nNot every breaker was OPEN at the end of some run.\n")
  cat("\nRan on ", where, ".\n", sep = "")
}

# ---------------------------------------------------------------------------

values <- parse_options(commandArgs(TRUE), spec)
if (as_flag(values$help, "help")) usage(0, this_file)
opts <- list(local = as_flag(values$local, "local"))
for (name in names(defaults)) {
  value <- if (is.null(values[[name]])) defaults[[name]] else as_bounded_number(values[[name]], name, spec)
  opts[[gsub("-", "_", name, fixed = TRUE)]] <- value
}

needed <- c("circuitbreaker", "processx")
missing <- needed[!vapply(needed, requireNamespace, logical(1), quietly = TRUE)]
if (length(missing) || !nzchar(Sys.which("redis-server")) || !nzchar(Sys.which("redis-cli"))) {
  cat("run.R: needs the packages circuitbreaker and processx, redis-server and redis-cli\n", file = stderr())
  quit(save = "no", status = 1)
}
if (!circuitbreaker:::cb_redis_available()) {
  cat("run.R: this circuitbreaker was built without hiredis\n", file = stderr())
  quit(save = "no", status = 1)
}

say <- function(...) cat(..., sep = "")
status <- tryCatch(
  {
    cleanup <- new_stoppers()
    tryCatch(
      {
        dir <- tempfile("cb-bench-fleet-")
        dir.create(dir)
        cleanup$add(function() unlink(dir, recursive = TRUE))
        use_netns <- !opts$local && can_use_netns()
        net <- if (use_netns) setup_netns(dir, cleanup) else setup_local(dir, cleanup)
        say(sprintf("Fleet-shared breakers on %s (circuitbreaker %s, %s)\n", net$where,
                    format(utils::packageVersion("circuitbreaker")), format(Sys.time(), "%Y-%m-%d %H:%M")))
        if (!use_netns) say("NOTE: not on simulated hosts: every process is on 127.0.0.1.\n")
        url <- start_redis(net, dir, cleanup)
        t0 <- now()
        prefix <- sprintf("bench%d", Sys.getpid())
        say("Starting 8 worker processes...\n")
        workers <- start_workers(net, url, rep(c("a", "b"), each = 4), dir, opts$sync_interval, prefix)
        rtt <- measure_rtt(workers)
        # Propagation: two processes per host.
        say(sprintf("1. Propagation (%d trips)\n", opts$trips))
        prop <- measure_propagation(workers[c(1, 2, 5, 6)], opts$trips, opts$sync_interval, say)
        say("2. Wasted calls\n")
        waste <- list()
        for (ft in c(5, 20)) {
          for (rep in seq_len(opts$repeats)) {
            for (kind in c("per-process", "redis")) {
              waste[[length(waste) + 1L]] <- measure_waste(workers, kind, ft, opts$period, opts$sync_interval, rep)
            }
          }
        }
        waste <- do.call(rbind, waste)
        report(net$where, rtt, prop, waste, opts)
        say(sprintf("\nTotal %.0f s.\n", now() - t0))
      },
      finally = cleanup$stop_all()
    )
    0L
  },
  error = function(e) {
    cat("run.R: ", conditionMessage(e), "\n", file = stderr(), sep = "")
    1L
  }
)
quit(save = "no", status = status)
