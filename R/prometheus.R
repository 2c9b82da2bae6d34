#' Circuit breaker metrics in the Prometheus text format
#'
#' `breaker_prometheus()` describes breakers in the Prometheus text exposition
#' format (version 0.0.4), ready to be served to a Prometheus scraper, for
#' example by the `GET /circuit-breakers/metrics` endpoint that
#' [pr_circuit_breakers()] adds to a plumber API. Serve it with the content
#' type `text/plain; version=0.0.4; charset=utf-8`.
#'
#' Every sample has a `breaker` label: the breaker's name, escaped as the
#' format requires (backslash, double quote and newline). Unnamed breakers,
#' which can only be passed explicitly, are labelled `unnamed-1`,
#' `unnamed-2`, ... in the order given.
#'
#' Gauges:
#' * `circuitbreaker_info{breaker, store}`: always 1; `store` is `"process"`,
#'   `"host"` (a breaker shared by the host's processes,
#'   [breaker_store_host()]) or `"redis"` (shared by a fleet,
#'   [breaker_store_redis()]). Every worker of a host reports a host-shared
#'   breaker's host-wide counts, so aggregate its series across the workers
#'   of one host with `max()`, not `sum()`. A fleet breaker's counts are the
#'   process's own (sum them); its state is the fleet's.
#' * For fleet breakers only (these families appear when there is one):
#'   `circuitbreaker_fleet_mode{breaker, mode}` (1
#'   for the current mode, `fleet` or `local`),
#'   `circuitbreaker_fleet_sync_lag_seconds` (since the last good sync),
#'   `circuitbreaker_fleet_last_sync_timestamp_seconds` and
#'   `circuitbreaker_fleet_tls{breaker, version}` (1, with the TLS version
#'   of the store's links: `TLSv1.3`, `TLSv1.2`, `on` before the first
#'   handshake, or `off` for a plain store).
#' * `circuitbreaker_state{breaker, state}`: 1 for the current state, 0 for
#'   the four others (`CLOSED`, `OPEN`, `HALF_OPEN`, `FORCED_OPEN`,
#'   `DISABLED`), so that every state always has a series.
#' * `circuitbreaker_failure_rate`, `circuitbreaker_slow_call_rate`: shares
#'   (0 to 1) of failed and slow calls in the sliding window. While the window
#'   is empty they are `NaN` (0/0, as PromQL itself would compute it) rather
#'   than absent, since series that come and go are hard to alert on; a
#'   comparison such as `circuitbreaker_failure_rate > 0.5` is false for
#'   `NaN`.
#' * `circuitbreaker_window_calls`: calls in the sliding window.
#' * `circuitbreaker_seconds_until_probe`: seconds until an open breaker lets
#'   a probe through; 0 when calls are admitted, `+Inf` when forced open.
#' * `circuitbreaker_consecutive_failures`: the breaker's `failure_count`
#'   (consecutive failures). It is not called `circuitbreaker_failure_count`
#'   because the `_count` suffix is reserved for histograms and summaries
#'   (`promtool check metrics` rejects it on a gauge).
#' * `circuitbreaker_in_flight`: bulkhead permits held now (calls in flight
#'   through a breaker with `max_concurrent`; 0 without one).
#' * `circuitbreaker_max_concurrent`: the bulkhead's limit in effect (a
#'   `share()` resolved to permits); `+Inf` without a bulkhead.
#'
#' Counters (cumulative since the breaker was created; `$reset()` does not
#' zero them):
#' * `circuitbreaker_calls_total{breaker, outcome}`: calls by outcome:
#'   `success`, `failure` (the calls that were made and recorded), `ignored`
#'   (errors of a class in `ignore`, count nowhere), `rejected` (not made
#'   because the breaker was open), `full` (not made because every bulkhead
#'   permit was held) and `released` (interrupted before they settled).
#' * `circuitbreaker_slow_calls_total`: calls slower than
#'   `slow_call_duration`.
#' * `circuitbreaker_opened_total`: times the breaker opened.
#' * `circuitbreaker_health_checks_total{breaker, result}`: health checks by
#'   result (`passed`: it closed the breaker, `failed`, `late`: the breaker
#'   had left that open period); for a host-shared breaker, the host's.
#'
#' @param breakers `NULL` for every registered breaker (see [breaker_list()]),
#'   a [CircuitBreaker], or a list of them.
#' @return A single string: the exposition text, one line per sample, ending
#'   with a newline. With no breakers, only the `# HELP` and `# TYPE` lines.
#' @seealso [pr_circuit_breakers()] serves it from a plumber API.
#' @examples
#' api <- circuit_breaker(failure_threshold = 2, name = "inventory")
#' api$execute(function() stop("refused"), function() NULL)
#' cat(breaker_prometheus(list(api, circuit_breaker())))
#' breaker_remove("inventory")
#' @export
breaker_prometheus <- function(breakers = NULL) {
  rows <- prom_rows(breakers, call = rlang::current_env())
  labels <- vapply(rows, function(r) r$label, character(1))
  lines <- character()
  kinds <- vapply(rows, function(r) r$metrics$store %||% process_store$kind, character(1))
  # The families of a store (store_prometheus_families(), store.R) appear
  # only when a breaker of that store does, and list its breakers only.
  families <- prom_families
  for (store in stores_of_kinds(kinds)) {
    families <- c(families, lapply(store_prometheus_families(store), function(f) c(f, list(kind = store$kind))))
  }
  for (family in families) {
    lines <- c(lines,
      paste0("# HELP ", family$name, " ", prom_escape_help(family$help)),
      paste0("# TYPE ", family$name, " ", family$type))
    for (i in seq_along(rows)) {
      if (!is.null(family$kind) && !identical(kinds[[i]], family$kind)) next
      m <- rows[[i]]$metrics
      samples <- family$samples(m)
      if (length(samples) == 0L) next
      extra <- if (is.null(names(samples))) {
        ""
      } else {
        paste0(",", family$label, "=\"", names(samples), "\"")
      }
      lines <- c(lines, paste0(family$name, "{breaker=\"", labels[[i]], "\"", extra, "} ",
                               prom_number(unname(samples))))
    }
  }
  paste0(paste(lines, collapse = "\n"), "\n")
}

# The content type of the text exposition format served by breaker_prometheus().
prometheus_content_type <- "text/plain; version=0.0.4; charset=utf-8"

breaker_states <- c("CLOSED", "OPEN", "HALF_OPEN", "FORCED_OPEN", "DISABLED")

# One entry per metric family of every breaker: name, type, help, and a
# function of a breaker's metrics returning its sample values (named by the
# value of `label` when the family has a second label). A store adds the
# families of its own breakers (store_prometheus_families(), store.R).
prom_families <- list(
  list(name = "circuitbreaker_info", type = "gauge",
       help = paste("Where the breaker's state lives: store=\"process\" (this process), \"host\"",
                    "(shared by the host's processes, which all report the same host-wide counts)",
                    "or \"redis\" (shared by a fleet through Redis)."),
       label = "store",
       samples = function(m) stats::setNames(1, m$store %||% process_store$kind)),
  list(name = "circuitbreaker_state", type = "gauge",
       help = "Current state of the circuit breaker: 1 for the current state, 0 for the others.",
       label = "state",
       samples = function(m) stats::setNames(as.numeric(breaker_states == m$state), breaker_states)),
  list(name = "circuitbreaker_failure_rate", type = "gauge",
       help = "Share of failed calls among the calls in the sliding window (NaN while it is empty).",
       samples = function(m) prom_field(m, "failure_rate")),
  list(name = "circuitbreaker_slow_call_rate", type = "gauge",
       help = "Share of slow calls among the calls in the sliding window (NaN while it is empty).",
       samples = function(m) prom_field(m, "slow_call_rate")),
  list(name = "circuitbreaker_window_calls", type = "gauge",
       help = "Calls in the sliding window.",
       samples = function(m) prom_field(m, "window_calls")),
  list(name = "circuitbreaker_seconds_until_probe", type = "gauge",
       help = "Seconds until the open breaker admits a probe (0 when calls are admitted, +Inf when forced open).",
       samples = function(m) prom_field(m, "seconds_until_probe")),
  list(name = "circuitbreaker_consecutive_failures", type = "gauge",
       help = "Consecutive failures (the breaker's failure_count).",
       samples = function(m) prom_field(m, "failure_count")),
  list(name = "circuitbreaker_in_flight", type = "gauge",
       help = "Bulkhead permits held now (calls in flight; 0 without max_concurrent).",
       samples = function(m) prom_field(m, "in_flight", 0)),
  list(name = "circuitbreaker_max_concurrent", type = "gauge",
       help = "The bulkhead's limit of calls in flight (+Inf without max_concurrent).",
       samples = function(m) prom_field(m, "max_concurrent", Inf)),
  list(name = "circuitbreaker_calls_total", type = "counter",
       help = "Calls through the breaker by outcome (success, failure, ignored, rejected, full, released).",
       label = "outcome",
       samples = function(m) {
         c(success = prom_field(m, "successes"), failure = prom_field(m, "failures"),
           ignored = prom_field(m, "ignored"), rejected = prom_field(m, "rejected"),
           full = prom_field(m, "rejected_full", 0), released = prom_field(m, "released"))
       }),
  list(name = "circuitbreaker_slow_calls_total", type = "counter",
       help = "Calls slower than slow_call_duration.",
       samples = function(m) prom_field(m, "slow_calls")),
  list(name = "circuitbreaker_opened_total", type = "counter",
       help = "Times the breaker opened.",
       samples = function(m) prom_field(m, "times_opened")),
  list(name = "circuitbreaker_health_checks_total", type = "counter",
       help = "Health checks of the open breaker by result (passed: it closed the breaker, failed, late).",
       label = "result",
       samples = function(m) {
         c(passed = prom_field(m, "health_checks_passed"), failed = prom_field(m, "health_checks_failed"),
           late = prom_field(m, "health_checks_late"))
       })
)

# A metric as a plain number (`missing`, NaN by default, when it is missing
# or NA).
prom_field <- function(m, field, missing = NaN) {
  x <- m[[field]]
  if (is.null(x) || length(x) != 1L || is.na(x)) missing else as.numeric(x)
}

# Sample values as the format writes them: Go's float syntax, with NaN,
# +Inf and -Inf.
prom_number <- function(x) {
  out <- trimws(formatC(x, digits = 15, format = "fg"))
  out[is.na(x)] <- "NaN"
  out[!is.na(x) & x == Inf] <- "+Inf"
  out[!is.na(x) & x == -Inf] <- "-Inf"
  out
}

# Label values escape backslash, double quote and newline.
prom_escape_label <- function(x) {
  x <- enc2utf8(x)
  x <- gsub("\\", "\\\\", x, fixed = TRUE)
  x <- gsub("\"", "\\\"", x, fixed = TRUE)
  gsub("\n", "\\n", x, fixed = TRUE)
}

# HELP text escapes backslash and newline.
prom_escape_help <- function(x) {
  x <- gsub("\\", "\\\\", x, fixed = TRUE)
  gsub("\n", "\\n", x, fixed = TRUE)
}

# list(label = <escaped breaker label>, metrics = <named list>) per breaker:
# from the registry (breaker_list(), which does not mark the breakers as
# used) or from the breakers given.
prom_rows <- function(breakers, call = rlang::caller_env()) {
  if (is.null(breakers)) {
    df <- breaker_list()
    rows <- lapply(seq_len(nrow(df)), function(i) as.list(df[i, , drop = FALSE]))
    names_ <- vapply(rows, function(m) as.character(m$name), character(1))
  } else {
    if (inherits(breakers, "CircuitBreaker")) breakers <- list(breakers)
    ok <- is.list(breakers) && !is.object(breakers) &&
      all(vapply(breakers, function(b) inherits(b, "CircuitBreaker"), logical(1)))
    if (!ok) {
      abort_bad_argument("breakers", "`NULL`, a circuit breaker or a list of circuit breakers",
                         breakers, call = call)
    }
    rows <- lapply(breakers, function(b) b$metrics())
    names_ <- vapply(breakers, function(b) b$name %||% NA_character_, character(1))
    unnamed <- is.na(names_)
    names_[unnamed] <- paste0("unnamed-", seq_len(sum(unnamed)))
  }
  if (anyDuplicated(names_)) {
    cli::cli_abort(
      c("Each breaker must appear once, under a distinct name.",
        x = "{.val {cut_text(names_[anyDuplicated(names_)])}} names more than one of {.arg breakers}."),
      class = c("circuit_breaker_invalid_argument", "circuit_breaker_error"),
      argument = "breakers", call = call
    )
  }
  Map(function(label, m) list(label = prom_escape_label(label), metrics = m), names_, rows,
      USE.NAMES = FALSE)
}
