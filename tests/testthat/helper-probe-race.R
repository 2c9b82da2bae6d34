# The probe race, for breakers shared by processes (host and fleet stores):
# racers in child processes call at one moment; a call that gets through
# stays in flight until every other racer's call has returned, so that with
# more probes admitted than allowed the count shows it (bounded by the
# racer's deadline: then it returns anyway).
#
# In the test: `race <- local_probe_race(n)` makes the files the racers share
# (`race$start`, `race$done`, one `race$readies[[i]]` per racer) and
# `race$extra(i, ...)` the `extra` list of racer i (with `others`, the
# racers but this one and the allowed probes, and the race's functions). In
# a racer's body (a child: self-contained, so the functions travel in
# `extra`): `extra$ready_and_wait(extra)`, then `extra$race_call(cb, extra)`.

local_probe_race <- function(n, probes = 1, env = parent.frame()) {
  start <- withr::local_tempfile(pattern = "start-", .local_envir = env)
  done <- withr::local_tempfile(pattern = "done-", .local_envir = env)
  dir.create(done)
  readies <- vapply(seq_len(n), function(i) withr::local_tempfile(pattern = "ready-", .local_envir = env), "")
  racer_fns <- child_race_functions()
  list(
    start = start, done = done, readies = readies,
    extra = function(i, ...) {
      c(list(ready = readies[[i]], start = start, done = done, others = n - probes,
             wait_until = child_wait_until()), racer_fns, list(...))
    }
  )
}

# The racers' side, made to travel whole (with the global environment).
child_race_functions <- function() {
  # Says it is ready, waits for the start file and, when it holds a time
  # (write_start_time()), for that instant (a wait for a time, not for a
  # condition). `idle()`, if given, runs while it waits (and must not call).
  ready_and_wait <- function(extra, idle = function() NULL, timeout = 30) {
    file.create(extra$ready)
    extra$wait_until(function() {
      idle()
      file.exists(extra$start)
    }, timeout = timeout, interval = 0.01, what = "the start")
    at <- suppressWarnings(as.numeric(readLines(extra$start)))
    deadline <- Sys.time() + timeout
    if (length(at) == 1 && !is.na(at)) while (Sys.time() < at && Sys.time() < deadline) Sys.sleep(0.001)
  }
  # The call: `on_call()` runs first inside the request; a request that runs
  # holds until the others' calls have returned. Returns whether the request
  # ran, the call's result ("ok" or "rejected") and the breaker's state as
  # the request saw it.
  race_call <- function(cb, extra, on_call = function() NULL, timeout = 20) {
    deadline <- Sys.time() + timeout
    probed <- FALSE
    state <- NA_character_
    res <- cb$execute(function() {
      probed <<- TRUE
      state <<- cb$state
      on_call()
      while (length(list.files(extra$done)) < extra$others && Sys.time() < deadline) Sys.sleep(0.01)
      "ok"
    }, function() "rejected")
    file.create(file.path(extra$done, Sys.getpid()))
    list(probed = probed, result = res, state = state)
  }
  environment(ready_and_wait) <- globalenv()
  environment(race_call) <- globalenv()
  list(ready_and_wait = ready_and_wait, race_call = race_call)
}
