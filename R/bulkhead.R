# The bulkhead's R side: share() (a limit as a share of the processes using
# a breaker) and the bounded wait for a permit (max_wait). The permits, the
# limit and the decision are the core's (inst/include/circuitbreaker/
# bulkhead.hpp); R only waits, since the core never does.

#' A bulkhead limit as a share of processes
#'
#' `max_concurrent = share(p)` (in [circuit_breaker()]) lets a share `p` of
#' the processes that use a breaker make calls through it at once, rounded
#' up and at least 1 (Shopify semian's `quota`). For a breaker of the host
#' store, the processes counted are those that have made a call through it
#' (at most 64) and have neither closed it nor died; for the fleet store,
#' whose permits are per host, the processes of this host that have made a
#' call through the same fleet breaker, counted the same way (other hosts
#' count their own); for the process store it is one process: `share(p)` is
#' then one permit.
#'
#' @param p The share, a number in (0, 1].
#' @return An object of class `circuit_breaker_share`, for `max_concurrent`.
#'   A `p` outside (0, 1] gets a classed error naming `p`.
#' @export
#' @examples
#' b <- circuit_breaker(max_concurrent = share(0.5))
#' b$metrics()$max_concurrent
share <- function(p) structure(cb_check_share(p), class = "circuit_breaker_share")

#' @export
format.circuit_breaker_share <- function(x, ...) paste0("share(", format(unclass(x), ...), ")")

#' @export
print.circuit_breaker_share <- function(x, ...) {
  cat(format(x, ...), "\n", sep = "")
  invisible(x)
}

# A call refused because the bulkhead was full (`rejection`, cb_acquire()'s
# vector, with its max_wait field) waits up to max_wait seconds for a
# permit: it polls whether one is free (cb_bulkhead_room(), which counts
# nothing) with a backoff from 5 ms to 100 ms, in Sys.sleep(), which a
# user's interrupt ends, and holds no lock meanwhile. When it sees a free
# permit it tries to take it; another process may be faster, and then it
# waits on. Returns what cb_acquire() returns for a permit, or the last
# rejection when the wait ends without one (or the breaker refused the call
# for another reason meanwhile).
wait_for_permit <- function(ptr, rejection, request_func, timeout) {
  deadline <- Sys.time() + rejection[[REJECTION_MAX_WAIT]]
  delay <- 0.005
  repeat {
    left <- as.numeric(difftime(deadline, Sys.time(), units = "secs"))
    if (left <= 0) return(rejection)
    Sys.sleep(min(delay, left))
    delay <- min(delay * 2, 0.1)
    if (!cb_bulkhead_room(ptr)) next
    # No fallback: a refusal comes back as a rejection vector, never NULL.
    got <- .Call(cb_acquire, ptr, request_func, NULL, timeout)
    if (!is.double(got)) return(got)
    rejection <- got
    if (rejection[[REJECTION_REASON]] != REJECTION_FULL) return(rejection)
  }
}
