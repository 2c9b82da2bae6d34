# Conditions signalled by the package. Misuse errors inherit from
# `circuit_breaker_error`; a rejected call without a fallback signals
# `circuit_breaker_open` (the breaker refused it) or `circuit_breaker_full`
# (its bulkhead had no free permit), both `circuit_breaker_rejected`; a
# failing listener becomes a
# `circuit_breaker_listener_error` warning.

# A string as it may appear in a message: at most `width` characters, then
# an ellipsis (cli's: "..." where the output cannot show Unicode), so that a
# 100,000-character argument gives a short message (the whole value can stay
# in a field of the condition, for programs). Bytes that are not UTF-8 are
# shown as <xx>. The one place that cuts.
cut_text <- function(x, width = 50L) {
  x <- enc2utf8(as.character(x))
  bad <- !is.na(x) & !validUTF8(x)
  if (any(bad)) x[bad] <- iconv(x[bad], "UTF-8", "UTF-8", sub = "byte")
  long <- !is.na(x) & nchar(x, type = "chars") > width
  x[long] <- paste0(substr(x[long], 1L, width - 1L), cli::symbol$ellipsis)
  x
}

# A short description of a value for error messages: "a string", "`NA`",
# "the number -1", "a list of length 2", ... A string is cut (cut_text())
# and escaped (control characters as \n, \t, ...).
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
      character = if (nzchar(x)) paste0("the string ", encodeString(cut_text(x), quote = "\"")) else "an empty string",
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
# passes what the core's validation says the argument must be). The message
# shows the value cut short; the condition keeps it whole as `value` (a
# secret, such as a redis:// URL's password, is masked before it gets here).
# `arg` may come from the user too (a name given to `$configure()`).
abort_bad_argument <- function(arg, must, value, call = NULL, class = NULL) {
  cli::cli_abort(
    "{.arg {cut_text(arg)}} must be {must}, not {describe_value(value)}.",
    class = c(class, "circuit_breaker_invalid_argument", "circuit_breaker_error"),
    argument = arg,
    value = value,
    call = call
  )
}

# Raised (by the binding, with the core's words and limit) for a name that
# cannot name a breaker, or a breaker of the host or fleet store.
abort_name_too_long <- function(name, must, limit, call = NULL) {
  cli::cli_abort(
    c("{.arg name} must be {must}, not {describe_value(name)}.",
      i = "It has {nchar(enc2utf8(name), type = \"bytes\")} bytes; the limit is {limit}."),
    class = c("circuit_breaker_name_too_long", "circuit_breaker_invalid_argument", "circuit_breaker_error"),
    argument = "name",
    value = name,
    limit = limit,
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

# The condition for a rejected call, describing the breaker at the moment of
# refusal: its state, why the call was refused (the core's reason: "open",
# "half_open_full", "forced_open", "ramp_up", or "full" for a bulkhead with
# no free permit) and the seconds until a call may be admitted (`Inf` when
# forced open, `NA` when that depends on a probe in flight that has no
# deadline, 0 for a full bulkhead: a permit may free at any moment). Class
# `circuit_breaker_full` for "full", `circuit_breaker_open` otherwise, both
# `circuit_breaker_rejected`. Built with base R only: it sits on a path that
# should stay cheap (tens of microseconds, not hundreds).
open_condition <- function(name, state, retry_after, reason) {
  label <- if (is.null(name)) {
    "The circuit breaker"
  } else {
    paste0("Circuit breaker \"", if (nchar(name, type = "bytes") > 50L) cut_text(name) else name, "\"")
  }
  if (identical(reason, "full")) {
    return(structure(
      class = c("circuit_breaker_full", "circuit_breaker_rejected", "error", "condition"),
      list(
        message = paste0(label, " is full: the call was not made (every permit of its ",
                         "bulkhead, `max_concurrent`, is held by a call in flight)."),
        call = NULL,
        breaker = name,
        state = state,
        reason = reason,
        retry_after = retry_after
      )
    ))
  }
  why <- switch(reason,
    forced_open = "it was forced open; call `$reset()` to close it",
    ramp_up = "it is ramping up after recovering and lets a growing share of calls through; the next call may go",
    half_open_full = if (is.na(retry_after)) {
      "every probe slot is taken; the next call may go once a probe in flight settles"
    } else {
      paste0("every probe slot is taken; one frees in at most ", format_seconds(retry_after))
    },
    paste0("the next probe is allowed in ", format_seconds(retry_after))
  )
  structure(
    class = c("circuit_breaker_open", "circuit_breaker_rejected", "error", "condition"),
    list(
      message = paste0(label, " is ", state, ": the call was not made (", why, ")."),
      call = NULL,
      breaker = name,
      state = state,
      reason = reason,
      retry_after = retry_after
    )
  )
}

format_seconds <- function(x) paste0(sprintf("%.3g", x), " s")

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


# A failing `ignore` predicate: the error it was asked about counts as a
# failure, and the predicate's own error becomes this warning.
predicate_warning <- function(error) {
  structure(
    class = c("circuit_breaker_predicate_error", "warning", "condition"),
    list(
      message = paste0("The `ignore` predicate failed (the error counts as a failure): ",
                       conditionMessage(error)),
      call = NULL,
      parent = error
    )
  )
}

`%||%` <- function(x, y) if (is.null(x)) y else x
