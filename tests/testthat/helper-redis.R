# A real redis-server for the Redis store's tests: on 127.0.0.1, a random
# port, no persistence, in a private directory; stopped (and its directory
# removed) when `env` ends. Tests that need it skip where redis-server or
# hiredis is missing.
local_redis_server <- function(password = NULL, env = parent.frame()) {
  skip_if_not(circuitbreaker:::cb_redis_available(), "this build has no hiredis")
  server <- Sys.which("redis-server")
  skip_if(!nzchar(server), "redis-server is not installed")
  skip_if_not_installed("processx")
  port <- free_port()
  dir <- tempfile("cb-redis-")
  dir.create(dir)
  args <- c("--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", dir, "--daemonize", "no", "--loglevel", "warning")
  if (!is.null(password)) args <- c(args, "--requirepass", password)
  proc <- processx::process$new(server, args, stdout = file.path(dir, "log"), stderr = "2>&1",
                                cleanup = TRUE, cleanup_tree = TRUE)
  withr::defer({
    if (proc$is_alive()) {
      proc$signal(tools::SIGCONT)  # a test may have stopped it
      proc$kill()
    }
    unlink(dir, recursive = TRUE)
  }, envir = env)
  url <- if (is.null(password)) sprintf("redis://127.0.0.1:%d/0", port) else
    sprintf("redis://:%s@127.0.0.1:%d/0", utils::URLencode(password, reserved = TRUE), port)
  # Wait (at most 10 s) until it answers.
  store <- breaker_store_redis(url, timeout = 0.5)
  deadline <- Sys.time() + 10
  while (!isTRUE(breaker_store_redis_ping(store)) && Sys.time() < deadline) Sys.sleep(0.05)
  if (!isTRUE(breaker_store_redis_ping(store))) stop("redis-server did not start on port ", port)
  list(process = proc, port = port, url = url)
}
