# A plumber API that guards its calls to a downstream service with a circuit
# breaker (synchronous: httr through the breaker's $execute()).
#
#   plumber::pr_run(plumber::plumb_api("circuitbreaker", "guarded-api"), port = 8000)
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
# consecutive failures open it for 30 seconds.
quotes <- circuit_breaker(name = "quotes", failure_threshold = 3, recovery_timeout = 30)

# The call to guard. An HTTP 5xx (or 408, 429) error from stop_for_status(),
# a timeout or a refused connection is a failure for the breaker.
get_quote <- function() {
  r <- httr::GET(downstream_url, httr::timeout(2))
  httr::stop_for_status(r)
  list(source = "downstream", quote = httr::content(r, as = "parsed", type = "application/json"))
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
  quotes$execute(get_quote, function(cond) {
    list(source = "fallback", quote = NULL, reason = client_reason(cond))
  })
}

#* A quote from the downstream service, without fallback
#* @serializer unboxedJSON
#* @get /quote/live
function(res) {
  tryCatch(quotes$execute(get_quote), error = function(e) {
    # A call the open breaker rejected: breaker_error_handler() answers 503
    # with Retry-After.
    if (inherits(e, "circuit_breaker_open")) stop(e)
    res$status <- 502L
    list(error = "502 - Bad Gateway", reason = client_reason(e))
  })
}
