# The downstream service of the avalanche demonstration (avalanche_demo() in
# avalanche.R, next to this file): a webfakes app that the demonstration runs
# in a background R process on 127.0.0.1.
#
# GET /data answers according to the current mode:
#   healthy  a small JSON body at once (HTTP 200)
#   hanging  nothing for `hang` seconds (longer than the API's timeout), then
#            a late 200 nobody waits for any more
#   failing  HTTP 503 at once
# GET /mode?set=<mode> switches the mode (the driver calls it at each phase
# boundary, so the schedule does not depend on two processes' timers) and
# GET /stats returns the hits per mode.
#
# A hanging request waits with res$delay(): webfakes parks the connection in
# one of its server threads and calls the handler again later, so the R
# thread keeps serving other requests. With several threads the downstream
# is never the bottleneck, even while abandoned requests are still hanging.
#
# This file is sourced by the demonstration; it defines one function.

avalanche_downstream_app <- function(hang) {
  app <- webfakes::new_app()
  app$locals$hang <- hang
  app$locals$mode <- "healthy"
  app$locals$hits <- c(healthy = 0, hanging = 0, failing = 0)

  data_handler <- function(req, res) {
    locals <- req$app$locals
    if (isTRUE(res$locals$hung)) {
      # Called again after the delay: the caller gave up long ago.
      return(res$send_json(list(status = "late"), auto_unbox = TRUE))
    }
    mode <- locals$mode
    locals$hits[[mode]] <- locals$hits[[mode]] + 1
    if (identical(mode, "hanging")) {
      res$locals$hung <- TRUE
      return(res$delay(locals$hang))
    }
    if (identical(mode, "failing")) {
      return(res$set_status(503L)$send_json(list(status = "unavailable"), auto_unbox = TRUE))
    }
    res$send_json(list(status = "ok", value = 42), auto_unbox = TRUE)
  }
  mode_handler <- function(req, res) {
    locals <- req$app$locals
    mode <- req$query$set
    if (length(mode) != 1L || !mode %in% c("healthy", "hanging", "failing")) {
      return(res$set_status(400L)$send_json(list(error = "unknown mode"), auto_unbox = TRUE))
    }
    locals$mode <- mode
    res$send_json(list(mode = mode), auto_unbox = TRUE)
  }
  stats_handler <- function(req, res) {
    locals <- req$app$locals
    res$send_json(list(mode = locals$mode, hits = as.list(locals$hits)), auto_unbox = TRUE)
  }
  # The handlers run in the subprocess and need base R only.
  environment(data_handler) <- baseenv()
  environment(mode_handler) <- baseenv()
  environment(stats_handler) <- baseenv()
  app$get("/data", data_handler)
  app$get("/mode", mode_handler)
  app$get("/stats", stats_handler)
  app
}
