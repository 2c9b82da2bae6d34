# Every exported function other than circuit_breaker() (see
# test-arguments.R), every argument, a set of bad-looking values: each value
# the documentation does not allow must give an error inheriting from
# circuit_breaker_error that names the argument. Valid values are not called
# here (some start servers); they are exercised by the other test files.

bad_values <- list(
  `NA` = NA, `NA_character_` = NA_character_, `NULL` = NULL, negative = -1, zero = 0,
  fraction = 0.5, one = 1, `Inf` = Inf, `NaN` = NaN, huge = 1e300, string = "a",
  empty_string = "", two_strings = c("a", "b"), `TRUE` = TRUE, list = list(1),
  a_function = function(...) 1, an_environment = new.env(), a_breaker = NULL
)

is_number <- function(x) is.numeric(x) && !is.object(x) && length(x) == 1L && !is.na(x) && is.finite(x)
is_flag <- function(x) isTRUE(x) || isFALSE(x)
is_string <- function(x) is.character(x) && length(x) == 1L && !is.na(x) && nzchar(x)
is_fn_or_null <- function(x) is.null(x) || is.function(x)
is_breaker <- function(x) inherits(x, "CircuitBreaker")
between <- function(lo, hi, whole = FALSE) function(x) is_number(x) && x >= lo && x <= hi && (!whole || x == floor(x))

walk_bad_input <- function(fn_name, baseline, valid) {
  fn <- getExportedValue("circuitbreaker", fn_name)
  for (arg in names(valid)) {
    for (label in names(bad_values)) {
      value <- if (label == "a_breaker") circuit_breaker() else bad_values[[label]]
      if (valid[[arg]](value)) next
      args <- baseline
      args[arg] <- list(value)
      what <- sprintf("%s(%s = %s)", fn_name, arg, label)
      err <- tryCatch({
        do.call(fn, args)
        NULL
      }, error = function(e) e)
      if (is.null(err)) {
        testthat::fail(paste(what, "gave no error"))
        next
      }
      expect_true(inherits(err, "circuit_breaker_error"),
                  label = paste0(what, " gave a <", class(err)[1], ">: ", conditionMessage(err)))
      expect_true(grepl(paste0("`", arg, "`"), conditionMessage(err), fixed = TRUE),
                  label = paste0(what, " names `", arg, "`: ", conditionMessage(err)))
    }
  }
}

test_that("the registry functions reject bad input", {
  walk_bad_input("breaker_for", list(x = "127.0.0.1:1"),
                 list(x = function(x) is_string(x) && grepl("^[A-Za-z0-9._:-]+$", x)))
  walk_bad_input("breaker_get", list(name = "x"), list(name = is_string))
  walk_bad_input("breaker_remove", list(name = "x"), list(name = is_string))
  walk_bad_input("breaker_prometheus", list(breakers = NULL),
                 list(breakers = function(x) is.null(x) || is_breaker(x)))
})

test_that("the HTTP wrappers reject bad input", {
  skip_if_not_installed("httr2")
  skip_if_not_installed("curl")
  url <- "http://127.0.0.1:1/"
  common <- list(breaker = is_breaker, fallback = is_fn_or_null)
  walk_bad_input("breaker_fetch", list(url = url, handle = NULL, breaker = circuit_breaker(), fallback = NULL),
                 c(list(url = function(x) FALSE, handle = is.null), common))
  walk_bad_input("breaker_fetch_async",
                 list(url = url, handle = NULL, breaker = circuit_breaker(), fallback = NULL, pool = NULL),
                 c(list(url = function(x) FALSE, handle = is.null, pool = is.null, immediate_fallback = is_flag),
                   common))
  walk_bad_input("breaker_perform", list(req = httr2::request(url), breaker = circuit_breaker(), fallback = NULL),
                 c(list(req = function(x) FALSE), common))
})

test_that("the plumber and Shiny helpers reject bad input", {
  skip_if_not_installed("plumber")
  skip_if_not_installed("shiny")
  walk_bad_input("pr_circuit_breakers", list(pr = plumber::pr(), path = "/cb", authorize = NULL),
                 list(pr = function(x) FALSE, path = function(x) is_string(x) && startsWith(x, "/"),
                      authorize = is_fn_or_null))
  walk_bad_input("breaker_error_handler", list(otherwise = NULL), list(otherwise = is_fn_or_null))
  walk_bad_input("breaker_dashboard_ui", list(id = "d"), list(id = is_string))
  walk_bad_input("breaker_dashboard_server", list(id = "d", breakers = NULL, interval = 1),
                 list(id = is_string, breakers = function(x) is.null(x) || is_breaker(x),
                      interval = function(x) is_number(x) && x >= 0.1))
})

test_that("the demonstrations reject bad input before starting anything", {
  walk_bad_input("breaker_demo", list(),
                 list(failing_for = function(x) is_number(x) && x > 0, requests = between(1, 10000, TRUE),
                      interval = function(x) is_number(x) && x > 0, timeout = function(x) is_number(x) && x > 0,
                      quiet = is_flag))
  skip_if_not(exists("breaker_avalanche_demo", asNamespace("circuitbreaker")))
  walk_bad_input("breaker_avalanche_demo", list(),
                 list(phase_seconds = function(x) FALSE, concurrency = between(1, 64, TRUE),
                      downstream_timeout = between(0.05, 30), recovery_timeout = between(0.05, 300),
                      failure_threshold = between(1, 100, TRUE),
                      plot_file = function(x) is.null(x) || is_string(x), quiet = is_flag))
})
