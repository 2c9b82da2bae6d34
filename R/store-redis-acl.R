# The least privilege of a fleet store: the one `ACL SETUSER` line that
# ?breaker_store_redis ("Least privilege") shows, built here from the list
# of what the store needs so that the list is read and reviewed in one
# place, and a test can create the user for any prefix
# (with the internal redis_acl_setuser()); vignettes/shared-stores.Rmd
# prints the line for prefix "quotes-api" with a chunk that calls it.

# Every command the store may send (inst/include/circuitbreaker/redis/), and
# every command its scripts run (fleet/script.hpp): Redis checks a script's
# commands against the user who runs the script.
redis_acl_commands <- c(
  "ping",           # a sync with nothing to send; the subscription's liveness
  "auth",           # every connection with a password (allowed to all users anyway)
  "select",         # a database other than 0
  "evalsha",        # every sync, and the probe's and health check's leases
  "eval",           # the same, where the user may not SCRIPT LOAD
  "script|load",    # once per connection and script
  "time",           # in the scripts: the fleet's clock
  "hmget", "hget", "hset",  # in the scripts: the breaker's hash
  "get", "set", "del",      # in the scripts: the leases; SET NX PX for the health check; DEL by breaker_store_unlink()
  "pexpire", "pttl",        # in the scripts: keys expire after a day without a report; a lease's time left
  "publish",        # in the scripts: a transition, on the store's channel
  "subscribe",      # the store's channel
  "role",           # behind Sentinel: the node named is a master
  "cluster|slots", "cluster|shards",  # the slot map (an error means a single server)
  "asking"          # a Cluster slot being migrated
)

# The line for a store with prefix `prefix` (one that breaker_store_redis()
# accepts). Its keys are `cb2:{<prefix>:<name>}...` and its channel
# `cb2:{<prefix>}:events`, the prefix percent-encoded (fleet/keys.hpp): of
# the characters a prefix may have, only `:` is encoded (as %3A).
redis_acl_setuser <- function(prefix = "myapp", user = "cb-fleet", password = "change-this-password") {
  stopifnot(grepl("^[A-Za-z0-9_.:-]+$", prefix))
  encoded <- gsub(":", "%3A", prefix, fixed = TRUE)
  paste("ACL SETUSER", user, "on", paste0(">", password), "resetkeys resetchannels -@all",
        paste0("+", redis_acl_commands, collapse = " "),
        paste0("~cb2:{", encoded, ":*"), paste0("&cb2:{", encoded, "}:events"))
}

# The line as a fenced block of markdown, for roxygen's inline R code.
redis_acl_block <- function(prefix = "myapp") paste0("```\n", redis_acl_setuser(prefix), "\n```")
