# Conditions signalled by the package. Misuse errors inherit from
# `circuit_breaker_error`; a rejected call without a fallback signals
# `circuit_breaker_open`; a failing listener becomes a
# `circuit_breaker_listener_error` warning.

# A short description of a value for error messages: "a string", "`NA`",
# "the number -1", "a list of length 2", ...
describe_value <- function(x) {
  if (is.null(x)) return("NULL")
  if (is.function(x)) return("a function")
  if (is.environment(x)) return("an environment")
  if (is.object(x)) return(paste0("an object of class <", paste(class(x), collapse = "/"), ">"))
  if (is.atomic(x) && length(x) == 1L) {
    if (is.na(x)) return("`NA`")
    return(switch(typeof(x),
      logical = paste0("`", x, "`"),
      integer = ,
      double = paste0("the number ", format(x, digits = 15)),
      character = if (nzchar(x)) paste0("the string \"", x, "\"") else "an empty string",
      paste0("a ", typeof(x), " value")
    ))
  }
  kind <- switch(typeof(x),
    logical = "a logical vector",
    integer = ,
    double = "a numeric vector",
    character = "a character vector",
    list = "a list",
    paste("an object of type", typeof(x))
  )
  paste(kind, "of length", length(x))
}

# Raised for a bad argument value, from R or from the C++ binding (which
# passes what the core's validation says the argument must be).
abort_bad_argument <- function(arg, must, value, call = NULL) {
  cli::cli_abort(
    "{.arg {arg}} must be {must}, not {describe_value(value)}.",
    class = c("circuit_breaker_invalid_argument", "circuit_breaker_error"),
    argument = arg,
    call = call
  )
}

# Raised when an object that should wrap a breaker does not (for example a
# field overwritten by hand).
abort_invalid_object <- function(what, call = NULL) {
  cli::cli_abort(
    c("This is not a valid {what}.",
      i = "Create breakers with {.fn circuit_breaker} or {.code CircuitBreaker$new()}."),
    class = c("circuit_breaker_invalid_object", "circuit_breaker_error"),
    call = call
  )
}

abort_read_only <- function(field, instead, call = NULL) {
  cli::cli_abort(
    c("{.field {field}} is read-only.", i = "{instead}"),
    class = c("circuit_breaker_read_only", "circuit_breaker_error"),
    field = field,
    call = call
  )
}

# The condition for a rejected call. Built with base R only: it sits on a
# path that should stay cheap (tens of microseconds, not hundreds).
open_condition <- function(name, state, retry_after) {
  label <- if (is.null(name)) "The circuit breaker" else paste0("Circuit breaker \"", name, "\"")
  when <- if (is.infinite(retry_after)) {
    "it was forced open; call `$reset()` to close it"
  } else {
    paste0("the next probe is allowed in ", sprintf("%.3g", retry_after), " s")
  }
  structure(
    class = c("circuit_breaker_open", "error", "condition"),
    list(
      message = paste0(label, " is ", state, ": the call was not made (", when, ")."),
      call = NULL,
      breaker = name,
      state = state,
      retry_after = retry_after
    )
  )
}

# The condition a fallback receives when the request returned a value that
# counts as a failure (`failure_when`).
failed_value_condition <- function(value, name, class = NULL, message = NULL) {
  structure(
    class = c(class, "circuit_breaker_failed_value", "error", "condition"),
    list(
      message = message %||% "The request returned a value that counts as a failure.",
      call = NULL,
      value = value,
      breaker = name
    )
  )
}

listener_warning <- function(event, error) {
  structure(
    class = c("circuit_breaker_listener_error", "warning", "condition"),
    list(
      message = paste0("A listener for \"", event, "\" failed: ", conditionMessage(error)),
      call = NULL,
      event = event,
      parent = error
    )
  )
}

`%||%` <- function(x, y) if (is.null(x)) y else x
