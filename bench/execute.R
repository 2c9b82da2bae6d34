# Cost of CircuitBreaker$execute() on the R hot path, against baselines
# measured in the same run (bench::mark medians).
#
#   Rscript bench/execute.R            (from the repository root, after
#                                       bash tools/setup.sh)
#
# Budgets: CLOSED at most 1.3x a bare tryCatch() around the same
# function; OPEN with a fallback at least 20x faster than a plain R6
# implementation of the original class (from the article this package
# follows), and at most 1 us.
suppressPackageStartupMessages(library(circuitbreaker))
# This script's path (Rscript passes it as --file=), to find bench/harness/.
this_file <- gsub("~+~", " ", sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1]), fixed = TRUE)
source(file.path(dirname(this_file), "seed_r6.R"))
source(file.path(dirname(this_file), "harness", "format.R"))  # fmt(), verdict()

iterations <- as.integer(Sys.getenv("CB_BENCH_ITERATIONS", "200000"))
f <- function() 1
fb <- function() 2
failing <- function() stop("down")

closed <- circuit_breaker()
open <- circuit_breaker(recovery_timeout = 1e6)
seed_open <- SeedBreaker$new(recovery_timeout = 1e6)
for (i in 1:5) {
  open$execute(failing, fb)
  seed_open$execute(failing, fb)
}
stopifnot(open$state == "OPEN", seed_open$state == "OPEN")
seed_closed <- SeedBreaker$new()
closed_fail <- circuit_breaker(failure_threshold = Inf)
execute_closed <- closed$execute  # bound methods, fetched once
execute_open <- open$execute
# The floor for any method call on an R6 object: `$` on an object with a
# class attribute goes through S3 dispatch before the method even starts.
Floor <- R6::R6Class("Floor", public = list(call = function(request_func, fallback_func) fallback_func()))
floor_object <- Floor$new()

# HALF_OPEN: a breaker on a manual clock is opened by hand, time moves past
# the recovery timeout, and the next call is the probe that closes it. The
# cycle without the probe (on_failure() + advance + reset()) is measured too.
clock <- breaker_manual_clock()
probing <- circuit_breaker(failure_threshold = 1, recovery_timeout = 1, clock = clock)
probe_cycle <- function() {
  probing$on_failure()
  clock$advance(1.5)
  probing$execute(f, fb)
}
reset_cycle <- function() {
  probing$on_failure()
  clock$advance(1.5)
  probing$reset()
}
open_no_fallback <- function() tryCatch(open$execute(f), circuit_breaker_open = function(e) NULL)

results <- bench::mark(
  `tryCatch(f(), error = function(e) fb())` = tryCatch(f(), error = function(e) fb()),
  `CLOSED: cb$execute(f, fb)` = closed$execute(f, fb),
  `CLOSED: seed R6 execute(f, fb)` = seed_closed$execute(f, fb),
  `OPEN: cb$execute(f, fb)` = open$execute(f, fb),
  `OPEN: seed R6 execute(f, fb)` = seed_open$execute(f, fb),
  `CLOSED: execute <- cb$execute; execute(f, fb)` = execute_closed(f, fb),
  `OPEN: execute <- cb$execute; execute(f, fb)` = execute_open(f, fb),
  `R6 floor: obj$call(f, fb) that only calls fb()` = floor_object$call(f, fb),
  `OPEN without fallback: tryCatch(cb$execute(f), circuit_breaker_open = )` = open_no_fallback(),
  `HALF_OPEN: on_failure() + advance + probe cb$execute(f, fb)` = probe_cycle(),
  `HALF_OPEN baseline: on_failure() + advance + reset()` = reset_cycle(),
  `CLOSED failure: cb$execute(failing, fb) (a stop() caught)` = closed_fail$execute(failing, fb),
  `tryCatch(failing(), error = function(e) fb())` = tryCatch(failing(), error = function(e) fb()),
  iterations = iterations, check = FALSE, filter_gc = TRUE
)

median_ns <- function(name) as.numeric(results$median[names(results$expression) == name]) * 1e9
base <- median_ns("tryCatch(f(), error = function(e) fb())")
seed <- median_ns("OPEN: seed R6 execute(f, fb)")
rows <- vapply(seq_len(nrow(results)), function(i) {
  name <- names(results$expression)[i]
  ns <- median_ns(name)
  sprintf("| %s | %s | %s | %.2fx | %.1fx |", name, fmt(ns), format(results$mem_alloc[i]),
          ns / base, seed / ns)
}, character(1))

closed_ratio <- median_ns("CLOSED: cb$execute(f, fb)") / base
open_ns <- median_ns("OPEN: cb$execute(f, fb)")
cat(
  sprintf("R %s, circuitbreaker %s, bench %s, %d iterations each, %s\n\n",
          getRversion(), packageVersion("circuitbreaker"), packageVersion("bench"), iterations,
          format(Sys.time(), "%Y-%m-%d")),
  "| expression | median | allocated | vs tryCatch | seed OPEN / this |\n",
  "|---|---|---|---|---|\n",
  paste0(rows, "\n"),
  sprintf("\nCLOSED: %.2fx the bare tryCatch (budget <= 1.3x): %s\n", closed_ratio,
          verdict(closed_ratio <= 1.3)),
  sprintf("OPEN with fallback: %s, %.1fx faster than the seed R6 class (budget >= 20x and <= 1 us): %s\n",
          fmt(open_ns), seed / open_ns,
          verdict(seed / open_ns >= 20 && open_ns <= 1000)),
  sep = ""
)
