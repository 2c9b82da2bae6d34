# The downstream of the bulkhead demonstration (run.R, next to this file): a
# webfakes app that run.R starts in a background R process on 127.0.0.1.
#
# GET /quote answers according to the current mode:
#   healthy  a small JSON body at once (HTTP 200)
#   hanging  nothing for `hang` seconds (res$delay(): the app's thread is
#            not blocked, so every caller hangs, not only the first), far
#            longer than the workers' timeout: every call takes its whole
#            timeout, as a dependency that accepts connections and then
#            stops answering does
# Every request is counted by the mode it met (the independent count of the
# calls that reached the downstream). GET /mode?set=<mode> switches the mode
# and answers the time it did (this host's clock, the same clock as
# run.R's); GET /count returns the counts and resets them.
#
# This file is sourced by run.R; it defines one function.

bulkhead_downstream_app <- function(hang = 30) {
  app <- webfakes::new_app()
  app$locals$mode <- "healthy"
  app$locals$hang <- hang
  app$locals$count <- c(healthy = 0, hanging = 0)

  quote_handler <- function(req, res) {
    locals <- req$app$locals
    # webfakes calls a handler that asked for a delay again once the delay
    # is over: the second call answers.
    if (isTRUE(res$locals$delayed)) {
      return(res$send_json(list(status = "late"), auto_unbox = TRUE))
    }
    mode <- locals$mode
    locals$count[[mode]] <- locals$count[[mode]] + 1
    if (identical(mode, "hanging")) {
      res$locals$delayed <- TRUE
      return(res$delay(locals$hang))
    }
    res$send_json(list(status = "ok", price = 42), auto_unbox = TRUE)
  }
  mode_handler <- function(req, res) {
    locals <- req$app$locals
    mode <- req$query$set
    if (length(mode) != 1L || !mode %in% c("healthy", "hanging")) {
      return(res$set_status(400L)$send_json(list(error = "unknown mode"), auto_unbox = TRUE))
    }
    locals$mode <- mode
    res$send_json(list(mode = mode, time = as.numeric(Sys.time())), auto_unbox = TRUE, digits = NA)
  }
  count_handler <- function(req, res) {
    locals <- req$app$locals
    count <- as.list(locals$count)
    locals$count[] <- 0
    res$send_json(count, auto_unbox = TRUE)
  }
  # The handlers run in the subprocess and need base R only.
  environment(quote_handler) <- baseenv()
  environment(mode_handler) <- baseenv()
  environment(count_handler) <- baseenv()
  app$get("/quote", quote_handler)
  app$get("/mode", mode_handler)
  app$get("/count", count_handler)
  app
}
