# The bodies of the child processes that race for a shared bulkhead's
# permits (test-bulkhead.R for the host store, test-bulkhead-fleet.R for the
# fleet store): each is given to shared_child() (helper-host.R) or
# fleet_child() (helper-redis.R) and gets the child's breaker and `extra`.

# A child's body: `calls` calls through the shared breaker, each of which
# marks itself in `dir` (a file that exists only while the call holds its
# permit), counts the marks it sees and sleeps a little. Returns the largest
# count seen and how many calls were admitted and rejected as full.
racing_body <- function(cb, extra) {
  deadline <- Sys.time() + 20
  while (!file.exists(extra$start) && Sys.time() < deadline) Sys.sleep(0.01)
  seen <- 0L
  admitted <- 0L
  full <- 0L
  for (i in seq_len(extra$calls)) {
    cb$execute(function() {
      mark <- file.path(extra$dir, paste0(Sys.getpid(), "-", i))
      file.create(mark)
      on.exit(unlink(mark))
      seen <<- max(seen, length(list.files(extra$dir)))
      admitted <<- admitted + 1L
      Sys.sleep(0.03)
    }, function(e) {
      if (inherits(e, "circuit_breaker_full")) full <<- full + 1L
      Sys.sleep(0.005)
    })
  }
  list(seen = seen, admitted = admitted, full = full)
}

# A child that takes the only permit, says so in `extra$holding`, and holds
# it until it is killed (or `extra$hold` seconds pass).
holding_body <- function(cb, extra) {
  cb$execute(function() {
    file.create(extra$holding)
    Sys.sleep(extra$hold)
  })
  "released"
}
