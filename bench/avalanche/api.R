# The plumber API of the avalanche demonstration (avalanche_demo() in
# avalanche.R, next to this file). The demonstration runs four identical
# copies, each in its own background R process on 127.0.0.1, and sends each
# copy the traffic of one endpoint. It uses circuitbreaker's exported API only.
#
# Configuration (environment variables set by the demonstration):
#   AVALANCHE_DOWNSTREAM_URL      the downstream's /data URL
#   AVALANCHE_DOWNSTREAM_TIMEOUT  seconds before a downstream call gives up
#   AVALANCHE_FAILURE_THRESHOLD   the breakers' failure_threshold
#   AVALANCHE_RECOVERY_TIMEOUT    the breakers' recovery_timeout
#   AVALANCHE_MAX_LIFETIME        seconds after which the process quits anyway
#
# Endpoints:
#   /trivial        no downstream call: the physical limit of the API process
#   /guarded        the downstream call through a circuit breaker
#                   (`$execute()`, synchronous) with a fallback
#   /guarded-async  the same call through a breaker of its own, asynchronously
#                   (`breaker_fetch_async()`): the endpoint returns a promise,
#                   so the process serves other requests while the call (a
#                   half-open probe, say) is in flight
#   /unguarded      the same call without a breaker; an error JSON on failure
#   /breaker        a breaker's transitions (with wall-clock times) and
#                   metrics: ?endpoint=guarded (the default) or guarded-async

config_number <- function(name) {
  value <- suppressWarnings(as.numeric(Sys.getenv(name)))
  if (length(value) != 1L || is.na(value)) stop("environment variable ", name, " is not set")
  value
}
downstream_url <- Sys.getenv("AVALANCHE_DOWNSTREAM_URL")
downstream_timeout <- config_number("AVALANCHE_DOWNSTREAM_TIMEOUT")

# One breaker per guarded endpoint, with the same settings. (Each process
# serves the traffic of one endpoint, so only one of them sees calls.)
new_breaker <- function(name) {
  circuitbreaker::circuit_breaker(
    failure_threshold = config_number("AVALANCHE_FAILURE_THRESHOLD"),
    recovery_timeout = config_number("AVALANCHE_RECOVERY_TIMEOUT"),
    timeout = downstream_timeout,  # for the handles breaker_fetch_async() makes
    name = name
  )
}

# Every state change with its wall-clock time, so that the driver can place
# it on its own time line (`$transitions()` keeps only the last 32).
log_transitions <- function(breaker) {
  log <- new.env()
  log$time <- numeric()
  log$from <- character()
  log$to <- character()
  breaker$on("state_change", function(from, to) {
    log$time <- c(log$time, as.numeric(Sys.time()))
    log$from <- c(log$from, from)
    log$to <- c(log$to, to)
  })
  log
}

breakers <- list(
  guarded = new_breaker("avalanche-downstream"),
  "guarded-async" = new_breaker("avalanche-downstream-async")
)
transition_logs <- lapply(breakers, log_transitions)
breaker <- breakers[["guarded"]]
breaker_async <- breakers[["guarded-async"]]

# A fresh handle per call: no connection reuse (the downstream closes each
# connection anyway) and the timeout of the demonstration.
downstream_handle <- function() {
  handle <- curl::new_handle(
    timeout_ms = max(1, round(downstream_timeout * 1000)),
    connecttimeout_ms = max(1, round(downstream_timeout * 1000)),
    forbid_reuse = TRUE
  )
  curl::handle_setheaders(handle, Connection = "close")
}

# Never outlive the demonstration, even if the process driving it dies
# without stopping this one.
later::later(function() quit(save = "no", status = 0),
             delay = config_number("AVALANCHE_MAX_LIFETIME"))

#* No downstream call: what the process can serve at most. The body has the
#* shape of the fallback's, so that the two cost the same to serialise.
#* @get /trivial
#* @serializer unboxedJSON
function() {
  list(fallback = FALSE, reason = "none")
}

#* The downstream call through the breaker; the fallback answers at once.
#* @get /guarded
#* @serializer unboxedJSON
function() {
  # The handle is made only when the call is made: a rejected call costs the
  # breaker's check and the fallback, nothing else.
  called <- FALSE
  response <- breaker$execute(
    function() {
      called <<- TRUE
      curl::curl_fetch_memory(downstream_url, handle = downstream_handle())
    },
    function() NULL
  )
  if (is.null(response)) {
    # The fallback: the breaker was open (the call was not made), or the call
    # failed (a timeout, a refused connection, or a 5xx answer).
    return(list(fallback = TRUE, reason = if (called) "failed" else "open"))
  }
  list(fallback = FALSE, downstream_status = response$status_code)
}

#* The same call through a breaker of its own, asynchronously: a call that is
#* made returns a promise, and the process serves other requests until it
#* settles. While a probe is in flight (HALF_OPEN, half_open_max_calls = 1),
#* other calls get the fallback at once instead of waiting behind it. With
#* immediate_fallback = TRUE a rejected call's fallback comes back as a plain
#* value, which plumber serves as cheaply as a synchronous answer (a promise
#* costs the process several times more).
#* @get /guarded-async
#* @serializer unboxedJSON
function() {
  # No handle is made here: breaker_fetch_async() makes one, with the
  # breaker's timeout, only when the call is made. A rejected call comes back
  # as the fallback's value itself (NULL), not as a promise.
  result <- circuitbreaker::breaker_fetch_async(
    downstream_url, breaker = breaker_async,
    fallback = function() NULL, immediate_fallback = TRUE
  )
  if (!promises::is.promise(result)) return(list(fallback = TRUE, reason = "open"))
  promises::then(result, function(response) {
    # NULL: the call was made and failed (a timeout, a refused connection, or
    # a 5xx answer), and the fallback answered.
    if (is.null(response)) return(list(fallback = TRUE, reason = "failed"))
    list(fallback = FALSE, downstream_status = response$status_code)
  })
}

#* The same call without a breaker.
#* @get /unguarded
#* @serializer unboxedJSON
function(res) {
  response <- tryCatch(
    curl::curl_fetch_memory(downstream_url, handle = downstream_handle()),
    error = function(e) e
  )
  if (inherits(response, "error")) {
    res$status <- 504L
    return(list(fallback = FALSE, error = conditionMessage(response)))
  }
  if (response$status_code >= 500) {
    res$status <- 502L
    return(list(fallback = FALSE, error = paste("the downstream answered HTTP", response$status_code)))
  }
  list(fallback = FALSE, downstream_status = response$status_code)
}

#* A breaker's state changes and metrics: the one of /guarded or, with
#* ?endpoint=guarded-async, the one of /guarded-async.
#* @get /breaker
#* @serializer unboxedJSON list(digits = NA, na = "null")
function(res, endpoint = "guarded") {
  if (length(endpoint) != 1L || !endpoint %in% names(breakers)) {
    res$status <- 404L
    return(list(error = "no such breaker"))
  }
  breaker <- breakers[[endpoint]]
  log <- transition_logs[[endpoint]]
  metrics <- breaker$metrics()
  metrics <- lapply(metrics, function(x) if (is.numeric(x) && any(!is.finite(x))) NULL else x)
  list(
    endpoint = endpoint,
    now = as.numeric(Sys.time()),
    state = breaker$state,
    log = list(time = log$time, from = log$from, to = log$to),
    transitions = as.list(breaker$transitions()),
    metrics = metrics
  )
}
