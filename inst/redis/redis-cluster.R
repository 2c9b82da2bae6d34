# A Redis Cluster of our own, for the package's tests and benchmarks only
# (not part of the package's API): masters with replicas, every node a
# redis-server started by redis_server_start() (redis-server.R) on
# 127.0.0.1 and a free port, so that PIDs, logs and cleanup work as for a
# single server. It is sourced like redis-server.R (tests: from the
# installed package; benchmarks: from inst/redis/), after redis-server.R and
# redis-cli.R, whose functions it uses. It defines redis_cluster_start() and
# nothing else at the top level. It needs processx, redis-server and
# redis-cli (7.0 or later: `redis-cli --cluster`), and no hiredis.

# Starts `masters` (at least 3, as `redis-cli --cluster create` requires)
# masters with `replicas` replicas each, each node in a directory of its own
# under `dir` (which the caller owns and removes), with
# cluster-node-timeout `node_timeout` ms (how long a master may be
# unreachable before its replicas take over). Returns once every node says
# cluster_state:ok, knows every other node (no handshake, no failure flag),
# and every replica's link to its master is up (so that a failover can
# happen at once), at most `timeout` seconds in all; an error otherwise, and
# every node started is stopped.
#
# `pid_file`: every node's PID is appended to it (redis_server_start()).
#
# `tls`: NULL (plain TCP), or redis_server_start()'s `tls` (the server's
# certificate and key, the CA, ...): every node then serves TLS only, its
# cluster bus and its replication too (--tls-cluster yes --tls-replication
# yes; the certificate must then also be good for clientAuth, as
# redis_tls_certs()'s server certificate is), the cluster is created with
# `redis-cli --tls ... --cluster create`, and every command of the result
# goes through redis-cli --tls (`cli_tls`, the nodes' redis_cli() `tls`).
#
# The result (an environment) has:
# * `nodes`: a data frame, one row per node: port, pid, role ("master" or
#   "replica"), id (the cluster node id) and master_port (a replica's
#   master; NA for a master), as when the cluster became ready;
# * `seeds`: "127.0.0.1:<port>" of every node;
# * `cli_tls`: NULL, or the `tls` with which redis_cli() reaches a node;
# * `timings`: seconds spent starting the servers (`start`), in
#   `redis-cli --cluster create` (`create`), waiting until ready (`ready`)
#   and in all (`total`);
# * cli(port, ...): one command on node `port` (redis_cli()); cluster =
#   TRUE follows redirects;
# * role(port): "master", "replica", or NA when the node does not answer;
# * state(port): its cluster_state ("ok", "fail"), or NA;
# * master_of(key): the port of the live master that serves `key` now, in
#   its own view (NA when none does);
# * kill(port): SIGKILL that node and wait until it is gone;
# * wait_failover(port, timeout): after kill(port) of a master, waits until
#   one of its replicas says it is a master and every live node says
#   cluster_state:ok; returns the new master's port (NA after `timeout`
#   seconds), with attribute "seconds" (the time waited);
# * move_slot(slot, to_port): moves `slot` and its keys to master
#   `to_port` as a resharding does (SETSLOT IMPORTING / MIGRATING, MIGRATE,
#   SETSLOT NODE on every master);
# * stop(): stops every node.
# Nodes are also killed when this R process ends (processx's supervisor).
redis_cluster_start <- function(dir, masters = 3L, replicas = 1L, node_timeout = 1000, timeout = 30,
                                pid_file = Sys.getenv("CB_REDIS_PIDFILE"), tls = NULL) {
  stopifnot(dir.exists(dir), masters >= 3, replicas >= 0, requireNamespace("processx", quietly = TRUE))
  cli <- Sys.which("redis-cli")
  if (!nzchar(cli)) stop("redis-cli is not installed")
  t0 <- Sys.time()
  deadline <- t0 + timeout
  n <- as.integer(masters * (1 + replicas))
  servers <- list()
  ready <- FALSE
  on.exit(if (!ready) for (s in servers) s$stop(), add = TRUE)
  # Every command to a node: through redis-cli, with TLS when the nodes
  # serve it (cli_tls is known once the first node has started).
  cli_tls <- NULL
  node_cli <- function(port, args, ...) redis_cli(port, args, ..., tls = cli_tls)
  # redis_server_start() checks that a node is up with this (PING, INFO);
  # a TLS node, with its own check through redis-cli --tls.
  call <- if (is.null(tls)) {
    function(url, command) {
      paste(node_cli(as.integer(sub("^.*:([0-9]+)/[0-9]+$", "\\1", url)), command, timeout = 2), collapse = "\n")
    }
  }
  tls_args <- if (!is.null(tls)) c("--tls-cluster", "yes", "--tls-replication", "yes")
  for (i in seq_len(n)) {
    node_dir <- file.path(dir, sprintf("node%d", i))
    dir.create(node_dir)
    # A node's cluster bus listens on port + 10000: when that is taken the
    # node does not start, and redis_server_start() tries another port.
    # --repl-diskless-sync-delay 0: a master sends its first replica the
    # data at once, instead of waiting 5 s (the default) for more replicas.
    servers[[i]] <- redis_server_start(node_dir, call = call, pid_file = pid_file,
                                       args = c("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                                                "--cluster-node-timeout", as.integer(node_timeout),
                                                "--repl-diskless-sync-delay", 0L, tls_args),
                                       tls = tls)
    cli_tls <- servers[[i]]$cli_tls
  }
  ports <- vapply(servers, function(s) as.integer(s$port), integer(1))
  t1 <- Sys.time()
  created <- processx::run(cli, c(redis_cli_tls_args(cli_tls), "--cluster", "create", paste0("127.0.0.1:", ports),
                                  "--cluster-replicas", as.integer(replicas), "--cluster-yes"),
                           timeout = max(1, as.numeric(deadline - Sys.time(), units = "secs")),
                           error_on_status = FALSE)
  if (created$status != 0L) {
    stop("redis-cli --cluster create failed:\n",
         paste(utils::tail(strsplit(paste(created$stdout, created$stderr), "\n")[[1]], 10), collapse = "\n"))
  }
  t2 <- Sys.time()

  self <- new.env(parent = emptyenv())
  self$servers <- servers
  self$seeds <- paste0("127.0.0.1:", ports)
  self$cli_tls <- cli_tls
  server_of <- function(port) servers[[match(as.integer(port), ports)]]
  ask <- function(port, ...) tryCatch(node_cli(port, c(...), timeout = 2), error = function(e) NULL)
  field <- function(lines, name) {
    hit <- grep(paste0("^", name, ":"), lines, value = TRUE)
    if (length(hit) == 0L) NA_character_ else trimws(sub("^[^:]*:", "", hit[[1]]))
  }
  self$cli <- function(port, ..., cluster = FALSE) node_cli(port, c(...), cluster = cluster)
  self$role <- function(port) {
    role <- ask(port, "ROLE")
    if (length(role) == 0L) NA_character_ else if (role[[1]] == "slave") "replica" else role[[1]]
  }
  self$state <- function(port) field(ask(port, "CLUSTER", "INFO"), "cluster_state")
  alive <- function() ports[vapply(ports, function(p) server_of(p)$alive(), logical(1))]
  # Whether master `port` serves `slot`, in its own view (the slot ranges of
  # its "myself" line in CLUSTER NODES; "[slot->-id]" migration marks aside).
  serves <- function(port, slot) {
    me <- grep("myself", ask(port, "CLUSTER", "NODES"), value = TRUE)
    if (length(me) == 0L) return(FALSE)
    ranges <- strsplit(trimws(me[[1]]), " ", fixed = TRUE)[[1]][-(1:8)]
    for (r in ranges[grepl("^[0-9]+(-[0-9]+)?$", ranges)]) {
      bounds <- as.integer(strsplit(r, "-", fixed = TRUE)[[1]])
      if (slot >= min(bounds) && slot <= max(bounds)) return(TRUE)
    }
    FALSE
  }
  owner <- function(slot) {
    for (port in alive()) if (identical(self$role(port), "master") && serves(port, slot)) return(port)
    NA_integer_
  }
  self$master_of <- function(key) owner(as.integer(node_cli(alive()[[1]], c("CLUSTER", "KEYSLOT", key))))
  self$kill <- function(port) server_of(port)$stop()
  self$stop <- function() {
    for (s in servers) s$stop()
    invisible(NULL)
  }
  # Ready: every live node says ok and knows every other node without a
  # handshake or failure flag; every replica's link is up.
  self$ready <- function(live = alive()) {
    for (port in live) {
      if (!identical(self$state(port), "ok")) return(FALSE)
      known <- ask(port, "CLUSTER", "NODES")
      if (length(known) != n || any(grepl("handshake|noaddr|fail", known))) return(FALSE)
      if (identical(self$role(port), "replica") &&
          !identical(field(ask(port, "INFO", "replication"), "master_link_status"), "up")) {
        return(FALSE)
      }
    }
    TRUE
  }
  repeat {
    if (self$ready()) break
    if (Sys.time() > deadline) stop("the cluster was not ready within ", timeout, " s")
    Sys.sleep(0.05)
  }
  t3 <- Sys.time()
  describe <- function(port) {
    role <- node_cli(port, "ROLE")
    data.frame(port = port, pid = server_of(port)$pid, role = if (role[[1]] == "slave") "replica" else role[[1]],
               id = node_cli(port, c("CLUSTER", "MYID")),
               master_port = if (role[[1]] == "slave") as.integer(role[[3]]) else NA_integer_)
  }
  self$nodes <- do.call(rbind, lapply(ports, describe))
  secs <- function(a, b) as.numeric(b - a, units = "secs")
  self$timings <- c(start = secs(t0, t1), create = secs(t1, t2), ready = secs(t2, t3), total = secs(t0, t3))

  self$wait_failover <- function(port, timeout = 30) {
    started <- Sys.time()
    candidates <- self$nodes$port[self$nodes$master_port %in% as.integer(port)]
    repeat {
      live <- alive()
      promoted <- candidates[vapply(candidates, function(p) identical(self$role(p), "master"), logical(1))]
      if (length(promoted) > 0L && all(vapply(live, function(p) identical(self$state(p), "ok"), logical(1)))) {
        return(structure(promoted[[1]], seconds = secs(started, Sys.time())))
      }
      if (secs(started, Sys.time()) > timeout) return(structure(NA_integer_, seconds = secs(started, Sys.time())))
      Sys.sleep(0.05)
    }
  }

  self$move_slot <- function(slot, to_port) {
    slot <- as.integer(slot)
    to_port <- as.integer(to_port)
    from_port <- owner(slot)
    if (is.na(from_port)) stop("no live master serves slot ", slot)
    if (from_port == to_port) return(invisible(from_port))
    from_id <- node_cli(from_port, c("CLUSTER", "MYID"))
    to_id <- node_cli(to_port, c("CLUSTER", "MYID"))
    node_cli(to_port, c("CLUSTER", "SETSLOT", slot, "IMPORTING", from_id))
    node_cli(from_port, c("CLUSTER", "SETSLOT", slot, "MIGRATING", to_id))
    for (i in seq_len(10000L)) {
      keys <- node_cli(from_port, c("CLUSTER", "GETKEYSINSLOT", slot, 100L))
      keys <- keys[nzchar(keys)]
      if (length(keys) == 0L) break
      node_cli(from_port, c("MIGRATE", "127.0.0.1", to_port, "", 0L, 5000L, "KEYS", keys))
    }
    # The target first, then the source, then every other master (as
    # redis-cli --cluster reshard does), so that no node points back.
    masters <- Filter(function(p) identical(self$role(p), "master"), alive())
    for (port in unique(c(to_port, from_port, masters))) {
      node_cli(port, c("CLUSTER", "SETSLOT", slot, "NODE", to_id))
    }
    invisible(from_port)
  }

  ready <- TRUE
  self
}
