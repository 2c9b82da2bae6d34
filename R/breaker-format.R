# How a breaker looks when printed, and as a data frame.

# `m` is the breaker's metrics, `store` its store (store.R), which says what
# it adds.
format_breaker <- function(m, config, store) {
  label <- if (is.na(m$name)) "<CircuitBreaker>" else paste0("<CircuitBreaker> ", m$name)
  shared <- store_label(store, m)
  if (!is.null(shared)) label <- paste0(label, " (", shared, ")")
  threshold <- if (is.infinite(config$failure_threshold)) "off" else format(config$failure_threshold)
  lines <- c(
    paste0(label, ": ", m$state),
    paste0("  failure_count: ", m$failure_count, " (opens at ", threshold, ")",
           "   recovery_timeout: ", format(config$recovery_timeout), " s"),
    paste0("  calls: ", m$calls, " (", m$successes, " ok, ", m$failures, " failed, ",
           m$slow_calls, " slow, ", m$ignored, " ignored)   rejected: ", m$rejected,
           "   opened: ", m$times_opened, " times")
  )
  if (!is.na(m$max_concurrent)) {
    lines <- c(lines, paste0("  bulkhead: ", m$in_flight, " of ", m$max_concurrent, " in flight",
                             if (inherits(config$max_concurrent, "circuit_breaker_share")) {
                               paste0(" (", format(config$max_concurrent), ")")
                             },
                             "   rejected full: ", m$rejected_full))
  }
  lines <- c(lines, store_format_lines(store, m))
  wait <- m$seconds_until_probe
  if (m$state %in% c("OPEN", "HALF_OPEN") && isTRUE(wait > 0)) {
    lines <- c(lines, paste0("  next probe in ", format(signif(wait, 3)), " s"))
  } else if (m$state == "HALF_OPEN" && is.na(wait)) {
    lines <- c(lines, "  probe in flight: the next call may go once it settles")
  }
  if (!is.na(m$last_health_check %||% NA)) {
    lines <- c(lines, paste0("  last health check: ", m$last_health_check, ", ",
                             format(signif(m$seconds_since_health_check, 3)), " s ago"))
  }
  if (!is.na(m$failure_rate)) {
    lines <- c(lines, paste0("  window: ", m$window_calls, " calls, failure rate ",
                             format(round(m$failure_rate, 3)), ", slow rate ",
                             format(round(m$slow_call_rate, 3))))
  }
  lines
}

#' A breaker's metrics as a one-row data frame
#'
#' @param x A [CircuitBreaker].
#' @param row.names,optional,... Ignored; for compatibility with the generic.
#' @return A data frame with one row and the columns of `x$metrics()`.
#' @export
# `row.names` is the generic's argument name.
as.data.frame.CircuitBreaker <- function(x, row.names = NULL, optional = FALSE, ...) { # nolint: object_name_linter.
  as.data.frame(x$metrics(), stringsAsFactors = FALSE)
}
