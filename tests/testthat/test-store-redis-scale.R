# The fleet store's cost follows activity: an idle breaker costs
# Redis nothing per sync, so a store of 1,000 idle breakers sends no more
# commands per sync than a store of one. Counted, not timed: Redis's own
# INFO commandstats on a real redis-server, which counts the commands that
# the scripts call too.

# Calls per command since the last CONFIG RESETSTAT, from INFO commandstats
# (a named numeric vector; "cmdstat_config|resetstat" is "config|resetstat").
redis_command_calls <- function(server) {
  lines <- strsplit(server$call("INFO", "commandstats"), "\r?\n")[[1]]
  lines <- grep("^cmdstat_", lines, value = TRUE)
  names <- sub("^cmdstat_([^:]+):.*$", "\\1", lines)
  calls <- as.numeric(sub("^.*[:,]calls=([0-9]+).*$", "\\1", lines))
  stats::setNames(calls, names)
}

# Over at least `n` syncs of each of `breakers` (one per store): the EVALSHAs
# sent, the PINGs, all the commands (the scripts' included), and the syncs
# done. Commands of connection set-up and the test's own are left out.
count_sync_commands <- function(server, breakers, n = 60) {
  syncs <- function() vapply(breakers, function(cb) fleet_link(cb)$syncs, 0)
  before <- syncs()
  server$call("CONFIG", "RESETSTAT")
  expect_true(wait_until(function() all(syncs() >= before + n), timeout = 30,
                         what = sprintf("%d syncs of every store", n)))
  calls <- redis_command_calls(server)
  after <- syncs()
  setup <- "^(info|config|client|hello|auth|select|script|subscribe)(\\||$)"
  calls <- calls[!grepl(setup, names(calls))]
  if (nzchar(Sys.getenv("CB_DEBUG"))) print(calls)
  count <- function(name) if (is.na(calls[name])) 0 else unname(calls[name])
  list(evalsha = count("evalsha"), ping = count("ping"), commands = sum(calls),
       syncs = sum(after - before), n = length(breakers))
}

test_that("1,000 idle breakers cost Redis no more commands per sync than one does", {
  server <- local_redis_server()
  args <- fleet_args(failure_threshold = 5)
  one_store <- breaker_store_redis(server$url, prefix = "scale-one", sync_interval = 0.05,
                                   timeout = 1)
  many_store <- breaker_store_redis(server$url, prefix = "scale-many", sync_interval = 0.05,
                                    timeout = 1)
  one <- local_shared_breaker(one_store, "scale-one", args)
  expect_identical(one$execute(function() "ok"), "ok")
  wait_for_syncs(one, 5)
  # One idle breaker: a sync is a PING, but for one EVALSHA a second that
  # reads the breaker (the sweep), of a fixed number of commands.
  alone <- count_sync_commands(server, list(one))
  expect_gt(alone$evalsha, 0)
  expect_lte(alone$evalsha + alone$ping, alone$syncs + 1)
  per_evalsha <- (alone$commands - alone$ping) / alone$evalsha
  expect_identical(per_evalsha, round(per_evalsha))
  per_sync <- alone$commands / alone$syncs

  # 1,000 idle breakers in a store of their own (its own sync thread).
  names <- sprintf("scale-%04d", 1:1000)
  withr::defer(for (name in names) breaker_remove(name))
  many <- lapply(names, function(name) do.call(circuit_breaker, c(args, list(name = name, store = many_store))))
  for (cb in many[1:10]) expect_identical(cb$execute(function() "ok"), "ok")
  # Past the first syncs, which read every breaker once (after subscribing
  # to the events channel) and send the ten calls.
  wait_for_syncs(many[[1]], 20, timeout = 30)
  expect_identical(many[[1]]$metrics()$mode, "fleet")
  both <- count_sync_commands(server, list(one, many[[1]]))
  # Still one round trip per sync of each store, a PING or an EVALSHA; an
  # EVALSHA runs no more commands than the one-breaker store's did (one
  # fewer for a breaker that never had a call: its window is empty), and
  # comes no more often (one a second per store, give or take the one at
  # each end of the window): 1,000 breakers cost no more per sync than one.
  expect_lte(both$evalsha + both$ping, both$syncs + 2)
  expect_lte((both$commands - both$ping) / both$evalsha, per_evalsha)
  expect_lte(both$commands / both$syncs, per_sync + 2 * per_evalsha / alone$syncs)
  # Yet they are all in the fleet, and the ten calls were counted.
  expect_identical(server$fleet("scale-0001", "tc", prefix = "scale-many"), 1)
  expect_identical(as.numeric(server$call("EXISTS", fleet_key_of("scale-many", "scale-1000"))), 1)
})
