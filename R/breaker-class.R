# The CircuitBreaker R6 class and circuit_breaker(): the user's view of one
# breaker. The view holds no state of its own: the C++ core holds the state
# machine (behind `ptr`), and the breaker's R-side settings and listeners live
# in its `core` environment (breaker-core.R). The registry keeps only `core`
# and builds a view on demand (see breaker_view()), so a registered breaker
# costs about 3 KB instead of the 12 KB it cost with its R6 object.

#' @include breaker-core.R breaker-execute.R breaker-async.R breaker-events.R
#' @include breaker-format.R breaker-clock.R
NULL

# A method that applies one manual control (`op`, a call on `ptr` that
# returns whether listeners want to hear of a transition) and returns the
# breaker. The call is written into the body: R6 gives each method the
# object's enclosing environment, so the method cannot capture it.
control_method <- function(op) {
  eval(bquote(function() {
    if (.(substitute(op))) emit_transitions(core)
    invisible(self)
  }))
}

#' Circuit breakers
#'
#' @description
#' A circuit breaker guards calls to a dependency (an HTTP service, a
#' database). While the dependency works, calls go through (`CLOSED`). After
#' `failure_threshold` consecutive failures the breaker opens (`OPEN`): calls
#' are not made and `execute()` answers at once with the fallback. Once more
#' than `recovery_timeout` seconds have passed, the next call goes through as a
#' probe (`HALF_OPEN`): its success closes the breaker, its failure opens it
#' again.
#'
#' With default arguments a breaker behaves exactly like the `CircuitBreaker`
#' R6 class from the article this package follows: same states, same
#' `failure_count`, same moment of the `OPEN` to `HALF_OPEN` move (lazily, on
#' the next call once *more than* `recovery_timeout` seconds have passed). The
#' state machine runs in C++; the R object is a thin wrapper around it.
#'
#' `circuit_breaker()` and `CircuitBreaker$new()` take the same arguments and
#' return the same object.
#'
#' @section Rules beyond the original class:
#' * **Failure rate**: with `failure_rate_threshold`, the breaker also opens
#'   when the share of failures among the calls in a sliding window reaches the
#'   threshold, once the window holds at least `minimum_calls` calls. The
#'   window holds the last `window_size` calls (`window_type = "count"`, at most
#'   1024) or the calls of the last `window_size` seconds (`"time"`, kept in 10
#'   buckets). Use `failure_threshold = Inf` to rely on the rate alone.
#' * **Slow calls**: a call taking longer than `slow_call_duration` seconds
#'   (on the breaker's clock) is slow; with `slow_call_rate_threshold`, the
#'   share of slow calls in the window opens the breaker like the failure rate.
#' * **Probes**: `half_open_max_calls` probes are admitted in `HALF_OPEN`; the
#'   breaker closes when that many have succeeded and opens again on the first
#'   failure (or slow probe, when the slow-call rule is on). A probe not settled
#'   within `half_open_max_wait` seconds counts as failed, so a lost probe can
#'   never leave the breaker stuck.
#' * **Backoff**: each consecutive re-opening multiplies the open duration by
#'   `backoff_multiplier`, up to `max_recovery_timeout`; `jitter` shortens each
#'   opening by a random share of up to `jitter` so that many processes do not
#'   probe at once. Closing resets the duration.
#' * **Ramp-up**: for `ramp_up` seconds after closing, only a linearly growing
#'   share of calls is admitted (the others are rejected as if open), so that a
#'   recovering dependency is not hit by the whole backlog at once.
#'
#' @section Health checks:
#' With `health_check`, an open breaker need not wait out `recovery_timeout`:
#' the check runs every `health_interval` seconds, the first one
#' `health_interval` seconds after this process saw the breaker open (the
#' transition, a rejected call, or a shared breaker found open when it is
#' created here). A check that returns `TRUE` closes the breaker at once, as
#' the last successful probe would (the failure count and the backoff start
#' over, `ramp_up` applies), even when `half_open_max_calls` asks for several
#' probes: a health check is a deliberate check of the whole service. Any
#' other value, or an error, is a failure: the breaker stays open and its
#' timer and backoff are left as they are (the probe still comes when the
#' open period ends). A result that arrives after the breaker left that open
#' period (a probe, `$reset()`, a new opening) changes nothing. The transition
#' a check makes has the `reason` `"health_check"` (in `$transitions()` and
#' the `"state_change"` event); each check sends a `"health_check"` event
#' (see [breaker_events]) and is counted in `$metrics()`
#' (`health_checks_passed`, `health_checks_failed`, `health_checks_late`,
#' `last_health_check`, `seconds_since_health_check`) and
#' [breaker_prometheus()].
#'
#' The check runs on the event loop, so while it runs the process serves
#' nothing else: give it its own short timeout (for example
#' `httr2::req_timeout()`). One breaker never runs two checks at once in a
#' process. A breaker with a check hears its own events (as one with
#' listeners does), so each rejected call builds its condition object. For a
#' breaker shared by the host's processes
#' ([breaker_store_host()]) the processes take turns through a lease in the
#' shared state: one process runs each interval's check, a process that dies
#' holding the lease holds it for one interval at most, and every process
#' sees the close. For a fleet ([breaker_store_redis()]) the lease is
#' fleet-wide, a key in Redis that expires after `health_interval`: one
#' process of the fleet runs each interval's check (taking the lease costs
#' that process one round trip to Redis per interval, on the event loop,
#' within the store's `timeout`), and a pass closes the fleet's breaker, as a
#' manual command travels, if the fleet is still in the open period that
#' process knew. While Redis cannot be reached the store is on local rules:
#' each process that runs the check runs it once per interval.
#'
#' @section Outcomes:
#' An error in `request_func` is a failure, unless it inherits from one of the
#' classes in `ignore`, or is an HTTP error (httr2's `httr2_http_*`, httr's
#' `http_*`) for a status not in `failure_statuses`: then it propagates
#' unchanged and counts nowhere. A returned value is a success, unless it is an
#' HTTP response (httr's `response`, httr2's `httr2_response`, the list from
#' `curl::curl_fetch_memory()`) whose status is in `failure_statuses`, or
#' `failure_when(value)` is `TRUE`. A failed value goes to the fallback as the
#' `value` field of a `circuit_breaker_failed_value` condition
#' (`circuit_breaker_http_failure` for a response, which also has `response`
#' and `status`); without a fallback the value itself is returned.
#'
#' @param failure_threshold Consecutive failures that open the breaker: a whole
#'   number of at least 1, or `Inf` to turn this rule off.
#' @param recovery_timeout Seconds the breaker stays open before the next call
#'   may probe (the probe happens once *more than* this has passed).
#' @param failure_rate_threshold `NULL` (off) or a share in (0, 1]: open when
#'   failures / calls in the window reach it.
#' @param window_type `"count"` (the last `window_size` calls) or `"time"`
#'   (the calls of the last `window_size` seconds).
#' @param window_size Calls (count window, 1 to 1024, default 100) or seconds
#'   (time window, default 60). `NULL` for the default.
#' @param minimum_calls Calls the window must hold before the rate rules apply.
#'   `NULL` for the default, 20 (or the window size, if smaller).
#' @param slow_call_duration `NULL` or seconds: calls slower than this are slow.
#' @param slow_call_rate_threshold `NULL` (off) or a share in (0, 1]: open when
#'   slow calls / calls in the window reach it. Needs `slow_call_duration`.
#' @param half_open_max_calls Probes admitted in `HALF_OPEN`, 1 to 32.
#' @param half_open_max_wait `NULL` or seconds after which an unsettled probe
#'   counts as failed. With `NULL`, a probe made by `$execute()` never expires
#'   (it always settles: an interrupt releases it), and a probe made by
#'   `$execute_async()` expires after `timeout` seconds, or after
#'   `recovery_timeout` when `timeout` is `NULL`, so that a promise that never
#'   settles cannot hold the breaker in `HALF_OPEN`. An expired probe re-opens
#'   the breaker as of the moment it expired.
#' @param backoff_multiplier Factor (at least 1) applied to the open duration
#'   on each consecutive re-opening.
#' @param max_recovery_timeout `NULL` or the longest open duration in seconds
#'   (at least `recovery_timeout`).
#' @param jitter Share (0 to 1) by which each open duration may be randomly
#'   shortened.
#' @param ramp_up Seconds over which calls are let back in after closing; 0 is
#'   off.
#' @param health_interval Seconds between health checks while the breaker is
#'   open (only with a `health_check`): a number in (0, 1e9].
#' @param max_concurrent `NULL` (no limit), a whole number from 1 to 64, or
#'   [share()]`(p)`: a bulkhead, at most that many calls through this breaker
#'   at once. Its scope is the store's: per process for the process store,
#'   host-wide for the host store (every process on the host that uses the
#'   breaker shares the permits; `share(p)` is a share of those processes),
#'   and per host for the fleet store too (the processes of a host that use
#'   the same fleet breaker share its permits, without a round trip to Redis
#'   per call; hosts do not share them; see [breaker_store_redis()]). A call
#'   that finds every permit held is rejected with a
#'   `circuit_breaker_full` condition (given to the fallback, like
#'   `circuit_breaker_open`; both inherit `circuit_breaker_rejected`), which
#'   is not a failure of the dependency: it changes no state of the breaker
#'   and counts only in `$metrics()$rejected_full`. An OPEN breaker still
#'   rejects as open first. A permit is a lease, given back when the call
#'   returns, fails or is interrupted, when an asynchronous call's promise
#'   settles or its mirai is cancelled, and, for the host and fleet stores,
#'   when its holder process dies (by the next call that finds the bulkhead
#'   full).
#' @param max_wait Seconds a call (`$execute()`) may wait for a bulkhead
#'   permit before it is rejected; 0 rejects at once. The wait polls with a
#'   short backoff (5 to 100 ms), never holds a lock, and an interrupt ends
#'   it. `$execute_async()` never waits.
#' @param failure_when `NULL` or a function of the request's return value that
#'   returns `TRUE` when the value counts as a failure.
#' @param ignore `NULL`, a character vector of condition classes, or a
#'   function of the condition that returns `TRUE` for an error that counts
#'   neither as success nor as failure (it propagates, or goes to the
#'   fallback, without being recorded).
#' @param timeout `NULL` or seconds: the longest an HTTP call made through
#'   [breaker_perform()] or [breaker_fetch()] may take (set on the request or
#'   handle unless it already has a timeout). A timed-out call is a failure.
#' @param failure_statuses HTTP status codes that make a response (or an
#'   httr2/httr HTTP error) a failure. Other statuses are successes (the
#'   downstream answered); HTTP errors raised for them propagate and count
#'   nowhere.
#' @param respect_retry_after If `TRUE`, a 429 or 503 response with a
#'   `Retry-After` header that opens the breaker keeps it open at least that
#'   long, up to `max_recovery_timeout` (one hour when that is `NULL`).
#' @param health_check `NULL` or a function of no arguments that returns
#'   `TRUE` when the dependency is healthy. While the breaker is `OPEN` it
#'   runs every `health_interval` seconds on the event loop of the
#'   [later](https://later.r-lib.org) package (plumber and Shiny run one; in a
#'   script, [later::run_now()] runs it), never inside a call of
#'   `$execute()`. See "Health checks" below.
#' @param clock `NULL` (the monotonic system clock) or a clock from
#'   [breaker_manual_clock()].
#' @param name `NULL` or a single string naming the breaker in messages and
#'   metrics. A named breaker is registered (see [breaker_for()]). A breaker
#'   shared by a host or a fleet ([breaker_store_host()],
#'   [breaker_store_redis()]) needs a name of at most 80 bytes (in UTF-8;
#'   an error of class `circuit_breaker_name_too_long` otherwise): one limit
#'   for both shared stores, chosen so that the host store's file name fits the
#'   file system's 255 bytes whatever the name's bytes are. A breaker of the
#'   process store may have a name of up to 1000 bytes (room for any
#'   `"host:port"` of [breaker_for()]). Messages show the first 50
#'   characters of a name.
#' @param store Where the breaker's state lives, one of three stores: `NULL`
#'   or [breaker_store_process()] for a breaker of this process;
#'   [breaker_store_host()] for one shared by every process on the host, or
#'   [breaker_store_redis()] for one shared by every process of a fleet of
#'   hosts, that creates a breaker with the same `name` (which a shared
#'   breaker needs), the same store and the same rule arguments.
#' @return A `CircuitBreaker` object.
#'
#' @examples
#' cb <- circuit_breaker(failure_threshold = 2, recovery_timeout = 10)
#' flaky <- function() stop("connection refused")
#' cb$execute(flaky, function() "cached answer")
#' cb$execute(flaky, function() "cached answer")
#' cb$state
#' # Open: the request is not even called.
#' cb$execute(function() stop("not called"), function() "cached answer")
#'
#' # The fallback may take the condition that explains why it was called.
#' cb$execute(flaky, function(cond) class(cond)[1])
#' @export
circuit_breaker <- function(...) {
  # The formals are those of CircuitBreaker$new(), set when the package loads
  # from the C++ core's argument table (see breaker_formals()).
  do.call(CircuitBreaker$new, as.list(environment()))
}

#' @rdname circuit_breaker
#' @format NULL
#' @usage NULL
#' @section Methods:
#' * `$execute(request_func, fallback_func = NULL)`: calls `request_func()`
#'   through the breaker. Returns its value, or the fallback's when the call
#'   was rejected or failed. Without a fallback, a rejected call signals a
#'   `circuit_breaker_open` (or, refused by a full bulkhead,
#'   `circuit_breaker_full`) error, both of class `circuit_breaker_rejected`,
#'   and a failed call's error propagates unchanged (after being recorded).
#'   `fallback_func` takes no argument, or one: the condition (the request's
#'   error, a `circuit_breaker_open` or `circuit_breaker_full` condition, or
#'   a `circuit_breaker_failed_value` condition).
#' * `$execute_async(request_func, fallback_func = NULL, immediate_fallback = FALSE)`:
#'   the same for a `request_func` that returns a promise, a mirai
#'   (`mirai::mirai()`), or anything else `promises::as.promise()` accepts (or
#'   a plain value); returns a promise (see [breaker_perform_async()] for
#'   `immediate_fallback`). An error inside a mirai, or a mirai that timed
#'   out (its `.timeout`), is a failure, and counts as slow when it took longer
#'   than `slow_call_duration`. A mirai stopped with `mirai::stop_mirai()` was
#'   abandoned: its permit is released (a probe's slot is free at once),
#'   nothing is counted but `released`, and the promise rejects with mirai's
#'   error.
#' * `$on_success()`, `$on_failure()`: record an outcome by hand, as in the
#'   original R6 class (a success closes an open breaker).
#' * `$reset()`: back to `CLOSED`, failure count zeroed. `$force_open()`:
#'   reject every call until `$reset()`. `$disable()`: let every call through
#'   and record nothing until `$reset()`.
#' * `$configure(...)`: change arguments (same names as above except `clock`,
#'   `name` and `store`); the state is kept. A rejected change changes
#'   nothing. On a host- or fleet-shared breaker only the arguments of this
#'   process (`failure_when`, `ignore`, `timeout`, `failure_statuses`,
#'   `respect_retry_after`) can change: see [breaker_store_host()] and
#'   [breaker_store_redis()].
#' * `$metrics()`: a named list: name, store (`"process"`, `"host"` or
#'   `"redis"`), state, counts, rates, timings; for a fleet breaker also
#'   `mode`, `sync_lag`, `last_sync`, the fleet's counts, `last_error`
#'   (the last failure of the link to Redis, without the password; `NA`
#'   when there was none), `topology`, `master` and `masters` (see
#'   "Topologies and failover" in `vignette("shared-stores", package = "circuitbreaker")`).
#' * `$transitions()`: the last 32 state transitions (a data frame: `seq`,
#'   `seconds_ago`, `from`, `to`, `reason`: `"health_check"` for a close a
#'   health check made, else `NA`). `$history()`: calls, failures, slow calls
#'   and rejections in 5-second buckets over the last five minutes. See
#'   [plot.CircuitBreaker()].
#' * `$on(event, callback)`, `$off(id)`: listeners, see [breaker_events].
#'
#' Fields: `state`, `failure_count`, `last_failure_time` (`POSIXct`, or `NULL`
#' before any failure), `failure_threshold`, `recovery_timeout`, `name`,
#' `config`. They are read from the C++ state on each access. Assigning
#' `failure_threshold` or `recovery_timeout` reconfigures the breaker;
#' `state` and `failure_count` are read-only (use the methods).
#' @export
CircuitBreaker <- R6::R6Class("CircuitBreaker",
  cloneable = FALSE,
  public = list(
    #' @description Create a breaker; see [circuit_breaker()] for arguments.
    initialize = function(...) {
      # The formals are replaced when the package loads (breaker_formals()).
      args <- as.list(environment())
      adopted <- view_pending$core
      view_pending$core <- NULL
      core <- adopted %||% new_breaker_core(args, call = environment())
      # The methods' shared enclosing environment (beside `self`) is where
      # they find `core`, and `ptr`: the core's external pointer, never
      # replaced, kept here so that execute() finds it as a plain variable.
      enclos <- parent.env(environment())
      enclos$core <- core
      enclos$ptr <- core$ptr
      core$view <- rlang::new_weakref(self)
      if (is.null(adopted) && !is.null(core$name)) registry_add(core)
      invisible(self)
    },

    execute = breaker_execute,
    execute_async = breaker_execute_async,

    on_success = control_method(cb_note(ptr, OUTCOME_SUCCESS)),
    on_failure = control_method(cb_note(ptr, OUTCOME_FAILURE)),
    reset = control_method(cb_reset(ptr)),
    force_open = control_method(cb_force_open(ptr)),
    disable = control_method(cb_disable(ptr)),

    configure = function(...) {
      breaker_configure(core, list(...), call = rlang::current_call())
      invisible(self)
    },
    metrics = function() breaker_metrics(core),
    transitions = function() breaker_transitions(core),
    history = function() breaker_history(core),
    on = function(event, callback) breaker_on(core, event, callback, call = rlang::current_call()),
    off = function(id) breaker_off(core, id, call = rlang::current_call()),

    format = function(...) format_breaker(breaker_metrics(core), breaker_config(core), core_store(core)),
    print = function(...) {
      cat(self$format(), sep = "\n")
      invisible(self)
    }
  ),

  active = list(
    state = function(value) {
      if (!missing(value)) {
        abort_read_only("state", "Use `$reset()`, `$force_open()` or `$disable()` to change it.")
      }
      cb_state(ptr)
    },
    failure_count = function(value) {
      if (!missing(value)) abort_read_only("failure_count", "Use `$reset()` to zero it.")
      cb_snapshot(ptr)$failure_count
    },
    last_failure_time = function(value) {
      if (!missing(value)) abort_read_only("last_failure_time", "It is set when a call fails.")
      ago <- cb_snapshot(ptr)$seconds_since_failure
      if (is.na(ago)) NULL else Sys.time() - ago
    },
    failure_threshold = function(value) {
      if (missing(value)) return(cb_arguments(ptr)$failure_threshold)
      breaker_configure(core, list(failure_threshold = value), call = NULL)
    },
    recovery_timeout = function(value) {
      if (missing(value)) return(cb_arguments(ptr)$recovery_timeout)
      breaker_configure(core, list(recovery_timeout = value), call = NULL)
    },
    name = function(value) {
      if (!missing(value)) abort_read_only("name", "Give the name when creating the breaker.")
      core$name
    },
    config = function(value) {
      if (!missing(value)) abort_read_only("config", "Use `$configure()` to change it.")
      breaker_config(core)
    }
  )
)

# The R6 object of a breaker's core: the one the user holds, if it is still
# alive, else a new one (a registered breaker keeps only its core, and the
# view is rebuilt on demand after the garbage collector took the old one).
breaker_view <- function(core) {
  view <- if (!is.null(core$view)) rlang::wref_key(core$view)
  if (!is.null(view)) return(view)
  view_pending$core <- core
  on.exit(view_pending$core <- NULL)
  CircuitBreaker$new()
}

# The core of a breaker's R6 object: the methods' shared enclosing
# environment holds it (initialize() above).
view_core <- function(view) view$.__enclos_env__$core

# Hands a core to the next CircuitBreaker$new(): R6's new() passes only the
# user's arguments to initialize().
view_pending <- new.env(parent = emptyenv())

# Every argument of circuit_breaker(), with its default: the C++ core's
# argument table (names and defaults defined once, in config_fields.hpp), then
# the R-side arguments (breaker-core.R), then `clock`, `name` and `store`.
breaker_formals <- function(table = cb_argument_table()) {
  core <- stats::setNames(table$default, table$name)
  r_side <- lapply(r_arguments, function(a) a$default)
  as.pairlist(c(core, r_side, list(clock = NULL, name = NULL, store = NULL)))
}

# Called from .onLoad(): gives CircuitBreaker$new() and circuit_breaker() the
# formals of the argument table.
install_breaker_formals <- function(ns, table) {
  args <- breaker_formals(table)
  init <- CircuitBreaker$public_methods$initialize
  formals(init) <- args
  CircuitBreaker$set("public", "initialize", init, overwrite = TRUE)
  fn <- get("circuit_breaker", envir = ns)
  formals(fn) <- args
  assign("circuit_breaker", fn, envir = ns)
}
