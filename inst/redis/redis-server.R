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
# * `tls`: NULL (plain TCP), or a list to serve TLS only: `cert_file` and
#   `key_file` (the server's certificate and key), `ca_file` (the CA that
#   signs the clients' certificates; Redis needs one for `auth_clients`
#   other than "no" or with --tls-cluster or --tls-replication) and
#   `auth_clients` ("no", the default, "yes" or "optional": whether a
#   client must show a certificate). The server then listens with TLS only,
#   on `port` (--port 0 --tls-port <port> --tls-cert-file ...
#   --tls-key-file ... --tls-ca-cert-file ... --tls-auth-clients ...), and
#   `url` is rediss://. The package's own client may speak no TLS: unless
#   `call` is given, the readiness check (PING, INFO) goes through
#   `redis-cli --tls` (redis_cli() of redis-cli.R, which must be sourced
#   too) with `--cacert ca_file` and, when `tls` gives them,
#   `client_cert_file` and `client_key_file` (the certificate it shows:
#   needed for auth_clients = "yes"), `check_ca_file` (the CA it trusts,
#   instead of ca_file: for a server certificate of another CA) and
#   `check_insecure` (TRUE: it checks no certificate, for an expired one).
#   `args` may add more (--tls-cluster yes, --tls-replication yes).
# * `pid_file`: every server's PID is appended to this file as it starts
#   (default: the environment variable CB_REDIS_PIDFILE, which CI sets), so
#   that whoever runs the tests can check that none is left behind, and
#   ignore servers that are not ours.
#
# The result (an environment) has `process` (processx), `pid`, `host`,
# `port`, `url`, `log`, with `tls` the list `tls` (NULL for a plain server)
# and `cli_tls` the `tls` that redis_cli() takes to reach it (NULL for a
# plain server), and the functions alive() and stop() (SIGCONT, for a
# server a test stopped, then SIGKILL, and waits until it is gone). The
# server is also killed when this R process ends (processx's cleanup and
# supervisor).
redis_server_start <- function(dir, port = NULL, host = "127.0.0.1", password = NULL, args = character(),
                               wrap = character(), call = NULL, tries = 5L, timeout = 10,
                               pid_file = Sys.getenv("CB_REDIS_PIDFILE"), tls = NULL) {
  stopifnot(dir.exists(dir), requireNamespace("processx", quietly = TRUE))
  server <- Sys.which("redis-server")
  if (!nzchar(server)) stop("redis-server is not installed")
  cli_tls <- NULL
  if (!is.null(tls)) {
    known <- c("cert_file", "key_file", "ca_file", "auth_clients", "client_cert_file", "client_key_file",
               "check_ca_file", "check_insecure")
    stopifnot(is.list(tls), !is.null(names(tls)), all(names(tls) %in% known),
              is.character(tls$cert_file), file.exists(tls$cert_file),
              is.character(tls$key_file), file.exists(tls$key_file),
              is.null(tls$ca_file) || file.exists(tls$ca_file))
    tls$auth_clients <- if (is.null(tls$auth_clients)) "no" else tls$auth_clients
    stopifnot(tls$auth_clients %in% c("no", "yes", "optional"))
    cli_tls <- list(ca_file = if (is.null(tls$check_ca_file)) tls$ca_file else tls$check_ca_file,
                    cert_file = tls$client_cert_file, key_file = tls$client_key_file,
                    insecure = isTRUE(tls$check_insecure))
    cli_tls <- cli_tls[!vapply(cli_tls, is.null, logical(1))]
    if (is.null(call)) {
      if (!exists("redis_cli", mode = "function")) stop("a TLS server needs redis_cli(): source redis-cli.R too")
      call <- function(url, command) {
        port <- as.integer(sub("^.*:([0-9]+)/[0-9]+$", "\\1", url))
        paste(redis_cli(port, command, password = password, timeout = 2, tls = cli_tls), collapse = "\n")
      }
    }
  }
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
    # TLS only: no plain port, the TLS one where the plain one would be.
    listen <- c("--port", this_port)
    if (!is.null(tls)) {
      url <- sub("^redis://", "rediss://", url)
      listen <- c("--port", 0L, "--tls-port", this_port, "--tls-cert-file", tls$cert_file,
                  "--tls-key-file", tls$key_file, if (!is.null(tls$ca_file)) c("--tls-ca-cert-file", tls$ca_file),
                  "--tls-auth-clients", tls$auth_clients)
    }
    command <- c(wrap, server, listen, "--bind", host, "--save", "", "--appendonly", "no",
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
      if (!is.null(tls)) {
        self$tls <- tls
        self$cli_tls <- cli_tls
      }
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
