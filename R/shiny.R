# A live dashboard of circuit breakers for Shiny apps, in the spirit of the
# Hystrix dashboard: one card per breaker with its state, call rate, failure
# rate sparkline, rejections and time until the next probe. Needs only shiny
# (a suggested package): plain HTML and CSS, base graphics.

#' A live dashboard of circuit breakers (Shiny module)
#'
#' @description
#' A Shiny module that shows circuit breakers live, like the Hystrix
#' dashboard: one card per breaker with
#'
#' * its state, in colour: `CLOSED` green, `OPEN` red, `HALF_OPEN` amber,
#'   `FORCED_OPEN` purple, `DISABLED` grey;
#' * for a shared breaker, its store: `host-shared` ([breaker_store_host()])
#'   or `fleet-shared` ([breaker_store_redis()]; the tooltip names the Redis
#'   URL, without its password, the prefix and the mode, `fleet` or `local`);
#' * the calls made per second, over the last 5 to 10 seconds (the current
#'   5-second bucket of `$history()` and the one before);
#' * a sparkline of the failure rate per 5-second bucket over the last five
#'   minutes (grey bars: the share of calls rejected);
#' * the failure rate in the breaker's window, the failures and rejected calls
#'   so far, and the time until the next probe.
#'
#' Put `breaker_dashboard_ui(id)` in the UI and call
#' `breaker_dashboard_server(id)` in the server function, with the same `id`.
#' The server polls the breakers every `interval` seconds with
#' [shiny::invalidateLater()]; reading a breaker's metrics costs microseconds
#' and makes no call.
#'
#' Times are read on each breaker's own clock, so a breaker on a
#' [breaker_manual_clock()] shows the time of that clock (handy in tests with
#' [shiny::testServer()]).
#'
#' @param id The module's id: a single non-empty string.
#' @param breakers `NULL` to show every registered breaker (those created with
#'   a `name`, and those of [breaker_for()]; see [breaker_list()]), found again
#'   on each poll so that new ones appear; or a [CircuitBreaker], or a list of
#'   them (the list's names, if any, label the cards; otherwise the breakers'
#'   names do).
#' @param interval Seconds between polls: a single number of at least 0.1.
#' @return `breaker_dashboard_ui()`: a tag list for the UI.
#'   `breaker_dashboard_server()`: a reactive that returns a data frame with one
#'   row per card, in the order shown, and the columns `label`, `name`, `state`,
#'   `calls_per_second`, `rejected_per_second`, `calls`, `failures`,
#'   `rejected`, `failure_rate` (in the breaker's window, `NA` before any
#'   call), `seconds_until_probe` and `colour`.
#' @seealso `vignette("shiny", package = "circuitbreaker")`; an example app in
#'   `system.file("shiny", "guarded-fetch", package = "circuitbreaker")`.
#' @examples
#' if (interactive() && requireNamespace("shiny", quietly = TRUE)) {
#'   api <- circuit_breaker(name = "api", failure_threshold = 3, recovery_timeout = 10)
#'   ui <- shiny::fluidPage(
#'     shiny::actionButton("fail", "Make a failing call"),
#'     shiny::actionButton("ok", "Make a successful call"),
#'     breaker_dashboard_ui("breakers")
#'   )
#'   server <- function(input, output, session) {
#'     shiny::observeEvent(input$fail, api$execute(function() stop("down"), function() NULL))
#'     shiny::observeEvent(input$ok, api$execute(function() "up", function() NULL))
#'     breaker_dashboard_server("breakers")
#'   }
#'   shiny::shinyApp(ui, server)
#' }
#' @export
breaker_dashboard_ui <- function(id) {
  check_installed("shiny", "breaker_dashboard_ui")
  check_module_id(id)
  ns <- shiny::NS(id)
  shiny::tagList(
    shiny::singleton(shiny::tags$head(shiny::tags$style(shiny::HTML(dashboard_css)))),
    shiny::div(
      class = "cbdash", id = ns("dashboard"),
      shiny::uiOutput(ns("cards"))
    )
  )
}

#' @rdname breaker_dashboard_ui
#' @export
breaker_dashboard_server <- function(id, breakers = NULL, interval = 1) {
  check_installed("shiny", "breaker_dashboard_server")
  check_module_id(id)
  breakers <- check_dashboard_breakers(breakers)
  check_interval(interval)

  shiny::moduleServer(id, function(input, output, session) {
    ns <- session$ns
    keys <- new.env(parent = emptyenv())  # breaker name -> card key ("b1", ...)

    # Everything the cards show, read from the breakers once per poll: a list
    # of per-card snapshots named by card key, in display order.
    snapshot <- shiny::reactive({
      shiny::invalidateLater(interval * 1000)
      found <- dashboard_breakers(breakers, keys)
      lapply(found, function(x) breaker_snapshot(x$breaker, x$label))
    })

    dashboard <- shiny::reactive(dashboard_table(snapshot()))

    # The set of cards changes only when breakers come or go: the card
    # skeletons are rendered again only then, and each card's outputs are
    # defined once, when it first appears. A card's sparkline is drawn again
    # only when its data changes (reactiveVal() ignores an identical value):
    # an idle breaker costs no plotting.
    shown <- shiny::reactiveVal(list())
    sparklines <- new.env(parent = emptyenv())  # card key -> reactiveVal
    shiny::observe({
      snap <- snapshot()
      shown(lapply(snap, `[[`, "label"))
      for (key in names(snap)) {
        data <- sparkline_data(snap[[key]]$history, snap[[key]]$state)
        if (is.null(sparklines[[key]])) {
          sparklines[[key]] <- shiny::reactiveVal(data)
          define_card_outputs(key, snapshot, sparklines[[key]], output)
        } else {
          sparklines[[key]](data)
        }
      }
    })

    output$cards <- shiny::renderUI({
      cards <- shown()
      if (length(cards) == 0L) {
        return(shiny::div(
          class = "cbdash-empty",
          "No circuit breakers to show yet. Breakers created with a name, or by ",
          shiny::tags$code("breaker_for()"), ", appear here."
        ))
      }
      shiny::div(class = "cbdash-grid", lapply(names(cards), function(key) {
        shiny::div(
          class = "cbdash-card",
          shiny::uiOutput(ns(paste0("info_", key))),
          shiny::plotOutput(ns(paste0("spark_", key)), height = "48px"),
          shiny::div(class = "cbdash-caption", "failure rate, last 5 minutes")
        )
      }))
    })

    dashboard
  })
}

# One card's outputs: the text part and the sparkline.
define_card_outputs <- function(key, snapshot, sparkline, output) {
  force(key)
  force(sparkline)
  output[[paste0("info_", key)]] <- shiny::renderUI({
    snap <- snapshot()[[key]]
    shiny::req(snap)
    card_info(snap)
  })
  output[[paste0("spark_", key)]] <- shiny::renderPlot(
    draw_sparkline(sparkline()),
    bg = "transparent", alt = "failure rate over the last five minutes"
  )
}

# The breakers to show, as a list named by card key of list(breaker, label).
dashboard_breakers <- function(breakers, keys) {
  if (!is.null(breakers)) {
    labels <- names(breakers) %||% rep("", length(breakers))
    out <- lapply(seq_along(breakers), function(i) {
      b <- breakers[[i]]
      label <- if (nzchar(labels[[i]])) labels[[i]] else b$name %||% paste("breaker", i)
      list(breaker = b, label = label)
    })
    names(out) <- sprintf("b%d", seq_along(out))
    return(out)
  }
  # The registry, in breaker_list()'s order. Card keys stay with a name for
  # the whole session, so a card keeps its outputs across polls.
  out <- list()
  for (name in breaker_list()$name) {
    b <- registry_peek(name)  # not a "use": polling must not affect eviction
    if (is.null(b)) next  # removed in between
    key <- keys[[name]]
    if (is.null(key)) {
      key <- paste0("b", length(ls(keys, all.names = TRUE)) + 1L)
      keys[[name]] <- key
    }
    out[[key]] <- list(breaker = b, label = name)
  }
  out
}

# What a card shows about one breaker, read now.
breaker_snapshot <- function(breaker, label) {
  m <- breaker$metrics()
  h <- breaker$history()
  list(
    label = label,
    name = if (is.na(m$name)) NA_character_ else m$name,
    badge = store_badge(core_store(view_core(breaker)), m),
    state = m$state,
    calls = m$calls,
    failures = m$failures,
    rejected = m$rejected,
    failure_rate = m$failure_rate,
    seconds_until_probe = m$seconds_until_probe,
    probes_in_flight = m$probes_in_flight,
    in_flight = m$in_flight,
    max_concurrent = m$max_concurrent,
    rejected_full = m$rejected_full,
    calls_per_second = recent_rate(h, "calls"),
    rejected_per_second = recent_rate(h, "rejected"),
    history = h
  )
}

# Seconds since the current history bucket started. Buckets start at
# multiples of the bucket width on the breaker's clock, so every
# `seconds_ago` is the same modulo the width.
into_current_bucket <- function(history) {
  if (nrow(history) == 0L) return(0)
  width <- history$bucket_seconds[[1]]
  into <- min(history$seconds_ago) %% width
  if (width - into < 1e-9) 0 else into  # rounding just below a bucket start
}

# Events per second over the current history bucket and the one before it
# (5 to 10 seconds).
recent_rate <- function(history, column) {
  if (nrow(history) == 0L) return(0)
  span <- into_current_bucket(history) + history$bucket_seconds[[1]]
  recent <- history$seconds_ago <= span + 1e-9
  sum(history[[column]][recent]) / span
}

# What a sparkline shows: the counts per bucket, with buckets numbered back
# from the current one (0). It changes only when a bucket's counts change or
# a new bucket starts.
sparkline_data <- function(history, state) {
  width <- if (nrow(history)) history$bucket_seconds[[1]] else 5
  list(
    colour = state_colour(state), width = width,
    bucket = round((history$seconds_ago - into_current_bucket(history)) / width),
    calls = history$calls, failures = history$failures, rejected = history$rejected
  )
}

dashboard_table <- function(snapshot) {
  if (length(snapshot) == 0L) {
    return(data.frame(
      label = character(), name = character(), state = character(),
      calls_per_second = numeric(), rejected_per_second = numeric(), calls = numeric(),
      failures = numeric(), rejected = numeric(), failure_rate = numeric(),
      seconds_until_probe = numeric(), colour = character(), stringsAsFactors = FALSE
    ))
  }
  col <- function(field, type) unname(vapply(snapshot, function(s) s[[field]], type))
  states <- col("state", character(1))
  data.frame(
    label = col("label", character(1)),
    name = col("name", character(1)),
    state = states,
    calls_per_second = col("calls_per_second", numeric(1)),
    rejected_per_second = col("rejected_per_second", numeric(1)),
    calls = col("calls", numeric(1)),
    failures = col("failures", numeric(1)),
    rejected = col("rejected", numeric(1)),
    failure_rate = col("failure_rate", numeric(1)),
    seconds_until_probe = col("seconds_until_probe", numeric(1)),
    colour = vapply(states, state_colour, character(1), USE.NAMES = FALSE),
    stringsAsFactors = FALSE
  )
}

state_colour <- function(state) {
  colours <- breaker_state_colours()
  if (state %in% names(colours)) colours[[state]] else "#757575"
}

# The text part of a card.
card_info <- function(snap) {
  colour <- state_colour(snap$state)
  stat <- function(label, value) {
    shiny::tags$tr(shiny::tags$th(label), shiny::tags$td(value))
  }
  shiny::div(
    class = "cbdash-info", style = paste0("border-top-color: ", colour, ";"),
    shiny::div(
      class = "cbdash-head",
      shiny::span(class = "cbdash-name", title = snap$label, snap$label),
      if (!is.null(snap$badge)) {
        shiny::span(class = "cbdash-store", title = snap$badge$tooltip, snap$badge$text)
      },
      shiny::span(
        class = paste0("cbdash-state cbdash-state-", snap$state),
        style = paste0("background-color: ", colour, ";"),
        snap$state
      )
    ),
    shiny::div(
      class = "cbdash-rate",
      shiny::span(class = "cbdash-big", format_rate(snap$calls_per_second)),
      " calls/s"
    ),
    shiny::tags$table(
      class = "cbdash-stats",
      stat("failure rate", format_share(snap$failure_rate)),
      stat("failures", format_count(snap$failures)),
      stat("rejected", paste0(format_count(snap$rejected), " (",
                              format_rate(snap$rejected_per_second), "/s)")),
      stat("next probe", format_probe(snap$state, snap$seconds_until_probe,
                                      snap$probes_in_flight)),
      # A bulkhead's permits, only where there is one.
      if (isTRUE(snap$max_concurrent > 0)) {
        stat("in flight", paste0(format_count(snap$in_flight), " of ", format_count(snap$max_concurrent),
                                 " (", format_count(snap$rejected_full), " full)"))
      }
    )
  )
}

format_rate <- function(x) {
  if (x == 0) "0" else if (x < 10) formatC(x, format = "f", digits = 1) else format(round(x))
}

format_share <- function(x) {
  if (is.na(x)) "\u2013" else paste0(formatC(100 * x, format = "f", digits = 0), " %")
}

format_count <- function(x) format(x, big.mark = ",", scientific = FALSE, trim = TRUE)

format_probe <- function(state, seconds, in_flight) {
  switch(state,
    OPEN = if (seconds > 0) paste0("in ", ceiling(seconds), " s") else "on the next call",
    HALF_OPEN = paste0("probing (", in_flight, " in flight)"),
    FORCED_OPEN = "after $reset()",
    "\u2013"
  )
}

# The failure rate per bucket over the last five minutes, as a sparkline
# (buckets without calls break the line); grey bars show the share of calls
# rejected. `data` comes from sparkline_data().
draw_sparkline <- function(data, window = 300) {
  old <- graphics::par(mar = c(0.2, 0.2, 0.2, 0.2))
  on.exit(graphics::par(old))
  graphics::plot.new()
  graphics::plot.window(xlim = c(-window, 0), ylim = c(-0.08, 1.12), xaxs = "i", yaxs = "i")
  graphics::abline(h = 0.5, col = "grey90")
  k <- seq(0, ceiling(window / data$width) - 1)  # every bucket of the window
  at <- match(k, data$bucket)
  calls <- data$calls[at]
  total <- calls + data$rejected[at]
  rejected_share <- ifelse(!is.na(total) & total > 0, data$rejected[at] / total, 0)
  graphics::rect(-(k + 1) * data$width, 0, -k * data$width, rejected_share,
                 col = "grey85", border = NA)
  rate <- ifelse(!is.na(calls) & calls > 0, data$failures[at] / calls, NA)
  x <- -(k + 0.5) * data$width
  graphics::lines(x, rate, col = data$colour, lwd = 1.5)
  graphics::points(x, rate, col = data$colour, pch = 20, cex = 0.7)
  graphics::box(col = "grey80")
}

dashboard_css <- "
.cbdash-grid { display: flex; flex-wrap: wrap; gap: 12px; margin: 8px 0; }
.cbdash-card { width: 230px; background: #fff; border: 1px solid #ddd; border-radius: 4px;
  font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; font-size: 12px; }
.cbdash-info { border-top: 5px solid #757575; border-radius: 4px 4px 0 0; padding: 6px 8px 2px; }
.cbdash-head { display: flex; justify-content: space-between; align-items: center; gap: 6px; }
.cbdash-store { font-size: 10px; color: #555; border: 1px solid #bbb; border-radius: 3px;
  padding: 0 3px; margin-left: 4px; }
.cbdash-name { font-weight: 600; font-size: 13px; overflow: hidden; text-overflow: ellipsis;
  white-space: nowrap; }
.cbdash-state { color: #fff; border-radius: 3px; padding: 1px 6px; font-size: 11px;
  font-weight: 700; letter-spacing: 0.03em; white-space: nowrap; }
.cbdash-rate { margin: 4px 0; color: #555; }
.cbdash-big { font-size: 22px; font-weight: 600; color: #222; }
.cbdash-stats { width: 100%; border-collapse: collapse; }
.cbdash-stats th { font-weight: normal; color: #666; padding: 1px 0; }
.cbdash-stats td { text-align: right; padding: 1px 0; font-variant-numeric: tabular-nums; }
.cbdash-card .shiny-plot-output { margin: 0 8px; width: auto !important; }
.cbdash-caption { color: #888; font-size: 10px; padding: 0 8px 6px; }
.cbdash-empty { color: #666; font-style: italic; margin: 8px 0; }
.cbdash .recalculating { opacity: 1 !important; }
"

check_module_id <- function(id, call = rlang::caller_env()) check_string(id, "id", call = call)

check_dashboard_breakers <- function(breakers, call = rlang::caller_env()) {
  if (is.null(breakers)) return(NULL)
  if (inherits(breakers, "CircuitBreaker")) return(list(breakers))
  if (!is.list(breakers) || is.object(breakers) ||
      !all(vapply(breakers, inherits, logical(1), what = "CircuitBreaker"))) {
    abort_bad_argument("breakers", "NULL, a circuit breaker or a list of circuit breakers",
                       breakers, call = call)
  }
  breakers
}

check_interval <- function(interval, call = rlang::caller_env()) {
  if (!is.numeric(interval) || length(interval) != 1L || is.na(interval) ||
      !is.finite(interval) || interval < 0.1) {
    abort_bad_argument("interval", "a single number of seconds, at least 0.1", interval, call = call)
  }
}
