# The rejection path of httr2's own circuit breaker against circuitbreaker's,
# with both breakers opened by a real server that answers 503 (webfakes, in
# a background R process on 127.0.0.1), measured in one bench::mark() run.
#
#   R_LIBS=bench/.lib Rscript bench/httr2.R      (from the repository root)
#
# It needs httr2 >= 1.0.0 (req_retry(failure_threshold =)), which Debian does
# not ship: install current httr2, curl and what they need, and this package,
# into the private library bench/.lib first (not into the site libraries that
# CI uses), e.g.
#
#   Rscript -e 'install.packages(c("rlang", "vctrs", "curl", "httr2", "later"),
#     lib = "bench/.lib", repos = "https://cloud.r-project.org", Ncpus = 2)'
#   R CMD INSTALL -l bench/.lib <a copy of the repository>
#
# How httr2's breaker works (httr2 1.x, req_retry() and req_perform()):
# - It is keyed by a "realm": `failure_realm`, by default the request's host
#   name without the port (every service on 127.0.0.1 shares one realm).
#   This script names its own realm so that it touches nothing else.
# - It counts the failed attempts of ONE req_perform() call (its retries):
#   when a call is about to make attempt failure_threshold + 2, the realm is
#   blocked for failure_timeout seconds. Failures of separate calls do not
#   add up, so it can trip only with max_tries >= failure_threshold + 2.
#   Here: failure_threshold = 3, max_tries = 5, no backoff (the default
#   backoff would sleep 1-2, 1-4, 1-8 and 1-16 s between the attempts).
# - A blocked call is rejected before anything is sent, with an error of
#   class `httr2_breaker` ("Request failures have exceeded the threshold for
#   realm ..."). There is no fallback and no half-open probe: after the
#   timeout every call goes through again.
#
# Rows (each rejects; no request reaches the server while they run, which the
# script checks with the server's own counter):
#   httr2: req_perform(req) in a tryCatch() whose httr2_breaker handler returns NULL
#   breaker_perform(req, cb, fallback = function() NULL) with an explicit breaker
#   breaker_perform(req, fallback = ...) with the default breaker_for(req)
#   breaker_perform(req, cb) in a tryCatch() whose circuit_breaker_open handler returns NULL
#   cb$execute(f, fb) on an open breaker: the floor of any rejection.
# Allocated: bench's mem_alloc, from one evaluation made after a warm-up.
# R's memory profiler reports vectors over 128 bytes one by one and smaller
# ones only as new pages, which bench does not count: a path that builds only
# small objects (a condition, a closure) shows 0B. The number of garbage
# collections during the timed calls (bench's n_gc, all levels) is printed
# beside it as a measure of everything allocated.
suppressPackageStartupMessages({
  library(circuitbreaker)
  library(httr2)
})
# This script's path (Rscript passes it as --file=), to find bench/harness/.
this_file <- gsub("~+~", " ", sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1]), fixed = TRUE)
source(file.path(dirname(this_file), "harness", "format.R"))  # fmt(), for times

if (!"failure_threshold" %in% names(formals(httr2::req_retry))) {
  stop(sprintf(paste0(
    "bench/httr2.R needs httr2 >= 1.0.0, whose req_retry() has `failure_threshold =` ",
    "(its own circuit breaker); the httr2 loaded is %s, from %s. ",
    "Install current httr2 into bench/.lib and run: R_LIBS=bench/.lib Rscript bench/httr2.R"),
    utils::packageVersion("httr2"), dirname(getNamespaceInfo("httr2", "path"))), call. = FALSE)
}
for (pkg in c("bench", "webfakes")) {
  if (!requireNamespace(pkg, quietly = TRUE)) stop("bench/httr2.R needs the ", pkg, " package.", call. = FALSE)
}

iterations <- as.integer(Sys.getenv("CB_BENCH_ITERATIONS", "2000"))
if (is.na(iterations) || iterations < 1L || iterations > 1e6) stop("CB_BENCH_ITERATIONS must be in 1..1e6")

# The downstream: /down answers 503; /hits says how many /down requests arrived.
app <- webfakes::new_app()
app$locals$hits <- 0
app$get("/down", function(req, res) {
  app$locals$hits <- app$locals$hits + 1
  res$set_status(503L)$send_json(list(status = 503L), auto_unbox = TRUE)
})
app$get("/hits", function(req, res) res$send_json(list(hits = app$locals$hits), auto_unbox = TRUE))
server <- webfakes::new_app_process(app, opts = webfakes::server_opts(interfaces = "127.0.0.1"))
on.exit(server$stop(), add = TRUE)
hits <- function() resp_body_json(req_perform(request(server$url("/hits"))))$hits
down_url <- server$url("/down")
stopifnot(startsWith(down_url, "http://127.0.0.1:"))

# (a) httr2's breaker, in a realm of its own.
realm <- paste0("circuitbreaker-bench-", sub("^http://", "", server$url()))
req_httr2 <- request(down_url) |>
  req_retry(max_tries = 5, failure_threshold = 3, failure_timeout = 3600,
            backoff = function(i) 0, failure_realm = realm)
before <- hits()
first <- tryCatch(req_perform(req_httr2), error = identity)
if (!inherits(first, "httr2_breaker")) {
  stop("httr2's breaker did not trip: the first call ended with ", class(first)[[1]], call. = FALSE)
}
httr2_attempts <- hits() - before
httr2_reject <- function() tryCatch(req_perform(req_httr2), httr2_breaker = function(e) NULL)

# (b) circuitbreaker: three real 503s through breaker_perform() open it. The
# same breaker is registered for the server's host and port, so the default
# `breaker = breaker_for(req)` finds it too.
cb <- breaker_for(down_url, failure_threshold = 3, recovery_timeout = 3600)
req_cb <- request(down_url)
before <- hits()
# httr2 >= 1.0 says "Setting `max_tries = 2`." on every call that is made
# (see the report on without_retry_sleep()); the rejected calls below make none.
for (i in 1:3) suppressMessages(breaker_perform(req_cb, cb, fallback = function(cond) NULL))
cb_attempts <- hits() - before
stopifnot(cb$state == "OPEN", identical(breaker_for(req_cb), cb))

fb0 <- function() NULL
f <- function() 1
fb <- function() 2
cb_fallback <- function() breaker_perform(req_cb, cb, fallback = fb0)
cb_default <- function() breaker_perform(req_cb, fallback = fb0)
cb_no_fallback <- function() tryCatch(breaker_perform(req_cb, cb), circuit_breaker_open = function(e) NULL)
floor_execute <- function() cb$execute(f, fb)

# Every path rejects (and returns what it should) before anything is timed.
stopifnot(is.null(httr2_reject()), is.null(cb_fallback()), is.null(cb_default()),
          is.null(cb_no_fallback()), identical(floor_execute(), 2))
for (i in 1:20) {  # warm-up: byte-compilation and first-call costs
  httr2_reject()
  cb_fallback()
  cb_default()
  cb_no_fallback()
  floor_execute()
}
hits_before_mark <- hits()

labels <- c(
  httr2 = "httr2 breaker: `tryCatch(req_perform(req), httr2_breaker = )`",
  fallback = "`breaker_perform(req, cb, fallback = function() NULL)`",
  default = "`breaker_perform(req, fallback = function() NULL)` (default `breaker_for(req)`)",
  no_fallback = "`tryCatch(breaker_perform(req, cb), circuit_breaker_open = )`",
  floor = "floor: `cb$execute(f, fb)` on the open breaker"
)
results <- bench::mark(
  httr2 = httr2_reject(),
  fallback = cb_fallback(),
  default = cb_default(),
  no_fallback = cb_no_fallback(),
  floor = floor_execute(),
  iterations = iterations, check = FALSE, filter_gc = TRUE
)
hits_during_mark <- hits() - hits_before_mark
if (hits_during_mark != 0) stop(hits_during_mark, " requests reached the server while rejections were timed")
if (cb$state != "OPEN") stop("the circuitbreaker breaker is no longer OPEN")
if (!inherits(tryCatch(req_perform(req_httr2), error = identity), "httr2_breaker")) {
  stop("httr2's breaker is no longer blocking its realm")
}

ids <- as.character(results$expression)
median_ns <- as.numeric(results$median) * 1e9
names(median_ns) <- ids
base <- median_ns[["httr2"]]
rows <- vapply(seq_along(ids), function(i) {
  sprintf("| %s | %s | %s | %d | %sx | %sx |", labels[[ids[i]]], fmt(median_ns[[i]]),
          format(results$mem_alloc[i]), as.integer(results$n_gc[i]),
          format(signif(median_ns[[i]] / base, 2), scientific = FALSE),
          format(round(base / median_ns[[i]]), big.mark = ","))
}, character(1))
version_of <- function(pkg) {
  sprintf("%s %s (%s)", pkg, utils::packageVersion(pkg), dirname(getNamespaceInfo(pkg, "path")))
}
cat(
  sprintf("R %s; %s; %s; %s; %s; %s; %s; bench %s; libcurl %s; %d iterations each; %s\n\n",
          getRversion(), version_of("httr2"), version_of("curl"), version_of("rlang"),
          version_of("vctrs"), version_of("cli"), version_of("circuitbreaker"), utils::packageVersion("bench"),
          curl::curl_version()$version, iterations, format(Sys.time(), "%Y-%m-%d")),
  sprintf(paste0("Opening: httr2's breaker tripped during one req_perform() call after %d attempts ",
                 "(failure_threshold = 3, max_tries = 5, no backoff); circuitbreaker's opened after %d ",
                 "breaker_perform() calls (failure_threshold = 3). ",
                 "Requests reaching the server while the rejections were timed: %d.\n\n"),
          httr2_attempts, cb_attempts, hits_during_mark),
  paste0("| rejected call | median | allocated (vectors > 128 B, one call) | ",
         "garbage collections in the timed calls | median / httr2's | httr2's / median |\n"),
  "|---|---|---|---|---|---|\n",
  paste0(rows, "\n"),
  sep = ""
)
