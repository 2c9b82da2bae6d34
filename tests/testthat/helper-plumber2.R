# The plumber2 counterpart of local_plumber_api() (helper-plumber.R): the
# package's example plumber2 API, or one a function builds, served in a
# background R process on 127.0.0.1 by local_background_api().

# The oldest plumber2 the integration is written for: its api_*() pipe,
# Route$remap_handlers() in routr 2 and reqres's Response$format().
plumber2_minimum <- "0.2.0"

# skip_if_not_installed("plumber2", plumber2_minimum), with a reason that
# names the version also when plumber2 is not installed at all.
skip_without_plumber2 <- function() {
  ok <- requireNamespace("plumber2", quietly = TRUE) &&
    utils::packageVersion("plumber2") >= plumber2_minimum
  if (!ok) {
    have <- if (requireNamespace("plumber2", quietly = TRUE)) {
      paste("this is", utils::packageVersion("plumber2"))
    } else {
      "it is not installed"
    }
    skip(paste0("needs plumber2 >= ", plumber2_minimum, " (", have, ")"))
  }
  invisible(TRUE)
}

# Runs `plumber2::api_package("circuitbreaker", api)` in a background R
# process on a free port of 127.0.0.1, with the given environment variables,
# and waits (at most `wait` seconds) until GET /ping answers. `api` may also
# be a function without arguments that returns a plumber2 API: it runs in
# the background process, so it must be self-contained (`pkg::fun()` calls
# only). Returns what local_background_api() returns; the process is killed
# when `env` ends.
local_plumber2_api <- function(api, envvars = character(), wait = 30, env = parent.frame()) {
  skip_without_plumber2()
  serve <- function(api, port) {
    server <- if (is.function(api)) api() else plumber2::api_package("circuitbreaker", api)
    server$host <- "127.0.0.1"
    server$port <- port
    list(run = function() server$ignite(block = TRUE, showcase = FALSE, silent = TRUE))
  }
  local_background_api(serve, api, "plumber2", envvars, wait, env)
}
