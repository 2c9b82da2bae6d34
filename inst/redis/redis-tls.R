# Certificates for a Redis over TLS of our own, for the package's tests and
# benchmarks only (not part of the package's API, and no function of its
# namespace). It is sourced like redis-server.R (tests: from the installed
# package, tests/testthat/helper-tls.R; benchmarks: from inst/redis/). It
# defines redis_tls_certs() and redis_tls_server_supported() and nothing else
# at the top level. It needs processx and the `openssl` command (OpenSSL 1.1.1
# or 3.x), and no faketime: the expired certificate is signed with
# `openssl ca -startdate -enddate`, which OpenSSL 3.0 has (`openssl x509
# -not_before` came only in 3.4).

# Makes, in `dir` (which must exist; the caller owns and removes it), with
# EC P-256 keys (quick to make):
# * `ca`, `ca_key`: a root CA (CN "circuitbreaker test CA");
# * `server_cert`, `server_key`: a server certificate for DNS localhost and
#   IP 127.0.0.1, signed by that CA (extended key usage serverAuth and
#   clientAuth, so that the nodes of a cluster or a replica can present it
#   to one another);
# * `other_cert`, `other_key`: the same for DNS other.example.test only;
# * `expired_cert`, `expired_key`: for localhost and 127.0.0.1, signed by
#   the CA, valid only in January 2020;
# * `client_cert`, `client_key`: a client certificate (CN cbclient,
#   clientAuth) signed by the CA, for mutual TLS;
# * `untrusted_ca`, `untrusted_ca_key`: a second root CA, which nobody is
#   told to trust, and `untrusted_cert`, `untrusted_key`: a server
#   certificate for localhost and 127.0.0.1 signed by it;
# * `bundle`: a CA file with two roots, the second CA first and then the
#   first, to show that every root of a multi-root file is loaded.
# Every certificate is valid for `days` days from now (the expired one
# aside). Keys are written mode 0600 (made under umask 077), certificates
# 0644. Returns the paths (normalised) in a list, with `dir`. An error,
# with openssl's own words, when a step fails (each is bounded by
# `timeout` seconds).
redis_tls_certs <- function(dir, days = 30L, timeout = 30) {
  stopifnot(dir.exists(dir), requireNamespace("processx", quietly = TRUE))
  openssl <- Sys.which("openssl")
  if (!nzchar(openssl)) stop("the openssl command is not installed")
  dir <- normalizePath(dir)
  old_umask <- Sys.umask("077")
  on.exit(Sys.umask(old_umask), add = TRUE)
  path <- function(name) file.path(dir, name)
  run <- function(...) {
    args <- as.character(c(...))
    res <- processx::run(openssl, args, error_on_status = FALSE, timeout = timeout, wd = dir)
    if (isTRUE(res$timeout) || res$status != 0L) {
      stop("openssl ", args[[1]], " failed", if (isTRUE(res$timeout)) paste0(" (no end within ", timeout, " s)"),
           ":\n", paste(utils::tail(strsplit(paste(res$stdout, res$stderr), "\n")[[1]], 10), collapse = "\n"))
    }
    invisible(res)
  }
  new_key <- c("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
  # The extensions of each kind of certificate, in one file.
  ext <- path("extensions.cnf")
  writeLines(c(
    "[server_localhost]",
    "basicConstraints = critical, CA:FALSE",
    "keyUsage = critical, digitalSignature, keyEncipherment",
    "extendedKeyUsage = serverAuth, clientAuth",
    "subjectAltName = DNS:localhost, IP:127.0.0.1",
    "subjectKeyIdentifier = hash",
    "authorityKeyIdentifier = keyid",
    "[server_other]",
    "basicConstraints = critical, CA:FALSE",
    "keyUsage = critical, digitalSignature, keyEncipherment",
    "extendedKeyUsage = serverAuth, clientAuth",
    "subjectAltName = DNS:other.example.test",
    "subjectKeyIdentifier = hash",
    "authorityKeyIdentifier = keyid",
    "[client]",
    "basicConstraints = critical, CA:FALSE",
    "keyUsage = critical, digitalSignature, keyEncipherment",
    "extendedKeyUsage = clientAuth",
    "subjectKeyIdentifier = hash",
    "authorityKeyIdentifier = keyid"
  ), ext)
  make_ca <- function(stem, cn) {
    run("req", "-x509", "-new", new_key, "-keyout", path(paste0(stem, ".key")), "-out", path(paste0(stem, ".crt")),
        "-days", as.integer(days) + 1L, "-sha256", "-subj", paste0("/CN=", cn),
        "-addext", "basicConstraints = critical, CA:TRUE",
        "-addext", "keyUsage = critical, keyCertSign, cRLSign",
        "-addext", "subjectKeyIdentifier = hash")
    c(cert = path(paste0(stem, ".crt")), key = path(paste0(stem, ".key")))
  }
  new_request <- function(stem, cn) {
    run("req", "-new", new_key, "-keyout", path(paste0(stem, ".key")), "-out", path(paste0(stem, ".csr")),
        "-subj", paste0("/CN=", cn))
    path(paste0(stem, ".csr"))
  }
  serial <- 4096L
  sign <- function(stem, cn, ca, section) {
    csr <- new_request(stem, cn)
    serial <<- serial + 1L
    run("x509", "-req", "-in", csr, "-CA", ca[["cert"]], "-CAkey", ca[["key"]], "-set_serial", serial,
        "-days", as.integer(days), "-sha256", "-extfile", ext, "-extensions", section,
        "-out", path(paste0(stem, ".crt")))
    unlink(csr)
    c(cert = path(paste0(stem, ".crt")), key = path(paste0(stem, ".key")))
  }
  # A certificate whose validity is entirely in the past: `openssl ca` takes
  # explicit dates, with a minimal configuration and its database.
  sign_expired <- function(stem, cn, ca) {
    csr <- new_request(stem, cn)
    db <- path("ca-db")
    dir.create(db, showWarnings = FALSE)
    file.create(file.path(db, "index.txt"))
    writeLines("2000", file.path(db, "serial"))
    conf <- path("ca.cnf")
    writeLines(c(
      "[ca]",
      "default_ca = cb_ca",
      "[cb_ca]",
      paste0("database = ", file.path(db, "index.txt")),
      paste0("new_certs_dir = ", db),
      paste0("serial = ", file.path(db, "serial")),
      "default_md = sha256",
      "policy = cb_policy",
      "unique_subject = no",
      "email_in_dn = no",
      "[cb_policy]",
      "commonName = supplied",
      readLines(ext)
    ), conf)
    run("ca", "-batch", "-config", conf, "-cert", ca[["cert"]], "-keyfile", ca[["key"]], "-in", csr,
        "-out", path(paste0(stem, ".crt")), "-startdate", "20200101000000Z", "-enddate", "20200131000000Z",
        "-extensions", "server_localhost", "-notext")
    unlink(c(csr, conf, db), recursive = TRUE)
    c(cert = path(paste0(stem, ".crt")), key = path(paste0(stem, ".key")))
  }

  ca <- make_ca("ca", "circuitbreaker test CA")
  server <- sign("server", "localhost", ca, "server_localhost")
  other <- sign("other", "other.example.test", ca, "server_other")
  expired <- sign_expired("expired", "localhost", ca)
  client <- sign("client", "cbclient", ca, "client")
  untrusted_ca <- make_ca("untrusted-ca", "circuitbreaker untrusted CA")
  untrusted <- sign("untrusted", "localhost", untrusted_ca, "server_localhost")
  bundle <- path("ca-bundle.crt")
  writeLines(c(readLines(untrusted_ca[["cert"]]), readLines(ca[["cert"]])), bundle)
  unlink(ext)

  certs <- list(dir = dir, ca = ca[["cert"]], ca_key = ca[["key"]],
                server_cert = server[["cert"]], server_key = server[["key"]],
                other_cert = other[["cert"]], other_key = other[["key"]],
                expired_cert = expired[["cert"]], expired_key = expired[["key"]],
                client_cert = client[["cert"]], client_key = client[["key"]],
                untrusted_ca = untrusted_ca[["cert"]], untrusted_ca_key = untrusted_ca[["key"]],
                untrusted_cert = untrusted[["cert"]], untrusted_key = untrusted[["key"]],
                bundle = bundle)
  keys <- unlist(certs[grepl("_key$", names(certs))])
  Sys.chmod(keys, "0600", use_umask = FALSE)
  Sys.chmod(setdiff(unlist(certs[-1]), keys), "0644", use_umask = FALSE)
  certs
}

# Whether this redis-server speaks TLS: a build without it refuses the
# directive `tls-port` ("Bad directive"); one with it, given no port at all,
# says it is "configured to not listen anywhere" and exits at once.
redis_tls_server_supported <- function() {
  server <- Sys.which("redis-server")
  if (!nzchar(server) || !requireNamespace("processx", quietly = TRUE)) return(FALSE)
  res <- tryCatch(
    processx::run(server, c("--port", "0", "--tls-port", "0", "--save", "", "--appendonly", "no"),
                  error_on_status = FALSE, timeout = 10, stderr_to_stdout = TRUE),
    error = function(e) NULL
  )
  !is.null(res) && !isTRUE(res$timeout) && grepl("not listen anywhere", res$stdout, fixed = TRUE) &&
    !grepl("Bad directive", res$stdout, fixed = TRUE)
}
