# A plumber2 API that guards its calls to a downstream service with a circuit
# breaker, synchronously (httr2 through breaker_perform()) and
# asynchronously (handlers that return promises, so that the process keeps
# serving other requests while a downstream call is in flight).
#
#   plumber2::api_run(plumber2::api_package("circuitbreaker", "guarded-api", port = 8000))
#
# Environment variables:
#   DOWNSTREAM_URL    the downstream resource (default http://127.0.0.1:8001);
#                     it should answer with JSON
#   ADMIN_TOKEN       when set, POST /circuit-breakers/<name>/reset,
#                     /force-open and /disable are added, for requests whose
#                     X-Admin-Token header has this value
#   RECOVERY_TIMEOUT  seconds the breaker stays open before a probe (default 30)
#
# Routes:
#   GET /ping                      answers without touching the downstream
#   GET /quote                     the downstream's answer, or a fallback
#                                  ("source": "fallback") when the call fails
#                                  or the breaker is open
#   GET /quote/live                the downstream's answer without fallback:
#                                  502 when the call fails, 503 with
#                                  Retry-After while the breaker is open
#   GET /quote/async               /quote, asynchronous (breaker_perform_async())
#   GET /quote/async/live          /quote/live, asynchronous
#   GET /quote/mirai               /quote, with the downstream called in a mirai
#                                  daemon through $execute_async() (when the
#                                  mirai package is installed)
#   GET /circuit-breakers          the status of every registered breaker
#   GET /circuit-breakers/metrics  the same in the Prometheus text format
#
# The breaker lives in this process, so the handlers that use it return
# promises rather than being marked @async: an @async handler runs in
# another process, with a copy of the breaker that this process never sees.

library(circuitbreaker)

downstream_url <- Sys.getenv("DOWNSTREAM_URL", "http://127.0.0.1:8001")
admin_token <- Sys.getenv("ADMIN_TOKEN")
recovery_timeout <- as.numeric(Sys.getenv("RECOVERY_TIMEOUT", "30"))

# Named, so that it is registered and reported by /circuit-breakers. Three
# consecutive failures open it; a call may take 2 seconds. Every route shares
# it: they call the same downstream.
#
# plumber2 runs this file's top-level code twice while it reads it (once for
# the handlers' environment, once more when roxygen2 parses the
# annotations), so the breaker is looked up by name before it is created: a
# second circuit_breaker(name = "quotes") would replace the registered one,
# and /circuit-breakers would report a breaker the handlers never call.
quotes <- breaker_get("quotes")
if (is.null(quotes)) {
  quotes <- circuit_breaker(name = "quotes", failure_threshold = 3,
                            recovery_timeout = recovery_timeout, timeout = 2)
}

quote_request <- httr2::request(downstream_url)

# What a client is told when the downstream call did not answer: a short
# reason of the API's own. The condition's text (which may hold an internal
# address and port, or the downstream's error page) goes to the server's log
# only.
client_reason <- function(cond) {
  if (inherits(cond, "circuit_breaker_open")) return("breaker open")
  message("quotes: the downstream call failed: ", conditionMessage(cond))
  "downstream unavailable"
}

fallback <- function(cond) list(source = "fallback", quote = NULL, reason = client_reason(cond))

as_quote <- function(resp) list(source = "downstream", quote = httr2::resp_body_json(resp))

# A failed call without fallback. A call the open breaker rejected goes on as
# an error: api_circuit_breakers() turns it into a 503 with Retry-After.
bad_gateway <- function(e, response) {
  if (inherits(e, "circuit_breaker_open")) stop(e)
  response$status <- 502L
  list(error = "502 - Bad Gateway", reason = client_reason(e))
}

#* @plumber
function(api) {
  authorize <- if (nzchar(admin_token)) {
    function(request) identical(request$get_header("X-Admin-Token"), admin_token)
  }
  if (requireNamespace("mirai", quietly = TRUE)) {
    # One daemon for /quote/mirai, for as long as the API runs.
    api <- api |>
      plumber2::api_on("start", function(...) mirai::daemons(1)) |>
      plumber2::api_on("end", function(...) mirai::daemons(0))
  }
  api_circuit_breakers(api, authorize = authorize)
}

#* Liveness check
#* @get /ping
#* @serializer unboxedJSON
function() {
  list(ok = TRUE)
}

#* A quote from the downstream service, or a fallback
#* @get /quote
#* @serializer unboxedJSON
function() {
  # A 5xx (or 408, 429) response, a timeout or a refused connection is a
  # failure: the fallback answers. Other HTTP errors (a 404) propagate and
  # count nowhere: plumber2 answers 500.
  resp <- breaker_perform(quote_request, breaker = quotes, fallback = fallback)
  if (identical(resp[["source"]], "fallback")) resp else as_quote(resp)
}

#* A quote from the downstream service, without fallback
#* @get /quote/live
#* @serializer unboxedJSON
function(response) {
  tryCatch(as_quote(breaker_perform(quote_request, breaker = quotes)),
           error = function(e) bad_gateway(e, response))
}

#* A quote from the downstream service, or a fallback, asynchronously
#* @get /quote/async
#* @serializer unboxedJSON
function() {
  breaker_perform_async(quote_request, breaker = quotes, fallback = fallback) |>
    promises::then(function(resp) {
      if (identical(resp[["source"]], "fallback")) resp else as_quote(resp)
    })
}

#* A quote from the downstream service, without fallback, asynchronously
#* @get /quote/async/live
#* @serializer unboxedJSON
function(response) {
  breaker_perform_async(quote_request, breaker = quotes) |>
    promises::then(
      onFulfilled = as_quote,
      onRejected = function(e) bad_gateway(e, response)
    )
}

#* A quote from the downstream service called in a mirai daemon, or a fallback
#* @get /quote/mirai
#* @serializer unboxedJSON
function() {
  if (!requireNamespace("mirai", quietly = TRUE)) {
    plumber2::abort_not_found("This API runs without the mirai package.")
  }
  # The breaker decides here, in the API's process; only the call itself runs
  # in the daemon. A mirai that fails (an error in the daemon) is a failure.
  quotes$execute_async(function() {
    mirai::mirai({
      resp <- httr2::req_perform(httr2::req_timeout(httr2::request(url), 2))
      list(source = "downstream", quote = httr2::resp_body_json(resp))
    }, url = downstream_url)
  }, fallback)
}
