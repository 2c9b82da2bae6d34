#' Circuit breaker routes and 503s for a plumber2 API
#'
#' @description
#' `api_circuit_breakers()` is [pr_circuit_breakers()] and
#' [breaker_error_handler()] for [plumber2](https://plumber2.posit.co), in one
#' call that fits in a plumber2 pipe. It adds routes that report the
#' registered breakers (those created with a `name`, including every
#' [breaker_for()] breaker):
#'
#' * `GET {path}`: a JSON array with one object per registered breaker, with
#'   the fields [pr_circuit_breakers()] lists (`name`, `state`, the counts,
#'   the rates, `seconds_until_probe`, `store`, ...).
#' * `GET {path}/metrics`: the same in the Prometheus text format (see
#'   [breaker_prometheus()]), with the content type
#'   `text/plain; version=0.0.4; charset=utf-8`.
#'
#' and makes the API answer `503 Service Unavailable` when a breaker rejects
#' a call, as [breaker_error_handler()] does for plumber: when a handler lets
#' a `circuit_breaker_rejected` error escape (a call through an open breaker,
#' or refused by its full bulkhead, made without a fallback, or an error
#' whose `parent` chain holds one), or returns a promise rejected with one,
#' the answer has
#'
#' * a `Retry-After` header: the seconds until the breaker lets a probe
#'   through, rounded up, at least 1; no header when the breaker was forced
#'   open (it stays open until reset);
#' * the JSON body `{"error": "503 - Service Unavailable", "breaker": <name>,
#'   "state": <state>, "retry_after": <seconds>}` (`breaker` is `null` for an
#'   unnamed breaker, `retry_after` is `null` when forced open).
#'
#' Other errors keep plumber2's own treatment (a 500, or the answer of a
#' `plumber2::abort_*()` condition).
#'
#' @details
#' Only when `authorize` is given, control routes are added too:
#' `POST {path}/{name}/reset`, `POST {path}/{name}/force-open` and
#' `POST {path}/{name}/disable` call the breaker's `$reset()`,
#' `$force_open()` and `$disable()` and answer with its new status (the
#' object `GET {path}` lists for it). `authorize(request)` is called first,
#' with plumber2's request (a `reqres::Request`; read a header with
#' `request$get_header("X-Admin-Token")`): unless it returns `TRUE` the answer
#' is 403 with the JSON body `{"error": "403 - Forbidden"}`; an unknown
#' breaker gets 404. A name with characters that have a meaning in a URL
#' path (such as `/`) must be percent-encoded. Names are decoded strictly: a
#' malformed escape (`%G1`, a lone `%`) or a NUL byte (`%00`, anywhere in
#' the name) gets 404, like an unknown breaker.
#'
#' The routes answer with `Cache-Control: no-store`. They are ordinary
#' plumber2 handlers, added to the API's last route like those of
#' `plumber2::api_get()`: whatever applies to the API's handlers
#' (authentication guards, loggers, security headers) applies to them.
#'
#' ## How the 503 is made
#' plumber2 has no error handler to set: an error escaping a handler becomes
#' a 500, and only reqres's problem conditions (`plumber2::abort_status()`
#' and the like) choose another status, with a plain-text or an RFC 9457
#' problem body and no way to add `Retry-After`. So `api_circuit_breakers()`
#' registers a handler for the API's `"start"` event that wraps every request
#' and header handler of the API's routes (through routr's
#' `Route$remap_handlers()`), whether they were added before or after this
#' call. The wrapper only steps in for a rejection by a breaker; any other
#' error goes on unchanged, and handlers that catch the rejection themselves
#' (a `tryCatch()` or a fallback) are not affected. Handlers added once the
#' API is running are not wrapped.
#'
#' In an annotated route file, call `api_circuit_breakers()` from the
#' `@plumber` block. plumber2 (0.2.0) runs such a file's top-level code twice
#' while it reads it (the second time when roxygen2 parses the annotations),
#' and a second `circuit_breaker(name = "x")` replaces the registered breaker
#' `"x"`: create named breakers there with
#' `breaker_get("x")`, and `circuit_breaker(name = "x", ...)` only when that is
#' `NULL`, or the status routes report a breaker the handlers do not call.
#'
#' A breaker lives in its R process: guard calls in the API's own process,
#' with `$execute()`, or with a handler that returns a promise
#' ([breaker_perform_async()], [breaker_fetch_async()], `$execute_async()`
#' around a `mirai::mirai()`). Do not put the breaker inside a handler
#' marked `@async` (or `async = TRUE`): that handler runs in another process,
#' with a copy of the breaker whose counts the API never sees.
#'
#' @param api A plumber2 API (`plumber2::api()`, `plumber2::api_package()`).
#' @param path Where to add the routes: a path of one or more segments made
#'   of letters, digits, `.`, `_`, `~` and `-`, starting with `/` and not
#'   ending with one.
#' @param authorize `NULL` (no control routes) or a function of the request
#'   that returns `TRUE` when the caller may change breakers.
#' @return `api`, with the routes added (plumber2 APIs are changed in place),
#'   so that calls can be piped like plumber2's `api_*()` functions.
#' @seealso [pr_circuit_breakers()] and [breaker_error_handler()] for plumber;
#'   the example API in `system.file("plumber2", package = "circuitbreaker")`,
#'   runnable with `plumber2::api_package("circuitbreaker", "guarded-api")`.
#' @examples
#' if (requireNamespace("plumber2", quietly = TRUE)) {
#'   inventory <- circuit_breaker(name = "inventory", failure_threshold = 1)
#'   admin_token <- "change me"
#'   api <- plumber2::api(port = 8000) |>
#'     plumber2::api_get("/stock", function() {
#'       # No fallback: when the breaker is open, the API answers 503.
#'       inventory$execute(function() stop("inventory service unreachable"))
#'     }) |>
#'     api_circuit_breakers(authorize = function(request) {
#'       identical(request$get_header("X-Admin-Token"), admin_token)
#'     })
#'   # Serve it with plumber2::api_run(api), then
#'   #   curl http://127.0.0.1:8000/circuit-breakers
#'   #   curl http://127.0.0.1:8000/circuit-breakers/metrics
#'   #   curl -X POST -H "X-Admin-Token: change me" \
#'   #     http://127.0.0.1:8000/circuit-breakers/inventory/force-open
#'   breaker_remove("inventory")
#' }
#' @export
api_circuit_breakers <- function(api, path = "/circuit-breakers", authorize = NULL) {
  check_installed("plumber2", "api_circuit_breakers()")
  call <- rlang::current_env()
  if (!plumber2::is_plumber_api(api)) {
    abort_bad_argument("api", "a plumber2 API (from `plumber2::api()`)", api, call = call)
  }
  web_check_path(path, call = call)
  web_check_authorize(authorize, call = call)
  json <- list(`application/json` = api_cb_json_format())

  api <- plumber2::api_get(api, path, function(response, ...) {
    response$set_header("Cache-Control", "no-store")
    web_statuses()
  }, serializers = json)

  # The text is the body as it is; the content type is set after the
  # formatter's, which would be plain text/plain.
  text <- list(`text/plain` = function(x) x)
  api <- plumber2::api_get(api, paste0(path, "/metrics"), function(response, ...) {
    response$set_header("Content-Type", prometheus_content_type)
    response$set_header("Cache-Control", "no-store")
    breaker_prometheus()
  }, serializers = text)

  if (!is.null(authorize)) {
    for (action in names(web_control_actions)) {
      api <- plumber2::api_post(api, paste0(path, "/<name>/", action),
                                api_cb_control_handler(action, authorize), serializers = json)
    }
  }
  api_cb_guard_on_start(api)
}

# The JSON formatter of every answer: unboxed scalars, NA as null, full
# precision (what plumber's pr_cb_json_serializer() does).
api_cb_json_format <- function() plumber2::format_unboxed(na = "null", digits = NA)

api_cb_control_handler <- function(action, authorize) {
  force(action)
  force(authorize)
  function(request, response, name, ...) {
    answer <- web_control(action, name, authorized = authorize(request))
    response$status <- answer$status
    if (answer$no_store) response$set_header("Cache-Control", "no-store")
    answer$body
  }
}

# Wraps the API's handlers when it starts (see "How the 503 is made"), once
# per API however many times api_circuit_breakers() is called on it.
api_cb_guard_on_start <- function(api) {
  id <- "circuitbreaker_guard_handlers"
  if (isTRUE(api$get_data(id))) return(api)
  api$set_data(id, TRUE)
  plumber2::api_on(api, "start", function(server, ...) api_cb_guard_routes(server), id = id)
}

api_cb_guard_routes <- function(api) {
  # Only the routers the API has: asking plumber2 for one creates it.
  for (kind in c("request", "header")) {
    if (!api$has_plugin(paste0(kind, "_routr"))) next
    router <- if (kind == "request") api$request_router else api$header_router
    for (name in router$routes) {
      route <- router$get_route(name)
      if (!inherits(route, "Route")) next
      route$remap_handlers(function(method, path, handler) {
        route$add_handler(method, path, api_cb_guard(handler))
      })
    }
  }
  invisible(api)
}

# A handler that answers 503 for a rejection by a breaker, raised or in a
# rejected promise. A calling handler (not tryCatch()) looks at the error,
# so that every other error goes on as if the wrapper were not there, with
# its call stack, to plumber2's logging.
api_cb_guard <- function(handler) {
  if (isTRUE(attr(handler, "circuitbreaker_guard"))) return(handler)
  force(handler)
  guarded <- function(request, response, keys, ...) {
    result <- withRestarts(
      withCallingHandlers(
        handler(request = request, response = response, keys = keys, ...),
        error = function(e) {
          open <- web_find_open(e)
          if (!is.null(open)) invokeRestart("circuitbreaker_reject", open)
        }
      ),
      circuitbreaker_reject = function(open) api_cb_reject(response, open)
    )
    if (promises::is.promising(result)) {
      result <- promises::catch(result, function(e) {
        open <- web_find_open(e)
        if (is.null(open)) stop(e)
        api_cb_reject(response, open)
      })
    }
    result
  }
  attr(guarded, "circuitbreaker_guard") <- TRUE
  guarded
}

# Sets the 503 answer on plumber2's response and stops the routing there, as
# an abort_*() condition would.
api_cb_reject <- function(response, open) {
  answer <- web_rejection(open)
  response$status <- answer$status
  if (!is.null(answer$retry_after)) response$set_header("Retry-After", answer$retry_after)
  response$body <- answer$body
  # Formatted now, so that the formatter the handler's serializers set (which
  # may not be JSON) is not used.
  response$format(json = api_cb_json_format(), default = "json")
  plumber2::Break
}
