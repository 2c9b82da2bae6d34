# How soon a breaker closes once its downstream is back: a health check
# (`health_check`, every `health_interval` seconds on later's loop) against
# waiting out `recovery_timeout` for the next call's probe.
#
# The downstream is a webfakes app in a background process (127.0.0.1) that
# answers 503 while a flag file exists and 200 once it is gone. Each run:
# a breaker (failure_threshold = 1) opens on the first 503; the downstream
# stays down for --down seconds, then comes back; meanwhile this process
# makes a call every 0.1 s through the breaker (the traffic that would
# probe) and runs later's event loop. The run ends when the breaker is
# CLOSED. Reported: seconds from the downstream's return to the close, and
# from the opening to the close, for each way, over --runs runs each.
#
#   Rscript bench/health-check.R [--runs=3] [--recovery=10] [--interval=0.5] [--down=2]
this_file <- gsub("~+~", " ", sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1]),
                  fixed = TRUE)
source(file.path(dirname(this_file), "harness", "options.R"))
source(file.path(dirname(this_file), "harness", "processes.R"))
source(file.path(dirname(this_file), "harness", "clock.R"))

suppressPackageStartupMessages(library(circuitbreaker))

spec <- list(
  runs = list(env = NA, flag = FALSE, default = 3, min = 1, max = 20, whole = TRUE),
  recovery = list(env = NA, flag = FALSE, default = 10, min = 1, max = 120, whole = FALSE),
  interval = list(env = NA, flag = FALSE, default = 0.5, min = 0.05, max = 10, whole = FALSE),
  down = list(env = NA, flag = FALSE, default = 2, min = 0, max = 60, whole = FALSE)
)
if (any(commandArgs(TRUE) %in% c("--help", "-h"))) usage(0, this_file)
given <- parse_options(commandArgs(TRUE), spec)
opts <- list()
for (o in names(spec)) {
  opts[[o]] <- if (is.null(given[[o]])) spec[[o]]$default else as_bounded_number(given[[o]], o, spec)
}
if (opts$down >= opts$recovery) bad_option("--down must be less than --recovery")

procs <- new_stoppers()
on.exit(procs$stop_all(), add = TRUE)
flag <- tempfile("bench-health-down-")
procs$add(function() unlink(flag))

app <- webfakes::new_app()
app$locals$flag <- flag
answer <- function(req, res) {
  if (file.exists(req$app$locals$flag)) res$set_status(503L)$send("down") else res$send("ok")
}
app$get("/api", answer)
app$get("/health", answer)
downstream <- start_webfakes(app, procs, num_threads = 2)

handle <- function() curl::new_handle(timeout = 2, connecttimeout = 1)
status <- function(path) {
  tryCatch(curl::curl_fetch_memory(downstream$url(path), handle = handle())$status_code,
           error = function(e) NA_integer_)
}
call_api <- function() {
  s <- status("/api")
  if (!identical(s, 200L)) stop("downstream answered ", s)
  "ok"
}

one_run <- function(way, i) {
  file.create(flag)
  check <- if (way == "health_check") function() identical(status("/health"), 200L)
  cb <- circuit_breaker(failure_threshold = 1, recovery_timeout = opts$recovery,
                        health_interval = opts$interval, health_check = check)
  cb$execute(call_api, function() "fallback")
  stopifnot(cb$state == "OPEN")
  opened <- now()
  up_at <- NA_real_
  deadline <- opened + opts$recovery + 30
  while (cb$state != "CLOSED" && now() < deadline) {
    if (is.na(up_at) && now() >= opened + opts$down) {
      unlink(flag)
      up_at <- now()
    }
    cb$execute(call_api, function() "fallback")
    later::run_now(0.1)
  }
  closed <- now()
  stopifnot(cb$state == "CLOSED")
  data.frame(way = way, run = i, after_up = closed - up_at, after_open = closed - opened,
             reason = utils::tail(cb$transitions()$reason, 1))
}

if (!identical(status("/health"), 200L)) {
  for (i in 1:50) {
    Sys.sleep(0.1)
    if (identical(status("/health"), 200L)) break
  }
}
rows <- list()
for (i in seq_len(opts$runs)) {
  for (way in c("health_check", "recovery_timeout")) rows[[length(rows) + 1L]] <- one_run(way, i)
}
res <- do.call(rbind, rows)

cat(sprintf("recovery_timeout %g s, health_interval %g s, downstream down %g s after the opening; %d runs each\n\n",
            opts$recovery, opts$interval, opts$down, opts$runs))
cat("| way | closed after the downstream's return (s), median [min-max] |",
    "closed after the opening (s), median | closed by |\n")
cat("|---|---|---|---|\n")
for (way in unique(res$way)) {
  r <- res[res$way == way, ]
  cat(sprintf("| %s | %.2f [%.2f-%.2f] | %.2f | %s |\n", way, stats::median(r$after_up), min(r$after_up),
              max(r$after_up), stats::median(r$after_open),
              paste(unique(ifelse(is.na(r$reason), "a probe", r$reason)), collapse = ", ")))
}
h <- stats::median(res$after_up[res$way == "health_check"])
w <- stats::median(res$after_up[res$way == "recovery_timeout"])
cat(sprintf("\nthe health check closed the breaker %.1fx sooner after the downstream's return (medians)\n", w / h))
