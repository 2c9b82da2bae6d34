# The plumber API of breaker_avalanche_demo(). The demonstration runs three
# identical copies, each in its own background R process on 127.0.0.1, and
# sends each copy the traffic of one endpoint.
#
# Configuration (environment variables set by the demonstration):
#   AVALANCHE_DOWNSTREAM_URL      the downstream's /data URL
#   AVALANCHE_DOWNSTREAM_TIMEOUT  seconds before a downstream call gives up
#   AVALANCHE_FAILURE_THRESHOLD   the breaker's failure_threshold
#   AVALANCHE_RECOVERY_TIMEOUT    the breaker's recovery_timeout
#   AVALANCHE_MAX_LIFETIME        seconds after which the process quits anyway
#
# Endpoints:
#   /trivial    no downstream call: the physical limit of the API process
#   /guarded    the downstream call through a circuit breaker (`$execute()`)
#               with a fallback
#   /unguarded  the same call without a breaker; an error JSON on failure
#   /breaker    the breaker's transitions (with wall-clock times) and metrics

config_number <- function(name) {
  value <- suppressWarnings(as.numeric(Sys.getenv(name)))
  if (length(value) != 1L || is.na(value)) stop("environment variable ", name, " is not set")
  value
}
downstream_url <- Sys.getenv("AVALANCHE_DOWNSTREAM_URL")
downstream_timeout <- config_number("AVALANCHE_DOWNSTREAM_TIMEOUT")

breaker <- circuitbreaker::circuit_breaker(
  failure_threshold = config_number("AVALANCHE_FAILURE_THRESHOLD"),
  recovery_timeout = config_number("AVALANCHE_RECOVERY_TIMEOUT"),
  name = "avalanche-downstream"
)

# Every state change with its wall-clock time, so that the driver can place
# it on its own time line (`$transitions()` keeps only the last 32).
transition_log <- new.env()
transition_log$time <- numeric()
transition_log$from <- character()
transition_log$to <- character()
breaker$on("state_change", function(from, to) {
  transition_log$time <- c(transition_log$time, as.numeric(Sys.time()))
  transition_log$from <- c(transition_log$from, from)
  transition_log$to <- c(transition_log$to, to)
})

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

#* The breaker's state changes and metrics.
#* @get /breaker
#* @serializer unboxedJSON list(digits = NA, na = "null")
function() {
  metrics <- breaker$metrics()
  metrics <- lapply(metrics, function(x) if (is.numeric(x) && any(!is.finite(x))) NULL else x)
  list(
    now = as.numeric(Sys.time()),
    state = breaker$state,
    log = list(time = transition_log$time, from = transition_log$from, to = transition_log$to),
    transitions = as.list(breaker$transitions()),
    metrics = metrics
  )
}
