#' Plot a breaker's recent history
#'
#' Two panels on a shared time axis (seconds before now, on the breaker's
#' clock): the breaker's state over time, from the transitions the C++ core
#' remembers (the last 32), and the failure rate of the calls made in each
#' 5-second bucket of the last five minutes, with rejected calls as grey bars.
#'
#' @param x A [CircuitBreaker].
#' @param ... Ignored.
#' @return `x`, invisibly.
#' @examples
#' clock <- breaker_manual_clock()
#' cb <- circuit_breaker(failure_threshold = 3, recovery_timeout = 20, clock = clock)
#' for (i in 1:60) {
#'   healthy <- i < 20 || i > 45
#'   cb$execute(function() if (healthy) "ok" else stop("down"), function() NULL)
#'   clock$advance(2)
#' }
#' plot(cb)
#' @export
plot.CircuitBreaker <- function(x, ...) {
  history <- x$history()
  tr <- x$transitions()
  window <- 300
  state_colours <- breaker_state_colours()

  old <- graphics::par(mfrow = c(2, 1), mar = c(2.5, 4.5, 2, 1), oma = c(1.5, 0, 0, 0))
  on.exit(graphics::par(old))

  # State timeline: segments between transitions, the current state up to now.
  graphics::plot(NA, xlim = c(-window, 0), ylim = c(0, 1), yaxt = "n", xlab = "", ylab = "",
                 main = paste0(x$name %||% "circuit breaker", ": state"))
  starts <- c(-window, -tr$seconds_ago[tr$seconds_ago < window])
  states <- c(if (nrow(tr)) tr$from[tr$seconds_ago < window][1] else x$state,
              tr$to[tr$seconds_ago < window])
  if (length(states) == 0L || is.na(states[1])) states <- x$state
  ends <- c(starts[-1], 0)
  graphics::rect(starts, 0.2, ends, 0.8, col = state_colours[states], border = NA)
  graphics::legend("bottom", legend = names(state_colours), fill = state_colours, horiz = TRUE,
                   bty = "n", cex = 0.7)

  # Failure rate per bucket, and rejected calls.
  at <- -history$seconds_ago + history$bucket_seconds / 2
  rate <- ifelse(history$calls > 0, history$failures / history$calls, NA)
  graphics::plot(NA, xlim = c(-window, 0), ylim = c(0, 1), xlab = "", ylab = "failure rate",
                 main = "calls: failure rate (line), rejected share (bars)")
  total <- history$calls + history$rejected
  if (length(total)) {
    graphics::rect(at - history$bucket_seconds / 2, 0, at + history$bucket_seconds / 2,
                   ifelse(total > 0, history$rejected / total, 0), col = "grey85", border = NA)
    graphics::lines(at, rate, type = "b", pch = 20, col = "#c62828")
  }
  graphics::mtext("seconds before now", side = 1, outer = TRUE, line = 0.3)
  invisible(x)
}
