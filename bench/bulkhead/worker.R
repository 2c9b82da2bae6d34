# One plumber worker of the bulkhead demonstration (run.R, next to this
# file). run.R starts N identical copies, each in its own background R
# process on its own port of 127.0.0.1, as a host runs N plumber processes
# behind a reverse proxy. Every worker guards the same downstream with a
# host-shared breaker of the same name and settings, and serves a trivial
# endpoint that calls nothing. It uses circuitbreaker's exported API only.
#
# Configuration (environment variables set by run.R):
#   BULKHEAD_DOWNSTREAM_URL   the downstream's /quote URL
#   BULKHEAD_STORE_DIR        the host store's directory
#   BULKHEAD_LIMIT            "none" (no bulkhead), a whole number (at most
#                             that many calls at once on the host), or
#                             "share:<p>" (share(p) of the processes attached)
#   BULKHEAD_TIMEOUT          seconds before a downstream call gives up
#   BULKHEAD_MAX_LIFETIME     seconds after which the process quits anyway
#
# Endpoints:
#   /ready   no downstream call: run.R polls it until the worker is up
#   /ping    the trivial endpoint: no downstream call
#   /quote   the downstream call through the breaker, with a fallback that
#            answers at once and says why (open, full, or the call failed)

config <- function(name) {
  value <- Sys.getenv(name)
  if (!nzchar(value)) stop("environment variable ", name, " is not set")
  value
}
downstream_url <- config("BULKHEAD_DOWNSTREAM_URL")
timeout <- as.numeric(config("BULKHEAD_TIMEOUT"))
limit <- config("BULKHEAD_LIMIT")

# The breaker's own rules are left loose on purpose (it trips only after
# 1000 failures): the demonstration measures what happens before a breaker
# has seen enough failures to trip, and what it lets through while half
# open. That is the time a bulkhead is for.
breaker_args <- list(
  name = "quotes",
  failure_threshold = 1000,
  store = circuitbreaker::breaker_store_host(config("BULKHEAD_STORE_DIR"))
)
if (grepl("^share:", limit)) {
  breaker_args$max_concurrent <- circuitbreaker::share(as.numeric(sub("^share:", "", limit)))
} else if (!identical(limit, "none")) {
  breaker_args$max_concurrent <- as.integer(limit)
}
breaker <- do.call(circuitbreaker::circuit_breaker, breaker_args)

# A fresh connection per call: no call waits on another one's connection.
downstream_handle <- function() {
  ms <- max(1, round(timeout * 1000))
  handle <- curl::new_handle(timeout_ms = ms, connecttimeout_ms = ms, forbid_reuse = TRUE)
  curl::handle_setheaders(handle, Connection = "close")
}

# Never outlive the demonstration, even if the process driving it dies.
later::later(function() quit(save = "no", status = 0), delay = as.numeric(config("BULKHEAD_MAX_LIFETIME")))

#* @get /ready
#* @serializer unboxedJSON
function() list(limit = limit)

#* The trivial endpoint: it calls nothing.
#* @get /ping
#* @serializer unboxedJSON
function() list(ok = TRUE)

#* The guarded downstream call; the fallback answers at once.
#* @get /quote
#* @serializer unboxedJSON
function() {
  breaker$execute(
    function() {
      response <- curl::curl_fetch_memory(downstream_url, handle = downstream_handle())
      if (response$status_code != 200) stop("the downstream answered HTTP ", response$status_code)
      list(fallback = FALSE)
    },
    function(condition) {
      reason <- if (inherits(condition, "circuit_breaker_full")) {
        "full"
      } else if (inherits(condition, "circuit_breaker_open")) {
        "open"
      } else {
        "failed"
      }
      list(fallback = TRUE, reason = reason)
    }
  )
}
