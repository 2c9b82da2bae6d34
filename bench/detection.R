# Detection quality of breaker rules on simulated downstream traces, with a
# manual clock (no sleeping, fully reproducible).
#
#   Rscript bench/detection.R        (from the repository root)
#
# One R process calls the downstream 10 times a second, one call at a time
# (as a plumber worker would). Each trace has an incident between t = 60 s and
# t = 180 s, and is healthy before and after:
#   hard down: every call fails at once (connection refused);
#   30% flaky: 30% of calls fail;
#   slow:      calls succeed but take 3 s (a healthy call takes 50 ms);
#   flapping:  10 s down, 10 s up, repeatedly.
# Rules compared:
#   seed:        5 consecutive failures, 30 s open (the package's defaults);
#   httr2:       httr2 1.x's breaker, simulated from its source (the
#                installed httr2 0.2.2 has none): req_retry(max_tries = 5,
#                failure_threshold = 3, failure_timeout = 30) with its
#                default exponential backoff (mean of its random sleep). One
#                call retries; when a call is about to make its 5th attempt,
#                every call is blocked for 30 s, then all calls go through
#                again (no probe). Failures of separate calls do not add up;
#                attempts count as calls, and backoff sleeps block the process;
#   rate:        failure rate >= 50% over a 10 s time window, >= 10 calls;
#   rate + slow: the same with >= 3 calls, plus slow calls (> 1 s) at >= 50%.
# Reported per trace and rule: calls that reached the downstream during the
# incident (each one blocks the R process and adds load), the seconds the
# process spent blocked in calls during the incident, calls rejected
# while the downstream was healthy (lost for nothing), seconds from the start
# of the incident to the first opening, and seconds from its end to the
# breaker being closed for good.
suppressPackageStartupMessages(library(circuitbreaker))

incident <- c(60, 180)
horizon <- 300
interval <- 0.1

downstream <- function(trace, t, u) {
  inside <- t >= incident[1] && t < incident[2]
  if (!inside) return(list(ok = TRUE, seconds = 0.05))
  switch(trace,
    `hard down` = list(ok = FALSE, seconds = 0.001),
    `30% flaky` = list(ok = u >= 0.3, seconds = 0.05),
    slow = list(ok = TRUE, seconds = 3),
    flapping = if (floor((t - incident[1]) / 10) %% 2 == 0) {
      list(ok = FALSE, seconds = 0.001)
    } else {
      list(ok = TRUE, seconds = 0.05)
    }
  )
}

# httr2 1.x's breaker (see the header): one call with retries, at time `t`.
# Returns the attempts that failed, whether the call failed, and when it ended.
httr2_call <- function(state, trace, t, threshold = 3, max_tries = 5, timeout = 30) {
  if (t < state$blocked_until) return(list(attempts = 0, bad = 0, ok = FALSE, t = t, rejected = TRUE))
  bad <- 0
  for (tries in 0:(max_tries - 1)) {
    if (tries > threshold) {  # httr2's retry_check_breaker() before an attempt
      state$blocked_until <- t + timeout
      return(list(attempts = tries, bad = bad, ok = FALSE, t = t, rejected = FALSE))
    }
    if (tries > 0) t <- t + (1 + 2^tries) / 2  # mean of runif(1, 1, 2^tries)
    d <- downstream(trace, t, stats::runif(1))
    in_incident <- t >= incident[1] && t < incident[2]
    if (in_incident && (!d$ok || d$seconds > 1)) bad <- bad + 1
    t <- t + d$seconds
    if (d$ok) return(list(attempts = tries + 1, bad = bad, ok = TRUE, t = t, rejected = FALSE))
  }
  list(attempts = max_tries, bad = bad, ok = FALSE, t = t, rejected = FALSE)
}

rules <- list(
  seed = list(),
  httr2 = NULL,
  rate = list(failure_threshold = Inf, failure_rate_threshold = 0.5, window_type = "time",
              window_size = 10, minimum_calls = 10),
  # Slow calls block the process, so few fit in a window: a lower minimum.
  `rate + slow` = list(failure_threshold = Inf, failure_rate_threshold = 0.5, window_type = "time",
                       window_size = 10, minimum_calls = 3, slow_call_duration = 1,
                       slow_call_rate_threshold = 0.5)
)

simulate <- function(trace, rule_name) {
  set.seed(1)
  clock <- breaker_manual_clock()
  sim <- if (rule_name == "httr2") list2env(list(blocked_until = -Inf)) else NULL
  cb <- if (is.null(sim)) do.call(circuit_breaker, c(rules[[rule_name]], list(clock = clock))) else NULL
  sent_bad <- 0
  blocked <- 0
  rejected_healthy <- 0
  first_open <- NA
  states <- character()
  times <- numeric()
  t <- 0
  n <- 0
  while (t < horizon && n < 1e5) {
    n <- n + 1
    u <- stats::runif(1)
    d <- downstream(trace, t, u)
    in_incident <- t >= incident[1] && t < incident[2]
    if (!is.null(sim)) {
      call <- httr2_call(sim, trace, t)
      if (call$rejected) {
        if (!in_incident || trace == "flapping" && d$ok) rejected_healthy <- rejected_healthy + 1
      } else {
        sent_bad <- sent_bad + call$bad
        if (in_incident) blocked <- blocked + (call$t - t)
        t <- call$t
      }
      state <- if (t < sim$blocked_until) "OPEN" else "CLOSED"
    } else {
      ran <- FALSE
      cb$execute(function() {
        ran <<- TRUE
        clock$advance(d$seconds)
        if (!d$ok) stop("down")
        "ok"
      }, function() NULL)
      if (ran) {
        if (in_incident) blocked <- blocked + d$seconds
        t <- t + d$seconds
        if (in_incident && (!d$ok || d$seconds > 1)) sent_bad <- sent_bad + 1
      } else if (!in_incident || trace == "flapping" && d$ok) {
        rejected_healthy <- rejected_healthy + 1
      }
      state <- cb$state
    }
    if (is.na(first_open) && state != "CLOSED" && t >= incident[1]) first_open <- t
    states <- c(states, state)
    times <- c(times, t)
    t <- t + interval
    if (is.null(sim)) clock$advance(interval)
  }
  # Closed for good: the start of the last run of CLOSED states after the incident.
  after <- times >= incident[2]
  not_closed <- which(after & states != "CLOSED")
  recovered_at <- if (length(not_closed)) times[max(not_closed) + 1] else incident[2]
  data.frame(
    trace = trace, rule = rule_name,
    calls_to_failing_downstream = sent_bad,
    seconds_blocked = round(blocked, 1),
    rejected_while_healthy = rejected_healthy,
    seconds_to_detect = if (is.na(first_open)) NA else round(first_open - incident[1], 1),
    seconds_to_recover = round(recovered_at - incident[2], 1)
  )
}

traces <- c("hard down", "30% flaky", "slow", "flapping")
table <- do.call(rbind, lapply(traces, function(tr) do.call(rbind, lapply(names(rules), function(r) simulate(tr, r)))))

cat(sprintf("R %s, circuitbreaker %s, %s\n\n", getRversion(), packageVersion("circuitbreaker"), format(Sys.Date())))
cat(paste0("| trace | rule | calls to the failing downstream | s blocked in calls during the incident | ",
           "rejected while healthy | s to detect | s to recover |\n"))
cat("|---|---|---|---|---|---|---|\n")
for (i in seq_len(nrow(table))) {
  r <- table[i, ]
  cat(sprintf("| %s | %s | %d | %s | %d | %s | %s |\n", r$trace, r$rule,
              r$calls_to_failing_downstream, r$seconds_blocked,
              r$rejected_while_healthy, ifelse(is.na(r$seconds_to_detect), "never", r$seconds_to_detect),
              r$seconds_to_recover))
}

png_file <- file.path("bench", "detection.png")
grDevices::png(png_file, width = 1000, height = 600)
old <- graphics::par(mfrow = c(2, 2), mar = c(4, 9, 3, 1))
for (tr in traces) {
  sub <- table[table$trace == tr, ]
  m <- rbind(`to failing downstream` = sub$calls_to_failing_downstream,
             `rejected while healthy` = sub$rejected_while_healthy)
  colnames(m) <- sub$rule
  graphics::barplot(m, beside = TRUE, horiz = TRUE, las = 1, col = c("#c62828", "#9e9e9e"),
                    main = paste0(tr, " (detect s: ",
                                  paste(ifelse(is.na(sub$seconds_to_detect), "-", sub$seconds_to_detect),
                                        collapse = " / "),
                                  ")"),
                    xlab = "calls", legend.text = tr == traces[1], args.legend = list(x = "bottomright", cex = 0.8))
}
graphics::par(old)
invisible(grDevices::dev.off())
cat("\nPlot: ", png_file, "\n", sep = "")
