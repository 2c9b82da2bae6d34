# The async plumber deficit: requests per second and server CPU
# per request of a synchronous and an asynchronous guarded endpoint whose
# breakers are open, as shares of a trivial endpoint's in the same server
# process and the same round, and an Rprof profile of the server.
#
#   Rscript bench/async-plumber.R [options]
#
# Two plumber processes on 127.0.0.1 (bench/async-plumber-api.R) serve the
# same endpoints: /trivial, /guarded ($execute()), /guarded-async
# (breaker_fetch_async(immediate_fallback = TRUE), as the avalanche's API),
# /guarded-async-promise (without immediate_fallback) and /promise (a
# resolved promise, no breaker). Every breaker is tripped (refused calls).
# The second process also has --hanging calls in flight to a socket that
# never answers (the avalanche's hanging phase: calls made before the trip
# are still outstanding while the breaker rejects the others).
#
# Each round loads every endpoint of both processes in turns of --seconds
# (--slices turns each, in rotating order), keeping --concurrency requests in
# flight (`Connection: close`, curl multi); a turn ends when its last request
# has been answered. Figures per round; median and range over the rounds.
# Server CPU is the process's utime + stime from /proc (every thread).
#
# Options (each also read from an environment variable, the command line
# winning; --name value or --name=value):
#   --seconds S        ASYNC_BENCH_SECONDS      each endpoint's turn (default 0.5)
#   --slices N         ASYNC_BENCH_SLICES       turns per endpoint in a round (default 4)
#   --rounds N         ASYNC_BENCH_ROUNDS       rounds (default 5)
#   --concurrency N    ASYNC_BENCH_CONCURRENCY  requests in flight (default 8)
#   --hanging N        ASYNC_BENCH_HANGING      calls in flight in the second
#                                               process (default 8)
#   --profile-seconds S ASYNC_BENCH_PROFILE     seconds of Rprof per profiled
#                                               endpoint, 0 for none (default 4)
#   --help             this text
#
# It needs circuitbreaker installed, and plumber, callr, curl, later and
# promises. Linux only (/proc). Exit status: 0 when the run completed, 2 for
# a bad option, 1 for any other error.

spec <- list(
  seconds = list(env = "ASYNC_BENCH_SECONDS", flag = FALSE, min = 0.1, max = 60, whole = FALSE),
  slices = list(env = "ASYNC_BENCH_SLICES", flag = FALSE, min = 1, max = 100, whole = TRUE),
  rounds = list(env = "ASYNC_BENCH_ROUNDS", flag = FALSE, min = 1, max = 50, whole = TRUE),
  concurrency = list(env = "ASYNC_BENCH_CONCURRENCY", flag = FALSE, min = 1, max = 64, whole = TRUE),
  hanging = list(env = "ASYNC_BENCH_HANGING", flag = FALSE, min = 0, max = 100, whole = TRUE),
  "profile-seconds" = list(env = "ASYNC_BENCH_PROFILE", flag = FALSE, min = 0, max = 60, whole = FALSE),
  help = list(env = NA_character_, flag = TRUE)
)
defaults <- list(seconds = 0.5, slices = 4, rounds = 5, concurrency = 8, hanging = 8, "profile-seconds" = 4)

# This script's path (Rscript passes it as --file=), to find bench/harness/.
this_file <- gsub("~+~", " ", sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1]), fixed = TRUE)
# usage(), parse_options(), as_flag(), as_bounded_number(); new_stoppers(),
# start_plumber(), start_ready(); request_handle(), get_json(); now(),
# process_cpu():
for (file in c("options.R", "processes.R", "http.R", "clock.R")) {
  source(file.path(dirname(this_file), "harness", file))
}

# nolint start: object_usage_linter.
values <- parse_options(commandArgs(TRUE), spec)
if (as_flag(values$help, "help")) usage(0, this_file)
opt <- lapply(stats::setNames(nm = setdiff(names(spec), "help")), function(name) {
  if (is.null(values[[name]])) defaults[[name]] else as_bounded_number(values[[name]], name, spec)
})
stoppers <- new_stoppers()
# nolint end

endpoints <- c("trivial", "guarded", "guarded-async", "guarded-async-promise", "promise")

# A socket that accepts connections (the kernel's backlog) and never answers.
hang_port <- httpuv::randomPort(host = "127.0.0.1")
hang_socket <- serverSocket(hang_port)
stoppers$add(function() close(hang_socket))
dead_port <- httpuv::randomPort(host = "127.0.0.1")  # nothing listens there

start_server <- function(label) {
  env <- c(ASYNC_BENCH_DEAD_URL = sprintf("http://127.0.0.1:%d/data", dead_port),
           ASYNC_BENCH_HANG_URL = sprintf("http://127.0.0.1:%d/data", hang_port),
           ASYNC_BENCH_MAX_LIFETIME = "1800")
  server <- start_ready(
    function() {
      start_plumber(file.path(dirname(this_file), "async-plumber-api.R"), env, stoppers,
                    log_prefix = paste0("async-plumber-", label, "-"), keep_log = TRUE)
    },
    "/trivial", 30,
    fail = function(s) stop("the ", label, " server did not start:\n", paste(s$errors(), collapse = "\n"))
  )
  base <- server$base
  get_json(paste0(base, "/control/trip"))
  for (i in 1:100) {
    state <- get_json(paste0(base, "/control/state"))
    if (all(c(state$guarded, state$guarded_async, state$guarded_async_promise) == "OPEN")) break
    if (i == 100L) stop("the ", label, " server's breakers did not open")
    Sys.sleep(0.05)
  }
  list(label = label, base = base, pid = server$process$get_pid(), process = server$process)
}

# `concurrency` requests in flight at `url` for `seconds`; the answers that
# arrived in that time (status 200) and the failures.
drive <- function(url, seconds, concurrency) {
  pool <- curl::new_pool(total_con = concurrency + 2L, host_con = concurrency + 2L, multiplex = FALSE)
  done <- 0L
  failed <- 0L
  open <- TRUE
  launch <- function() {
    curl::curl_fetch_multi(url, pool = pool, handle = request_handle(10),
      done = function(res) {
        if (res$status_code == 200L) done <<- done + 1L else failed <<- failed + 1L
        if (open) launch()
      },
      fail = function(msg) {
        failed <<- failed + 1L
        if (open) launch()
      })
  }
  for (k in seq_len(concurrency)) launch()
  start <- now()
  until <- start + seconds
  for (iter in seq_len(ceiling(seconds / 0.0005) + 1e6)) {
    if (now() >= until) break
    polled <- curl::multi_run(timeout = 0, pool = pool)
    if (polled$success + polled$error == 0L) Sys.sleep(0.0005)
  }
  open <- FALSE
  # Let the requests in flight finish (bounded), so that the next turn starts
  # on an idle server; they and their time count.
  for (iter in 1:20000) {
    if (length(curl::multi_list(pool)) == 0L) break
    polled <- curl::multi_run(timeout = 0, pool = pool)
    if (polled$success + polled$error == 0L) Sys.sleep(0.0005)
  }
  list(done = done, failed = failed, seconds = now() - start)
}

measure <- function(server, endpoint, seconds) {
  cpu0 <- process_cpu(server$pid)
  r <- drive(paste0(server$base, "/", endpoint), seconds, opt$concurrency)
  data.frame(server = server$label, endpoint = endpoint, requests = r$done, failed = r$failed,
             seconds = r$seconds, cpu = process_cpu(server$pid) - cpu0)
}

load_average <- function() paste(utils::head(scan("/proc/loadavg", what = "", quiet = TRUE), 3), collapse = " ")

cat("async plumber deficit: ", format(Sys.time(), "%Y-%m-%d %H:%M:%S"), ", load average ", load_average(), "\n",
    sep = "")
servers <- list(start_server("open"), start_server("open+hanging"))
if (opt$hanging > 0) {
  get_json(sprintf("%s/control/hang?n=%d", servers[[2]]$base, opt$hanging))
  Sys.sleep(0.5)
}
states <- lapply(servers, function(s) get_json(paste0(s$base, "/control/state")))
cat(sprintf("later %s, promises %s, httpuv %s, plumber %s, circuitbreaker %s; %d cores\n",
            states[[1]]$later, states[[1]]$promises, states[[1]]$httpuv, states[[1]]$plumber,
            utils::packageVersion("circuitbreaker"), parallel::detectCores()))
cat(sprintf("%s rounds of %d turns of %s s per endpoint, %d in flight; calls in flight in the second server: %d\n\n",
            opt$rounds, opt$slices, opt$seconds, opt$concurrency, states[[2]]$in_flight))

# A warm-up turn per endpoint (byte compilation, first allocations).
for (server in servers) for (ep in endpoints) drive(paste0(server$base, "/", ep), 0.3, opt$concurrency)

# Idle CPU: what each server burns with no request at all (later callbacks).
idle <- vapply(servers, function(s) {
  cpu0 <- process_cpu(s$pid)
  Sys.sleep(2)
  (process_cpu(s$pid) - cpu0) / 2
}, numeric(1))

# A round: --slices turns of --seconds per endpoint and server, in rotating
# order, so that the endpoints compared share the machine's moments (it is
# shared, and its load moves within seconds). A round's figures are its
# turns' totals.
rows <- list()
for (round in seq_len(opt$rounds)) {
  for (slice in seq_len(opt$slices)) {
    k <- (round - 1L) * opt$slices + slice
    order <- (seq_along(endpoints) + k - 2L) %% length(endpoints) + 1L
    for (server in servers[if (k %% 2L) c(1L, 2L) else c(2L, 1L)]) {
      for (ep in endpoints[order]) {
        row <- measure(server, ep, opt$seconds)
        row$round <- round
        rows[[length(rows) + 1L]] <- row
      }
    }
  }
}
turns <- do.call(rbind, rows)
results <- stats::aggregate(cbind(requests, failed, seconds, cpu) ~ server + endpoint + round, data = turns, FUN = sum)
results$rps <- results$requests / results$seconds
results$cpu_ms <- 1000 * results$cpu / pmax(1, results$requests)
trivial <- results[results$endpoint == "trivial", c("server", "round", "rps", "cpu_ms")]
names(trivial)[3:4] <- c("trivial_rps", "trivial_cpu_ms")
results <- merge(results, trivial, by = c("server", "round"))
results$ratio <- results$rps / results$trivial_rps
results$cpu_extra_us <- 1000 * (results$cpu_ms - results$trivial_cpu_ms)

range_text <- function(x, digits = 1, scale = 1) {
  x <- x * scale
  sprintf("%.*f (%.*f-%.*f)", digits, stats::median(x), digits, min(x), digits, max(x))
}
cat("Idle server CPU (no requests): ",
    paste(sprintf("%s %.1f%% of a core", vapply(servers, `[[`, "", "label"), 100 * idle), collapse = ", "),
    "\n\n", sep = "")
cat("Per server and endpoint, median (range) over the rounds\n")
cat(sprintf("  %-13s %-22s %16s %22s %18s %20s %6s\n", "server", "endpoint", "req/s", "% of /trivial", "CPU ms/request",
            "extra CPU us/req", "failed"))
for (server in servers) {
  for (ep in endpoints) {
    r <- results[results$server == server$label & results$endpoint == ep, ]
    cat(sprintf("  %-13s %-22s %16s %22s %18s %20s %6d\n", server$label, ep, range_text(r$rps, 0),
                range_text(r$ratio, 1, 100), range_text(r$cpu_ms, 3), range_text(r$cpu_extra_us, 0),
                sum(r$failed)))
  }
}
if (length(servers) == 2L) {
  a <- results[results$server == servers[[1]]$label & results$endpoint == "trivial", ]
  b <- results[results$server == servers[[2]]$label & results$endpoint == "trivial", ]
  b <- b[match(a$round, b$round), ]
  cat(sprintf("\n/trivial with %d calls in flight / without (same round): %s%%\n",
              states[[2]]$in_flight, range_text(b$rps / a$rps, 1, 100)))
  ga <- results[results$server == servers[[2]]$label & results$endpoint == "guarded-async", ]
  ga <- ga[match(a$round, ga$round), ]
  cat(sprintf("/guarded-async with calls in flight / /trivial without (the avalanche's comparison): %s%%\n",
              range_text(ga$rps / a$rps, 1, 100)))
}

# Rprof of each server while it serves one endpoint: the top entries, and
# per request, the functions whose (total) time exceeds /trivial's the most.
profile <- function(server, endpoint, seconds) {
  file <- tempfile(paste0("async-plumber-", server$label, "-", endpoint, "-"), fileext = ".Rprof")
  get_json(sprintf("%s/control/profile?action=start&file=%s", server$base, utils::URLencode(file, reserved = TRUE)))
  r <- drive(paste0(server$base, "/", endpoint), seconds, opt$concurrency)
  get_json(paste0(server$base, "/control/profile?action=stop"))
  s <- utils::summaryRprof(file)
  per_request <- 1000 * s$sampling.time / max(1L, r$done)
  cat(sprintf("\nRprof: %s, /%s: %d requests, %.2f s sampled, %.3f ms of R per request; %s\n", server$label,
              endpoint, r$done, s$sampling.time, per_request, file))
  cat("  by self (top 8):\n")
  top <- utils::head(s$by.self, 8)
  for (i in seq_len(nrow(top))) cat(sprintf("    %5.1f%%  %s\n", top$self.pct[[i]], rownames(top)[[i]]))
  list(requests = r$done,
       total_us = stats::setNames(1e6 * s$by.total$total.time / max(1L, r$done), rownames(s$by.total)),
       self_us = stats::setNames(1e6 * s$by.self$self.time / max(1L, r$done), rownames(s$by.self)))
}
profile_diff <- function(p, base, label, what = "total_us", n = 15) {
  keys <- union(names(p[[what]]), names(base[[what]]))
  a <- stats::setNames(p[[what]][keys], keys)
  b <- stats::setNames(base[[what]][keys], keys)
  a[is.na(a)] <- 0
  b[is.na(b)] <- 0
  d <- sort(a - b, decreasing = TRUE)
  cat(sprintf("  %s, us per request (%s): most above /trivial's\n", label, sub("_us", "", what)))
  for (k in utils::head(names(d), n)) {
    cat(sprintf("    %+8.1f  (%7.1f against %7.1f)  %s\n", d[[k]], a[[k]], b[[k]], k))
  }
}
if (opt[["profile-seconds"]] > 0) {
  for (server in servers) {
    profiles <- lapply(stats::setNames(nm = c("trivial", "guarded-async", "promise")),
                       function(ep) profile(server, ep, opt[["profile-seconds"]]))
    cat("\n")
    for (ep in c("guarded-async", "promise")) {
      profile_diff(profiles[[ep]], profiles$trivial, paste0(server$label, " /", ep), "self_us", 10)
      profile_diff(profiles[[ep]], profiles$trivial, paste0(server$label, " /", ep), "total_us", 25)
    }
  }
}
cat("\nload average at the end: ", load_average(), "\n", sep = "")
stoppers$stop_all()
