# Real processes for the plumber tests: a downstream service whose health the
# test switches, and the package's example plumber APIs, each in a background
# R process on 127.0.0.1. No mocks.

# A webfakes app serving GET /quote: JSON while its mode is "up", HTTP 500
# while "down", 404 while "missing". PUT /mode/<mode> switches it.
quote_downstream_app <- function() {
  app <- webfakes::new_app()
  app$locals$mode <- "up"
  app$get("/quote", function(req, res) {
    switch(app$locals$mode,
      up = res$send_json(list(symbol = "CB", price = 42.5), auto_unbox = TRUE),
      missing = res$set_status(404L)$send_json(list(error = "no quote"), auto_unbox = TRUE),
      res$set_status(500L)$send_json(list(error = "downstream broken"), auto_unbox = TRUE)
    )
  })
  app$put("/mode/:mode", function(req, res) {
    app$locals$mode <- req$params$mode
    res$send_json(list(mode = app$locals$mode), auto_unbox = TRUE)
  })
  app
}

set_downstream_mode <- function(downstream, mode) {
  res <- http_call(downstream$url(paste0("/mode/", mode)), method = "PUT")
  stopifnot(res$status == 200L)
  invisible(mode)
}

# Runs `plumber::plumb_api("circuitbreaker", api)` in a background R process
# on a free port of 127.0.0.1, with the given environment variables, and
# waits (at most `wait` seconds) until GET /ping answers. `api` may also be a
# function without arguments that returns a router: it runs in the
# background process, so it must be self-contained (`pkg::fun()` calls only).
# Returns a list with `url(path)` and the process; the process is killed when
# `env` ends.
local_plumber_api <- function(api, envvars = character(), wait = 20, env = parent.frame()) {
  skip_if_not_installed("plumber")
  serve <- function(api, port) {
    pr <- if (is.function(api)) api() else plumber::plumb_api("circuitbreaker", api)
    list(run = function() pr$run(host = "127.0.0.1", port = port, docs = FALSE, quiet = TRUE))
  }
  local_background_api(serve, api, "plumber", envvars, wait, env)
}

# The process behind local_plumber_api() and local_plumber2_api()
# (helper-plumber2.R): `serve(api, port)` runs in a background R process and
# builds the API (so it must be self-contained, like `api`), returning a list whose `run()` serves it (blocking). Once
# built, the port is written to a file; then GET /ping is polled until it
# answers 200 (at most `wait` seconds in all).
local_background_api <- function(serve, api, framework, envvars = character(), wait = 20,
                                 env = parent.frame()) {
  skip_if_not_installed("callr")
  # Sent to the process as it is, not with the caller's frame (callr does
  # the same for the function it runs).
  environment(serve) <- globalenv()
  port_file <- tempfile("port")
  log_file <- tempfile(framework, fileext = ".log")
  proc <- callr::r_bg(
    function(serve, api, port, port_file) {
      server <- serve(api, port)
      writeLines(as.character(port), paste0(port_file, ".tmp"))
      file.rename(paste0(port_file, ".tmp"), port_file)
      # Never outlive a test run, even if the test process dies.
      later::later(function() quit(save = "no", status = 0), 120)
      server$run()
    },
    args = list(serve = serve, api = api, port = free_port(), port_file = port_file),
    env = c(callr::rcmd_safe_env(), envvars),
    stdout = log_file, stderr = "2>&1"
  )
  withr::defer({
    proc$kill()
    unlink(c(port_file, log_file))
  }, envir = env)
  log_text <- function() paste(readLines(log_file, warn = FALSE), collapse = "\n")

  deadline <- Sys.time() + wait
  port <- NULL
  while (is.null(port) && Sys.time() < deadline && proc$is_alive()) {
    if (file.exists(port_file)) port <- as.integer(readLines(port_file, warn = FALSE)[[1]])
    else Sys.sleep(0.05)
  }
  what <- paste("The", framework, "API", if (is.character(api)) api else "router")
  if (is.null(port)) stop(what, " did not start:\n", log_text())
  base <- paste0("http://127.0.0.1:", port)
  up <- FALSE
  while (!up && Sys.time() < deadline && proc$is_alive()) {
    res <- tryCatch(http_call(paste0(base, "/ping"), timeout = 2), error = function(e) NULL)
    up <- !is.null(res) && res$status == 200L
    if (!up) Sys.sleep(0.1)
  }
  if (!up) {
    stop(what, " does not answer on ", base, ":\n", log_text())
  }
  list(url = function(path = "/") paste0(base, path), process = proc, log = log_text)
}

# One HTTP request with curl; returns status, headers (a named list, names in
# lower case), the body as text, and the body parsed as JSON when it is JSON.
http_call <- function(url, method = "GET", headers = character(), timeout = 10) {
  stopifnot(startsWith(url, "http://127.0.0.1:"))
  h <- curl::new_handle(timeout_ms = timeout * 1000, customrequest = method)
  if (method %in% c("POST", "PUT")) curl::handle_setopt(h, postfields = "")
  if (length(headers)) curl::handle_setheaders(h, .list = as.list(headers))
  res <- curl::curl_fetch_memory(url, handle = h)
  hdrs <- curl::parse_headers_list(res$headers)
  names(hdrs) <- tolower(names(hdrs))
  body <- rawToChar(res$content)
  Encoding(body) <- "UTF-8"
  type <- if (is.null(hdrs[["content-type"]])) "" else hdrs[["content-type"]]
  json <- if (grepl("json", type)) {
    jsonlite::fromJSON(body, simplifyVector = FALSE)
  }
  list(status = res$status_code, headers = hdrs, body = body, json = json)
}

# The status object of the breaker called `name` in a GET /circuit-breakers
# answer.
breaker_status <- function(res, name) {
  for (b in res$json) if (identical(b$name, name)) return(b)
  NULL
}

# Runs promtool check metrics on `text`; skips when promtool is absent.
expect_promtool_ok <- function(text) {
  promtool <- Sys.which("promtool")
  if (!nzchar(promtool)) {
    skip("promtool (Prometheus) is not installed; on Debian: apt-get install --no-install-recommends prometheus")
  }
  input <- tempfile(fileext = ".prom")
  on.exit(unlink(input))
  writeBin(charToRaw(enc2utf8(text)), input)
  out <- suppressWarnings(system2(promtool, c("check", "metrics"), stdin = input,
                                  stdout = TRUE, stderr = TRUE, timeout = 30))
  status <- if (is.null(attr(out, "status"))) 0L else attr(out, "status")
  expect(status == 0L, paste0("promtool check metrics failed (status ", status, "):\n",
                              paste(out, collapse = "\n")))
  invisible(out)
}
