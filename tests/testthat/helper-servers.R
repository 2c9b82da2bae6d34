# Real HTTP servers on 127.0.0.1 for the network tests (no mocks of httr,
# httr2 or curl). Each runs in a background R process and is stopped when the
# test (or the test file) that started it ends. Every webfakes app starts
# with local_downstream(); every other server gets its port from free_port().

# A TCP port of 127.0.0.1 that is free now (nothing listens there): from
# httpuv::randomPort() when httpuv is installed, else the first of at most
# `tries` random ports that a server socket can bind; below 32768, where
# Linux takes the ports of outgoing connections.
free_port <- function(tries = 50) {
  if (requireNamespace("httpuv", quietly = TRUE)) {
    return(as.integer(httpuv::randomPort(min = 20000L, max = 32767L, host = "127.0.0.1", n = tries)))
  }
  for (port in sample(20000:32767, tries)) {
    probe <- tryCatch(serverSocket(port), error = function(e) NULL)
    if (!is.null(probe)) {
      close(probe)
      return(port)
    }
  }
  stop("no free port of 127.0.0.1 found in ", tries, " tries")
}

# A webfakes app with one endpoint per kind of answer a downstream can give.
downstream_app <- function() {
  app <- webfakes::new_app()
  app$get("/ok", function(req, res) res$send_json(list(ok = TRUE), auto_unbox = TRUE))
  app$get("/status/:code", function(req, res) {
    code <- as.integer(req$params$code)
    if (!is.null(req$query$retry_after)) res$set_header("Retry-After", req$query$retry_after)
    res$set_status(code)$send_json(list(status = code), auto_unbox = TRUE)
  })
  app$get("/hang", function(req, res) {
    Sys.sleep(if (is.null(req$query$seconds)) 2 else as.numeric(req$query$seconds))
    res$send_json(list(late = TRUE), auto_unbox = TRUE)
  })
  # A counter the tests can read: how many requests reached the server.
  app$locals$hits <- 0
  app$get("/counted", function(req, res) {
    app$locals$hits <- app$locals$hits + 1
    res$send_json(list(hits = app$locals$hits), auto_unbox = TRUE)
  })
  app$get("/hits", function(req, res) res$send_json(list(hits = app$locals$hits), auto_unbox = TRUE))
  app
}

# Starts a webfakes `app` (by default downstream_app(); helper-plumber.R and
# helper-shiny.R have others) in a background process for `env` (the calling
# test or test file); returns the process (use $url("/ok")). Without an error
# log: its web server logs a client that hangs up early (which the timeout
# tests do on purpose) as an "[error]", and webfakes prints that log when the
# app stops, so a passing run would show error lines.
local_downstream <- function(app = downstream_app(), env = parent.frame()) {
  skip_if_not_installed("webfakes")
  webfakes::local_app_process(app, opts = webfakes::server_opts(remote = TRUE, error_log_file = FALSE),
                              .local_envir = env)
}

# A TCP server on 127.0.0.1 that accepts each connection and closes it
# without answering (curl: "Empty reply from server").
local_dropping_server <- function(env = parent.frame()) {
  skip_if_not_installed("callr")
  proc <- callr::r_bg(function(port) {
    server <- serverSocket(port)
    cat(port, "\n", sep = "")
    deadline <- Sys.time() + 120  # never outlives a test run
    while (Sys.time() < deadline) {
      con <- socketAccept(server, blocking = TRUE, open = "r+b", timeout = 5)
      close(con)
    }
  }, args = list(port = free_port()), stdout = "|", stderr = "|")
  withr::defer(proc$kill(), envir = env)
  port <- NULL
  for (i in 1:100) {  # up to 10 s for the process to start
    proc$poll_io(100)
    line <- proc$read_output_lines()
    if (length(line)) {
      port <- as.integer(line[[1]])
      break
    }
  }
  if (is.null(port)) stop("the dropping server did not start: ", paste(proc$read_error_lines(), collapse = "\n"))
  paste0("http://127.0.0.1:", port)
}

# Runs the later event loop until `done()` is TRUE or `seconds` pass.
pump_until <- function(done, seconds = 10) {
  deadline <- Sys.time() + seconds
  while (!done() && Sys.time() < deadline) later::run_now(0.01)
  done()
}

# The value (or error) of a promise, pumping the event loop.
promise_value <- function(p, seconds = 10) {
  state <- new.env()
  promises::then(p,
    onFulfilled = function(value) state$value <- list(value),
    onRejected = function(err) state$error <- err
  )
  pump_until(function() !is.null(state$value) || !is.null(state$error), seconds)
  if (!is.null(state$error)) stop(state$error)
  if (is.null(state$value)) stop("the promise did not settle within ", seconds, " s")
  state$value[[1]]
}

# A real mirai daemon pool of `n` local processes for the calling test, reset
# (the daemons stopped) when it ends.
local_mirai_daemons <- function(n = 2, env = parent.frame()) {
  skip_if_not_installed("mirai", "2.7.3")
  skip_if_not_installed("promises")
  skip_if_not_installed("later")
  mirai::daemons(n)
  withr::defer(mirai::daemons(0), envir = env)
  invisible(n)
}

# otelsdk::with_otel_record() (in-memory tracer and meter providers) whose
# metrics are flushed before they are read: the in-memory reader otherwise
# exports only every 60 s.
otel_record <- function(expr, what = c("traces", "metrics")) {
  otelsdk::with_otel_record({
    value <- expr
    if ("metrics" %in% what) otel::get_default_meter_provider()$flush()
    value
  }, what = what)
}

# The data points of instrument `name` in the last export that has it, as a
# data frame (one column per attribute, and `value`), or NULL.
otel_points <- function(metrics, name) {
  found <- NULL
  for (resource in metrics) {
    for (scope in resource$scope_metric_data) {
      for (metric in scope$metric_data) {
        if (identical(metric$instrument_name, name)) found <- metric
      }
    }
  }
  if (is.null(found)) return(NULL)
  rows <- lapply(found$point_data_attr, function(p) {
    data.frame(c(unclass(p$attributes), list(value = as.numeric(p$value$value))), check.names = FALSE)
  })
  do.call(rbind, rows)
}
