# The example app (inst/shiny/guarded-fetch) in its ExtendedTask modes:
# FETCH_MODE "mirai" (the request runs in a mirai daemon) and "promise" (a
# curl promise in this process), with shiny::testServer() against a real
# downstream in a background process, and real mirai daemons. The observer
# mode, and the app in a browser, are tested in test-shiny.R.

skip_if_not_installed("shiny")

skip_without_extended_task <- function() {
  skip_if_not(
    utils::packageVersion("shiny") >= "1.8.1",
    paste0("ExtendedTask needs shiny >= 1.8.1; this is shiny ", utils::packageVersion("shiny"))
  )
}

skip_without_mirai <- function() {
  skip_if_not(requireNamespace("mirai", quietly = TRUE), "the mirai mode needs mirai, which is not installed")
  skip_if_not(
    utils::packageVersion("mirai") >= "2.3.0",
    paste0("the mirai mode needs mirai >= 2.3.0; this is mirai ", utils::packageVersion("mirai"))
  )
}

# The app's settings for a test: a downstream, a breaker that opens after two
# failures and lets a probe through after `recovery` seconds, and no periodic
# fetch in the test's time (testServer()'s timers run on its own clock, which
# the tests move by a few seconds at most).
local_task_app <- function(mode, downstream_url, recovery = 60, env = parent.frame()) {
  app_dir <- guarded_fetch_app_dir()
  skip_if(app_dir == "", "the example app is not installed")
  withr::local_envvar(
    DOWNSTREAM_URL = downstream_url,
    BREAKER_FAILURE_THRESHOLD = "2",
    BREAKER_RECOVERY_TIMEOUT = as.character(recovery),
    FETCH_INTERVAL = "600",
    FETCH_MODE = mode,
    FETCH_DAEMONS = "2",
    .local_envir = env
  )
  withr::defer(breaker_remove("downstream"), envir = env)
  # The app starts its daemons when testServer() sources app.R; nothing runs
  # its onStop() here, so the test stops them.
  if (mode == "mirai") withr::defer(mirai::daemons(0, .compute = "guarded-fetch"), envir = env)
  app_dir
}

# A variable of the app (app.R's top level) seen from testServer()'s
# expression, which runs in a copy of the server function's environment whose
# parent is not app.R's.
app_value <- function(session, name) get(name, envir = session$env)

# Runs the later event loop (where promises settle) and Shiny's flush cycle
# until `task` is no longer running: at most `seconds`, and a bounded number
# of rounds.
task_settles <- function(session, task, seconds = 15) {
  deadline <- Sys.time() + seconds
  for (i in seq_len(ceiling(seconds / 0.01))) {
    later::run_now(0.01)
    session$flushReact()
    if (!identical(shiny::isolate(task$status()), "running")) {
      session$flushReact()  # the outputs that read the result, once more
      return(TRUE)
    }
    if (Sys.time() > deadline) break
  }
  FALSE
}

# The html of the dashboard card (an output of the app's dashboard module)
# that shows the breaker `name`, or NULL.
dashboard_card <- function(output, name) {
  for (i in 1:20) {
    html <- tryCatch(output[[paste0("dashboard-info_b", i)]]$html, error = function(e) NULL)
    if (!is.null(html) && grepl(paste0(">", name, "<"), html, fixed = TRUE)) return(html)
  }
  NULL
}

# The number in a dashboard card's table row `label`.
card_number <- function(html, label) {
  row <- regmatches(html, regexpr(paste0("<th>", label, "</th>\\s*<td>[0-9,]+"), html))
  as.numeric(gsub(",", "", sub(".*<td>", "", row)))
}

# Tasks the app's daemons have completed (mirai's dispatcher counts them).
daemon_tasks_completed <- function() {
  unname(mirai::info(.compute = "guarded-fetch")[["completed"]])
}

# The whole story, in either ExtendedTask mode, run by testServer() with the
# app's `session` and `output`: fresh data, failures that open the breaker,
# rejections that answer at once without a request (in the mirai mode,
# without a daemon's task), and a probe that closes it again. The downstream
# is a shiny_downstream_app() and the breaker's recovery_timeout is short.
task_app_story <- function(session, output, mode, downstream) {
  hits <- function() get_json(downstream$url("/hits"))$hits
  in_daemons <- mode == "mirai"
  expect_identical(app_value(session, "fetch_mode"), mode)
  breaker <- app_value(session, "breaker")
  task <- session$env$task  # the session's ExtendedTask
  expect_s3_class(task, "ExtendedTask")
  if (in_daemons) expect_true(mirai::daemons_set(.compute = "guarded-fetch"))

  # The session starts: the observer invokes the task, which runs while
  # the session goes on.
  session$flushReact()
  expect_identical(task$status(), "running")
  expect_true(task_settles(session, task))
  expect_identical(task$status(), "success")
  r <- task$result()
  expect_false(r$stale)
  expect_identical(r$data$item, c("apples", "pears"))
  expect_identical(hits(), 1L)
  if (in_daemons) expect_equal(daemon_tasks_completed(), 1L)
  expect_match(output$data, "apples", fixed = TRUE)
  expect_match(output$freshness$html, "Fresh data", fixed = TRUE)
  expect_match(output$status$html, ">CLOSED<", fixed = TRUE)

  # The downstream fails: each fetch is a request (and a daemon's task)
  # that fails, and the task answers with the last good data.
  get_json(downstream$url("/fail"))
  for (i in 1:2) {
    session$setInputs(refresh = i)
    expect_identical(task$status(), "running")
    expect_true(task_settles(session, task))
    r <- task$result()
    expect_true(r$stale)
    expect_match(r$reason, "HTTP 500", fixed = TRUE)
    expect_identical(r$data$item, c("apples", "pears"))
    expect_identical(hits(), 1L + i)
  }
  expect_identical(breaker$state, "OPEN")
  if (in_daemons) expect_equal(daemon_tasks_completed(), 3L)
  expect_match(output$freshness$html, "Stale data", fixed = TRUE)
  expect_match(output$data, "pears", fixed = TRUE)

  # While the breaker is open, the task's fetch is rejected: the fallback
  # answers with the stale data, with no request and no daemon's task.
  expect_gt(breaker$metrics()$seconds_until_probe, 0)
  for (i in 1:2) {
    session$setInputs(refresh = 2 + i)
    expect_true(task_settles(session, task))
    r <- task$result()
    expect_true(r$stale)
    expect_match(r$reason, "is OPEN", fixed = TRUE)
    expect_identical(r$data$item, c("apples", "pears"))
    expect_equal(breaker$metrics()$rejected, i)
  }
  expect_identical(hits(), 3L)
  if (in_daemons) expect_equal(daemon_tasks_completed(), 3L)

  # The app's dashboard module, unchanged, shows what the task's calls did.
  session$elapse(1000)  # its next poll
  card <- dashboard_card(output, "downstream")
  expect_false(is.null(card))
  expect_match(card, 'cbdash-state-OPEN"[^>]*>OPEN<')
  expect_identical(card_number(card, "failures"), 2)
  expect_identical(card_number(card, "rejected"), 2)
  expect_match(output$status$html, ">OPEN<", fixed = TRUE)

  # The downstream recovers; once the open period is over, the next fetch
  # is a probe, and its success closes the breaker.
  get_json(downstream$url("/recover"))
  wait_for_probe_time(breaker, timeout = 15)
  session$setInputs(refresh = 5)
  expect_true(task_settles(session, task))
  r <- task$result()
  expect_false(r$stale)
  expect_identical(r$data$item, c("apples", "pears"))
  expect_identical(breaker$state, "CLOSED")
  expect_identical(hits(), 4L)
  if (in_daemons) expect_equal(daemon_tasks_completed(), 4L)
  expect_match(output$freshness$html, "Fresh data", fixed = TRUE)
  session$elapse(1000)
  card <- dashboard_card(output, "downstream")
  expect_match(card, 'cbdash-state-CLOSED"[^>]*>CLOSED<')
  expect_identical(card_number(card, "rejected"), 2)
}

test_that("in an ExtendedTask with mirai, the app's fetch opens the breaker, is rejected with no daemon, recovers", {
  skip_on_cran()
  skip_without_extended_task()
  skip_without_mirai()
  skip_if_not_installed("later")
  downstream <- local_downstream(shiny_downstream_app())
  app_dir <- local_task_app("mirai", downstream$url("/data"), recovery = 3)
  shiny::testServer(app_dir, task_app_story(session, output, "mirai", downstream))
})

test_that("in an ExtendedTask with a curl promise, the app's fetch opens the breaker, is rejected, recovers", {
  skip_on_cran()
  skip_without_extended_task()
  skip_if_not_installed("later")
  skip_if_not_installed("curl")
  downstream <- local_downstream(shiny_downstream_app())
  app_dir <- local_task_app("promise", downstream$url("/data"), recovery = 3)
  shiny::testServer(app_dir, task_app_story(session, output, "promise", downstream))
})

test_that("with mirai, a downstream that hangs fails by the daemon's timeout while the session goes on", {
  skip_on_cran()
  skip_without_extended_task()
  skip_without_mirai()
  skip_if_not_installed("later")
  downstream <- local_downstream()
  # The app's breaker has timeout = 2 (seconds): the daemon's curl gives up
  # before the downstream answers.
  app_dir <- local_task_app("mirai", downstream$url("/hang?seconds=5"))
  shiny::testServer(app_dir, {
    task <- session$env$task
    session$flushReact()
    expect_identical(task$status(), "running")
    # The session is not held by the running task: its other outputs render.
    expect_match(output$status$html, ">CLOSED<", fixed = TRUE)
    expect_true(task_settles(session, task, seconds = 20))
    r <- task$result()
    expect_true(r$stale)
    expect_null(r$data)
    expect_match(r$reason, "Timeout", fixed = TRUE)
    m <- app_value(session, "breaker")$metrics()
    expect_identical(m$failures, 1)
    expect_identical(m$state, "CLOSED")  # one failure of two
    expect_match(output$freshness$html, "No data has been fetched yet", fixed = TRUE)
  })
})

test_that("the app runs its fetches as this shiny can, and says what a FETCH_MODE it cannot run needs", {
  app_dir <- guarded_fetch_app_dir()
  skip_if(app_dir == "", "the example app is not installed")
  withr::local_envvar(DOWNSTREAM_URL = "http://127.0.0.1:9/data", FETCH_INTERVAL = "600")
  withr::defer(breaker_remove("downstream"))
  has_task <- utils::packageVersion("shiny") >= "1.8.1"
  has_mirai <- has_task && requireNamespace("mirai", quietly = TRUE) &&
    utils::packageVersion("mirai") >= "2.3.0"
  if (has_mirai) withr::defer(mirai::daemons(0, .compute = "guarded-fetch"))

  # FETCH_MODE=auto: the best mode installed. No flush, so no fetch starts.
  withr::local_envvar(FETCH_MODE = "auto")
  expected <- if (has_mirai) "mirai" else if (has_task) "promise" else "observer"
  shiny::testServer(app_dir, {
    expect_identical(app_value(session, "fetch_mode"), expected)
    expect_identical(!is.null(session$env$task), has_task)
  })

  # A mode that is not one.
  withr::local_envvar(FETCH_MODE = "threads")
  err <- tryCatch(shiny::testServer(app_dir, NULL), error = identity)
  expect_s3_class(err, "guarded_fetch_bad_setting")
  expect_match(conditionMessage(err), 'FETCH_MODE="threads" is not one of', fixed = TRUE)

  # With an older shiny, the ExtendedTask modes say which version they need.
  if (!has_task) {
    withr::local_envvar(FETCH_MODE = "promise")
    err <- tryCatch(shiny::testServer(app_dir, NULL), error = identity)
    expect_s3_class(err, "guarded_fetch_bad_setting")
    expect_match(conditionMessage(err), paste0(
      "needs shiny >= 1.8.1 (for ExtendedTask) (this is shiny ", utils::packageVersion("shiny"), ")"
    ), fixed = TRUE)
  }
})
