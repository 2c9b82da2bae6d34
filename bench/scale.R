# Many breakers: creation, lookup and memory, and memory over many calls.
#
#   Rscript bench/scale.R        (from the repository root)
#
# 10,000 per-host breakers through breaker_for() (each with a 100-call count
# window and the failure-rate rule), then 1,000,000 calls on one breaker.
suppressPackageStartupMessages(library(circuitbreaker))

rss_bytes <- function() {
  status <- readLines("/proc/self/status")
  as.numeric(sub("[^0-9]*([0-9]+).*", "\\1", grep("^VmRSS", status, value = TRUE))) * 1024
}
settle <- function() invisible(replicate(3, gc(full = TRUE)))

n <- as.integer(Sys.getenv("CB_BENCH_BREAKERS", "10000"))
options(circuitbreaker.max_breakers = n + 10,
        circuitbreaker.defaults = list(failure_rate_threshold = 0.5, window_size = 100))
urls <- sprintf("http://host-%05d.internal:8080/api/items", seq_len(n))

# R's heap in use (cons cells are 56 bytes, vector cells 8), as gc() counts it:
# unlike RSS, it leaves out the free pages R keeps after a collection.
r_heap_bytes <- function() {
  g <- gc(full = TRUE)
  g["Ncells", "used"] * 56 + g["Vcells", "used"] * 8
}

# Warm-up: the first calls pay one-time costs (byte-compiling, method
# caches) that are no breaker's.
for (u in sprintf("http://warm-up-%03d.internal:8080/", 1:200)) breaker_for(u)
for (n_ in sprintf("warm-up-%03d.internal:8080", 1:200)) breaker_remove(n_)

settle()
rss0 <- rss_bytes()
heap0 <- r_heap_bytes()
created <- system.time(for (u in urls) breaker_for(u))[["elapsed"]]
settle()
rss1 <- rss_bytes()
heap1 <- r_heap_bytes()
per_breaker <- (rss1 - rss0) / n
per_breaker_r_heap <- (heap1 - heap0) / n

lookup <- bench::mark(
  `breaker_for(url), existing` = breaker_for(urls[[n %/% 2]]),
  `breaker_get(name)` = breaker_get("host-05000.internal:8080"),
  iterations = 20000, check = FALSE
)

# Where a breaker's memory goes: the C++ handle, and the R objects.
handle_bytes <- circuitbreaker:::cb_handle_size()
settle()
rss2 <- rss_bytes()
wrappers <- lapply(seq_len(n), function(i) circuit_breaker())
settle()
per_wrapper_and_handle <- (rss_bytes() - rss2) / n
rm(wrappers)

# Memory over 1,000,000 calls on one breaker: constant (fixed-size state).
cb <- breaker_for(urls[[1]])
f <- function() 1
fail <- function() stop("x")
fb <- function() 2
calls <- as.integer(Sys.getenv("CB_BENCH_CALLS", "1000000"))
settle()
rss3 <- rss_bytes()
for (i in seq_len(calls %/% 2)) cb$execute(f, fb)
settle()
rss4 <- rss_bytes()
for (i in seq_len(calls %/% 2)) cb$execute(if (i %% 3 == 0) fail else f, fb)
settle()
rss5 <- rss_bytes()

med <- function(i) format(lookup$median[i])
cat(sprintf("R %s, circuitbreaker %s, %s, %d breakers\n\n", getRversion(), packageVersion("circuitbreaker"),
            format(Sys.Date()), n))
cat("| measure | value |\n|---|---|\n")
cat(sprintf("| create %d breakers with breaker_for() | %.2f s (%.0f us each) |\n", n, created, created / n * 1e6))
cat(sprintf("| breaker_for(url) on an existing breaker, median | %s |\n", med(1)))
cat(sprintf("| breaker_get(name), median | %s |\n", med(2)))
cat(sprintf("| RSS per registered breaker | %.0f bytes |\n", per_breaker))
cat(sprintf("| live memory per registered breaker: R heap (gc) + C++ handle | %.0f + %d = %.0f bytes |\n",
            per_breaker_r_heap, handle_bytes, per_breaker_r_heap + handle_bytes))
cat(sprintf("| RSS per unregistered circuit_breaker() | %.0f bytes |\n", per_wrapper_and_handle))
cat(sprintf("| of which the C++ handle (sizeof) | %d bytes |\n", handle_bytes))
cat(sprintf("| RSS change over the first %d calls | %+.0f KB |\n", calls %/% 2, (rss4 - rss3) / 1024))
cat(sprintf("| RSS change over the next %d calls (1/3 failing) | %+.0f KB |\n", calls %/% 2, (rss5 - rss4) / 1024))
cat(sprintf("| metrics after the calls | %s calls, %s failures, state %s |\n",
            format(cb$metrics()$calls, big.mark = ","), format(cb$metrics()$failures, big.mark = ","), cb$state))
