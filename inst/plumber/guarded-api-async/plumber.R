# A plumber API that guards its calls to a downstream service with a circuit
# breaker (asynchronous: the endpoints return promises, so the process keeps
# serving other requests while a downstream call is in flight).
#
#   plumber::pr_run(plumber::plumb_api("circuitbreaker", "guarded-api-async"), port = 8000)
#
# Environment variables:
#   DOWNSTREAM_URL  the downstream resource (default http://127.0.0.1:8001);
#                   it should answer with JSON
#   ADMIN_TOKEN     when set, POST /circuit-breakers/<name>/reset, /force-open
#                   and /disable are added, for requests whose X-Admin-Token
#                   header has this value
#
# Endpoints:
#   GET /ping                      answers without touching the downstream
#   GET /quote                     the downstream's answer, or a fallback
#                                  ("source": "fallback") when the call fails
#                                  or the breaker is open
#   GET /quote/live                the downstream's answer without fallback:
#                                  502 when the call fails, 503 with
#                                  Retry-After while the breaker is open
#   GET /circuit-breakers          the status of every registered breaker
#   GET /circuit-breakers/metrics  the same in the Prometheus text format

library(circuitbreaker)

downstream_url <- Sys.getenv("DOWNSTREAM_URL", "http://127.0.0.1:8001")
admin_token <- Sys.getenv("ADMIN_TOKEN")

# Named, so that it is registered and reported by /circuit-breakers. Three
# consecutive failures open it for 30 seconds; a call may take 2 seconds.
quotes <- circuit_breaker(name = "quotes", failure_threshold = 3, recovery_timeout = 30, timeout = 2)

# The JSON body of a response from curl.
as_quote <- function(resp) {
  list(source = "downstream", quote = jsonlite::fromJSON(rawToChar(resp$content), simplifyVector = FALSE))
}

# What a client is told when the downstream call did not answer: a short
# reason of the API's own. The condition's text (which may hold an internal
# address and port, or the downstream's error page) goes to the server's log
# only.
client_reason <- function(cond) {
  if (inherits(cond, "circuit_breaker_open")) return("breaker open")
  message("quotes: the downstream call failed: ", conditionMessage(cond))
  "downstream unavailable"
}

bad_gateway <- function(res, reason) {
  res$status <- 502L
  list(error = "502 - Bad Gateway", reason = reason)
}

#* @plumber
function(pr) {
  authorize <- if (nzchar(admin_token)) {
    function(req) identical(req$HTTP_X_ADMIN_TOKEN, admin_token)
  }
  pr |>
    pr_circuit_breakers(authorize = authorize) |>
    plumber::pr_set_error(breaker_error_handler())
}

#* Liveness check
#* @serializer unboxedJSON
#* @get /ping
function() {
  list(ok = TRUE)
}

#* A quote from the downstream service, or a fallback
#* @serializer unboxedJSON
#* @get /quote
function() {
  # A response with a 5xx (or 408, 429) status, a timeout or a refused
  # connection is a failure: the fallback answers.
  fallback <- function(cond) list(source = "fallback", quote = NULL, reason = client_reason(cond))
  breaker_fetch_async(downstream_url, breaker = quotes, fallback = fallback) |>
    promises::then(function(value) {
      if (identical(value[["source"]], "fallback")) value else as_quote(value)
    })
}

#* A quote from the downstream service, without fallback
#* @serializer unboxedJSON
#* @get /quote/live
function(res) {
  breaker_fetch_async(downstream_url, breaker = quotes) |>
    promises::then(
      onFulfilled = function(resp) {
        if (resp$status_code < 400) return(as_quote(resp))
        message("quotes: the downstream answered HTTP ", resp$status_code)
        bad_gateway(res, "downstream unavailable")
      },
      onRejected = function(e) {
        # A call the open breaker rejected: breaker_error_handler() answers
        # 503 with Retry-After.
        if (inherits(e, "circuit_breaker_open")) stop(e)
        bad_gateway(res, client_reason(e))
      }
    )
}
