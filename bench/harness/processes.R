# The background processes of the benchmarks: the list of stop functions
# they are cleaned up with, plumber APIs and webfakes apps on 127.0.0.1, and
# the wait until a server answers. Uses request_handle() (http.R) and now()
# (clock.R); callr, httpuv, plumber and webfakes where a function needs them.

# Stop functions (processes, servers, namespaces), run once each, newest
# first, by stop_all().
new_stoppers <- function() {
  stoppers <- list()
  list(
    add = function(stopper) {
      stoppers[[length(stoppers) + 1L]] <<- stopper
      invisible(NULL)
    },
    stop_all = function() {
      for (stopper in rev(stoppers)) try(stopper(), silent = TRUE)
      stoppers <<- list()
      invisible(NULL)
    }
  )
}

# A plumber API (`api_file`) in a background R process (callr, supervised:
# killed with this R process even if it dies without cleaning up) on a
# random free port of 127.0.0.1, with the environment variables `env`; its
# output goes to a log file. Killed by `procs` (new_stoppers()), which also
# removes the log unless `keep_log`. Does not wait: see start_ready().
start_plumber <- function(api_file, env, procs, log_prefix = "bench-plumber-", keep_log = FALSE) {
  port <- httpuv::randomPort(host = "127.0.0.1")
  log <- tempfile(log_prefix, fileext = ".log")
  process <- callr::r_bg(
    function(api_file, port, env) {
      do.call(Sys.setenv, as.list(env))
      loadNamespace("circuitbreaker")  # the installed package (callr passes .libPaths())
      router <- plumber::plumb(api_file)
      router$run(host = "127.0.0.1", port = port, docs = FALSE, quiet = TRUE)
    },
    args = list(api_file = api_file, port = port, env = env),
    stdout = log, stderr = "2>&1", supervise = TRUE
  )
  procs$add(function() {
    process$kill()
    if (!keep_log) unlink(log)
  })
  list(
    process = process,
    port = port,
    base = paste0("http://127.0.0.1:", port),
    log = log,
    errors = function() if (file.exists(log)) readLines(log, warn = FALSE) else character()
  )
}

# Whether `server` (start_plumber()) answers `path` with HTTP 200 within
# `timeout` seconds, polling every 0.1 s; FALSE at once when it died.
wait_ready <- function(server, path, timeout) {
  deadline <- now() + timeout
  for (i in seq_len(ceiling(timeout / 0.1) + 1L)) {
    if (!server$process$is_alive()) return(FALSE)
    ok <- tryCatch(
      curl::curl_fetch_memory(paste0(server$base, path), handle = request_handle(1))$status_code == 200,
      error = function(e) FALSE
    )
    if (ok) return(TRUE)
    if (now() > deadline) return(FALSE)
    Sys.sleep(0.1)
  }
  FALSE
}

# `server` (by default start()), then wait_ready(); a server that died (its
# port taken between the choice and the bind, say) is started again, up to
# `attempts` times in all. Returns the server that answers; calls
# `fail(server)` when none did. Pass `server` to start several at once (they
# load in parallel) and wait for each in turn.
start_ready <- function(start, path, timeout, fail, attempts = 3L, server = start()) {
  for (attempt in seq_len(attempts)) {
    if (attempt > 1L) server <- start()
    if (wait_ready(server, path, timeout)) return(server)
    if (attempt == attempts || server$process$is_alive()) break
  }
  fail(server)
}

# A webfakes `app` in a background process (supervised) on 127.0.0.1, with
# `num_threads` threads, no keep-alive and no logs; stopped by `procs`.
# Returns the webfakes process (use $url(path)).
start_webfakes <- function(app, procs, num_threads) {
  opts <- webfakes::server_opts(
    remote = TRUE, num_threads = num_threads, interfaces = "127.0.0.1",
    enable_keep_alive = FALSE, tcp_nodelay = TRUE,
    access_log_file = FALSE, error_log_file = FALSE
  )
  process <- webfakes::new_app_process(app, opts = opts, start = FALSE, auto_start = FALSE,
                                       callr_opts = list(supervise = TRUE))
  procs$add(function() process$stop())
  process$start()
  process
}

# Waits (at most `timeout` s, polling every 0.1 s) until every worker (an
# environment or list with `dir`, `proc`, a processx process, and `id`) has
# written the file `name` in its dir; stops with the end of a worker's log
# (<dir>/log) when one died or the time ran out. `what` names the workers in
# that message ("worker", "tls worker").
wait_files <- function(workers, name, timeout, what = "worker") {
  deadline <- as.numeric(Sys.time()) + timeout
  for (i in seq_len(ceiling(timeout / 0.1) + 1L)) {
    missing <- Filter(function(w) !file.exists(file.path(w$dir, name)), workers)
    if (!length(missing)) return(invisible(TRUE))
    dead <- Filter(function(w) !w$proc$is_alive(), missing)
    if (length(dead) || as.numeric(Sys.time()) > deadline) {
      w <- if (length(dead)) dead[[1]] else missing[[1]]
      log <- file.path(w$dir, "log")
      stop(what, " ", w$id, if (length(dead)) " died before writing " else " did not write ", name,
           " within ", timeout, " s:\n",
           paste(utils::tail(if (file.exists(log)) readLines(log, warn = FALSE) else "", 20), collapse = "\n"))
    }
    Sys.sleep(0.1)
  }
  stop(what, "s did not write ", name, " within ", timeout, " s")
}
