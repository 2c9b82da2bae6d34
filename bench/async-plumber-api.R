# The plumber API of bench/async-plumber.R, run in a background R process on
# 127.0.0.1. One process serves every endpoint, so that the endpoints are
# compared in the same server, in the same run.
#
# Configuration (environment variables set by the benchmark):
#   ASYNC_BENCH_DEAD_URL     a URL that refuses connections (trips the breakers)
#   ASYNC_BENCH_HANG_URL     a URL that accepts connections and never answers
#   ASYNC_BENCH_MAX_LIFETIME seconds after which the process quits anyway
#
# Endpoints measured (the bodies have the same shape, so that they cost the
# same to serialise):
#   /trivial                no downstream call: the physical limit
#   /guarded                `$execute()` with a fallback (synchronous)
#   /guarded-async          breaker_fetch_async(immediate_fallback = TRUE), as
#                           bench/avalanche/api.R: a rejected call's fallback
#                           is a plain value, a call made is a promise
#   /guarded-async-promise  the same without immediate_fallback: a promise of
#                           the fallback
#   /promise                a resolved promise of the trivial body, no
#                           breaker (the minimal reproduction)
# Control:
#   /control/trip           trips the guarded breakers (calls to the dead URL)
#   /control/hang?n=N       starts N calls to the hanging URL through a
#                           breaker of their own (CLOSED), each with a 600 s
#                           timeout: requests in flight for the rest of the
#                           process's life, as in the avalanche's hanging phase
#   /control/state          the breakers' states and the calls in flight
#   /control/profile?action=start&file=F | action=stop   utils::Rprof()

options(keep.source = TRUE)
dead_url <- Sys.getenv("ASYNC_BENCH_DEAD_URL")
hang_url <- Sys.getenv("ASYNC_BENCH_HANG_URL")

new_breaker <- function(name) {
  circuitbreaker::circuit_breaker(failure_threshold = 3, recovery_timeout = 3600, timeout = 1, name = name)
}
breaker <- new_breaker("bench-sync")
breaker_async <- new_breaker("bench-async")
breaker_async_promise <- new_breaker("bench-async-promise")
# The in-flight calls of /control/hang: never tripped (no failure settles
# before the benchmark cancels them).
breaker_hang <- circuitbreaker::circuit_breaker(failure_threshold = 1000, timeout = 600, name = "bench-hang")
hanging <- new.env()
hanging$handles <- list()
hanging$settled <- 0L

later::later(function() quit(save = "no", status = 0),
             delay = as.numeric(Sys.getenv("ASYNC_BENCH_MAX_LIFETIME", "600")))

#* @get /trivial
#* @serializer unboxedJSON
function() {
  list(fallback = FALSE, reason = "none")
}

#* @get /guarded
#* @serializer unboxedJSON
function() {
  called <- FALSE
  response <- breaker$execute(
    function() {
      called <<- TRUE
      curl::curl_fetch_memory(dead_url, handle = curl::new_handle(timeout_ms = 1000))
    },
    function() NULL
  )
  if (is.null(response)) return(list(fallback = TRUE, reason = if (called) "failed" else "open"))
  list(fallback = FALSE, downstream_status = response$status_code)
}

#* @get /guarded-async
#* @serializer unboxedJSON
function() {
  result <- circuitbreaker::breaker_fetch_async(
    dead_url, breaker = breaker_async,
    fallback = function() NULL, immediate_fallback = TRUE
  )
  if (!promises::is.promise(result)) return(list(fallback = TRUE, reason = "open"))
  promises::then(result, function(response) {
    if (is.null(response)) return(list(fallback = TRUE, reason = "failed"))
    list(fallback = FALSE, downstream_status = response$status_code)
  })
}

#* @get /guarded-async-promise
#* @serializer unboxedJSON
function() {
  circuitbreaker::breaker_fetch_async(dead_url, breaker = breaker_async_promise, fallback = function() NULL) |>
    promises::then(function(response) {
      if (is.null(response)) return(list(fallback = TRUE, reason = "open"))
      list(fallback = FALSE, downstream_status = response$status_code)
    })
}

#* @get /promise
#* @serializer unboxedJSON
function() {
  promises::promise_resolve(list(fallback = FALSE, reason = "none"))
}

#* @get /control/trip
#* @serializer unboxedJSON
function() {
  # Three refused calls each: synchronous ones at once, asynchronous ones
  # settle on the event loop (the benchmark waits for OPEN).
  for (i in 1:3) {
    breaker$execute(function() curl::curl_fetch_memory(dead_url), function() NULL)
    circuitbreaker::breaker_fetch_async(dead_url, breaker = breaker_async, fallback = function() NULL)
    circuitbreaker::breaker_fetch_async(dead_url, breaker = breaker_async_promise, fallback = function() NULL)
  }
  list(ok = TRUE)
}

#* @get /control/hang
#* @serializer unboxedJSON
function(n = "0") {
  for (i in seq_len(min(as.integer(n), 100L))) {
    handle <- curl::new_handle(timeout_ms = 600000, connecttimeout_ms = 600000)
    hanging$handles[[length(hanging$handles) + 1L]] <- handle
    circuitbreaker::breaker_fetch_async(hang_url, handle = handle, breaker = breaker_hang,
                                        fallback = function() NULL) |>
      promises::then(function(value) hanging$settled <- hanging$settled + 1L)
  }
  list(in_flight = length(hanging$handles) - hanging$settled)
}

#* @get /control/state
#* @serializer unboxedJSON
function() {
  list(guarded = breaker$state, guarded_async = breaker_async$state,
       guarded_async_promise = breaker_async_promise$state,
       in_flight = length(hanging$handles) - hanging$settled, settled = hanging$settled,
       pid = Sys.getpid(), later = as.character(utils::packageVersion("later")),
       promises = as.character(utils::packageVersion("promises")),
       httpuv = as.character(utils::packageVersion("httpuv")),
       plumber = as.character(utils::packageVersion("plumber")))
}

#* @get /control/profile
#* @serializer unboxedJSON
function(action = "stop", file = "") {
  if (identical(action, "start")) {
    utils::Rprof(file, interval = 0.002, line.profiling = TRUE)
  } else {
    utils::Rprof(NULL)
  }
  list(ok = TRUE)
}
