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
#' `breaker_store_process()` is the default store (each process its own
#' breaker), for overriding a host store given in `circuitbreaker.defaults`.
#'
#' @section Where the state lives:
#' Each breaker is one small file (about 5 KB) in the store's directory, named
#' `cb-` and the breaker's name (characters other than letters, digits, `_`,
#' `-` and `.` written as `%XX`), mapped into the memory of every process that
#' uses it. A name has at most 80 bytes (in UTF-8), the limit of every shared
#' store ([breaker_store_redis()] too): then the file name fits the file
#' system's 255 bytes even when every byte of the name is written as `%XX`.
#' The default directory is `/dev/shm/circuitbreaker-<uid>`, where
#' `<uid>` is the process's effective user id: memory, not disk, and private
#' to that user (the store creates it with mode 0700; see "Security"). So the
#' processes that share a breaker must run as the same user (or all give the
#' same `path`, which must then be theirs too: segment files are readable and
#' writable by their owner only). Give another directory with `path` when
#' processes in several containers share a memory-backed volume, or because
#' systemd's `RemoveIPC=yes` deletes a user's files in `/dev/shm` when their
#' last session ends (a service account running plumber is not affected; a
#' login user's can be).
#'
#' The state survives the restart of any process, and of all of them, for as
#' long as the file exists (a file in a directory on disk that outlives a
#' reboot of the host starts afresh: its times were of the old boot's clock).
#' `breaker_remove()` only forgets a breaker in this process.
#' `breaker_store_unlink()` deletes the file: processes attached to it go on
#' sharing the old state among themselves, and the next breaker created
#' with that name starts afresh. `breaker_store_segments()` lists the files of
#' a store, with their state and the process that created them; from a shell,
#' `ls /dev/shm/circuitbreaker-$(id -u)/cb-*` does the same, and `rm` removes
#' them.
#'
#' @section Security:
#' A host-shared breaker can be read and changed by the processes of the
#' user that created it, and by root: its file has mode 0600 in a directory
#' that only that user (or root) can change. Nobody else can see its state,
#' trip it, force it open or reset it.
#'
#' The store never opens what another user may have put in its way. A
#' segment file is created exclusively (`O_CREAT | O_EXCL | O_NOFOLLOW`, mode
#' 0600); an existing one is opened without following a symbolic link and
#' without blocking, and used only when the open file is a regular file owned
#' by this process's effective user with no permission bit for group or
#' others, and no second name (hard link). Anything else (a symbolic link,
#' even a dangling one or one to a file of ours; a FIFO, a directory, a file
#' of another user, a file of ours with mode 0644) is refused with an error of class
#' `circuit_breaker_store_untrusted` (also `circuit_breaker_store_error`) that
#' names the file and the reason, when a breaker is created
#' ([circuit_breaker()], [breaker_for()]); the file is left as it is, and the
#' process's other breakers go on working. `breaker_store_segments()` opens
#' files read-only, never through a link, maps them read-only, and shows a
#' file that fails these checks with the status `"untrusted: <reason>"`
#' without reading it.
#'
#' The default directory, `/dev/shm/circuitbreaker-<uid>`, is created with
#' mode 0700 when missing. Since any user can create that name in `/dev/shm`
#' first, an existing one is used only when it is a directory (not a symbolic
#' link) owned by this user, without write permission for group or others;
#' else `breaker_store_host()` refuses it (`circuit_breaker_store_untrusted`):
#' remove it (as root) or give a `path`. A directory given as `path`, and every
#' directory above it, must be owned by this user or root and, if group or
#' others may write in it, have the sticky bit (as `/dev/shm` and `/tmp`
#' have), so that nobody else can remove or replace the files in it; a
#' symbolic link on the way must be owned by this user or root. This is
#' checked by `breaker_store_host()` and again whenever a breaker is created.
#'
#' What a hostile local user cannot do: adopt one of our breakers (plant a
#' file we would then use, and force it open), redirect our writes to another
#' file through a link, create files for us through a dangling link, or
#' change, read or replace our files or the default directory. What they can
#' do: fill `/dev/shm` (or the shared directory), so that new breakers cannot
#' be created (a denial of service, like any shared tmpfs); in a `path` that
#' others may write to (not the default directory), plant a file under the
#' name of a breaker we have not created yet, so that creating it fails (with
#' the error above, naming the file) until someone removes it; and in a
#' `path` that they may search, see which breaker names exist (the file
#' names), though not their state. Processes of the same user trust each
#' other: each can change the shared state.
#'
#' @section What is shared and what is not:
#' The rule arguments of [circuit_breaker()] (`failure_threshold`,
#' `recovery_timeout`, the windows and rates, the probe, backoff, jitter and
#' ramp-up arguments) are part of a shared breaker's identity: a process that
#' creates a breaker of the same name with different values gets an error of
#' class `circuit_breaker_store_wrong_config` that names the first argument
#' that differs. For the same reason `$configure()` refuses to change them on a
#' shared breaker (class `circuit_breaker_store_configure`): processes that
#' disagree about the rules would each apply their own. To change them, stop
#' the processes, call `breaker_store_unlink()` and start them with the new
#' arguments.
#'
#' The fallback, `failure_when`, `ignore`, `timeout`, `failure_statuses`,
#' `respect_retry_after` and listeners belong to each process: they decide
#' how this process's calls become outcomes and what it does with events, and
#' each process may set them as it likes, also with `$configure()`.
#'
#' A shared breaker reads the host's monotonic clock, so `clock` must be
#' `NULL`.
#'
#' @section The bulkhead:
#' `max_concurrent` is host-wide: every process on the host that uses the
#' breaker takes its permits from the one segment, so at most that many calls
#' through the breaker are in flight on the host at once. A permit records
#' its holder's process id (as a half-open probe does): when a holder dies
#' (even by `SIGKILL`), the next call that finds the bulkhead full frees its
#' permits. `max_concurrent = share(p)` counts the processes that have made a
#' call through the breaker (at most 64) and have neither closed it (their
#' breaker was garbage-collected, or the process ended normally) nor died (a
#' dead one is dropped when a call finds the bulkhead full), and allows
#' `ceiling(p * n)` permits, at least 1. `max_concurrent` and `max_wait` are
#' rule arguments, part of the identity above. A process in another pid
#' namespace than the segment's creator cannot judge its pids: its permits
#' are untracked and come back only when its calls end.
#'
#' @section Events:
#' A transition made by another process reaches this process's listeners,
#' `$transitions()` and `$metrics()` on this process's next call, and within
#' about a second when an event loop runs (plumber, Shiny, or anything that
#' runs `later`'s loop): a breaker with listeners checks the shared log once
#' every `getOption("circuitbreaker.host_poll_interval", 0.5)` seconds.
#' (So does a breaker that reports through OpenTelemetry, [breaker_otel].)
#' The check holds the breaker weakly: it stops once the breaker has no
#' listeners left or has been garbage-collected. While it runs,
#' `later::loop_empty()` is `FALSE`, so code that waits for an empty event
#' loop, such as `shiny::testServer()` flushing a session, waits for as long
#' as such a breaker lives: in such tests, remove the listeners with `$off()`
#' (or give the breaker no listeners) before the session flushes.
#'
#' @section Crash safety:
#' A process may be killed at any moment (`SIGKILL`, the out-of-memory
#' killer) without wedging or corrupting the shared breaker. The lock is a
#' robust process-shared mutex: when its owner dies, the next process takes
#' it over. Every change is written to a copy of the state, which becomes the
#' state in one atomic step, so a change cut short leaves the previous state
#' whole. A probe held by a process that died is freed as soon as another
#' process finds every probe slot taken (probes of processes in another pid
#' namespace are freed by their lease instead: `half_open_max_wait`, else
#' `recovery_timeout`).
#'
#' @section Untrusted segments and stuck locks:
#' Every process that can write a segment file can write any byte of it, and
#' a damaged file must cost a call, never the process. Before a process uses
#' the shared state it checks every index, count, enum and time it is about to
#' use (the positions in the windows, the probe slots, the state, the slot
#' that holds the state, the lock's own words): when it attaches, when it
#' lists the store, on every call that takes the lock, and, on the lock-free
#' admission path, the few fields that path reads. A value out of range is
#' never used: the call raises an error of class
#' `circuit_breaker_store_corrupt` (also `circuit_breaker_store_error` and
#' `circuit_breaker_error`) that names the file, this breaker raises it from
#' then on, and the process's other breakers go on working. Remove the file
#' with `breaker_store_unlink()` and create the breaker again.
#'
#' No call waits for the lock longer than `lock_timeout` seconds (1 by
#' default, at most 60). The lock is held for well under a microsecond per
#' call, so a lock still held after that long belongs to a process that is
#' alive but stopped (`SIGSTOP`, a debugger) or was forged by whoever wrote
#' the file. The call then raises an error of class
#' `circuit_breaker_store_busy` (also `circuit_breaker_store_error` and
#' `circuit_breaker_error`) naming the file, and the breaker works again as
#' soon as the lock is free (when its holder continues, or dies: a dead
#' holder's lock is taken over at once). This holds for `$execute()` with a
#' fallback too: the fallback answers for the dependency, not for the
#' breaker's own store, and a fallback that silently hid a stuck store would
#' leave every process on the host running without a breaker. Catch the
#' class to choose otherwise. Admission in `CLOSED` and in an `OPEN` period
#' takes no lock, so a call in `CLOSED` still runs its request and raises the
#' error when it records the outcome, which is then not counted. The check of
#' the shared log that a breaker with listeners runs on the event loop (see
#' "Events") skips a busy lock and tries again at its next turn, so while a
#' lock is stuck each turn may hold the event loop for `lock_timeout`.
#'
#' @section Speed:
#' Admission in `CLOSED` and `OPEN` reads the shared state without a lock and
#' without a system call; recording an outcome takes the lock for well under
#' a microsecond. See `bench/RESULTS.md` in the source for figures.
#'
#' @section Platforms:
#' Linux. Elsewhere `breaker_store_host()` raises an error of class
#' `circuit_breaker_store_unsupported`: macOS has no robust process-shared
#' mutexes, and Windows no POSIX shared memory.
#'
#' @param path `NULL` for this user's directory `/dev/shm/circuitbreaker-<uid>`
#'   (created if missing), or an existing directory that this process may
#'   write to, that only this user or root can change (see "Security"). Every
#'   process sharing a breaker must use the same directory.
#' @param lock_timeout The longest time, in seconds (above 0, at most 60), that
#'   a call waits for a shared breaker's lock before it raises an error of
#'   class `circuit_breaker_store_busy`; see "Untrusted segments and stuck
#'   locks". Each process chooses its own.
#' @param name The name of a breaker (as given to [circuit_breaker()], or the
#'   `"host:port"` key of [breaker_for()]), at most 80 bytes.
#' @param store A store from `breaker_store_host()`; for
#'   `breaker_store_unlink()`, also one from [breaker_store_redis()] (see its
#'   "Keys" section).
#' @return `breaker_store_host()` and `breaker_store_process()`: a store
#'   object. `breaker_store_unlink()`: `TRUE` if a file (for a Redis store,
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
