# The bulkhead demonstration: N plumber workers on one host, one
# host-shared breaker to a downstream that starts to hang, and a trivial
# endpoint on the same workers. Without a bulkhead, every worker ends up
# waiting on the hanging downstream and the trivial endpoint, which calls
# nothing, stops answering too. With one (`max_concurrent`), at most that
# many workers of the host wait, and the others keep serving.
#
#   Rscript bench/bulkhead/run.R [options]
#
# Options (each also read from an environment variable, the command line
# winning; --name value or --name=value):
#   --workers N        BULKHEAD_WORKERS        plumber worker processes, 2 to 16 (default 4)
#   --healthy S        BULKHEAD_HEALTHY        seconds measured while the downstream is
#                                              healthy, 1 to 60 (default 4)
#   --seconds S        BULKHEAD_SECONDS        seconds measured while it hangs, 2 to 120
#                                              (default 8)
#   --ping-rate R      BULKHEAD_PING_RATE      trivial requests per second over all
#                                              workers, 1 to 500 (default 40)
#   --quote-rate R     BULKHEAD_QUOTE_RATE     guarded requests per second over all
#                                              workers, 1 to 100 (default 8)
#   --timeout S        BULKHEAD_TIMEOUT        the workers' downstream timeout, 0.5 to 10
#                                              (default 2)
#   --limits L         BULKHEAD_LIMITS         the runs, comma-separated: "none" (no
#                                              bulkhead), a number (max_concurrent = n) or
#                                              "share:p" (a bulkhead of share p)
#                                              (default none,1,share:0.5)
#   --quiet            BULKHEAD_QUIET=true     print nothing but the table
#   --help                                     this text
#
# Everything runs on 127.0.0.1, each in its own background R process: the
# downstream (downstream.R, webfakes; "healthy" answers at once, "hanging"
# answers nothing for far longer than the workers' timeout) and, per run, N
# fresh plumber workers (worker.R) sharing one breaker through a host store
# in a new directory. This process is the load balancer and the clients: at
# fixed rates it sends trivial (/ping) and guarded (/quote) requests, each
# to the worker with the fewest requests in flight (as a reverse proxy's
# "least connections" does; round robin would keep sending requests to a
# worker that is stuck), for `--healthy` seconds and then, with the
# downstream hanging, for `--seconds` more.
#
# Per run it prints the trivial endpoint's requests/s (answers completed
# in the phase, per second) and p99 latency in both phases, and the hanging
# phase as a share of the healthy one: the goal is at least 60 % of the
# requests/s with p99 under 2x the healthy p99 with a bulkhead, and the
# collapse without one. It also counts the guarded requests by outcome
# (answered, failed after the timeout, rejected "full", rejected "open") and
# the calls that reached the downstream.
#
# About 25 s per run with the defaults. It needs circuitbreaker installed
# (with `max_concurrent` for every run but "none"), and plumber, webfakes,
# callr, curl, httpuv, jsonlite and later. Exit status 0 when every run
# completed (whether or not the goal was met), 2 for a bad option, 1 for any
# other error. Every process started and every store directory are removed
# on the way out, also on an error or an interrupt.

spec <- list(
  workers = list(env = "BULKHEAD_WORKERS", flag = FALSE, min = 2, max = 16, whole = TRUE),
  healthy = list(env = "BULKHEAD_HEALTHY", flag = FALSE, min = 1, max = 60, whole = FALSE),
  seconds = list(env = "BULKHEAD_SECONDS", flag = FALSE, min = 2, max = 120, whole = FALSE),
  "ping-rate" = list(env = "BULKHEAD_PING_RATE", flag = FALSE, min = 1, max = 500, whole = FALSE),
  "quote-rate" = list(env = "BULKHEAD_QUOTE_RATE", flag = FALSE, min = 1, max = 100, whole = FALSE),
  timeout = list(env = "BULKHEAD_TIMEOUT", flag = FALSE, min = 0.5, max = 10, whole = FALSE),
  limits = list(env = "BULKHEAD_LIMITS", flag = FALSE),
  quiet = list(env = "BULKHEAD_QUIET", flag = TRUE),
  help = list(env = NA_character_, flag = TRUE)
)
defaults <- list(workers = 4, healthy = 4, seconds = 8, "ping-rate" = 40, "quote-rate" = 8, timeout = 2,
                 limits = "none,1,share:0.5")

this_file <- gsub("~+~", " ", sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1]), fixed = TRUE)
for (file in c("options.R", "processes.R", "http.R", "clock.R")) {
  source(file.path(dirname(this_file), "..", "harness", file))
}
home <- normalizePath(dirname(this_file), mustWork = TRUE)

values <- parse_options(commandArgs(TRUE), spec)
if (as_flag(values$help, "help")) usage(0, this_file)
opts <- list()
for (name in setdiff(names(spec), c("limits", "quiet", "help"))) {
  opts[[name]] <- as_bounded_number(if (is.null(values[[name]])) defaults[[name]] else values[[name]], name, spec)
}
limits <- trimws(strsplit(if (is.null(values$limits)) defaults$limits else values$limits, ",", fixed = TRUE)[[1]])
for (limit in limits) {
  ok <- identical(limit, "none") || grepl("^[1-9][0-9]{0,2}$", limit) ||
    (grepl("^share:", limit) &&
       isTRUE(suppressWarnings(as.numeric(sub("^share:", "", limit))) %in% seq(0.01, 1, by = 0.01)))
  if (!ok) {
    bad_option("--limits: each must be none, a whole number from 1 to 999 or share:p (0 < p <= 1, two decimals), ",
               "not \"", limit, "\"")
  }
}
quiet <- as_flag(values$quiet, "quiet")
say <- if (quiet) function(...) invisible(NULL) else function(...) cat(..., sep = "")

# ---------------------------------------------------------------------------
# Background processes

new_store_dir <- function() {
  parent <- if (dir.exists("/dev/shm") && file.access("/dev/shm", 2) == 0) "/dev/shm" else tempdir()
  dir <- tempfile("cb-bulkhead-", tmpdir = parent)
  if (!dir.create(dir, mode = "0700")) stop("cannot create the store directory ", dir)
  dir
}

start_workers <- function(n, env, procs) {
  start <- function(i) {
    start_plumber(file.path(home, "worker.R"), env, procs, log_prefix = sprintf("bulkhead-worker-%d-", i))
  }
  workers <- lapply(seq_len(n), start)
  lapply(seq_len(n), function(i) {
    start_ready(function() start(i), "/ready", 60, server = workers[[i]], fail = function(w) {
      stop("worker ", i, " did not start:\n", paste(utils::tail(w$errors(), 8), collapse = "\n"))
    })
  })
}

# A fresh R process is slow at its first requests: a few of each, unmeasured.
warm_up <- function(workers) {
  for (i in 1:5) for (w in workers) for (path in c("/ping", "/quote")) {
    try(curl::curl_fetch_memory(paste0(w$base, path), handle = request_handle(5)), silent = TRUE)
  }
}

# ---------------------------------------------------------------------------
# The load

# Trivial and guarded requests at fixed rates (each on its own schedule,
# slipping rather than bursting when this process falls behind), each to a
# worker with the fewest requests in flight (ties: in turn). After `healthy`
# seconds the downstream is switched to hanging; `seconds` after the switch
# (the downstream's time of it) no more requests start, and those in flight
# are waited for (at most the client timeout). Bounded in requests and time.
drive <- function(workers, opts, switch_url, client_timeout = 10) {
  n <- length(workers)
  rates <- c(ping = opts[["ping-rate"]], quote = opts[["quote-rate"]])
  total <- opts$healthy + opts$seconds
  max_requests <- ceiling(sum(rates) * total) + 16L
  rec_kind <- character(max_requests)
  rec_start <- rec_end <- rep(NA_real_, max_requests)
  rec_status <- integer(max_requests)
  rec_reason <- rep(NA_character_, max_requests)
  launched <- 0L
  in_flight <- integer(n)
  turn <- 0L
  pool <- curl::new_pool(total_con = max_requests, host_con = max_requests, multiplex = FALSE)
  on.exit(for (h in curl::multi_list(pool)) try(curl::multi_cancel(h), silent = TRUE), add = TRUE)

  launch <- function(kind) {
    least <- which(in_flight == min(in_flight))
    turn <<- turn + 1L
    w <- least[(turn - 1L) %% length(least) + 1L]
    launched <<- launched + 1L
    i <- launched
    rec_kind[i] <<- kind
    rec_start[i] <<- now()
    in_flight[w] <<- in_flight[w] + 1L
    curl::curl_fetch_multi(
      paste0(workers[[w]]$base, "/", kind),
      done = function(res) {
        rec_end[i] <<- now()
        rec_status[i] <<- res$status_code
        body <- rawToChar(res$content)
        rec_reason[i] <<- if (identical(kind, "ping")) {
          "answered"
        } else {
          m <- regmatches(body, regexpr("\"reason\":\"[a-z]+\"", body))
          if (length(m)) sub("^.*:\"([a-z]+)\"$", "\\1", m) else "answered"
        }
        in_flight[w] <<- in_flight[w] - 1L
      },
      fail = function(msg) {
        rec_end[i] <<- now()
        rec_reason[i] <<- "no answer"
        in_flight[w] <<- in_flight[w] - 1L
      },
      pool = pool,
      handle = request_handle(client_timeout)
    )
  }

  hang_start <- NA_real_
  switch_error <- NULL
  t_start <- now()
  t_switch <- t_start + opts$healthy
  switch_sent <- FALSE
  t_stop <- Inf
  next_due <- c(ping = t_start, quote = t_start + 0.5 / rates[["quote"]])
  max_iter <- max_requests + ceiling((total + client_timeout) / 0.001) + 1000L
  for (iter in seq_len(max_iter)) {
    t <- now()
    if (!switch_sent && t >= t_switch) {
      switch_sent <- TRUE
      curl::curl_fetch_multi(
        switch_url,
        done = function(res) hang_start <<- as.numeric(jsonlite::fromJSON(rawToChar(res$content))$time),
        fail = function(msg) switch_error <<- msg,
        pool = pool, handle = request_handle(client_timeout)
      )
    }
    if (!is.null(switch_error)) stop("cannot switch the downstream to hanging: ", switch_error)
    if (is.finite(hang_start)) t_stop <- hang_start + opts$seconds
    if (t >= t_stop) break
    if (switch_sent && !is.finite(hang_start) && t > t_switch + client_timeout) {
      stop("the downstream did not answer the switch to hanging")
    }
    started <- 0L
    for (kind in names(rates)) {
      while (launched < max_requests && next_due[[kind]] <= t) {
        launch(kind)
        started <- started + 1L
        next_due[[kind]] <- max(next_due[[kind]] + 1 / rates[[kind]], t - 1 / rates[[kind]])
      }
    }
    polled <- curl::multi_run(timeout = 0, pool = pool)
    if (started == 0L && polled$success + polled$error == 0L) Sys.sleep(0.001)
  }
  if (!is.finite(hang_start)) stop("the hang did not start (the driver's loop ran out)")
  drain_deadline <- now() + client_timeout + 1
  for (iter in seq_len(ceiling((client_timeout + 1) / 0.002) + max_requests)) {
    if (length(curl::multi_list(pool)) == 0L || now() > drain_deadline) break
    polled <- curl::multi_run(timeout = 0, pool = pool)
    if (polled$success + polled$error == 0L) Sys.sleep(0.002)
  }
  idx <- seq_len(launched)
  list(
    t_start = t_start, hang_start = hang_start, hang_end = t_stop, client_timeout = client_timeout,
    requests = data.frame(kind = rec_kind[idx], start = rec_start[idx], end = rec_end[idx],
                          status = rec_status[idx], reason = rec_reason[idx], stringsAsFactors = FALSE)
  )
}

# ---------------------------------------------------------------------------
# One run and its figures

# The trivial endpoint in one phase [from, to): answers completed in it per
# second, and the p99 latency of the requests started in it (a request
# without an answer counts as the client's whole timeout).
phase_figures <- function(req, from, to, client_timeout) {
  ping <- req[req$kind == "ping", , drop = FALSE]
  done <- ping$status == 200 & !is.na(ping$end)
  answered <- sum(done & ping$end >= from & ping$end < to)
  started <- ping[ping$start >= from & ping$start < to, , drop = FALSE]
  latency <- ifelse(!is.na(started$end) & started$status == 200, started$end - started$start, client_timeout)
  list(rps = answered / (to - from),
       p99 = if (length(latency)) unname(stats::quantile(latency, 0.99, type = 7)) else NA_real_,
       sent = nrow(started))
}

run_once <- function(limit, downstream, opts) {
  procs <- new_stoppers()
  on.exit(procs$stop_all(), add = TRUE)
  store_dir <- new_store_dir()
  procs$add(function() {
    try(circuitbreaker::breaker_store_unlink("quotes", circuitbreaker::breaker_store_host(store_dir)), silent = TRUE)
    unlink(store_dir, recursive = TRUE)
  })
  env <- c(
    BULKHEAD_DOWNSTREAM_URL = downstream$url("/quote"),
    BULKHEAD_STORE_DIR = store_dir,
    BULKHEAD_LIMIT = limit,
    BULKHEAD_TIMEOUT = format(opts$timeout, digits = 15),
    BULKHEAD_MAX_LIFETIME = format(opts$healthy + opts$seconds + 240)
  )
  say(sprintf("\nbulkhead %s: starting %d workers ... ", limit, opts$workers))
  t_ready <- now()
  workers <- start_workers(opts$workers, env, procs)
  say(sprintf("ready in %.1f s\n", now() - t_ready))
  get_json(downstream$url("/mode?set=healthy"))
  warm_up(workers)
  get_json(downstream$url("/count"))
  run <- drive(workers, opts, downstream$url("/mode?set=hanging"))
  count <- get_json(downstream$url("/mode?set=healthy")) # stop hanging before the workers go
  count <- get_json(downstream$url("/count"))
  procs$stop_all()
  req <- run$requests
  healthy <- phase_figures(req, run$t_start + 0.5, run$hang_start, run$client_timeout)
  hanging <- phase_figures(req, run$hang_start, run$hang_end, run$client_timeout)
  quotes <- req[req$kind == "quote" & req$start >= run$hang_start, , drop = FALSE]
  outcome <- table(factor(quotes$reason, levels = c("answered", "failed", "full", "open", "no answer")))
  list(limit = limit, healthy = healthy, hanging = hanging, quotes = as.list(outcome),
       downstream = count)
}

# ---------------------------------------------------------------------------

procs <- new_stoppers()
on.exit(procs$stop_all(), add = TRUE)
main <- function() {
  env <- new.env(parent = baseenv())
  sys.source(file.path(home, "downstream.R"), envir = env)
  downstream <- start_webfakes(env$bulkhead_downstream_app(hang = 60), procs, num_threads = 64)
  say(sprintf("%d workers; trivial %g/s and guarded %g/s for %g s healthy, then %g s hanging; timeout %g s\n",
              opts$workers, opts[["ping-rate"]], opts[["quote-rate"]], opts$healthy, opts$seconds, opts$timeout))
  results <- lapply(limits, function(limit) run_once(limit, downstream, opts))
  cat("\n| bulkhead | trivial req/s healthy | hanging | share | p99 healthy | p99 hanging | ratio |",
      "guarded while hanging (answered/failed/full/open/no answer) | reached the hanging downstream | goal |\n")
  cat("|---|---|---|---|---|---|---|---|---|---|\n")
  for (r in results) {
    share <- r$hanging$rps / r$healthy$rps
    ratio <- r$hanging$p99 / r$healthy$p99
    goal <- if (identical(r$limit, "none")) {
      if (share < 0.6 || ratio >= 2) "collapse shown" else "no collapse"
    } else if (share >= 0.6 && ratio < 2) {
      "met"
    } else {
      "missed"
    }
    q <- r$quotes
    cat(sprintf("| %s | %.1f | %.1f | %.0f %% | %.0f ms | %.0f ms | %.1fx | %d/%d/%d/%d/%d | %d | %s |\n",
                r$limit, r$healthy$rps, r$hanging$rps, 100 * share, 1000 * r$healthy$p99, 1000 * r$hanging$p99,
                ratio, q$answered, q$failed, q$full, q$open, q[["no answer"]], as.integer(r$downstream$hanging), goal))
  }
  invisible(results)
}
status <- tryCatch({
  main()
  0L
}, error = function(e) {
  cat("run.R: ", conditionMessage(e), "\n", sep = "", file = stderr())
  1L
})
procs$stop_all()
quit(save = "no", status = status)
