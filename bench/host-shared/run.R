# The host-shared demonstration: N plumber workers on one host guard one
# sick downstream. With a breaker per process, each worker learns about the
# outage on its own: together they send the dead downstream N times
# failure_threshold calls to open and N probes per open period. With one
# breaker shared by every process of the host (breaker_store_host()), the
# host sends failure_threshold calls and one probe per open period.
#
#   Rscript bench/host-shared/run.R [options]
#
# Options (each also read from an environment variable, the command line
# winning; --name value or --name=value):
#   --workers N             HOST_SHARED_WORKERS            plumber worker processes, 4 to 16
#                                                          (default 4)
#   --seconds S             HOST_SHARED_SECONDS            seconds of the outage under load,
#                                                          2 to 120 (default 8)
#   --rate R                HOST_SHARED_RATE               requests per second over all
#                                                          workers, 4 to 1000 (default 100)
#   --recovery-timeout S    HOST_SHARED_RECOVERY_TIMEOUT   the breakers' recovery_timeout
#                                                          (default 3)
#   --failure-threshold N   HOST_SHARED_FAILURE_THRESHOLD  the breakers' failure_threshold
#                                                          (default 3)
#   --quiet                 HOST_SHARED_QUIET=true         print nothing
#   --help                  this text
#
# Everything runs on 127.0.0.1, each in its own background R process:
# * the downstream (downstream.R, webfakes): healthy, then failing (HTTP 500
#   at once) for the rest of the run; it logs every request it receives
#   with its arrival time, the worker that sent it and the breaker state
#   the call was admitted in (CLOSED, or HALF_OPEN for a probe);
# * N plumber workers (worker.R), each on its own port, each calling the
#   downstream through a breaker named "inventory" with a fallback.
# After a few unmeasured calls per worker (a fresh R process is slow at
# first), this process spreads the load over the workers round robin, at a
# fixed rate (curl's multi interface, at most 4 requests per worker in
# flight): one second healthy, then `--seconds` of outage. It does so twice,
# with fresh workers each time: with per-process breakers (store = NULL),
# then with a host-shared breaker (breaker_store_host() in a new directory,
# under /dev/shm when it exists). The shared run needs a circuitbreaker with
# breaker_store_host(); with an older one it is skipped, and said so.
#
# Per run it prints, from the downstream's log (not from the workers' own
# accounts): the calls that reached the dead downstream, per worker and in
# total, split into calls admitted CLOSED (the ones that open the breaker)
# and probes (admitted HALF_OPEN, after an open period); and, counted from
# the outage's start, when each worker's breaker opened (from
# `$transitions()`: for the shared breaker the same time in every worker),
# when its last CLOSED call reached the downstream (after that it only
# probes, or stops calling) and when its first request got the "open"
# fallback. Then the goal check: the shared breaker's calls against
# failure_threshold + floor(seconds / recovery_timeout) (an open period lasts
# at least recovery_timeout, and each ends with one probe), and the
# per-process calls against N times that.
#
# One thing no breaker can do: take back a call it admitted CLOSED. When the
# shared breaker opens, calls other workers started a moment before are
# still in flight (at most one per worker: a plumber worker makes one call at
# a time), and they too reach the dead downstream. From the workers' own
# logs of their calls (admitted, answered) the report names those calls and
# gives the check both ways: the strict count, and the count with the calls
# in flight when it opened. On a quiet machine calls take a few
# milliseconds and rarely overlap; on a busy one they do more often. It
# also checks that the shared breaker admitted no CLOSED call after it
# opened.
#
# About 30 s with the defaults (two runs of 9 s, plus starting the
# workers). It needs circuitbreaker installed, and plumber, webfakes, callr,
# curl, httpuv, jsonlite and later. Exit status: 0 when the run completed
# (whether or not the goal was met), 2 for a bad option, 1 for any other
# error. Every process it started and the store's directory are removed on
# the way out, also on an error or an interrupt.

spec <- list(
  workers = list(env = "HOST_SHARED_WORKERS", flag = FALSE, min = 4, max = 16, whole = TRUE),
  seconds = list(env = "HOST_SHARED_SECONDS", flag = FALSE, min = 2, max = 120, whole = FALSE),
  rate = list(env = "HOST_SHARED_RATE", flag = FALSE, min = 4, max = 1000, whole = FALSE),
  "recovery-timeout" = list(env = "HOST_SHARED_RECOVERY_TIMEOUT", flag = FALSE, min = 0.5, max = 60,
                            whole = FALSE),
  "failure-threshold" = list(env = "HOST_SHARED_FAILURE_THRESHOLD", flag = FALSE, min = 1, max = 100,
                             whole = TRUE),
  quiet = list(env = "HOST_SHARED_QUIET", flag = TRUE),
  help = list(env = NA_character_, flag = TRUE)
)
defaults <- list(workers = 4, seconds = 8, rate = 100, "recovery-timeout" = 3, "failure-threshold" = 3)

# This script's path (Rscript passes it as --file=), to find bench/harness/.
this_file <- gsub("~+~", " ", sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1]), fixed = TRUE)
# usage(), bad_option(), parse_options(), as_flag(), as_bounded_number();
# new_stoppers(), start_plumber(), start_ready(), start_webfakes();
# request_handle(), get_json(); now():
for (file in c("options.R", "processes.R", "http.R", "clock.R")) {
  source(file.path(dirname(this_file), "..", "harness", file))
}
home <- normalizePath(dirname(this_file), mustWork = TRUE)

# ---------------------------------------------------------------------------
# Background processes

start_downstream <- function(procs) {
  env <- new.env(parent = baseenv())
  sys.source(file.path(home, "downstream.R"), envir = env)
  process <- start_webfakes(env$host_shared_downstream_app(), procs, num_threads = 4)
  list(
    url = function(path) process$url(path),
    reset = function() get_json(process$url("/reset")),
    log = function() get_json(process$url("/log"))
  )
}

# Starts the N workers at once (they load in parallel), each on a random free
# port, and waits until each answers /ready: up to 60 s (four processes
# loading plumber on two cores). A worker that died (its port taken between
# the choice and the bind, say) is started again on another port, up to
# three times in all.
start_workers <- function(n, env, procs) {
  workers <- lapply(seq_len(n), function(i) start_worker(i, env, procs))
  lapply(seq_len(n), function(i) {
    start_ready(function() start_worker(i, env, procs), "/ready", 60, server = workers[[i]],
                fail = function(w) {
                  stop("worker ", i, " did not start:\n", paste(utils::tail(w$errors(), 8), collapse = "\n"))
                })
  })
}

start_worker <- function(i, env, procs) {
  env[["HOST_SHARED_WORKER"]] <- format(i)
  start_plumber(file.path(home, "worker.R"), env, procs, log_prefix = sprintf("host-shared-worker-%d-", i))
}

# Not measured: the first calls of a fresh R process (plumber's first
# requests, curl's first handles, the breaker's first call) are many times
# slower than the later ones, and under the load they would queue and
# overlap. A few sequential calls per worker, downstream healthy; run.R
# clears the downstream's log afterwards.
warm_up <- function(workers, calls = 5L) {
  for (i in seq_len(calls)) {
    for (w in workers) {
      try(curl::curl_fetch_memory(paste0(w$base, "/inventory"), handle = request_handle(5)), silent = TRUE)
    }
  }
}

# ---------------------------------------------------------------------------
# The load

# Requests go to the workers in turn (request k to worker k %% n + 1), one
# every 1 / rate seconds: round robin at a fixed rate, so that every worker
# sees the same traffic whatever the others do. A request due while its
# worker already has `max_in_flight` requests in flight waits until one
# ends, and a schedule that fell behind (this process busy, say) slips
# instead of catching up with a burst. After `healthy_seconds` the
# downstream is switched to failing (`switch_url`, a request like the others,
# so that the load does not pause for it); `outage_seconds` after the switch
# (the downstream's time of it) no more requests start, and those in flight
# are waited for (at most the client timeout). Bounded in requests (rate
# times the duration) and in time.
drive <- function(workers, rate, healthy_seconds, outage_seconds, switch_url,
                  max_in_flight = 4L, client_timeout = 5) {
  n <- length(workers)
  urls <- vapply(workers, function(w) paste0(w$base, "/inventory"), character(1))
  max_requests <- ceiling(rate * (healthy_seconds + outage_seconds)) + n
  rec_worker <- integer(max_requests)
  rec_start <- rec_end <- rep(NA_real_, max_requests)
  rec_status <- integer(max_requests)
  rec_reason <- rep(NA_character_, max_requests)
  launched <- 0L
  in_flight <- integer(n)

  pool <- curl::new_pool(total_con = n * max_in_flight + 4L, host_con = n * max_in_flight + 4L,
                         multiplex = FALSE)
  on.exit(for (h in curl::multi_list(pool)) try(curl::multi_cancel(h), silent = TRUE), add = TRUE)

  launch <- function(w) {
    launched <<- launched + 1L
    i <- launched
    rec_worker[i] <<- w
    rec_start[i] <<- now()
    in_flight[w] <<- in_flight[w] + 1L
    curl::curl_fetch_multi(
      urls[[w]],
      done = function(res) {
        rec_end[i] <<- now()
        rec_status[i] <<- res$status_code
        body <- rawToChar(res$content)
        rec_reason[i] <<- if (grepl("\"reason\":\"open\"", body, fixed = TRUE)) {
          "open"
        } else if (grepl("\"reason\":\"failed\"", body, fixed = TRUE)) {
          "failed"
        } else {
          "answered"
        }
        in_flight[w] <<- in_flight[w] - 1L
      },
      fail = function(msg) {
        rec_end[i] <<- now()
        rec_reason[i] <<- "error"
        in_flight[w] <<- in_flight[w] - 1L
      },
      pool = pool,
      handle = request_handle(client_timeout)
    )
  }

  # The switch to failing: the downstream answers with the time it switched,
  # on its own clock (the same host clock), and the outage starts there.
  outage_start <- NA_real_
  switch_error <- NULL
  switch_to_failing <- function() {
    curl::curl_fetch_multi(
      switch_url,
      done = function(res) {
        if (res$status_code != 200) {
          switch_error <<- paste("the downstream answered HTTP", res$status_code, "to the switch")
        } else {
          outage_start <<- as.numeric(jsonlite::fromJSON(rawToChar(res$content))$time)
        }
      },
      fail = function(msg) switch_error <<- msg,
      pool = pool,
      handle = request_handle(client_timeout)
    )
  }

  interval <- 1 / rate
  t_start <- now()
  t_switch <- t_start + healthy_seconds
  switch_sent <- FALSE
  t_stop <- Inf
  next_due <- t_start
  # Each iteration starts the requests due, runs curl's callbacks of the
  # finished ones (multi_run(timeout = 0) polls and returns) and, when idle,
  # sleeps a millisecond: at most one iteration per request or per sleep.
  max_iter <- max_requests + ceiling((healthy_seconds + outage_seconds + client_timeout) / 0.001) + 1000L
  for (iter in seq_len(max_iter)) {
    t <- now()
    if (!switch_sent && t >= t_switch) {
      switch_to_failing()
      switch_sent <- TRUE
    }
    if (!is.null(switch_error)) stop("cannot switch the downstream to failing: ", switch_error)
    if (is.finite(outage_start)) t_stop <- outage_start + outage_seconds
    if (t >= t_stop) break
    if (switch_sent && !is.finite(outage_start) && t > t_switch + client_timeout) {
      stop("the downstream did not answer the switch to failing")
    }
    started_now <- 0L
    while (launched < max_requests && next_due <= t) {
      w <- launched %% n + 1L
      if (in_flight[w] >= max_in_flight) break
      launch(w)
      started_now <- started_now + 1L
      # Slip rather than burst: never more than one interval behind.
      next_due <- max(next_due + interval, t - interval)
    }
    polled <- curl::multi_run(timeout = 0, pool = pool)
    if (started_now == 0L && polled$success + polled$error == 0L) Sys.sleep(0.001)
  }
  if (!is.finite(outage_start)) stop("the outage did not start (the driver's loop ran out)")
  # No new requests; wait for those in flight.
  drain_deadline <- now() + client_timeout + 1
  for (iter in seq_len(ceiling((client_timeout + 1) / 0.002) + max_requests)) {
    if (length(curl::multi_list(pool)) == 0L || now() > drain_deadline) break
    polled <- curl::multi_run(timeout = 0, pool = pool)
    if (polled$success + polled$error == 0L) Sys.sleep(0.002)
  }

  idx <- seq_len(launched)
  list(
    t_start = t_start,
    outage_start = outage_start,
    outage_end = t_stop,
    requests = data.frame(
      worker = rec_worker[idx], start = rec_start[idx], end = rec_end[idx],
      status = rec_status[idx], reason = rec_reason[idx], stringsAsFactors = FALSE
    )
  )
}

# ---------------------------------------------------------------------------
# One run: fresh workers, the load, the downstream's log, the analysis

shared_available <- function() {
  ns <- asNamespace("circuitbreaker")
  exists("breaker_store_host", envir = ns, inherits = FALSE) &&
    "breaker_store_host" %in% getNamespaceExports(ns)
}

# Removes the shared segment of the breaker "inventory" in `dir`; try(): an
# older package without breaker_store_unlink() leaves only the directory,
# which the caller removes anyway.
unlink_segment <- function(dir) {
  try({
    store <- circuitbreaker::breaker_store_host(dir)
    circuitbreaker::breaker_store_unlink("inventory", store)
  }, silent = TRUE)
  invisible(NULL)
}

# A new, empty directory for the host store, under /dev/shm (memory) when
# the host has it, so that nothing is shared with any other user of the
# default path.
new_store_dir <- function() {
  parent <- if (dir.exists("/dev/shm") && file.access("/dev/shm", 2) == 0) "/dev/shm" else tempdir()
  dir <- tempfile("cb-demo-", tmpdir = parent)
  if (!dir.create(dir, mode = "0700")) stop("cannot create the store directory ", dir)
  dir
}

run_once <- function(kind, downstream, opts, say) {
  procs <- new_stoppers()
  on.exit(procs$stop_all(), add = TRUE)
  store_dir <- ""
  if (identical(kind, "shared")) {
    store_dir <- new_store_dir()
    # Registered first, so run last: after the workers are gone.
    procs$add(function() {
      unlink_segment(store_dir)
      unlink(store_dir, recursive = TRUE)
    })
    unlink_segment(store_dir)
  }
  client_timeout <- 5
  env <- c(
    HOST_SHARED_DOWNSTREAM_URL = downstream$url("/inventory"),
    HOST_SHARED_BREAKER = kind,
    HOST_SHARED_STORE_DIR = store_dir,
    HOST_SHARED_FAILURE_THRESHOLD = format(opts$failure_threshold),
    HOST_SHARED_RECOVERY_TIMEOUT = format(opts$recovery_timeout, digits = 15),
    HOST_SHARED_DOWNSTREAM_TIMEOUT = "2",
    # The workers quit by themselves after this, whatever happens here.
    HOST_SHARED_MAX_LIFETIME = format(opts$seconds + 180)
  )
  say(sprintf("\n%s: starting %d workers ... ", label(kind), opts$workers))
  t_ready <- now()
  workers <- start_workers(opts$workers, env, procs)
  say(sprintf("ready in %.1f s (ports %s)%s\n", now() - t_ready,
              paste(vapply(workers, function(w) format(w$port), ""), collapse = ", "),
              if (nzchar(store_dir)) paste0("; store ", store_dir) else ""))
  # Healthy for the warm-up (the run before left it failing), then healthy
  # with an empty log for the run.
  downstream$reset()
  warm_up(workers)
  downstream$reset()
  run <- drive(workers, opts$rate, healthy_seconds = 1, outage_seconds = opts$seconds,
               switch_url = downstream$url("/mode?set=failing"), client_timeout = client_timeout)
  log <- downstream$log()
  breakers <- lapply(workers, function(w) {
    tryCatch(get_json(paste0(w$base, "/breaker")), error = function(e) NULL)
  })
  procs$stop_all()
  analyse(kind, run, log, breakers, opts)
}

label <- function(kind) if (identical(kind, "shared")) "host-shared breaker" else "per-process breakers"

# The transitions of the breaker a worker uses, on the time line of the
# outage (seconds since it began): its /breaker answer gives each
# transition's age and the worker's clock when it answered.
breaker_transitions <- function(b, t0) {
  tr <- b$transitions
  data.frame(
    time = as.numeric(b$now) - as.numeric(unlist(tr$seconds_ago)) - t0,
    from = as.character(unlist(tr$from)),
    to = as.character(unlist(tr$to)),
    stringsAsFactors = FALSE
  )
}

# A worker's own log of its downstream calls, on the same time line.
worker_calls <- function(b, t0, w) {
  calls <- b$calls
  data.frame(
    worker = rep(w, length(unlist(calls$admitted))),
    admitted = as.numeric(unlist(calls$admitted)) - t0,
    ended = as.numeric(unlist(calls$ended)) - t0,
    state = as.character(unlist(calls$state)),
    status = as.integer(unlist(calls$status)),
    stringsAsFactors = FALSE
  )
}

analyse <- function(kind, run, log, breakers, opts) {
  n <- opts$workers
  t0 <- run$outage_start
  missing <- which(vapply(breakers, is.null, logical(1)))
  if (length(missing)) stop("worker ", missing[[1]], " did not answer /breaker after the load")
  hits <- data.frame(
    time = as.numeric(unlist(log$log$time)) - t0,
    worker = as.integer(unlist(log$log$worker)),
    state = as.character(unlist(log$log$state)),
    mode = as.character(unlist(log$log$mode)),
    stringsAsFactors = FALSE
  )
  # The calls that reached the dead downstream; a probe is a call the breaker
  # admitted HALF_OPEN. Any other (CLOSED; or OPEN, read by a call admitted
  # CLOSED just before another worker's failure opened the shared breaker)
  # is a call that went through before the breaker knew.
  dead <- hits[hits$mode == "failing", , drop = FALSE]
  dead$probe <- dead$state %in% "HALF_OPEN"
  req <- run$requests
  req$start <- req$start - t0
  req$end <- req$end - t0
  out <- req[req$start >= 0, , drop = FALSE]
  calls <- do.call(rbind, lapply(seq_len(n), function(w) worker_calls(breakers[[w]], t0, w)))
  failed_closed <- calls[calls$state != "HALF_OPEN" & (calls$status == 0L | calls$status >= 500L), , drop = FALSE]

  per_worker <- do.call(rbind, lapply(seq_len(n), function(w) {
    d <- dead[dead$worker %in% w, , drop = FALSE]
    r <- out[out$worker == w, , drop = FALSE]
    tr <- breaker_transitions(breakers[[w]], t0)
    # When the breaker this worker uses first opened in the outage (a shared
    # breaker: the same time for every worker, from the shared log).
    opens <- tr$time[tr$from == "CLOSED" & tr$to == "OPEN" & tr$time > -0.5]
    data.frame(
      worker = w,
      requests = nrow(r),
      fallbacks = sum(r$reason %in% c("open", "failed")),
      reached = nrow(d),
      closed_calls = sum(!d$probe),
      probes = sum(d$probe),
      opened_s = if (length(opens)) min(opens) else NA_real_,
      last_closed_s = if (any(!d$probe)) max(d$time[!d$probe]) else NA_real_,
      # When the client first got the "open" fallback from this worker (the
      # answer's arrival, not the request's start: requests may queue).
      first_open_s = if (any(r$reason %in% "open")) min(r$end[r$reason %in% "open"]) else NA_real_,
      times_opened = as.numeric(breakers[[w]]$metrics$times_opened),
      stringsAsFactors = FALSE
    )
  }))
  # The calls admitted CLOSED that failed, against the first opening of the
  # breaker their worker uses: admitted before it and answered after it,
  # they were in flight when it opened (no breaker can take those back);
  # admitted after it, they would be a breaker letting calls through while
  # OPEN.
  opened_at <- per_worker$opened_s[failed_closed$worker]
  in_flight <- failed_closed[!is.na(opened_at) & failed_closed$admitted < opened_at &
                               failed_closed$ended > opened_at, , drop = FALSE]
  admitted_after <- sum(!is.na(opened_at) & failed_closed$admitted > opened_at)
  # Successes recorded after the breaker's first failure of the outage
  # (calls that reached the downstream just before it failed, answered
  # late): each resets the count of consecutive failures, so the breaker
  # needs failure_threshold more. With a per-process breaker a worker's
  # calls are one after the other, so only a shared breaker can see this.
  breaker_of_call <- if (identical(kind, "shared")) rep(1L, nrow(calls)) else calls$worker
  late_successes <- sum(vapply(split(calls, breaker_of_call), function(cw) {
    f <- cw$ended[cw$status == 0L | cw$status >= 500L]
    if (!length(f)) return(0L)
    sum(cw$status == 200L & cw$ended > min(f))
  }, integer(1)))
  # An open period lasts at least recovery_timeout and ends with one probe,
  # so over the outage one breaker sends at most this many probes.
  max_probes <- floor(opts$seconds / opts$recovery_timeout)
  list(
    kind = kind,
    outage_seconds = run$outage_end - t0,
    per_worker = per_worker,
    dead = dead,
    in_flight = in_flight,
    admitted_after = admitted_after,
    late_successes = late_successes,
    untagged = sum(is.na(dead$worker)),
    dropped = as.numeric(log$dropped) + sum(vapply(breakers, function(b) as.numeric(b$calls_dropped), 1)),
    errors = sum(out$reason %in% "error" | out$status == 0L),
    total = nrow(dead),
    closed_calls = sum(!dead$probe),
    probes = sum(dead$probe),
    max_probes = max_probes,
    per_breaker_bound = opts$failure_threshold + max_probes,
    times_opened = per_worker$times_opened
  )
}

# ---------------------------------------------------------------------------
# The report

num <- function(x, d = 2) ifelse(is.na(x) | !is.finite(x), "-", formatC(x, format = "f", digits = d))

report_run <- function(res, opts) {
  pw <- res$per_worker
  cat(sprintf("\n%s: %d workers, failure_threshold %d, recovery_timeout %s s, %.1f s outage\n",
              label(res$kind), opts$workers, opts$failure_threshold, format(opts$recovery_timeout),
              res$outage_seconds))
  cat("Calls that reached the dead downstream (its log) and when the workers stopped calling it;\n",
      "times in seconds since the outage began (opened: the worker's breaker opened; last closed:\n",
      "its last call admitted CLOSED reached the downstream; first open: its first \"open\" fallback)\n",
      sep = "")
  cols <- c("worker", "requests", "fallbacks", "reached", "closed", "probes", "opened",
            "last closed", "first open")
  last_closed <- suppressWarnings(max(pw$last_closed_s, na.rm = TRUE))
  rows <- rbind(
    cols,
    cbind(format(pw$worker), format(pw$requests), format(pw$fallbacks), format(pw$reached),
          format(pw$closed_calls), format(pw$probes), num(pw$opened_s), num(pw$last_closed_s),
          num(pw$first_open_s)),
    c("total", format(sum(pw$requests)), format(sum(pw$fallbacks)), format(res$total),
      format(res$closed_calls), format(res$probes), "", num(last_closed), "")
  )
  w <- apply(nchar(rows), 2, max)
  for (i in seq_len(nrow(rows))) {
    cells <- vapply(seq_along(w), function(j) formatC(rows[i, j], width = w[[j]]), character(1))
    cat("  ", paste(cells, collapse = "  "), "\n", sep = "")
  }
  if (res$probes) {
    p <- res$dead[res$dead$probe, , drop = FALSE]
    cat(strwrap(paste0("probes at ", paste(sprintf("%.2f (worker %s)", p$time, p$worker), collapse = ", ")),
                width = 100, indent = 2, exdent = 4), sep = "\n")
  }
  if (identical(res$kind, "shared")) {
    cat(sprintf("  the shared breaker opened %d times (times_opened, the same in every worker: %s)\n",
                as.integer(max(res$times_opened)), paste(res$times_opened, collapse = ", ")))
  } else {
    cat(sprintf("  the breakers opened %s times (times_opened, worker by worker)\n",
                paste(res$times_opened, collapse = ", ")))
  }
  if (nrow(res$in_flight)) {
    f <- res$in_flight
    cat(strwrap(paste0(
      "in flight when the breaker opened (admitted CLOSED before it opened, answered after): ",
      paste(sprintf("worker %d, admitted %.3f, answered %.3f", f$worker, f$admitted, f$ended), collapse = "; ")
    ), width = 100, indent = 2, exdent = 4), sep = "\n")
  }
  notes <- c(
    if (res$admitted_after) sprintf("%d calls admitted CLOSED after the breaker opened", res$admitted_after),
    if (res$late_successes) {
      sprintf("%d success%s recorded after the breaker's first failure (each resets the failure count)",
              res$late_successes, if (res$late_successes == 1L) "" else "es")
    },
    if (res$untagged) sprintf("%d calls without a worker number", res$untagged),
    if (res$dropped) sprintf("%d calls beyond the logs", res$dropped),
    if (res$errors) sprintf("%d requests to the workers without an answer", res$errors)
  )
  if (length(notes)) cat("  note: ", paste(notes, collapse = "; "), "\n", sep = "")
}

report_goal <- function(results, opts) {
  n <- opts$workers
  per <- results[["per-process"]]
  shared <- results[["shared"]]
  bound <- per$per_breaker_bound
  cat(sprintf(paste0("\nGoal: over a %s s outage an open period lasts at least %s s, so one breaker sends\n",
                     "failure_threshold + at most %d probe%s = %d calls\n"),
              format(opts$seconds), format(opts$recovery_timeout), per$max_probes,
              if (per$max_probes == 1) "" else "s", bound))
  cat(sprintf("  per-process: %d calls reached the dead downstream (%d closed + %d probes); %d breakers x %d = %d\n",
              per$total, per$closed_calls, per$probes, n, bound, n * bound))
  if (is.null(shared)) {
    cat("  shared:      not run (this circuitbreaker has no breaker_store_host())\n")
    return(invisible(NULL))
  }
  met <- shared$total <= shared$per_breaker_bound
  extra <- nrow(shared$in_flight)
  cat(sprintf("  shared:      %d calls reached the dead downstream (%d closed + %d probes); at most %d: %s\n",
              shared$total, shared$closed_calls, shared$probes, shared$per_breaker_bound,
              if (met) "met" else "NOT met"))
  if (extra) {
    within <- shared$total <= shared$per_breaker_bound + extra
    cat(sprintf(paste0("               %d of the closed calls %s already in flight in other workers when the\n",
                       "               breaker opened (at most N - 1 = %d); counting them, at most %d: %s\n"),
                extra, if (extra == 1L) "was" else "were", n - 1L, shared$per_breaker_bound + extra,
                if (within && extra <= n - 1L) "met" else "NOT met"))
  }
  cat(sprintf("               calls admitted CLOSED after the shared breaker opened: %d (target 0)\n",
              shared$admitted_after))
  if (shared$total > 0) {
    cat(sprintf("  per-process / shared: %.1fx the calls (N = %d)\n", per$total / shared$total, n))
  }
  stopped <- function(r) suppressWarnings(max(r$per_worker$opened_s, na.rm = TRUE))
  cat(sprintf(paste0("  every worker's breaker open (the host stopped calling, probes aside) %s s into the\n",
                     "  outage with per-process breakers, %s s with the shared one\n"),
              num(stopped(per)), num(stopped(shared))))
}

# ---------------------------------------------------------------------------
# Main

values <- parse_options(commandArgs(TRUE), spec)
if (as_flag(values$help, "help")) usage(0, this_file)
quiet <- as_flag(values$quiet, "quiet")
opts <- list()
for (name in names(defaults)) {
  value <- if (is.null(values[[name]])) defaults[[name]] else as_bounded_number(values[[name]], name, spec)
  opts[[gsub("-", "_", name, fixed = TRUE)]] <- value
}
if (opts$recovery_timeout > opts$seconds) {
  bad_option("--recovery-timeout (", opts$recovery_timeout, ") must be at most --seconds (", opts$seconds,
             "): the outage should cover at least one open period")
}

needed <- c("circuitbreaker", "plumber", "webfakes", "callr", "curl", "httpuv", "jsonlite", "later")
missing <- needed[!vapply(needed, requireNamespace, logical(1), quietly = TRUE)]
if (length(missing)) {
  cat("run.R: needs the packages ", paste(missing, collapse = ", "), ", which are not installed\n",
      sep = "", file = stderr())
  quit(save = "no", status = 1)
}

say <- if (quiet) function(...) invisible(NULL) else function(...) cat(..., sep = "")
status <- tryCatch(
  {
    procs <- new_stoppers()
    results <- tryCatch(
      {
        downstream <- start_downstream(procs)
        kinds <- c("per-process", if (shared_available()) "shared")
        say(sprintf(paste0("Host-shared demonstration: %d plumber workers, %s requests/s round robin, ",
                           "1 s healthy, then %s s of HTTP 500 (circuitbreaker %s)\n"),
                    opts$workers, format(opts$rate), format(opts$seconds),
                    format(utils::packageVersion("circuitbreaker"))))
        if (!"shared" %in% kinds) say("This circuitbreaker has no breaker_store_host(): the shared run is skipped.\n")
        stats::setNames(lapply(kinds, function(kind) run_once(kind, downstream, opts, say)), kinds)
      },
      finally = procs$stop_all()
    )
    if (!quiet) {
      for (res in results) report_run(res, opts)
      report_goal(results, opts)
    }
    0L
  },
  error = function(e) {
    cat("run.R: ", conditionMessage(e), "\n", file = stderr(), sep = "")
    1L
  }
)
quit(save = "no", status = status)
