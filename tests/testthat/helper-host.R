# Helpers for host-shared breakers (test-store-host.R): a private store
# directory per test, and child R processes that share a breaker with the test.

# A host store in a fresh directory (in /dev/shm when there is one, as in
# production), removed with everything in it when `env` ends. Mode 0700, as
# the default directory: with a umask of 002 a plain dir.create() would give
# 0775, which the store refuses (others of the group could replace files).
local_host_store <- function(env = parent.frame()) {
  skip_if_not(circuitbreaker:::cb_host_supported(), "host-shared breakers need Linux")
  root <- if (dir.exists("/dev/shm") && file.access("/dev/shm", 2L) == 0L) "/dev/shm" else tempdir()
  dir <- tempfile("cb-test-store-", tmpdir = root)
  dir.create(dir, mode = "0700")
  withr::defer(unlink(dir, recursive = TRUE), envir = env)
  breaker_store_host(dir)
}

# The arguments every process of a test gives its shared breaker.
host_args <- function(...) {
  utils::modifyList(list(failure_threshold = 5, recovery_timeout = 30), list(...))
}

# Runs `body(cb, extra)` in a new R process on the shared breaker `name` of
# `store` (made with `args`), in the background; returns the callr process
# (store_child()).
shared_child <- function(store, name, args, body, extra = list()) {
  store_child("breaker_store_host", list(store$path), name, args, body, extra)
}

# Waits (bounded) for every process and returns their results; kills them on
# the way out whatever happens.
collect_children <- function(procs, timeout = 60) {
  on.exit(for (p in procs) if (p$is_alive()) p$kill(), add = TRUE)
  deadline <- Sys.time() + timeout
  for (p in procs) {
    left <- as.numeric(difftime(deadline, Sys.time(), units = "secs"))
    p$wait(max(1, left) * 1000)
    if (p$is_alive()) stop("a child process did not finish within ", timeout, " s")
  }
  lapply(procs, function(p) p$get_result())
}

# Tells waiting children when to start: writes `at` (seconds since the epoch)
# to `path` atomically, through a rename, so that a child that sees the file
# also sees its whole contents (a child polling for the file could otherwise
# read it between its creation and the write, and get an empty line).
write_start_time <- function(path, at) {
  tmp <- paste0(path, ".tmp")
  writeLines(format(at, digits = 15), tmp)
  stopifnot(file.rename(tmp, path))
}

# A shared breaker in this process, removed from the registry when `env` ends.
local_shared_breaker <- function(store, name, args, env = parent.frame()) {
  cb <- do.call(circuit_breaker, c(args, list(name = name, store = store)))
  withr::defer(breaker_remove(name), envir = env)
  cb
}
