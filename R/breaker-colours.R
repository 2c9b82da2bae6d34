#' The colours of breaker states
#'
#' The palette [plot.CircuitBreaker()] and the Shiny dashboard use, for badges
#' and plots of your own: `CLOSED` green, `OPEN` red, `HALF_OPEN` amber,
#' `FORCED_OPEN` purple, `DISABLED` grey.
#'
#' @return A named character vector of hex colours, one per state.
#' @examples
#' breaker_state_colours()[["OPEN"]]
#' @export
breaker_state_colours <- function() {
  c(CLOSED = "#2e7d32", OPEN = "#c62828", HALF_OPEN = "#f9a825",
    FORCED_OPEN = "#6a1b9a", DISABLED = "#757575")
}
