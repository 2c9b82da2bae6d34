# Asynchronous HTTP calls through a breaker: httr2's req_perform_promise()
# and curl's multi interface, on `$execute_async()`.

#' @include http-perform.R breaker-async.R
NULL

#' Asynchronous HTTP requests through a circuit breaker
#'
#' `breaker_perform_async()` performs an httr2 request with
#' `httr2::req_perform_promise()` (httr2 1.0.0 or later) through a breaker;
#' `breaker_fetch_async()` does the same for a URL with
#' `curl::curl_fetch_multi()`, driven by the `later` event loop (the one
#' Shiny and plumber run). Both return a promise of what the synchronous
#' versions return; see [breaker_perform()]. Use them in async plumber
#' endpoints and Shiny apps, or build your own with the breaker's
#' `$execute_async(request_func, fallback_func)`, whose `request_func` returns
#' a promise (or a plain value).
#'
#' In `HALF_OPEN`, only `half_open_max_calls` concurrent probes are sent; the
#' other calls get the fallback at once.
#'
#' With `immediate_fallback = TRUE`, a call the breaker rejects returns the
#' fallback's value itself instead of a promise of it (or, without a fallback,
#' signals the `circuit_breaker_open` error at once). plumber endpoints may
#' return either, and a plain value is served several times faster than a
#' promise: an API whose breaker is open then answers as fast as a synchronous
#' one, while calls that are made still do not block the process. Do not use it
#' where the caller chains the result with `promises::then()`.
#'
#' @inheritParams breaker_perform
#' @param immediate_fallback `FALSE` (always a promise) or `TRUE` (the
#'   fallback's value itself when the call is rejected).
#' @return A promise, or with `immediate_fallback = TRUE` and a rejected call,
#'   the fallback's value.
#' @examples
#' \dontrun{
#' breaker_fetch_async("http://127.0.0.1:8000/items", fallback = function() NULL) |>
#'   promises::then(function(res) if (is.list(res)) res$status_code)
#' }
#' @export
breaker_perform_async <- function(req, breaker = breaker_for(req), fallback = NULL,
                                  immediate_fallback = FALSE) {
  check_installed("httr2", "breaker_perform_async()")
  if (!exists("req_perform_promise", envir = asNamespace("httr2"), inherits = FALSE)) {
    cli::cli_abort(
      c("{.fn breaker_perform_async} needs httr2 1.0.0 or later (this is httr2 {utils::packageVersion('httr2')}).",
        i = "Use {.fn breaker_fetch_async}, or {.code $execute_async()} with your own promise."),
      class = c("circuit_breaker_missing_package", "circuit_breaker_error")
    )
  }
  if (!requireNamespace("later", quietly = TRUE) || utils::packageVersion("later") < "1.4.0") {
    # httr2's req_perform_promise() polls with later::later_fd() (later 1.4.0).
    cli::cli_abort(
      "{.fn breaker_perform_async} needs later 1.4.0 or later for httr2's {.fn req_perform_promise}.",
      class = c("circuit_breaker_missing_package", "circuit_breaker_error")
    )
  }
  req <- check_httr2_request(req)
  check_breaker(breaker)
  check_fallback(fallback)
  check_bool(immediate_fallback)
  perform_promise <- get("req_perform_promise", envir = asNamespace("httr2"))
  breaker$execute_async(function() {
    perform_promise(without_retry_sleep(with_timeout_httr2(req, breaker$config$timeout)))
  }, fallback, immediate_fallback = immediate_fallback)
}

#' @rdname breaker_perform_async
#' @param pool `NULL` (a new pool for this request) or a curl pool from
#'   `curl::new_pool()`.
#' @export
breaker_fetch_async <- function(url, handle = NULL, breaker = breaker_for(url), fallback = NULL,
                                pool = NULL, immediate_fallback = FALSE) {
  check_installed("curl", "breaker_fetch_async()")
  check_installed("later", "breaker_fetch_async()")
  check_url(url)
  check_breaker(breaker)
  check_fallback(fallback)
  check_bool(immediate_fallback)
  if (!is.null(pool) && !inherits(pool, "curl_multi")) {
    abort_bad_argument("pool", "NULL or a curl pool from `curl::new_pool()`", pool)
  }
  check_handle(handle)
  breaker$execute_async(function() {
    curl_fetch_promise(url, handle_with_timeout(handle, breaker$config$timeout), pool %||% curl::new_pool())
  }, fallback, immediate_fallback = immediate_fallback)
}

# curl::curl_fetch_multi() as a promise, polled from the later event loop.
curl_fetch_promise <- function(url, handle, pool) {
  promises::promise(function(resolve, reject) {
    settled <- FALSE
    curl::curl_fetch_multi(url,
      done = function(res) {
        settled <<- TRUE
        resolve(res)
      },
      fail = function(msg) {
        settled <<- TRUE
        reject(simpleError(msg))
      },
      handle = handle, pool = pool
    )
    poll <- function() {
      curl::multi_run(timeout = 0, poll = TRUE, pool = pool)
      if (!settled) later::later(poll, 0.005)
    }
    poll()
  })
}
