# One Redis command through redis-cli, for the package's tests and
# benchmarks only (not part of the package's API). The topologies
# (redis-cluster.R, redis-sentinel.R) talk to their servers with it, because
# the package's own client follows no MOVED or ASK and speaks no Sentinel
# yet, and so that they need no hiredis build (nor one with TLS). It
# defines redis_cli() and redis_cli_tls_args() and nothing else at the top
# level. It needs processx and redis-cli.

# Runs `redis-cli -h host -p port -e <args>` and returns its output lines
# (the reply; an array is one line per element), or signals an error: a
# round trip that fails, an error reply (-e makes redis-cli exit non-zero on
# one), or no answer within `timeout` seconds (the process is then killed).
#
# * `password`: given through REDISCLI_AUTH, never on the command line (a
#   command line is visible to every user of the machine in ps).
# * `cluster`: TRUE adds -c (follow MOVED and ASK).
# * `host`: 127.0.0.1; the tests reach nothing else.
# * `tls`: NULL (plain TCP), or a list for a TLS port (redis-server.R's
#   `tls`): `ca_file` (--cacert: the CA that signed the server's
#   certificate), `cert_file` and `key_file` (--cert, --key: a client
#   certificate, for a server that asks for one), `server_name` (--sni) and
#   `insecure` (TRUE: --insecure, the server's certificate is not checked,
#   for one that no CA verifies, such as an expired one); all optional.
redis_cli <- function(port, args, password = NULL, cluster = FALSE, host = "127.0.0.1", timeout = 5,
                      tls = NULL) {
  cli <- Sys.which("redis-cli")
  if (!nzchar(cli)) stop("redis-cli is not installed")
  env <- if (is.null(password)) "current" else c("current", REDISCLI_AUTH = password)
  result <- processx::run(cli, c("-h", host, "-p", as.character(port), "-e", if (cluster) "-c",
                                 redis_cli_tls_args(tls), as.character(args)),
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

# The redis-cli options for `tls` (see redis_cli()): none for NULL.
redis_cli_tls_args <- function(tls) {
  if (is.null(tls)) return(character())
  stopifnot(is.list(tls), all(names(tls) %in% c("ca_file", "cert_file", "key_file", "server_name", "insecure")))
  c("--tls",
    if (!is.null(tls$ca_file)) c("--cacert", tls$ca_file),
    if (!is.null(tls$cert_file)) c("--cert", tls$cert_file),
    if (!is.null(tls$key_file)) c("--key", tls$key_file),
    if (!is.null(tls$server_name)) c("--sni", tls$server_name),
    if (isTRUE(tls$insecure)) "--insecure")
}
