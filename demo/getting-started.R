# Getting started, live: a circuit breaker spares a hanging service.
#
# The "Getting started" vignette tells this story on a manual clock; here it
# happens for real. A small HTTP service runs on 127.0.0.1 in a background R
# process (webfakes). During an outage it does not fail fast: it hangs for
# `timeout + 0.5` seconds and then answers 503, so each call that reaches it
# blocks this R process until the client gives up after `timeout` seconds.
# That is how a slow dependency brings down a single-threaded R process (a
# plumber API, a Shiny app): every request waits on it in turn.
#
# The same traffic is sent twice: once with plain curl calls, once through
# circuit_breaker(failure_threshold = 3, recovery_timeout = 1). The breaker
# stops calling after three failures, answers with a fallback at once, and
# probes once a second until the service answers again. The outage covers the
# requests planned in the first `failing_for` seconds of the traffic schedule
# (request i is planned at (i - 1) * interval s and tells the service so), so
# both runs face the same failing requests. About 40 seconds.
#
# Needs the suggested packages webfakes, curl, callr and jsonlite. Settings:
# a list in options(circuitbreaker.demo = list(failing_for = 3, requests = 60,
# interval = 0.1, timeout = 1)); for a quick run, say
#   options(circuitbreaker.demo = list(failing_for = 0.5, requests = 30,
#                                      interval = 0.05, timeout = 0.3))
# The result is left in `demo_result`: `calls` (one row per request),
# `transitions` (the breaker's, in the second run), `summary` (one row per
# run) and `breaker_metrics`.

library(circuitbreaker)

for (pkg in c("webfakes", "curl", "callr", "jsonlite")) {
  if (!requireNamespace(pkg, quietly = TRUE)) {
    stop("This demo needs the ", pkg, " package: install.packages(\"", pkg, "\")", call. = FALSE)
  }
}

demo_settings <- utils::modifyList(
  list(failing_for = 3, requests = 60, interval = 0.1, timeout = 1),
  getOption("circuitbreaker.demo", list())
)
stopifnot(
  is.numeric(demo_settings$failing_for), demo_settings$failing_for > 0,
  is.numeric(demo_settings$requests), demo_settings$requests >= 1, demo_settings$requests <= 10000,
  is.numeric(demo_settings$interval), demo_settings$interval > 0,
  is.numeric(demo_settings$timeout), demo_settings$timeout > 0
)

# The service: GET /data?at=<planned time> hangs, then answers 503, for the
# requests planned before `down_for`; the others get 200 and a small JSON
# body at once. GET /schedule?down_for= resets it, GET /stats counts the hits.
# The handlers run in the service's process and need base R only.
demo_service <- function(hang) {
  app <- webfakes::new_app()
  app$locals$hang <- hang
  app$locals$down_for <- 0
  app$locals$hits <- 0
  data_handler <- function(req, res) {
    locals <- req$app$locals
    if (isTRUE(res$locals$hanging)) {
      # Called again once the delay has passed.
      return(res$set_status(503L)$send_json(list(status = "unavailable"), auto_unbox = TRUE))
    }
    locals$hits <- locals$hits + 1
    at <- as.numeric(req$query$at)
    if (length(at) == 1L && !is.na(at) && at < locals$down_for - 1e-9) {
      res$locals$hanging <- TRUE
      return(res$delay(locals$hang))
    }
    res$send_json(list(status = "ok", value = 42), auto_unbox = TRUE)
  }
  schedule_handler <- function(req, res) {
    req$app$locals$down_for <- as.numeric(req$query$down_for)
    req$app$locals$hits <- 0
    res$send_json(list(down_for = req$app$locals$down_for), auto_unbox = TRUE)
  }
  stats_handler <- function(req, res) {
    res$send_json(list(hits = req$app$locals$hits), auto_unbox = TRUE)
  }
  environment(data_handler) <- environment(schedule_handler) <- environment(stats_handler) <- baseenv()
  app$get("/data", data_handler)
  app$get("/schedule", schedule_handler)
  app$get("/stats", stats_handler)
  # Several threads (requests the client gave up on still hang in the
  # service), only on 127.0.0.1, no keep-alive, no logs.
  opts <- webfakes::server_opts(
    num_threads = 8, interfaces = "127.0.0.1", enable_keep_alive = FALSE,
    access_log_file = FALSE, error_log_file = FALSE
  )
  webfakes::new_app_process(app, opts = opts, start = FALSE, auto_start = FALSE,
                            callr_opts = list(supervise = TRUE))
}

# One GET on a fresh connection (`Connection: close`: reused keep-alive
# connections can add ~40 ms delayed-ACK stalls on loopback). curl turns an
# interrupt (Ctrl+C) during a transfer into an error; it is turned back into
# an interrupt, which ends the demo (and stops the service) instead of
# counting as a failed call.
demo_get <- function(url, timeout) {
  handle <- curl::new_handle(timeout_ms = max(1, round(1000 * timeout)), forbid_reuse = TRUE)
  curl::handle_setheaders(handle, Connection = "close")
  withCallingHandlers(
    curl::curl_fetch_memory(url, handle = handle),
    error = function(e) {
      if (grepl("aborted by an application callback", conditionMessage(e), fixed = TRUE)) {
        rlang::interrupt()
      }
    }
  )
}

# Sends the traffic: `requests` calls, each started `interval` seconds after
# the previous one started (or at once when that one took longer), through
# `breaker` if there is one. Stops after 120 s whatever is left, and cuts each
# call's timeout to the time left.
demo_run <- function(scenario, service, s, breaker = NULL) {
  demo_get(service$url(paste0("/schedule?down_for=", s$failing_for)), 5)
  n <- as.integer(s$requests)
  started <- elapsed <- rep(NA_real_, n)
  outcome <- rep(NA_character_, n)
  transitions <- list()
  t0 <- as.numeric(Sys.time())
  if (!is.null(breaker)) {
    breaker$on("state_change", function(from, to) {
      transitions[[length(transitions) + 1L]] <<-
        data.frame(time = as.numeric(Sys.time()) - t0, from = from, to = to)
    })
  }
  last_start <- -Inf
  for (i in seq_len(n)) {
    wait <- min(last_start + s$interval, t0 + 120) - as.numeric(Sys.time())
    if (wait > 0) Sys.sleep(wait)
    start <- last_start <- as.numeric(Sys.time())
    left <- t0 + 120 - start
    if (left <= 0) break
    url <- service$url(paste0("/data?at=", round((i - 1) * s$interval, 6)))
    if (is.null(breaker)) {
      response <- tryCatch(demo_get(url, min(s$timeout, left)), error = function(e) NULL)
      outcome[[i]] <- if (!is.null(response) && response$status_code < 300) "ok" else "failed"
    } else {
      called <- FALSE
      response <- breaker$execute(
        function() {
          called <<- TRUE
          demo_get(url, min(s$timeout, left))
        },
        function() NULL  # the fallback: a timeout, a 5xx answer, or not called
      )
      outcome[[i]] <- if (!called) "short-circuited" else if (is.null(response)) "failed" else "ok"
    }
    started[[i]] <- start - t0
    elapsed[[i]] <- as.numeric(Sys.time()) - start
  }
  made <- !is.na(outcome)
  hits <- jsonlite::fromJSON(rawToChar(demo_get(service$url("/stats"), 5)$content))$hits
  list(
    calls = data.frame(scenario = scenario, i = seq_len(n)[made], started = started[made],
                       elapsed = elapsed[made], outcome = outcome[made]),
    transitions = if (length(transitions)) do.call(rbind, transitions)
                  else data.frame(time = numeric(), from = character(), to = character()),
    wall_time = as.numeric(Sys.time()) - t0,
    server_hits = hits,
    capped = !all(made)
  )
}

demo_summary <- function(run, s) {
  calls <- run$calls
  short <- calls$outcome == "short-circuited"
  after_outage <- round((calls$i - 1) * s$interval, 6) >= s$failing_for - 1e-9
  data.frame(
    scenario = calls$scenario[[1]], requests = nrow(calls), wall_time = run$wall_time,
    server_calls = sum(!short), server_hits = run$server_hits, short_circuited = sum(short),
    failures = sum(calls$outcome == "failed"), successes = sum(calls$outcome == "ok"),
    blocked = sum(calls$elapsed), median_latency = stats::median(calls$elapsed),
    max_latency = max(calls$elapsed), fallback_while_up = sum(short & after_outage),
    capped = run$capped
  )
}

demo_story <- function(s) {
  service <- demo_service(hang = s$timeout + 0.5)
  on.exit(service$stop(), add = TRUE)  # also on an error or an interrupt
  service$start()
  cat("Service ", service$url("/data"), " (a background R process); requests planned in\n",
      "the first ", s$failing_for, " s hang ", s$timeout + 0.5, " s, then get 503. ",
      s$requests, " requests, one every ", s$interval, " s, timeout ", s$timeout, " s.\n", sep = "")

  cat("[1/2] Without a breaker ... ")
  plain <- demo_run("no_breaker", service, s)
  cat(sprintf("done in %.1f s\n", plain$wall_time))

  cb <- circuit_breaker(failure_threshold = 3, recovery_timeout = 1)
  cat("[2/2] With circuit_breaker(failure_threshold = 3, recovery_timeout = 1) ... ")
  guarded <- demo_run("breaker", service, s, breaker = cb)
  cat(sprintf("done in %.1f s\n\n", guarded$wall_time))

  list(
    calls = rbind(plain$calls, guarded$calls),
    transitions = guarded$transitions,
    summary = rbind(demo_summary(plain, s), demo_summary(guarded, s)),
    breaker_metrics = cb$metrics()
  )
}

demo_result <- demo_story(demo_settings)

# The breaker's state changes in the second run (seconds from its start).
demo_result$transitions

# Side by side: calls that reached the service, failures, and the seconds this
# R process spent blocked in calls.
print(demo_result$summary[, c("scenario", "server_calls", "short_circuited", "failures",
                              "successes", "blocked", "median_latency", "fallback_while_up")],
      digits = 3, row.names = FALSE)

with(demo_result$summary, cat(sprintf(
  "The breaker kept %d requests away from the hanging service and cut the time blocked in calls from %.1f s to %.1f s.\n",
  failures[[1]] - failures[[2]], blocked[[1]], blocked[[2]]
)))
