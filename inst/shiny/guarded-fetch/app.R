# Guarded fetch: a Shiny app that loads its data from a downstream HTTP
# service through a circuit breaker.
#
# * The fetch is asynchronous: while it waits, this R process keeps serving
#   every other session. With shiny >= 1.8.1 it runs in an ExtendedTask, so
#   that the session which started it stays responsive too, and, when mirai
#   is installed, the request itself runs in a mirai daemon.
# * While the breaker is open, no request is made (and no daemon is used):
#   the app shows the last good data, marked stale, at once.
# * The badge shows the breaker's state; the dashboard below shows it live.
#
# Run it with
#   shiny::runApp(system.file("shiny", "guarded-fetch", package = "circuitbreaker"))
# The downstream must answer GET with a JSON array of records (a table).
# Settings, from environment variables:
#   DOWNSTREAM_URL             where the data is (http://127.0.0.1:8001/data)
#   BREAKER_FAILURE_THRESHOLD  consecutive failures that open the breaker (3)
#   BREAKER_RECOVERY_TIMEOUT   seconds before a probe is let through (15)
#   FETCH_INTERVAL             seconds between fetches (5)
#   FETCH_MODE                 how a fetch runs (auto):
#                                "mirai"    an ExtendedTask whose request runs in
#                                           a mirai daemon (shiny >= 1.8.1,
#                                           mirai >= 2.3.0)
#                                "promise"  an ExtendedTask around a curl promise
#                                           of this process (shiny >= 1.8.1)
#                                "observer" a promise started by an observer
#                                           (any shiny)
#                                "auto"     the first of these that is installed
#   FETCH_DAEMONS              mirai daemons the app starts in "mirai" mode (2)

library(shiny)
library(circuitbreaker)

setting <- function(name, default) {
  value <- Sys.getenv(name)
  if (nzchar(value)) value else default
}
downstream_url <- setting("DOWNSTREAM_URL", "http://127.0.0.1:8001/data")
fetch_interval <- as.numeric(setting("FETCH_INTERVAL", "5"))

# What this library can do: ExtendedTask came with shiny 1.8.1, daemons_set()
# with mirai 2.3.0, input_task_button() with bslib 0.7.0.
installed <- function(pkg, version) {
  requireNamespace(pkg, quietly = TRUE) && utils::packageVersion(pkg) >= version
}
has_task <- utils::packageVersion("shiny") >= "1.8.1"
has_mirai <- has_task && installed("mirai", "2.3.0")
has_task_button <- has_task && installed("bslib", "0.7.0")

fetch_mode <- setting("FETCH_MODE", "auto")
if (identical(fetch_mode, "auto")) {
  fetch_mode <- if (has_mirai) "mirai" else if (has_task) "promise" else "observer"
}
local({
  problem <- switch(fetch_mode,
    mirai = if (!has_mirai) "needs shiny >= 1.8.1 and mirai >= 2.3.0",
    promise = if (!has_task) "needs shiny >= 1.8.1 (for ExtendedTask)",
    observer = NULL,
    "is not one of \"auto\", \"mirai\", \"promise\" or \"observer\""
  )
  if (!is.null(problem)) {
    stop(errorCondition(
      sprintf("FETCH_MODE=\"%s\" %s (this is shiny %s).", fetch_mode, problem,
              utils::packageVersion("shiny")),
      class = c("guarded_fetch_bad_setting", "error")
    ))
  }
})
use_task <- fetch_mode != "observer"

# One breaker for the whole process: every session shares what it learns.
breaker <- circuit_breaker(
  name = "downstream",
  failure_threshold = as.numeric(setting("BREAKER_FAILURE_THRESHOLD", "3")),
  recovery_timeout = as.numeric(setting("BREAKER_RECOVERY_TIMEOUT", "15")),
  timeout = 2  # seconds; a hanging downstream is a failure, not a wait
)

# The mirai daemons run the requests. The app starts its own, on a compute
# profile of its own, so that it neither takes over nor shuts down daemons
# that the code running the app has set; they stop with the app.
daemon_profile <- "guarded-fetch"
if (fetch_mode == "mirai" && !mirai::daemons_set(.compute = daemon_profile)) {
  mirai::daemons(as.integer(setting("FETCH_DAEMONS", "2")), .compute = daemon_profile)
  onStop(function() mirai::daemons(0, .compute = daemon_profile))
}

# The last good data, shared by every session of this process.
last_good <- new.env()
last_good$data <- NULL
last_good$fetched_at <- NULL

# The fallback: the last good data, marked stale, with the reason.
stale_data <- function(cond) {
  list(data = last_good$data, fetched_at = last_good$fetched_at, stale = TRUE,
       reason = conditionMessage(cond))
}

# What a fetch gives: the fallback's value as it is, or a curl response (one
# the breaker counted as a success: 5xx answers went to the fallback) made
# into fresh data.
use_response <- function(res) {
  if (isTRUE(res[["stale"]])) return(res)  # the fallback answered
  if (res$status_code >= 400) stop("the downstream answered HTTP ", res$status_code)
  last_good$data <- as.data.frame(jsonlite::fromJSON(rawToChar(res$content)))
  last_good$fetched_at <- Sys.time()
  list(data = last_good$data, fetched_at = last_good$fetched_at, stale = FALSE)
}

# A promise of list(data, fetched_at, stale, reason). Failures (errors,
# timeouts, 5xx answers) count against the breaker and get the fallback; so
# does every call while the breaker is open, without a request being made.
fetch_data <- function() {
  request <- if (fetch_mode == "mirai") {
    # The request runs in a daemon and returns the curl response, which the
    # breaker classifies here as it does for breaker_fetch_async(). The
    # daemon's curl timeout is the breaker's, so a hanging downstream fails.
    breaker$execute_async(function() {
      mirai::mirai(
        curl::curl_fetch_memory(url, handle = curl::new_handle(timeout = timeout)),
        url = downstream_url, timeout = breaker$config$timeout, .compute = daemon_profile
      )
    }, stale_data)
  } else {
    breaker_fetch_async(downstream_url, breaker = breaker, fallback = stale_data)
  }
  request |>
    promises::then(use_response) |>
    promises::catch(stale_data)  # an answer we cannot use: stale data too
}

# "Fetch now": with an ExtendedTask and bslib, a task button, which shows
# the task as busy (and takes no clicks) while it runs.
fetch_button <- if (use_task && has_task_button) {
  bslib::input_task_button("refresh", "Fetch now", label_busy = "Fetching\u2026",
                           class = "btn-sm")
} else {
  actionButton("refresh", "Fetch now", class = "btn-sm")
}

ui <- fluidPage(
  # input_task_button() needs Bootstrap 5; the app looks the same otherwise.
  theme = if (use_task && has_task_button) bslib::bs_theme(version = 5),
  tags$head(tags$style(HTML("
    .state-badge { color: #fff; border-radius: 4px; padding: 2px 8px; font-weight: 700; }
    .stale-note { background: #fff3cd; border: 1px solid #f9a825; padding: 6px 10px;
      border-radius: 4px; margin: 8px 0; }
  "))),
  titlePanel("Guarded fetch"),
  p("Data from ", code(downstream_url), ", through the circuit breaker ",
    code("downstream"), "."),
  p("Breaker: ", uiOutput("status", inline = TRUE), " ", fetch_button),
  uiOutput("freshness"),
  tableOutput("data"),
  p(class = "text-muted", id = "fetch-mode", "Fetches run ", switch(fetch_mode,
    mirai = "in an ExtendedTask, with the request in a mirai daemon.",
    promise = "in an ExtendedTask, as a curl promise in this R process.",
    observer = "as promises started by an observer."
  )),
  h3("Circuit breakers"),
  breaker_dashboard_ui("dashboard")
)

server <- function(input, output, session) {
  if (use_task) {
    # One task per session; its result is the latest list(data, fetched_at,
    # stale, reason). It never fails: fetch_data() ends in the fallback.
    task <- ExtendedTask$new(fetch_data)
    if (has_task_button) bslib::bind_task_button(task, "refresh")
    # A fetch while one runs would be queued behind it; one at a time is
    # enough, as in the observer mode.
    fetch <- function() {
      if (!identical(isolate(task$status()), "running")) task$invoke()
      invisible()
    }
    result <- function() task$result()  # "in progress" while a fetch runs
    fetched <- function() task$status()  # changes when a fetch ends
  } else {
    latest <- reactiveVal(NULL)  # the latest list(data, fetched_at, stale, reason)
    in_flight <- FALSE
    fetch <- function() {
      if (in_flight) return(invisible())  # one fetch at a time per session
      in_flight <<- TRUE
      fetch_data() |>
        promises::then(latest) |>
        promises::finally(function() in_flight <<- FALSE)
      invisible()
    }
    result <- function() latest()
    fetched <- function() latest()
  }

  # Fetch when the session starts, every fetch_interval seconds, and on demand.
  observe({
    invalidateLater(fetch_interval * 1000)
    fetch()
  })
  observeEvent(input$refresh, fetch(), ignoreInit = TRUE)

  output$status <- renderUI({
    invalidateLater(1000)
    fetched()  # and at once after each fetch
    state <- breaker$state
    span(id = "breaker-state", class = "state-badge",
         style = paste0("background-color: ", breaker_state_colours()[[state]], ";"), state)
  })

  output$freshness <- renderUI({
    r <- result()
    if (is.null(r)) return(p("Loading\u2026"))
    if (!r$stale) return(p("Fresh data, fetched at ", format(r$fetched_at, "%H:%M:%S"), "."))
    div(
      id = "stale-note", class = "stale-note",
      strong("Stale data. "),
      if (is.null(r$data)) "No data has been fetched yet. "
      else paste0("Showing the data fetched at ", format(r$fetched_at, "%H:%M:%S"), ". "),
      "The downstream is unavailable: ", r$reason
    )
  })

  output$data <- renderTable(result()$data)

  breaker_dashboard_server("dashboard")
}

shinyApp(ui, server)
