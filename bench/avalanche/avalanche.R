# The avalanche demonstration: a breaker keeps a plumber API serving
#
# A benchmark and demonstration harness, not part of the package: it uses only
# circuitbreaker's exported API (library(circuitbreaker)). Run it with
#   Rscript bench/avalanche/run.R --plot avalanche.png    (see run.R, or
#   bash tools/demo.sh), or source() this file and call avalanche_demo().
# It starts bench/avalanche/api.R and bench/avalanche/downstream.R, found next
# to this file (`avalanche_home`, set when this file is sourced).
#
# Shows, with real processes and real HTTP on 127.0.0.1, what a circuit
# breaker does for a single-threaded plumber API whose downstream service
# hangs and then fails, what happens without one, and why the guarded call
# should be asynchronous.
#
# The demonstration starts, each in its own background R process:
# * a **downstream** service (webfakes, several threads) that is healthy,
#   then *hangs* (answers only after `downstream_timeout + 1` seconds), then
#   *fails* (HTTP 503 at once), then is healthy again. This process switches
#   it from one phase to the next through a control endpoint.
# * four identical **plumber APIs** (`bench/avalanche/api.R`), each receiving
#   the traffic of one of its endpoints:
#   * `/trivial`: no downstream call, the physical limit of the process;
#   * `/guarded`: the downstream call, `curl::curl_fetch_memory()`, through a
#     breaker's `$execute()` with a fallback (synchronous);
#   * `/guarded-async`: the same call through a breaker of its own (same
#     settings) with `breaker_fetch_async()` and a fallback: the endpoint
#     returns a promise, which plumber serves asynchronously;
#   * `/unguarded`: the same call without a breaker (an error JSON when it
#     fails).
#
# Through each phase it loads the endpoints in turns of `slice_seconds`
# (trivial, guarded, guarded-async, unguarded, trivial, ...), keeping
# `concurrency` requests in flight at the endpoint whose turn it is
# (closed-loop load from this R process with curl's multi interface, every
# request with `Connection: close`). It then prints requests per second,
# median and 99th-percentile latencies, the shares of fallback answers and
# of errors, both breakers' state transitions and the headline checks (for
# each guarded endpoint), and draws the latencies over time.
#
# ## Why asynchronous matters
# While the breaker is open, both guarded endpoints answer with the fallback
# at once. But every `recovery_timeout` the breaker lets one probe through
# (`HALF_OPEN`), and while the downstream hangs that probe waits
# `downstream_timeout` seconds. In the synchronous `/guarded` the probe
# blocks the single-threaded process for all that time: every request
# arriving meanwhile queues behind it. With steady traffic that caps
# `/guarded` at about `recovery_timeout / (recovery_timeout +
# downstream_timeout)` of `/trivial`'s rate (95% with the defaults, a probe
# every 20 s and a 1 s timeout; 60% with a 3 s `recovery_timeout` and a 2 s
# timeout) in a long hanging phase, and the queued requests wait up to
# `downstream_timeout`.
#
# `/guarded-async` makes the same call with `curl::curl_fetch_multi()` as a
# promise polled on the `later` event loop, which plumber (httpuv) runs
# between requests: while the probe is in flight the process goes on serving,
# and the requests arriving meanwhile find the breaker's only probe slot
# (`half_open_max_calls = 1`) taken and get the fallback at once. Only the
# probe's own request waits. The asynchronous breaker also opens sooner when
# the downstream starts hanging: the calls in flight time out together, not
# one after the other.
#
# The price of the asynchronous endpoint is its cost per request: an
# endpoint that returns a promise costs the process several times the CPU
# of one that answers synchronously (the promises themselves, and httpuv's
# and plumber's asynchronous steps). `/guarded-async` therefore calls
# `breaker_fetch_async(..., immediate_fallback = TRUE)`: a call the open
# breaker rejects comes back as the fallback's plain value, which plumber
# serves as cheaply as a synchronous answer; only calls that are made pay
# for a promise. The report shows the comparison between probes, and
# `/guarded` answering the same fallback synchronously.
#
# ## Four processes, loaded in turns
# One plumber process serves one request at a time (an asynchronous
# endpoint lets it interleave requests, but not run two at once), so the
# four endpoints run in four identical processes: the unguarded endpoint's
# backlog (requests queued behind downstream calls that each block for
# `downstream_timeout` seconds) cannot delay the other endpoints, and each
# breaker lives on across turns and phases, seeing traffic in every round of
# turns, every `4 * slice_seconds` seconds (it moves from `OPEN` to
# `HALF_OPEN` lazily, on the next call).
#
# The processes are loaded in short turns rather than all at once because
# on a machine with few cores the busy processes compete for them: loaded
# together, `/trivial` runs faster whenever `/guarded` waits (and the reverse),
# and which process gets a core to itself decides the comparison. In turns,
# each endpoint is measured with the machine to itself (and this process).
# A request still in flight when its endpoint's turn ends (say, one waiting
# behind a probe) just finishes later; it is not replaced until the next
# turn.
#
# ## Latencies and keep-alive
# httpuv (under plumber) with keep-alive clients shows stalls of about 40 ms
# per request (delayed ACK); every request of the demonstration sends
# `Connection: close` and uses a fresh connection. Latency is curl's total
# time of the transfer; a request the client gave up on counts the time
# until it gave up. The client waits up to
# `(concurrency + 2) * downstream_timeout + 5` seconds, longer than the
# unguarded endpoint's queue can grow, so its latencies are measured, not
# cut off.
#
# ## What is measured
# * `req_per_s`: answers (any HTTP status) to the requests that started in
#   the phase that arrived during the endpoint's own turns, per second of
#   those turns (`turn_seconds`, about a quarter of the phase).
# * `p50_ms`, `p99_ms`, `fallback_share`, `error_share`: over the requests
#   that started in the phase. An error is a request without an HTTP answer
#   or with a status of 500 or more.
# * The headline checks, for `/guarded` and for `/guarded-async` each with
#   its own breaker. For the hanging and failing phases they count only the
#   requests that started after that endpoint's breaker opened: after the
#   phase's first `CLOSED` to `OPEN` transition. (If the phase began with
#   the breaker `OPEN`, the whole phase counts; if it began `HALF_OPEN`, with
#   a probe sent in the phase before still waiting, the count starts when
#   that probe failed.) Targets, for a quiet machine: the guarded endpoint
#   serves at least 90% of `/trivial`'s requests per second (over the same
#   span), with a p99 latency at most twice `/trivial`'s. All the processes
#   share the machine's cores, so a loaded machine can miss these speed
#   targets: the report says "missed here", and lists apart the behaviour
#   that holds on any machine (opened, fallbacks, closed again).
# * Requests count in the phase they were sent in. With the defaults the
#   healthy phase ends with `/unguarded`'s turn: the requests it still had
#   queued when the downstream switched to hanging wait a downstream timeout
#   each, in turn, and give that row a tail of seconds and some errors. The
#   report says how many and gives the row's figures without them.
# * `/unguarded` during the hanging phase should be limited by the
#   downstream timeout: at most one answer per `downstream_timeout`. Its
#   requests wait far longer than a turn, so it is busy the whole phase and
#   this check counts its answers over the whole phase.
# * After the downstream recovers, each breaker should close within one
#   `recovery_timeout` plus one probe (at most `downstream_timeout`).
#
# The report also gives, for each guarded endpoint, the comparison leaving
# out the time its breaker was `HALF_OPEN` (a probe in flight), which
# separates the cost of probing from the cost of answering with the
# fallback.
#
# nolint start: commented_code_linter. (documentation, in the style of roxygen)
# ## Arguments of avalanche_demo()
#
# phase_seconds Seconds of each phase: four positive numbers named
#   `healthy`, `hanging`, `failing` and `recovered` (in any order), or
#   unnamed in that order. Each at most 600.
# concurrency Requests kept in flight at each endpoint: a whole number
#   from 1 to 64.
# downstream_timeout Seconds the API waits for the downstream before
#   giving up (0.05 to 30). The hanging downstream answers one second later.
# recovery_timeout The breakers' `recovery_timeout`, in seconds (0.05
#   to 300).
# failure_threshold The breakers' `failure_threshold`: consecutive
#   failures that open them, a whole number from 1 to 100. Each failure
#   while the downstream hangs blocks the synchronous `/guarded` process for
#   `downstream_timeout` seconds, so its breaker opens about
#   `failure_threshold * downstream_timeout` seconds into the hanging phase;
#   `/guarded-async`'s calls time out concurrently, so its breaker opens
#   about `downstream_timeout` seconds after the first call (if
#   `concurrency` is at least `failure_threshold`).
# slice_seconds Length of each endpoint's turn, in seconds: from 0.05
#   to a quarter of the shortest phase, so that each endpoint has a turn in
#   every phase.
# plot_file `NULL` (no plot) or the path of the PNG file to write.
# quiet If `TRUE`, print nothing.
# ## Value
#
# Invisibly, a list:
#   * `requests`: one row per request: `endpoint` (`"trivial"`,
#     `"guarded"`, `"guarded-async"` or `"unguarded"`), `phase`, `start` and
#     `end` (seconds since the healthy phase began; `end` is `NA` for a
#     request still unanswered when the run ended), `latency_ms`, `status`
#     (HTTP status, 0 for none), `fallback`, `error`.
#   * `summary`: one row per phase and endpoint with `seconds` (of the
#     phase), `requests`, `turn_seconds`, `req_per_s`, `p50_ms`, `p99_ms`,
#     `fallback_share`, `error_share` and `transitions` (the endpoint's
#     breaker's, on the guarded endpoints' rows).
#   * `transitions`: both breakers' state changes: `endpoint` (`"guarded"`
#     or `"guarded-async"`), `time` (seconds since the healthy phase began),
#     `phase`, `from`, `to`.
#   * `checks`: a list with `passed` (named logical) and `values` (named
#     numbers) for the headline checks, and `state_at_start` (each breaker's
#     state when the hanging and failing phases began). The names of the
#     guarded endpoints' checks begin with `guarded_` or `guarded_async_`:
#     `<prefix>_hanging_req_per_s_share`, `<prefix>_hanging_p99_ratio`, the
#     same for `failing`, `<prefix>_opened_during_outage`,
#     `<prefix>_fallbacks_while_open`, `<prefix>_closed_after_recovery` and
#     `<prefix>_closed_within_target`; those of `/unguarded` with
#     `unguarded_`.
#   * `phases`: the phases' actual start and end times; `turns`: each
#     endpoint's turns (`endpoint`, `phase`, `start`, `end`).
#   * `breaker_metrics`: each breaker's `$metrics()` at the end of the run, a
#     list named `guarded` and `guarded-async`.
#   * `plot_file`: the PNG's path, or `NULL`.
#
# ## Examples
#
# source("bench/avalanche/avalanche.R")
# res <- avalanche_demo()
# res$summary
# res$checks$passed
#
# # A short run without output.
# res <- avalanche_demo(
#   phase_seconds = c(healthy = 2, hanging = 3, failing = 3, recovered = 3),
#   concurrency = 4, downstream_timeout = 0.5, recovery_timeout = 1,
#   plot_file = tempfile(fileext = ".png"), quiet = TRUE
# )
# nolint end
avalanche_demo <- function(phase_seconds = c(healthy = 10, hanging = 30,
                                             failing = 20, recovered = 25),
                           concurrency = 8, downstream_timeout = 1,
                           recovery_timeout = 20, failure_threshold = 3,
                           slice_seconds = 0.5, plot_file = "avalanche.png",
                           quiet = FALSE) {
  call <- rlang::current_env()
  phase_seconds <- avalanche_check_phases(phase_seconds, call = call)
  concurrency <- avalanche_check_whole(concurrency, "concurrency", 1, 64, call = call)
  avalanche_check_number(downstream_timeout, "downstream_timeout", 0.05, 30, call = call)
  avalanche_check_number(recovery_timeout, "recovery_timeout", 0.05, 300, call = call)
  failure_threshold <- avalanche_check_whole(failure_threshold, "failure_threshold", 1, 100, call = call)
  avalanche_check_number(slice_seconds, "slice_seconds", 0.05,
                         max(0.05, min(phase_seconds) / length(avalanche_endpoints)), call = call)
  if (!is.null(plot_file) &&
      (!is.character(plot_file) || length(plot_file) != 1L || is.na(plot_file) ||
       !nzchar(plot_file) || !dir.exists(dirname(plot_file)))) {
    avalanche_bad_argument("plot_file", "`NULL` or the path of a file in an existing directory",
                           plot_file, call = call)
  }
  if (!is.logical(quiet) || length(quiet) != 1L || is.na(quiet)) {
    avalanche_bad_argument("quiet", "`TRUE` or `FALSE`", quiet, call = call)
  }
  avalanche_check_packages(call = call)
  say <- if (quiet) function(...) invisible(NULL) else function(...) cat(..., sep = "")

  hang <- downstream_timeout + 1
  client_timeout <- (concurrency + 2) * downstream_timeout + 5
  # The processes quit by themselves after this, whatever happens here.
  lifetime <- sum(phase_seconds) + client_timeout + 120

  # Everything started below is stopped on the way out, also on an error or
  # an interrupt.
  procs <- new_stoppers()
  on.exit(procs$stop_all(), add = TRUE)

  downstream <- avalanche_start_downstream(hang, procs)
  apis <- avalanche_start_apis(
    avalanche_endpoints,
    env = c(
      AVALANCHE_DOWNSTREAM_URL = downstream$url("/data"),
      AVALANCHE_DOWNSTREAM_TIMEOUT = format(downstream_timeout, digits = 15),
      AVALANCHE_FAILURE_THRESHOLD = format(failure_threshold),
      AVALANCHE_RECOVERY_TIMEOUT = format(recovery_timeout, digits = 15),
      AVALANCHE_MAX_LIFETIME = format(lifetime)
    ),
    procs = procs
  )
  urls <- vapply(names(apis), function(ep) paste0(apis[[ep]]$base, "/", ep), character(1))

  avalanche_header(say, downstream, apis, phase_seconds, concurrency, downstream_timeout,
                   hang, recovery_timeout, failure_threshold, slice_seconds, client_timeout)

  # Warm-up (not measured): the first calls of a fresh R process are slower.
  avalanche_warm_up(urls)

  run <- avalanche_drive(urls, downstream, phase_seconds, concurrency, slice_seconds,
                         client_timeout, say)
  breaker_info <- lapply(stats::setNames(nm = names(avalanche_guarded)), function(ep) {
    avalanche_get_json(paste0(apis[[ep]]$base, "/breaker?endpoint=", ep))
  })
  procs$stop_all()

  result <- avalanche_analyse(run, breaker_info, downstream_timeout, recovery_timeout)
  if (!is.null(plot_file)) {
    avalanche_plot(result, plot_file, downstream_timeout)
    result$plot_file <- plot_file
  } else {
    result["plot_file"] <- list(NULL)
  }
  if (!quiet) avalanche_report(result, downstream_timeout, recovery_timeout, slice_seconds)
  invisible(result)
}

# The directory of this file, where api.R and downstream.R are: source() keeps
# the path it reads in `ofile`, sys.source() in `file`. NA when this file was
# evaluated some other way (then set `avalanche_home` before running).
avalanche_home <- local({
  home <- NA_character_
  for (i in rev(seq_len(sys.nframe()))) {
    fun <- sys.function(i)
    frame <- sys.frame(i)
    var <- if (identical(fun, base::source)) "ofile" else if (identical(fun, base::sys.source)) "file" else ""
    if (nzchar(var) && exists(var, envir = frame, inherits = FALSE)) {
      path <- get(var, envir = frame, inherits = FALSE)
      if (is.character(path) && length(path) == 1L && file.exists(path)) {
        home <- normalizePath(dirname(path), mustWork = TRUE)
        break
      }
    }
  }
  home
})

# What the benchmarks share (bench/harness/, next to this file's folder):
# new_stoppers(), start_plumber(), start_ready(), start_webfakes();
# request_handle(), get_json(); now().
for (file in c("processes.R", "http.R", "clock.R")) {
  source(file.path(avalanche_home, "..", "harness", file), local = TRUE)
}

# A bad argument: the same message as the package's own checks, but a
# condition of the harness (it is not part of the package).
avalanche_bad_argument <- function(arg, must, value, call = NULL) {
  cli::cli_abort(
    "{.arg {arg}} must be {must}, not {avalanche_describe(value)}.",
    class = c("avalanche_invalid_argument", "avalanche_error"),
    argument = arg,
    call = call
  )
}

# A short description of a value for error messages.
avalanche_describe <- function(x) {
  if (is.null(x)) return("NULL")
  if (is.function(x)) return("a function")
  if (is.object(x)) return(paste0("an object of class <", paste(class(x), collapse = "/"), ">"))
  if (is.atomic(x) && length(x) == 1L) {
    if (is.na(x)) return("`NA`")
    return(switch(typeof(x),
      logical = paste0("`", x, "`"),
      integer = ,
      double = paste0("the number ", format(x, digits = 15)),
      character = if (nzchar(x)) paste0("the string \"", x, "\"") else "an empty string",
      paste0("a ", typeof(x), " value")
    ))
  }
  kind <- switch(typeof(x),
    logical = "a logical vector", integer = , double = "a numeric vector",
    character = "a character vector", list = "a list", paste("an object of type", typeof(x)))
  paste(kind, "of length", length(x))
}

# Phase names and the downstream mode of each.
avalanche_phase_names <- c("healthy", "hanging", "failing", "recovered")
avalanche_phase_modes <- c(healthy = "healthy", hanging = "hanging", failing = "failing",
                           recovered = "healthy")
# The endpoints, in the order of their turns.
avalanche_endpoints <- c("trivial", "guarded", "guarded-async", "unguarded")
# The guarded endpoints (each with a breaker of its own) and the prefixes of
# their checks' names.
avalanche_guarded <- c(guarded = "guarded", "guarded-async" = "guarded_async")

# At most this many requests per second are started at one endpoint (a bound
# on the number of requests, far above what a plumber process serves).
avalanche_max_rate <- 5000

# ---------------------------------------------------------------------------
# Argument checks

avalanche_check_phases <- function(x, call) {
  must <- paste0("four positive numbers (at most 600) named ",
                 paste0("`", avalanche_phase_names, "`", collapse = ", "))
  if (!is.numeric(x) || is.object(x) || length(x) != 4L || anyNA(x) || any(!is.finite(x)) ||
      any(x <= 0) || any(x > 600)) {
    avalanche_bad_argument("phase_seconds", must, x, call = call)
  }
  nms <- names(x)
  if (is.null(nms)) {
    names(x) <- avalanche_phase_names
  } else if (!setequal(nms, avalanche_phase_names) || anyDuplicated(nms)) {
    avalanche_bad_argument("phase_seconds", must, x, call = call)
  }
  stats::setNames(as.numeric(x[avalanche_phase_names]), avalanche_phase_names)
}

avalanche_check_number <- function(x, arg, min, max, call) {
  if (!is.numeric(x) || is.object(x) || length(x) != 1L || is.na(x) || !is.finite(x) ||
      x < min || x > max) {
    avalanche_bad_argument(arg, paste("a single number from", format(min, digits = 3), "to",
                                      format(max, digits = 3)), x, call = call)
  }
  invisible(x)
}

avalanche_check_whole <- function(x, arg, min, max, call) {
  if (!is.numeric(x) || is.object(x) || length(x) != 1L || is.na(x) || !is.finite(x) ||
      x != round(x) || x < min || x > max) {
    avalanche_bad_argument(arg, paste("a whole number from", min, "to", max), x, call = call)
  }
  as.integer(x)
}

avalanche_check_packages <- function(call) {
  needed <- c("plumber", "webfakes", "callr", "curl", "httpuv", "jsonlite", "later", "promises")
  missing <- needed[!vapply(needed, requireNamespace, logical(1), quietly = TRUE)]
  if (length(missing)) {
    install <- paste0("install.packages(", paste(deparse(missing), collapse = ""), ")")  # nolint: object_usage_linter.
    cli::cli_abort(
      c("{.fn avalanche_demo} needs the {.pkg {missing}} package{?s}, which {?is/are} not installed.",
        i = "Install {cli::qty(length(missing))}{?it/them} with {.code {install}}."),
      class = c("avalanche_missing_package", "avalanche_error"),
      call = call
    )
  }
}

avalanche_abort <- function(message, details = NULL) {
  cli::cli_abort(
    c(message, details),
    class = c("avalanche_failed", "avalanche_error"),
    call = NULL
  )
}

# ---------------------------------------------------------------------------
# Background processes

# The scripts started in the background processes, next to this file.
avalanche_script <- function(name) {
  home <- avalanche_home
  path <- if (!is.na(home)) file.path(home, name) else ""
  if (!nzchar(path) || !file.exists(path)) {
    avalanche_abort(
      paste0("Cannot find {.file ", name, "} next to the avalanche harness."),
      c(i = paste0("`avalanche_home` is ", if (is.na(home)) "unknown" else paste0("\"", home, "\""),
                   "; source() bench/avalanche/avalanche.R from its file, or set `avalanche_home`."))
    )
  }
  path
}

avalanche_start_downstream <- function(hang, procs) {
  env <- new.env(parent = baseenv())
  sys.source(avalanche_script("downstream.R"), envir = env)
  # Threads: hanging requests hold one each until they are answered, also
  # after the API gave up on them (about hang / downstream_timeout per API).
  process <- start_webfakes(env$avalanche_downstream_app(hang), procs, num_threads = 16)
  list(
    url = function(path) process$url(path),
    mode = function(mode) avalanche_get_json(process$url(paste0("/mode?set=", mode))),
    stats = function() avalanche_get_json(process$url("/stats"))
  )
}

# Starts one API process per endpoint, on random free ports, and waits (up to
# 30 s each) until each answers. A process that cannot bind its port (taken
# between the choice and the bind) is restarted on another port, up to three
# times in all.
avalanche_start_apis <- function(endpoints, env, procs) {
  api_file <- avalanche_script("api.R")
  apis <- list()
  for (ep in endpoints) {
    apis[[ep]] <- start_ready(
      function() start_plumber(api_file, env, procs, log_prefix = "avalanche-api-"), "/trivial", 30,
      fail = function(api) {
        avalanche_abort(paste0("The plumber API for {.code /", ep, "} did not start."),
                        c(i = paste(utils::tail(api$errors(), 8), collapse = "\n")))
      }
    )
  }
  apis
}

# A harness error (avalanche_failed) for an answer other than HTTP 200.
avalanche_get_json <- function(url) get_json(url, fail = avalanche_abort)

avalanche_warm_up <- function(urls) {
  for (url in urls) {
    for (i in 1:20) try(curl::curl_fetch_memory(url, handle = request_handle(5)), silent = TRUE)
  }
}

# ---------------------------------------------------------------------------
# The load

# Loads the endpoints in turns of `slice_seconds` (round robin), keeping
# `concurrency` requests in flight at the endpoint whose turn it is (a new one
# starts when one ends), and switches the downstream at each phase boundary.
# Requests of the other endpoints still in flight finish on their own and
# are not replaced. Returns the raw records and the phases' actual times.
avalanche_drive <- function(urls, downstream, phase_seconds, concurrency, slice_seconds,
                            client_timeout, say) {
  endpoints <- names(urls)
  n_phases <- length(phase_seconds)
  cap <- ceiling(phase_seconds * avalanche_max_rate) + concurrency

  # Records, grown by doubling (assignments with <<- modify in place).
  size <- 10000L
  rec_ep <- integer(size)
  rec_phase <- integer(size)
  rec_start <- rec_end <- rec_latency <- rep(NA_real_, size)
  rec_status <- integer(size)
  rec_fallback <- logical(size)
  n <- 0L
  grow <- function() {
    extra <- size
    rec_ep <<- c(rec_ep, integer(extra))
    rec_phase <<- c(rec_phase, integer(extra))
    rec_start <<- c(rec_start, rep(NA_real_, extra))
    rec_end <<- c(rec_end, rep(NA_real_, extra))
    rec_latency <<- c(rec_latency, rep(NA_real_, extra))
    rec_status <<- c(rec_status, integer(extra))
    rec_fallback <<- c(rec_fallback, logical(extra))
    size <<- size + extra
  }

  pool <- curl::new_pool(total_con = length(urls) * concurrency + 4L,
                         host_con = length(urls) * concurrency + 4L, multiplex = FALSE)
  on.exit(for (h in curl::multi_list(pool)) try(curl::multi_cancel(h), silent = TRUE), add = TRUE)
  in_flight <- stats::setNames(integer(length(urls)), endpoints)
  started <- matrix(0L, length(urls), n_phases, dimnames = list(endpoints, names(phase_seconds)))
  phase <- 1L
  active <- 0L
  t0 <- now()
  # The guarded endpoints' answers say whether they are the fallback.
  has_fallback <- endpoints %in% names(avalanche_guarded)
  fallback_marker <- "\"fallback\":true"

  launch <- function(e) {
    if (e != active || started[e, phase] >= cap[[phase]]) return(invisible(FALSE))
    started[e, phase] <<- started[e, phase] + 1L
    n <<- n + 1L
    if (n > size) grow()
    i <- n
    rec_ep[i] <<- e
    rec_phase[i] <<- phase
    rec_start[i] <<- now() - t0
    in_flight[e] <<- in_flight[e] + 1L
    curl::curl_fetch_multi(
      urls[[e]],
      done = function(res) {
        rec_end[i] <<- now() - t0
        rec_status[i] <<- res$status_code
        rec_latency[i] <<- res$times[["total"]]
        if (has_fallback[[e]]) rec_fallback[i] <<- grepl(fallback_marker, rawToChar(res$content), fixed = TRUE)
        in_flight[e] <<- in_flight[e] - 1L
        launch(e)
      },
      fail = function(msg) {
        rec_end[i] <<- now() - t0
        rec_latency[i] <<- rec_end[i] - rec_start[i]
        in_flight[e] <<- in_flight[e] - 1L
        launch(e)
      },
      pool = pool,
      handle = request_handle(client_timeout)
    )
    invisible(TRUE)
  }
  top_up <- function(e) {
    for (k in seq_len(concurrency)) {
      if (in_flight[e] >= concurrency || !launch(e)) break
    }
  }
  # curl's multi_run() checks a timeout in whole seconds (and spins below one
  # second), so it is only asked to poll (timeout = 0: run the callbacks of
  # finished requests, start the transfers due) and the loop sleeps half a
  # millisecond when nothing finished. Each iteration either ends a request
  # or sleeps, so the count is bounded by the requests allowed plus the
  # sleeps that fit in the time.
  run_until <- function(until) {
    max_iter <- sum(cap) + ceiling((until - (now() - t0)) / 0.0005) + 100L
    for (iter in seq_len(max_iter)) {
      remaining <- until - (now() - t0)
      if (remaining <= 0) break
      polled <- curl::multi_run(timeout = 0, pool = pool)
      if (polled$success + polled$error == 0L) Sys.sleep(min(remaining, 0.0005))
    }
  }

  turn <- 0L
  max_turns <- sum(ceiling(phase_seconds / slice_seconds - 1e-9))
  turn_ep <- integer(max_turns)
  turn_phase <- integer(max_turns)
  turn_start <- turn_end <- numeric(max_turns)
  phase_start <- phase_end <- stats::setNames(numeric(n_phases), names(phase_seconds))
  for (p in seq_len(n_phases)) {
    name <- names(phase_seconds)[[p]]
    downstream$mode(avalanche_phase_modes[[name]])
    if (p == 1L) t0 <- now()
    phase <- p
    phase_start[[p]] <- now() - t0
    if (p > 1L) phase_end[[p - 1L]] <- phase_start[[p]]
    # Phases and turns end at their planned times, so that a slow mode
    # switch does not stretch the run.
    planned_start <- sum(phase_seconds[seq_len(p - 1L)])
    stop_at <- planned_start + phase_seconds[[p]]
    n_turns <- ceiling(phase_seconds[[p]] / slice_seconds - 1e-9)
    for (k in seq_len(n_turns)) {
      active <- turn %% length(endpoints) + 1L
      turn <- turn + 1L
      turn_ep[turn] <- active
      turn_phase[turn] <- p
      turn_start[turn] <- now() - t0
      top_up(active)
      run_until(min(planned_start + k * slice_seconds, stop_at))
      turn_end[turn] <- now() - t0
    }
    say(sprintf("  [%d/%d] %-9s %6.1f - %6.1f s  started: %s\n", p, n_phases, name,
                phase_start[[p]], now() - t0,
                paste(sprintf("%s %d", endpoints, started[, p]), collapse = ", ")))
  }
  phase_end[[n_phases]] <- now() - t0

  # No new requests; wait for those in flight (bounded by the client timeout).
  active <- 0L
  drain_deadline <- now() + client_timeout + 2
  for (iter in seq_len(ceiling((client_timeout + 2) / 0.002) + length(urls) * concurrency)) {
    if (length(curl::multi_list(pool)) == 0L || now() > drain_deadline) break
    polled <- curl::multi_run(timeout = 0, pool = pool)
    if (polled$success + polled$error == 0L) Sys.sleep(0.002)
  }

  idx <- seq_len(n)
  turns <- seq_len(turn)
  list(
    t0 = t0,
    turns = data.frame(
      endpoint = endpoints[turn_ep[turns]],
      phase = names(phase_seconds)[turn_phase[turns]],
      start = turn_start[turns],
      end = turn_end[turns],
      stringsAsFactors = FALSE
    ),
    phases = data.frame(
      phase = names(phase_seconds),
      mode = unname(avalanche_phase_modes[names(phase_seconds)]),
      start = unname(phase_start),
      end = unname(phase_end),
      stringsAsFactors = FALSE
    ),
    requests = data.frame(
      endpoint = endpoints[rec_ep[idx]],
      phase = names(phase_seconds)[rec_phase[idx]],
      start = rec_start[idx],
      end = rec_end[idx],
      latency_ms = 1000 * rec_latency[idx],
      status = rec_status[idx],
      fallback = rec_fallback[idx],
      stringsAsFactors = FALSE
    )
  )
}

# ---------------------------------------------------------------------------
# Analysis

avalanche_analyse <- function(run, breaker_info, downstream_timeout, recovery_timeout) {
  phases <- run$phases
  requests <- run$requests
  requests$error <- requests$status == 0L | requests$status >= 500L

  # Both breakers' transitions, each breaker's in time order.
  transitions <- do.call(rbind, lapply(names(breaker_info), function(ep) {
    log <- breaker_info[[ep]]$log
    time <- as.numeric(unlist(log$time)) - run$t0
    data.frame(
      endpoint = rep(ep, length(time)),
      time = time,
      from = as.character(unlist(log$from)),
      to = as.character(unlist(log$to)),
      stringsAsFactors = FALSE
    )
  }))
  transitions <- transitions[order(match(transitions$endpoint, names(breaker_info)), transitions$time),
                             , drop = FALSE]
  transitions$phase <- avalanche_phase_of(transitions$time, phases)
  transitions <- transitions[, c("endpoint", "time", "phase", "from", "to")]
  rownames(transitions) <- NULL

  summary <- list()
  for (p in seq_len(nrow(phases))) {
    ph <- phases[p, ]
    for (ep in avalanche_endpoints) {
      tr <- transitions[transitions$endpoint == ep & transitions$phase == ph$phase, ]
      tr_text <- paste(sprintf("%.2f %s->%s", tr$time, tr$from, tr$to), collapse = ", ")
      r <- requests[requests$endpoint == ep & requests$phase == ph$phase, ]
      st <- avalanche_stats(r, run$turns[run$turns$endpoint == ep, ], ph$start, ph$end)
      summary[[length(summary) + 1L]] <- data.frame(
        phase = ph$phase, endpoint = ep, seconds = ph$end - ph$start,
        requests = st$requests, turn_seconds = st$turn_seconds, req_per_s = st$req_per_s,
        p50_ms = st$p50_ms, p99_ms = st$p99_ms,
        fallback_share = st$fallback_share, error_share = st$error_share,
        transitions = tr_text,
        stringsAsFactors = FALSE
      )
    }
  }
  summary <- do.call(rbind, summary)
  rownames(summary) <- NULL

  final_states <- vapply(breaker_info, function(x) as.character(x$state), character(1))
  checks <- avalanche_checks(requests, run$turns, phases, transitions, downstream_timeout,
                             recovery_timeout, final_states)
  list(
    requests = requests,
    summary = summary,
    transitions = transitions,
    checks = checks,
    phases = phases,
    turns = run$turns,
    breaker_metrics = lapply(breaker_info, function(x) x$metrics)
  )
}

avalanche_phase_of <- function(time, phases) {
  k <- findInterval(time, phases$start)
  k[k < 1L] <- 1L
  phases$phase[k]
}

# Intervals are data frames with sorted, disjoint `start` and `end`.
avalanche_clip <- function(iv, from, to) {
  out <- data.frame(start = pmax(iv$start, from), end = pmin(iv$end, to))
  out[out$end > out$start, , drop = FALSE]
}

avalanche_in_intervals <- function(x, iv) {
  if (!nrow(iv)) return(logical(length(x)))
  k <- findInterval(x, iv$start)
  inside <- k > 0L
  inside[inside] <- x[inside] < iv$end[k[inside]]
  inside & !is.na(x)
}

# `iv` without the parts covered by `gaps`.
avalanche_subtract <- function(iv, gaps) {
  for (k in seq_len(nrow(gaps))) {
    gs <- gaps$start[[k]]
    ge <- gaps$end[[k]]
    left <- data.frame(start = iv$start, end = pmin(iv$end, gs))
    right <- data.frame(start = pmax(iv$start, ge), end = iv$end)
    iv <- rbind(left[left$end > left$start, , drop = FALSE],
                right[right$end > right$start, , drop = FALSE])
    iv <- iv[order(iv$start), , drop = FALSE]
  }
  iv
}

# Figures for one endpoint's requests `r` (those that started in [from, to))
# and its turns: requests/s is the number of answers (any HTTP status) that
# arrived during the endpoint's turns within [from, to), per second of those
# turns; `exclude` removes intervals from the turns.
avalanche_stats <- function(r, turns, from, to, exclude = NULL) {
  own <- avalanche_clip(turns[order(turns$start), c("start", "end")], from, to)
  if (!is.null(exclude)) own <- avalanche_subtract(own, exclude)
  turn_seconds <- sum(own$end - own$start)
  finished <- !is.na(r$end)
  answered <- finished & r$status > 0L & avalanche_in_intervals(r$end, own)
  q <- function(x, p) if (length(x)) unname(stats::quantile(x, p, type = 7)) else NA_real_
  list(
    requests = nrow(r),
    turn_seconds = turn_seconds,
    req_per_s = if (turn_seconds > 0) sum(answered) / turn_seconds else NA_real_,
    p50_ms = q(r$latency_ms[finished], 0.5),
    p99_ms = q(r$latency_ms[finished], 0.99),
    fallback_share = if (nrow(r)) mean(r$fallback) else NA_real_,
    error_share = if (nrow(r)) mean(r$error) else NA_real_
  )
}

# An endpoint's requests/s over a whole phase (the figure of the table).
avalanche_summary_rate <- function(requests, turns, endpoint, phase_row) {
  r <- requests[requests$endpoint == endpoint & requests$phase == phase_row$phase, ]
  avalanche_stats(r, turns[turns$endpoint == endpoint, ], phase_row$start, phase_row$end)$req_per_s
}

# When the breaker was open in a phase: from the phase's first CLOSED -> OPEN
# transition. If the phase began with the breaker not CLOSED: from the phase's
# start if it was OPEN then, or from its first move to OPEN if it was
# HALF_OPEN (a probe sent in the previous phase was still waiting; its wait
# belongs to that phase). Returns the time and the state at the phase's start.
avalanche_open_from <- function(transitions, phase_row) {
  before <- transitions[transitions$time < phase_row$start, ]
  state_at_start <- if (nrow(before)) before$to[[nrow(before)]] else "CLOSED"
  during <- transitions[transitions$time >= phase_row$start & transitions$time < phase_row$end, ]
  first <- function(which) if (any(which)) during$time[which][[1]] else NA_real_
  time <- switch(state_at_start,
    CLOSED = first(during$from == "CLOSED" & during$to == "OPEN"),
    HALF_OPEN = first(during$to == "OPEN"),
    phase_row$start
  )
  list(time = time, state_at_start = state_at_start)
}

# The intervals within [from, to] in which the breaker was HALF_OPEN.
avalanche_half_open_intervals <- function(transitions, from, to) {
  state_before <- transitions$to[transitions$time <= from]
  starts <- transitions$time[transitions$to == "HALF_OPEN" & transitions$time > from]
  if (length(state_before) && state_before[[length(state_before)]] == "HALF_OPEN") {
    starts <- c(from, starts)
  }
  ends <- vapply(starts, function(t) {
    left <- transitions$time[transitions$time > t & transitions$from == "HALF_OPEN"]
    if (length(left)) min(left) else to
  }, numeric(1))
  keep <- starts < to
  data.frame(start = starts[keep], end = pmin(ends[keep], to))
}

# The headline checks: for each guarded endpoint (its requests and its
# breaker's transitions) against /trivial, and for /unguarded.
avalanche_checks <- function(requests, turns, phases, transitions, downstream_timeout,
                             recovery_timeout, final_states) {
  values <- c()
  passed <- c()
  state_at_start <- c()
  hanging <- phases[phases$phase == "hanging", ]
  failing <- phases[phases$phase == "failing", ]
  recovered <- phases[phases$phase == "recovered", ]

  for (ep in names(avalanche_guarded)) {
    prefix <- avalanche_guarded[[ep]]
    tr <- transitions[transitions$endpoint == ep, , drop = FALSE]
    for (name in c("hanging", "failing")) {
      ph <- phases[phases$phase == name, ]
      open <- avalanche_open_from(tr, ph)
      open_from <- open$time
      key <- function(what) paste0(prefix, "_", name, "_", what)
      state_at_start[[paste0(prefix, "_", name)]] <- open$state_at_start
      values[[key("open_after_s")]] <- open_from - ph$start
      keys <- key(c("req_per_s", "trivial_req_per_s", "req_per_s_share", "p99_ms",
                    "trivial_p99_ms", "p99_ratio", "fallback_share", "probe_wait_s",
                    "between_probes_share"))
      values[keys] <- NA_real_
      passed[[key("req_per_s_share")]] <- FALSE
      passed[[key("p99_ratio")]] <- FALSE
      if (is.na(open_from)) next

      stats <- function(endpoint, exclude = NULL) {
        r <- requests[requests$endpoint == endpoint & requests$start >= open_from &
                        requests$start < ph$end, ]
        avalanche_stats(r, turns[turns$endpoint == endpoint, ], open_from, ph$end, exclude)
      }
      g <- stats(ep)
      t <- stats("trivial")
      values[keys[1:7]] <- c(g$req_per_s, t$req_per_s, g$req_per_s / t$req_per_s,
                             g$p99_ms, t$p99_ms, g$p99_ms / t$p99_ms, g$fallback_share)
      passed[[key("req_per_s_share")]] <- isTRUE(g$req_per_s / t$req_per_s >= 0.9)
      passed[[key("p99_ratio")]] <- isTRUE(g$p99_ms / t$p99_ms <= 2)

      # Supplementary: the same comparison leaving out the time the breaker
      # was HALF_OPEN (a probe waiting), which separates the cost of probing
      # from the cost of answering with the fallback.
      gaps <- avalanche_half_open_intervals(tr, open_from, ph$end)
      values[[keys[[8]]]] <- sum(gaps$end - gaps$start)
      values[[keys[[9]]]] <- stats(ep, gaps)$req_per_s / stats("trivial", gaps)$req_per_s
    }

    outage <- tr$time >= hanging$start & tr$time < failing$end
    passed[[paste0(prefix, "_opened_during_outage")]] <-
      any(outage & tr$from == "CLOSED" & tr$to == "OPEN")
    in_outage <- requests$endpoint == ep & requests$phase %in% c("hanging", "failing")
    passed[[paste0(prefix, "_fallbacks_while_open")]] <- any(requests$fallback[in_outage])

    closed <- tr[tr$time >= recovered$start & tr$to == "CLOSED", ]
    close_after <- if (nrow(closed)) closed$time[[1]] - recovered$start else NA_real_
    values[[paste0(prefix, "_recovered_closed_after_s")]] <- close_after
    values[[paste0(prefix, "_recovered_close_target_s")]] <- recovery_timeout + downstream_timeout
    passed[[paste0(prefix, "_closed_after_recovery")]] <-
      !is.na(close_after) && identical(final_states[[ep]], "CLOSED")
    passed[[paste0(prefix, "_closed_within_target")]] <-
      isTRUE(close_after <= recovery_timeout + downstream_timeout)
  }

  # The unguarded endpoint while the downstream hangs: its requests wait in
  # the process's queue far longer than a turn, so it is busy the whole
  # phase. Each answer takes at least downstream_timeout, one after the
  # other: at most one per downstream_timeout (plus the call under way when
  # the phase began).
  hanging_seconds <- hanging$end - hanging$start
  u_req <- requests[requests$endpoint == "unguarded" & requests$phase == "hanging", ]
  u_answers <- sum(u_req$status > 0L & !is.na(u_req$end) & u_req$end < hanging$end)
  u_rate <- u_answers / hanging_seconds
  t_rate <- avalanche_summary_rate(requests, turns, "trivial", hanging)
  values[["unguarded_hanging_answers"]] <- u_answers
  values[["unguarded_hanging_req_per_s"]] <- u_rate
  values[["unguarded_hanging_limit_req_per_s"]] <- 1 / downstream_timeout
  values[["unguarded_hanging_share_of_trivial"]] <- u_rate / t_rate
  values[["unguarded_hanging_p50_ms"]] <- stats::median(u_req$latency_ms[!is.na(u_req$end)])
  values[["unguarded_hanging_error_share"]] <- if (nrow(u_req)) mean(u_req$error) else NA_real_
  passed[["unguarded_limited_by_timeout"]] <- u_answers <= hanging_seconds / downstream_timeout + 1
  passed[["unguarded_errors_while_hanging"]] <- any(u_req$error)

  list(passed = unlist(passed), values = unlist(values), state_at_start = unlist(state_at_start))
}

# ---------------------------------------------------------------------------
# Report

avalanche_header <- function(say, downstream, apis, phase_seconds, concurrency, downstream_timeout,
                             hang, recovery_timeout, failure_threshold, slice_seconds,
                             client_timeout) {
  n <- function(x) format(x, trim = TRUE)
  ports <- paste(sprintf("/%s :%s", names(apis), vapply(apis, function(a) n(a$port), "")),
                 collapse = "   ")
  say(
    "Avalanche demonstration: a single-threaded plumber API and a sick downstream\n",
    "  Downstream  ", downstream$url("/data"), ": webfakes, 16 threads, own R process.\n",
    "    healthy ", n(phase_seconds[["healthy"]]), " s -> hanging ", n(phase_seconds[["hanging"]]),
    " s (answers after ", n(hang), " s) -> failing ", n(phase_seconds[["failing"]]),
    " s (503 at once)\n",
    "    -> recovered ", n(phase_seconds[["recovered"]]), " s; this process switches the mode ",
    "(GET /mode) at each boundary.\n",
    "    A hanging request waits in res$delay(), which does not block webfakes' R thread.\n",
    "  API         bench/avalanche/api.R in four identical plumber processes, one per endpoint:\n",
    "    ", ports, "\n",
    "    /guarded: a breaker's $execute() with a fallback; the call blocks the process.\n",
    "    /guarded-async: its own breaker, breaker_fetch_async() with a fallback; the\n",
    "      endpoint returns a promise and the process serves other requests meanwhile.\n",
    "    Both breakers: failure_threshold = ", failure_threshold, ", recovery_timeout = ",
    n(recovery_timeout), " s, one probe at a time.\n",
    "    Downstream calls (guarded and unguarded) time out after ", n(downstream_timeout), " s.\n",
    "  Load        from this R process (curl multi), in turns of ", n(slice_seconds),
    " s: trivial, guarded,\n",
    "    guarded-async, unguarded, trivial, ...; ", concurrency, " requests in flight at the\n",
    "    endpoint whose turn it is.\n",
    "    Every request sends `Connection: close` on a fresh connection (httpuv with\n",
    "    keep-alive clients stalls about 40 ms per request: delayed ACK); client timeout ",
    n(client_timeout), " s.\n",
    "  Why four processes: plumber serves one request at a time; in one process the\n",
    "    /unguarded backlog (requests queued behind ", n(downstream_timeout), "-s downstream ",
    "calls) would delay the\n",
    "    other endpoints, and a breaker would see traffic only in its endpoint's slices.\n",
    "  Why turns: loaded all at once, the processes compete for this machine's cores:\n",
    "    /trivial speeds up whenever /guarded waits, and whichever process gets a core\n",
    "    to itself wins. In turns each endpoint has the machine to itself (and this\n",
    "    process); requests/s count the answers that arrive during the endpoint's own\n",
    "    turns. The breakers still see traffic every ",
    n(length(apis) * slice_seconds), " s.\n\n"
  )
}

avalanche_report <- function(result, downstream_timeout, recovery_timeout, slice_seconds) {
  s <- result$summary
  pct <- function(x) ifelse(is.na(x), "-", sprintf("%.1f%%", 100 * x))
  num <- function(x, d = 1) ifelse(is.na(x), "-", formatC(x, format = "f", digits = d))
  rows <- cbind(
    s$phase, s$endpoint, num(s$seconds), s$requests, num(s$turn_seconds), num(s$req_per_s),
    num(s$p50_ms), num(s$p99_ms), pct(s$fallback_share), pct(s$error_share)
  )
  rows <- rbind(c("phase", "endpoint", "s", "requests", "turns s", "req/s", "p50 ms", "p99 ms",
                  "fallback", "errors"), rows)
  w <- apply(rows, 2, function(col) max(nchar(col)))
  left <- c(TRUE, TRUE, rep(FALSE, ncol(rows) - 2L))
  cat("\nPer phase and endpoint, over the requests that started in the phase (req/s: answers\n",
      "that arrived during the endpoint's turns, per second of its turns)\n", sep = "")
  for (i in seq_len(nrow(rows))) {
    cells <- vapply(seq_len(ncol(rows)), function(j) {
      formatC(rows[i, j], width = if (left[[j]]) -w[[j]] else w[[j]])
    }, character(1))
    cat("  ", paste(cells, collapse = "  "), "\n", sep = "")
    if (i > 1L && i < nrow(rows) && rows[i, 1] != rows[i + 1L, 1]) cat("\n")
  }
  avalanche_report_tails(result, downstream_timeout)

  cat("\nBreaker transitions (seconds since the healthy phase began)\n")
  for (ep in names(avalanche_guarded)) {
    cat("  /", ep, "\n", sep = "")
    tr <- result$transitions[result$transitions$endpoint == ep, ]
    if (!nrow(tr)) {
      cat("    (none)\n")
      next
    }
    for (ph in unique(tr$phase)) {
      x <- tr[tr$phase == ph, ]
      items <- sprintf("%.2f %s->%s", x$time, x$from, x$to)
      # Greedy wrapping that never breaks an item.
      lines <- character()
      line <- ""
      for (item in items) {
        candidate <- if (nzchar(line)) paste0(line, ", ", item) else item
        if (nchar(candidate) > 66 && nzchar(line)) {
          lines <- c(lines, paste0(line, ","))
          line <- item
        } else {
          line <- candidate
        }
      }
      lines <- c(lines, line)
      cat(sprintf("    %-10s%s\n", c(ph, rep("", length(lines) - 1L)), lines), sep = "")
    }
  }

  v <- result$checks$values
  p <- result$checks$passed
  met <- function(ok) if (isTRUE(ok)) "met" else "NOT met"
  # A speed target missed on a loaded machine is not a failure of the breaker.
  speed <- function(ok) if (isTRUE(ok)) "met" else "missed here"
  n_endpoints <- length(unique(result$turns$endpoint))
  cat("\nHeadline checks (hanging and failing: from the breaker's opening to the phase's end)\n")
  cat(paste0(
    "  The req/s and p99 targets are for a quiet machine. Here the four API processes,\n",
    "  the downstream and this load generator share ", avalanche_cores(), ", so on a\n",
    "  busy machine (or with another job running) they can be missed, differently from\n",
    "  run to run: a miss says how loaded the machine was, not that the breaker failed\n",
    "  (/guarded-async also pays for its promises: see its note). What the breaker itself\n",
    "  must do (open, answer with the fallback, close again) is under \"Behaviour\" at the end.\n"))
  for (ep in names(avalanche_guarded)) {
    prefix <- avalanche_guarded[[ep]]
    path <- paste0("/", ep)
    cat(if (ep == "guarded") "  /guarded (synchronous: the call blocks the process)\n"
        else "  /guarded-async (asynchronous: the process serves other requests during the call)\n")
    for (name in c("hanging", "failing")) {
      val <- function(what) v[[paste0(prefix, "_", name, "_", what)]]
      ok <- function(what) p[[paste0(prefix, "_", name, "_", what)]]
      after <- val("open_after_s")
      if (is.na(after)) {
        cat(sprintf("    %-8s the breaker did not open: NOT met\n", name))
        next
      }
      began <- result$checks$state_at_start[[paste0(prefix, "_", name)]]
      how <- switch(began,
        CLOSED = sprintf("breaker opened %.1f s into the phase", after),
        HALF_OPEN = sprintf("began HALF_OPEN (a probe from the phase before), OPEN again %.1f s in", after),
        sprintf("began %s", began)
      )
      cat(sprintf("    %-8s %s;\n             %s fallback answers %s\n", name, how, path,
                  pct(val("fallback_share"))))
      if (is.na(val("req_per_s")) || is.na(val("trivial_req_per_s"))) {
        cat(sprintf(paste0("             %s or /trivial had no turn after the breaker opened (the phase is too\n",
                           "             short to compare)\n"), path))
        next
      }
      cat(sprintf("             req/s: %.1f vs /trivial %.1f = %.1f%% (quiet-machine target >= 90%%): %s\n",
                  val("req_per_s"), val("trivial_req_per_s"), 100 * val("req_per_s_share"),
                  speed(ok("req_per_s_share"))))
      cat(sprintf("             p99:   %.1f ms vs /trivial %.1f ms = %.2fx (quiet-machine target <= 2x): %s\n",
                  val("p99_ms"), val("trivial_p99_ms"), val("p99_ratio"), speed(ok("p99_ratio"))))
      cat(sprintf(paste0("             between probes (leaving out %.1f s HALF_OPEN): %.1f%% of ",
                         "/trivial's req/s\n"),
                  val("probe_wait_s"), 100 * val("between_probes_share")))
      if (name == "hanging" && ep == "guarded") {
        bound <- recovery_timeout / (recovery_timeout + downstream_timeout)
        cat(sprintf(paste0(
          "             (each probe while the downstream hangs blocks the /guarded process for\n",
          "             downstream_timeout = %s s: in a long hanging phase it can serve at most\n",
          "             recovery_timeout / (recovery_timeout + downstream_timeout) = %.0f%% of the time;\n",
          "             probes may come up to %s s late here, as /guarded gets requests only in its turns)\n"),
          format(downstream_timeout), 100 * bound, format((n_endpoints - 1) * slice_seconds)))
      }
      if (name == "hanging" && ep == "guarded-async") {
        cat(sprintf(paste0(
          "             (a probe does not block /guarded-async: while it waits up to %s s, the\n",
          "             process serves the other requests, which find the only probe slot taken\n",
          "             and get the fallback at once; only the probe's own request waits)\n"),
          format(downstream_timeout)))
      }
    }
    if (ep == "guarded-async") {
      between <- v[paste0(prefix, "_", c("hanging", "failing"), "_between_probes_share")]
      if (any(between < 0.9, na.rm = TRUE)) {
        cat(paste0(
          "             (between probes too /guarded-async answers less than /trivial: an endpoint\n",
          "             that returns a promise costs the process several times the CPU of a\n",
          "             synchronous answer (promises, httpuv and plumber's asynchronous steps), and\n",
          "             under this closed-loop load the process is busy all the time; compare\n",
          "             /guarded while open, which answers the same fallback synchronously)\n"))
      }
    }
    close_after <- v[[paste0(prefix, "_recovered_closed_after_s")]]
    if (is.na(close_after)) {
      cat("    recovery the breaker did not close after the downstream recovered: NOT met\n")
    } else {
      cat(sprintf(paste0("    recovery the breaker closed %.2f s after the downstream recovered\n",
                         "             (target <= recovery_timeout + one probe = %s s): %s\n"),
                  close_after, format(recovery_timeout + downstream_timeout),
                  met(p[[paste0(prefix, "_closed_within_target")]])))
    }
  }
  cat(sprintf(paste0("  /unguarded while hanging (busy the whole phase): %d answers, %.2f req/s\n",
                     "             (1 / downstream_timeout = %.2f; %.2f%% of /trivial's rate), ",
                     "p50 latency %.0f ms,\n",
                     "             errors %s: %s\n"),
              as.integer(v[["unguarded_hanging_answers"]]), v[["unguarded_hanging_req_per_s"]],
              v[["unguarded_hanging_limit_req_per_s"]],
              100 * v[["unguarded_hanging_share_of_trivial"]], v[["unguarded_hanging_p50_ms"]],
              pct(v[["unguarded_hanging_error_share"]]),
              if (isTRUE(p[["unguarded_limited_by_timeout"]])) "limited by the downstream timeout"
              else "NOT limited by the downstream timeout"))

  # Which targets each guarded endpoint met: the speed targets (for a quiet
  # machine) apart from the behaviour, which holds on any machine.
  speed_targets <- c(
    hanging_req_per_s_share = "hanging: req/s >= 90% of /trivial's",
    hanging_p99_ratio = "hanging: p99 <= 2x /trivial's",
    failing_req_per_s_share = "failing: req/s >= 90% of /trivial's",
    failing_p99_ratio = "failing: p99 <= 2x /trivial's"
  )
  behaviour <- c(
    opened_during_outage = "the breaker opened during the outage",
    fallbacks_while_open = "fallback answers during the outage",
    closed_within_target = "closed within recovery_timeout + one probe"
  )
  cols <- paste0("/", names(avalanche_guarded))
  width <- max(nchar(c(speed_targets, behaviour)))
  table <- function(title, targets, word) {
    cat("\n", title, "\n", sep = "")
    cat(sprintf("  %-*s  %-11s  %s\n", width, "", cols[[1]], cols[[2]]))
    for (t in names(targets)) {
      res <- vapply(avalanche_guarded, function(prefix) word(p[[paste0(prefix, "_", t)]]), "")
      cat(sprintf("  %-*s  %-11s  %s\n", width, targets[[t]], res[[1]], res[[2]]))
    }
  }
  table("Speed, targets for a quiet machine (a loaded machine can miss them)", speed_targets, speed)
  table("Behaviour (holds on any machine; NOT met here is worth a bug report)", behaviour, met)
  cat(sprintf("  /unguarded limited by the downstream timeout: %s\n",
              met(p[["unguarded_limited_by_timeout"]])))
  cat(paste0("\nThe exit status is 0 whenever the run completed, whatever the rows above say: the\n",
             "speed targets depend on the machine, and this is a demonstration, not a test (the\n",
             "tests in tests/testthat/test-avalanche.R assert the behaviour).\n"))
  if (!is.null(result$plot_file)) cat("\nPlot: ", result$plot_file, "\n", sep = "")
  invisible(NULL)
}

# "the 2 cores of this machine": the cores the processes of the run share.
avalanche_cores <- function() {
  cores <- parallel::detectCores()
  if (is.na(cores)) "this machine's cores" else sprintf("the %d cores of this machine", cores)
}

# The requests of a phase with a healthy downstream that were still waiting
# when the next phase switched the downstream: a single-threaded endpoint
# (/unguarded, whose turn ends the healthy phase with the defaults) queues
# the requests of its last turn and calls the downstream for them one after
# the other, so those it had not yet called meet the hanging downstream and
# wait a downstream timeout each, in turn. They count in the phase they were
# sent in (as every request does), which gives that row its tail; this note
# says so, with the row's figures without them.
avalanche_boundary_tails <- function(result, downstream_timeout) {
  r <- result$requests
  phases <- result$phases
  out <- list()
  for (i in seq_len(nrow(phases) - 1L)) {
    if (!identical(phases$mode[[i]], "healthy")) next
    for (ep in avalanche_endpoints) {
      x <- r[r$endpoint == ep & r$phase == phases$phase[[i]], ]
      late <- (is.na(x$end) | x$end > phases$end[[i]]) &
        (x$error | is.na(x$latency_ms) | x$latency_ms > 1000 * downstream_timeout)
      if (!any(late)) next
      rest <- x[!late & !is.na(x$end), ]
      out[[length(out) + 1L]] <- data.frame(
        phase = phases$phase[[i]], endpoint = ep, next_mode = phases$mode[[i + 1L]],
        switched_at = phases$end[[i]], late = sum(late), errors = sum(x$error[late]),
        sent_within_s = phases$end[[i]] - min(x$start[late]),
        min_ms = min(x$latency_ms[late], na.rm = TRUE), max_ms = max(x$latency_ms[late], na.rm = TRUE),
        p99_ms_without = if (nrow(rest)) unname(stats::quantile(rest$latency_ms, 0.99)) else NA_real_,
        error_share_without = if (nrow(rest)) mean(rest$error) else NA_real_,
        stringsAsFactors = FALSE
      )
    }
  }
  if (length(out)) do.call(rbind, out) else NULL
}

avalanche_report_tails <- function(result, downstream_timeout) {
  tails <- avalanche_boundary_tails(result, downstream_timeout)
  for (k in seq_len(NROW(tails))) {
    x <- tails[k, ]
    cat(strwrap(sprintf(paste0(
      "Why %s /%s has a p99 of seconds and errors: %d of its requests, sent in the phase's last ",
      "%.2f s, were still queued in its single-threaded process when the downstream switched ",
      "to %s at %.1f s. The process calls the downstream for its queued requests one after ",
      "the other, so each of these met the %s downstream and waited for the downstream ",
      "timeout (%s s) of those ahead of it and its own: %.1f to %.1f s; %d failed. They count ",
      "in the phase they were sent in. ",
      "Without them: p99 %.1f ms, errors %.1f%%."),
      x$phase, x$endpoint, x$late, x$sent_within_s, x$next_mode, x$switched_at,
      x$next_mode, format(downstream_timeout), x$min_ms / 1000, x$max_ms / 1000, x$errors,
      x$p99_ms_without, 100 * x$error_share_without), width = 88, prefix = "\n  ", initial = "\n  "),
      sep = "")
    cat("\n")
  }
}

# ---------------------------------------------------------------------------
# Plot

# Three panels over the same time axis: each request's latency, each turn's
# answers per second, and each breaker's state. Endpoints and breaker states
# have colours of their own that never share a hue: the states keep the
# package's palette (breaker_state_colours(): green, red, amber, as
# plot.CircuitBreaker() and the Shiny dashboard show them), so the endpoints
# take black and blues and purple from the Okabe-Ito palette, which
# colour-blind readers can tell apart, and the phases are pale greys named
# in the top panel.
avalanche_plot_colours <- c(trivial = "#000000", guarded = "#0072B2",
                            "guarded-async" = "#56B4E9", unguarded = "#CC79A7")
avalanche_plot_shades <- c(healthy = "#FFFFFF", hanging = "#EBEBEB", failing = "#D9D9D9",
                           recovered = "#FFFFFF")

avalanche_plot <- function(result, file, downstream_timeout) {
  r <- result$requests
  r <- r[!is.na(r$end) & is.finite(r$latency_ms), ]
  phases <- result$phases
  tr <- result$transitions
  turns <- result$turns
  grDevices::png(file, width = 1500, height = 1300, res = 120)
  on.exit(grDevices::dev.off(), add = TRUE)
  old <- graphics::par(no.readonly = TRUE)
  on.exit(graphics::par(old), add = TRUE, after = FALSE)
  graphics::layout(matrix(1:3, ncol = 1), heights = c(3.2, 1.7, 1.15))
  graphics::par(oma = c(0, 0, 2.5, 0))

  endpoints <- avalanche_endpoints
  cols <- avalanche_plot_colours[endpoints]
  state_cols <- circuitbreaker::breaker_state_colours()[c("CLOSED", "OPEN", "HALF_OPEN")]
  slice <- stats::median(turns$end - turns$start)
  xlim <- c(0, max(phases$end, r$start, 1))
  ylim <- range(pmax(r$latency_ms, 0.1), na.rm = TRUE)
  if (!all(is.finite(ylim))) ylim <- c(0.1, 1000)
  phase_labels <- c(healthy = "healthy", hanging = "downstream hangs",
                    failing = "downstream fails (503)", recovered = "recovered")
  draw_phases <- function(labels) {
    usr <- graphics::par("usr")
    y <- if (graphics::par("ylog")) 10^usr[3:4] else usr[3:4]
    for (i in seq_len(nrow(phases))) {
      graphics::rect(phases$start[[i]], y[[1]], phases$end[[i]], y[[2]],
                     col = avalanche_plot_shades[[phases$phase[[i]]]], border = NA)
      if (labels) {
        graphics::text((phases$start[[i]] + phases$end[[i]]) / 2, y[[2]],
                       phase_labels[[phases$phase[[i]]]], pos = 1, cex = 1, font = 2,
                       col = "grey25")
      }
    }
    graphics::abline(v = phases$start[-1], col = "grey50", lty = 3)
  }
  heading <- function(text) graphics::mtext(text, side = 3, line = 0.4, adj = 0, cex = 0.95, font = 2)

  # Latency of each request, by the time it was sent. A wide left margin
  # for the breakers' names in the bottom panel.
  graphics::par(mar = c(2.5, 8.5, 2, 1), cex.axis = 0.95)
  graphics::plot(NA, xlim = xlim, ylim = ylim * c(1, 3), log = "y", xlab = "", ylab = "",
                 xaxs = "i")
  graphics::mtext("latency (ms, log scale)", side = 2, line = 3.2)
  draw_phases(TRUE)
  graphics::abline(h = 1000 * downstream_timeout, col = "grey20", lty = 2)
  size <- c(trivial = 0.4, guarded = 0.4, "guarded-async" = 0.4, unguarded = 0.7)
  # /unguarded has few points while the downstream hangs: less transparent.
  alpha <- c(trivial = 0.45, guarded = 0.45, "guarded-async" = 0.45, unguarded = 0.75)
  for (ep in endpoints) {
    x <- r[r$endpoint == ep, ]
    graphics::points(x$start, pmax(x$latency_ms, 0.1), pch = 16, cex = size[[ep]],
                     col = grDevices::adjustcolor(cols[[ep]], alpha.f = alpha[[ep]]))
  }
  heading("Latency of each request, by the time it was sent")
  # Top right, below the phase's name: the recovered phase has no slow requests.
  graphics::legend("topright", inset = c(0.005, 0.07), bg = "white", box.col = "grey70",
    cex = 0.95, title = "endpoint", title.font = 2,
    legend = c("/trivial (no downstream call)", "/guarded (breaker, synchronous)",
               "/guarded-async (breaker, asynchronous)", "/unguarded (no breaker)",
               paste0("downstream timeout (", format(downstream_timeout), " s)")),
    col = c(cols, "grey20"), pch = c(rep(16, length(endpoints)), NA),
    lty = c(rep(NA, length(endpoints)), 2), pt.cex = 1.3)
  graphics::box()
  graphics::mtext("Avalanche demonstration: a plumber API whose downstream hangs, then fails",
                  side = 3, outer = TRUE, line = 0.8, cex = 1.2, font = 2)

  # Answers per second in each turn, for the endpoint whose turn it was.
  graphics::par(mar = c(2.5, 8.5, 2, 1))
  turn_rate <- vapply(seq_len(nrow(turns)), function(k) {
    x <- r$end[r$endpoint == turns$endpoint[[k]] & r$status > 0]
    sum(x >= turns$start[[k]] & x < turns$end[[k]]) / max(turns$end[[k]] - turns$start[[k]], 1e-3)
  }, numeric(1))
  graphics::plot(NA, xlim = xlim, ylim = c(0, max(turn_rate, 1, na.rm = TRUE) * 1.05),
                 xlab = "", ylab = "", xaxs = "i")
  graphics::mtext("answers / s", side = 2, line = 3.2)
  draw_phases(FALSE)
  for (ep in endpoints) {
    k <- turns$endpoint == ep
    graphics::lines((turns$start[k] + turns$end[k]) / 2, turn_rate[k], type = "o", pch = 16,
                    cex = 0.5, col = cols[[ep]], lwd = 1.5)
  }
  heading(sprintf(paste0("Requests answered per second, each endpoint measured in its own turns ",
                         "(%s s each, in rotation; colours as above)"), format(round(slice, 2))))
  graphics::box()

  # Each breaker's state over time (HALF_OPEN drawn at least 0.3 s wide).
  guarded <- names(avalanche_guarded)
  graphics::par(mar = c(4, 8.5, 2, 1))
  graphics::plot(NA, xlim = xlim, ylim = c(0.4, length(guarded) + 0.6), xlab = "", ylab = "",
                 yaxt = "n", xaxs = "i")
  graphics::mtext("seconds since the healthy phase began", side = 1, line = 2.5)
  graphics::axis(2, at = rev(seq_along(guarded)), labels = paste0("/", guarded), las = 1,
                 tick = FALSE)
  for (g in seq_along(guarded)) {
    y <- length(guarded) + 1 - g
    x <- tr[tr$endpoint == guarded[[g]], ]
    starts <- c(0, x$time)
    states <- c("CLOSED", x$to)
    ends <- c(x$time, xlim[[2]])
    keep <- ends > starts | states == "HALF_OPEN"
    ends <- ifelse(states == "HALF_OPEN", pmax(ends, starts + 0.3), ends)
    col <- state_cols[states]
    col[is.na(col)] <- "grey70"
    # HALF_OPEN last, so that short probes stay visible.
    o <- order(states == "HALF_OPEN")
    o <- o[keep[o]]
    graphics::rect(starts[o], y - 0.3, ends[o], y + 0.3, col = col[o], border = NA)
  }
  graphics::abline(v = phases$start[-1], col = "grey50", lty = 3)
  heading("State of each guarded endpoint's breaker")
  # The states' legend on the heading's line, at the right.
  usr <- graphics::par("usr")
  graphics::legend(x = usr[[2]], y = usr[[4]], xjust = 1, yjust = 0.1, xpd = NA, horiz = TRUE,
                   bty = "n", cex = 0.95, x.intersp = 0.5,
                   legend = c("CLOSED (calls go through)", "OPEN (fallback at once)",
                              "HALF_OPEN (one probe)"),
                   fill = state_cols, border = NA)
  graphics::box()
  invisible(file)
}
