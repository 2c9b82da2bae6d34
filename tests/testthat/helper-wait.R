# Waiting on a condition instead of sleeping for a fixed time. Shared stores
# refuse a manual clock (every process must read the same time), so their
# tests wait for what a sleep used to stand in for: a state seen in another
# process, a sync done, the open period over. A fixed sleep is too short on a
# loaded machine and too long everywhere else; a wait on the condition is
# neither, and when the condition never comes it fails the test saying what
# it waited for, instead of letting the test go on (and pass or fail for a
# reason nobody sees).

# Calls `condition()` every `interval` seconds until its value is truthy
# (TRUE, or any other value that is not NULL, FALSE, NA or empty), and
# returns that value. Bounded in time (`timeout` seconds) and in count
# (`timeout / interval` calls, and one more); when both run out, an error of
# class `wait_until_timeout` (a test that raises it fails) names `what`, or
# the condition's code when `what` is NULL. Self-contained (base R only), so
# that child processes can have it: see child_wait_until().
wait_until <- function(condition, timeout = 10, interval = 0.02, what = NULL) {
  stopifnot(is.function(condition), is.numeric(timeout), timeout >= 0,
            is.numeric(interval), interval > 0)
  truthy <- function(value) {
    if (is.null(value) || length(value) == 0L) return(FALSE)
    if (is.logical(value)) return(isTRUE(value))
    !(is.atomic(value) && length(value) == 1L && is.na(value))
  }
  if (is.null(what)) what <- paste(trimws(deparse(body(condition))), collapse = " ")
  deadline <- Sys.time() + timeout
  tries <- 0L
  value <- NULL
  for (i in seq_len(ceiling(timeout / interval) + 1L)) {
    tries <- i
    value <- condition()
    if (truthy(value)) return(value)
    if (Sys.time() >= deadline) break
    Sys.sleep(interval)
  }
  last <- paste(utils::capture.output(utils::str(value, give.head = FALSE)), collapse = " ")
  stop(structure(class = c("wait_until_timeout", "error", "condition"), list(
    message = sprintf("Timed out after %s s (%d tries) waiting for %s (last value: %s).",
                      format(timeout), tries, what, trimws(last)),
    call = NULL, what = what, value = value
  )))
}

# wait_until() to give a child process (callr), in `extra`: the same
# function, made to travel whole (with the global environment, not this
# file's). In the child its timeout is an error, which the test sees when it
# collects the child's result.
child_wait_until <- function() {
  f <- wait_until
  environment(f) <- globalenv()
  f
}

# --- Fleet breakers ---------------------------------------------------------

# What the link of fleet breaker `cb` says (the store's sync thread in this
# process): `syncs` and `sync_failures` count its round trips to Redis.
fleet_link <- function(cb) circuitbreaker:::cb_fleet_info(cb$.__enclos_env__$core$ptr)

# Waits until the link of fleet breaker `cb` has finished `n` more round
# trips (2 by default: the first may have been under way already, so the
# second began after this call and carried everything done before it).
wait_for_syncs <- function(cb, n = 2, what = sprintf("%d more syncs", n), timeout = 10) {
  done <- fleet_link(cb)$syncs
  wait_until(function() fleet_link(cb)$syncs >= done + n, timeout = timeout, what = what)
}

# --- Any breaker ------------------------------------------------------------

# Waits until the open period of breaker `cb` is over (its copy of the state
# says so): its next call is a probe. The period is a rule's duration, which
# no clock of a shared store lets a test skip; this waits just that long.
wait_for_probe_time <- function(cb, what = "the end of the open period", timeout = 10) {
  wait_until(function() cb$metrics()$seconds_until_probe <= 0, timeout = timeout, what = what)
}
