# The sick downstream service of the host-shared demonstration (run.R, next
# to this file): a webfakes app that run.R starts in a background R process
# on 127.0.0.1. It is the independent witness of the demonstration: it
# counts every request that reaches it, whatever the workers believe they
# sent.
#
# GET /inventory answers according to the current mode:
#   healthy  a small JSON body at once (HTTP 200)
#   failing  HTTP 500 at once (no Retry-After header, so the breakers use
#            their own recovery_timeout)
# Every request is logged with the time it arrived (seconds since the
# epoch, this host's clock, the same clock as run.R's), the mode it met, and
# what the caller says about itself in the query: `worker` (the worker's
# number) and `state` (the state of the worker's breaker when the breaker let
# the call through: CLOSED, or HALF_OPEN for a probe).
# GET /mode?set=<mode> switches the mode and records when (so that the
# outage starts at a time measured here, not guessed by the driver);
# GET /log returns the log and the switch times; GET /reset clears both.
#
# The log is bounded (`max_log` entries); requests beyond it are counted but
# not logged, and /log says so.
#
# This file is sourced by run.R; it defines one function.

host_shared_downstream_app <- function(max_log = 100000L) {
  app <- webfakes::new_app()
  locals <- app$locals
  locals$max_log <- max_log
  locals$mode <- "healthy"
  # The mode switches: when and to what.
  locals$switch_time <- numeric()
  locals$switch_mode <- character()
  locals$n <- 0L
  locals$dropped <- 0L
  locals$time <- numeric(max_log)
  locals$worker <- integer(max_log)
  locals$state <- character(max_log)
  locals$hit_mode <- character(max_log)

  inventory_handler <- function(req, res) {
    locals <- req$app$locals
    now <- as.numeric(Sys.time())
    worker <- suppressWarnings(as.integer(req$query$worker))
    state <- req$query$state
    if (length(worker) != 1L) worker <- NA_integer_
    if (length(state) != 1L) state <- NA_character_
    if (locals$n < locals$max_log) {
      # Preallocated vectors, filled in place: the log costs the same at the
      # thousandth request as at the first.
      i <- locals$n + 1L
      locals$n <- i
      locals$time[i] <- now
      locals$worker[i] <- worker
      locals$state[i] <- state
      locals$hit_mode[i] <- locals$mode
    } else {
      locals$dropped <- locals$dropped + 1L
    }
    if (identical(locals$mode, "failing")) {
      return(res$set_status(500L)$send_json(list(error = "inventory is down"), auto_unbox = TRUE))
    }
    res$send_json(list(status = "ok", items = 42), auto_unbox = TRUE)
  }
  mode_handler <- function(req, res) {
    locals <- req$app$locals
    mode <- req$query$set
    if (length(mode) != 1L || !mode %in% c("healthy", "failing")) {
      return(res$set_status(400L)$send_json(list(error = "unknown mode"), auto_unbox = TRUE))
    }
    now <- as.numeric(Sys.time())
    locals$mode <- mode
    locals$switch_time <- c(locals$switch_time, now)
    locals$switch_mode <- c(locals$switch_mode, mode)
    res$send_json(list(mode = mode, time = now), auto_unbox = TRUE, digits = NA)
  }
  log_handler <- function(req, res) {
    locals <- req$app$locals
    idx <- seq_len(locals$n)
    res$send_json(
      list(
        mode = locals$mode,
        dropped = locals$dropped,
        switches = list(time = locals$switch_time, mode = locals$switch_mode),
        log = list(time = locals$time[idx], worker = locals$worker[idx],
                   state = locals$state[idx], mode = locals$hit_mode[idx])
      ),
      auto_unbox = TRUE, digits = NA, na = "null"
    )
  }
  reset_handler <- function(req, res) {
    locals <- req$app$locals
    locals$mode <- "healthy"
    locals$switch_time <- numeric()
    locals$switch_mode <- character()
    locals$n <- 0L
    locals$dropped <- 0L
    res$send_json(list(mode = "healthy"), auto_unbox = TRUE)
  }
  # The handlers run in the subprocess and need base R only.
  environment(inventory_handler) <- baseenv()
  environment(mode_handler) <- baseenv()
  environment(log_handler) <- baseenv()
  environment(reset_handler) <- baseenv()
  app$get("/inventory", inventory_handler)
  app$get("/mode", mode_handler)
  app$get("/log", log_handler)
  app$get("/reset", reset_handler)
  app
}
