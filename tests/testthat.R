# Before processx loads (testthat and callr use it): let its SIGCHLD handler
# also call the one it replaced. Otherwise a child forked by parallel (the
# fork tests use mcparallel() and mclapply()) that exits while processx's
# handler is installed is never marked as reaped for parallel, and R's exit
# waits 10 s for it and prints "Error while shutting down parallel: unable
# to terminate some child processes" after a passing run.
Sys.setenv(PROCESSX_NOTIFY_OLD_SIGCHLD = "true")

library(testthat)
library(circuitbreaker)

test_check("circuitbreaker")
