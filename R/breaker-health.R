# Health checks: while a breaker with a `health_check` is OPEN, the check runs
# every `health_interval` seconds on later's event loop (plumber and Shiny run
# one; a script runs it with later::run_now()), never inside a user's call.
#
# The rules are the core's (inst/include/circuitbreaker/health.hpp): who may
# run a check now (the lease: one per interval and OPEN period, for the whole
# host with the host store, for the whole fleet with the fleet store: its
# lease in Redis, fleet/fleet_handle.hpp), what a pass does (closes, as the last successful
# probe would) and what a result that comes too late does (nothing). This
# file only schedules: it asks cb_health_claim() whether to run the check,
# runs it, and hands the result to cb_health_result().
#
# A check is scheduled when this process sees the breaker open: a transition
# to OPEN (emit_transitions(), breaker-events.R, which a breaker with a check
# always hears; for a shared breaker the transitions of other processes are
# polled, see watch_shared_transitions()), a rejected call, or a shared
# breaker that is open when this process attaches. Each core has at most one
# loop (`core$health_scheduled`) and runs one check at a time
# (`core$health_running`): a check that runs the event loop itself
# (later::run_now()) cannot start a second one. The loop holds the core
# weakly and ends when the core is gone or the breaker is no longer OPEN.

#' @include breaker-events.R
NULL

check_health_check <- function(x, call) {
  check_function(x, "health_check", allow_null = TRUE,
                 what = "a function of no arguments that returns `TRUE` when the dependency is healthy",
                 call = call)
}

# After a breaker is made or its health_check changed: a breaker with a
# check hears its transitions (hears_events(), from the transitions from now
# on) and, when shared, polls those of other processes; a check starts at
# once if the breaker is open already (a shared one, found open).
health_start <- function(core) {
  if (is.null(core$health_check)) {
    update_listening(core)
    return(invisible())
  }
  if (is.null(core$seen_transition)) core$seen_transition <- cb_snapshot(core$ptr)$transitions
  update_listening(core)
  watch_shared_transitions(core)
  health_watch(core)
}

# Starts the loop of a breaker with a health check if the breaker is OPEN
# now and no loop runs; nothing otherwise (also without the later package).
health_watch <- function(core) {
  if (is.null(core$health_check) || isTRUE(core$health_scheduled)) return(invisible())
  if (!requireNamespace("later", quietly = TRUE)) return(invisible())
  if (!identical(tryCatch(cb_state(core$ptr), circuit_breaker_error = function(e) NA), "OPEN")) {
    return(invisible())
  }
  core$health_scheduled <- TRUE
  schedule_health_check(rlang::new_weakref(core), health_interval(core))
}

health_interval <- function(core) cb_effective_config(core$ptr)$health_interval

schedule_health_check <- function(ref, delay) {
  force(ref)  # not the caller's frame, which holds the core (see schedule_transition_poll())
  later::later(function() run_health_check(ref), delay)
  invisible()
}

# One turn of the loop: claim the lease, run the check, report, reschedule.
run_health_check <- function(ref) {
  core <- rlang::wref_key(ref)
  if (is.null(core)) return(invisible())
  if (isTRUE(core$health_running) || is.null(core$health_check)) {
    core$health_scheduled <- FALSE
    return(invisible())
  }
  # A broken or busy store ends this loop; the next rejection or transition
  # starts another.
  claim <- tryCatch(cb_health_claim(core$ptr), circuit_breaker_error = function(e) NA_real_)
  if (is.double(claim)) {
    if (is.na(claim)) {
      core$health_scheduled <- FALSE  # not OPEN: nothing to check
    } else {
      # Another process (or an earlier check here) holds this interval's
      # lease: try again when it runs out.
      schedule_health_check(ref, max(claim, 0.01))
    }
    return(invisible())
  }
  core$health_running <- TRUE
  # A check left by an interrupt (or any condition that unwinds past the
  # handler below) ends this loop cleanly: the next rejection or transition
  # starts another.
  finished <- FALSE
  on.exit({
    core$health_running <- FALSE
    if (!finished) core$health_scheduled <- FALSE
  })
  failure <- NULL
  passed <- tryCatch(isTRUE(core$health_check()), error = function(e) {
    failure <<- e
    FALSE
  })
  result <- tryCatch(cb_health_result(core$ptr, claim, passed), circuit_breaker_error = function(e) NA)
  core$health_running <- FALSE
  emit(core, "health_check", result = result, condition = failure)
  finished <- TRUE
  if (identical(result, "failed")) {
    schedule_health_check(ref, health_interval(core))
  } else {
    core$health_scheduled <- FALSE
    health_watch(core)  # opened again since (a late result): a new loop
  }
  invisible()
}
