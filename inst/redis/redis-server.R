# A redis-server of our own, for the package's tests and benchmarks only (not
# part of the package's API, and no function of its namespace). It is the
# one way both start Redis:
# * tests/testthat/helper-redis.R sources it from the installed package
#   (system.file("redis", "redis-server.R", package = "circuitbreaker")), so
#   that it is there in a test run of the installed package or the tarball;
# * bench/harness/redis.R sources it from the repository (inst/redis/), so
#   that a benchmark runs the same whichever version of the package is
#   installed.
# It defines redis_server_start() and nothing else at the top level. It
# needs processx, and, to talk to the server by default, a circuitbreaker
# built with hiredis.

# Starts redis-server on `host` (127.0.0.1) and `port` (NULL: a free port
# below 32768, where Linux takes the ports of outgoing connections; another
# one, up to `tries` in all, when the server does not come up there), with
# no persistence, its files (and its log, `redis.log`) in `dir`, which the
# caller owns and removes. Returns once the server answers PING and INFO
# names this very process (not another server that holds the port), at most
# `timeout` seconds per try; an error otherwise, with the end of the log.
#
# * `password`: --requirepass; the url then carries it (percent-encoded).
# * `args`: more redis-server arguments (--protected-mode no for a bridge in
#   a network namespace, say).
# * `wrap`: a command the server runs under (c("ip", "netns", "exec", ns)):
#   it must exec redis-server, so that the process started is the server.
# * `call`: how to send one command (a character vector) to the server,
#   given its url; returns the reply's text or signals an error. By default
#   the package's own client. Where this R process cannot reach `host` (a
#   server inside a network namespace), pass one that runs redis-cli there.
# * `pid_file`: every server's PID is appended to this file as it starts
#   (default: the environment variable CB_REDIS_PIDFILE, which CI sets), so
#   that whoever runs the tests can check that none is left behind, and
#   ignore servers that are not ours.
#
# The result (an environment) has `process` (processx), `pid`, `host`,
# `port`, `url`, `log`, and the functions alive() and stop() (SIGCONT, for a
# server a test stopped, then SIGKILL, and waits until it is gone). The
# server is also killed when this R process ends (processx's cleanup and
# supervisor).
redis_server_start <- function(dir, port = NULL, host = "127.0.0.1", password = NULL, args = character(),
                               wrap = character(), call = NULL, tries = 5L, timeout = 10,
                               pid_file = Sys.getenv("CB_REDIS_PIDFILE")) {
  stopifnot(dir.exists(dir), requireNamespace("processx", quietly = TRUE))
  server <- Sys.which("redis-server")
  if (!nzchar(server)) stop("redis-server is not installed")
  if (is.null(call)) {
    call <- function(url, command) {
      conn <- circuitbreaker:::cb_redis_connect(url, 0.5)
      reply <- circuitbreaker:::cb_redis_call(conn, command)
      if (isTRUE(attr(reply, "redis_error"))) stop("Redis: ", reply)
      reply
    }
  }
  free_port <- function() {
    for (candidate in sample(20000:32767, 50)) {
      probe <- tryCatch(serverSocket(candidate), error = function(e) NULL)
      if (!is.null(probe)) {
        close(probe)
        return(candidate)
      }
    }
    stop("no free port of 127.0.0.1 found in 50 tries")
  }
  ask <- function(url, command) tryCatch(call(url, command), error = function(e) NULL)
  log <- file.path(dir, "redis.log")
  for (attempt in seq_len(if (is.null(port)) tries else 1L)) {
    this_port <- as.integer(if (is.null(port)) free_port() else port)
    url <- if (is.null(password)) {
      sprintf("redis://%s:%d/0", host, this_port)
    } else {
      sprintf("redis://:%s@%s:%d/0", utils::URLencode(password, reserved = TRUE), host, this_port)
    }
    command <- c(wrap, server, "--port", this_port, "--bind", host, "--save", "", "--appendonly", "no",
                 "--dir", dir, "--daemonize", "no", "--loglevel", "warning",
                 if (!is.null(password)) c("--requirepass", password), args)
    process <- processx::process$new(command[[1]], command[-1], stdout = log, stderr = "2>&1",
                                     cleanup = TRUE, supervise = TRUE)
    pid <- process$get_pid()
    if (nzchar(pid_file)) cat(pid, "\n", sep = "", file = pid_file, append = TRUE)
    # Every 50 ms until it answers, dies or the time is up.
    ours <- FALSE
    deadline <- Sys.time() + timeout
    for (i in seq_len(ceiling(timeout / 0.05) + 1L)) {
      if (!process$is_alive() || Sys.time() > deadline) break
      if (identical(as.character(ask(url, "PING")), "PONG")) {
        info <- ask(url, c("INFO", "server"))
        ours <- identical(sub("(?s).*process_id:([0-9]+).*", "\\1", paste(info, collapse = "\n"), perl = TRUE),
                          as.character(pid))
        break
      }
      Sys.sleep(0.05)
    }
    if (ours) {
      self <- new.env(parent = emptyenv())
      self$process <- process
      self$pid <- pid
      self$host <- host
      self$port <- this_port
      self$url <- url
      self$log <- log
      self$alive <- function() process$is_alive()
      self$stop <- function() {
        if (process$is_alive()) {
          process$signal(tools::SIGCONT)  # a test may have stopped it
          process$kill()
        }
        process$wait(5000)
        invisible(NULL)
      }
      return(self)
    }
    if (process$is_alive()) process$kill()
  }
  stop("redis-server did not start on ", host, if (!is.null(port)) paste0(":", port),
       if (is.null(port)) paste0(" in ", tries, " tries"), ":\n",
       paste(utils::tail(readLines(log, warn = FALSE), 10), collapse = "\n"))
}
