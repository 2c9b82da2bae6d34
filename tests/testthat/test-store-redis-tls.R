# The fleet store over TLS (rediss://, breaker_store_redis(tls = )): real
# redis-servers with a TLS port only on 127.0.0.1 (inst/redis/redis-server.R)
# and certificates made by the openssl command for each test
# (inst/redis/redis-tls.R): a trusted server, mutual TLS, every refusal
# (unknown CA, name mismatch, expired, a plain port, a plain client),
# verify = FALSE, the checks of `tls`, URL query parameters, a
# least-privilege ACL user and a restart. Tests skip where TLS cannot be
# tested (helper-tls.R). Nothing here asserts a timing: that a call through
# a refused store still answers shows that it does not wait on the link.

tls_url <- function(port, auth = "", query = "") {
  sprintf("rediss://%s127.0.0.1:%d/0%s", auth, as.integer(port), query)
}

# A store refused for `pattern` (a regular expression on the reason, in the
# words of the TLS contract): alone, with one warning of class
# circuit_breaker_store_alone that gives the reason, the breaker on local
# rules; its calls still answer, a half-open probe (the one call that may
# ask Redis) too. Returns the breaker (removed from the registry when `env`
# ends) and the warning.
expect_refused <- function(store, name, pattern, env = parent.frame()) {
  res <- tls_breaker_alone(store, name, fleet_args(failure_threshold = 1, recovery_timeout = 0.3), env = env)
  expect_length(res$alone, 1)
  w <- res$alone[[1]]
  expect_s3_class(w, c("circuit_breaker_store_alone", "circuit_breaker_warning", "warning"))
  expect_match(conditionMessage(w), pattern)
  expect_match(w$reason, pattern)
  cb <- res$cb
  expect_identical(cb$metrics()$mode, "local")
  expect_match(cb$metrics()$last_error, pattern)
  expect_identical(cb$execute(function() "ok", function(e) "fallback"), "ok")
  expect_identical(cb$execute(function() stop("down"), function(e) "fallback"), "fallback")
  expect_identical(cb$state, "OPEN")
  wait_for_probe_time(cb)
  expect_identical(cb$execute(function() "ok", function(e) "fallback"), "ok")
  expect_identical(cb$state, "CLOSED")
  # Said once: later calls and metrics say nothing more.
  expect_length(tls_conditions(cb$metrics(), "circuit_breaker_store_alone"), 0)
  invisible(list(cb = cb, warning = w))
}

test_that("the tests' certificates and TLS servers are what they say (openssl, redis-cli --tls)", {
  certs <- local_tls_certs()
  keys <- unlist(certs[grepl("_key$", names(certs))])
  expect_length(keys, 7)
  expect_true(all(file.info(keys)$mode == as.octmode("0600")))
  verify <- function(...) {
    res <- processx::run("openssl", c("verify", ...), error_on_status = FALSE, timeout = 10)
    structure(res$status == 0L, output = paste(res$stdout, res$stderr))
  }
  expect_true(verify("-CAfile", certs$ca, "-verify_ip", "127.0.0.1", certs$server_cert))
  expect_true(verify("-CAfile", certs$ca, "-verify_hostname", "localhost", certs$server_cert))
  expect_true(verify("-CAfile", certs$ca, "-verify_hostname", "other.example.test", certs$other_cert))
  mismatch <- verify("-CAfile", certs$ca, "-verify_ip", "127.0.0.1", certs$other_cert)
  expect_false(mismatch)
  expect_match(attr(mismatch, "output"), "mismatch")
  expired <- verify("-CAfile", certs$ca, certs$expired_cert)
  expect_false(expired)
  expect_match(attr(expired, "output"), "expired")
  expect_true(verify("-CAfile", certs$ca, "-purpose", "sslclient", certs$client_cert))
  unknown <- verify("-CAfile", certs$ca, certs$untrusted_cert)
  expect_false(unknown)
  expect_match(attr(unknown, "output"), "local issuer")
  # The bundle: two roots, the second CA first; each verifies its own.
  expect_identical(sum(grepl("BEGIN CERTIFICATE", readLines(certs$bundle), fixed = TRUE)), 2L)
  expect_true(verify("-CAfile", certs$bundle, certs$server_cert))
  expect_true(verify("-CAfile", certs$bundle, certs$untrusted_cert))

  # A TLS server: its url is rediss://, it has no plain port, and it
  # answers redis-cli --tls with the CA (and no other).
  server <- local_redis_tls_server(certs = certs, client = FALSE)
  expect_identical(server$url, tls_url(server$port))
  expect_identical(server$cli("PING"), "PONG")
  expect_match(paste(server$cli("CONFIG", "GET", "port"), collapse = " "), "^port 0$")
  expect_error(redis_cli(server$port, "PING"), "reset|closed|Error", ignore.case = TRUE)
  expect_error(redis_cli(server$port, "PING", tls = list(ca_file = certs$untrusted_ca)), "verify failed")
  expect_identical(redis_cli(server$port, "PING", tls = list(ca_file = certs$bundle)), "PONG")
  # Restarted empty, on the same port.
  port <- server$port
  server$cli("SET", "k", "v")
  server$restart()
  expect_identical(server$port, port)
  expect_identical(server$cli("EXISTS", "k"), "0")

  # Mutual TLS: no answer without the client certificate.
  mutual <- local_redis_tls_server(auth_clients = "yes", certs = certs, client = FALSE)
  expect_error(redis_cli(mutual$port, "PING", tls = list(ca_file = certs$ca)))
  expect_identical(mutual$cli("PING"), "PONG")
  # The others start, and are reached as their certificates allow.
  for (cert in c("other", "expired", "untrusted")) {
    s <- local_redis_tls_server(cert = cert, certs = certs, client = FALSE)
    expect_identical(s$cli("PING"), "PONG", label = cert)
  }
  # With a password: in the url, percent-encoded, and asked for.
  guarded <- local_redis_tls_server(certs = certs, password = "s3cret/pw", client = FALSE)
  expect_identical(guarded$url, tls_url(guarded$port, auth = ":s3cret%2Fpw@"))
  expect_identical(guarded$cli("PING"), "PONG")
  expect_error(redis_cli(guarded$port, "PING", tls = guarded$server$cli_tls), "NOAUTH")
})

test_that("a fleet breaker over rediss:// with ca_file shares a trip between processes", {
  server <- local_redis_tls_server()
  tls <- list(ca_file = server$certs$ca)
  store <- tls_store(server$url, tls = tls)
  cb <- local_shared_breaker(store, "tls-trip", fleet_args())
  wait_for_fleet(cb)
  m <- cb$metrics()
  expect_match(m$tls, "^TLSv1\\.[23]$")
  expect_true(is.na(m$last_error))

  # Two failures here, three in another process: five across the fleet.
  res <- fleet_trip_race(cb, server$url, "tls-trip", tls = tls, timeout = 0.5)
  expect_identical(res$result, "rejected")
  expect_match(res$tls, "^TLSv1\\.[23]$")
  expect_true(wait_until(function() identical(cb$state, "OPEN")))
  expect_identical(server$fleet("tls-trip", "to"), 1)

  # print() and format(): rediss://, the link's TLS version; the status route.
  shown <- capture.output(print(store))
  expect_match(shown[[1]], tls_url(server$port), fixed = TRUE)
  expect_true(any(grepl("tls: TLSv1\\.[23]", shown)))
  expect_identical(format(store)[[1]], shown[[1]])
  expect_match(circuitbreaker:::web_status(cb$metrics())$tls, "^TLSv1\\.[23]$")
})

test_that("a CA file of two roots trusts both", {
  skip_if_no_tls()
  certs <- local_tls_certs()
  first <- local_redis_tls_server(certs = certs)
  second <- local_redis_tls_server(cert = "untrusted", certs = certs)
  tls <- list(ca_file = certs$bundle)
  a <- local_shared_breaker(tls_store(first$url, tls = tls), "bundle-first", fleet_args())
  b <- local_shared_breaker(tls_store(second$url, tls = tls), "bundle-second", fleet_args())
  wait_for_fleet(a)
  wait_for_fleet(b)
  expect_match(a$metrics()$tls, "^TLSv1\\.[23]$")
  expect_match(b$metrics()$tls, "^TLSv1\\.[23]$")
})

test_that("mutual TLS: without a client certificate the store is alone and says why; with one it joins", {
  server <- local_redis_tls_server(auth_clients = "yes")
  certs <- server$certs
  without <- tls_store(server$url, tls = list(ca_file = certs$ca))
  expect_refused(without, "mtls-none", "client certificate")
  with_cert <- tls_store(server$url, tls = list(ca_file = certs$ca, cert_file = certs$client_cert,
                                                key_file = certs$client_key))
  cb <- local_shared_breaker(with_cert, "mtls-cert", fleet_args())
  wait_for_fleet(cb)
  expect_match(cb$metrics()$tls, "^TLSv1\\.[23]$")
})

test_that("a server certificate of an unknown CA is refused as such", {
  server <- local_redis_tls_server(cert = "untrusted")
  expect_refused(tls_store(server$url, tls = list(ca_file = server$certs$ca)), "tls-unknown-ca", "unknown CA")
})

test_that("a certificate for another name is refused, and server_name accepts it", {
  server <- local_redis_tls_server(cert = "other")
  expect_refused(tls_store(server$url, tls = list(ca_file = server$certs$ca)), "tls-mismatch", "name mismatch")
  # A tunnel-style setting: connect to 127.0.0.1, check the name the
  # certificate is for.
  named <- tls_store(server$url, tls = list(ca_file = server$certs$ca, server_name = "other.example.test"))
  cb <- local_shared_breaker(named, "tls-named", fleet_args())
  wait_for_fleet(cb)
  expect_match(cb$metrics()$tls, "^TLSv1\\.[23]$")
})

test_that("an expired server certificate is refused as such", {
  server <- local_redis_tls_server(cert = "expired")
  expect_refused(tls_store(server$url, tls = list(ca_file = server$certs$ca)), "tls-expired", "expired")
})

test_that("TLS to a plain port, and a plain client to a TLS port, are refused and say which", {
  skip_if_no_tls()
  certs <- local_tls_certs()
  plain <- local_redis_server()
  expect_refused(tls_store(tls_url(plain$port), tls = list(ca_file = certs$ca)), "tls-to-plain", "not a TLS server")
  server <- local_redis_tls_server(certs = certs)
  expect_refused(tls_store(sprintf("redis://127.0.0.1:%d/0", server$port)), "plain-to-tls",
                 "TLS port|rediss://|closed|reset")
})

test_that("verify = FALSE reaches a server no CA vouches for, and warns once", {
  server <- local_redis_tls_server(cert = "untrusted")
  unverified <- tls_conditions({
    store <- tls_store(server$url, tls = list(verify = FALSE), prefix = "unverified")
    cb <- local_shared_breaker(store, "tls-unverified", fleet_args())
    wait_for_fleet(cb)
    cb2 <- local_shared_breaker(store, "tls-unverified-2", fleet_args())
    wait_for_fleet(cb2)
    cb$execute(function() "ok")
    cb$metrics()
  }, "circuit_breaker_tls_unverified")
  expect_length(unverified, 1)
  expect_s3_class(unverified[[1]], "warning")
  expect_match(cb$metrics()$tls, "^TLSv1\\.[23]$")
})

test_that("bad tls fields are classed errors naming the field, never the password", {
  skip_if_no_tls_client()
  readable <- withr::local_tempfile(lines = "not a certificate")
  missing <- file.path(tempdir(), "cb-no-such-dir", "ca.crt")
  url <- "rediss://:s3cret-pw@127.0.0.1:6390/0"
  cases <- list(
    list(tls = list(bogus = "x"), field = "tls$bogus"),
    list(tls = list(ca_file = missing), field = "tls$ca_file"),
    list(tls = list(ca_dir = dirname(missing)), field = "tls$ca_dir"),
    list(tls = list(verify = "yes"), field = "tls$verify"),
    list(tls = list(verify = NA), field = "tls$verify"),
    list(tls = list(server_name = 1), field = "tls$server_name"),
    list(tls = list(ca_file = c(readable, readable)), field = "tls$ca_file"),
    list(tls = list(cert_file = readable), field = "tls$key_file"),
    list(tls = list(key_file = readable), field = "tls$cert_file")
  )
  for (case in cases) {
    label <- paste(deparse(case$tls), collapse = "")
    err <- tryCatch(breaker_store_redis(url, tls = case$tls), error = identity)
    expect_s3_class(err, "circuit_breaker_invalid_argument")
    expect_match(conditionMessage(err), case$field, fixed = TRUE, label = label)
    expect_false(grepl("s3cret-pw", conditionMessage(err), fixed = TRUE), label = label)
  }
  err <- tryCatch(breaker_store_redis(url, tls = "yes"), error = identity)
  expect_s3_class(err, "circuit_breaker_invalid_argument")
  expect_match(conditionMessage(err), "`tls`", fixed = TRUE)
  expect_false(grepl("s3cret-pw", conditionMessage(err), fixed = TRUE))
})

test_that("rediss:// on a build without TLS says what to install", {
  skip_if_not(circuitbreaker:::cb_redis_available(), "this build has no hiredis")
  skip_if_not(exists("cb_redis_tls_available", envir = asNamespace("circuitbreaker"), inherits = FALSE),
              "a build from before TLS")
  skip_if(package_tls_available(), "this build has TLS")
  err <- tryCatch(breaker_store_redis("rediss://:s3cret-pw@127.0.0.1:6390/0"), error = identity)
  expect_s3_class(err, "circuit_breaker_store_unavailable")
  expect_match(conditionMessage(err), "libssl-dev", fixed = TRUE)
  expect_false(grepl("s3cret-pw", conditionMessage(err), fixed = TRUE))
})

test_that("URL query parameters configure TLS; an unknown one warns once, by name, and is ignored", {
  skip_if_no_tls()
  certs <- local_tls_certs()
  server <- local_redis_tls_server(certs = certs, password = "s3cret-pw")
  auth <- ":s3cret-pw@"
  texts <- character()
  # ssl_ca_certs gives ca_file.
  store <- tls_store(tls_url(server$port, auth, paste0("?ssl_ca_certs=", certs$ca)))
  cb <- local_shared_breaker(store, "query-ca", fleet_args())
  wait_for_fleet(cb)
  expect_match(cb$metrics()$tls, "^TLSv1\\.[23]$")
  texts <- c(texts, format(store), capture.output(print(store)), capture.output(print(cb)))

  # An unknown parameter: one warning, naming it (never its value); the
  # store works.
  ignored <- tls_conditions({
    odd <- tls_store(tls_url(server$port, auth, paste0("?ssl_ca_certs=", certs$ca, "&frobnicate=s3cret-pw")),
                     prefix = "query-odd")
    cb2 <- local_shared_breaker(odd, "query-odd", fleet_args())
    cb3 <- local_shared_breaker(odd, "query-odd-2", fleet_args())
    wait_for_fleet(cb2)
  }, "circuit_breaker_store_url_ignored")
  expect_length(ignored, 1)
  expect_s3_class(ignored[[1]], "warning")
  expect_match(conditionMessage(ignored[[1]]), "frobnicate", fixed = TRUE)
  texts <- c(texts, conditionMessage(ignored[[1]]), format(odd))

  # redis:// with ssl=true is TLS too; the tls argument's fields win over
  # the URL's (here a CA that would not do).
  on <- tls_store(sprintf("redis://%s127.0.0.1:%d/0?ssl=true&ssl_ca_certs=%s", auth, server$port, certs$ca))
  cb4 <- local_shared_breaker(on, "query-ssl", fleet_args())
  wait_for_fleet(cb4)
  expect_match(cb4$metrics()$tls, "^TLSv1\\.[23]$")
  over <- tls_store(tls_url(server$port, auth, paste0("?ssl_ca_certs=", certs$untrusted_ca)),
                    tls = list(ca_file = certs$ca))
  cb5 <- local_shared_breaker(over, "query-over", fleet_args())
  wait_for_fleet(cb5)

  # A refusal from the URL's CA: the warning and the last error hide the password.
  wrong <- tls_store(tls_url(server$port, auth, paste0("?ssl_ca_certs=", certs$untrusted_ca)))
  refused <- expect_refused(wrong, "query-wrong-ca", "unknown CA")
  texts <- c(texts, conditionMessage(refused$warning), refused$cb$metrics()$last_error, format(wrong),
             capture.output(print(wrong)), attr(breaker_store_redis_ping(wrong), "message"))
  expect_false(any(grepl("s3cret-pw", texts, fixed = TRUE)))
  expect_true(any(grepl("rediss://:***@127.0.0.1", texts, fixed = TRUE)))
})

test_that("ssl_cert_reqs=none in the URL is verify = FALSE", {
  server <- local_redis_tls_server(cert = "untrusted")
  unverified <- tls_conditions({
    store <- tls_store(tls_url(server$port, query = "?ssl_cert_reqs=none"), prefix = "reqs-none")
    cb <- local_shared_breaker(store, "reqs-none", fleet_args())
    wait_for_fleet(cb)
  }, "circuit_breaker_tls_unverified")
  expect_length(unverified, 1)
  # required (the default) checks it.
  strict <- tls_store(tls_url(server$port, query = "?ssl_cert_reqs=required"), tls = list(ca_file = server$certs$ca))
  expect_refused(strict, "reqs-required", "unknown CA")
})

# The ACL of a least-privilege user of the fleet store (default prefix
# "circuitbreaker"): the very line ?breaker_store_redis documents
# (redis_acl_setuser()), as words for redis-cli, less `except`'s commands.
# (Checked by hand with MONITOR: a single-server store sends CLUSTER SLOTS,
# SCRIPT LOAD, EVALSHA, PING, SUBSCRIBE, DEL; its scripts run DEL, GET,
# HGET, HMGET, HSET, PEXPIRE, PTTL, PUBLISH, SET, TIME.)
fleet_acl <- function(user, password, except = character()) {
  words <- strsplit(circuitbreaker:::redis_acl_setuser("circuitbreaker", user, password), " ", fixed = TRUE)[[1]]
  words[!words %in% paste0("+", except)]
}

test_that("a least-privilege ACL user runs the store over TLS; one without EVALSHA is told NOPERM", {
  server <- local_redis_tls_server()
  certs <- server$certs
  # The fleet breaker's bulkhead is a segment in this user's default store
  # directory: removed after, with the directory when it made it.
  local_default_store_directory()
  expect_identical(server$cli(fleet_acl("cbuser", "user-pw")), "OK")
  store <- tls_store(tls_url(server$port, "cbuser:user-pw@"), tls = list(ca_file = certs$ca))
  cb <- local_shared_breaker(store, "acl", fleet_args(failure_threshold = 2, recovery_timeout = 0.5,
                                                      max_concurrent = 2))
  wait_for_fleet(cb)
  for (i in 1:2) cb$execute(function() stop("down"), function(e) "fb")
  expect_true(wait_until(function() identical(server$fleet("acl", "s"), 1)))
  wait_for_probe_time(cb)
  expect_identical(cb$execute(function() "ok", function() "rejected"), "ok")
  expect_true(wait_until(function() identical(server$fleet("acl", "s"), 0)))
  # Manual control reaches the fleet (the script's writes and its PUBLISH).
  cb$force_open()
  expect_true(wait_until(function() !identical(server$fleet("acl", "s"), 0)))
  cb$reset()
  expect_true(wait_until(function() identical(server$fleet("acl", "s"), 0)))
  expect_true(breaker_store_redis_ping(store))
  expect_identical(cb$metrics()$mode, "fleet")
  expect_true(breaker_store_unlink("acl", store))
  # Nothing the store did was refused.
  expect_false(any(grepl("reason", server$cli("ACL", "LOG"), fixed = TRUE)))

  expect_identical(server$cli(fleet_acl("noscript", "user-pw", except = c("evalsha", "eval"))), "OK")
  denied <- tls_store(tls_url(server$port, "noscript:user-pw@"), tls = list(ca_file = certs$ca))
  refused <- expect_refused(denied, "acl-denied", "NOPERM")
  expect_match(refused$warning$reason, "evalsha|eval", ignore.case = TRUE)
  expect_false(grepl("user-pw", conditionMessage(refused$warning), fixed = TRUE))
})

test_that("a TLS server killed and restarted empty: the store reconnects and rebuilds the breaker", {
  server <- local_redis_tls_server()
  store <- tls_store(server$url, tls = list(ca_file = server$certs$ca))
  cb <- local_shared_breaker(store, "tls-restart", fleet_args(failure_threshold = 2))
  wait_for_fleet(cb)
  for (i in 1:2) cb$execute(function() stop("down"), function(e) "fb")
  expect_true(wait_until(function() identical(server$fleet("tls-restart", "s"), 1)))
  quietly_alone({
    server$kill()
    expect_true(wait_until(function() {
      cb$execute(function() "ok", function() "rejected")
      identical(cb$metrics()$mode, "local")
    }, timeout = 15))
    expect_identical(cb$execute(function() "ok", function() "rejected"), "rejected")
    server$start()
    wait_for_fleet(cb, timeout = 30)
  })
  # Rebuilt from this process's report: still open, in a new TLS session.
  expect_true(wait_until(function() identical(server$fleet("tls-restart", "s"), 1)))
  expect_identical(cb$state, "OPEN")
  expect_match(cb$metrics()$tls, "^TLSv1\\.[23]$")
})

test_that("the tests' TLS cluster and TLS sentinels start, and answer redis-cli --tls only", {
  certs <- local_tls_certs()
  cluster <- local_redis_tls_cluster(certs = certs, client = FALSE)
  ports <- cluster$nodes$port
  expect_identical(cluster$cli(ports[[1]], "SET", "tls-key", "v", cluster = TRUE), "OK")
  expect_identical(cluster$cli(cluster$master_of("tls-key"), "GET", "tls-key"), "v")
  expect_error(redis_cli(ports[[1]], "PING"), "reset|closed|Error", ignore.case = TRUE)
  # The cluster bus and the slot map are TLS: the map names the TLS ports.
  slots <- cluster$cli(ports[[1]], "CLUSTER", "SLOTS")
  expect_true(all(as.character(cluster$nodes$port[cluster$nodes$role == "master"]) %in% slots))

  sentinel <- local_redis_tls_sentinel(certs = certs, password = "master-pw", sentinel_password = "sentinel-pw",
                                       client = FALSE)
  expect_identical(sentinel$master_addr(sentinel$nodes$port[[3]]), paste0("127.0.0.1:", sentinel$master$port))
  expect_identical(sentinel$role(sentinel$replica$port), "replica")
  expect_error(redis_cli(sentinel$master$port, "PING", password = "master-pw"))
})

test_that("seed URLs of one cluster take the same TLS settings, or get an error naming url", {
  skip_if_no_tls_client()
  for (urls in list(c("rediss://127.0.0.1:7000/0", "redis://127.0.0.1:7001/0"),
                    c("rediss://127.0.0.1:7000/0?ssl_cert_reqs=none", "rediss://127.0.0.1:7001/0"))) {
    err <- tryCatch(breaker_store_redis(urls), error = identity)
    expect_s3_class(err, "circuit_breaker_invalid_argument")
    expect_identical(err$argument, "url")
  }
})

test_that("breakers over every master of a TLS Cluster sync; a master killed, its replica takes over", {
  cluster <- local_redis_tls_cluster()
  seeds <- paste0("rediss://", cluster$seeds[1:2], "/0")
  store <- tls_store(seeds, tls = list(ca_file = cluster$certs$ca))
  owners <- names_on_every_master(cluster, "tls-fo", per = 1L)
  cbs <- lapply(names(owners), function(n) local_shared_breaker(store, n, fleet_args(failure_threshold = 2)))
  names(cbs) <- names(owners)
  for (cb in cbs) wait_for_fleet(cb, timeout = 30)
  m <- cbs[[1]]$metrics()
  expect_identical(m$topology, "cluster")
  expect_identical(m$masters, 3)
  expect_match(m$tls, "^TLSv1\\.[23]$")
  # A trip on every master reaches the fleet.
  for (cb in cbs) for (i in 1:2) cb$execute(function() stop("down"), function(e) "fb")
  for (n in names(cbs)) expect_true(wait_until(function() identical(cluster_fleet(cluster, n, "s"), 1)))
  for (cb in cbs) cb$reset()
  for (n in names(cbs)) expect_true(wait_until(function() identical(cluster_fleet(cluster, n, "s"), 0)))

  victim <- names(owners)[[1]]
  old <- owners[[victim]]
  expect_identical(cluster$cli(old, "WAIT", 1, 5000), "1")
  cluster$kill(old)
  moved <- until_master_moves(cbs[[victim]], old, function() {
    max(vapply(cbs, function(cb) timed(cb$execute(function() "ok", function() "fb"))$seconds, 0))
  })
  expect_false(is.na(moved$promoted))
  expect_lt(moved$slowest, 10)  # a hang detector, not a timing
  # The promoted replica is reached over TLS too, and a trip there lands.
  for (i in 1:2) cbs[[victim]]$execute(function() stop("down"), function(e) "fb")
  expect_true(wait_until(function() identical(cluster_fleet(cluster, victim, "s"), 1), timeout = 20))
  expect_match(quietly_alone(cbs[[victim]]$metrics())$tls, "^TLSv1\\.[23]$")
})

test_that("a fleet breaker behind TLS sentinels joins, and follows a failover over TLS", {
  sentinel <- local_redis_tls_sentinel(password = "master-pw", sentinel_password = "sentinel-pw")
  store <- tls_store("rediss://:master-pw@mymaster/0", tls = list(ca_file = sentinel$certs$ca),
                     sentinel = sentinel$sentinel_addrs, master = sentinel$master_name,
                     sentinel_password = "sentinel-pw")
  cb <- local_shared_breaker(store, "tls-sentinel", fleet_args(recovery_timeout = 120))
  wait_for_fleet(cb, timeout = 30)
  m <- cb$metrics()
  expect_identical(m$topology, "sentinel")
  old <- sentinel$master$port
  expect_identical(m$master, paste0("127.0.0.1:", old))
  expect_match(m$tls, "^TLSv1\\.[23]$")
  shown <- c(format(store), capture.output(print(store)))
  expect_false(any(grepl("master-pw|sentinel-pw", shown)))

  for (i in 1:5) cb$execute(function() stop("down"), function(e) "fb")
  expect_true(wait_until(function() identical(cb$metrics()$fleet_failures, 5), what = "the trip to reach the master"))
  expect_identical(sentinel$cli(old, "WAIT", 1, 5000), "1")
  sentinel$kill(old)
  moved <- until_master_moves(cb, old, function() timed(cb$execute(function() "ok", function() "fb"))$seconds)
  expect_lt(moved$slowest, 10)  # a hang detector, not a timing
  expect_identical(moved$promoted, paste0("127.0.0.1:", sentinel$replica$port))
  expect_match(quietly_alone(cb$metrics())$tls, "^TLSv1\\.[23]$")
  expect_identical(cb$state, "OPEN")  # the fleet's state survived on the promoted replica
})
