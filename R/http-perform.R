# Synchronous httr2 and curl calls through a breaker.

#' @include checks.R http-outcome.R registry.R
NULL

#' Perform HTTP requests through a circuit breaker
#'
#' Thin wrappers that give httr2 and curl calls `execute()` semantics, with a
#' breaker per downstream host by default. httr calls go through
#' `$execute()` directly (see the examples).
#'
#' With httr2 before 1.0, unless the request has a retry policy of its own,
#' `breaker_perform()` turns off httr2's sleeping after the last try (for a
#' response's `Retry-After`, and its backoff after a transport error), which
#' would block the guarded call; the breaker honours `Retry-After` by staying
#' open instead. httr2 1.0 and later sleep only before a retry and are left
#' as they are.
#'
#' The breaker's `timeout` (see [circuit_breaker()]) is applied to the request
#' (httr2: `req_timeout()`; curl: the total `timeout_ms`, not only the 10 s
#' connect timeout) unless the request already has one. A handle you pass to
#' `breaker_fetch()` is used as it is: set its timeout yourself.
#'
#' @param req An httr2 request.
#' @param breaker The breaker to use; by default the one registered for the
#'   request's host and port ([breaker_for()]).
#' @param fallback `NULL` or a function of zero or one argument (the condition
#'   explaining the failure or rejection), as for `$execute()`.
#' @return `breaker_perform()`: the httr2 response, or the fallback's value.
#'   httr2 raises errors for HTTP error statuses as usual: those in the
#'   breaker's `failure_statuses` are failures (the fallback gets the error),
#'   the others (a 404, say) propagate and count nowhere.
#' @examples
#' \dontrun{
#' req <- httr2::request("http://127.0.0.1:8000/items")
#' resp <- breaker_perform(req, fallback = function() NULL)
#'
#' res <- breaker_fetch("http://127.0.0.1:8000/items", fallback = function(cond) NULL)
#'
#' # httr: call it inside execute(); the response is classified by its status.
#' cb <- breaker_for("http://127.0.0.1:8000", timeout = 2)
#' r <- cb$execute(
#'   function() httr::GET("http://127.0.0.1:8000/items", httr::timeout(2)),
#'   function(cond) NULL
#' )
#' }
#' @export
breaker_perform <- function(req, breaker = breaker_for(req), fallback = NULL) {
  check_installed("httr2", "breaker_perform()")
  req <- check_httr2_request(req)
  check_breaker(breaker)
  check_fallback(fallback)
  # The request is prepared inside the guarded function: a rejected call
  # costs the breaker's check and the fallback, nothing more.
  breaker$execute(function() {
    httr2::req_perform(without_retry_sleep(with_timeout_httr2(req, breaker$config$timeout)))
  }, fallback)
}

# httr2 before 1.0 sleeps after its last try even when it will not retry:
# for a 429's or 503's Retry-After (minutes, possibly) and for its backoff
# after a transport error (1 to 2 s). Unless the caller configured retries,
# a guarded call must not block for that: the breaker decides what a 429 or
# 503 means (and honours Retry-After by staying open), not httr2.
without_retry_sleep <- function(req) {
  policies <- req$policies
  if (!is.null(policies$retry_is_transient) || !is.null(policies$retry_max_tries) ||
      !is.null(policies$retry_max_wait)) {
    return(req)
  }
  # httr2 >= 1.0 sleeps only before a retry, and there req_retry() would
  # print "Setting `max_tries = 2`." on every call and put the request under
  # httr2's own breaker for its host name (`failure_realm`): leave it alone.
  if (httr2_has_realm_breaker()) return(req)
  # httr2 < 1.0 also sleeps after its last try: for a 429/503's Retry-After,
  # and for its random backoff (1 to 2 s) after a transport error or timeout.
  httr2::req_retry(req, is_transient = function(resp) FALSE, backoff = function(i) 0)
}

httr2_has_realm_breaker <- function() {
  if (is.null(httr2_features$realm)) {
    httr2_features$realm <- "failure_realm" %in% names(formals(httr2::req_retry))
  }
  httr2_features$realm
}
httr2_features <- new.env(parent = emptyenv())

#' @rdname breaker_perform
#' @param url A URL.
#' @param handle `NULL` or a curl handle (from `curl::new_handle()`).
#' @return `breaker_fetch()`: the list `curl::curl_fetch_memory()` returns, or
#'   the fallback's value. A response with a failing status is a failure: the
#'   fallback gets a `circuit_breaker_http_failure` condition, or without a
#'   fallback the response is returned as it is.
#' @export
breaker_fetch <- function(url, handle = NULL, breaker = breaker_for(url), fallback = NULL) {
  check_installed("curl", "breaker_fetch()")
  check_url(url)
  check_breaker(breaker)
  check_fallback(fallback)
  check_handle(handle)
  breaker$execute(function() {
    curl::curl_fetch_memory(url, handle = handle_with_timeout(handle, breaker$config$timeout))
  }, fallback)
}

with_timeout_httr2 <- function(req, timeout) {
  if (is.null(timeout)) return(req)
  opts <- req$options
  if (!is.null(opts$timeout_ms) || !is.null(opts$timeout)) return(req)
  httr2::req_timeout(req, timeout)
}

check_handle <- function(handle, call = rlang::caller_env()) {
  if (!is.null(handle) && !inherits(handle, "curl_handle")) {
    abort_bad_argument("handle", "NULL or a curl handle", handle, call = call)
  }
}

# The caller's handle as it is, or a new one with the breaker's timeout.
handle_with_timeout <- function(handle, timeout) {
  if (!is.null(handle)) return(handle)
  handle <- curl::new_handle()
  if (!is.null(timeout)) curl::handle_setopt(handle, timeout_ms = ceiling(timeout * 1000))
  handle
}


check_httr2_request <- function(req, call = rlang::caller_env()) {
  if (!inherits(req, "httr2_request")) abort_bad_argument("req", "an httr2 request", req, call = call)
  req
}

check_url <- function(url, call = rlang::caller_env()) {
  # A fixed-string test first: this runs on every call, and compiling a
  # regular expression costs several microseconds.
  ok <- is.character(url) && length(url) == 1L && !is.na(url) &&
    (startsWith(url, "http://") || startsWith(url, "https://") ||
       grepl("^[A-Za-z][A-Za-z0-9+.-]*://", url))
  if (!ok) abort_bad_argument("url", "a single URL", url, call = call)
}
