#' @include checks.R conditions.R
NULL

#' Breakers shared by a fleet of hosts through Redis (in development)
#'
#' @description
#' `breaker_store_redis()` describes where a fleet-wide breaker's state lives:
#' a Redis server, with every key of a breaker under `prefix`. This version
#' checks the arguments and the client library, and `breaker_store_redis_ping()`
#' checks that the server answers within `timeout`; breakers cannot use the
#' store yet (`circuit_breaker(store = )` says so).
#'
#' The client library is hiredis, found when the package is installed
#' (Debian and Ubuntu: `apt-get install libhiredis-dev`; Fedora:
#' `dnf install hiredis-devel`; macOS: `brew install hiredis`; then install
#' the package again). Without it, `breaker_store_redis()` raises an error of
#' class `circuit_breaker_store_unavailable` that says so. TLS (`rediss://`)
#' is not supported yet.
#'
#' @param url A `redis://[[user]:password@]host[:port][/db]` URL.
#' @param prefix The prefix of every key, so that several applications can
#'   share one Redis: letters, digits, `_`, `-`, `.` and `:`.
#' @param sync_interval Seconds between two synchronisations with Redis.
#' @param timeout Seconds any one Redis command may take.
#' @param store A store from `breaker_store_redis()`.
#' @return `breaker_store_redis()`: a store object. `breaker_store_redis_ping()`:
#'   `TRUE` when the server answered `PONG` within `timeout`, else `FALSE` with
#'   the reason as the attribute `"message"`.
#' @keywords internal
#' @export
breaker_store_redis <- function(url = "redis://127.0.0.1:6379/0", prefix = "circuitbreaker",
                                sync_interval = 0.1, timeout = 0.1) {
  call <- rlang::current_call()
  check_string(url, call = call)
  endpoint <- cb_redis_parse_url(url)
  check_string(prefix, call = call)
  if (!grepl("^[A-Za-z0-9_.:-]+$", prefix) || nchar(prefix) > 100L) {
    abort_bad_argument("prefix", "at most 100 letters, digits, `_`, `-`, `.` and `:`", prefix, call = call)
  }
  check_number_decimal(sync_interval, "sync_interval", min = 0.01, max = 60,
                       must = "a number of seconds from 0.01 to 60", call = call)
  check_number_decimal(timeout, "timeout", min = 0.001, max = 60,
                       must = "a number of seconds from 0.001 to 60", call = call)
  if (!cb_redis_available()) abort_redis_unavailable(call = call)
  structure(
    list(kind = "redis", url = url, endpoint = endpoint, prefix = prefix,
         sync_interval = sync_interval, timeout = timeout),
    class = c("circuit_breaker_store_redis", "circuit_breaker_store")
  )
}

#' @rdname breaker_store_redis
#' @export
breaker_store_redis_ping <- function(store) {
  if (!inherits(store, "circuit_breaker_store_redis")) {
    abort_bad_argument("store", "a store from `breaker_store_redis()`", store)
  }
  res <- cb_redis_ping(store$url, store$timeout)
  structure(isTRUE(res$ok) && identical(res$message, "PONG"), message = res$message)
}

abort_redis_unavailable <- function(value = NULL, call = NULL) {
  cli::cli_abort(
    c("The Redis store needs hiredis, which this installation of circuitbreaker was built without.",
      i = paste("Install it (Debian/Ubuntu: {.code apt-get install libhiredis-dev};",
                "Fedora: {.code dnf install hiredis-devel}; macOS: {.code brew install hiredis}),",
                "then install circuitbreaker again.")),
    class = c("circuit_breaker_store_unavailable", "circuit_breaker_store_error", "circuit_breaker_error"),
    call = call
  )
}
