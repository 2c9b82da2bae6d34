#' @include store.R
NULL

#' Breakers shared by every R process on a host
#'
#' @description
#' `breaker_store_host()` makes a store for [circuit_breaker()],
#' [breaker_for()] and the `circuitbreaker.defaults` option: every process on
#' the machine that creates a breaker with the same `name`, the same store
#' and the same rule arguments shares one breaker. One trip opens it for all of
#' them, one open period applies to all, exactly `half_open_max_calls` probes
#' go out host-wide, and the counts, windows, history and transition log are
#' the same for every process. Use it when a plumber API runs several worker
#' processes, when Posit Connect or Shiny Server runs several R processes for
#' an app, or when a `callr` or `future` pool fans calls out: with
#' per-process breakers each of N processes makes its own
#' `failure_threshold` failed calls before it opens, and each sends its own
#' probes.
#'
#' Each breaker is one small file in the store's directory (by default
#' `/dev/shm/circuitbreaker-<uid>`, private to this user), mapped into the
#' memory of every process that uses it; the processes that share it must
#' run as the same user. Its rule arguments are its identity (another value
#' is an error of class `circuit_breaker_store_wrong_config`), and a shared
#' breaker reads the host's monotonic clock, so `clock` must be `NULL`.
#' Linux only: elsewhere `breaker_store_host()` raises an error of class
#' `circuit_breaker_store_unsupported`.
#'
#' `breaker_store_process()` is the default store (each process its own
#' breaker), for overriding a host store given in `circuitbreaker.defaults`.
#' `breaker_store_unlink()` deletes a breaker's file (or a fleet breaker's
#' keys), so that the next breaker created with that name starts afresh;
#' `breaker_store_segments()` lists the files of a store.
#'
#' @section Learn more:
#' `vignette("shared-stores", package = "circuitbreaker")`, part "The host
#' store", has the rest: where the state lives and for how long, "Security"
#' (which files and directories the store trusts, and what a hostile local
#' user can and cannot do), what is shared and what is not, the host-wide
#' bulkhead, events from other processes, crash safety, "Untrusted segments
#' and stuck locks" (the errors of class `circuit_breaker_store_corrupt` and
#' `circuit_breaker_store_busy`), speed and platforms.
#'
#' @param path `NULL` for this user's directory `/dev/shm/circuitbreaker-<uid>`
#'   (created if missing), or an existing directory that this process may
#'   write to, that only this user or root can change (see "Security" in the
#'   vignette). Every process sharing a breaker must use the same directory.
#' @param lock_timeout The longest time, in seconds (above 0, at most 60), that
#'   a call waits for a shared breaker's lock before it raises an error of
#'   class `circuit_breaker_store_busy` (see "Untrusted segments and stuck
#'   locks" in the vignette). Each process chooses its own.
#' @param name The name of a breaker (as given to [circuit_breaker()], or the
#'   `"host:port"` key of [breaker_for()]), at most 80 bytes.
#' @param store A store from `breaker_store_host()`; for
#'   `breaker_store_unlink()`, also one from [breaker_store_redis()] (see
#'   "Keys" in the vignette).
#' @return `breaker_store_host()` and `breaker_store_process()`: a store
#'   object. `breaker_store_unlink()`: `TRUE` if a file (for a fleet store,
#'   a key or this host's file of its bulkhead permits) was removed,
#'   invisibly. `breaker_store_segments()`: a data frame with one row per
#'   file (`name`, `file`, `status`, `state`, `creator_pid`,
#'   `creator_alive`, `seconds_since_created`, `bytes`).
#' @examples
#' if (circuitbreaker:::cb_host_supported()) {
#'   # breaker_store_host() with no path uses this user's directory,
#'   # /dev/shm/circuitbreaker-<uid>: the same in every R process of this
#'   # user on this host. This example keeps its files in a directory of its
#'   # own, which it removes at the end.
#'   dir <- tempfile("cb-example-")
#'   dir.create(dir, mode = "0700")
#'   store <- breaker_store_host(dir)
#'   cb <- circuit_breaker(name = "example-inventory", failure_threshold = 3, store = store)
#'   cb$execute(function() "ok")
#'   # Another R process of the same user on this host that makes a breaker
#'   # of this name in a store on `dir` shares `cb`.
#'   breaker_store_segments(store)[, c("name", "state")]
#'   # Cleaning up: forget it here, and delete its file (for every process).
#'   breaker_remove("example-inventory")
#'   breaker_store_unlink("example-inventory", store)
#'   unlink(dir, recursive = TRUE)
#' }
#' @order 1
#' @export
breaker_store_host <- function(path = NULL, lock_timeout = 1) {
  if (!cb_host_supported()) {
    abort_store(
      "unsupported",
      c("Breakers shared by the processes of a host are not supported on this platform.",
        i = "They need robust process-shared mutexes, which Linux has (macOS and Windows do not).",
        i = "Use the default store (one breaker per process) here."),
      call = rlang::current_call()
    )
  }
  must <- "NULL or an existing directory this process can write to"
  if (is.null(path)) {
    # The core makes (or checks) this user's directory under /dev/shm.
    verdict <- cb_host_default_directory()
  } else {
    check_string(path)
    # (A path longer than the system's limit is refused first: dir.exists()
    # would warn with the whole of it.)
    if (nchar(path, type = "bytes") > 4095L || !dir.exists(path)) {
      abort_bad_argument("path", must, path, call = rlang::current_call())
    }
    verdict <- cb_host_check_directory(path.expand(path))
  }
  if (identical(verdict[[1]], "untrusted")) {
    abort_host_untrusted(verdict[[2]], verdict[[3]], call = rlang::current_call())
  }
  if (identical(verdict[[1]], "os_error")) {
    if (!is.null(path)) abort_bad_argument("path", must, path, call = rlang::current_call())
    abort_store(
      "os_error",
      c("Cannot make the default host store directory {.file {verdict[[2]]}}: {verdict[[3]]}.",
        i = "Give a directory of your own with {.arg path}."),
      path = verdict[[2]],
      reason = "os_error",
      call = rlang::current_call()
    )
  }
  path <- verdict[[2]]
  if (file.access(path, 2L) != 0L) {
    abort_bad_argument("path", must, path, call = rlang::current_call())
  }
  # At most a minute: a bound that long already says "stuck".
  lock_timeout <- check_number_decimal(lock_timeout, min = 0, max = 60, min_exclusive = TRUE,
                                       must = "a number of seconds above 0 and at most 60")
  structure(list(kind = "host", path = normalizePath(path, mustWork = TRUE),
                 lock_timeout = lock_timeout),
            class = c("circuit_breaker_store_host", "circuit_breaker_store"))
}

# The host store's methods (store.R says what each is asked).

# nolint start: object_name_linter, object_length_linter. (lintr lints file by file and sees
# only the generics of the file it lints; store.R holds these.)

#' @export
format.circuit_breaker_store_host <- function(x, ...) paste0("<circuit_breaker_store: host, ", x$path, ">")

# The segment file's path; the lock's bound rides on it to cb_create() (and
# is kept with it for re-attaching after readRDS()).
#' @exportS3Method
store_location.circuit_breaker_store_host <- function(store, name, call) {
  check_shared_name(store, name, call)
  structure(file.path(store$path, cb_segment_file_name(name)), lock_timeout = store$lock_timeout %||% 1)
}

#' @exportS3Method
store_clock.circuit_breaker_store_host <- function(store) "the host's monotonic clock"

#' @exportS3Method
store_polls.circuit_breaker_store_host <- function(store) TRUE

#' @exportS3Method
store_label.circuit_breaker_store_host <- function(store, m) "host-shared"

#' @exportS3Method
store_badge.circuit_breaker_store_host <- function(store, m) {
  list(text = "host-shared", tooltip = "shared by every R process on this host")
}

#' @exportS3Method
store_unlink.circuit_breaker_store_host <- function(store, name, call) {
  path <- as.character(store_location(store, name, call = call))
  file.exists(path) && unlink(path) == 0L && !file.exists(path)
}

# nolint end
check_host_store <- function(store, call = rlang::caller_env()) {
  if (!inherits(store, "circuit_breaker_store_host")) {
    abort_bad_argument("store", "a store from `breaker_store_host()`", store, call = call)
  }
  store
}

#' @rdname breaker_store_host
#' @order 4
#' @export
breaker_store_segments <- function(store = breaker_store_host()) {
  check_host_store(store)
  files <- list.files(store$path, pattern = "^cb-", all.files = TRUE)
  names <- cb_segment_breaker_names(files)
  files <- files[!is.na(names)]
  names <- names[!is.na(names)]
  info <- lapply(file.path(store$path, files), cb_segment_info)
  column <- function(field, type) vapply(info, function(i) i[[field]], type)
  data.frame(
    name = names,
    file = file.path(store$path, files),
    status = column("status", character(1)),
    state = column("state", character(1)),
    creator_pid = column("creator_pid", numeric(1)),
    creator_alive = column("creator_alive", logical(1)),
    seconds_since_created = column("seconds_since_created", numeric(1)),
    bytes = column("bytes", numeric(1)),
    stringsAsFactors = FALSE
  )
}

# The host store's errors. The binding raises them by these names
# (src/r_interface.cpp) when a segment cannot be opened or attached, is
# refused, damaged or busy.

# A segment that cannot be opened or attached. `reason` is the core's status
# name (host/segment_attach.hpp) or "os_error"; `message` is the core's wording (or the
# system's, for an os_error). For wrong_config, `argument` is the first rule
# argument that differs, and `given` and `stored` its values in this process
# and in the segment.
abort_host_store <- function(path, reason, message, argument = NULL, given = NULL, stored = NULL,
                             call = NULL) {
  if (identical(reason, "wrong_config")) {
    abort_wrong_config(
      "Breaker segment {.file {path}}", "the breaker was created with",
      "or remove the segment with {.fn breaker_store_unlink} once no process uses it.",
      argument, given, stored, path = path, reason = reason, call = call
    )
  }
  bullets <- c("Cannot share breaker segment {.file {path}}: {message}.")
  if (reason %in% c("wrong_layout", "corrupt", "too_small", "init_timeout")) {
    bullets <- c(bullets, i = "Remove it with {.fn breaker_store_unlink} (or {.code rm}) once no process uses it.")
  }
  abort_store(reason, bullets, path = path, reason = reason, argument = argument, given = given,
              stored = stored, call = call)
}

# A file or directory of the store that the core refused as not this
# user's (host/store_files.hpp): `path` is what it refused and `reason` its
# words; `segment` is the breaker's segment file when a breaker was being
# created (then `path` is that file or its directory).
abort_host_untrusted <- function(path, reason, segment = NULL, call = NULL) {
  what <- if (identical(path, segment)) "host store file" else "host store directory"
  abort_store(
    "untrusted",
    c(paste("Refusing to use", what, "{.file {path}}: {reason}."),
      i = paste("A host store uses only what this user made: segment files that are regular files",
                "of this user with mode 0600 (never a link), in directories of this user or root that",
                "only they can change (sticky when others may write)."),
      i = paste("Another user may have put it there. Remove it (as its owner or root), or give",
                "{.fn breaker_store_host} a {.arg path} of your own.")),
    path = path, reason = "untrusted", detail = reason, segment = segment, call = call
  )
}

# A segment in use that turns out to be broken (its header was overwritten,
# a value in it is out of range, or its lock is unrecoverable).
abort_host_broken <- function(path, call = NULL) {
  abort_store(
    "corrupt",
    c(paste("Breaker segment {.file {path}} is damaged: it was overwritten (a value is out of range),",
            "or its lock cannot be recovered."),
      i = "Remove it with {.fn breaker_store_unlink} and create the breaker again."),
    path = path, reason = "corrupt", call = call
  )
}

# A segment whose lock was still held after the bound of the wait
# (`seconds`): its holder is stopped or its owner word forged. Not damage:
# the breaker works again as soon as the lock is free.
abort_host_busy <- function(path, seconds, call = NULL) {
  abort_store(
    "busy",
    c("Breaker segment {.file {path}} is busy: its lock was still held after {seconds} second{?s}.",
      i = paste("A process holding it may be stopped (SIGSTOP, a debugger) or the segment tampered with;",
                "this breaker works again once the lock is free."),
      i = paste("Find the holder with {.code fuser {path}}; or remove the segment with",
                "{.fn breaker_store_unlink} and create the breaker again.")),
    path = path, reason = "busy", seconds = seconds, call = call
  )
}
