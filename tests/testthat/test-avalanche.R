# The avalanche demonstration (bench/avalanche/, not part of the package)
# starts a webfakes downstream and four plumber APIs in background R
# processes on 127.0.0.1 and loads them for about 11 s (plus start-up). The
# assertions are about behaviour, not timings: the machine may be busy.
#
# The harness is sourced from the repository: it is not installed with the
# package, and R CMD build leaves bench/ out (.Rbuildignore), so these tests
# skip when run from a tarball (R CMD check).

avalanche_harness <- function() {
  path <- test_path("..", "..", "bench", "avalanche", "avalanche.R")
  if (!file.exists(path)) {
    skip("the avalanche harness (bench/avalanche/) is not here: it is in the repository, not in the package tarball")
  }
  harness <- new.env(parent = globalenv())
  source(path, local = harness)
  harness
}

skip_avalanche <- function() {
  skip_on_cran()
  for (pkg in c("plumber", "webfakes", "callr", "curl", "httpuv", "jsonlite", "later", "promises")) {
    skip_if_not_installed(pkg)
  }
}

test_that("avalanche_demo() shows the breakers opening, answering and closing", {
  skip_avalanche()
  harness <- avalanche_harness()
  plot_file <- tempfile("avalanche-", fileext = ".png")
  on.exit(unlink(plot_file), add = TRUE)

  res <- harness$avalanche_demo(
    phase_seconds = c(healthy = 2, hanging = 3, failing = 3, recovered = 3),
    concurrency = 4, downstream_timeout = 0.5, recovery_timeout = 1,
    plot_file = plot_file, quiet = TRUE
  )

  endpoints <- c("trivial", "guarded", "guarded-async", "unguarded")
  guarded_endpoints <- c("guarded", "guarded-async")
  expect_named(res, c("requests", "summary", "transitions", "checks", "phases", "turns",
                      "breaker_metrics", "plot_file"))
  req <- res$requests
  expect_named(req, c("endpoint", "phase", "start", "end", "latency_ms", "status",
                      "fallback", "error"))
  expect_setequal(unique(req$endpoint), endpoints)
  expect_setequal(unique(req$phase), c("healthy", "hanging", "failing", "recovered"))
  expect_equal(nrow(res$summary), 16)
  expect_setequal(unique(res$summary$endpoint), endpoints)
  expect_identical(res$phases$phase, c("healthy", "hanging", "failing", "recovered"))
  # Every endpoint had a turn in every phase, in the order of the endpoints.
  expect_equal(nrow(unique(res$turns[, c("endpoint", "phase")])), 16)
  expect_identical(res$turns$endpoint[1:4], endpoints)

  tr <- res$transitions
  expect_named(tr, c("endpoint", "time", "phase", "from", "to"))
  expect_setequal(unique(tr$endpoint), guarded_endpoints)
  expect_named(res$breaker_metrics, guarded_endpoints)
  recovered_at <- res$phases$start[res$phases$phase == "recovered"]

  # Each guarded endpoint has a breaker of its own; each behaves the same way.
  for (ep in guarded_endpoints) {
    info <- paste("endpoint", ep)
    x <- tr[tr$endpoint == ep, ]
    expect_true(all(diff(x$time) >= 0), info = info)

    # The breaker opened while the downstream was hanging or failing ...
    opened <- x$from == "CLOSED" & x$to == "OPEN" & x$phase %in% c("hanging", "failing")
    expect_true(any(opened), info = info)
    first_open <- x$time[opened][[1]]

    # ... closed again after the downstream recovered, and stayed closed.
    expect_true(any(x$to == "CLOSED" & x$phase == "recovered"), info = info)
    expect_identical(x$to[[nrow(x)]], "CLOSED", info = info)
    expect_identical(res$breaker_metrics[[ep]]$state, "CLOSED", info = info)

    # While it was open, the endpoint answered with the fallback (HTTP 200).
    guarded <- req[req$endpoint == ep, ]
    while_open <- guarded[guarded$start > first_open & guarded$start < recovered_at &
                            !is.na(guarded$end), ]
    expect_gt(nrow(while_open), 0)
    expect_gt(mean(while_open$fallback), 0.5)
    expect_true(all(while_open$status == 200), info = info)
    expect_false(any(guarded$fallback & guarded$status != 200), info = info)
    # Healthy downstream, closed breaker: the downstream's answer.
    healthy <- guarded[guarded$phase == "healthy" & !is.na(guarded$end), ]
    expect_gt(nrow(healthy), 0)
    expect_true(all(healthy$status == 200 & !healthy$fallback), info = info)
  }
  # Each breaker (in the process serving its endpoint) saw calls.
  expect_gt(res$breaker_metrics[["guarded"]]$calls, 0)
  expect_gt(res$breaker_metrics[["guarded-async"]]$calls, 0)

  # /unguarded failed while the downstream hung: timeouts turned into errors.
  unguarded_hanging <- req[req$endpoint == "unguarded" & req$phase == "hanging", ]
  expect_gt(nrow(unguarded_hanging), 0)
  expect_true(any(unguarded_hanging$error))
  expect_false(any(req$fallback[!req$endpoint %in% guarded_endpoints]))

  # /trivial never calls the downstream.
  expect_false(any(req$fallback[req$endpoint == "trivial"]))

  checks <- res$checks
  expect_type(checks$passed, "logical")
  expect_type(checks$values, "double")
  for (prefix in c("guarded", "guarded_async")) {
    # The targets are reported for each guarded variant ...
    targets <- paste0(prefix, "_", c("hanging_req_per_s_share", "hanging_p99_ratio",
                                     "failing_req_per_s_share", "failing_p99_ratio",
                                     "closed_within_target"))
    expect_true(all(targets %in% names(checks$passed)), info = prefix)
    expect_true(all(paste0(prefix, c("_hanging", "_failing")) %in% names(checks$state_at_start)))
    # ... and the behaviour holds for both.
    expect_true(checks$passed[[paste0(prefix, "_opened_during_outage")]], info = prefix)
    expect_true(checks$passed[[paste0(prefix, "_fallbacks_while_open")]], info = prefix)
    expect_true(checks$passed[[paste0(prefix, "_closed_after_recovery")]], info = prefix)
  }
  expect_true(checks$passed[["unguarded_errors_while_hanging"]])

  expect_identical(res$plot_file, plot_file)
  expect_true(file.exists(plot_file))
  expect_gt(file.size(plot_file), 1000)

  # The report reads the speed targets as targets for a quiet machine, apart
  # from the behaviour that holds on any machine.
  report <- capture.output(harness$avalanche_report(res, downstream_timeout = 0.5,
                                                    recovery_timeout = 1, slice_seconds = 0.5))
  expect_true(any(grepl("targets are for a quiet machine", report, fixed = TRUE)))
  expect_true(any(grepl("^Speed, targets for a quiet machine", report)))
  expect_true(any(grepl("^Behaviour \\(holds on any machine", report)))
  expect_false(any(grepl("quiet-machine target.*NOT met", report)))
})

test_that("the avalanche report explains requests that met the next phase's downstream", {
  harness <- avalanche_harness()
  # /unguarded's last three healthy requests were queued when the downstream
  # switched to hanging at 10 s: two waited a timeout each and failed.
  requests <- data.frame(
    endpoint = c("trivial", "unguarded", "unguarded", "unguarded", "unguarded"),
    phase = "healthy",
    start = c(9.9, 9.0, 9.97, 9.98, 9.99),
    end = c(9.91, 9.02, 10.01, 11.0, 12.0),
    latency_ms = c(10, 20, 40, 1020, 2010),
    status = c(200L, 200L, 200L, 504L, 504L),
    fallback = FALSE,
    error = c(FALSE, FALSE, FALSE, TRUE, TRUE),
    stringsAsFactors = FALSE
  )
  phases <- data.frame(phase = c("healthy", "hanging"), mode = c("healthy", "hanging"),
                       start = c(0, 10), end = c(10, 20), stringsAsFactors = FALSE)
  tails <- harness$avalanche_boundary_tails(list(requests = requests, phases = phases),
                                            downstream_timeout = 1)
  expect_equal(nrow(tails), 1)
  expect_identical(tails$endpoint, "unguarded")
  expect_identical(tails$next_mode, "hanging")
  expect_equal(tails$late, 2)
  expect_equal(tails$errors, 2)
  expect_equal(tails$error_share_without, 0)
  expect_lt(tails$p99_ms_without, 100)
  note <- capture.output(harness$avalanche_report_tails(list(requests = requests, phases = phases),
                                                        downstream_timeout = 1))
  expect_true(any(grepl("Why healthy /unguarded", note, fixed = TRUE)))
})

test_that("avalanche_demo() rejects bad arguments before starting anything", {
  harness <- avalanche_harness()
  bad <- list(
    list(phase_seconds = c(1, 2, 3)),
    list(phase_seconds = c(healthy = 1, hanging = 1, failing = 1, later = 1)),
    list(phase_seconds = c(healthy = 1, hanging = -1, failing = 1, recovered = 1)),
    list(phase_seconds = c(1, 2, NA, 4)),
    list(phase_seconds = c(1, 2, Inf, 4)),
    list(phase_seconds = c(1, 2, 3, 601)),
    list(phase_seconds = "10"),
    list(concurrency = 0), list(concurrency = 2.5), list(concurrency = 65),
    list(concurrency = NA), list(concurrency = "8"),
    list(downstream_timeout = 0), list(downstream_timeout = -1), list(downstream_timeout = 31),
    list(downstream_timeout = c(1, 2)), list(downstream_timeout = NULL),
    list(recovery_timeout = 0), list(recovery_timeout = Inf), list(recovery_timeout = TRUE),
    list(failure_threshold = 0), list(failure_threshold = 1.5),
    list(slice_seconds = 0), list(slice_seconds = 4), list(slice_seconds = "0.5"),
    list(phase_seconds = c(1, 1, 1, 1), slice_seconds = 0.5),
    list(phase_seconds = c(1.5, 3, 3, 3), slice_seconds = 0.5),  # no turn for every endpoint
    list(plot_file = 1), list(plot_file = NA_character_), list(plot_file = ""),
    list(plot_file = c("a.png", "b.png")),
    list(plot_file = file.path(tempfile(), "no-such-dir", "a.png")),
    list(quiet = NA), list(quiet = "yes"), list(quiet = c(TRUE, FALSE))
  )
  for (args in bad) {
    expect_error(do.call(harness$avalanche_demo, args), class = "avalanche_invalid_argument")
  }
  err <- tryCatch(harness$avalanche_demo(concurrency = 0), error = identity)
  expect_s3_class(err, "avalanche_error")
  expect_identical(err$argument, "concurrency")
  expect_match(conditionMessage(err), "concurrency")
})

test_that("the avalanche harness finds its scripts next to itself and uses no internals", {
  harness <- avalanche_harness()
  home <- normalizePath(dirname(test_path("..", "..", "bench", "avalanche", "avalanche.R")))
  expect_identical(harness$avalanche_home, home)
  for (name in c("api.R", "downstream.R")) {
    expect_identical(harness$avalanche_script(name), file.path(home, name))
  }
  for (file in c("avalanche.R", "api.R", "downstream.R", "run.R")) {
    code <- readLines(file.path(home, file), warn = FALSE)
    expect_false(any(grepl("circuitbreaker:::", code, fixed = TRUE)), info = file)
    expect_false(any(grepl("system.file(", code, fixed = TRUE)), info = file)
  }
})

test_that("bench/avalanche/run.R rejects a bad option before starting anything", {
  harness <- avalanche_harness()
  run <- file.path(harness$avalanche_home, "run.R")
  rscript <- file.path(R.home("bin"), "Rscript")
  for (args in list(c("--concurrency", "0"), "--no-such-option", c("--phases", "1,2"),
                    c("--phases", "1,2,3,601"), "--plot")) {
    status <- suppressWarnings(system2(rscript, c(shQuote(run), args), stdout = FALSE, stderr = FALSE))
    expect_identical(status, 2L, info = paste(args, collapse = " "))
  }
  help <- suppressWarnings(system2(rscript, c(shQuote(run), "--help"), stdout = TRUE, stderr = TRUE))
  expect_true(any(grepl("--plot FILE", help, fixed = TRUE)))
})
