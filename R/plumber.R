#' Circuit breaker endpoints for a plumber API
#'
#' @description
#' `pr_circuit_breakers()` adds endpoints that report the registered breakers
#' (those created with a `name`, including every [breaker_for()] breaker) to a
#' plumber router:
#'
#' * `GET {path}`: a JSON array with one object per registered breaker:
#'   `name`, `state`, `seconds_in_state`, the counts (`calls`, `successes`,
#'   `failures`, `slow_calls`, `ignored`, `rejected`, `released`,
#'   `failure_count`, `times_opened`, `window_calls`), the rates
#'   (`failure_rate`, `slow_call_rate`; `null` while the window is empty),
#'   `open_duration` and `seconds_until_probe` (`null` when forced open);
#'   `store`, and for a fleet breaker ([breaker_store_redis()]) `mode`
#'   (`"fleet"` or `"local"`), `sync_lag` (seconds since the last good sync),
#'   `last_sync` (its time, ISO 8601 in UTC) and `last_error` (the last
#'   failure of the link to Redis, such as `"WRONGPASS ..."`, never with the
#'   password), `topology` (`"single"`, `"sentinel"` or `"cluster"`),
#'   `master` (the breaker's master), `masters` (their number) and `tls`
#'   (the TLS version of the link, such as `"TLSv1.3"`, or `"off"`).
#' * `GET {path}/metrics`: the same in the Prometheus text format (see
#'   [breaker_prometheus()]), with the content type
#'   `text/plain; version=0.0.4; charset=utf-8`.
#'
#' @details
#' Only when `authorize` is given, control endpoints are added too:
#' `POST {path}/{name}/reset`, `POST {path}/{name}/force-open` and
#' `POST {path}/{name}/disable` call the breaker's `$reset()`,
#' `$force_open()` and `$disable()` and answer with its new status (the
#' object `GET {path}` lists for it). `authorize(req)` is called first, with
#' plumber's request: unless it returns `TRUE` the answer is 403 with the JSON
#' body `{"error": "403 - Forbidden"}` (an error in `authorize` is an error
#' of the endpoint, see [breaker_error_handler()]); an unknown breaker gets
#' 404. A name with characters that have a meaning in a URL path (such as
#' `/`) must be percent-encoded. Names are decoded strictly: a malformed
#' escape (`%G1`, a lone `%`) or a NUL byte (`%00`, anywhere in the name)
#' gets 404, like an unknown breaker.
#'
#' The endpoints answer with `Cache-Control: no-store`. They are ordinary
#' plumber endpoints: filters you add (authentication, logging) apply to them.
#'
#' @param pr A plumber router (`plumber::pr()`, `plumber::plumb()`).
#' @param path Where to mount the endpoints: a path of one or more segments
#'   made of letters, digits, `.`, `_`, `~` and `-`, starting with `/` and not
#'   ending with one.
#' @param authorize `NULL` (no control endpoints) or a function of the
#'   request that returns `TRUE` when the caller may change breakers.
#' @return `pr`, invisibly, with the endpoints added (plumber routers are
#'   changed in place), so that calls can be piped like plumber's `pr_*()`
#'   functions.
#' @seealso [breaker_error_handler()] to answer 503 when a breaker rejects a
#'   call; the example APIs in `system.file("plumber", package =
#'   "circuitbreaker")`, runnable with
#'   `plumber::plumb_api("circuitbreaker", "guarded-api")`.
#' @examples
#' if (requireNamespace("plumber", quietly = TRUE)) {
#'   inventory <- circuit_breaker(name = "inventory")
#'   admin_token <- "change me"
#'   pr <- plumber::pr() |>
#'     pr_circuit_breakers(authorize = function(req) {
#'       identical(req$HTTP_X_ADMIN_TOKEN, admin_token)
#'     }) |>
#'     plumber::pr_set_error(breaker_error_handler())
#'   # Serve it with plumber::pr_run(pr, port = 8000), then
#'   #   curl http://127.0.0.1:8000/circuit-breakers
#'   #   curl http://127.0.0.1:8000/circuit-breakers/metrics
#'   #   curl -X POST -H "X-Admin-Token: change me" \
#'   #     http://127.0.0.1:8000/circuit-breakers/inventory/force-open
#'   breaker_remove("inventory")
#' }
#' @export
pr_circuit_breakers <- function(pr, path = "/circuit-breakers", authorize = NULL) {
  check_installed("plumber", "pr_circuit_breakers()")
  call <- rlang::current_env()
  if (!inherits(pr, "Plumber")) {
    abort_bad_argument("pr", "a plumber router (from `plumber::pr()` or `plumber::plumb()`)", pr, call = call)
  }
  web_check_path(path, call = call)
  web_check_authorize(authorize, call = call)
  json <- pr_cb_json_serializer()

  plumber::pr_get(pr, path, function(req, res) {
    res$setHeader("Cache-Control", "no-store")
    web_statuses()
  }, serializer = json)

  plumber::pr_get(pr, paste0(path, "/metrics"), function(req, res) {
    # Returning the response itself skips plumber's serializers: the body is
    # sent as it is, with this content type.
    res$setHeader("Content-Type", prometheus_content_type)
    res$setHeader("Cache-Control", "no-store")
    res$body <- breaker_prometheus()
    res
  })

  if (!is.null(authorize)) {
    for (action in names(web_control_actions)) {
      plumber::pr_post(pr, paste0(path, "/<name>/", action),
                       pr_cb_control_handler(action, authorize), serializer = json)
    }
  }
  invisible(pr)
}

#' Answer 503 when a circuit breaker rejects a call in a plumber API
#'
#' `breaker_error_handler()` returns an error handler for
#' `plumber::pr_set_error()`. When an endpoint lets a
#' `circuit_breaker_rejected` error escape (`circuit_breaker_open`: a call
#' through an open breaker, made without a fallback; `circuit_breaker_full`:
#' a call its full bulkhead refused; or an error whose `parent` chain holds
#' one), the API answers `503 Service Unavailable` instead of 500, with
#'
#' * a `Retry-After` header: the seconds until the breaker lets a probe
#'   through, rounded up, at least 1 (1 for a full bulkhead, whose permits
#'   may free at any moment); no header when the breaker was forced open (it
#'   stays open until reset);
#' * the JSON body `{"error": "503 - Service Unavailable", "breaker": <name>,
#'   "state": <state>, "retry_after": <seconds>}` (`breaker` is `null` for an
#'   unnamed breaker, `retry_after` is `null` when forced open). With
#'   plumber's debug mode on, the body also has the condition's `message`.
#'
#' Any other error goes to `otherwise`, or by default gets plumber's own
#' default treatment: the error is printed, and the answer is a 500 with
#' `{"error": "500 - Internal server error"}` (plus the error's `message` in
#' debug mode), or `{"error": "Internal error"}` if the endpoint had already
#' set another status.
#'
#' @param otherwise `NULL`, or an error handler (a function of `req`, `res`
#'   and `err`) for the errors that are not a rejection by a breaker.
#' @return A function of `req`, `res` and `err`.
#' @seealso [pr_circuit_breakers()].
#' @examples
#' if (requireNamespace("plumber", quietly = TRUE)) {
#'   inventory <- circuit_breaker(failure_threshold = 1, name = "inventory")
#'   pr <- plumber::pr() |>
#'     plumber::pr_get("/stock", function() {
#'       # No fallback: when the breaker is open, the API answers 503.
#'       inventory$execute(function() stop("inventory service unreachable"))
#'     }) |>
#'     plumber::pr_set_error(breaker_error_handler())
#'   breaker_remove("inventory")
#' }
#' @export
breaker_error_handler <- function(otherwise = NULL) {
  check_installed("plumber", "breaker_error_handler()")
  if (!is.null(otherwise) && !is.function(otherwise)) {
    abort_bad_argument("otherwise", "`NULL` or an error handler (a function of `req`, `res` and `err`)",
                       otherwise, call = rlang::current_env())
  }
  json <- pr_cb_json_serializer()
  function(req, res, err) {
    open <- web_find_open(err)
    if (is.null(open)) {
      if (!is.null(otherwise)) return(otherwise(req, res, err))
      return(pr_cb_default_error(req, res, err))
    }
    answer <- web_rejection(open)
    res$status <- answer$status
    res$serializer <- json
    if (!is.null(answer$retry_after)) res$setHeader("Retry-After", answer$retry_after)
    body <- answer$body
    if (pr_cb_debug(req)) body$message <- conditionMessage(open)
    body
  }
}

# JSON with scalars unboxed and NA, NaN and Inf as null.
pr_cb_json_serializer <- function() {
  plumber::serializer_unboxed_json(na = "null", digits = NA)
}

pr_cb_control_handler <- function(action, authorize) {
  force(action)
  force(authorize)
  function(req, res) {
    # The breaker is looked up only for an authorized caller: a refusal says
    # nothing about which breakers exist.
    answer <- web_control(action, req$argsPath$name, authorized = authorize(req))
    res$status <- answer$status
    if (answer$no_store) res$setHeader("Cache-Control", "no-store")
    answer$body
  }
}

pr_cb_debug <- function(req) {
  pr <- tryCatch(req$pr, error = function(e) NULL)
  is.environment(pr) && is.function(pr$getDebug) && isTRUE(pr$getDebug())
}

# What plumber does with an error when no error handler is set (plumber has
# no public accessor for its default handler): print it, answer 500 (or keep
# a status the endpoint already set), and show the message in debug mode.
pr_cb_default_error <- function(req, res, err) {
  print(err)
  res$serializer <- plumber::serializer_unboxed_json()
  body <- list()
  if (identical(as.integer(res$status), 200L)) {
    res$status <- 500L
    body$error <- "500 - Internal server error"
  } else {
    body$error <- "Internal error"
  }
  if (pr_cb_debug(req)) body["message"] <- as.character(err)
  body
}
