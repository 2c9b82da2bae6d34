# The bad-input harness (used by test-bad-input.R): one list of bad-looking
# values, what the documentation allows for each argument of each exported
# function, and one walker that tries every value on every argument. A value
# the documentation does not allow must give an error inheriting from
# `circuit_breaker_error` whose message names the argument (in backticks);
# nothing may crash.

# The values tried on every argument. "a_breaker" stands for a fresh
# circuit_breaker() (see bad_value()).
bad_values <- list(
  `NA` = NA, `NA_real_` = NA_real_, `NA_integer_` = NA_integer_, `NA_character_` = NA_character_,
  `NULL` = NULL, negative = -1, zero = 0, fraction = 0.5, one = 1, `Inf` = Inf, `-Inf` = -Inf,
  `NaN` = NaN, huge = 1e300, string = "a", empty_string = "", two_numbers = c(1, 2),
  two_strings = c("a", "b"), empty_numeric = numeric(), `TRUE` = TRUE, list = list(1),
  a_function = function(...) 1, a_date = Sys.Date(), factor = factor("a"),
  an_environment = new.env(), a_breaker = NULL,
  # Echoed values are cut: a message about this one stays short.
  long_string = strrep("x", 1e5), long_vector = rep("y", 1e4)
)

# The value called `label` in bad_values, as a list of one (so that NULL
# survives being put into an argument list).
bad_value <- function(label) {
  if (identical(label, "a_breaker")) list(circuit_breaker()) else bad_values[label]
}

# Predicates for "what the documentation allows".
is_single_number <- function(x) is.numeric(x) && !is.object(x) && length(x) == 1L && !is.na(x)
is_number <- function(x) is_single_number(x) && is.finite(x)
is_whole <- function(x) is_number(x) && x == floor(x)
is_seconds <- function(x, zero_ok) is_number(x) && (if (zero_ok) x >= 0 else x > 0) && x <= 1e9
is_flag <- function(x) isTRUE(x) || isFALSE(x)
is_string <- function(x) is.character(x) && !is.object(x) && length(x) == 1L && !is.na(x) && nzchar(x)
is_fn_or_null <- function(x) is.null(x) || is.function(x)
is_breaker <- function(x) inherits(x, "CircuitBreaker")
null_or <- function(pred) function(x) is.null(x) || pred(x)
between <- function(lo, hi, whole = FALSE) {
  function(x) is_number(x) && x >= lo && x <= hi && (!whole || x == floor(x))
}
nothing <- function(x) FALSE

# What each argument of circuit_breaker() (and CircuitBreaker$new(), and
# $configure() but for `clock` and `name`) accepts, the other arguments at
# their defaults.
breaker_arguments_valid <- list(
  failure_threshold = function(x) (is_whole(x) && x >= 1) || identical(x, Inf),
  recovery_timeout = function(x) is_seconds(x, TRUE),
  failure_rate_threshold = null_or(function(x) is_single_number(x) && x > 0 && x <= 1),
  window_type = function(x) identical(x, "count") || identical(x, "time"),
  window_size = null_or(between(1, 1024, whole = TRUE)),
  minimum_calls = null_or(between(1, 100, whole = TRUE)),
  slow_call_duration = null_or(function(x) is_seconds(x, FALSE)),
  slow_call_rate_threshold = is.null,  # needs slow_call_duration, unset here
  half_open_max_calls = between(1, 32, whole = TRUE),
  half_open_max_wait = null_or(function(x) is_seconds(x, FALSE)),
  backoff_multiplier = between(1, 1e6),
  max_recovery_timeout = null_or(function(x) is_seconds(x, TRUE) && x >= 30),
  jitter = function(x) is_single_number(x) && x >= 0 && x <= 1,
  ramp_up = function(x) is_seconds(x, TRUE),
  health_interval = function(x) is_seconds(x, FALSE),
  max_concurrent = null_or(between(1, 64, whole = TRUE)),  # or share(p), which bad_values has none of
  max_wait = function(x) is_seconds(x, TRUE),
  failure_when = null_or(is.function),
  ignore = null_or(function(x) {
    is.function(x) || (is.character(x) && length(x) > 0 && !anyNA(x) && all(nzchar(x)) && !is.object(x))
  }),
  timeout = null_or(function(x) is_number(x) && x > 0 && x <= 1e6),
  failure_statuses = function(x) {
    is.numeric(x) && !is.object(x) && !anyNA(x) && all(x == floor(x)) && all(x >= 100 & x <= 599)
  },
  respect_retry_after = is_flag,
  health_check = null_or(is.function),
  clock = is.null,
  name = null_or(function(x) is_string(x) && nchar(x, type = "bytes") <= 1000),
  store = is.null  # or a store object, which bad_values has none of
)

# One spec per exported function: `args()` gives the arguments the others
# are tried against (valid ones), `valid` says what each tried argument
# accepts, `call_valid` whether values it accepts are called too (not where
# that would start a server or a demonstration), `also` more functions taking
# the same arguments, and `group` the test that walks it.
bad_input_specs <- list(
  circuit_breaker = list(group = "breaker", args = list, valid = breaker_arguments_valid, call_valid = TRUE,
                         also = function() list(`CircuitBreaker$new` = CircuitBreaker$new)),
  breaker_manual_clock = list(group = "breaker", args = list, call_valid = TRUE,
                              valid = list(start = function(x) is_seconds(x, TRUE) && x <= 4e9)),
  share = list(group = "breaker", args = function() list(p = 0.5), call_valid = TRUE,
               valid = list(p = function(x) is_single_number(x) && x > 0 && x <= 1)),
  breaker_for = list(group = "registry", args = function() list(x = "127.0.0.1:1"),
                     valid = list(x = function(x) is_string(x) && grepl("^[A-Za-z0-9._:-]+$", x))),
  breaker_get = list(group = "registry", args = function() list(name = "x"), valid = list(name = is_string)),
  breaker_remove = list(group = "registry", args = function() list(name = "x"), valid = list(name = is_string)),
  breaker_prometheus = list(group = "registry", args = function() list(breakers = NULL),
                            valid = list(breakers = null_or(is_breaker))),
  breaker_fetch = list(
    group = "http",
    args = function() list(url = "http://127.0.0.1:1/", handle = NULL, breaker = circuit_breaker(), fallback = NULL),
    valid = list(url = nothing, handle = is.null, breaker = is_breaker, fallback = is_fn_or_null)
  ),
  breaker_fetch_async = list(
    group = "http",
    args = function() {
      list(url = "http://127.0.0.1:1/", handle = NULL, breaker = circuit_breaker(), fallback = NULL, pool = NULL)
    },
    valid = list(url = nothing, handle = is.null, pool = is.null, immediate_fallback = is_flag,
                 breaker = is_breaker, fallback = is_fn_or_null)
  ),
  breaker_perform = list(
    group = "http",
    args = function() list(req = httr2::request("http://127.0.0.1:1/"), breaker = circuit_breaker(), fallback = NULL),
    valid = list(req = nothing, breaker = is_breaker, fallback = is_fn_or_null)
  ),
  breaker_perform_async = list(
    group = "http_async",
    args = function() list(req = httr2::request("http://127.0.0.1:1/"), breaker = circuit_breaker(), fallback = NULL),
    valid = list(req = nothing, breaker = is_breaker, fallback = is_fn_or_null, immediate_fallback = is_flag)
  ),
  pr_circuit_breakers = list(
    group = "plumber_shiny",
    args = function() list(pr = plumber::pr(), path = "/cb", authorize = NULL),
    valid = list(pr = nothing, path = function(x) is_string(x) && startsWith(x, "/"), authorize = is_fn_or_null)
  ),
  breaker_error_handler = list(group = "plumber_shiny", args = function() list(otherwise = NULL),
                               valid = list(otherwise = is_fn_or_null)),
  api_circuit_breakers = list(
    group = "plumber2",
    args = function() list(api = suppressMessages(plumber2::api()), path = "/cb", authorize = NULL),
    valid = list(api = nothing, path = function(x) is_string(x) && startsWith(x, "/"), authorize = is_fn_or_null)
  ),
  breaker_store_host = list(group = "store", args = list, call_valid = TRUE,
                            valid = list(path = null_or(function(x) is_string(x) && nchar(x) < 4096 && dir.exists(x)),
                                         lock_timeout = function(x) is_number(x) && x > 0 && x <= 60)),
  breaker_store_unlink = list(group = "store",
                              args = function() list(name = "x", store = breaker_store_host(tempdir())),
                              valid = list(name = function(x) is_string(x) && nchar(x, type = "bytes") <= 80,
                                           store = nothing)),
  breaker_store_segments = list(group = "store", args = function() list(store = breaker_store_host(tempdir())),
                                valid = list(store = nothing)),
  # The default URL is a valid value; no server is contacted by the store.
  breaker_store_redis = list(group = "fleet_store", args = list, call_valid = TRUE,
                             valid = list(url = null_or(nothing),
                                          prefix = function(x) {
                                            is_string(x) && grepl("^[A-Za-z0-9_.:-]+$", x) && nchar(x) <= 100
                                          },
                                          sync_interval = between(0.01, 60), timeout = between(0.001, 60),
                                          # Addresses: every bad value lacks a port.
                                          sentinel = null_or(nothing),
                                          master = function(x) is_string(x) && grepl("^[A-Za-z0-9_.-]{1,200}$", x),
                                          # Only with sentinels, which the defaults have none of.
                                          sentinel_password = is.null,
                                          # Only NULL is valid without files to name (TLS has its own tests).
                                          tls = is.null)),
  breaker_store_redis_ping = list(group = "fleet_store", args = function() list(store = breaker_store_redis()),
                                  valid = list(store = nothing)),
  breaker_dashboard_ui = list(group = "plumber_shiny", args = function() list(id = "d"), valid = list(id = is_string)),
  breaker_dashboard_server = list(
    group = "plumber_shiny",
    args = function() list(id = "d", breakers = NULL, interval = 1),
    valid = list(id = is_string, breakers = null_or(is_breaker), interval = function(x) is_number(x) && x >= 0.1)
  )
)

# Exported functions the walker leaves out, because they take no arguments.
# (CircuitBreaker, the R6 class generator, is not a function: its $new() is
# walked with circuit_breaker().)
bad_input_not_walked <- c("breaker_list", "breaker_state_colours", "breaker_store_process")

# The package's exported functions.
exported_functions <- function() {
  ns <- asNamespace("circuitbreaker")
  names <- sort(getNamespaceExports("circuitbreaker"))
  names[vapply(names, function(n) is.function(get(n, envir = ns)), logical(1))]
}

# Expects `expr` to fail with a circuit_breaker_error whose message names
# `arg` in backticks (and, with `must_be`, says what it "must be").
expect_rejects <- function(expr, arg, label, must_be = FALSE) {
  err <- tryCatch({
    expr
    NULL
  }, error = function(e) e)
  if (is.null(err)) {
    testthat::fail(paste0(label, ": no error"))
    return(invisible())
  }
  msg <- conditionMessage(err)
  expect_true(inherits(err, "circuit_breaker_error"),
              label = paste0(label, " gave a <", class(err)[1], ">: ", msg))
  expect_true(grepl(paste0("`", arg, "`"), msg, fixed = TRUE),
              label = paste0(label, ": message names `", arg, "`: ", msg))
  if (must_be) expect_true(grepl("must be", msg, fixed = TRUE), label = paste0(label, ": ", msg))
  expect_lt(nchar(msg), 1000, label = paste0(label, ": the length of the message"))
  invisible(err)
}

# Tries every bad value on every argument in `valid` of `fn` (a function; the
# others from `args`). Values `valid` rejects must be rejected by `fn` and by
# every function in `also`; with `call_valid`, the values it accepts must
# work (breakers this names are removed from the registry when `env` ends).
walk_bad_input <- function(fn, args, valid, label, also = list(), call_valid = FALSE, must_be = FALSE,
                           env = parent.frame()) {
  for (arg in names(valid)) {
    for (value_label in names(bad_values)) {
      value <- bad_value(value_label)
      call_args <- args
      call_args[arg] <- value
      what <- sprintf("%s(%s = %s)", label, arg, value_label)
      if (valid[[arg]](value[[1]])) {
        if (call_valid) {
          out <- tryCatch(do.call(fn, call_args), error = function(e) e)
          if (inherits(out, "error")) {
            testthat::fail(paste0(what, " is documented as valid but gave: ", conditionMessage(out)))
          } else {
            testthat::succeed()
          }
          # The name now: `out` changes with every value tried.
          if (is_breaker(out) && !is.null(out$name)) {
            local({
              name <- out$name
              withr::defer(breaker_remove(name), envir = env)
            })
          }
        }
        next
      }
      expect_rejects(do.call(fn, call_args), arg, what, must_be = must_be)
      for (other in names(also)) {
        expect_rejects(do.call(also[[other]], call_args), arg, sprintf("%s(%s = %s)", other, arg, value_label),
                       must_be = must_be)
      }
    }
  }
}

# Walks every exported function of `group` in bad_input_specs; returns
# their names, invisibly.
walk_exported <- function(group, must_be = FALSE) {
  names <- intersect(exported_functions(), names(bad_input_specs))
  names <- names[vapply(bad_input_specs[names], function(s) identical(s$group, group), logical(1))]
  for (name in names) {
    spec <- bad_input_specs[[name]]
    walk_bad_input(getExportedValue("circuitbreaker", name), spec$args(), spec$valid, label = name,
                   also = if (is.null(spec$also)) list() else spec$also(),
                   call_valid = isTRUE(spec$call_valid), must_be = must_be)
  }
  invisible(names)
}
