#' @include checks.R conditions.R store.R
NULL

# The `tls` argument of breaker_store_redis() (store-redis.R): its checks,
# how it completes what the URL says (rediss://, the query parameters the
# core reads), and the warnings a store gives once about its URL and TLS.
#
# Every setting is checked here, when the store is made, so that a typo is
# an error that names the field rather than a store that later warns that
# it is alone. The core takes the merged settings as they are
# (fleet_store_spec()$tls) and type-checks them only.
#
# A setting's value is never echoed when it may be a secret: a name that is
# not a setting may hold anything (`tls = list(password = ...)`), and a
# string that looks like PEM text is a certificate or a key pasted where its
# path belongs.

# The settings, in the order the core takes them, each with the query
# parameter of a URL that may give it (the core knows synonyms too; this
# one is named in the messages about a value that came from the URL).
redis_tls_query_names <- c(ca_file = "ssl_ca_certs", ca_dir = "ssl_ca_path", cert_file = "ssl_certfile",
                           key_file = "ssl_keyfile", server_name = "sni", verify = "ssl_cert_reqs")

# The store's TLS settings: NULL when TLS is off (a redis:// URL and no
# `tls`), else list(ca_file, ca_dir, cert_file, key_file, server_name,
# verify) with "" for an unset string: `parsed$tls` (what the core read from
# the URL, cb_redis_parse_url()) with the fields of `tls` over it, checked.
redis_tls_settings <- function(tls, parsed, call) {
  check_tls_list(tls, call)
  from_url <- parsed$tls
  if (!isTRUE(from_url$enabled) && is.null(tls)) return(NULL)
  settings <- list(ca_file = "", ca_dir = "", cert_file = "", key_file = "", server_name = "", verify = TRUE)
  origin <- stats::setNames(rep("unset", length(settings)), names(settings))
  for (field in names(settings)) {
    value <- from_url[[field]]
    if (identical(field, "verify") && isFALSE(value) ||
        !identical(field, "verify") && rlang::is_string(value) && nzchar(value)) {
      settings[[field]] <- value
      origin[[field]] <- "url"
    }
  }
  for (field in names(tls)) {
    settings[[field]] <- check_tls_value(field, tls[[field]], call)
    origin[[field]] <- "tls"
  }
  for (field in c("ca_file", "cert_file", "key_file", "ca_dir")) {
    if (nzchar(settings[[field]])) {
      settings[[field]] <- check_tls_path(field, settings[[field]], origin[[field]], call)
    }
  }
  check_tls_pair(settings, origin, call)
  settings
}

# The URL's TLS settings when TLS is off (a redis:// URL whose query gives
# some, say ssl_ca_certs, without ssl=true): the query parameters that the
# store ignores, for the warning about them.
redis_tls_ignored <- function(parsed) {
  from_url <- parsed$tls
  if (is.null(from_url) || isTRUE(from_url$enabled)) return(character())
  set <- vapply(names(redis_tls_query_names), function(field) {
    value <- from_url[[field]]
    if (identical(field, "verify")) isFALSE(value) else rlang::is_string(value) && nzchar(value)
  }, logical(1))
  unname(redis_tls_query_names[set])
}

check_tls_list <- function(tls, call) {
  if (is.null(tls)) return(invisible())
  fields <- names(tls)
  named <- length(tls) == 0L || (!is.null(fields) && !anyNA(fields) && all(nzchar(fields)))
  if (!is.list(tls) || is.object(tls) || !named) {
    abort_tls(
      "tls",
      paste("`NULL` or a named list of TLS settings (`ca_file`, `ca_dir`, `cert_file`, `key_file`,",
            "`server_name`, `verify`)"),
      tls, call = call
    )
  }
  twice <- fields[duplicated(fields)]
  if (length(twice)) {
    cli::cli_abort(
      "Each setting of {.arg tls} must be given once; {.arg {paste0('tls$', cut_text(twice[[1]]))}} is given twice.",
      class = c("circuit_breaker_invalid_argument", "circuit_breaker_error"),
      argument = paste0("tls$", twice[[1]]), call = call
    )
  }
  unknown <- setdiff(fields, names(redis_tls_query_names))
  if (length(unknown)) {
    # Its value is not shown: an unknown name may hold anything.
    cli::cli_abort(
      c("Each name of {.arg tls} must be a TLS setting; {.arg {paste0('tls$', cut_text(unknown[[1]]))}} is not.",
        i = "The settings are {.code {names(redis_tls_query_names)}}."),
      class = c("circuit_breaker_invalid_argument", "circuit_breaker_error"),
      argument = paste0("tls$", unknown[[1]]), call = call
    )
  }
  invisible()
}

# One field of `tls`, of the right type (files are checked after the merge).
check_tls_value <- function(field, value, call) {
  arg <- paste0("tls$", field)
  if (identical(field, "verify")) {
    if (!isTRUE(value) && !isFALSE(value)) abort_tls(arg, "`TRUE` or `FALSE`", value, call = call)
    return(value)
  }
  if (!rlang::is_string(value) || !nzchar(value)) {
    what <- if (identical(field, "server_name")) "the server's host name" else "the path of a file"
    if (identical(field, "ca_dir")) what <- "the path of a directory"
    abort_tls(arg, paste0("a single non-empty string (", what, ")"), value, call = call)
  }
  # A name as certificates hold it (DNS labels, or an IP address), so that a
  # typo is caught here and not as a name mismatch at every handshake.
  if (identical(field, "server_name") &&
        (nchar(value, type = "bytes") > 253L || !grepl("^[A-Za-z0-9._:-]+$", value))) {
    abort_tls(arg, "a host name (letters, digits, `.`, `-` and `_`) or an IP address, of at most 253 characters",
              value, call = call)
  }
  value
}

# A path setting after the merge: a file (or, for ca_dir, a directory) this
# process can read, `~` expanded (OpenSSL does not expand it).
check_tls_path <- function(field, path, origin, call) {
  path <- path.expand(path)
  dir <- identical(field, "ca_dir")
  why <- if (!file.exists(path)) {
    "There is nothing at that path."
  } else if (dir && !dir.exists(path)) {
    "It is a file, not a directory."
  } else if (!dir && dir.exists(path)) {
    "It is a directory, not a file."
  } else if (file.access(path, 4L) != 0L) {
    "This process may not read it."
  }
  if (!is.null(why)) {
    abort_tls(paste0("tls$", field), if (dir) "a readable directory" else "a readable file", path,
              why = why, origin = origin, call = call)
  }
  path
}

# A client certificate and its key come together (mutual TLS).
check_tls_pair <- function(settings, origin, call) {
  has_cert <- nzchar(settings$cert_file)
  if (has_cert == nzchar(settings$key_file)) return(invisible())
  given <- if (has_cert) "cert_file" else "key_file"
  missing <- if (has_cert) "key_file" else "cert_file"
  cli::cli_abort(
    c("{.arg {paste0('tls$', missing)}} must be given with {.arg {paste0('tls$', given)}}.",
      i = "A client certificate (mutual TLS) needs its private key, and a key its certificate.",
      i = if (identical(origin[[given]], "url")) {
        "{.arg {paste0('tls$', given)}} comes from the URL's query ({.code {redis_tls_query_names[[given]]}})."
      }),
    class = c("circuit_breaker_invalid_argument", "circuit_breaker_error"),
    argument = paste0("tls$", missing), call = call
  )
}

# abort_bad_argument() for a TLS setting, but the value is described
# without its content when it may be a certificate or a key (PEM text), and
# the condition keeps no `value`.
abort_tls <- function(arg, must, value, why = NULL, origin = "tls", call = NULL) {
  from_url <- if (identical(origin, "url")) redis_tls_query_names[[sub("^tls[$]", "", arg)]]
  cli::cli_abort(
    c("{.arg {arg}} must be {must}, not {describe_tls_value(value)}.",
      x = why,
      i = if (!is.null(from_url)) paste0("It comes from the URL's query (`", from_url, "`)."),
      i = if (looks_like_pem(value)) "Give the path of a PEM file, not its content."),
    class = c("circuit_breaker_invalid_argument", "circuit_breaker_error"),
    argument = arg,
    call = call
  )
}

describe_tls_value <- function(x) {
  if (looks_like_pem(x)) "PEM text (a certificate or a key)" else describe_value(x)
}

looks_like_pem <- function(x) rlang::is_string(x) && grepl("-----BEGIN|[\r\n]", x)

# The warnings a store gives once per R session (per store: the hash of its
# connection details, which hold the password; the hash does not):
# query parameters of its URL that it ignores (the core's
# `query_unknown`, and TLS settings of a plain URL), and a TLS store that
# does not verify the server.
redis_url_warnings <- function(store, parsed) {
  said <- the$redis_url_said %||% (the$redis_url_said <- new.env(parent = emptyenv()))
  key <- rlang::hash(fleet_store_spec(store))
  if (isTRUE(said[[key]])) return(invisible())
  said[[key]] <- TRUE
  unknown <- as.character(parsed$query_unknown %||% character())
  plain <- redis_tls_ignored(parsed)
  if (length(unknown) || length(plain)) warning(url_ignored_warning(store, unknown, plain))
  if (!is.null(store$tls) && isFALSE(store$tls$verify)) warning(tls_unverified_warning(store))
  invisible()
}

# Names only, never values (a value may be a secret); escaped and cut, since
# they are the user's text.
url_ignored_warning <- function(store, unknown, plain) {
  quote <- function(x) paste0("`", encodeString(cut_text(x, 40L)), "`", collapse = ", ")
  structure(
    class = c("circuit_breaker_store_url_ignored", "circuit_breaker_warning", "warning", "condition"),
    list(
      message = paste0(
        "The fleet store ", store$url, " (prefix \"", store$prefix, "\") ignores ",
        if (length(unknown)) {
          paste0("the URL's query ", if (length(unknown) == 1L) "parameter " else "parameters ", quote(unknown),
                 ", which it does not know",
                 " (it knows ssl_cert_reqs, ssl_ca_certs, ssl_ca_path, ssl_certfile, ssl_keyfile, sni,",
                 " ssl_server_hostname, ssl and tls)")
        },
        if (length(unknown) && length(plain)) ", and ",
        if (length(plain)) {
          paste0("the TLS ", if (length(plain) == 1L) "setting " else "settings ", quote(plain),
                 " of a plain redis:// URL (use rediss:// for TLS)")
        },
        "."
      ),
      call = NULL,
      url = store$url,
      prefix = store$prefix,
      parameters = c(unknown, plain)
    )
  )
}

tls_unverified_warning <- function(store) {
  structure(
    class = c("circuit_breaker_tls_unverified", "circuit_breaker_warning", "warning", "condition"),
    list(
      message = paste0(
        "The fleet store ", store$url, " (prefix \"", store$prefix, "\") does not verify the server's ",
        "certificate (`tls$verify` is FALSE, or the URL says ssl_cert_reqs=none): its links are encrypted, ",
        "but whoever can intercept them can pose as the server, learn the password and decide the fleet's ",
        "breakers.\nGive the server's CA instead: `tls = list(ca_file = \"ca.pem\")`."
      ),
      call = NULL,
      url = store$url,
      prefix = store$prefix
    )
  )
}

abort_redis_tls_unavailable <- function(call = NULL) {
  abort_store(
    "unavailable",
    c(paste("A fleet store over TLS (a {.code rediss://} URL, or {.arg tls}) needs OpenSSL,",
            "which this installation of circuitbreaker was built without."),
      i = paste("Install it (Debian/Ubuntu: {.code apt-get install libssl-dev};",
                "Fedora: {.code dnf install openssl-devel}; macOS: {.code brew install openssl@3}),",
                "then install circuitbreaker again.")),
    call = call
  )
}
