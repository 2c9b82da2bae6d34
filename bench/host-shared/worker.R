# One plumber worker of the host-shared demonstration (run.R, next to this
# file). run.R starts N identical copies, each in its own background R
# process on its own port of 127.0.0.1, the way a host runs N plumber
# processes behind a load balancer; all of them guard the same downstream
# with a breaker of the same name and settings. It uses circuitbreaker's
# exported API only.
#
# Configuration (environment variables set by run.R):
#   HOST_SHARED_WORKER             this worker's number (1 to N)
#   HOST_SHARED_DOWNSTREAM_URL     the downstream's /inventory URL
#   HOST_SHARED_BREAKER            "per-process": a breaker of this process's
#                                  own (store = NULL, the default);
#                                  "shared": breaker_store_host(dir), one
#                                  breaker state for every process of the host
#   HOST_SHARED_STORE_DIR          the store's directory (shared only)
#   HOST_SHARED_FAILURE_THRESHOLD  the breaker's failure_threshold
#   HOST_SHARED_RECOVERY_TIMEOUT   the breaker's recovery_timeout
#   HOST_SHARED_DOWNSTREAM_TIMEOUT seconds before a downstream call gives up
#   HOST_SHARED_MAX_LIFETIME       seconds after which the process quits anyway
#
# Endpoints:
#   /ready      no downstream call: run.R polls it until the worker is up
#   /inventory  the downstream call through the breaker (`$execute()`) with a
#               fallback; the answer says whether it is the fallback, and why
#   /breaker    the breaker's metrics and transitions, and the downstream
#               calls this process made (with their times)

config_number <- function(name) {
  value <- suppressWarnings(as.numeric(Sys.getenv(name)))
  if (length(value) != 1L || is.na(value)) stop("environment variable ", name, " is not set")
  value
}
worker <- as.integer(config_number("HOST_SHARED_WORKER"))
downstream_url <- Sys.getenv("HOST_SHARED_DOWNSTREAM_URL")
downstream_timeout <- config_number("HOST_SHARED_DOWNSTREAM_TIMEOUT")
breaker_kind <- Sys.getenv("HOST_SHARED_BREAKER")
if (!breaker_kind %in% c("per-process", "shared")) {
  stop("HOST_SHARED_BREAKER must be \"per-process\" or \"shared\", not \"", breaker_kind, "\"")
}

# The same name and the same settings in every worker: with a host store,
# that is what makes them one breaker. Without one (store = NULL, the
# default, left out here), each process has a breaker of its own.
breaker_args <- list(
  name = "inventory",
  failure_threshold = config_number("HOST_SHARED_FAILURE_THRESHOLD"),
  recovery_timeout = config_number("HOST_SHARED_RECOVERY_TIMEOUT")
)
if (identical(breaker_kind, "shared")) {
  breaker_args$store <- circuitbreaker::breaker_store_host(Sys.getenv("HOST_SHARED_STORE_DIR"))
}
breaker <- do.call(circuitbreaker::circuit_breaker, breaker_args)

# Every downstream call this process made: when the breaker let it through
# (`admitted`), when curl returned (`ended`, before the breaker records the
# outcome), the state it was admitted in and the HTTP status (0: no answer).
# run.R compares these with the breaker's transitions: a shared breaker
# cannot take back a call it admitted CLOSED just before another process's
# failure opened it, and these times show which calls those were. Bounded:
# calls beyond `max_calls` are counted, not logged.
max_calls <- 10000L
call_log <- new.env()
call_log$n <- 0L
call_log$dropped <- 0L
call_log$admitted <- numeric(max_calls)
call_log$ended <- numeric(max_calls)
call_log$state <- character(max_calls)
call_log$status <- integer(max_calls)
log_call <- function(admitted, state, status) {
  if (call_log$n >= max_calls) {
    call_log$dropped <- call_log$dropped + 1L
    return(invisible(NULL))
  }
  i <- call_log$n + 1L
  call_log$n <- i
  call_log$admitted[i] <- admitted
  call_log$ended[i] <- as.numeric(Sys.time())
  call_log$state[i] <- state
  call_log$status[i] <- status
  invisible(NULL)
}

# A fresh connection per call, with the demonstration's timeout: no call
# waits for, or is counted with, another one on a kept-alive connection.
downstream_handle <- function() {
  timeout_ms <- max(1, round(downstream_timeout * 1000))
  handle <- curl::new_handle(timeout_ms = timeout_ms, connecttimeout_ms = timeout_ms, forbid_reuse = TRUE)
  curl::handle_setheaders(handle, Connection = "close")
}

# Never outlive the demonstration, even if the process driving it dies
# without stopping this one.
later::later(function() quit(save = "no", status = 0),
             delay = config_number("HOST_SHARED_MAX_LIFETIME"))

#* No downstream call: the worker is up.
#* @get /ready
#* @serializer unboxedJSON
function() {
  list(worker = worker, breaker = breaker_kind)
}

#* The downstream call through the breaker; the fallback answers at once.
#* @get /inventory
#* @serializer unboxedJSON
function() {
  called <- FALSE
  response <- breaker$execute(
    function() {
      called <<- TRUE
      admitted <- as.numeric(Sys.time())
      # The breaker let this call through: CLOSED, or HALF_OPEN for a probe.
      # Read here, the state is the one the call was admitted in (a probe
      # holds the only half-open slot until it ends), or, for a shared
      # breaker, OPEN when another worker's failure opened it a moment after
      # it admitted this call. The downstream logs it with the request.
      state <- breaker$state
      url <- paste0(downstream_url, "?worker=", worker, "&state=", state)
      response <- tryCatch(curl::curl_fetch_memory(url, handle = downstream_handle()), error = function(e) e)
      log_call(admitted, state, if (inherits(response, "error")) 0L else as.integer(response$status_code))
      # The same condition again, so that the breaker classifies it as
      # curl's own error (a transport failure).
      if (inherits(response, "error")) stop(response)
      response
    },
    function() NULL
  )
  if (is.null(response)) {
    # The fallback: the breaker was open (no call was made), or the call
    # failed (HTTP 500, a refused connection or a timeout).
    return(list(worker = worker, fallback = TRUE, reason = if (called) "failed" else "open"))
  }
  list(worker = worker, fallback = FALSE, downstream_status = response$status_code)
}

#* The breaker's metrics and transitions (the shared ones, for a shared
#* breaker: every process reads the same log), and this process's calls.
#* @get /breaker
#* @serializer unboxedJSON list(digits = NA, na = "null")
function() {
  metrics <- breaker$metrics()
  metrics <- lapply(metrics, function(x) if (is.numeric(x) && any(!is.finite(x))) NULL else x)
  # $transitions() gives each transition's age; with `now` (this host's
  # wall clock, read right after) run.R places them on its own time line.
  transitions <- breaker$transitions()
  idx <- seq_len(call_log$n)
  list(
    worker = worker,
    breaker = breaker_kind,
    now = as.numeric(Sys.time()),
    state = breaker$state,
    transitions = list(seq = transitions$seq, seconds_ago = transitions$seconds_ago,
                       from = transitions$from, to = transitions$to),
    calls = list(admitted = call_log$admitted[idx], ended = call_log$ended[idx],
                 state = call_log$state[idx], status = call_log$status[idx]),
    calls_dropped = call_log$dropped,
    metrics = metrics
  )
}
