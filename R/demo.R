#' Watch a circuit breaker spare a hanging dependency
#'
#' @description
#' Starts a small HTTP service on `127.0.0.1` in a background R process and
#' sends it the same traffic twice while it has an outage: once with plain
#' `httr::GET()` calls, once through
#' `circuit_breaker(failure_threshold = 3, recovery_timeout = 1)`. During the
#' outage the service does not fail fast: it hangs for `timeout + 0.5` seconds
#' and then answers 503, so each call that reaches it blocks the R process
#' until the client gives up after `timeout` seconds. That is how a slow
#' dependency brings down a single-threaded R process (a plumber API, a Shiny
#' app): every request waits on it in turn. The breaker stops calling after
#' three failures, answers with a fallback at once, and probes once a second
#' until the service answers again.
#'
#' A report (state transitions, and per run: wall time, calls that reached
#' the service, short-circuited calls, failures, latencies, time blocked in
#' calls) is printed unless `quiet = TRUE`.
#'
#' @details
#' **The outage** covers the first `failing_for` seconds of the *traffic
#' schedule*: request `i` is planned at `(i - 1) * interval` seconds and
#' carries that time to the service (`/data?at=`); the service hangs the
#' requests planned before `failing_for` and answers the others with 200 and
#' a small JSON body at once. Tying the outage to the schedule rather than to
#' the wall clock keeps the two runs comparable and deterministic: both face
#' the same failing requests, however long the client itself was blocked
#' (with a wall-clock outage, a client that blocks `timeout` seconds per call
#' would get through only a handful of requests before the outage is over,
#' and the comparison would say little). Before each run the demo resets the
#' service through `/schedule?down_for=`.
#'
#' **The traffic**: `requests` calls, each started `interval` seconds after
#' the previous one started (or at once when that call took longer). Each run
#' stops after 120 seconds whatever is left, and each call's timeout is cut
#' to the time left, so the demo never runs much longer than that.
#'
#' **Connections**: requests carry `Connection: close` and the service does
#' not keep connections alive, so every call opens a fresh loopback
#' connection: reused keep-alive connections can add ~40 ms delayed-ACK
#' stalls on loopback, which would blur the latencies being compared.
#'
#' The service is stopped when the demo ends, also on an error or an
#' interrupt. The demo needs the suggested packages webfakes, httr and callr.
#'
#' @param failing_for Seconds of the traffic schedule during which the
#'   service hangs (a single positive number).
#' @param requests Number of requests in each run: a whole number from 1 to
#'   10000.
#' @param interval Seconds between the starts of two requests (a single
#'   positive number).
#' @param timeout Client timeout of each request in seconds (a single
#'   positive number). A hanging request costs this much.
#' @param quiet `TRUE` to print nothing, `FALSE` to print the report.
#' @return Invisibly, a list:
#'   * `calls`: a data frame with one row per request: `scenario`
#'     (`"no_breaker"` or `"breaker"`), `i` (request number), `started`
#'     (seconds from the start of the run), `elapsed` (seconds the call took,
#'     as the caller saw it) and `outcome` (`"ok"`, `"failed"` or
#'     `"short-circuited"`: the breaker answered with the fallback without
#'     calling the service).
#'   * `transitions`: a data frame of the breaker's state changes in the
#'     second run: `time` (seconds from the start of the run), `from`, `to`.
#'   * `summary`: a data frame with one row per scenario: `scenario`, `requests`,
#'     `wall_time`, `server_calls` (calls that reached the service, counted
#'     by the client), `server_hits` (the same, counted by the service),
#'     `short_circuited`, `failures`, `successes`, `blocked` (seconds spent
#'     in calls), `median_latency`, `max_latency`, `fallback_while_up`
#'     (short-circuited requests planned after the outage) and `capped`
#'     (whether the 120 s cap stopped the run).
#'   * `breaker_metrics`: the breaker's `$metrics()` at the end.
#'
#' @examples
#' \dontrun{
#' res <- breaker_demo()
#' res$summary
#' res$transitions
#'
#' # A quicker run, without the report.
#' res <- breaker_demo(failing_for = 0.5, requests = 30, interval = 0.05,
#'                     timeout = 0.3, quiet = TRUE)
#' table(res$calls$scenario, res$calls$outcome)
#' }
#' @export
breaker_demo <- function(failing_for = 3, requests = 60, interval = 0.1,
                         timeout = 1, quiet = FALSE) {
  check_demo_seconds(failing_for, "failing_for")
  check_demo_requests(requests)
  check_demo_seconds(interval, "interval")
  check_demo_seconds(timeout, "timeout")
  if (!is.logical(quiet) || length(quiet) != 1L || is.na(quiet)) {
    abort_bad_argument("quiet", "`TRUE` or `FALSE`", quiet, call = rlang::current_env())
  }
  check_demo_packages()
  requests <- as.integer(requests)
  say <- if (quiet) function(...) invisible(NULL) else function(...) cat(..., sep = "")

  server <- demo_server(hang = timeout + 0.5)
  on.exit(server$stop(), add = TRUE)
  server$start()

  n_down <- sum(demo_is_down(demo_planned(seq_len(requests), interval), failing_for))
  say(
    "Circuit breaker demo\n",
    "  Service: ", server$url("/data"), " (webfakes, background R process)\n",
    "  Outage:  the requests planned in the first ", demo_num(failing_for),
    " s of the traffic (", n_down, " of ", requests, ")\n",
    "           hang ", demo_num(timeout + 0.5), " s, then get 503; the others get",
    " 200 and a small JSON body.\n",
    "  Traffic: ", demo_count(requests, "request"), ", one every ", demo_num(interval),
    " s: httr::GET() with a ", demo_num(timeout), " s timeout and\n",
    "           header `Connection: close` (a fresh loopback connection each time,\n",
    "           so keep-alive delayed-ACK stalls do not blur the latencies).\n\n"
  )

  say("[1/2] Without a breaker ... ")
  plain <- demo_run("no_breaker", server, failing_for, requests, interval, timeout)
  say("done in ", demo_num(plain$wall_time), " s\n")

  cb <- circuit_breaker(failure_threshold = 3, recovery_timeout = 1, name = "demo")
  say("[2/2] With a breaker (failure_threshold = 3, recovery_timeout = 1) ... ")
  guarded <- demo_run("breaker", server, failing_for, requests, interval, timeout, breaker = cb)
  say("done in ", demo_num(guarded$wall_time), " s\n\n")

  calls <- rbind(plain$calls, guarded$calls)
  rownames(calls) <- NULL
  summary <- rbind(
    demo_summarise(plain, failing_for, interval),
    demo_summarise(guarded, failing_for, interval)
  )
  rownames(summary) <- NULL
  result <- list(
    calls = calls,
    transitions = guarded$transitions,
    summary = summary,
    breaker_metrics = cb$metrics()
  )
  if (!quiet) demo_report(result, cb$state)
  invisible(result)
}

# Longest a run may take, in seconds.
demo_max_seconds <- 120

check_demo_seconds <- function(x, arg, call = rlang::caller_env()) {
  if (!is.numeric(x) || is.object(x) || length(x) != 1L || is.na(x) || !is.finite(x) || x <= 0) {
    abort_bad_argument(arg, "a single positive number", x, call = call)
  }
}

check_demo_requests <- function(x, call = rlang::caller_env()) {
  if (!is.numeric(x) || is.object(x) || length(x) != 1L || is.na(x) || !is.finite(x) ||
      x != round(x) || x < 1 || x > 10000) {
    abort_bad_argument("requests", "a whole number from 1 to 10000", x, call = call)
  }
}

check_demo_packages <- function(call = rlang::caller_env()) {
  needed <- c("webfakes", "httr", "callr")
  missing <- needed[!vapply(needed, requireNamespace, logical(1), quietly = TRUE)]
  if (length(missing)) {
    install <- paste0("install.packages(", paste(deparse(missing), collapse = ""), ")")
    cli::cli_abort(
      c("{.fn breaker_demo} needs the {.pkg {missing}} package{?s}, which {?is/are} not installed.",
        i = "Install {cli::qty(length(missing))}{?it/them} with {.code {install}}."),
      class = c("circuit_breaker_missing_package", "circuit_breaker_error"),
      call = call
    )
  }
}

now_seconds <- function() as.numeric(Sys.time())

# Planned time of request i on the traffic schedule, and whether the outage
# covers it. The service applies the same rule to the `at` it receives,
# rounded the same way.
demo_planned <- function(i, interval) round((i - 1) * interval, 6)
demo_is_down <- function(at, down_for) at < down_for - 1e-9

# The fake service, in a background R process (webfakes runs the app in a
# callr subprocess, listening on 127.0.0.1 only).
demo_server <- function(hang) {
  app <- webfakes::new_app()
  app$locals$hang <- hang
  app$locals$down_for <- 0
  app$locals$hits <- 0
  app$locals$hung <- 0

  # The handlers run in the subprocess; base R is all they need, so their
  # environment is the base environment (nothing from this package has to
  # be loaded there). A handler that calls res$delay() is called again once
  # the delay has passed; res$locals tells the two calls apart.
  data_handler <- function(req, res) {
    locals <- req$app$locals
    if (is.null(res$locals$hanging)) {
      locals$hits <- locals$hits + 1
      at <- as.numeric(req$query$at)
      if (length(at) == 1L && !is.na(at) && at < locals$down_for - 1e-9) {
        locals$hung <- locals$hung + 1
        res$locals$hanging <- TRUE
        return(res$delay(locals$hang))
      }
      return(res$send_json(list(status = "ok", value = 42, at = at), auto_unbox = TRUE))
    }
    res$set_status(503L)$send_json(list(status = "unavailable"), auto_unbox = TRUE)
  }
  schedule_handler <- function(req, res) {
    locals <- req$app$locals
    locals$down_for <- as.numeric(req$query$down_for)
    locals$hits <- 0
    locals$hung <- 0
    res$send_json(list(down_for = locals$down_for), auto_unbox = TRUE)
  }
  stats_handler <- function(req, res) {
    locals <- req$app$locals
    res$send_json(list(hits = locals$hits, hung = locals$hung), auto_unbox = TRUE)
  }
  environment(data_handler) <- baseenv()
  environment(schedule_handler) <- baseenv()
  environment(stats_handler) <- baseenv()
  app$get("/data", data_handler)
  app$get("/schedule", schedule_handler)
  app$get("/stats", stats_handler)

  # Several threads: requests the client gave up on are still hanging in the
  # service while the next ones arrive. No keep-alive, no access log, and no
  # error log (every abandoned request ends in a "broken connection" error).
  opts <- webfakes::server_opts(
    remote = TRUE, num_threads = 8, interfaces = "127.0.0.1",
    enable_keep_alive = FALSE, tcp_nodelay = TRUE,
    access_log_file = FALSE, error_log_file = FALSE
  )
  process <- webfakes::new_app_process(app, opts = opts, start = FALSE, auto_start = FALSE)
  control <- function(path) {
    response <- httr::GET(process$url(path), httr::timeout(10),
      httr::add_headers(Connection = "close"))
    httr::stop_for_status(response)
    httr::content(response, as = "parsed", type = "application/json")
  }
  list(
    start = function() process$start(),
    stop = function() process$stop(),
    url = function(path) process$url(path),
    schedule = function(down_for) control(paste0("/schedule?down_for=", format(down_for, digits = 15))),
    stats = function() control("/stats")
  )
}

# One run: `requests` calls, one every `interval` seconds (start to start),
# through `breaker` if given. Stops early at the wall-clock cap.
demo_run <- function(scenario, server, failing_for, requests, interval, timeout,
                     breaker = NULL) {
  server$schedule(failing_for)
  started <- elapsed <- rep(NA_real_, requests)
  outcome <- rep(NA_character_, requests)
  transitions <- list()

  t0 <- now_seconds()
  deadline <- t0 + demo_max_seconds
  if (!is.null(breaker)) {
    breaker$on("state_change", function(from, to) {
      transitions[[length(transitions) + 1L]] <<- list(time = now_seconds() - t0, from = from, to = to)
    })
  }

  capped <- FALSE
  last_start <- -Inf
  for (i in seq_len(requests)) {
    wait <- min(last_start + interval - now_seconds(), deadline - now_seconds())
    if (wait > 0) Sys.sleep(wait)
    start <- now_seconds()
    if (start >= deadline) {
      capped <- TRUE
      break
    }
    last_start <- start
    url <- server$url(sprintf("/data?at=%.6f", demo_planned(i, interval)))
    call_timeout <- max(min(timeout, deadline - start), 0.001)

    reached <- FALSE
    get <- function() {
      reached <<- TRUE
      demo_get(url, call_timeout)
    }
    outcome[[i]] <- if (is.null(breaker)) {
      response <- tryCatch(get(), error = function(e) NULL)
      if (!is.null(response) && demo_is_2xx(response)) "ok" else "failed"
    } else {
      value <- breaker$execute(function() {
        response <- get()
        if (httr::status_code(response) >= 500) stop("HTTP ", httr::status_code(response))
        response
      }, function() "fallback")
      if (!reached) {
        "short-circuited"
      } else if (inherits(value, "response") && demo_is_2xx(value)) {
        "ok"
      } else {
        "failed"
      }
    }
    started[[i]] <- start - t0
    elapsed[[i]] <- now_seconds() - start
  }
  wall_time <- now_seconds() - t0

  made <- !is.na(outcome)
  calls <- data.frame(
    scenario = rep(scenario, sum(made)),
    i = seq_len(requests)[made],
    started = started[made],
    elapsed = elapsed[made],
    outcome = outcome[made],
    stringsAsFactors = FALSE
  )
  transitions <- if (length(transitions)) {
    do.call(rbind, lapply(transitions, as.data.frame, stringsAsFactors = FALSE))
  } else {
    data.frame(time = numeric(), from = character(), to = character(), stringsAsFactors = FALSE)
  }
  list(
    scenario = scenario,
    calls = calls,
    transitions = transitions,
    wall_time = wall_time,
    server_hits = server$stats()$hits,
    capped = capped
  )
}

# curl turns a user interrupt (Ctrl+C) during a transfer into an error;
# without this the demo would count it as a failed call and carry on. It is
# turned back into an interrupt, which ends the demo (and stops the service).
demo_get <- function(url, timeout) {
  withCallingHandlers(
    httr::GET(url, httr::timeout(timeout), httr::add_headers(Connection = "close")),
    error = function(e) {
      if (grepl("aborted by an application callback", conditionMessage(e), fixed = TRUE)) {
        rlang::interrupt()
      }
    }
  )
}

demo_is_2xx <- function(response) {
  status <- httr::status_code(response)
  status >= 200 && status < 300
}

demo_summarise <- function(run, failing_for, interval) {
  calls <- run$calls
  short <- calls$outcome == "short-circuited"
  after_outage <- !demo_is_down(demo_planned(calls$i, interval), failing_for)
  data.frame(
    scenario = run$scenario,
    requests = nrow(calls),
    wall_time = run$wall_time,
    server_calls = sum(!short),
    server_hits = as.numeric(run$server_hits),
    short_circuited = sum(short),
    failures = sum(calls$outcome == "failed"),
    successes = sum(calls$outcome == "ok"),
    blocked = sum(calls$elapsed),
    median_latency = if (nrow(calls)) stats::median(calls$elapsed) else NA_real_,
    max_latency = if (nrow(calls)) max(calls$elapsed) else NA_real_,
    fallback_while_up = sum(short & after_outage),
    capped = run$capped,
    stringsAsFactors = FALSE
  )
}

demo_report <- function(result, final_state) {
  tr <- result$transitions
  cat("Breaker state transitions (seconds from the start of run 2):\n")
  if (nrow(tr)) {
    width <- max(nchar(tr$from))
    cat(sprintf("  %7.3f s  %s -> %s\n", tr$time, formatC(tr$from, width = -width), tr$to), sep = "")
  } else {
    cat("  (none)\n")
  }
  cat("  Final state: ", final_state, "\n\n", sep = "")

  s <- result$summary
  a <- s[s$scenario == "no_breaker", ]
  b <- s[s$scenario == "breaker", ]
  seconds <- function(x) paste(formatC(x, format = "f", digits = 2), "s")
  ms <- function(x) paste(formatC(1000 * x, format = "f", digits = 1), "ms")
  rows <- list(
    c("requests", a$requests, b$requests),
    c("wall time", seconds(a$wall_time), seconds(b$wall_time)),
    c("calls that reached the service", a$server_calls, b$server_calls),
    c("  (counted by the service)", a$server_hits, b$server_hits),
    c("short-circuited (fallback at once)", a$short_circuited, b$short_circuited),
    c("failed (timeout or 5xx)", a$failures, b$failures),
    c("succeeded", a$successes, b$successes),
    c("time blocked in calls", seconds(a$blocked), seconds(b$blocked)),
    c("median call latency", ms(a$median_latency), ms(b$median_latency)),
    c("max call latency", ms(a$max_latency), ms(b$max_latency))
  )
  rows <- do.call(rbind, rows)
  rows <- rbind(c("", "no breaker", "breaker"), rows)
  w <- apply(rows, 2, function(col) max(nchar(col)))
  cat(sprintf("  %s  %s  %s\n",
    formatC(rows[, 1], width = -w[[1]]), formatC(rows[, 2], width = w[[2]]),
    formatC(rows[, 3], width = w[[3]])), sep = "")
  if (any(s$capped)) {
    cat("  Note: the ", demo_max_seconds, " s cap stopped ",
      paste(c("run 1", "run 2")[s$capped], collapse = " and "), " early.\n", sep = "")
  }

  saved <- a$blocked - b$blocked
  spared <- a$failures - b$failures
  conclusion <- if (saved > 0 && spared > 0) {
    paste0("Conclusion: the breaker saved ", demo_num(saved), " s of blocking (",
      demo_num(a$blocked), " s -> ", demo_num(b$blocked), " s) by keeping ",
      demo_count(spared, "request"), " away from the hanging service")
  } else {
    paste0("Conclusion: the breaker made no real difference here (", demo_num(a$blocked),
      " s -> ", demo_num(b$blocked), " s of blocking): it opens only after 3 failures,",
      " and the outage (or the run) was too short for that to pay off")
  }
  if (b$fallback_while_up > 0) {
    conclusion <- paste0(conclusion, "; its price: ", demo_count(b$fallback_while_up, "request"),
      " got the fallback although the service was back")
  }
  cat("\n", paste(strwrap(paste0(conclusion, "."), width = 78, exdent = 2), collapse = "\n"),
    "\n", sep = "")
}

demo_num <- function(x) format(round(x, 2), nsmall = 1, trim = TRUE)

demo_count <- function(n, noun) paste(n, if (n == 1) noun else paste0(noun, "s"))
