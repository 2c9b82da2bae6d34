# Redis over TLS for the benchmarks: redis_tls_certs() from the
# repository's inst/redis/redis-tls.R (a CA and certificates made with the
# `openssl` command; the tests use the same file), and
# redis_tls_server_start(), which starts a TLS-only redis-server the one way
# (redis_server_start() of bench/harness/redis.R, which must be sourced
# first) with the server certificate of `certs`. The readiness check (PING,
# INFO's process_id) goes through the package's own TLS client
# (cb_redis_connect(url, timeout, tls)), not redis-cli. Sourced from the
# repository, like bench/harness/redis.R; the file is found from this one's
# path (source() keeps it in `ofile`): two folders up, then inst/redis/.
redis_tls_file <- local({
  frame <- Find(function(i) identical(sys.function(i), base::source), rev(seq_len(sys.nframe())))
  if (is.null(frame)) stop("source() bench/harness/redis-tls.R from its file")
  file.path(dirname(get("ofile", envir = sys.frame(frame))), "..", "..", "inst", "redis", "redis-tls.R")
})
source(redis_tls_file, local = environment())

# The `tls` that a client of a server of redis_tls_server_start() passes
# (breaker_store_redis(tls = ), cb_redis_connect(tls = )): the test CA,
# certificates verified.
redis_client_tls <- function(certs) list(ca_file = certs$ca, verify = TRUE)

# A TLS-only redis-server (rediss:// url) on 127.0.0.1 with the server
# certificate of `certs` (redis_tls_certs()), no client certificate asked
# for. `...` goes to redis_server_start() (port, args, tries, timeout). The
# result is redis_server_start()'s, with `client_tls` (redis_client_tls()).
redis_tls_server_start <- function(dir, certs, ...) {
  client_tls <- redis_client_tls(certs)
  call <- function(url, command) {
    conn <- circuitbreaker:::cb_redis_connect(url, 0.5, client_tls)
    reply <- circuitbreaker:::cb_redis_call(conn, command)
    if (isTRUE(attr(reply, "redis_error"))) stop("Redis: ", reply)
    reply
  }
  server <- redis_server_start(dir, call = call, ...,
                               tls = list(cert_file = certs$server_cert, key_file = certs$server_key,
                                          ca_file = certs$ca))
  server$client_tls <- client_tls
  server
}
