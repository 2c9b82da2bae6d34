# Redis over TLS for the tests (test-store-redis-tls.R): certificates made
# with the openssl command (inst/redis/redis-tls.R's redis_tls_certs()) and
# real redis-servers with a TLS port only (redis_server_start(tls = ), of
# helper-redis.R), which the tests reach through redis-cli --tls
# (redis_cli(tls = ) of helper-redis-topologies.R), all from the installed
# package. Tests skip where TLS cannot be tested: no openssl command, a
# redis-server built without TLS, or a circuitbreaker built without it.
for (redis_tls_file in c("redis-cli.R", "redis-tls.R")) {
  redis_tls_path <- system.file("redis", redis_tls_file, package = "circuitbreaker")
  if (nzchar(redis_tls_path)) source(redis_tls_path, local = environment())
}
rm(redis_tls_file, redis_tls_path)

# What is known of this machine, asked once per run: whether redis-server
# speaks TLS (it takes a moment).
tls_facts <- new.env(parent = emptyenv())

# Whether this build of circuitbreaker speaks TLS: FALSE also for a build
# from before TLS (no cb_redis_tls_available() at all).
package_tls_available <- function() {
  ns <- asNamespace("circuitbreaker")
  exists("cb_redis_tls_available", envir = ns, mode = "function", inherits = FALSE) &&
    isTRUE(get("cb_redis_tls_available", envir = ns)())
}

# Skips a test that needs TLS certificates and a TLS redis-server: no
# openssl command, no redis-server or redis-cli, no processx, a package
# installed without inst/redis/redis-tls.R, or a redis-server built without
# TLS; with `client = TRUE` (the default) also a circuitbreaker built
# without hiredis or without TLS.
skip_if_no_tls <- function(client = TRUE) {
  skip_on_cran()
  skip_if_not_installed("processx")
  skip_if(!nzchar(Sys.which("openssl")), "the openssl command is not installed")
  skip_if(!nzchar(Sys.which("redis-server")), "redis-server is not installed")
  skip_if(!nzchar(Sys.which("redis-cli")), "redis-cli is not installed")
  skip_if_not(exists("redis_tls_certs", mode = "function") && exists("redis_server_start", mode = "function") &&
                exists("redis_cli", mode = "function"),
              "the package has no inst/redis/redis-tls.R")
  if (is.null(tls_facts$server)) tls_facts$server <- redis_tls_server_supported()
  skip_if_not(tls_facts$server, "redis-server was built without TLS")
  if (client) skip_if_no_tls_client()
}

# Skips a test of the package's TLS client: a circuitbreaker built without
# hiredis, or without TLS (OpenSSL), or from before TLS.
skip_if_no_tls_client <- function() {
  skip_if_not(circuitbreaker:::cb_redis_available(), "this build has no hiredis")
  skip_if_not(package_tls_available(), "this build of circuitbreaker has no TLS (OpenSSL)")
}

# Certificates for one test (redis_tls_certs(): a CA, server certificates
# for localhost/127.0.0.1, for other.example.test only and expired, a client
# certificate, a second CA nobody trusts and a server certificate of it, a
# bundle of both roots), in a private directory removed when `env` ends.
local_tls_certs <- function(env = parent.frame()) {
  skip_if_not_installed("processx")
  skip_if(!nzchar(Sys.which("openssl")), "the openssl command is not installed")
  skip_if_not(exists("redis_tls_certs", mode = "function"), "the package has no inst/redis/redis-tls.R")
  dir <- tempfile("cb-tls-")
  dir.create(dir, mode = "0700")
  withr::defer(unlink(dir, recursive = TRUE), envir = env)
  redis_tls_certs(dir)
}

# A real redis-server with a TLS port only, on 127.0.0.1 and a free port,
# no persistence, in a private directory; stopped (and the directory
# removed) when `env` ends. Skips where TLS cannot be tested
# (skip_if_no_tls(client)).
# * `auth_clients`: "no", "yes" (a client must show a certificate signed by
#   the CA) or "optional".
# * `cert`: the certificate it shows: "server" (localhost and 127.0.0.1, of
#   the CA), "other" (other.example.test only), "expired" or "untrusted"
#   (of the second CA).
# * `certs`: from local_tls_certs() (made for this server when NULL).
# * `password`, `args`: as for redis_server_start().
# The result has `url` (rediss://), `port`, `certs`, start(), kill() and
# restart() (empty, on the same port), cli(...) (one command through
# redis-cli --tls, with the password and, for mutual TLS, the client
# certificate) and fleet(name, field) as local_redis_server()'s.
local_redis_tls_server <- function(auth_clients = "no", cert = c("server", "other", "expired", "untrusted"),
                                   certs = NULL, password = NULL, args = character(), client = TRUE,
                                   env = parent.frame()) {
  cert <- match.arg(cert)
  skip_if_no_tls(client)
  if (is.null(certs)) certs <- local_tls_certs(env)
  tls <- list(cert_file = certs[[paste0(cert, "_cert")]], key_file = certs[[paste0(cert, "_key")]],
              ca_file = certs$ca, auth_clients = auth_clients,
              client_cert_file = certs$client_cert, client_key_file = certs$client_key)
  # The readiness check (redis-cli) trusts what verifies the certificate.
  if (cert == "untrusted") tls$check_ca_file <- certs$untrusted_ca
  if (cert == "expired") tls$check_insecure <- TRUE
  dir <- tempfile("cb-redis-tls-")
  dir.create(dir)
  self <- new.env(parent = emptyenv())
  self$certs <- certs
  self$port <- NULL
  self$server <- NULL
  self$start <- function() {
    self$server <- redis_server_start(dir, port = self$port, password = password, args = args, tls = tls)
    self$port <- self$server$port
    self$url <- self$server$url
    self$process <- self$server$process
    invisible(self)
  }
  self$kill <- function() {
    if (!is.null(self$server)) self$server$stop()
  }
  self$restart <- function() {
    self$kill()
    self$start()
  }
  self$cli <- function(...) redis_cli(self$port, c(...), password = password, tls = self$server$cli_tls)
  self$fleet <- function(name, field, prefix = "circuitbreaker") {
    v <- self$cli("EVAL", fleet_read_script(), "1", fleet_key_of(prefix, name), field)
    if (length(v) == 0L || !nzchar(v[[1]])) NA_real_ else as.numeric(v[[1]])
  }
  withr::defer({
    self$kill()
    unlink(dir, recursive = TRUE)
  }, envir = env)
  self$start()
  self
}

# The arguments of breaker_store_redis() for a test: quick syncs and a short
# timeout, so that a refusal shows within a second or so.
tls_store <- function(url, tls = NULL, ..., sync_interval = 0.05, timeout = 0.5) {
  breaker_store_redis(url, sync_interval = sync_interval, timeout = timeout, tls = tls, ...)
}

# Every condition of class `class` that `expr` signals, muffled (the others
# pass on), as a list; the value of `expr` is the attribute "value".
tls_conditions <- function(expr, class) {
  seen <- list()
  value <- withCallingHandlers(expr, condition = function(c) {
    if (inherits(c, class)) {
      seen[[length(seen) + 1L]] <<- c
      if (inherits(c, "warning")) invokeRestart("muffleWarning")
      if (inherits(c, "message")) invokeRestart("muffleMessage")
    }
  })
  structure(seen, value = value)
}

# Creates fleet breaker `name` on `store` (removed from the registry when
# `env` ends) and collects the warnings of class circuit_breaker_store_alone
# that its creation, then its $metrics() (asked until one came, at most
# `timeout` seconds: a store alone says so at its first breaker, or once its
# link has been down for a few sync intervals) raise, and that a call
# through it raises meanwhile. Returns list(cb, alone: the warnings).
tls_breaker_alone <- function(store, name, args = fleet_args(), timeout = 15, env = parent.frame()) {
  alone <- tls_conditions(cb <- local_shared_breaker(store, name, args, env = env), "circuit_breaker_store_alone")
  if (length(alone) == 0L) {
    wait_until(function() {
      alone <<- c(alone, tls_conditions(cb$metrics(), "circuit_breaker_store_alone"))
      length(alone) > 0L
    }, timeout = timeout, interval = 0.05, what = sprintf("the store of breaker \"%s\" to say it is alone", name))
  }
  list(cb = cb, alone = unclass(alone))
}

# Waits until fleet breaker `cb` is in step with Redis (mode "fleet"); when
# it never is, the failure says the link's last error.
wait_for_fleet <- function(cb, timeout = 15) {
  tryCatch(
    wait_until(function() identical(cb$metrics()$mode, "fleet"), timeout = timeout, what = "mode \"fleet\""),
    wait_until_timeout = function(e) {
      stop(conditionMessage(e), " The link's last error: ", format(cb$metrics()$last_error), call. = FALSE)
    }
  )
}

# A Redis Cluster (redis_cluster_start(tls = ): every node TLS only, its
# bus and replication too) or a master, a replica and sentinels
# (redis_sentinel_start(tls = )) for one test, with the certificates
# `certs` (made for it when NULL; the result's `certs`), in a private
# directory; stopped, and the directory removed, when `env` ends.
local_redis_tls_cluster <- function(..., certs = NULL, client = TRUE, env = parent.frame()) {
  local_redis_tls_topology("cluster", ..., certs = certs, client = client, env = env)
}

local_redis_tls_sentinel <- function(..., certs = NULL, client = TRUE, env = parent.frame()) {
  local_redis_tls_topology("sentinel", ..., certs = certs, client = client, env = env)
}

# Both: `kind` names the starter of inst/redis/ (redis_<kind>_start()).
local_redis_tls_topology <- function(kind, ..., certs = NULL, client = TRUE, env = parent.frame()) {
  skip_if_no_tls(client)
  starter <- paste0("redis_", kind, "_start")
  skip_if_not(exists(starter, mode = "function"), sprintf("the package has no inst/redis/redis-%s.R", kind))
  if (is.null(certs)) certs <- local_tls_certs(env)
  dir <- tempfile(sprintf("cb-%s-tls-", kind))
  dir.create(dir)
  withr::defer(unlink(dir, recursive = TRUE), envir = env)
  topology <- get(starter, mode = "function")(dir, ..., tls = list(cert_file = certs$server_cert,
                                                                  key_file = certs$server_key,
                                                                  ca_file = certs$ca))
  withr::defer(topology$stop(), envir = env)
  topology$certs <- certs
  topology
}
