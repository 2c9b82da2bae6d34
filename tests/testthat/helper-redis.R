# redis_server_start(): how the tests, and the benchmarks, start a
# redis-server (inst/redis/redis-server.R, installed with the package).
redis_server_file <- system.file("redis", "redis-server.R", package = "circuitbreaker")
if (nzchar(redis_server_file)) source(redis_server_file, local = environment())

# A real redis-server for the fleet store's tests: on 127.0.0.1, a free port,
# no persistence, in a private directory (redis_server_start()); stopped
# (and its directory removed) when `env` ends. Its PID goes to the file
# CB_REDIS_PIDFILE names, when set: CI checks that none is left. Tests that
# need it skip where redis-server or hiredis is missing. The result can stop,
# kill and restart (empty, on the same port) the server, and run commands on
# it through a plain connection.
local_redis_server <- function(password = NULL, env = parent.frame()) {
  skip_if_not(circuitbreaker:::cb_redis_available(), "this build has no hiredis")
  skip_if(!nzchar(Sys.which("redis-server")), "redis-server is not installed")
  skip_if_not_installed("processx")
  skip_if_not(exists("redis_server_start", mode = "function"), "the package has no inst/redis/redis-server.R")
  dir <- tempfile("cb-redis-")
  dir.create(dir)
  self <- new.env(parent = emptyenv())
  self$port <- NULL
  self$server <- NULL
  # Started on a free port, started again on the same one.
  self$start <- function() {
    self$server <- redis_server_start(dir, port = self$port, password = password)
    self$port <- self$server$port
    self$url <- self$server$url
    self$process <- self$server$process
    self$conn <- NULL
    invisible(self)
  }
  self$kill <- function() {
    if (!is.null(self$server)) self$server$stop()
    self$conn <- NULL
  }
  self$restart <- function() {
    self$kill()
    self$start()
  }
  # One command (a character vector), on a connection kept for the test; made
  # again once when the server closed it (a test may set Redis's idle
  # `timeout`, or CLIENT KILL it).
  self$call <- function(...) {
    args <- as.character(c(...))
    if (is.null(self$conn)) self$conn <- circuitbreaker:::cb_redis_connect(self$url, 2)
    tryCatch(circuitbreaker:::cb_redis_call(self$conn, args), error = function(e) {
      self$conn <- circuitbreaker:::cb_redis_connect(self$url, 2)
      circuitbreaker:::cb_redis_call(self$conn, args)
    })
  }
  # A field of the fleet state of breaker `name` (numbers as numbers), as
  # the package's read script unpacks it.
  self$fleet <- function(name, field, prefix = "circuitbreaker") {
    v <- self$call("EVAL", fleet_read_script(), "1", fleet_key_of(prefix, name), field)
    if (is.null(v)) NA_real_ else as.numeric(v)
  }
  withr::defer({
    self$kill()
    unlink(dir, recursive = TRUE)
  }, envir = env)
  self$start()
  self
}

# The Redis key of fleet breaker `name` under `prefix`, as the shared-stores
# vignette documents it ("Keys"): cb2:{<prefix>:<name>}, both parts percent-encoded
# (every byte but A-Z a-z 0-9 _ . - as %XX). Written here from the
# documentation, independently of the package's C++, so that the tests check
# the documented scheme.
fleet_key_of <- function(prefix, name) {
  enc <- function(x) {
    bytes <- as.integer(charToRaw(enc2utf8(x)))
    plain <- grepl("^[A-Za-z0-9_.-]$", rawToChar(as.raw(bytes), multiple = TRUE))
    paste(ifelse(plain, rawToChar(as.raw(bytes), multiple = TRUE), sprintf("%%%02X", bytes)), collapse = "")
  }
  sprintf("cb2:{%s:%s}", enc(prefix), enc(name))
}

# The arguments every process of a test gives its fleet breaker.
fleet_args <- function(...) {
  utils::modifyList(list(failure_threshold = 5, recovery_timeout = 30), list(...))
}

# Runs `body(cb, extra)` in a new R process on the fleet breaker `name` of
# the server at `url` (made with `args`), in the background; returns the
# callr process (store_child()). `env`: environment variables for the child
# (the clock-offset test hook, for one).
fleet_child <- function(url, name, args, body, extra = list(), env = character(),
                        sync_interval = 0.05, timeout = 0.2, tls = NULL) {
  store_child("breaker_store_redis",
              list(url, sync_interval = sync_interval, timeout = timeout, tls = tls),
              name, args, body, extra, env = env)
}

# A trip shared between processes, on fleet breaker `name` (fleet_args())
# of the store at `url` (with `tls`), of which `cb` is this process's copy:
# a watcher process makes no call until its copy says OPEN (a success
# anywhere would end the fleet's run of failures), then one, which must be
# rejected; meanwhile two failures here and three in a second process make
# the five of the fleet. Returns the watcher's result, state, the states it
# heard and its link's TLS.
fleet_trip_race <- function(cb, url, name, tls = NULL, timeout = 0.2) {
  watcher <- function(cb, extra) {
    heard <- character()
    cb$on("state_change", function(from, to, ...) heard <<- c(heard, to))
    file.create(extra$ready)
    extra$wait_until(function() identical(cb$state, "OPEN"), timeout = 20, interval = 0.01,
                     what = "the fleet's trip")
    res <- cb$execute(function() "ok", function() "rejected")
    list(result = res, state = cb$state, heard = heard, tls = cb$metrics()$tls)
  }
  ready <- tempfile()
  child <- fleet_child(url, name, fleet_args(), watcher, list(ready = ready, wait_until = child_wait_until()),
                       timeout = timeout, tls = tls)
  expect_true(wait_for_file(ready))
  for (i in 1:2) cb$execute(function() stop("down"), function(e) "fb")
  other <- fleet_child(url, name, fleet_args(), function(cb, extra) {
    for (i in 1:3) cb$execute(function() stop("down"), function(e) "fb")
    # Until the fleet's trip (its 5th failure is one of these) reaches this copy.
    extra$wait_until(function() identical(cb$state, "OPEN"), timeout = 20, interval = 0.01,
                     what = "the fleet's trip")
  }, list(wait_until = child_wait_until()), timeout = timeout, tls = tls)
  collect_children(list(child, other))[[1]]
}

# Waits until file `path` exists (a child's "I am ready"), at most `timeout`
# (helper-wait.R's wait_until(): a timeout fails the test).
wait_for_file <- function(path, timeout = 20) wait_until(function() file.exists(path), timeout)

# Runs `code` without the notices of a fleet store that is alone or rejoins
# (circuit_breaker_store_alone, circuit_breaker_store_rejoined): for tests
# that cut Redis off on purpose and assert something else; the notices have
# tests of their own (test-store-redis-alone.R).
quietly_alone <- function(code) {
  withCallingHandlers(code,
    circuit_breaker_store_alone = function(w) invokeRestart("muffleWarning"),
    circuit_breaker_store_rejoined = function(m) invokeRestart("muffleMessage")
  )
}

# The script that reads a fleet breaker's packed state (the core's, so that
# the tests know no more of the format than its field names).
fleet_read_script <- function() circuitbreaker:::cb_fleet_read_script()
