# What HTTP clients return and raise, as outcomes for the breaker.
#
# A response with a failing status (by default 408, 429 and 5xx) is a
# failure; any other status means the downstream answered and is healthy
# (a 404 is the caller's problem, not the service's). Errors are failures,
# except HTTP errors raised for a non-failing status (httr2's
# `httr2_http_404`, httr's `http_404` from stop_for_status()): those propagate
# and count nowhere. Transport errors (refused, timed out, reset, DNS) from
# curl, httr or httr2 are failures, whatever their class: unclassed in curl <
# 6, `curl_error_*` in curl >= 6, `httr2_failed` (httr2 < 1.0) or
# `httr2_failure` (httr2 >= 1.0).

# The status code of a response from httr, httr2 or curl::curl_fetch_*(),
# or NULL when `x` is not one of those.
response_status <- function(x) {
  if (inherits(x, "response") || inherits(x, "httr2_response")) {
    return(as.integer(x$status_code))
  }
  if (is.list(x) && !is.object(x) && is.numeric(x[["status_code"]]) &&
      is.raw(x[["content"]]) && is.character(x[["url"]])) {
    return(as.integer(x$status_code))  # the list from curl's curl_fetch_memory
  }
  NULL
}

# The value of a response header, or NULL.
response_header <- function(x, name) {
  name <- tolower(name)
  headers <- if (inherits(x, "httr2_response")) {
    x$headers
  } else if (inherits(x, "response")) {
    x$headers
  } else if (is.raw(x[["headers"]])) {
    curl::parse_headers_list(x$headers)
  } else {
    NULL
  }
  if (is.null(headers) || length(headers) == 0L) return(NULL)
  hit <- which(tolower(names(headers)) == name)
  if (length(hit) == 0L) NULL else as.character(headers[[hit[[1]]]])
}

# Seconds to wait from a Retry-After header: delay-seconds or an HTTP-date.
retry_after_seconds <- function(value, now = Sys.time()) {
  if (is.null(value) || length(value) != 1L || is.na(value)) return(NULL)
  value <- trimws(value)
  if (grepl("^[0-9]+$", value)) return(as.numeric(value))
  when <- suppressWarnings(as.POSIXct(strptime(value, "%a, %d %b %Y %H:%M:%S", tz = "GMT")))
  if (is.na(when)) return(NULL)
  max(0, as.numeric(difftime(when, now, units = "secs")))
}

# The status of an HTTP error condition (httr2_http_*, httr's http_*), or NULL.
http_error_status <- function(cond) {
  # Cheap test first: this runs for every failed call.
  if (!inherits(cond, c("httr2_http", "http_error"))) return(NULL)
  if (inherits(cond, "httr2_http")) {
    status <- cond$resp$status_code
    if (is.numeric(status)) return(as.integer(status))
  }
  cls <- grep("^(httr2_)?http_[0-9]{3}$", class(cond), value = TRUE)
  if (length(cls)) as.integer(sub("^.*_", "", cls[[1]])) else NULL
}

http_failure_condition <- function(response, status, name, open_for) {
  structure(
    class = c("circuit_breaker_http_failure", "circuit_breaker_failed_value", "error", "condition"),
    list(
      message = paste0("HTTP ", status, ": the response counts as a failure."),
      call = NULL,
      value = response,
      response = response,
      status = status,
      breaker = name,
      open_for = open_for
    )
  )
}
