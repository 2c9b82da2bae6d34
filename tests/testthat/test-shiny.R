# The Shiny dashboard module and the example app (inst/shiny/guarded-fetch):
# their server logic with shiny::testServer(), and the app in a real headless
# browser.

skip_if_not_installed("shiny")

# ---- breaker_dashboard_server() ---------------------------------------------

test_that("the dashboard shows each breaker's state and reacts when one opens", {
  m <- manual_breaker(failure_threshold = 2, recovery_timeout = 30, name = "shiny-orders")  # removed at the end
  other <- circuit_breaker(clock = m$clock)  # unnamed: labelled by position
  shiny::testServer(breaker_dashboard_server,
    args = list(breakers = list(m$cb, other), interval = 1), {
      session$flushReact()  # runs the observers, as a browser connecting would
      d <- session$returned()
      expect_identical(d$label, c("shiny-orders", "breaker 2"))
      expect_identical(d$name, c("shiny-orders", NA))
      expect_identical(d$state, c("CLOSED", "CLOSED"))
      expect_identical(d$colour[1], "#2e7d32")
      info <- output$info_b1$html
      expect_match(info, "shiny-orders", fixed = TRUE)
      expect_match(info, ">CLOSED<", fixed = TRUE)

      trip(m$cb)
      m$cb$execute(succeed, fallback)  # rejected
      session$elapse(1000)             # the next poll
      d <- session$returned()
      expect_identical(d$state, c("OPEN", "CLOSED"))
      expect_identical(d$colour[1], "#c62828")
      expect_identical(d$failures[1], 2)
      expect_identical(d$rejected[1], 1)
      expect_identical(d$seconds_until_probe[1], 30)
      info <- output$info_b1$html
      expect_match(info, ">OPEN<", fixed = TRUE)
      expect_match(info, "#c62828", fixed = TRUE)
      expect_match(info, "in 30 s", fixed = TRUE)

      m$clock$advance(31)
      m$cb$execute(succeed, fallback)  # the probe closes it
      other$force_open()
      session$elapse(1000)
      expect_identical(session$returned()$state, c("CLOSED", "FORCED_OPEN"))
      expect_match(output$info_b2$html, "#6a1b9a", fixed = TRUE)
      expect_match(output$info_b2$html, "after $reset()", fixed = TRUE)
      other$disable()
      session$elapse(1000)
      expect_identical(session$returned()$colour[2], "#757575")
    })
})

test_that("the dashboard computes calls per second from the breaker's history", {
  m <- manual_breaker(failure_threshold = Inf)
  shiny::testServer(breaker_dashboard_server, args = list(breakers = m$cb, interval = 2), {
    session$flushReact()
    expect_identical(session$returned()$calls_per_second, 0)
    for (i in 1:20) m$cb$execute(if (i %% 4 == 0) fail else succeed, fallback)
    m$clock$advance(5)  # 20 calls in the last 5 s
    session$elapse(2000)
    d <- session$returned()
    expect_equal(d$calls_per_second, 4)
    expect_identical(d$failures, 5)
    expect_equal(d$failure_rate, 0.25)
    expect_match(output$info_b1$html, ">4.0<", fixed = TRUE)
    # Polls follow `interval`: one second later nothing has been read again.
    m$clock$advance(2.5)  # 7.5 s: the same 20 calls over the current bucket and the last
    session$elapse(1000)
    expect_equal(session$returned()$calls_per_second, 4)
    session$elapse(1000)
    expect_equal(session$returned()$calls_per_second, 20 / 7.5)
    m$clock$advance(60)  # quiet for a minute
    session$elapse(2000)
    expect_identical(session$returned()$calls_per_second, 0)
  })
})

test_that("the dashboard draws a failure-rate sparkline per breaker", {
  m <- manual_breaker(failure_threshold = 3, recovery_timeout = 20)
  for (i in 1:60) {
    m$cb$execute(if (i > 20 && i < 40) fail else succeed, fallback)
    m$clock$advance(2)
  }
  shiny::testServer(breaker_dashboard_server, args = list(breakers = list(api = m$cb)), {
    session$flushReact()
    expect_identical(session$returned()$label, "api")
    plot <- output$spark_b1
    expect_match(plot$src, "^data:image/png;base64,")
    expect_identical(plot$alt, "failure rate over the last five minutes")
    # The sparkline's data counts buckets back from the current one (empty
    # here: the clock stands at the start of a new bucket).
    data <- sparklines[["b1"]]()
    expect_identical(range(data$bucket), c(1, 24))
    expect_identical(sum(data$calls) + sum(data$rejected), 60)
    expect_gt(sum(data$rejected), 0)
    expect_identical(data$colour, "#2e7d32")
  })
})

test_that("with breakers = NULL the dashboard follows the registry", {
  first <- local_breaker(name = "shiny-registry-a")
  shiny::testServer(breaker_dashboard_server, args = list(), {
    session$flushReact()
    expect_true("shiny-registry-a" %in% session$returned()$label)
    cards <- output$cards$html
    expect_false("shiny-registry-b" %in% session$returned()$label)
    second <- local_breaker(name = "shiny-registry-b", failure_threshold = 1)
    second$execute(fail, fallback)
    session$elapse(1000)
    d <- session$returned()
    expect_identical(d$state[d$label == "shiny-registry-b"], "OPEN")
    expect_identical(d$label, sort(d$label))
    # A new card appeared, with outputs of its own.
    expect_false(identical(output$cards$html, cards))
    key <- paste0("info_", keys[["shiny-registry-b"]])
    expect_match(output[[key]]$html, ">OPEN<", fixed = TRUE)
  })
})

test_that("the dashboard says so when there is nothing to show", {
  shiny::testServer(breaker_dashboard_server, args = list(breakers = list()), {
    session$flushReact()
    expect_identical(nrow(session$returned()), 0L)
    expect_match(output$cards$html, "No circuit breakers to show yet", fixed = TRUE)
  })
})

test_that("the dashboard's UI namespaces its outputs", {
  ui <- as.character(breaker_dashboard_ui("ops"))
  expect_match(ui, 'id="ops-cards"', fixed = TRUE)
  expect_match(ui, 'class="cbdash"', fixed = TRUE)
})

test_that("the dashboard rejects bad arguments with classed errors", {
  cb <- circuit_breaker()
  bad <- function(...) expect_error(..., class = "circuit_breaker_invalid_argument")
  bad(breaker_dashboard_ui(1))
  bad(breaker_dashboard_ui(""))
  bad(breaker_dashboard_server(NA_character_))
  bad(breaker_dashboard_server("d", interval = 0))
  bad(breaker_dashboard_server("d", interval = c(1, 2)))
  bad(breaker_dashboard_server("d", interval = "1"))
  bad(breaker_dashboard_server("d", interval = Inf))
  bad(breaker_dashboard_server("d", breakers = "api"))
  bad(breaker_dashboard_server("d", breakers = list(cb, 1)))
  bad(breaker_dashboard_server("d", breakers = data.frame(x = 1)))
  err <- tryCatch(breaker_dashboard_server("d", interval = -1), error = identity)
  expect_identical(err$argument, "interval")
  expect_match(conditionMessage(err), "at least 0.1", fixed = TRUE)
  # The same errors through testServer(), where the module is used.
  expect_error(
    shiny::testServer(breaker_dashboard_server, args = list(breakers = list(1)), NULL),
    class = "circuit_breaker_invalid_argument"
  )
})

# ---- the example app's server logic -----------------------------------------

test_that("the example app shows fresh data, then the last good data while the breaker is open", {
  skip_if_not_installed("later")
  skip_if_not_installed("promises")
  skip_if_not_installed("curl")
  app_dir <- guarded_fetch_app_dir()
  skip_if(app_dir == "", "the example app is not installed")
  downstream <- local_downstream(shiny_downstream_app())
  withr::local_envvar(
    DOWNSTREAM_URL = downstream$url("/data"),
    BREAKER_FAILURE_THRESHOLD = "2",
    BREAKER_RECOVERY_TIMEOUT = "60",
    FETCH_INTERVAL = "60",
    FETCH_MODE = "observer"  # test-shiny-task.R tests the ExtendedTask modes
  )
  withr::defer(breaker_remove("downstream"))

  shiny::testServer(app_dir, {
    # testServer() evaluates this in a copy of the server function's
    # environment: read the live `in_flight` flag from the original.
    fetching <- function() session$env$in_flight
    session$flushReact()  # starts the first fetch, as a new session does
    expect_true(fetching())
    expect_true(pump_until(function() !fetching(), 10))
    expect_false(result()$stale)
    expect_identical(result()$data$item, c("apples", "pears"))
    session$flushReact()
    expect_match(output$data, "apples", fixed = TRUE)
    expect_match(output$freshness$html, "Fresh data", fixed = TRUE)
    expect_match(output$status$html, 'id="breaker-state"', fixed = TRUE)
    expect_match(output$status$html, ">CLOSED<", fixed = TRUE)

    # The downstream fails: each fetch falls back to the last good data.
    get_json(downstream$url("/fail"))
    for (i in 1:2) {
      session$setInputs(refresh = i)
      expect_true(fetching())
      expect_true(pump_until(function() !fetching(), 10))
      expect_true(result()$stale)
      expect_identical(result()$data$item, c("apples", "pears"))
    }
    expect_identical(breaker_get("downstream")$state, "OPEN")
    session$elapse(1000)  # the badge polls the breaker every second
    expect_match(output$status$html, ">OPEN<", fixed = TRUE)
    expect_match(output$freshness$html, "Stale data", fixed = TRUE)
    expect_match(output$freshness$html, "HTTP 500", fixed = TRUE)
    expect_match(output$data, "apples", fixed = TRUE)

    # While open, a fetch makes no request and answers with the stale data.
    hits <- get_json(downstream$url("/hits"))$hits
    session$setInputs(refresh = 3)
    expect_true(pump_until(function() !fetching(), 10))
    expect_identical(get_json(downstream$url("/hits"))$hits, hits)
    expect_true(result()$stale)
    expect_match(result()$reason, "is OPEN", fixed = TRUE)
    session$flushReact()
    expect_match(output$data, "pears", fixed = TRUE)

    # The dashboard module of the app shows the same breaker.
    dashboard <- breaker_list()
    expect_identical(dashboard$state[dashboard$name == "downstream"], "OPEN")
  })
})

test_that("the example app says when it has no data to fall back on", {
  skip_if_not_installed("later")
  skip_if_not_installed("promises")
  skip_if_not_installed("curl")
  app_dir <- guarded_fetch_app_dir()
  skip_if(app_dir == "", "the example app is not installed")
  downstream <- local_downstream()
  withr::local_envvar(DOWNSTREAM_URL = downstream$url("/status/503"), FETCH_INTERVAL = "60",
                      FETCH_MODE = "observer")
  withr::defer(breaker_remove("downstream"))
  shiny::testServer(app_dir, {
    session$flushReact()
    expect_true(pump_until(function() !session$env$in_flight, 10))
    expect_true(result()$stale)
    expect_null(result()$data)
    session$flushReact()
    expect_match(output$freshness$html, "No data has been fetched yet", fixed = TRUE)
  })
})

# ---- the example app in a real browser --------------------------------------

test_that("in a headless browser, the example app shows the open breaker", {
  skip_on_cran()
  chromium <- skip_without_browser_app()

  downstream <- local_downstream(shiny_downstream_app())
  get_json(downstream$url("/fail"))  # every /data request answers HTTP 500
  app <- local_guarded_fetch_app(c(
    DOWNSTREAM_URL = downstream$url("/data"),
    BREAKER_FAILURE_THRESHOLD = "1",  # the fetch at startup opens it
    BREAKER_RECOVERY_TIMEOUT = "120",
    FETCH_INTERVAL = "60"
  ))

  browser <- local_chromium(chromium)
  tab <- chromium_open(browser, app$url)
  # Shiny renders over its websocket after the page has loaded: wait (bounded)
  # until the badge and the dashboard's card (with its sparkline) show the
  # open breaker (the dashboard's next poll after the failed fetch).
  rendered <- chromium_wait_for(browser, tab, paste(
    "(function() {",
    "  var badge = document.getElementById('breaker-state');",
    "  var card = document.querySelector('.cbdash-state');",
    "  var spark = document.querySelector('.cbdash-card img');",
    "  return !!badge && badge.textContent === 'OPEN' && !!card &&",
    "    card.textContent === 'OPEN' && !!spark && spark.complete;",
    "})()"
  ))
  html <- chromium_eval(browser, tab, "document.documentElement.outerHTML")
  expect_true(rendered)
  expect_match(html, '<span id="breaker-state"[^>]*>OPEN</span>')
  expect_match(html, "Stale data", fixed = TRUE)
  expect_match(html, "HTTP 500", fixed = TRUE)
  # The dashboard's card for the breaker.
  expect_match(html, '<span class="cbdash-name"[^>]*>downstream</span>')
  expect_match(html, 'class="cbdash-state cbdash-state-OPEN"', fixed = TRUE)

  # "Fetch now" while the breaker is open: the fallback answers without a
  # request, and the dashboard counts the rejected calls.
  rejected_js <- paste(
    "Array.from(document.querySelectorAll('.cbdash-stats tr'))",
    "  .find(function(r) { return r.cells[0].textContent === 'rejected'; }).cells[1].textContent"
  )
  for (i in 1:2) {
    # With an ExtendedTask (shiny >= 1.8.1) the button is a task button, which
    # takes no clicks while a fetch runs (the one at startup, just after the
    # outputs show it): click once it does.
    expect_true(chromium_wait_for(browser, tab, "!document.getElementById('refresh').disabled"))
    chromium_eval(browser, tab, "document.getElementById('refresh').click()")
    expect_true(chromium_wait_for(browser, tab, paste0(
      "(", rejected_js, ").indexOf('", i, " (') === 0"
    ), seconds = 10))
  }
  expect_identical(chromium_eval(browser, tab, "document.getElementById('breaker-state').textContent"),
                   "OPEN")
  expect_identical(get_json(downstream$url("/hits"))$hits, 1L)  # only the first fetch got there

  # The screenshot, kept as a test artifact (tests/testthat/_artifacts/).
  artifacts <- test_path("_artifacts")
  dir.create(artifacts, showWarnings = FALSE)
  screenshot <- file.path(artifacts, "guarded-fetch-open.png")
  unlink(screenshot)
  chromium_screenshot(browser, tab, screenshot)
  expect_true(file.exists(screenshot))
  expect_gt(file.size(screenshot), 10000)
})

test_that("in a headless browser, the task button fetches in an ExtendedTask and shows the result", {
  skip_on_cran()
  skip_if_not(
    utils::packageVersion("shiny") >= "1.8.1",
    paste0("ExtendedTask needs shiny >= 1.8.1; this is shiny ", utils::packageVersion("shiny"))
  )
  skip_if_not(
    requireNamespace("bslib", quietly = TRUE) && utils::packageVersion("bslib") >= "0.7.0",
    "the task button needs bslib >= 0.7.0"
  )
  chromium <- skip_without_browser_app()

  downstream <- local_downstream(shiny_downstream_app())
  app <- local_guarded_fetch_app(c(
    DOWNSTREAM_URL = downstream$url("/data"),
    BREAKER_FAILURE_THRESHOLD = "2",
    BREAKER_RECOVERY_TIMEOUT = "120",
    FETCH_INTERVAL = "600",  # only the fetch at startup and the clicks
    FETCH_MODE = "auto"      # what a user gets: mirai when it is installed
  ))
  browser <- local_chromium(chromium)
  tab <- chromium_open(browser, app$url)
  js <- function(expression) chromium_eval(browser, tab, expression)
  wait <- function(expression, seconds = 15) chromium_wait_for(browser, tab, expression, seconds)

  # The fetch at startup, in the task, renders the table.
  expect_true(wait(paste(
    "!!document.querySelector('#data table') &&",
    "/apples/.test(document.getElementById('data').textContent)"
  )))
  expect_match(js("document.getElementById('fetch-mode').textContent"), "in an ExtendedTask", fixed = TRUE)
  expect_match(js("document.getElementById('freshness').textContent"), "Fresh data", fixed = TRUE)
  expect_true(js("document.getElementById('refresh').classList.contains('bslib-task-button')"))

  # The stat of the dashboard's card for "downstream".
  card_stat <- function(label) {
    paste0(
      "Array.from(document.querySelectorAll('.cbdash-stats tr'))",
      "  .find(function(r) { return r.cells[0].textContent === '", label, "'; }).cells[1].textContent"
    )
  }
  # Clicks the task button once it takes clicks (not while a task runs), and
  # waits until the dashboard's card shows `stat` at `value`.
  click_until <- function(stat, value) {
    expect_true(wait("!document.getElementById('refresh').disabled"))
    js("document.getElementById('refresh').click()")
    expect_true(wait(paste0("(", card_stat(stat), ").indexOf('", value, "') === 0"), seconds = 20))
  }

  # The downstream fails: two clicks, two failed requests, the breaker opens
  # and the task answers with the stale data.
  get_json(downstream$url("/fail"))
  click_until("failures", "1")
  click_until("failures", "2")
  expect_true(wait("document.getElementById('breaker-state').textContent === 'OPEN'"))
  expect_true(wait("/Stale data/.test(document.getElementById('freshness').textContent)"))
  expect_match(js("document.getElementById('data').textContent"), "apples", fixed = TRUE)
  expect_match(js("document.getElementById('freshness').textContent"), "HTTP 500", fixed = TRUE)

  # While it is open, a click is answered by the fallback, with no request.
  click_until("rejected", "1 (")
  expect_true(wait("/is OPEN/.test(document.getElementById('freshness').textContent)"))
  expect_true(wait("!document.getElementById('refresh').disabled"))
  expect_identical(get_json(downstream$url("/hits"))$hits, 3L)

  artifacts <- test_path("_artifacts")
  dir.create(artifacts, showWarnings = FALSE)
  screenshot <- file.path(artifacts, "guarded-fetch-task-open.png")
  unlink(screenshot)
  chromium_screenshot(browser, tab, screenshot)
  expect_gt(file.size(screenshot), 10000)
})

# ---- store badges -------------------------------------------------------------

test_that("the dashboard badges shared breakers: host-shared, and fleet-shared with the mode and masked URL", {
  host <- local_host_store()
  server <- local_redis_server(password = "badge-PW-secret")
  fleet <- breaker_store_redis(server$url, sync_interval = 0.05, timeout = 0.5)
  own <- local_breaker(name = "badge-process")
  on_host <- local_shared_breaker(host, "badge-host", host_args())
  on_fleet <- local_shared_breaker(fleet, "badge-fleet", fleet_args())
  expect_true(wait_until(function() identical(on_fleet$metrics()$mode, "fleet")))
  shiny::testServer(breaker_dashboard_server,
    args = list(breakers = list(own, on_host, on_fleet), interval = 1), {
      session$flushReact()
      expect_false(grepl("cbdash-store", output$info_b1$html, fixed = TRUE))
      expect_match(output$info_b2$html,
                   '<span class="cbdash-store" title="shared by every R process on this host">host-shared</span>',
                   fixed = TRUE)
      badge <- output$info_b3$html
      expect_match(badge, paste0('<span class="cbdash-store" title="shared by a fleet through Redis ',
                                 "redis://:***@127.0.0.1:", server$port, "/0, prefix circuitbreaker; ",
                                 'mode: fleet">fleet-shared</span>'), fixed = TRUE)
      expect_false(grepl("badge-PW-secret", badge, fixed = TRUE))
    })
})
