# Runs the avalanche demonstration (avalanche.R, next to this file) and
# prints its report: per phase and endpoint requests/s, p50/p99 latency,
# fallback and error shares, the breakers' transitions and the headline
# checks. Everything runs on 127.0.0.1; about two minutes with the defaults.
#
#   Rscript bench/avalanche/run.R [options]
#
# Options (each also read from an environment variable, the command line
# winning; --name value or --name=value):
#   --plot FILE               AVALANCHE_PLOT               write the latency plot (PNG) to FILE
#   --phases H,HG,F,R         AVALANCHE_PHASES             seconds of the healthy, hanging,
#                                                          failing and recovered phases
#                                                          (default 10,30,20,25)
#   --concurrency N           AVALANCHE_CONCURRENCY        requests in flight (default 8)
#   --downstream-timeout S    AVALANCHE_DOWNSTREAM_TIMEOUT (default 1)
#   --recovery-timeout S      AVALANCHE_RECOVERY_TIMEOUT   (default 20)
#   --failure-threshold N     AVALANCHE_FAILURE_THRESHOLD  (default 3)
#   --slice-seconds S         AVALANCHE_SLICE_SECONDS      each endpoint's turn (default 0.5)
#   --quiet                   AVALANCHE_QUIET=true         print nothing
#   --help                    this text
#
# It needs circuitbreaker installed, and plumber, webfakes, callr, curl,
# httpuv, jsonlite, later and promises. Exit status: 0 when the run
# completed (whether or not every target was met), 2 for a bad option, 1 for
# any other error.

spec <- list(
  plot = list(env = "AVALANCHE_PLOT", flag = FALSE),
  phases = list(env = "AVALANCHE_PHASES", flag = FALSE),
  concurrency = list(env = "AVALANCHE_CONCURRENCY", flag = FALSE),
  "downstream-timeout" = list(env = "AVALANCHE_DOWNSTREAM_TIMEOUT", flag = FALSE),
  "recovery-timeout" = list(env = "AVALANCHE_RECOVERY_TIMEOUT", flag = FALSE),
  "failure-threshold" = list(env = "AVALANCHE_FAILURE_THRESHOLD", flag = FALSE),
  "slice-seconds" = list(env = "AVALANCHE_SLICE_SECONDS", flag = FALSE),
  quiet = list(env = "AVALANCHE_QUIET", flag = TRUE),
  help = list(env = NA_character_, flag = TRUE)
)

# This script's path (Rscript passes it as --file=), to find bench/harness/.
this_file <- gsub("~+~", " ", sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1]), fixed = TRUE)
# usage(), bad_option(), parse_options(), as_flag():
source(file.path(dirname(this_file), "..", "harness", "options.R"))

# bad_option() comes from harness/options.R, which lintr does not follow.
# nolint start: object_usage_linter.
as_number <- function(value, name) {
  number <- suppressWarnings(as.numeric(strsplit(value, ",", fixed = TRUE)[[1]]))
  if (!length(number) || anyNA(number)) bad_option("--", name, " must be a number, not \"", value, "\"")
  number
}
# nolint end

values <- parse_options(commandArgs(TRUE), spec)
if (as_flag(values$help, "help")) usage(0, this_file)

args <- list(plot_file = values$plot, quiet = as_flag(values$quiet, "quiet"))
if (!is.null(values$phases)) {
  phases <- as_number(values$phases, "phases")
  if (length(phases) != 4L) bad_option("--phases must be four numbers, not \"", values$phases, "\"")
  args$phase_seconds <- stats::setNames(phases, c("healthy", "hanging", "failing", "recovered"))
}
numbers <- c(concurrency = "concurrency", "downstream-timeout" = "downstream_timeout",
             "recovery-timeout" = "recovery_timeout", "failure-threshold" = "failure_threshold",
             "slice-seconds" = "slice_seconds")
for (name in names(numbers)) {
  if (!is.null(values[[name]])) args[[numbers[[name]]]] <- as_number(values[[name]], name)
}
if (is.null(args$plot_file)) args["plot_file"] <- list(NULL)

suppressPackageStartupMessages(library(circuitbreaker))
harness <- new.env()
source(file.path(dirname(this_file), "avalanche.R"), local = harness)

status <- tryCatch(
  {
    do.call(harness$avalanche_demo, args)
    0L
  },
  avalanche_invalid_argument = function(e) {
    cat("run.R: ", conditionMessage(e), "\n", file = stderr(), sep = "")
    2L
  }
)
quit(save = "no", status = status)
