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

# curl::curl_fetch_multi() as a promise, driven from the later event loop by
# the pool's poller (watch_pool()).
curl_fetch_promise <- function(url, handle, pool) {
  promises::promise(function(resolve, reject) {
    curl::curl_fetch_multi(url,
      done = function(res) resolve(res),
      fail = function(msg) reject(simpleError(msg)),
      handle = handle, pool = pool
    )
    watch_pool(pool)
  })
}

# One poller per curl pool and event loop with transfers in flight, however
# many they are; it stops when the pool has none left (cancelled transfers
# included).
#
# With later 1.4.0 or later, the poller waits with later::later_fd() on the
# pool's sockets (curl::multi_fdset()) until one is ready or curl's next
# timeout is due: a request in flight costs nothing while its downstream is
# silent. Older later has no later_fd(): then one tick per event loop runs
# every watched pool, every 5 ms while a pool is young (it started, or one of
# its transfers finished, less than 50 ms ago), then less often, at a tenth
# of the time since, up to every 50 ms: an answer is noticed at most about
# 10% late (and at most 5 ms late within its first 50 ms). Each wake-up of
# later costs the process about half a millisecond of CPU: each request used
# to run its own 5 ms loop, and a plumber process with 8 calls hanging spent
# about a third of a core on them (bench/RESULTS.md, section 10).
async_pollers <- new.env(parent = emptyenv())
# "<loop id>:<pool address>" -> list(pool, since: its start or last finished
# transfer, cancel: its wait on the sockets)
async_pollers$pools <- list()
async_pollers$ticks <- list()      # loop id -> list(cancel, due): its next tick

POLL_INTERVAL <- 0.005      # the tick without later_fd(): shortest, seconds
POLL_INTERVAL_MAX <- 0.05   # and longest
POLL_MAX_WAIT <- 1          # longest wait on the sockets with later_fd(), seconds

watch_pool <- function(pool) {
  loop <- as.character(later::current_loop()$id)
  key <- paste0(loop, ":", rlang::obj_address(pool))
  entry <- async_pollers$pools[[key]] %||% list(pool = pool)
  entry$since <- now_seconds()
  async_pollers$pools[[key]] <- entry
  if (has_later_fd()) {
    # A pool already watched waits on the sockets of its other transfers:
    # the wait starts again with this one's.
    if (is.function(entry$cancel)) entry$cancel()
    poll_pool_fd(pool, key)
  } else if (run_pool(pool, key)) {
    schedule_tick(loop, POLL_INTERVAL)
  }
  invisible()
}

now_seconds <- function() as.numeric(Sys.time())

has_later_fd <- function() {
  if (is.null(async_pollers$later_fd)) {
    ns <- asNamespace("later")
    has <- exists("later_fd", envir = ns, inherits = FALSE)
    async_pollers$later_fd <- if (has) get("later_fd", envir = ns) else FALSE
  }
  is.function(async_pollers$later_fd)
}

# Runs a pool's transfers once (the callbacks of those that finished); TRUE
# while some are still in flight. A pool without any is forgotten; so is one
# whose run fails (a callback's error), which then propagates.
run_pool <- function(pool, key) {
  status <- withCallingHandlers(
    curl::multi_run(timeout = 0, pool = pool),
    error = function(e) async_pollers$pools[[key]] <- NULL
  )
  if (status$pending > 0L) {
    if (status$success + status$error > 0L && !is.null(async_pollers$pools[[key]])) {
      async_pollers$pools[[key]]$since <- now_seconds()
    }
    return(TRUE)
  }
  async_pollers$pools[[key]] <- NULL
  FALSE
}

poll_pool_fd <- function(pool, key) {
  if (!run_pool(pool, key)) return(invisible())
  fds <- curl::multi_fdset(pool = pool)
  # multi_fdset()'s timeout is in milliseconds, -1 when curl has none.
  wait <- if (fds$timeout < 0) POLL_MAX_WAIT else min(fds$timeout / 1000, POLL_MAX_WAIT)
  if (!length(fds$reads) && !length(fds$writes) && !length(fds$exceptions)) {
    # Nothing to wait on (a name being resolved, say): poll.
    wait <- min(wait, POLL_INTERVAL)
  }
  cancel <- async_pollers$later_fd(function(ready) poll_pool_fd(pool, key),
                                   readfds = fds$reads, writefds = fds$writes, exceptfds = fds$exceptions,
                                   timeout = wait)
  if (!is.null(async_pollers$pools[[key]])) async_pollers$pools[[key]]$cancel <- cancel
  invisible()
}

# The tick of one event loop (later < 1.4.0): runs the loop's pools, and
# comes again while some have transfers in flight, sooner for young pools.
poll_tick <- function(loop) {
  prefix <- paste0(loop, ":")
  on.exit({
    mine <- async_pollers$pools[startsWith(names(async_pollers$pools), prefix)]
    if (length(mine)) {
      age <- now_seconds() - max(vapply(mine, function(entry) entry$since, numeric(1)))
      schedule_tick(loop, min(max(age / 10, POLL_INTERVAL), POLL_INTERVAL_MAX))
    }
  })
  for (key in names(async_pollers$pools)) {
    entry <- async_pollers$pools[[key]]
    if (startsWith(key, prefix) && !is.null(entry)) run_pool(entry$pool, key)
  }
}

# The loop's next tick in `delay` seconds, unless one is due sooner: a new
# pool does not wait for the slow tick of older ones.
schedule_tick <- function(loop, delay) {
  due <- now_seconds() + delay
  tick <- async_pollers$ticks[[loop]]
  if (!is.null(tick)) {
    if (tick$due <= due) return(invisible())
    tick$cancel()
  }
  cancel <- later::later(function() {
    async_pollers$ticks[[loop]] <- NULL
    poll_tick(loop)
  }, delay)
  async_pollers$ticks[[loop]] <- list(cancel = cancel, due = due)
  invisible()
}
