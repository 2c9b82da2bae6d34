# What the web-framework integrations answer, whatever the framework: the
# status object of a breaker, the 503 for a rejected call, the control
# actions and their 403/404 rules, and the checks of `path` and `authorize`.
# plumber (R/plumber.R) and plumber2 (R/plumber2.R) only translate these
# answers into their own request and response objects, so that both APIs
# say the same thing in the same words.

# The fields of every breaker's metrics that the status endpoints show; a
# store adds its own (store_status_fields(), store.R).
web_status_fields <- c(
  "name", "store", "state", "seconds_in_state", "calls", "successes", "failures", "slow_calls",
  "ignored", "rejected", "released", "failure_count", "times_opened", "window_calls",
  "failure_rate", "slow_call_rate", "open_duration", "seconds_until_probe",
  "in_flight", "max_concurrent", "rejected_full"
)

# One breaker's status object, from its metrics (a list or a row of
# breaker_list()): times as ISO 8601 in UTC, non-finite numbers as NA (JSON
# null). `kinds` are the stores whose fields it shows: its own, or those of
# every breaker listed with it (breaker_list() gives each row the fields of
# every store in the list).
web_status <- function(m, kinds = m[["store"]]) {
  fields <- c(web_status_fields, store_fields_of_kinds(kinds, store_status_fields))
  out <- m[intersect(fields, names(m))]
  lapply(out, function(x) {
    x <- x[[1]]
    if (inherits(x, "POSIXct")) return(if (is.na(x)) NA_character_ else format(x, "%Y-%m-%dT%H:%M:%OS3Z", tz = "UTC"))
    if (is.numeric(x) && !is.finite(x)) NA_real_ else x
  })
}

# The status objects of every registered breaker, for GET {path}.
web_statuses <- function() {
  df <- breaker_list()
  lapply(seq_len(nrow(df)), function(i) web_status(as.list(df[i, , drop = FALSE]), kinds = df$store))
}

# A circuit_breaker_rejected condition (open, or a full bulkhead): `err`
# itself or one of its parents.
web_find_open <- function(err) {
  for (i in 1:20) {
    if (inherits(err, "circuit_breaker_rejected")) return(err)
    err <- if (inherits(err, "condition")) err[["parent"]] else NULL
    if (is.null(err)) return(NULL)
  }
  NULL
}

# The 503 answer to a call the breaker rejected (`open`, a
# circuit_breaker_rejected condition): the Retry-After header's value (the
# seconds until a probe, rounded up, at least 1; NULL when unknown or forced
# open; 1 for a full bulkhead, whose permits may free at any moment) and the
# body.
web_rejection <- function(open) {
  retry_after <- open$retry_after
  known <- is.numeric(retry_after) && length(retry_after) == 1L && is.finite(retry_after)
  list(
    status = 503L,
    retry_after = if (known) format(max(1, ceiling(retry_after)), scientific = FALSE),
    body = list(
      error = "503 - Service Unavailable",
      breaker = if (is.character(open$breaker) && length(open$breaker) == 1L) open$breaker else NA_character_,
      state = if (is.character(open$state) && length(open$state) == 1L) open$state else NA_character_,
      retry_after = if (known) round(retry_after, 3) else NA_real_
    )
  )
}

# The control actions, by the last segment of their path.
web_control_actions <- list(
  reset = function(b) b$reset(),
  `force-open` = function(b) b$force_open(),
  disable = function(b) b$disable()
)

# The answer to POST {path}/{name}/{action}, once `authorize` has said
# whether the caller may: 403 unless `authorized` is TRUE, 404 for an
# unknown breaker, else the action is done and the answer is the breaker's
# new status. `name` is the raw path segment. `no_store` says whether the
# answer gets `Cache-Control: no-store` (the refusals do not: nothing about
# a breaker is in them).
web_control <- function(action, name, authorized) {
  if (!isTRUE(authorized)) {
    return(list(status = 403L, no_store = FALSE, body = list(error = "403 - Forbidden")))
  }
  name <- web_path_name(name)
  breaker <- if (!is.null(name)) breaker_get(name)
  if (is.null(breaker)) {
    return(list(status = 404L, no_store = FALSE,
                body = list(error = "404 - Circuit breaker not found", breaker = name %||% NA_character_)))
  }
  web_control_actions[[action]](breaker)
  list(status = 200L, no_store = TRUE, body = web_status(breaker$metrics()))
}

# The breaker name from the path, strictly percent-decoded by the core
# (cb_path_name()), or NULL when it cannot be a name: a malformed escape
# ("%G1", a lone "%"), a NUL byte anywhere in the decoded form ("%00",
# "plain%00", which must not reach "plain"), or bytes that are not UTF-8.
web_path_name <- function(x) {
  if (!is.character(x) || length(x) != 1L || is.na(x) || !nzchar(x)) return(NULL)
  x <- cb_path_name(x)
  if (is.null(x) || !validUTF8(x) || !nzchar(x)) return(NULL)
  x
}

# `path` must be a fixed path both routers take literally: no parameters
# (plumber's `<name>`, routr's `:name`) and no wildcards.
web_check_path <- function(path, call = rlang::caller_env()) {
  if (!is.character(path) || length(path) != 1L || is.na(path) ||
      !grepl("^(/[A-Za-z0-9._~-]+)+$", path)) {
    must <- paste("a URL path such as \"/circuit-breakers\"",
                  "(segments of letters, digits, `.`, `_`, `~` and `-`; no trailing `/`)")
    abort_bad_argument("path", must, path, call = call)
  }
  path
}

web_check_authorize <- function(authorize, call = rlang::caller_env()) {
  if (!is.null(authorize) && !is.function(authorize)) {
    abort_bad_argument("authorize", "`NULL` or a function of the request returning `TRUE` or `FALSE`",
                       authorize, call = call)
  }
  authorize
}
