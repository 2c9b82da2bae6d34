#' @include checks.R conditions.R store.R store-redis-tls.R
NULL

#' Breakers shared by a fleet of hosts through Redis
#'
#' @description
#' `breaker_store_redis()` describes a store for breakers that every process
#' of a fleet shares (containers behind a load balancer, Posit Connect on
#' several nodes): give it as `store` to [circuit_breaker()] with a `name`,
#' to [breaker_for()], or in `options(circuitbreaker.defaults = )`. Processes
#' that give the same name, the same server, prefix and rule arguments share
#' one breaker: one trip, one open period, and exactly `half_open_max_calls`
#' probes across the fleet.
#'
#' In CLOSED and OPEN a call never talks to Redis: each process decides on a
#' local copy, and a background C++ thread syncs it with the fleet every
#' `sync_interval` seconds; only a half-open probe pays a round trip, for its
#' fleet-wide lease. When Redis cannot be reached, each process runs its
#' breakers on their local rules (`$metrics()$mode` is `"local"`) and no call
#' waits longer than `timeout`. The store works with a single server, a
#' master behind Redis Sentinel (`sentinel`, `master`) or a Redis Cluster
#' (several URLs, or any node's), over TLS or not. It needs the hiredis
#' library when the package is installed (and OpenSSL for TLS); without it
#' `breaker_store_redis()` raises an error of class
#' `circuit_breaker_store_unavailable`.
#'
#' `breaker_store_redis_ping()` checks that the server answers within
#' `timeout`.
#'
#' For a managed Redis (ElastiCache, Azure Cache for Redis, Upstash, Aiven,
#' Redis Cloud, Memorystore), give the connection string as its console shows
#' it, from the environment (`Sys.getenv("REDIS_URL")`), never in the code.
#'
#' @section Learn more:
#' `vignette("shared-stores", package = "circuitbreaker")`, part "The fleet
#' store", has the rest: the syncs ("No round trip on the hot path"), "What
#' counts the whole fleet" (and the bulkhead, counted per host), "When Redis
#' is down, hung or cut off", "Topologies and failover" (Sentinel, Cluster,
#' what a failover can lose), "Keys" (and how to remove a breaker's),
#' "TLS", "Requirements" and "Security"; its part "Production Redis" has
#' each managed service's connection string, the TLS settings and what each
#' failure means.
#'
#' @section Least privilege:
#' This ACL user (Redis 6.2 or later; put a password of your own after `>`)
#' has every command, key and channel that a fleet store with prefix
#' `"myapp"` needs, and nothing else, on a single server, a Cluster's nodes
#' or a Sentinel's master and replicas (Redis does not replicate ACLs: run it
#' on every node). For another prefix, change it in the two patterns (`:` in
#' a prefix is written `%3A` there); "A user of its own" in the vignette
#' says what each command is for.
#'
#' `r redis_acl_block("myapp")`
#'
#' @param url A `redis://[[user]:password@]host[:port][/db]` URL, or
#'   `rediss://` for TLS, maybe with a query (`?ssl_cert_reqs=required`, see
#'   "TLS" in the vignette); `NULL` (the default) is
#'   `"redis://127.0.0.1:6379/0"`. With `sentinel`, only its user name,
#'   password, database and TLS settings are used (its host and port are
#'   not).
#'   On a Redis Cluster, any node's URL, or the URLs of several (1 to 100
#'   seed nodes, with one user name and password, one TLS setting, and
#'   database 0); the store finds out by itself that it is a cluster.
#' @param prefix The prefix of every key, so that several applications can
#'   share one Redis: letters, digits, `_`, `-`, `.` and `:`.
#' @param sync_interval Seconds between two syncs with Redis, from 0.01 to 60.
#' @param timeout Seconds any one round trip to Redis may take (connecting
#'   included), from 0.001 to 60.
#' @param sentinel `NULL` (a single server, at `url`), or the addresses of
#'   the Redis Sentinels that monitor the master, such as
#'   `c("10.0.0.1:26379", "10.0.0.2:26379", "10.0.0.3:26379")`.
#' @param master The name under which the sentinels monitor the master
#'   (`sentinel monitor <master> ...` in their configuration).
#' @param sentinel_password `NULL`, or the sentinels' own password (their
#'   `requirepass`; not the master's, which `url` gives).
#' @param tls `NULL` (TLS only when `url` is `rediss://`), or a named list of
#'   TLS settings, which turns TLS on and completes the URL's: `ca_file` (a
#'   PEM file of the CAs to trust instead of the system's), `ca_dir` (a
#'   directory of them, hashed by `openssl rehash`), `cert_file` and
#'   `key_file` (a client certificate and its key, both or neither, for
#'   servers that ask for one: mutual TLS), `server_name` (the name to verify
#'   and send as SNI; by default the URL's host) and `verify` (`TRUE`, the
#'   default; `FALSE` encrypts without checking the server, and warns). Files
#'   must be readable when the store is made; an unknown name, a wrong type
#'   or an unreadable file is an error of class
#'   `circuit_breaker_invalid_argument` naming the field (`tls$ca_file`).
#' @param store A store from `breaker_store_redis()`.
#' @return `breaker_store_redis()`: a store object. `breaker_store_redis_ping()`:
#'   `TRUE` when the server answered `PONG` within `timeout`, else `FALSE` with
#'   the reason as the attribute `"message"`.
#' @seealso [breaker_store_host()] for the processes of one host;
#'   `vignette("shared-stores", package = "circuitbreaker")` for the fleet
#'   store in full and for production Redis (managed services, TLS, the ACL
#'   user, what each failure means).
#' @examples
#' \dontrun{
#' fleet <- breaker_store_redis("redis://127.0.0.1:6379/0", prefix = "myapp")
#' # A managed Redis over TLS, its console's URL in the environment
#' # (rediss://default:<password>@<host>:6379), verified with the system's CAs:
#' managed <- breaker_store_redis(Sys.getenv("REDIS_URL"), prefix = "myapp")
#' # A server whose certificate is signed by a CA of your own:
#' private <- breaker_store_redis("rediss://:password@10.0.0.5:6380/0", prefix = "myapp",
#'                                tls = list(ca_file = "/etc/redis/ca.pem",
#'                                           server_name = "redis.internal"))
#' # A Redis Cluster, given two of its nodes:
#' clustered <- breaker_store_redis(c("redis://10.0.0.1:6379/0", "redis://10.0.0.2:6379/0"),
#'                                  prefix = "myapp")
#' # A master behind Sentinel; the password from the environment:
#' ha <- breaker_store_redis(Sys.getenv("REDIS_URL"), prefix = "myapp",
#'                           sentinel = c("10.0.0.1:26379", "10.0.0.2:26379", "10.0.0.3:26379"),
#'                           master = "mymaster")
#' cb <- circuit_breaker(name = "payments", store = fleet, failure_threshold = 5)
#' cb$execute(function() httr::GET("http://127.0.0.1:8080/pay"),
#'            function() "the payment service is unavailable")
#' cb$metrics()[c("state", "mode", "sync_lag")]
#' }
#' @export
breaker_store_redis <- function(url = NULL, prefix = "circuitbreaker", sync_interval = 0.1, timeout = 0.1,
                                sentinel = NULL, master = "mymaster", sentinel_password = NULL, tls = NULL) {
  call <- rlang::current_call()
  if (is.null(url)) url <- "redis://127.0.0.1:6379/0"
  if (!is.character(url) || length(url) <= 1L) check_string(url, call = call)
  # The types here; the limits are the core's (fleet/spec_limits.hpp).
  must <- cb_fleet_spec_limits()
  check_string(prefix, call = call)
  check_number_decimal(sync_interval, "sync_interval", must = must[["sync_interval"]], call = call)
  check_number_decimal(timeout, "timeout", must = must[["timeout"]], call = call)
  if (anyNA(url)) abort_fleet_url(url, must[["url"]], call)
  problem <- cb_fleet_spec_problem(length(url), prefix, sync_interval, timeout)
  if (identical(problem, "url")) abort_fleet_url(url, must[["url"]], call)
  if (!is.null(problem)) {
    value <- list(prefix = prefix, sync_interval = sync_interval, timeout = timeout)[[problem]]
    abort_bad_argument(problem, must[[problem]], value, call = call)
  }
  endpoint <- cb_redis_parse_url(url)
  topology <- redis_sentinel_args(sentinel, master, sentinel_password, call = call)
  tls <- redis_tls_settings(tls, endpoint, call = call)
  if (!cb_redis_available()) abort_redis_unavailable(call = call)
  if (!is.null(tls) && !cb_redis_tls_available()) abort_redis_tls_unavailable(call = call)
  # The URL with its password stays in an environment, so that printing,
  # str() or dput() of the store shows only the masked one.
  secret <- new.env(parent = emptyenv())
  secret$url <- url
  secret$sentinel_password <- sentinel_password
  # As the core shows URLs: masked, without their query (a value there might
  # be a secret), rediss:// when the store speaks TLS (also when a redis://
  # URL turned it on with `ssl=true` or `tls` did).
  shown <- paste(cb_redis_shown_url(url, tls = !is.null(tls)), collapse = ", ")
  if (!is.null(topology$sentinel)) {
    shown <- paste0("sentinel master \"", topology$master, "\" via ",
                    paste(topology$sentinel, collapse = ", "), ", db ", endpoint$db, if (!is.null(tls)) ", TLS")
  }
  # The endpoint without what the URL said of TLS: the store keeps the
  # merged settings (`tls`), and its unknown query parameters are told once.
  parts <- endpoint[setdiff(names(endpoint), c("tls", "query_unknown"))]
  store <- structure(
    list(kind = "redis", url = shown, endpoint = parts, prefix = prefix,
         sync_interval = sync_interval, timeout = timeout, sentinel = topology$sentinel,
         master = topology$master, tls = tls, secret = secret),
    class = c("circuit_breaker_store_redis", "circuit_breaker_store")
  )
  redis_url_warnings(store, endpoint)
  store
}

# A bad `url` argument, shown masked: a URL may hold a password.
abort_fleet_url <- function(url, must, call) {
  abort_bad_argument("url", must, vapply(url, cb_mask_url, character(1), USE.NAMES = FALSE), call = call)
}

# The Sentinel arguments, checked: list(sentinel = the addresses as the
# core reads them, or NULL for a single server; master).
redis_sentinel_args <- function(sentinel, master, sentinel_password, call) {
  # A bad master name is a mistake whether or not sentinels are given.
  if (!rlang::is_string(master) || !cb_redis_valid_master_name(master)) {
    abort_bad_argument("master",
                       "the name the sentinels monitor the master under: 1 to 200 letters, digits, `_`, `-` and `.`",
                       master, call = call)
  }
  if (is.null(sentinel)) {
    if (!is.null(sentinel_password)) {
      # Not abort_bad_argument(): its value, a password, is never shown.
      cli::cli_abort(
        c("{.arg sentinel_password} must be NULL when {.arg sentinel} is NULL.",
          i = "The password of a single server goes in {.arg url}: {.code redis://:password@host:6379/0}."),
        class = c("circuit_breaker_invalid_argument", "circuit_breaker_error"),
        argument = "sentinel_password", call = call
      )
    }
    return(list(sentinel = NULL, master = NULL))
  }
  if (!is.character(sentinel) || length(sentinel) == 0L || length(sentinel) > 100L) {
    abort_bad_argument("sentinel", "a character vector of 1 to 100 sentinel addresses such as \"127.0.0.1:26379\"",
                       sentinel, call = call)
  }
  sentinel <- rlang::try_fetch(
    cb_redis_parse_sentinels(sentinel),
    # The core's words, with this call; the value is masked (a sentinel
    # given as a URL may hold a password).
    circuit_breaker_invalid_argument = function(cnd) {
      abort_bad_argument("sentinel", "\"host:port\" addresses (an IPv6 host in brackets) with a port from 1 to 65535",
                         cnd$value, call = call)
    }
  )
  if (!is.null(sentinel_password) && (!rlang::is_string(sentinel_password) || !nzchar(sentinel_password))) {
    # describe_value() shows a string only when it is a single one, which
    # here is the empty string: never a password.
    abort_bad_argument("sentinel_password", "NULL or a non-empty string (the sentinels' password)",
                       sentinel_password, call = call)
  }
  list(sentinel = sentinel, master = master)
}

#' @rdname breaker_store_redis
#' @export
breaker_store_redis_ping <- function(store) {
  check_fleet_store(store)
  res <- cb_redis_ping(fleet_store_spec(store))
  structure(isTRUE(res$ok) && identical(res$message, "PONG"), message = res$message)
}

check_fleet_store <- function(store, call = rlang::caller_env()) {
  if (!inherits(store, "circuit_breaker_store_redis")) {
    abort_bad_argument("store", "a store from `breaker_store_redis()`", store, call = call)
  }
  store
}

# The fleet store's methods (store.R says what each is asked).

# nolint start: object_name_linter, object_length_linter. (lintr lints file by file and sees
# only the generics of the file it lints; store.R holds these.)

# What cb_create() needs to join the fleet: the connection details and the
# name.
#' @exportS3Method
store_location.circuit_breaker_store_redis <- function(store, name, call) {
  check_shared_name(store, name, call)
  c(fleet_store_spec(store), list(name = name))
}

#' @exportS3Method
store_clock.circuit_breaker_store_redis <- function(store) "Redis `TIME` (the fleet's clock)"

#' @exportS3Method
store_polls.circuit_breaker_store_redis <- function(store) TRUE

#' @exportS3Method
store_link_news.circuit_breaker_store_redis <- function(store) fleet_link_news(store)

#' @exportS3Method
store_label.circuit_breaker_store_redis <- function(store, m) paste0("fleet-shared, ", m$mode)

# While the store runs on local rules, print() says why; behind Sentinel,
# it names the master.
#' @exportS3Method
store_format_lines.circuit_breaker_store_redis <- function(store, m) {
  c(
    if (m$topology %in% c("sentinel", "cluster")) {
      paste0("  Redis topology: ", redis_topology_text(m$topology, m$master, m$masters))
    },
    if (identical(m$mode, "local") && !is.na(m$last_error)) paste0("  last error of the link to Redis: ", m$last_error)
  )
}

# The tooltip names the masked URL (never the password) and the mode.
#' @exportS3Method
store_badge.circuit_breaker_store_redis <- function(store, m) {
  mode <- if (identical(m$mode, "local")) "local (Redis unreachable: local rules)" else m$mode
  list(text = "fleet-shared",
       tooltip = paste0("shared by a fleet through Redis ", store$url, ", prefix ", store$prefix,
                        "; mode: ", mode))
}

#' @exportS3Method
store_unlink.circuit_breaker_store_redis <- function(store, name, call) fleet_store_unlink(name, store, call)

# The connection details that identify the sync thread of `store` in this
# process (one per store, whatever the breaker). The clock offset is a test
# hook: CIRCUITBREAKER_TEST_CLOCK_OFFSET (seconds) skews this process's
# clock, to show that the hosts' clocks do not matter.
fleet_store_spec <- function(store) {
  offset <- suppressWarnings(as.numeric(Sys.getenv("CIRCUITBREAKER_TEST_CLOCK_OFFSET", "0")))
  if (!isTRUE(is.finite(offset))) offset <- 0
  list(url = store$secret$url, prefix = store$prefix, sync_interval = store$sync_interval,
       timeout = store$timeout, clock_offset = offset, sentinels = store$sentinel,
       master = store$master, sentinel_password = store$secret$sentinel_password, tls = store$tls)
}

# The fields a fleet breaker adds to $metrics(), declared once: how each is
# read from its link (cb_fleet_info(), whose fields fleet/fleet_info.hpp
# names), its NA in the rows of other stores' breakers (breaker_list()), and
# whether the status routes show it (they show the link, not the fleet's
# counts).
fleet_metric_fields <- list(
  mode = list(na = NA_character_, status = TRUE, read = function(info) info$mode),
  sync_lag = list(na = NA_real_, status = TRUE, read = function(info) info$sync_lag),
  last_sync = list(na = as.POSIXct(NA), status = TRUE, read = function(info) {
    if (is.na(info$last_sync)) as.POSIXct(NA) else as.POSIXct(info$last_sync, origin = "1970-01-01")
  }),
  fleet_calls = list(na = NA_real_, status = FALSE, read = function(info) info$fleet_calls),
  fleet_failures = list(na = NA_real_, status = FALSE, read = function(info) info$fleet_failures),
  last_error = list(na = NA_character_, status = TRUE, read = function(info) link_error(info$last_error)),
  topology = list(na = NA_character_, status = TRUE, read = function(info) info$topology),
  master = list(na = NA_character_, status = TRUE, read = function(info) {
    if (nzchar(info$master)) info$master else NA_character_
  }),
  masters = list(na = NA_real_, status = TRUE, read = function(info) info$masters),
  tls = list(na = NA_character_, status = TRUE, read = function(info) info$tls)
)

#' @exportS3Method
store_metrics.circuit_breaker_store_redis <- function(store, ptr) {
  info <- cb_fleet_info(ptr)
  lapply(fleet_metric_fields, function(field) field$read(info))
}

# The last error of a store's link as shown (metrics, print): NA for none,
# else cut to 200 characters (it may be a long reply of the server; the
# password was removed by the core).
link_error <- function(x) if (nzchar(x)) cut_text(x, 200L) else NA_character_

#' @exportS3Method
store_metrics_na.circuit_breaker_store_redis <- function(store) {
  lapply(fleet_metric_fields, function(field) field$na)
}

#' @exportS3Method
store_status_fields.circuit_breaker_store_redis <- function(store) {
  names(Filter(function(field) field$status, fleet_metric_fields))
}

#' @exportS3Method
store_prometheus_families.circuit_breaker_store_redis <- function(store) {
  list(
    list(name = "circuitbreaker_fleet_mode", type = "gauge",
         help = paste("Fleet breakers: 1 for the current mode, fleet (in step with Redis)",
                      "or local (Redis unreachable: local rules), 0 for the other."),
         label = "mode",
         samples = function(m) stats::setNames(as.numeric(c("fleet", "local") == m$mode), c("fleet", "local"))),
    list(name = "circuitbreaker_fleet_sync_lag_seconds", type = "gauge",
         help = "Fleet breakers: seconds since the last good sync with Redis (NaN before the first).",
         samples = function(m) prom_field(m, "sync_lag")),
    list(name = "circuitbreaker_fleet_last_sync_timestamp_seconds", type = "gauge",
         help = paste("Fleet breakers: the time of the last good sync with Redis,",
                      "in seconds since the epoch."),
         samples = function(m) prom_field(m, "last_sync")),
    # An info-style gauge: the version is a label, so that a plain store, or
    # one whose handshakes fell back to TLSv1.2, is one query away.
    list(name = "circuitbreaker_fleet_tls", type = "gauge",
         help = paste("Fleet breakers: 1, labelled with the TLS version of the link's last handshake",
                      "(TLSv1.3, TLSv1.2), on (TLS before the first handshake) or off (a plain redis:// store)."),
         label = "version",
         samples = function(m) {
           if (!rlang::is_string(m$tls)) return(numeric())
           stats::setNames(1, prom_escape_label(m$tls))
         })
  )
}
# nolint end

#' @export
format.circuit_breaker_store_redis <- function(x, ...) {
  e <- x$endpoint
  user <- if (isTRUE(e$has_username)) "***" else ""
  auth <- if (isTRUE(e$has_password)) paste0(user, ":***@") else if (nzchar(user)) "***@" else ""
  host <- if (grepl(":", e$host, fixed = TRUE)) paste0("[", e$host, "]") else e$host
  seeds <- if (is.null(e$seeds)) 1L else e$seeds
  scheme <- if (is.null(x$tls)) "redis://" else "rediss://"
  where <- if (is.null(x$sentinel) && seeds == 1L) paste0(scheme, auth, host, ":", e$port, "/", e$db) else x$url
  out <- paste0("<circuit_breaker_store: redis, ", where, ", prefix ", x$prefix, ">")
  # The link of this process, once a breaker of the store has started it.
  link <- if (cb_redis_available()) cb_fleet_store_info(fleet_store_spec(x))
  if (!is.null(link)) {
    out <- c(out, paste0("  mode: ", link$mode, "   syncs: ", link$syncs,
                         "   failed: ", link$sync_failures, "   tls: ", link$tls),
             paste0("  topology: ", redis_topology_text(link$topology, link$master, link$masters)))
    error <- link_error(link$last_error)
    if (!is.na(error)) out <- c(out, paste0("  last error: ", error))
  }
  out
}

# "single (127.0.0.1:6379)", "sentinel (master 127.0.0.1:6380)",
# "sentinel (no master found yet)", "cluster (3 masters)" or, for a
# breaker, "cluster (3 masters; this breaker's: 127.0.0.1:7001)".
redis_topology_text <- function(topology, master, masters = NA) {
  known <- !is.na(master) && nzchar(master)
  switch(topology,
         cluster = paste0("cluster (", masters, if (identical(masters, 1)) " master" else " masters",
                          if (known) paste0("; this breaker's: ", master), ")"),
         sentinel = paste0("sentinel (", if (known) paste("master", master) else "no master found yet", ")"),
         paste0(topology, if (known) paste0(" (", master, ")")))
}

abort_redis_unavailable <- function(value = NULL, call = NULL) {
  abort_store(
    "unavailable",
    c("The fleet store needs hiredis (its Redis client), which this installation of circuitbreaker was built without.",
      i = paste("Install it (Debian/Ubuntu: {.code apt-get install libhiredis-dev};",
                "Fedora: {.code dnf install hiredis-devel}; macOS: {.code brew install hiredis}),",
                "then install circuitbreaker again.")),
    call = call
  )
}

# Raised by the binding when the fleet keeps breaker `name` with other rule
# arguments than this process gave.
# `given` and `stored` are that argument's values (the core's text) in this
# process and in the fleet.
abort_fleet_wrong_config <- function(name, argument = NULL, given = NULL, stored = NULL, call = NULL) {
  abort_wrong_config(
    "Fleet breaker {.val {name}}", "the fleet uses",
    "or remove the breaker's keys with {.fn breaker_store_unlink} once no process uses it.",
    argument, given, stored, call = call
  )
}

# Tells, once, that a fleet store of this process is alone (its link to
# Redis never came up, or has been down for a few sync intervals: the core
# decides, FleetSync::Stats::alone), and, once, that it has rejoined. It is
# asked where a call already goes through R and costs no call anything: a
# fleet breaker's creation, `$metrics()` (so breaker_list(), the status
# routes and the Prometheus metrics) and the later poll of a breaker with
# listeners (breaker-events.R). One .Call and a lookup; what was said last is
# kept per store (by a hash of its connection details, which hold the
# password: the hash does not).
fleet_link_news <- function(store) {
  spec <- fleet_store_spec(store)
  info <- cb_fleet_store_info(spec)
  if (is.null(info)) return(invisible())
  said <- the$fleet_alone %||% (the$fleet_alone <- new.env(parent = emptyenv()))
  key <- rlang::hash(spec)
  was_alone <- isTRUE(said[[key]])
  if (!was_alone && isTRUE(info$alone)) {
    said[[key]] <- TRUE
    warning(store_alone_warning(store, sub("[.]$", "", link_error(info$last_error))))
  } else if (was_alone && identical(info$mode, "fleet")) {
    said[[key]] <- FALSE
    message(store_rejoined_message(store))
  }
  invisible()
}

# A warning, not a message: the store was asked to share its breakers and
# does not, which is a fault of the set-up (a typo in the URL, a firewall, a
# Redis down) that belongs in the log next to the other warnings; a message
# is easily silenced (suppressMessages(), quiet = TRUE) and would hide it.
# Its class says which condition it is, as the package's warnings do
# (circuit_breaker_listener_error); `circuit_breaker_warning` lets a handler
# take them all.
store_alone_warning <- function(store, reason) {
  structure(
    class = c("circuit_breaker_store_alone", "circuit_breaker_warning", "warning", "condition"),
    list(
      message = paste0(
        "The fleet store ", store$url, " (prefix \"", store$prefix, "\") cannot reach Redis",
        if (!is.na(reason)) paste0(": ", reason) else "", ".\n",
        "Its breakers run on this process's local rules (mode \"local\") until it rejoins; ",
        "check the URL and that the server answers (`breaker_store_redis_ping()`)."
      ),
      call = NULL,
      url = store$url,
      prefix = store$prefix,
      reason = reason
    )
  )
}

store_rejoined_message <- function(store) {
  structure(
    class = c("circuit_breaker_store_rejoined", "circuit_breaker_message", "message", "condition"),
    list(
      message = paste0("The fleet store ", store$url, " (prefix \"", store$prefix,
                       "\") reaches Redis again: its breakers are shared by the fleet (mode \"fleet\").\n"),
      call = NULL,
      url = store$url,
      prefix = store$prefix
    )
  )
}

# breaker_store_unlink() for a fleet store: this host's file of the
# breaker's bulkhead permits (the core names it: fleet_bulkhead_file_name()),
# removed as the host store removes its files, first, since Redis may not
# answer; then one DEL of every key of the breaker (the core lists them:
# fleet_breaker_keys()), on a connection of its own. TRUE when there was
# something to remove.
fleet_store_unlink <- function(name, store, call) {
  if (!cb_redis_available()) abort_redis_unavailable(call = call)
  spec <- store_location(store, name, call = call)
  segment <- cb_fleet_bulkhead_path(spec)
  removed <- file.exists(segment) && unlink(segment) == 0L && !file.exists(segment)
  (cb_fleet_unlink(spec) > 0) || removed
}

# Raised by the binding when a fleet breaker's keys could not be removed.
abort_fleet_unreachable <- function(name, reason, call = NULL) {
  abort_store(
    "unreachable",
    c("Cannot remove the keys of fleet breaker {.val {name}}: Redis did not answer.",
      x = "{reason}",
      i = "Check the store's URL and that the server answers ({.fn breaker_store_redis_ping})."),
    breaker = name,
    reason = reason,
    call = call
  )
}
