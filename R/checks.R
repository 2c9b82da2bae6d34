# Argument checks, in the style of rlang's standalone type checks
# (`check_string()`, `check_bool()`, `check_number_whole()`, ...). rlang's own
# standalone file needs rlang >= 1.1.0; the oldest rlang we support (Debian
# 12's 1.0.6) does not have it, so these are written for this package.
#
# Every check returns its argument (possibly normalised, e.g. as.integer) and
# raises `circuit_breaker_invalid_argument` naming the argument and what it
# must be. Ranges of the C++ core's rules are checked by the core itself
# (config.hpp's validate()), not here.

#' @include conditions.R
NULL

check_string <- function(x, arg = rlang::caller_arg(x), allow_null = FALSE,
                         call = rlang::caller_env()) {
  if (allow_null && is.null(x)) return(x)
  if (!is.character(x) || length(x) != 1L || is.na(x) || !nzchar(x)) {
    must <- if (allow_null) "NULL or a single non-empty string" else "a single non-empty string"
    abort_bad_argument(arg, must, x, call = call)
  }
  x
}

check_bool <- function(x, arg = rlang::caller_arg(x), call = rlang::caller_env()) {
  if (!is.logical(x) || length(x) != 1L || is.na(x)) {
    abort_bad_argument(arg, "`TRUE` or `FALSE`", x, call = call)
  }
  x
}

check_function <- function(x, arg = rlang::caller_arg(x), allow_null = FALSE, what = "a function",
                           call = rlang::caller_env()) {
  if (allow_null && is.null(x)) return(x)
  if (!is.function(x)) {
    abort_bad_argument(arg, if (allow_null) paste("NULL or", what) else what, x, call = call)
  }
  x
}

# A single plain number (not a factor or date) in [min, max], or (min, max]
# with `min_exclusive`.
check_number_decimal <- function(x, arg = rlang::caller_arg(x), min = -Inf, max = Inf,
                                 min_exclusive = FALSE, allow_null = FALSE, must = NULL,
                                 call = rlang::caller_env()) {
  if (allow_null && is.null(x)) return(x)
  ok <- is.numeric(x) && !is.object(x) && length(x) == 1L && !is.na(x) &&
    (if (min_exclusive) x > min else x >= min) && x <= max
  if (!ok) {
    must <- must %||% paste0(if (allow_null) "NULL or ", "a number from ", min, " to ", max)
    abort_bad_argument(arg, must, x, call = call)
  }
  as.numeric(x)
}

# A vector (possibly empty) of whole numbers in [min, max], returned as integers.
check_integers <- function(x, arg = rlang::caller_arg(x), min, max, must,
                           call = rlang::caller_env()) {
  ok <- is.numeric(x) && !is.object(x) && !anyNA(x) &&
    all(x == floor(x)) && all(x >= min & x <= max)
  if (!ok) abort_bad_argument(arg, must, x, call = call)
  as.integer(x)
}

check_installed <- function(pkg, what, call = rlang::caller_env()) {
  # A loaded namespace first: this runs on every asynchronous call, and
  # requireNamespace() costs more than the rest of a rejected call's checks.
  if (!isNamespaceLoaded(pkg) && !requireNamespace(pkg, quietly = TRUE)) {
    cli::cli_abort(
      c("{.fn {what}} needs the {.pkg {pkg}} package.",
        i = "Install it with {.code install.packages(\"{pkg}\")}."),
      class = c("circuit_breaker_missing_package", "circuit_breaker_error"), call = call
    )
  }
}

check_breaker <- function(breaker, arg = rlang::caller_arg(breaker), call = rlang::caller_env()) {
  if (!inherits(breaker, "CircuitBreaker")) {
    abort_bad_argument(arg, "a circuit breaker (from `circuit_breaker()` or `breaker_for()`)",
                       breaker, call = call)
  }
  breaker
}

check_fallback <- function(fallback, arg = rlang::caller_arg(fallback), call = rlang::caller_env()) {
  check_function(fallback, arg, allow_null = TRUE, what = "a function of zero or one argument",
                 call = call)
}
