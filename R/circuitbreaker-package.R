#' circuitbreaker: circuit breakers for R network code
#'
#' A circuit breaker stops calling a dependency that keeps failing, answers at
#' once with a fallback, and probes now and then until the dependency is
#' healthy again. It keeps one slow or dead downstream service from blocking a
#' single-threaded R process (a plumber API, a Shiny app) and, through it,
#' everything that calls that process.
#'
#' Start with [circuit_breaker()] (or `CircuitBreaker$new()`) and its
#' `$execute(request_func, fallback_func)` method. The state machine is written
#' in C++ (a header-only core in `inst/include/circuitbreaker`); the R objects
#' are thin wrappers around it.
#'
#' @keywords internal
"_PACKAGE"

## usethis namespace: start
#' @useDynLib circuitbreaker, .registration = TRUE
#' @importFrom Rcpp evalCpp
#' @importFrom R6 R6Class
## usethis namespace: end
NULL

# `ptr`, `core` and `self` are found in the enclosing environment R6 gives
# each method (see initialize() in R/breaker-class.R; breaker_execute() and
# breaker_execute_async() become methods).
utils::globalVariables(c("ptr", "core", "self"))

.onLoad <- function(libname, pkgname) {
  # What the C++ core names, fetched once: its arguments (the one table in
  # config_fields.hpp, which also gives circuit_breaker() its defaults), its
  # states and its reasons for a rejection, and the codes R passes to the
  # binding and reads from it.
  table <- cb_argument_table()
  the$core_argument_names <- table$name
  the$state_names <- cb_state_names()
  the$rejection_names <- cb_rejection_names()
  install_core_codes(topenv(), cb_codes())
  install_breaker_formals(topenv(), table)
}

.onUnload <- function(libpath) {
  # The fleet store's sync threads must end before the library is unloaded.
  cb_fleet_shutdown(2)
}
