# The fleet store (breaker_store_redis()) at scale: what many store
# connections, each with its own sync thread, cost one Redis, idle and busy.
#
#   R_LIBS=<library> Rscript bench/fleet/scale.R [options]
#
# Options (each also read from an environment variable, the command line
# winning; --name value or --name=value):
#   --connections N   FLEET_SCALE_CONNECTIONS  store connections in all, each a
#                                              store of its own (its own prefix, so its
#                                              own connection and sync thread), 1 to 512
#                                              (default 64)
#   --processes N     FLEET_SCALE_PROCESSES    R worker processes holding them, 1 to 64
#                                              (default 8)
#   --idle N          FLEET_SCALE_IDLE         idle breakers per connection (scenario A),
#                                              0 to 5000; 0 skips A (default 1000)
#   --busy N          FLEET_SCALE_BUSY         busy breakers per connection (scenario B),
#                                              0 to 1000; 0 skips B (default 100)
#   --seconds S       FLEET_SCALE_SECONDS      the measured window, 2 to 300 (default 10)
#   --warmup S        FLEET_SCALE_WARMUP       seconds between the last breaker made and
#                                              the window, 0 to 120 (default 5)
#   --worker-nice N   FLEET_SCALE_WORKER_NICE  the workers' niceness, 0 to 19 (default 10):
#                                              Redis stands in for a server of its own, so
#                                              the R processes that load it must not take
#                                              its CPU on a small machine (0: same priority).
#                                              Each worker is a session of its own, which
#                                              Linux schedules as a group (autogroup) that
#                                              a process's niceness does not reach: the
#                                              worker gives its group this niceness too
#                                              (/proc/self/autogroup)
#   --r-nice N        FLEET_SCALE_R_NICE       the niceness of each worker's R thread alone,
#                                              from --worker-nice to 19 (default 19), set
#                                              once its stores' sync threads run (they keep
#                                              --worker-nice): the workers' calls take more
#                                              CPU than this machine has besides Redis, and
#                                              a sync thread queued behind eight busy R
#                                              threads measures them, not Redis; on Linux a
#                                              thread's niceness is its own
#   --tls [no|yes|both] FLEET_SCALE_TLS        the stores over TLS (default no): "yes" starts
#                                              the redis-server TLS-only, with a CA and a
#                                              server certificate of redis_tls_certs()
#                                              (inst/redis/redis-tls.R, made in the run's
#                                              temporary folder), and the workers' stores
#                                              and probes use rediss:// with tls =
#                                              list(ca_file = <the CA>); "both" runs each
#                                              scenario twice back to back, on a plain server
#                                              and then on a TLS one (both started at the
#                                              beginning, each idle while the other is
#                                              measured), with the same options, and ends
#                                              with a table of the two; --tls alone is "yes"
#   --help            this text
#
# One redis-server on 127.0.0.1 (a free port, no persistence), started the
# one way (bench/harness/redis.R; TLS-only with --tls, bench/harness/
# redis-tls.R; with --tls both, one of each). sync_interval 0.1 s, timeout
# 0.1 s (the defaults). Each scenario starts its own worker processes
# (bench/fleet/scale-worker.R), which make the stores and breakers and are
# stopped at its end; Redis is emptied (FLUSHALL) between the two.
#
# A. Idle: --idle breakers per connection, made, then left alone.
# B. Busy: --busy breakers per connection, each called once per
#    sync_interval, every tenth call failing (never two in a row, so that
#    none trips).
#
# Measured in each, over --seconds after --warmup: Redis CPU as a share of
# one core (used_cpu_sys + used_cpu_user of INFO cpu; /proc of the server as
# a check), commands/s (INFO stats total_commands_processed) and EVALSHA
# (INFO commandstats: calls, microseconds per call; INFO latencystats:
# p50/p99/p99.9/max per call, all counted from CONFIG RESETSTAT at the
# window's start); the Redis clients (CLIENT LIST, by last command) and,
# to show that every store has its own sync thread, the threads the stores
# added to the workers and the threads that sent syncs; per store, from its
# link (what `circuitbreaker:::
# cb_fleet_info()` says, sampled every 20 ms in its process): syncs/s, failed
# syncs, the share of samples in mode "fleet", sync_lag, and the gaps
# between two completed syncs (last_sync); with TLS, the TLS version each
# store's link reports. The package exposes no per-sync
# round trip, so the script measures it from outside: it compiles
# bench/fleet/round-trips.c (with `cc`) and preloads it into the workers
# (LD_PRELOAD), where it times every round trip through hiredis, per thread
# (a pipeline counts as one): hiredis's RESP writer and reader, which the
# package's own wire (plain or TLS) uses, or its redisContext for older
# versions; the sync round trips are those of the
# threads other than R's, but for the connection's set-up (SUBSCRIBE, AUTH,
# SELECT, SCRIPT, HELLO, CLIENT, ROLE, SENTINEL; the TLS handshake is not a
# round trip). Without a C compiler, the mean gap between
# two syncs minus sync_interval (a sync starts one sync_interval, +-10%
# jitter, after the previous one ended) stands in for the mean round trip,
# which holds only while no sync is woken early (idle). Per process also,
# in a second window of 5 s right after the first (so that the benchmark's
# own 8 x 50 PINGs a second do not count in the Redis CPU of the first):
# one PING every 20 ms on a connection of its own (what any round trip waits
# at Redis at that moment), against `timeout`.
#
# The fleet store's cost targets are reported met or MISSED: idle, Redis at most 5%
# of one core; busy, at most 50% and every process's sync round trip (its
# p99) under 20% of timeout. About 7 minutes with the defaults on 2 busy
# vCPUs, most of it making the 64,000 idle breakers (twice that with --tls both;
# the busy scenario alone, --idle 0, about a minute per server). Exit
# status: 0 when the run completed (met or not), 2 for a bad option, 1 for
# any other error. Every process, the redis-server and the files are
# removed on the way out, also on an error or an interrupt; the workers end
# by themselves when this process dies.

spec <- list(
  connections = list(env = "FLEET_SCALE_CONNECTIONS", flag = FALSE, min = 1, max = 512, whole = TRUE),
  processes = list(env = "FLEET_SCALE_PROCESSES", flag = FALSE, min = 1, max = 64, whole = TRUE),
  idle = list(env = "FLEET_SCALE_IDLE", flag = FALSE, min = 0, max = 5000, whole = TRUE),
  busy = list(env = "FLEET_SCALE_BUSY", flag = FALSE, min = 0, max = 1000, whole = TRUE),
  seconds = list(env = "FLEET_SCALE_SECONDS", flag = FALSE, min = 2, max = 300, whole = FALSE),
  warmup = list(env = "FLEET_SCALE_WARMUP", flag = FALSE, min = 0, max = 120, whole = FALSE),
  "worker-nice" = list(env = "FLEET_SCALE_WORKER_NICE", flag = FALSE, min = 0, max = 19, whole = TRUE),
  "r-nice" = list(env = "FLEET_SCALE_R_NICE", flag = FALSE, min = 0, max = 19, whole = TRUE),
  tls = list(env = "FLEET_SCALE_TLS", flag = TRUE),
  help = list(env = NA_character_, flag = TRUE)
)
defaults <- list(connections = 64, processes = 8, idle = 1000, busy = 100, seconds = 10, warmup = 5,
                 "worker-nice" = 10, "r-nice" = 19)
sync_interval <- 0.1
timeout <- 0.1
sample_every <- 0.02
probe_seconds <- 5  # the PING probes' window, after the CPU window

# This script's path (Rscript passes it as --file=), to find bench/harness/.
this_file <- gsub("~+~", " ", sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1]), fixed = TRUE)
# usage(), bad_option(), parse_options(), as_flag(), as_bounded_number();
# new_stoppers(); now(), process_cpu(), busy_cpu_seconds(); fmt_n(),
# verdict(); redis_server_start(); redis_tls_certs(), redis_tls_server_start():
for (file in c("options.R", "processes.R", "clock.R", "format.R", "redis.R", "redis-tls.R")) {
  source(file.path(dirname(this_file), "..", "harness", file))
}
home <- normalizePath(dirname(this_file), mustWork = TRUE)

# ---------------------------------------------------------------------------
# Redis: commands on a connection of this process, and INFO

redis_client <- function(url, tls = NULL) {
  conn <- circuitbreaker:::cb_redis_connect(url, 30, tls)
  function(...) {
    reply <- circuitbreaker:::cb_redis_call(conn, c(...))
    if (isTRUE(attr(reply, "redis_error"))) stop("Redis: ", reply)
    reply
  }
}

# INFO as a named character vector ("key:value" lines).
info <- function(redis, section = "everything") {
  lines <- strsplit(paste(redis("INFO", section), collapse = "\n"), "\r?\n")[[1]]
  lines <- lines[grepl(":", lines, fixed = TRUE) & !startsWith(lines, "#")]
  stats::setNames(sub("^[^:]*:", "", lines), sub(":.*$", "", lines))
}
# One field of a "a=1,b=2" value, as a number (NA when absent).
subfield <- function(value, name) {
  if (is.null(value) || is.na(value)) return(NA_real_)
  parts <- strsplit(value, ",", fixed = TRUE)[[1]]
  hit <- parts[startsWith(parts, paste0(name, "="))]
  if (length(hit)) as.numeric(sub("^[^=]*=", "", hit[[1]])) else NA_real_
}
`%||%` <- function(x, y) if (is.null(x)) y else x
num <- function(x, name) if (name %in% names(x)) as.numeric(x[[name]]) else NA_real_

# CLIENT LIST, counted by the last command of each client.
client_counts <- function(redis) {
  lines <- strsplit(paste(redis("CLIENT", "LIST"), collapse = "\n"), "\r?\n")[[1]]
  lines <- lines[nzchar(lines)]
  cmd <- sub("^.* cmd=([^ ]*).*$", "\\1", lines)
  list(total = length(lines), by_cmd = sort(table(cmd), decreasing = TRUE))
}

# ---------------------------------------------------------------------------
# Workers (scale-worker.R)

# round-trips.c compiled into `dir`: its path, or NULL (and a note) when
# there is no C compiler or it fails.
compile_round_trips <- function(dir, say) {
  so <- file.path(dir, "round-trips.so")
  cc <- Sys.which(c("cc", "gcc"))
  cc <- cc[nzchar(cc)]
  res <- if (length(cc)) {
    processx::run(cc[[1]], c("-O2", "-shared", "-fPIC", "-pthread", "-o", so, file.path(home, "round-trips.c"), "-ldl"),
                  error_on_status = FALSE, timeout = 60)
  }
  if (is.null(res) || res$status != 0 || !file.exists(so)) {
    say("NOTE: round-trips.c could not be compiled: sync round trips are estimated from the gaps between syncs.\n")
    return(NULL)
  }
  so
}

# The sync round trips in `o` (a worker's samples.rds) within [t0, t1]:
# those of threads other than R's main thread, but for a connection's
# set-up.
sync_round_trips <- function(o, t0, t1) {
  rt <- o$round_trips
  if (is.null(rt) || !nrow(rt)) return(NULL)
  setup <- c("SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "AUTH", "SELECT", "SCRIPT", "HELLO", "CLIENT", "ROLE",
             "SENTINEL")
  rt <- rt[rt$tid != o$pid & !toupper(rt$name) %in% setup & rt$start >= t0 & rt$start <= t1, , drop = FALSE]
  if (nrow(rt)) rt$pid <- o$pid
  rt
}

start_workers <- function(kind, url, tls, n_breakers, opts, dir, cleanup, shim) {
  groups <- split(seq_len(opts$connections), rep_len(seq_len(opts$processes), opts$connections))
  lifetime <- 600 + 0.1 * n_breakers * max(lengths(groups)) + opts$warmup + opts$seconds
  lapply(seq_along(groups), function(i) {
    w <- new.env(parent = emptyenv())
    w$id <- i
    w$dir <- file.path(dir, sprintf("%s-%s-%d", kind, if (is.null(tls)) "plain" else "tls", i))
    w$prefixes <- sprintf("scale-%s-c%03d", kind, groups[[i]])
    dir.create(w$dir)
    saveRDS(list(url = url, tls = tls, prefixes = w$prefixes, breakers = n_breakers, kind = kind, worker = i,
                 sync_interval = sync_interval, timeout = timeout, sample_every = sample_every,
                 parent_pid = Sys.getpid(), lifetime = lifetime,
                 r_nice = opts[["r-nice"]], worker_nice = opts[["worker-nice"]]),
            file.path(w$dir, "config.rds"))
    # nice(1) execs Rscript: the process (and its PID) is the worker's.
    rscript <- c(file.path(R.home("bin"), "Rscript"), "--vanilla", file.path(home, "scale-worker.R"), w$dir)
    if (opts[["worker-nice"]] > 0) rscript <- c("nice", "-n", format(opts[["worker-nice"]]), rscript)
    w$proc <- processx::process$new(
      rscript[[1]], rscript[-1],
      env = c("current", R_LIBS = paste(.libPaths(), collapse = .Platform$path.sep),
              if (!is.null(shim)) c(LD_PRELOAD = shim, CB_ROUND_TRIPS_SO = shim)),
      stdout = file.path(w$dir, "log"), stderr = "2>&1", cleanup = TRUE, supervise = TRUE
    )
    cleanup$add(function() if (w$proc$is_alive()) w$proc$kill())
    w
  })
}

# ---------------------------------------------------------------------------
# One scenario

q <- function(x, p) if (length(x)) unname(stats::quantile(x, p, type = 7, na.rm = TRUE)) else NA_real_
ms <- function(x) sprintf("%.1f ms", 1000 * x)
pct <- function(x) sprintf("%.1f%%", 100 * x)

# What one store's samples in [t0, t1] say.
store_figures <- function(s, t0, t1) {
  s <- s[s$at >= t0 & s$at <= t1, , drop = FALSE]
  if (nrow(s) < 2L) return(NULL)
  span <- max(s$at) - min(s$at)
  ends <- sort(unique(s$last_sync[!is.na(s$last_sync) & s$last_sync >= t0 & s$last_sync <= t1]))
  list(
    syncs_per_s = if ("syncs" %in% names(s)) (max(s$syncs) - min(s$syncs)) / span else length(ends) / span,
    failures = if ("sync_failures" %in% names(s)) max(s$sync_failures) - min(s$sync_failures) else NA_real_,
    fleet = mean(s$fleet),
    lag = s$sync_lag[!is.na(s$sync_lag)],
    gaps = diff(ends)
  )
}

run_scenario <- function(kind, n_breakers, server, opts, dir, shim, say) {
  url <- server$url
  tls <- server$client_tls
  redis <- redis_client(url, tls)
  cleanup <- new_stoppers()
  on.exit(cleanup$stop_all())
  redis("FLUSHALL")
  load_before <- trimws(system2("uptime", stdout = TRUE))
  say(sprintf("\n%s%s: %d connections in %d processes, %s %s breakers each (%s in all), %s\n", toupper(kind),
              if (is.null(tls)) "" else " over TLS", opts$connections, opts$processes, fmt_n(n_breakers), kind,
              fmt_n(n_breakers * opts$connections), format(Sys.time(), "%H:%M:%S UTC", tz = "UTC")))
  t_start <- now()
  workers <- start_workers(kind, url, tls, n_breakers, opts, dir, cleanup, shim)
  per_worker <- n_breakers * max(lengths(lapply(workers, function(w) w$prefixes)))
  wait_files(workers, "created.rds", 120 + 0.1 * per_worker)
  made_in <- now() - t_start
  created <- do.call(rbind, lapply(workers, function(w) cbind(worker = w$id, readRDS(file.path(w$dir, "created.rds")))))
  say(sprintf("  made in %.0f s (every process started, loaded the package, made its stores); warm-up %g s\n",
              made_in, opts$warmup))
  Sys.sleep(opts$warmup)

  # The window.
  redis("CONFIG", "SET", "latency-tracking-info-percentiles", "50 99 99.9 100")
  redis("CONFIG", "RESETSTAT")
  t0 <- now()
  cpu0 <- info(redis, "cpu")
  proc0 <- process_cpu(server$pid)
  busy0 <- busy_cpu_seconds()
  Sys.sleep(opts$seconds)
  t1 <- now()
  cpu1 <- info(redis, "cpu")
  proc1 <- process_cpu(server$pid)
  busy1 <- busy_cpu_seconds()
  all <- info(redis)
  clients <- client_counts(redis)
  load_after <- trimws(system2("uptime", stdout = TRUE))

  # The probes' window: each process times a PING every sample_every
  # seconds (not during the CPU window: 8 processes x 50 PINGs a second are
  # the benchmark's load, not the stores').
  for (w in workers) file.create(file.path(w$dir, "probe"))
  t2 <- now()
  Sys.sleep(probe_seconds)
  t3 <- now()

  for (w in workers) file.create(file.path(w$dir, "stop"))
  wait_files(workers, "samples.rds", 60)
  out <- lapply(workers, function(w) readRDS(file.path(w$dir, "samples.rds")))
  cleanup$stop_all()

  window <- t1 - t0
  redis_cpu <- (num(cpu1, "used_cpu_sys") + num(cpu1, "used_cpu_user") -
                  num(cpu0, "used_cpu_sys") - num(cpu0, "used_cpu_user")) / window
  # One command's INFO commandstats line, NA when it was not run in the
  # window (`all` is a named character vector: [[ ]] of an absent name is
  # an error, not NULL; a window without a PING broke the script).
  stat_of <- function(name) if (name %in% names(all)) all[[name]] else NA_character_
  evalsha <- stat_of("cmdstat_evalsha")
  lat <- stat_of("latency_percentiles_usec_evalsha")
  per_store <- list()
  per_process <- list()
  for (k in seq_along(out)) {
    o <- out[[k]]
    figs <- lapply(split(o$samples, o$samples$store), store_figures, t0 = t0, t1 = t1)
    figs <- Filter(Negate(is.null), figs)
    per_store <- c(per_store, figs)
    p <- o$pings[o$pings$at >= t0 & o$pings$at <= t1, , drop = FALSE]
    probed <- o$pings[o$pings$at >= t2 & o$pings$at <= t3 & o$pings$probing == 1, , drop = FALSE]
    gaps <- unlist(lapply(figs, `[[`, "gaps"))
    per_process[[k]] <- list(
      stores = length(figs),
      syncs_per_s = mean(vapply(figs, `[[`, 1, "syncs_per_s")),
      failures = sum(vapply(figs, `[[`, 1, "failures")),
      fleet = mean(vapply(figs, `[[`, 1, "fleet")),
      gaps = gaps,
      lag = unlist(lapply(figs, `[[`, "lag")),
      ping = probed$took[!is.na(probed$took)],
      ping_failed = sum(is.na(probed$took)),
      round_trips = sync_round_trips(o, t0, t1),
      calls = if (nrow(p) > 1L) (max(p$calls) - min(p$calls)) / (max(p$at) - min(p$at)) else NA_real_
    )
  }
  links_tls <- unlist(lapply(out, `[[`, "tls"))
  list(kind = kind, tls = !is.null(tls), links_tls = links_tls, n = n_breakers, opts = opts, made_in = made_in,
       created = created, window = window,
       redis_cpu = redis_cpu, redis_cpu_proc = (proc1 - proc0) / window,
       machine_busy = (busy1 - busy0) / window, load_before = load_before, load_after = load_after,
       commands_per_s = num(all, "total_commands_processed") / window,
       evalsha_calls = subfield(evalsha, "calls"), evalsha_usec = subfield(evalsha, "usec_per_call"),
       evalsha_p50 = subfield(lat, "p50"), evalsha_p99 = subfield(lat, "p99"),
       evalsha_max = subfield(lat, "p100"),
       ping_calls = subfield(stat_of("cmdstat_ping"), "calls"),
       commands = vapply(all[startsWith(names(all), "cmdstat_")], subfield, 1, name = "calls"),
       connected = num(all, "connected_clients"), clients = clients,
       keys = sum(vapply(grep("^db[0-9]+$", names(all), value = TRUE), function(d) subfield(all[[d]], "keys"), 1)),
       used_memory = num(all, "used_memory"), per_store = per_store, per_process = per_process)
}

# ---------------------------------------------------------------------------
# The report

report <- function(r, say) {
  o <- r$opts
  say(sprintf("\n## %s%s: %s %s breakers per connection, %d connections in %d processes (%s breakers)\n\n",
              if (r$kind == "idle") "A. Idle" else "B. Busy", if (r$tls) ", over TLS" else "", fmt_n(r$n), r$kind,
              o$connections, o$processes, fmt_n(r$n * o$connections)))
  say("Load before: ", r$load_before, "\nLoad after:  ", r$load_after, "\n\n")
  cr <- r$created
  syncs <- vapply(r$per_store, `[[`, 1, "syncs_per_s")
  gaps <- unlist(lapply(r$per_store, `[[`, "gaps"))
  lags <- unlist(lapply(r$per_store, `[[`, "lag"))
  fleet <- vapply(r$per_store, `[[`, 1, "fleet")
  failures <- sum(vapply(r$per_store, `[[`, 1, "failures"))
  subs <- if ("subscribe" %in% names(r$clients$by_cmd)) r$clients$by_cmd[["subscribe"]] else 0L
  by_cmd <- paste(sprintf("%s %d", names(r$clients$by_cmd), as.integer(r$clients$by_cmd)), collapse = ", ")
  top <- utils::head(sort(r$commands, decreasing = TRUE), 6)
  top <- paste(sprintf("%s %s", sub("^cmdstat_", "", names(top)), fmt_n(top / r$window)), collapse = ", ")
  rts <- do.call(rbind, lapply(r$per_process, `[[`, "round_trips"))
  measured <- !is.null(rts) && nrow(rts) > 0L
  rt_all <- if (measured) rts$seconds else numeric()
  target_cpu <- if (r$kind == "idle") 0.05 else 0.5
  rows <- list(
    c("breakers made: whole start (processes, package, stores, breakers)", sprintf("%.0f s", r$made_in)),
    c("making one store's breakers: median, slowest store (per breaker: median)",
      sprintf("%.1f s, %.1f s (%.2f ms)", stats::median(cr$seconds), max(cr$seconds),
              1000 * stats::median(cr$seconds) / max(1, r$n))),
    c("breakers that failed to be made", fmt_n(sum(cr$errors))),
    c("Redis clients (CLIENT LIST), by last command", sprintf("%d: %s", r$clients$total, by_cmd)),
    c("threads the stores added to the workers; threads that sent syncs; store connections asked for",
      sprintf("%d; %s; %d", sum(r$created$threads_added[!duplicated(r$created$worker)]),
              if (measured) as.character(nrow(unique(rts[c("pid", "tid")]))) else "-", o$connections)),
    c("subscriptions (SUBSCRIBE: made after a good sync, dropped with a failed one)", subs),
    c("the stores' links: TLS (each store's first breaker, cb_fleet_info()$tls, at the end)",
      if (length(r$links_tls)) {
        tab <- table(r$links_tls)
        paste(sprintf("%s %d", names(tab), as.integer(tab)), collapse = ", ")
      } else {
        "-"
      }),
    c(sprintf("**Redis CPU, %% of one core** (INFO cpu over %.1f s; /proc)", r$window),
      sprintf("**%s** (%s); target at most %s: %s", pct(r$redis_cpu), pct(r$redis_cpu_proc), pct(target_cpu),
              verdict(r$redis_cpu <= target_cpu))),
    c("machine: cores busy during the window (of 2)", sprintf("%.2f", r$machine_busy)),
    c("commands/s, Lua's redis.call() included (of which PING: the stores' syncs with nothing to carry)",
      sprintf("%s (%s)", fmt_n(r$commands_per_s), fmt_n(r$ping_calls / r$window))),
    c("commands/s by command (the most)", top),
    c("EVALSHA/s; Redis time per EVALSHA (commandstats)",
      sprintf("%s; %.0f us", fmt_n(r$evalsha_calls / r$window), r$evalsha_usec)),
    c("Redis time per EVALSHA p50 / p99 / max (latencystats)",
      sprintf("%.0f / %.0f / %.0f us", r$evalsha_p50, r$evalsha_p99, r$evalsha_max)),
    c("syncs/s per store: median (min-max); scheduled about 1/sync_interval",
      sprintf("%.2f (%.2f-%.2f) of %.0f", stats::median(syncs), min(syncs), max(syncs), 1 / sync_interval)),
    c("failed syncs in the window (all stores); share of samples in mode \"fleet\"",
      sprintf("%s; %s (lowest store %s)", fmt_n(failures), pct(mean(fleet)), pct(min(fleet)))),
    if (measured) {
      c(paste("**sync round trip** (every sync of every store, measured; a failed one ends at timeout):",
              "p50 / p99 / max; failed"),
        sprintf("**%s / %s / %s**; %s of %s", ms(q(rt_all, 0.5)), ms(q(rt_all, 0.99)), ms(max(rt_all, -Inf)),
                fmt_n(sum(rts$ok == 0)), fmt_n(nrow(rts))))
    } else {
      c("sync round trip, mean (estimated: mean gap - sync_interval)", ms(mean(gaps) - sync_interval))
    },
    c("gap between two completed syncs of a store: p50 / p99 / max",
      sprintf("%s / %s / %s", ms(q(gaps, 0.5)), ms(q(gaps, 0.99)), ms(max(gaps, -Inf)))),
    c("sync_lag sampled every 20 ms: p50 / p99 / max",
      sprintf("%s / %s / %s", ms(q(lags, 0.5)), ms(q(lags, 0.99)), ms(max(lags, -Inf)))),
    c("keys in Redis; used_memory", sprintf("%s; %.1f MB", fmt_n(r$keys), r$used_memory / 1e6))
  )
  say("| measure | value |\n|---|---|\n")
  for (row in rows) say("| ", row[[1]], " | ", row[[2]], " |\n")
  say(sprintf("\nPer process (round trips also as a share of timeout, %g s):\n\n", timeout))
  say("| process | stores | calls/s | syncs/s per store | failed syncs | mode fleet | sync round trip p50 / p99 / max",
      " | PING p50 / p99 / max (failed) |\n|---|---|---|---|---|---|---|---|\n")
  worst <- -Inf
  for (k in seq_along(r$per_process)) {
    p <- r$per_process[[k]]
    rt <- if (measured && !is.null(p$round_trips)) p$round_trips$seconds else numeric()
    rt_text <- if (length(rt)) {
      worst <- max(worst, q(rt, 0.99))
      sprintf("%s / %s / %s (%s / %s / %s)", ms(q(rt, 0.5)), ms(q(rt, 0.99)), ms(max(rt)),
              pct(q(rt, 0.5) / timeout), pct(q(rt, 0.99) / timeout), pct(max(rt) / timeout))
    } else if (measured) {
      "none in the window"
    } else {
      est <- mean(p$gaps) - sync_interval
      if (is.finite(est)) worst <- max(worst, est)
      if (is.finite(est)) sprintf("mean %s, estimated (%s)", ms(est), pct(est / timeout)) else "no two syncs"
    }
    say(sprintf("| %d | %d | %s | %.2f | %s | %s | %s | %s / %s / %s (%d) |\n", k, p$stores,
                if (is.na(p$calls)) "-" else fmt_n(p$calls), p$syncs_per_s, fmt_n(p$failures), pct(p$fleet),
                rt_text, ms(q(p$ping, 0.5)), ms(q(p$ping, 0.99)), ms(max(p$ping, -Inf)), p$ping_failed))
  }
  say(sprintf(paste("\nEvery process's sync round trip under 20%% of timeout (%s; judged on each process's p99%s):",
                    "worst %s (%s): %s\n"), ms(0.2 * timeout), if (measured) "" else ", estimated mean",
              ms(worst), pct(worst / timeout), if (is.finite(worst)) verdict(worst < 0.2 * timeout) else "MISSED"))
  # What the comparison of a plain and a TLS run (--tls both) reads.
  calls <- sum(vapply(r$per_process, function(p) if (is.na(p$calls)) 0 else p$calls, 0))
  reports <- if ("cmdstat_hmget" %in% names(r$commands)) r$commands[["cmdstat_hmget"]] / r$window else NA_real_
  invisible(list(kind = r$kind, tls = r$tls, redis_cpu = r$redis_cpu, redis_cpu_proc = r$redis_cpu_proc,
                 calls = calls, asked = if (r$kind == "busy") o$connections * r$n / sync_interval else NA_real_,
                 reports = reports,
                 machine_busy = r$machine_busy, commands_per_s = r$commands_per_s,
                 evalsha_per_s = r$evalsha_calls / r$window, evalsha_usec = r$evalsha_usec,
                 syncs_per_s = stats::median(syncs), failures = failures, fleet = mean(fleet),
                 measured = measured, rt_p50 = q(rt_all, 0.5), rt_p99 = q(rt_all, 0.99),
                 rt_max = max(rt_all, -Inf), rt_failed = if (measured) sum(rts$ok == 0) else NA_real_,
                 rt_n = length(rt_all), worst_p99 = worst, gap_mean = mean(gaps)))
}

# With --tls both: each scenario, plain against TLS, from report()'s figures.
compare <- function(figures, say) {
  for (kind in unique(vapply(figures, `[[`, "", "kind"))) {
    f <- Filter(function(x) x$kind == kind, figures)
    plain <- Filter(function(x) !x$tls, f)
    tls <- Filter(function(x) x$tls, f)
    if (!length(plain) || !length(tls)) next
    a <- plain[[1]]
    b <- tls[[1]]
    ratio <- function(x, y) if (is.finite(x) && is.finite(y) && y > 0) fmt_x(x / y) else "-"
    row <- function(label, x, y, f) say(sprintf("| %s | %s | %s | %s |\n", label, f(x), f(y), ratio(y, x)))
    say(sprintf("\n## %s: plain against TLS (run back to back, same options)\n\n",
                if (kind == "idle") "A. Idle" else "B. Busy"))
    say("| measure | plain (redis://) | TLS (rediss://) | TLS / plain |\n|---|---|---|---|\n")
    row("**Redis CPU, % of one core** (INFO cpu)", a$redis_cpu, b$redis_cpu, pct)
    row("Redis CPU from /proc", a$redis_cpu_proc, b$redis_cpu_proc, pct)
    row("machine: cores busy (of 2)", a$machine_busy, b$machine_busy, function(x) sprintf("%.2f", x))
    if (kind == "busy") {
      row(sprintf("calls/s made by all workers (asked: %s)", fmt_n(a$asked)), a$calls, b$calls, fmt_n)
    }
    row("breaker reports/s (HMGET: one per breaker with news per sync)", a$reports, b$reports, fmt_n)
    row("Redis CPU per breaker report", a$redis_cpu / a$reports * 1e6, b$redis_cpu / b$reports * 1e6,
        function(x) if (is.finite(x)) sprintf("%.1f us", x) else "-")
    row("commands/s", a$commands_per_s, b$commands_per_s, fmt_n)
    row("EVALSHA/s", a$evalsha_per_s, b$evalsha_per_s, fmt_n)
    row("Redis time per EVALSHA (commandstats)", a$evalsha_usec, b$evalsha_usec, function(x) sprintf("%.1f us", x))
    row("syncs/s per store (median)", a$syncs_per_s, b$syncs_per_s, function(x) sprintf("%.2f", x))
    row("failed syncs (all stores)", a$failures, b$failures, fmt_n)
    row("share of samples in mode \"fleet\"", a$fleet, b$fleet, pct)
    if (a$measured && b$measured) {
      row("**sync round trip p50** (all stores)", a$rt_p50, b$rt_p50, ms)
      row("**sync round trip p99** (all stores)", a$rt_p99, b$rt_p99, ms)
      row("sync round trip max", a$rt_max, b$rt_max, ms)
      row("sync round trips timed", a$rt_n, b$rt_n, fmt_n)
      row("failed sync round trips", a$rt_failed, b$rt_failed, fmt_n)
      row("sync round trip p99 of the worst process", a$worst_p99, b$worst_p99, ms)
    } else {
      row("sync round trip, mean (estimated: mean gap - sync_interval)", a$gap_mean - sync_interval,
          b$gap_mean - sync_interval, ms)
    }
  }
}

# ---------------------------------------------------------------------------

args <- commandArgs(TRUE)
# --tls is a flag that may take a value: "--tls both" is "--tls=both".
at <- which(args == "--tls" & c(args[-1], "") %in% c("no", "yes", "both"))
if (length(at)) {
  args[at] <- paste0("--tls=", args[at + 1L])
  args <- args[-(at + 1L)]
}
values <- parse_options(args, spec)
if (as_flag(values$help, "help")) usage(0, this_file)
opts <- list()
for (name in names(defaults)) {
  opts[[name]] <- if (is.null(values[[name]])) defaults[[name]] else as_bounded_number(values[[name]], name, spec)
}
if (opts$processes > opts$connections) bad_option("--processes must be at most --connections")
tls_mode <- if (is.null(values$tls)) "no" else tolower(values$tls)
tls_mode <- switch(tls_mode, "true" = , "1" = , "yes" = "yes", "false" = , "0" = , "no" = "no", "both" = "both",
                   bad_option("--tls must be no, yes or both, not \"", values$tls, "\""))
# An R thread never runs above its process (--r-nice's range starts there).
opts[["r-nice"]] <- max(opts[["r-nice"]], opts[["worker-nice"]])

needed <- c("circuitbreaker", "processx")
missing <- needed[!vapply(needed, requireNamespace, logical(1), quietly = TRUE)]
if (length(missing) || !nzchar(Sys.which("redis-server"))) {
  cat("scale.R: needs the packages circuitbreaker and processx, and redis-server\n", file = stderr())
  quit(save = "no", status = 1)
}
if (!circuitbreaker:::cb_redis_available()) {
  cat("scale.R: this circuitbreaker was built without hiredis\n", file = stderr())
  quit(save = "no", status = 1)
}

say <- function(...) cat(..., sep = "")
# Where an error came from (the calls then), for its message.
error_calls <- NULL
status <- tryCatch(
  withCallingHandlers({
    cleanup <- new_stoppers()
    tryCatch(
      {
        dir <- tempfile("cb-bench-fleet-scale-")
        dir.create(dir)
        cleanup$add(function() unlink(dir, recursive = TRUE))
        shim <- compile_round_trips(dir, say)
        servers <- list()
        if (tls_mode != "yes") {
          dir.create(file.path(dir, "redis-plain"))
          servers$plain <- redis_server_start(file.path(dir, "redis-plain"), args = c("--maxclients", "10000"))
          cleanup$add(servers$plain$stop)
        }
        if (tls_mode != "no") {
          if (!circuitbreaker:::cb_redis_tls_available()) stop("this circuitbreaker was built without TLS (OpenSSL)")
          for (sub in c("certs", "redis-tls")) dir.create(file.path(dir, sub))
          certs <- redis_tls_certs(file.path(dir, "certs"))
          servers$tls <- redis_tls_server_start(file.path(dir, "redis-tls"), certs, args = c("--maxclients", "10000"))
          cleanup$add(servers$tls$stop)
        }
        redis <- redis_client(servers[[1]]$url, servers[[1]]$client_tls)
        version <- sub("^.*redis_version:([^\r\n]*).*$", "\\1", paste(redis("INFO", "server"), collapse = "\n"))
        say(sprintf("Fleet store at scale: circuitbreaker %s (%s), redis-server %s on 127.0.0.1, %s\n",
                    format(utils::packageVersion("circuitbreaker")), find.package("circuitbreaker"), version,
                    format(Sys.time(), "%Y-%m-%d %H:%M UTC", tz = "UTC")))
        say(sprintf(paste("sync_interval %g s, timeout %g s; window %g s after %g s of warm-up; workers at nice %d,",
                          "their R threads at nice %d; %s\n"),
                    sync_interval, timeout, opts$seconds, opts$warmup, opts[["worker-nice"]],
                    opts[["r-nice"]], switch(tls_mode, no = "plain TCP (redis://)",
                                             yes = "TLS (rediss://, tls = list(ca_file = <the test CA>))",
                                             both = "each scenario on plain TCP, then over TLS")))
        t0 <- now()
        # Each scenario's report as soon as it is measured.
        figures <- list()
        for (kind in c("idle", "busy")) {
          if (opts[[kind]] == 0) next
          for (server in servers) {
            figures[[length(figures) + 1L]] <- report(run_scenario(kind, opts[[kind]], server, opts, dir, shim, say),
                                                      say)
          }
        }
        if (length(servers) > 1L) compare(figures, say)
        say(sprintf("\nTotal %.0f s.\n", now() - t0))
      },
      finally = cleanup$stop_all()
    )
    0L
  }, error = function(e) error_calls <<- sys.calls()),
  error = function(e) {
    cat("scale.R: ", conditionMessage(e), "\n", file = stderr(), sep = "")
    calls <- vapply(error_calls, function(x) paste(deparse(x, nlines = 1L), collapse = ""), "")
    cat("  in: ", paste(utils::tail(substr(calls, 1, 100), 6), collapse = "\n      "), "\n", file = stderr(), sep = "")
    1L
  }
)
quit(save = "no", status = status)
