# The fleet store over TLS when its Redis dies and comes back empty: how
# long until every store is in step with Redis again (mode "fleet"), and
# what the callers' execute() pays meanwhile (bench/RESULTS.md section 16).
#
#   R_LIBS=<library> Rscript bench/redis-tls-reconnect.R   (from the
#                         repository root; needs hiredis, OpenSSL, a
#                         redis-server built with TLS, the openssl
#                         command and processx; Linux only)
#
# Settings (environment variables):
#   CB_BENCH_STORES     stores in all, each with its own prefix and one breaker (64)
#   CB_BENCH_PROCESSES  R worker processes holding them (4)
#   CB_BENCH_ROUNDS     outages per phase (5)
#   CB_BENCH_DOWN       seconds the server stays dead before it is restarted (1)
#   CB_BENCH_PLAIN      1: after the TLS phase, the same rounds on a plain
#                       redis:// server, the baseline of the same run (1); 0: TLS only
#   CB_BENCH_TIMEOUT    the stores' timeout, seconds (0.1, the default of
#                       breaker_store_redis())
#   CB_BENCH_SAVE       a file to save the raw figures to (saveRDS), for a
#                       closer look; unset: none
#
# A CA and a server certificate (redis_tls_certs() of inst/redis/
# redis-tls.R) in a private temporary folder; a TLS-only redis-server on
# 127.0.0.1 on a free port, no persistence (bench/harness/redis-tls.R), and
# CB_BENCH_PROCESSES workers (bench/redis-tls-reconnect-worker.R, processx,
# supervised), which hold CB_BENCH_STORES stores in all:
# breaker_store_redis(rediss://..., prefix = <one per store>, tls =
# list(ca_file = <the CA>)), sync_interval 0.1 s, timeout 0.1 s (the
# defaults; CB_BENCH_TIMEOUT), one breaker each. Each worker calls every breaker once every
# 10 ms (cb$execute(function() "ok"), each call timed) and reads its
# $metrics()$mode after each round of calls. Once every store is in mode
# "fleet", 3 s of calls with the server up (the baseline of the call
# durations), then CB_BENCH_ROUNDS times:
# 1. SIGKILL the redis-server (its sockets are reset by the kernel);
# 2. CB_BENCH_DOWN seconds later, start a new one, empty (a new --dir), on
#    the same port with the same certificate, the one way
#    (redis_server_start(): it returns once the server answers PING and
#    INFO names it);
# 3. wait until every store has been "local" since the kill and is "fleet"
#    again (the workers' status files, polled every 0.1 s; at most 30 s),
#    then 1 s more.
# Per round, from the workers' own samples (every 10 ms): when each store
# turned "local" after the kill, and "fleet" again, from the restart (the
# new server's start) and from when it answered; the largest execute()
# duration between the kill and the last store's return, and the calls
# made then, against the store's timeout (the calls must never wait on
# Redis: the sync thread does), and the largest of an in-process breaker's
# execute() in the same loop (the control: a call that never involves
# Redis, so a long one is the process waiting for a core). The same with a plain server when
# CB_BENCH_PLAIN is 1 (the baseline of the reconnect times, in the same
# run). Every process, server and file is removed on exit, error included.
# About 1 minute with the defaults.
suppressPackageStartupMessages(library(circuitbreaker))
stopifnot(circuitbreaker:::cb_redis_available(), circuitbreaker:::cb_redis_tls_available(),
          nzchar(Sys.which("redis-server")), nzchar(Sys.which("openssl")),
          requireNamespace("processx", quietly = TRUE))
this_file <- gsub("~+~", " ", sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1]), fixed = TRUE)
home <- normalizePath(dirname(this_file), mustWork = TRUE)
# now(); fmt_n(), verdict(); new_stoppers(); redis_server_start(),
# redis_tls_certs(), redis_tls_server_start():
for (file in c("clock.R", "format.R", "processes.R", "redis.R", "redis-tls.R")) source(file.path(home, "harness", file))

setting <- function(name, default, min, max) {
  x <- suppressWarnings(as.numeric(Sys.getenv(name, as.character(default))))
  if (length(x) != 1L || is.na(x) || x < min || x > max) stop(name, " must be a number from ", min, " to ", max)
  x
}
n_stores <- setting("CB_BENCH_STORES", 64, 1, 512)
n_processes <- setting("CB_BENCH_PROCESSES", 4, 1, 32)
rounds <- setting("CB_BENCH_ROUNDS", 5, 1, 50)
down <- setting("CB_BENCH_DOWN", 1, 0, 30)
with_plain <- setting("CB_BENCH_PLAIN", 1, 0, 1) == 1
timeout <- setting("CB_BENCH_TIMEOUT", 0.1, 0.01, 5)
stopifnot(n_processes <= n_stores)
sync_interval <- 0.1
max_wait <- 30
baseline_seconds <- 3

q <- function(x, p) if (length(x)) unname(stats::quantile(x, p, type = 7, na.rm = TRUE)) else NA_real_
ms <- function(x) if (length(x) && is.finite(x)) sprintf("%.1f ms", 1000 * x) else "-"
s_ <- function(x) if (length(x) && is.finite(x)) sprintf("%.2f s", x) else "-"

# The workers' status: per worker, the time written, breakers in "fleet"
# now and each breaker's last turn to "local".
read_status <- function(w) {
  path <- file.path(w$dir, "status")
  lines <- tryCatch(readLines(path, warn = FALSE), error = function(e) character())
  if (length(lines) < 3L) return(NULL)
  list(at = as.numeric(lines[[1]]), fleet = as.integer(lines[[2]]),
       last_local = suppressWarnings(as.numeric(strsplit(lines[[3]], " ", fixed = TRUE)[[1]])))
}

# One phase: a server (TLS or plain), the workers, the rounds. Returns the
# raw figures.
run_phase <- function(kind, dir, certs) {
  cleanup <- new_stoppers()
  on.exit(cleanup$stop_all())
  start_server <- function(sub, port = NULL) {
    d <- file.path(dir, sub)
    dir.create(d)
    s <- if (kind == "tls") redis_tls_server_start(d, certs, port = port) else redis_server_start(d, port = port)
    cleanup$add(function() s$stop())
    s
  }
  server <- start_server(paste0(kind, "-redis-0"))
  port <- server$port
  client_tls <- if (kind == "tls") redis_client_tls(certs)
  message(sprintf("%s: redis-server on %s; starting %d workers with %d stores", kind, server$url, n_processes,
                  n_stores))

  groups <- split(seq_len(n_stores), rep_len(seq_len(n_processes), n_stores))
  lifetime <- 120 + 20 + baseline_seconds + rounds * (down + max_wait + 3)
  workers <- lapply(seq_along(groups), function(i) {
    w <- new.env(parent = emptyenv())
    w$id <- i
    w$dir <- file.path(dir, sprintf("%s-worker-%d", kind, i))
    dir.create(w$dir)
    saveRDS(list(url = server$url, tls = client_tls, prefixes = sprintf("reconnect-%s-s%03d", kind, groups[[i]]),
                 sync_interval = sync_interval, timeout = timeout, parent_pid = Sys.getpid(), lifetime = lifetime),
            file.path(w$dir, "config.rds"))
    w$proc <- processx::process$new(
      file.path(R.home("bin"), "Rscript"), c("--vanilla", file.path(home, "redis-tls-reconnect-worker.R"), w$dir),
      env = c("current", R_LIBS = paste(.libPaths(), collapse = .Platform$path.sep)),
      stdout = file.path(w$dir, "log"), stderr = "2>&1", cleanup = TRUE, supervise = TRUE
    )
    cleanup$add(function() if (w$proc$is_alive()) w$proc$kill())
    w
  })

  wait_files(workers, "ready", 120, what = paste(kind, "worker"))
  t_base <- now()
  Sys.sleep(baseline_seconds)
  t_base_end <- now()

  events <- list()
  for (round in seq_len(rounds)) {
    t_kill <- now()
    server$process$kill()  # SIGKILL
    server$process$wait(5000)
    stopifnot(!server$process$is_alive())
    Sys.sleep(down)
    t_restart <- now()
    server <- start_server(sprintf("%s-redis-%d", kind, round), port = port)
    t_ready <- now()
    # Every store "local" since the kill and "fleet" now, or max_wait.
    back <- FALSE
    for (i in seq_len(ceiling(max_wait / 0.1) + 1L)) {
      st <- lapply(workers, read_status)
      back <- all(vapply(st, function(x) {
        !is.null(x) && x$at > t_ready && x$fleet == length(x$last_local) &&
          all(!is.na(x$last_local) & x$last_local >= t_kill)
      }, TRUE))
      if (back || now() > t_ready + max_wait) break
      Sys.sleep(0.1)
    }
    t_seen <- now()
    message(sprintf("%s: round %d of %d: %s %.2f s after the restart", kind, round, rounds,
                    if (back) "every store back in mode fleet" else "NOT every store back", t_seen - t_restart))
    Sys.sleep(1)
    events[[round]] <- list(kill = t_kill, restart = t_restart, ready = t_ready, seen = t_seen, back = back)
  }
  for (w in workers) file.create(file.path(w$dir, "stop"))
  wait_files(workers, "result.rds", 60, what = paste(kind, "worker"))
  results <- lapply(workers, function(w) readRDS(file.path(w$dir, "result.rds")))
  list(kind = kind, url = server$url, events = events, results = results, base = c(t_base, t_base_end))
}

# Per round: each store's turn to "local" after the kill and back to
# "fleet" after that; the calls between the kill and the last return.
analyse <- function(phase) {
  changes <- do.call(rbind, lapply(seq_along(phase$results), function(i) {
    ch <- phase$results[[i]]$changes
    if (nrow(ch)) ch$store <- paste(i, ch$store)
    ch
  }))
  stores <- unlist(lapply(seq_along(phase$results), function(i) paste(i, seq_along(phase$results[[i]]$prefixes))))
  errors <- do.call(rbind, lapply(seq_along(phase$results), function(i) {
    x <- phase$results[[i]]$errors
    if (is.null(x)) return(NULL)
    if (nrow(x)) x$store <- paste(i, x$store)
    x
  }))
  calls <- do.call(rbind, lapply(phase$results, function(r) r$calls[c("at", "took")]))
  control <- do.call(rbind, lapply(phase$results, `[[`, "control"))
  in_window <- function(x, from, to) x$took[x$at >= from & x$at <= to]
  base_calls <- in_window(calls, phase$base[[1]], phase$base[[2]])
  base_control <- in_window(control, phase$base[[1]], phase$base[[2]])
  rounds <- lapply(seq_along(phase$events), function(r) {
    e <- phase$events[[r]]
    end <- if (r < length(phase$events)) phase$events[[r + 1L]]$kill else Inf
    per <- vapply(stores, function(s) {
      ch <- changes[changes$store == s & changes$at >= e$kill & changes$at < end, , drop = FALSE]
      local <- ch$at[ch$to == "local"]
      t_local <- if (length(local)) min(local) else NA_real_
      fleet <- ch$at[ch$to == "fleet" & ch$at > (if (is.na(t_local)) Inf else t_local)]
      c(local = t_local, fleet = if (length(fleet)) min(fleet) else NA_real_)
    }, c(local = 0, fleet = 0))
    last_back <- if (all(is.finite(per["fleet", ]))) max(per["fleet", ]) else NA_real_
    window_end <- if (is.finite(last_back)) last_back else e$seen
    # The links' new last errors once the new server answered: what made a
    # store's first retry fail (the address and port taken out).
    late <- if (is.null(errors)) {
      character()
    } else {
      errors$error[errors$at >= e$ready & errors$at <= window_end & nzchar(errors$error)]
    }
    late <- gsub("127\\.0\\.0\\.1:[0-9]+", "<server>", late)
    took <- in_window(calls, e$kill, window_end)
    took_control <- in_window(control, e$kill, window_end)
    list(detect = per["local", ] - e$kill, back_restart = per["fleet", ] - e$restart,
         back_ready = per["fleet", ] - e$ready, start = e$ready - e$restart,
         all_back_restart = last_back - e$restart, all_back_ready = last_back - e$ready,
         all_back_kill = last_back - e$kill, never_local = sum(is.na(per["local", ])),
         never_back = sum(is.na(per["fleet", ])), max_call = max(took, -Inf), p999_call = q(took, 0.999),
         n_calls = length(took), over_timeout = sum(took >= timeout), control_max = max(took_control, -Inf),
         control_over = sum(took_control >= timeout), late_errors = table(late),
         slow = sum(per["fleet", ] - e$restart > 1.5, na.rm = TRUE))
  })
  list(kind = phase$kind, rounds = rounds, base_max = max(base_calls, -Inf), base_p999 = q(base_calls, 0.999),
       base_n = length(base_calls), base_control_max = max(base_control, -Inf), all_max = max(calls$took, -Inf),
       all_n = nrow(calls),
       tls = table(unlist(lapply(phase$results, `[[`, "tls"))),
       failures = sum(unlist(lapply(phase$results, `[[`, "sync_failures"))))
}

report <- function(a) {
  cat(sprintf("\n## %s: %d stores in %d processes, server down %g s per round\n\n",
              if (a$kind == "tls") "TLS (rediss://)" else "plain (redis://)", n_stores, n_processes, down))
  cat("Links at the end (cb_fleet_info()$tls): ",
      paste(sprintf("%s %d", names(a$tls), as.integer(a$tls)), collapse = ", "),
      "; sync failures counted by the stores: ", fmt_n(a$failures), "\n\n", sep = "")
  cat("| round | server start (restart to PING) | turned local after the kill: median / max ",
      "| back in fleet after the restart: median / max",
      " | **every store back: after the restart** (after the kill) | stores never local; never back",
      " | calls meanwhile | **largest execute()** (p99.9) | calls >= timeout",
      " | control: largest in-process execute(); >= timeout |\n",
      "|---|---|---|---|---|---|---|---|---|---|\n", sep = "")
  for (r in seq_along(a$rounds)) {
    x <- a$rounds[[r]]
    cat(sprintf("| %d | %s | %s / %s | %s / %s | **%s** (%s) | %d; %d | %s | **%s** (%s) | %d | %s; %d |\n", r,
                ms(x$start), ms(q(x$detect, 0.5)), ms(max(x$detect, -Inf, na.rm = TRUE)), s_(q(x$back_restart, 0.5)),
                s_(max(x$back_restart, -Inf, na.rm = TRUE)), s_(x$all_back_restart), s_(x$all_back_kill),
                x$never_local, x$never_back, fmt_n(x$n_calls), ms(x$max_call), ms(x$p999_call), x$over_timeout,
                ms(x$control_max), x$control_over))
  }
  late <- unlist(lapply(a$rounds, function(x) stats::setNames(as.integer(x$late_errors), names(x$late_errors))))
  if (length(late)) {
    late <- tapply(late, names(late), sum)
    cat("\nNew last errors of the links after the new server answered (all rounds; ",
        "stores back more than 1.5 s after the restart: ",
        paste(vapply(a$rounds, function(x) format(x$slow), ""), collapse = ", "), " per round):\n\n", sep = "")
    for (k in names(late)) cat("- ", late[[k]], " x ", k, "\n", sep = "")
  } else {
    cat("\nNo link had a new error after the new server answered.\n")
  }
  all_back <- vapply(a$rounds, `[[`, 0, "all_back_restart")
  max_call <- max(vapply(a$rounds, `[[`, 0, "max_call"))
  cat(sprintf(paste("\nEvery store back in mode \"fleet\" after the restart: median %s, range %s-%s over %d rounds;",
                    "largest execute() during the outages %s against timeout %s (%s; the control's largest %s);",
                    "with the server up (%s calls over %g s): %s (p99.9 %s; the control's largest %s)\n"),
              s_(stats::median(all_back)), s_(min(all_back)), s_(max(all_back)), length(all_back), ms(max_call),
              ms(timeout), if (max_call < timeout) "below" else "NOT below",
              ms(max(vapply(a$rounds, `[[`, 0, "control_max"))), fmt_n(a$base_n), baseline_seconds,
              ms(a$base_max), ms(a$base_p999), ms(a$base_control_max)))
  invisible(all_back)
}

main <- function() {
  dir <- tempfile("cb-bench-redis-tls-reconnect-")
  dir.create(dir, mode = "0700")
  on.exit(unlink(dir, recursive = TRUE))
  dir.create(file.path(dir, "certs"))
  certs <- redis_tls_certs(file.path(dir, "certs"))
  load_before <- trimws(system2("uptime", stdout = TRUE))
  started <- format(Sys.time(), "%Y-%m-%d %H:%M UTC", tz = "UTC")
  phases <- list(tls = run_phase("tls", dir, certs))
  if (with_plain) phases$plain <- run_phase("plain", dir, certs)
  load_after <- trimws(system2("uptime", stdout = TRUE))
  cat(sprintf("R %s, circuitbreaker %s, processx %s, redis-server %s; %s; %d cores\n", getRversion(),
              packageVersion("circuitbreaker"), packageVersion("processx"),
              sub("^.*v=([^ ]+).*$", "\\1", system2(Sys.which("redis-server"), "--version", stdout = TRUE)),
              started, parallel::detectCores()),
      sprintf("stores: sync_interval %g s, timeout %g s, one breaker each, called every 10 ms\n",
              sync_interval, timeout),
      "Load before: ", load_before, "\nLoad after:  ", load_after, "\n", sep = "")
  save_to <- Sys.getenv("CB_BENCH_SAVE")
  if (nzchar(save_to)) saveRDS(phases, save_to)
  analysed <- lapply(phases, analyse)
  backs <- lapply(analysed, report)
  if (with_plain) {
    ratio <- stats::median(backs$tls) / stats::median(backs$plain)
    cat(sprintf("\nTLS / plain, every store back after the restart (medians of the rounds): %s / %s = %s\n",
                s_(stats::median(backs$tls)), s_(stats::median(backs$plain)),
                if (is.finite(ratio)) fmt_x(ratio) else "- (a round where not every store came back)"))
  }
  invisible(analysed)
}

main()
