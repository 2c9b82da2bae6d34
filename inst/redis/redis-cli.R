# One Redis command through redis-cli, for the package's tests and
# benchmarks only (not part of the package's API). The topologies
# (redis-cluster.R, redis-sentinel.R) talk to their servers with it, because
# the package's own client follows no MOVED or ASK and speaks no Sentinel
# yet, and so that they need no hiredis build. It defines redis_cli() and
# nothing else at the top level. It needs processx and redis-cli.

# Runs `redis-cli -h host -p port -e <args>` and returns its output lines
# (the reply; an array is one line per element), or signals an error: a
# round trip that fails, an error reply (-e makes redis-cli exit non-zero on
# one), or no answer within `timeout` seconds (the process is then killed).
#
# * `password`: given through REDISCLI_AUTH, never on the command line (a
#   command line is visible to every user of the machine in ps).
# * `cluster`: TRUE adds -c (follow MOVED and ASK).
# * `host`: 127.0.0.1; the tests reach nothing else.
redis_cli <- function(port, args, password = NULL, cluster = FALSE, host = "127.0.0.1", timeout = 5) {
  cli <- Sys.which("redis-cli")
  if (!nzchar(cli)) stop("redis-cli is not installed")
  env <- if (is.null(password)) "current" else c("current", REDISCLI_AUTH = password)
  result <- processx::run(cli, c("-h", host, "-p", as.character(port), "-e", if (cluster) "-c",
                                 as.character(args)),
                          env = env, timeout = timeout, error_on_status = FALSE)
  out <- strsplit(result$stdout, "\n", fixed = TRUE)[[1]]
  if (isTRUE(result$timeout)) {
    stop("redis-cli ", paste(args, collapse = " "), " on port ", port, ": no answer within ", timeout, " s")
  }
  if (result$status != 0L) {
    stop("redis-cli ", paste(args, collapse = " "), " on port ", port, ": ",
         trimws(paste(c(out, result$stderr), collapse = " ")))
  }
  out
}
