# A master with a replica behind Redis Sentinel, of our own, for the
# package's tests and benchmarks only (not part of the package's API). Every
# process (the master, the replica, each sentinel, which is
# `redis-server <config> --sentinel`) is started by redis_server_start()
# (redis-server.R) on 127.0.0.1 and a free port, so that PIDs, logs and
# cleanup work as for a single server. It is sourced like redis-server.R,
# after redis-server.R and redis-cli.R, whose functions it uses. It defines
# redis_sentinel_start() and nothing else at the top level. It needs
# processx, redis-server and redis-cli, and no hiredis.

# Starts a master, one replica of it and `sentinels` sentinels that monitor
# the master as `master_name` with quorum `quorum`, each in a directory of
# its own under `dir` (which the caller owns and removes). A sentinel thinks
# the master down after `down_after` ms without an answer; a failover that
# has not completed after `failover_timeout` ms is abandoned (and a new one
# waits twice that: keep it short in tests). Returns once every sentinel
# names the master, counts the replica (its link up) and the other
# sentinels, and SENTINEL CKQUORUM says a failover can be authorised, at
# most `timeout` seconds in all; an error otherwise, and every process
# started is stopped.
#
# * `password`: the master's and replica's requirepass (and masterauth, so
#   that either can replicate from the other after a failover), given to the
#   sentinels as auth-pass.
# * `sentinel_password`: each sentinel's requirepass, and the sentinel-pass
#   with which they talk to one another.
# * `pid_file`: every PID is appended to it (redis_server_start()).
# * `tls`: NULL (plain TCP), or redis_server_start()'s `tls` (the server's
#   certificate and key, the CA, ...): every process then serves TLS only;
#   the replica replicates, and the sentinels talk to the master, the
#   replica and one another, over TLS (--tls-replication yes; the
#   certificate must then also be good for clientAuth, as
#   redis_tls_certs()'s server certificate is); every command of the
#   result goes through redis-cli --tls (`cli_tls`).
#
# The sentinels' configuration files hold the passwords, and are written
# readable by their owner only (also when a sentinel rewrites its file: it
# starts with umask 077).
#
# The result (an environment) has:
# * `master`, `replica`: their redis_server_start() results (the ports as
#   started: after a failover the replica is the master);
# * `sentinels`: a list of redis_server_start() results;
# * `sentinel_addrs`: "127.0.0.1:<port>" of every sentinel;
# * `cli_tls`: NULL, or the `tls` with which redis_cli() reaches a process;
# * `master_name`, `nodes` (a data frame: role "master", "replica" or
#   "sentinel", port, pid), `timings` (seconds: `start`, `ready`, `total`);
# * cli(port, ...): one command on any of its processes (the right password
#   is used);
# * master_addr(sentinel_port): what that sentinel answers to SENTINEL
#   get-master-addr-by-name ("127.0.0.1:<port>"), or NA;
# * role(port): "master", "replica", or NA when the node does not answer;
# * kill(port): SIGKILL that process and wait until it is gone;
# * wait_failover(port, timeout): after kill(port) of the master, waits
#   until every live sentinel names another master, and that node says it
#   is a master; returns its port (NA after `timeout` seconds), with
#   attribute "seconds" (the time waited);
# * stop(): stops every process.
redis_sentinel_start <- function(dir, quorum = 2L, sentinels = 3L, down_after = 1000, failover_timeout = 3000,
                                 master_name = "mymaster", password = NULL, sentinel_password = NULL,
                                 timeout = 30, pid_file = Sys.getenv("CB_REDIS_PIDFILE"), tls = NULL) {
  stopifnot(dir.exists(dir), sentinels >= 1, quorum >= 1, quorum <= sentinels,
            grepl("^[A-Za-z0-9_.-]+$", master_name), !grepl("[\r\n]", c(password, sentinel_password)),
            requireNamespace("processx", quietly = TRUE))
  server_bin <- Sys.which("redis-server")
  if (!nzchar(server_bin)) stop("redis-server is not installed")
  t0 <- Sys.time()
  deadline <- t0 + timeout
  started <- list()
  ready <- FALSE
  on.exit(if (!ready) for (s in started) s$stop(), add = TRUE)
  port_of_url <- function(url) as.integer(sub("^.*:([0-9]+)/[0-9]+$", "\\1", url))
  # Every command to a process: through redis-cli, with TLS when they serve
  # it (cli_tls is known once the master has started).
  cli_tls <- NULL
  node_cli <- function(port, args, ...) redis_cli(port, args, ..., tls = cli_tls)
  # redis_server_start() checks that a process is up with this (PING, INFO);
  # a TLS one, with its own check through redis-cli --tls.
  call_with <- function(pass) {
    if (is.null(tls)) {
      function(url, command) paste(node_cli(port_of_url(url), command, password = pass, timeout = 2), collapse = "\n")
    }
  }
  tls_args <- if (!is.null(tls)) c("--tls-replication", "yes")
  node_dir <- function(name) {
    path <- file.path(dir, name)
    dir.create(path)
    normalizePath(path)
  }
  auth_args <- if (is.null(password)) character() else c("--masterauth", password)
  # --repl-diskless-sync-delay 0: the master sends the replica the data at
  # once, instead of waiting 5 s (the default) for more replicas.
  master <- redis_server_start(node_dir("master"), password = password, call = call_with(password),
                               pid_file = pid_file, args = c(auth_args, "--repl-diskless-sync-delay", 0L, tls_args),
                               tls = tls)
  cli_tls <- master$cli_tls
  started[["master"]] <- master
  replica <- redis_server_start(node_dir("replica"), password = password, call = call_with(password),
                                pid_file = pid_file,
                                args = c(auth_args, "--repl-diskless-sync-delay", 0L, tls_args,
                                         "--replicaof", "127.0.0.1", master$port),
                                tls = tls)
  started[["replica"]] <- replica

  # A sentinel needs a configuration file that it can rewrite (it records
  # what it learns there), named first on its command line: the server is
  # started through sh, which execs it with the file before the arguments
  # that redis_server_start() gives.
  # Values in the file are quoted as Redis reads them ("..." with \" and \\).
  quote_conf <- function(x) paste0('"', gsub("([\"\\\\])", "\\\\\\1", x), '"')
  sentinel_conf <- function(path) {
    lines <- c(sprintf("sentinel monitor %s 127.0.0.1 %d %d", master_name, master$port, as.integer(quorum)),
               sprintf("sentinel down-after-milliseconds %s %d", master_name, as.integer(down_after)),
               sprintf("sentinel failover-timeout %s %d", master_name, as.integer(failover_timeout)),
               sprintf("sentinel parallel-syncs %s 1", master_name),
               if (!is.null(password)) sprintf("sentinel auth-pass %s %s", master_name, quote_conf(password)),
               if (!is.null(sentinel_password)) sprintf("sentinel sentinel-pass %s", quote_conf(sentinel_password)))
    file.create(path)
    Sys.chmod(path, "0600")
    writeLines(lines, path)
    path
  }
  # A sentinel rewrites its file (a new file renamed over the old one) with
  # the permissions its umask allows: 077, so that it stays the owner's.
  old_umask <- Sys.umask("077")
  on.exit(Sys.umask(old_umask), add = TRUE)
  sentinel_list <- list()
  for (i in seq_len(sentinels)) {
    sdir <- node_dir(sprintf("sentinel%d", i))
    conf <- sentinel_conf(file.path(sdir, "sentinel.conf"))
    sentinel_list[[i]] <- redis_server_start(
      sdir, password = sentinel_password, call = call_with(sentinel_password), pid_file = pid_file,
      wrap = c("/bin/sh", "-c", sprintf('exec "$0" %s --sentinel "$@"', shQuote(conf))), args = tls_args, tls = tls
    )
    started[[sprintf("sentinel%d", i)]] <- sentinel_list[[i]]
  }
  Sys.umask(old_umask)
  t1 <- Sys.time()

  self <- new.env(parent = emptyenv())
  self$master <- master
  self$replica <- replica
  self$sentinels <- sentinel_list
  self$master_name <- master_name
  self$cli_tls <- cli_tls
  sentinel_ports <- vapply(sentinel_list, function(s) as.integer(s$port), integer(1))
  self$sentinel_addrs <- paste0("127.0.0.1:", sentinel_ports)
  all <- c(list(master, replica), sentinel_list)
  all_ports <- vapply(all, function(s) as.integer(s$port), integer(1))
  server_of <- function(port) all[[match(as.integer(port), all_ports)]]
  pass_of <- function(port) if (as.integer(port) %in% sentinel_ports) sentinel_password else password
  ask <- function(port, ...) {
    tryCatch(node_cli(port, c(...), password = pass_of(port), timeout = 2), error = function(e) NULL)
  }
  field <- function(lines, name) {
    hit <- grep(paste0("^", name, ":"), lines, value = TRUE)
    if (length(hit) == 0L) NA_character_ else trimws(sub("^[^:]*:", "", hit[[1]]))
  }
  # SENTINEL MASTER's reply, raw: field and value on alternate lines.
  pairs <- function(lines) {
    if (length(lines) < 2L) return(list())
    keys <- lines[seq(1L, length(lines) - 1L, by = 2L)]
    stats::setNames(as.list(lines[seq(2L, length(lines), by = 2L)]), keys)
  }
  self$cli <- function(port, ...) node_cli(port, c(...), password = pass_of(port))
  self$role <- function(port) {
    role <- ask(port, "ROLE")
    if (length(role) == 0L) NA_character_ else if (role[[1]] == "slave") "replica" else role[[1]]
  }
  self$master_addr <- function(sentinel_port) {
    addr <- ask(sentinel_port, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", master_name)
    if (length(addr) != 2L) NA_character_ else paste0(addr[[1]], ":", addr[[2]])
  }
  self$kill <- function(port) server_of(port)$stop()
  self$stop <- function() {
    for (s in all) s$stop()
    invisible(NULL)
  }
  live_sentinels <- function() sentinel_ports[vapply(sentinel_list, function(s) s$alive(), logical(1))]
  master_addr <- paste0("127.0.0.1:", master$port)
  ready_now <- function() {
    if (!identical(field(ask(replica$port, "INFO", "replication"), "master_link_status"), "up")) return(FALSE)
    for (port in sentinel_ports) {
      if (!identical(self$master_addr(port), master_addr)) return(FALSE)
      m <- pairs(ask(port, "SENTINEL", "MASTER", master_name))
      if (!identical(m[["flags"]], "master") || !identical(m[["num-slaves"]], "1") ||
          !identical(m[["num-other-sentinels"]], as.character(sentinels - 1L))) {
        return(FALSE)
      }
      replicas <- ask(port, "SENTINEL", "REPLICAS", master_name)
      if (!any(replicas == "master-link-status") ||
          !identical(replicas[[which(replicas == "master-link-status")[[1]] + 1L]], "ok")) {
        return(FALSE)
      }
      if (is.null(ask(port, "SENTINEL", "CKQUORUM", master_name))) return(FALSE)
    }
    TRUE
  }
  repeat {
    if (ready_now()) break
    if (Sys.time() > deadline) stop("the sentinels were not ready within ", timeout, " s")
    Sys.sleep(0.05)
  }
  t2 <- Sys.time()
  secs <- function(a, b) as.numeric(b - a, units = "secs")
  self$timings <- c(start = secs(t0, t1), ready = secs(t1, t2), total = secs(t0, t2))
  self$nodes <- data.frame(role = c("master", "replica", rep("sentinel", sentinels)), port = all_ports,
                           pid = vapply(all, function(s) as.integer(s$pid), integer(1)))

  self$wait_failover <- function(port, timeout = 30) {
    started_at <- Sys.time()
    old <- paste0("127.0.0.1:", port)
    repeat {
      said <- vapply(live_sentinels(), self$master_addr, character(1))
      if (length(said) > 0L && !anyNA(said) && length(unique(said)) == 1L && said[[1]] != old) {
        new_port <- as.integer(sub("^.*:", "", said[[1]]))
        if (identical(self$role(new_port), "master")) {
          return(structure(new_port, seconds = secs(started_at, Sys.time())))
        }
      }
      if (secs(started_at, Sys.time()) > timeout) {
        return(structure(NA_integer_, seconds = secs(started_at, Sys.time())))
      }
      Sys.sleep(0.05)
    }
  }

  ready <- TRUE
  self
}
