# Guarded fetch: a Shiny app that loads its data from a downstream HTTP
# service through a circuit breaker.
#
# * The fetch is asynchronous (breaker_fetch_async()): while it waits, this R
#   process keeps serving every other session.
# * While the breaker is open, no request is made: the app shows the last
#   good data, marked stale, at once.
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

library(shiny)
library(circuitbreaker)

setting <- function(name, default) {
  value <- Sys.getenv(name)
  if (nzchar(value)) value else default
}
downstream_url <- setting("DOWNSTREAM_URL", "http://127.0.0.1:8001/data")
fetch_interval <- as.numeric(setting("FETCH_INTERVAL", "5"))

# One breaker for the whole process: every session shares what it learns.
breaker <- circuit_breaker(
  name = "downstream",
  failure_threshold = as.numeric(setting("BREAKER_FAILURE_THRESHOLD", "3")),
  recovery_timeout = as.numeric(setting("BREAKER_RECOVERY_TIMEOUT", "15")),
  timeout = 2  # seconds; a hanging downstream is a failure, not a wait
)

# The last good data, shared by every session of this process.
last_good <- new.env()
last_good$data <- NULL
last_good$fetched_at <- NULL

# The fallback: the last good data, marked stale, with the reason.
stale_data <- function(cond) {
  list(data = last_good$data, fetched_at = last_good$fetched_at, stale = TRUE,
       reason = conditionMessage(cond))
}

# A promise of list(data, fetched_at, stale, reason). Failures (errors,
# timeouts, 5xx answers) count against the breaker and get the fallback; so
# does every call while the breaker is open, without a request being made.
fetch_data <- function() {
  breaker_fetch_async(downstream_url, breaker = breaker, fallback = stale_data) |>
    promises::then(function(res) {
      if (isTRUE(res[["stale"]])) return(res)  # the fallback answered
      if (res$status_code >= 400) stop("the downstream answered HTTP ", res$status_code)
      last_good$data <- as.data.frame(jsonlite::fromJSON(rawToChar(res$content)))
      last_good$fetched_at <- Sys.time()
      list(data = last_good$data, fetched_at = last_good$fetched_at, stale = FALSE)
    }) |>
    promises::catch(stale_data)  # an answer we cannot use: stale data too
}

ui <- fluidPage(
  tags$head(tags$style(HTML("
    .state-badge { color: #fff; border-radius: 4px; padding: 2px 8px; font-weight: 700; }
    .stale-note { background: #fff3cd; border: 1px solid #f9a825; padding: 6px 10px;
      border-radius: 4px; margin: 8px 0; }
  "))),
  titlePanel("Guarded fetch"),
  p("Data from ", code(downstream_url), ", through the circuit breaker ",
    code("downstream"), "."),
  p("Breaker: ", uiOutput("status", inline = TRUE), " ",
    actionButton("refresh", "Fetch now", class = "btn-sm")),
  uiOutput("freshness"),
  tableOutput("data"),
  h3("Circuit breakers"),
  breaker_dashboard_ui("dashboard")
)

server <- function(input, output, session) {
  result <- reactiveVal(NULL)  # the latest list(data, fetched_at, stale, reason)
  in_flight <- FALSE

  fetch <- function() {
    if (in_flight) return(invisible())  # one fetch at a time per session
    in_flight <<- TRUE
    fetch_data() |>
      promises::then(result) |>
      promises::finally(function() in_flight <<- FALSE)
    invisible()
  }

  # Fetch when the session starts, every fetch_interval seconds, and on demand.
  observe({
    invalidateLater(fetch_interval * 1000)
    fetch()
  })
  observeEvent(input$refresh, fetch(), ignoreInit = TRUE)

  output$status <- renderUI({
    invalidateLater(1000)
    result()  # and at once after each fetch
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
