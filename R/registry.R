#' Breakers per downstream host, and the registry of named breakers
#'
#' Every breaker created with a `name` is registered. `breaker_for()` returns
#' the breaker registered for a downstream host and port, creating it on first
#' use, so that each dependency gets its own breaker: one failing service does
#' not open the breaker of another.
#'
#' The registry holds at most `getOption("circuitbreaker.max_breakers", 1000)`
#' breakers. When a new one would exceed that, the least recently used breaker
#' in the `CLOSED` state is dropped; an open breaker is never dropped (it is
#' protecting something), so the registry may briefly hold more.
#'
#' The registry keeps each breaker's state (its C++ state machine and its R-side
#' settings and listeners), not the R object you get: that is built again when
#' needed, so a registered breaker costs about 4 KB. The object you hold stays
#' the same object for as long as you hold it.
#'
#' @param x A URL (`"https://api.example.com/v1/items"`), an httr2 request, or
#'   a host name with an optional port (`"api.example.com:8443"`).
#' @param ... Arguments for [circuit_breaker()] used when the breaker is
#'   created (not when it already exists). They override
#'   `getOption("circuitbreaker.defaults")`, a list of the same arguments.
#' @return `breaker_for()` and `breaker_get()`: a [CircuitBreaker]
#'   (`breaker_get()` returns `NULL` if there is none of that name).
#'   `breaker_list()`: a data frame, one row per registered breaker, with the
#'   columns of `$metrics()`. `breaker_remove()`: `TRUE` if a breaker was
#'   removed, invisibly.
#' @examples
#' options(circuitbreaker.defaults = list(failure_threshold = 3, timeout = 5))
#' api <- breaker_for("http://127.0.0.1:8000/items/1")
#' api$name
#' identical(api, breaker_for("http://127.0.0.1:8000/other"))
#' breaker_list()[, c("name", "state", "calls")]
#' breaker_remove("127.0.0.1:8000")
#' options(circuitbreaker.defaults = NULL)
#' @export
breaker_for <- function(x, ...) {
  key <- registry_key(x)
  found <- registry_get(key)
  if (!is.null(found)) return(breaker_view(found))
  given <- list(...)
  args <- utils::modifyList(getOption("circuitbreaker.defaults", list()), given)
  # modifyList() merges a list given into the default's list: a store given
  # (a list) replaces the default's whole, since a merge of two stores would
  # be neither.
  for (arg in intersect(names(given), names(args))) args[arg] <- given[arg]
  args$name <- key
  do.call(circuit_breaker, args)
}

#' @rdname breaker_for
#' @param name The name of a registered breaker.
#' @export
breaker_get <- function(name) {
  check_string(name)
  core <- registry_get(name)
  if (is.null(core)) NULL else breaker_view(core)
}

#' @rdname breaker_for
#' @export
breaker_list <- function() {
  names <- sort(ls(registry$entries, all.names = TRUE))
  metrics <- lapply(names, function(n) breaker_metrics(registry$entries[[n]]))
  # Breakers of some stores have more fields (store_metrics(), store.R): the
  # breakers of the other stores get them as NA.
  extra <- store_fields_of_kinds(vapply(metrics, function(m) m$store, character(1)), store_metrics_na)
  if (length(extra)) metrics <- lapply(metrics, function(m) c(m, extra[setdiff(names(extra), names(m))]))
  rows <- lapply(metrics, as.data.frame, stringsAsFactors = FALSE)
  if (length(rows) == 0L) {
    return(as.data.frame(circuit_breaker(name = NULL)$metrics(), stringsAsFactors = FALSE)[0, ])
  }
  out <- do.call(rbind, rows)
  rownames(out) <- NULL
  out
}

#' @rdname breaker_for
#' @export
breaker_remove <- function(name) {
  check_string(name)
  found <- exists(name, envir = registry$entries, inherits = FALSE)
  if (found) rm(list = name, envir = registry$entries)
  invisible(found)
}

# name -> the breaker's core (breaker-core.R), whose `used` field is the
# registry's recency clock at its last use.
registry <- new.env(parent = emptyenv())
registry$entries <- new.env(parent = emptyenv(), hash = TRUE)
registry$clock <- 0

# The URL of an httr2 request, or `x` itself.
request_url <- function(x) {
  if (inherits(x, "httr2_request") && is.character(x$url)) x$url else x
}

# The registry key of a URL, an httr2 request or a host name: "host:port"
# (the rule is the core's endpoint_key(), in C++: it runs on every lookup).
registry_key <- function(x, call = rlang::caller_env()) {
  x <- request_url(x)
  key <- cb_endpoint_key(x)
  if (is.null(key)) {
    # A URL's user name and password are masked before it is shown.
    if (is.character(x) && length(x) == 1L && !is.na(x)) x <- cb_mask_url(x)
    abort_bad_argument("x", "a URL, an httr2 request or a host name", x, call = call)
  }
  key
}

registry_touch <- function() {
  registry$clock <- registry$clock + 1
  registry$clock
}

registry_get <- function(name) {
  core <- registry$entries[[name]]
  if (!is.null(core)) core$used <- registry_touch()
  core
}

# A registered breaker without marking it as used: for dashboards and
# exporters that read every breaker on a schedule.
registry_peek <- function(name) {
  core <- registry$entries[[name]]
  if (is.null(core)) NULL else breaker_view(core)
}

# Called by CircuitBreaker$new() for named breakers. A new breaker of the same
# name replaces the old one (re-running a script should not pile them up).
registry_add <- function(core) {
  if (!exists(core$name, envir = registry$entries, inherits = FALSE)) registry_make_room()
  core$used <- registry_touch()
  assign(core$name, core, envir = registry$entries)
  invisible(core)
}

registry_make_room <- function() {
  cap <- getOption("circuitbreaker.max_breakers", 1000)
  if (length(registry$entries) < cap) return(invisible())
  names <- ls(registry$entries, all.names = TRUE, sorted = FALSE)
  used <- vapply(names, function(n) registry$entries[[n]]$used, numeric(1))
  for (n in names[order(used)]) {
    if (identical(cb_state(registry$entries[[n]]$ptr), "CLOSED")) {
      rm(list = n, envir = registry$entries)
      return(invisible())
    }
  }
  invisible()  # every breaker is open or held open: keep them all
}
