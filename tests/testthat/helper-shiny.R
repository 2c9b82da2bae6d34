# Helpers for test-shiny.R: a downstream for the example app, the app in a
# background process, and a headless browser to look at it.

# The example app's directory in the installed package ("" if absent).
guarded_fetch_app_dir <- function() {
  system.file("shiny", "guarded-fetch", package = "circuitbreaker")
}

# A webfakes downstream for the example app: GET /data answers a small JSON
# table, or HTTP 500 after GET /fail (until GET /recover). GET /hits tells how
# many requests reached /data.
shiny_downstream_app <- function() {
  app <- webfakes::new_app()
  app$locals$failing <- FALSE
  app$locals$hits <- 0
  app$get("/data", function(req, res) {
    app$locals$hits <- app$locals$hits + 1
    if (app$locals$failing) {
      return(res$set_status(500L)$send_json(list(error = "down"), auto_unbox = TRUE))
    }
    res$send_json(data.frame(item = c("apples", "pears"), stock = c(12L, 7L)))
  })
  app$get("/fail", function(req, res) {
    app$locals$failing <- TRUE
    res$send_json(list(failing = TRUE), auto_unbox = TRUE)
  })
  app$get("/recover", function(req, res) {
    app$locals$failing <- FALSE
    res$send_json(list(failing = FALSE), auto_unbox = TRUE)
  })
  app$get("/hits", function(req, res) res$send_json(list(hits = app$locals$hits), auto_unbox = TRUE))
  app
}

# GET a URL of a test server and return the parsed JSON body.
get_json <- function(url) {
  res <- curl::curl_fetch_memory(url, handle = curl::new_handle(timeout = 5))
  jsonlite::fromJSON(rawToChar(res$content))
}

# The headless Chromium (or Chrome) to use, or "" if there is none. The
# CIRCUITBREAKER_CHROMIUM environment variable may name one.
find_chromium <- function() {
  candidates <- c(Sys.getenv("CIRCUITBREAKER_CHROMIUM"), "chromium", "chromium-browser",
                  "google-chrome", "google-chrome-stable")
  for (candidate in candidates[nzchar(candidates)]) {
    path <- Sys.which(candidate)
    if (nzchar(path)) return(unname(path))
  }
  ""
}

# Skips unless the example app can be tested in a headless browser; returns
# the browser's path.
skip_without_browser_app <- function() {
  skip_if_not_installed("processx")
  skip_if_not_installed("curl")
  chromium <- find_chromium()
  skip_if(chromium == "", "headless Chromium is not installed (apt-get install chromium)")
  skip_if(guarded_fetch_app_dir() == "", "the example app is not installed")
  chromium
}

# Chromium's flags here: headless, and quiet (no background connections to
# the closed network); a throw-away profile keeps runs independent.
chromium_flags <- function(profile) {
  c("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", paste0("--user-data-dir=", profile))
}

# Starts headless Chromium driven through the DevTools protocol over
# --remote-debugging-pipe (commands on fd 3; answers on fd 4, here a file, as
# messages ended by NUL bytes). The command-line --dump-dom and --screenshot
# cannot be used for a Shiny app: they fire once the page has loaded (virtual
# time does not wait for the websocket), before Shiny renders anything.
# Returns list(send, close); `send(method, params, session)` waits (bounded)
# for the answer and returns its `result`. Chromium is killed when `env` ends.
local_chromium <- function(chromium, env = parent.frame()) {
  dir <- tempfile("chromium-")
  dir.create(file.path(dir, "profile"), recursive = TRUE)
  answers <- file.path(dir, "answers")
  commands <- processx::conn_create_pipepair(nonblocking = c(FALSE, FALSE))  # Chromium reads fd 3 blocking
  answer_conn <- processx::conn_create_file(answers, write = TRUE)
  proc <- processx::process$new(
    chromium, c(chromium_flags(file.path(dir, "profile")), "--remote-debugging-pipe", "about:blank"),
    connections = list(commands[[1]], answer_conn), stdout = NULL, stderr = NULL,
    cleanup = TRUE, cleanup_tree = TRUE
  )
  close(commands[[1]])
  close(answer_conn)
  withr::defer({
    if (proc$is_alive()) {  # ask politely, then make sure
      try(processx::conn_write(commands[[2]], c(charToRaw('{"id":0,"method":"Browser.close"}'),
                                                as.raw(0))), silent = TRUE)
      proc$wait(3000)
    }
    if (proc$is_alive()) proc$kill_tree()
    close(commands[[2]])
    unlink(dir, recursive = TRUE)
  }, envir = env)

  last_id <- 0
  read_offset <- 0
  pending <- raw()
  messages <- list()
  # Reads the complete messages that arrived since the last call.
  receive <- function() {
    size <- file.size(answers)
    if (is.na(size) || size <= read_offset) return(invisible())
    con <- file(answers, "rb")
    seek(con, read_offset)
    pending <<- c(pending, readBin(con, "raw", size - read_offset))
    close(con)
    read_offset <<- size
    ends <- which(pending == as.raw(0))
    if (!length(ends)) return(invisible())
    starts <- c(1L, utils::head(ends, -1L) + 1L)
    for (i in seq_along(ends)) {
      text <- rawToChar(pending[starts[i]:(ends[i] - 1L)])
      messages[[length(messages) + 1L]] <<- jsonlite::fromJSON(text, simplifyVector = FALSE)
    }
    pending <<- pending[-seq_len(max(ends))]
    invisible()
  }
  send <- function(method, params = list(), session = NULL, seconds = 10) {
    last_id <<- last_id + 1
    id <- last_id
    message <- list(id = id, method = method, params = params, sessionId = session)
    json <- jsonlite::toJSON(message[!vapply(message, is.null, logical(1))], auto_unbox = TRUE,
                             null = "null", digits = NA)
    if (identical(params, list())) json <- sub('"params":[]', '"params":{}', json, fixed = TRUE)
    processx::conn_write(commands[[2]], c(charToRaw(json), as.raw(0)))
    deadline <- Sys.time() + seconds
    repeat {
      receive()
      for (i in seq_along(messages)) {
        if (isTRUE(messages[[i]]$id == id)) {
          answer <- messages[[i]]
          messages[[i]] <<- NULL
          if (!is.null(answer$error)) stop("Chromium: ", method, ": ", answer$error$message)
          return(answer$result)
        }
      }
      messages <<- Filter(function(m) !is.null(m$id), messages)  # drop events
      if (!proc$is_alive()) stop("Chromium exited")
      if (Sys.time() > deadline) stop("Chromium did not answer ", method, " within ", seconds, " s")
      Sys.sleep(0.02)
    }
  }
  list(send = send, process = proc)
}

# Opens `url` in a new tab of `browser` (from local_chromium()) with a
# width x height viewport; returns the tab's session id for `browser$send()`.
chromium_open <- function(browser, url, width = 1100, height = 800) {
  target <- browser$send("Target.createTarget", list(url = "about:blank"))$targetId
  session <- browser$send("Target.attachToTarget", list(targetId = target, flatten = TRUE))$sessionId
  browser$send("Emulation.setDeviceMetricsOverride",
               list(width = width, height = height, deviceScaleFactor = 1, mobile = FALSE), session)
  browser$send("Page.navigate", list(url = url), session)
  session
}

# The value of a JavaScript expression in a tab.
chromium_eval <- function(browser, session, expression) {
  browser$send("Runtime.evaluate", list(expression = expression, returnByValue = TRUE),
               session)$result$value
}

# Evaluates `expression` every 0.2 s until it returns TRUE, at most `seconds`.
chromium_wait_for <- function(browser, session, expression, seconds = 15) {
  deadline <- Sys.time() + seconds
  repeat {
    if (isTRUE(chromium_eval(browser, session, expression))) return(TRUE)
    if (Sys.time() > deadline) return(FALSE)
    Sys.sleep(0.2)
  }
}

# Saves a PNG screenshot of the tab's viewport to `path`.
chromium_screenshot <- function(browser, session, path) {
  shot <- browser$send("Page.captureScreenshot", list(format = "png"), session, seconds = 20)
  writeBin(jsonlite::base64_dec(shot$data), path)
  invisible(path)
}

# Starts the example app in a background R process on a free port of
# 127.0.0.1, with the given environment variables, and waits (bounded) until
# it answers. Returns its URL; the process is killed when `env` ends.
local_guarded_fetch_app <- function(envvars, env = parent.frame(), seconds = 20) {
  skip_if_not_installed("callr")
  port <- free_port()
  app_dir <- guarded_fetch_app_dir()
  process_env <- callr::rcmd_safe_env()
  process_env[names(envvars)] <- envvars
  proc <- callr::r_bg(
    function(app_dir, port) {
      shiny::runApp(app_dir, port = port, host = "127.0.0.1", launch.browser = FALSE)
    },
    args = list(app_dir = app_dir, port = port),
    env = process_env,
    stdout = "|", stderr = "2>&1"
  )
  # The whole tree: in the mirai mode the app has daemons of its own.
  withr::defer(if (proc$is_alive()) proc$kill_tree(), envir = env)
  url <- paste0("http://127.0.0.1:", port, "/")
  deadline <- Sys.time() + seconds
  repeat {
    up <- tryCatch(
      curl::curl_fetch_memory(url, handle = curl::new_handle(timeout = 2))$status_code == 200L,
      error = function(e) FALSE
    )
    if (up) break
    if (!proc$is_alive() || Sys.time() > deadline) {
      stop("the example app did not start within ", seconds, " s:\n",
           paste(proc$read_output_lines(), collapse = "\n"))
    }
    Sys.sleep(0.2)
  }
  list(url = url, process = proc)
}
