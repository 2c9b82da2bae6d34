#' OpenTelemetry: calls, state and transitions through the otel package
#'
#' @description
#' When the [otel](https://otel.r-lib.org) package is installed and
#' OpenTelemetry tracing or metrics are on (otel decides that from its
#' environment variables, such as `OTEL_TRACES_EXPORTER` and
#' `OTEL_METRICS_EXPORTER`, with an SDK such as otelsdk), every breaker
#' created from then on reports through it, with OpenTelemetry's
#' semantic-convention style of names (instrumentation scope
#' `r.package.circuitbreaker`):
#'
#' * the counter `circuit_breaker.calls` (unit `{call}`): calls by outcome,
#'   with the attributes `circuit_breaker.name` and `circuit_breaker.outcome`
#'   (`success`, `failure`, `ignored`, `rejected`, or `full` for a call the
#'   bulkhead, `max_concurrent`, refused);
#' * the gauge `circuit_breaker.state`: 1 for the state the breaker is in and
#'   0 for the one it left, with the attributes `circuit_breaker.name` and
#'   `circuit_breaker.state` (`CLOSED`, `OPEN`, `HALF_OPEN`, `FORCED_OPEN`,
#'   `DISABLED`);
#' * the counter `circuit_breaker.health_checks` (unit `{check}`): health
#'   checks this process ran (see `health_check` in [circuit_breaker()]), with
#'   the attributes `circuit_breaker.name` and
#'   `circuit_breaker.health_check.result` (`passed`, `failed` or `late`);
#' * span events on the span active at the time (the request being served,
#'   say): `circuit_breaker.state_change` (attributes `circuit_breaker.name`,
#'   `circuit_breaker.state.from`, `circuit_breaker.state.to`, and
#'   `circuit_breaker.reason` = `"health_check"` when a health check closed
#'   it) and
#'   `circuit_breaker.rejected` (`circuit_breaker.name`,
#'   `circuit_breaker.state`, `circuit_breaker.retry_after` in seconds, when
#'   known), so that a call a breaker refused is visible in the trace of the
#'   request that made it.
#'
#' An unnamed breaker reports the name `""`. Transitions another process made
#' (a host- or fleet-shared breaker) are reported when this process hears of
#' them: at its next call, or through `later`.
#'
#' @details
#' Whether a breaker reports is decided once, when it is created: a breaker
#' created while otel is off (or not installed) never reports, and costs
#' exactly what it costs without this feature: nothing is attached to it, and
#' its calls take the same path (bench/RESULTS.md measures it). When on, the
#' breaker hears its own events, as it does for the listeners [breaker_events]
#' describes (which never see the reporting), so a breaker that reports also
#' builds the condition of each rejection. Set
#' `options(circuitbreaker.otel = FALSE)` to keep breakers from reporting even
#' when OpenTelemetry is on.
#'
#' @name breaker_otel
#' @seealso [breaker_prometheus()] for metrics without OpenTelemetry.
#' @examples
#' # In a shell, with the otelsdk package installed:
#' #   OTEL_TRACES_EXPORTER=console OTEL_METRICS_EXPORTER=console Rscript app.R
#' # Breakers created in app.R then report their calls, state and
#' # transitions; without those variables they cost nothing extra.
NULL

#' @include breaker-events.R
NULL

otel_scope <- "r.package.circuitbreaker"

# TRUE when breakers created now should report: otel installed, not turned
# off by the option, and tracing or metrics on. Called once per breaker, at
# creation; never on a call.
otel_wanted <- function() {
  if (isFALSE(getOption("circuitbreaker.otel"))) return(FALSE)
  if (!requireNamespace("otel", quietly = TRUE)) return(FALSE)
  isTRUE(otel::is_tracing_enabled(otel_scope)) || isTRUE(otel::is_measuring_enabled(otel_scope))
}

# The instruments a reporting breaker uses, made when it is created from the
# meter provider in effect then (otel keeps one per session; otelsdk's
# with_otel_record() swaps in its own for a while).
otel_instruments <- function() {
  meter <- otel::get_meter(otel_scope)
  list(
    tracing = isTRUE(otel::is_tracing_enabled(otel_scope)),
    calls = meter$create_counter("circuit_breaker.calls",
      description = "Calls through a circuit breaker, by outcome", unit = "{call}"
    ),
    state = meter$create_gauge("circuit_breaker.state",
      description = "1 for the state a circuit breaker is in, 0 for the one it left", unit = "1"
    ),
    health_checks = meter$create_counter("circuit_breaker.health_checks",
      description = "Health checks of an open circuit breaker, by result", unit = "{check}"
    )
  )
}

# Makes a new core report through OpenTelemetry when otel_wanted(): its
# reporter (breaker-events.R) hears every event before the listeners, and is
# not one of them, so $on()/$off() never see it.
otel_attach <- function(core) {
  if (!otel_wanted()) return(invisible(core))
  inst <- otel_instruments()
  name <- core$name %||% ""
  count <- function(outcome) {
    attributes <- list(circuit_breaker.name = name, circuit_breaker.outcome = outcome)
    function(...) inst$calls$add(1L, attributes = attributes)
  }
  on_state_change <- function(from, to, reason = NA_character_) {
    inst$state$record(0L, attributes = list(circuit_breaker.name = name, circuit_breaker.state = from))
    inst$state$record(1L, attributes = list(circuit_breaker.name = name, circuit_breaker.state = to))
    if (inst$tracing) {
      attributes <- list(
        circuit_breaker.name = name, circuit_breaker.state.from = from, circuit_breaker.state.to = to
      )
      if (!is.na(reason)) attributes$circuit_breaker.reason <- reason
      otel_span_event("circuit_breaker.state_change", attributes)
    }
  }
  on_health_check <- function(result, ...) {
    inst$health_checks$add(1L, attributes = list(circuit_breaker.name = name,
                                                 circuit_breaker.health_check.result = result))
  }
  rejected_attributes <- list(circuit_breaker.name = name, circuit_breaker.outcome = "rejected")
  full_attributes <- list(circuit_breaker.name = name, circuit_breaker.outcome = "full")
  on_rejected <- function(retry_after, reason = NULL, ...) {
    inst$calls$add(1L, attributes = if (identical(reason, "full")) full_attributes else rejected_attributes)
    if (inst$tracing) {
      attributes <- list(circuit_breaker.name = name, circuit_breaker.state = cb_state(core$ptr))
      if (is.numeric(retry_after) && length(retry_after) == 1L && is.finite(retry_after)) {
        attributes$circuit_breaker.retry_after <- as.double(retry_after)
      }
      otel_span_event("circuit_breaker.rejected", attributes)
    }
  }
  set_reporter(core, list(
    success = count("success"),
    failure = count("failure"),
    ignored = count("ignored"),
    rejected = on_rejected,
    state_change = on_state_change,
    health_check = on_health_check
  ))
  inst$state$record(1L, attributes = list(circuit_breaker.name = name, circuit_breaker.state = cb_state(core$ptr)))
  invisible(core)
}

# An event on the span active now, if there is one that records.
otel_span_event <- function(name, attributes) {
  span <- otel::get_active_span()
  if (isTRUE(span$is_recording())) span$add_event(name, attributes = attributes)
  invisible()
}
