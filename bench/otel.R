# What OpenTelemetry reporting (R/otel.R) costs on the hot path, with every
# baseline measured in the same run.
#
#   R_LIBS=<lane 2 libraries> Rscript bench/otel.R   (from the repository root;
#                                                     needs otel, bench, and
#                                                     otelsdk for the "on" rows)
#
# Three breakers of the same arguments, each timed in CLOSED
# (cb$execute(function() "ok")) and in OPEN (cb$execute(function() "ok",
# function() "fallback"), after one failure with recovery_timeout = 1e6):
#   baseline  created with options(circuitbreaker.otel = FALSE): nothing is
#             attached, the path of a build without OpenTelemetry support (and
#             of a machine without otel)
#   off       created with otel installed and OpenTelemetry off (no exporter
#             configured): the default for most users. Budget: the same cost
#             as the baseline, within the noise of the run
#   on        created inside otelsdk::with_otel_record() (in-memory tracer and
#             meter providers): every call adds to the counter, a rejection
#             also looks for an active span (none here). Reported, no budget
# bench::mark medians of CB_BENCH_ITERATIONS (50,000) calls per expression, in
# CB_BENCH_RUNS (8) runs whose order rotates; a second baseline breaker, timed
# in the same runs, is the control: its ratio to the first shows how far noise
# alone moves a ratio. Also the cost of creating a breaker (circuit_breaker()),
# where `off` checks once whether OpenTelemetry is on.
suppressPackageStartupMessages(library(circuitbreaker))
stopifnot(requireNamespace("otel", quietly = TRUE), requireNamespace("bench", quietly = TRUE))
have_sdk <- requireNamespace("otelsdk", quietly = TRUE)
stopifnot(!otel::is_tracing_enabled(), !otel::is_measuring_enabled())

iterations <- as.integer(Sys.getenv("CB_BENCH_ITERATIONS", "50000"))
runs <- as.integer(Sys.getenv("CB_BENCH_RUNS", "8"))
stopifnot(!is.na(iterations), iterations >= 1000L, !is.na(runs), runs >= 1L, runs <= 100L)

make_breaker <- function() circuit_breaker(failure_threshold = 1, recovery_timeout = 1e6)
old <- options(circuitbreaker.otel = FALSE)
baseline <- make_breaker()
control <- make_breaker()
options(old)
off <- make_breaker()
core_of <- function(cb) environment(cb$execute)$core
# Nothing hears the events of these two (the reporter is otel.R's).
stopifnot(is.null(core_of(baseline)$reporter), length(core_of(baseline)$listeners) == 0L,
          is.null(core_of(off)$reporter), length(core_of(off)$listeners) == 0L)

ok <- function() "ok"
fb <- function() "fallback"
median_ns <- function(expr_fun) {
  m <- bench::mark(expr_fun(), iterations = iterations, check = FALSE, filter_gc = FALSE, time_unit = "ns")
  as.numeric(m$median)
}

time_breakers <- function(breakers, phase) {
  out <- numeric()
  for (nm in names(breakers)) {
    b <- breakers[[nm]]
    out[[nm]] <- if (phase == "closed") median_ns(function() b$execute(ok)) else median_ns(function() b$execute(ok, fb))
  }
  out
}

measure <- function(on = NULL) {
  rows <- list()
  for (run in seq_len(runs)) {
    breakers <- list(baseline = baseline, off = off, control = control)
    if (!is.null(on)) breakers$on <- on
    # Rotate the order, so that no breaker is always first or last.
    shift <- (run - 1L) %% length(breakers)
    order <- c(seq_along(breakers))[((seq_along(breakers) + shift - 1L) %% length(breakers)) + 1L]
    breakers <- breakers[order]
    for (phase in c("closed", "open")) {
      if (phase == "open") for (b in breakers) if (b$state == "CLOSED") b$execute(function() stop("down"), fb)
      t <- time_breakers(breakers, phase)
      rows[[length(rows) + 1L]] <- data.frame(run = run, phase = phase, breaker = names(t), ns = unname(t))
    }
    for (b in breakers) b$reset()
  }
  do.call(rbind, rows)
}

creation <- function() {
  m <- bench::mark(
    baseline = withr_option_false(make_breaker()),
    off = make_breaker(),
    iterations = 2000, check = FALSE, filter_gc = FALSE, time_unit = "us"
  )
  stats::setNames(as.numeric(m$median), as.character(m$expression))
}
withr_option_false <- function(expr) {
  old <- options(circuitbreaker.otel = FALSE)
  on.exit(options(old))
  expr
}

cat(sprintf("otel %s, otelsdk %s, circuitbreaker %s, R %s; %d runs of %d calls; load average %s\n",
            utils::packageVersion("otel"), if (have_sdk) format(utils::packageVersion("otelsdk")) else "-",
            utils::packageVersion("circuitbreaker"), getRversion(), runs, iterations,
            paste(readLines("/proc/loadavg", warn = FALSE), collapse = " ")))

if (have_sdk) {
  recorded <- otelsdk::with_otel_record({
    on <- make_breaker()
    stopifnot(!is.null(core_of(on)$reporter))
    measure(on)
  }, what = "metrics")
  results <- recorded$value
} else {
  results <- measure()
}
create <- creation()

summary_of <- function(results, phase, name) {
  d <- results[results$phase == phase, ]
  base <- d$ns[d$breaker == "baseline"]
  x <- d$ns[d$breaker == name]
  r <- x / base
  sprintf("%-8s %-8s %8.0f ns   ratio to baseline: median %.3f (runs %.3f-%.3f)",
          phase, name, stats::median(x), stats::median(r), min(r), max(r))
}
cat("\nmedian ns per call (bench::mark), ratio to the baseline breaker in the same run\n")
for (phase in c("closed", "open")) {
  cat(summary_of(results, phase, "baseline"), "\n")
  for (name in intersect(c("control", "off", "on"), unique(results$breaker))) {
    cat(summary_of(results, phase, name), "\n")
  }
}
cat(sprintf("\ncircuit_breaker(): baseline %.1f us, off %.1f us (ratio %.2f)\n",
            create[["baseline"]], create[["off"]], create[["off"]] / create[["baseline"]]))
