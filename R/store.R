#' @include checks.R conditions.R
NULL

# Where a breaker's state lives: what every store has in common, and the
# questions the rest of the package asks a store.
#
# A store object is a list with at least `kind`, of class
# c("circuit_breaker_store_<kind>", "circuit_breaker_store"), made by the
# store's constructor: breaker_store_process() (store-process.R),
# breaker_store_host() (store-host.R) or breaker_store_redis()
# (store-redis.R). A store answers for itself: everything the rest of the
# package needs to know about a store it asks through one of the generics
# below, and each kind's methods live in its own file. No other file looks
# at the kind, so that every store is shown and handled alike, and a new
# store is one new file in R/ (plus its core and binding: the binding's
# cb_store_kind() names the kind that a breaker's metrics carry).
#
# Each method has `#' @exportS3Method` so that roxygen registers it: a
# generic that is not exported, called from outside the namespace (as
# lapply(stores, store_metrics_na) does: lapply() is base's), finds only
# registered methods.
#
# Asked of the store a breaker was created with (core_store(), in
# breaker-core.R). A method of each kind is required for:
#   store_location(store, name, call):
#       what cb_create() needs to make the breaker: NULL for a breaker of
#       this process, else what the binding converts (a path, a list of
#       connection details). A shared store checks the name first
#       (check_shared_name()): it is how processes find each other.
#   store_clock(store):
#       NULL when a breaker of the store may take a manual clock; else the
#       words naming the clock that every process sharing it reads, for the
#       error that refuses one (check_shared_clock(), breaker-clock.R).
#   store_polls(store):
#       TRUE when another process may move the breaker, so that a breaker
#       with listeners polls the shared transition log on the event loop
#       (breaker-events.R).
# Optional (the defaults here say "nothing to add"):
#   store_link_news(store):
#       tells, as a warning or message, news of the store's link to where
#       the state lives (the fleet store: alone, rejoined). Asked where a
#       call already goes through R: at a breaker's creation, by $metrics()
#       and at each poll of a breaker with listeners.
#   store_metrics(store, ptr):
#       the fields the store adds to $metrics() (a named list).
#   store_label(store, m):
#       the words print() adds after the breaker's name, in parentheses
#       ("host-shared"), from the breaker's metrics `m`; NULL for none.
#   store_format_lines(store, m):
#       lines print() adds under the counts (character, maybe empty).
#   store_badge(store, m):
#       the dashboard's badge on a breaker's card: list(text, tooltip), or
#       NULL for none. Never a secret: it is shown to whoever sees the page.
#   store_unlink(store, name, call):
#       breaker_store_unlink(): removes breaker `name`'s shared state; TRUE
#       when there was something to remove. The default refuses the store.
#   format(store):
#       print() of the store.
#
# Asked of the kind alone: a breaker's metrics (a row of breaker_list(), a
# sample of the Prometheus metrics, a status object) carry the kind of its
# store (`m$store`), not the store. These methods get store_of_kind(kind),
# which has no field but `kind`, so they read none:
#   store_metrics_na(store):
#       the fields of store_metrics() as NA, for the rows of breakers of
#       other stores in breaker_list() (registry.R).
#   store_status_fields(store):
#       which of those fields the status routes show (web-answers.R).
#   store_prometheus_families(store):
#       the Prometheus metric families of the store's breakers only, as in
#       prometheus.R's prom_families; they appear when a breaker of the
#       store does, and list only such breakers (prometheus.R).

check_store <- function(x, arg = "store", call = rlang::caller_env()) {
  if (is.null(x) || inherits(x, "circuit_breaker_store")) return(x)
  abort_bad_argument(
    arg, "NULL or a store from `breaker_store_host()`, `breaker_store_redis()` or `breaker_store_process()`",
    x, call = call
  )
}

#' @export
format.circuit_breaker_store <- function(x, ...) paste0("<circuit_breaker_store: ", x$kind, ">")

#' @export
print.circuit_breaker_store <- function(x, ...) {
  cat(format(x), sep = "\n")
  invisible(x)
}

# A store of kind `kind` with nothing in it, for the methods that are asked
# of the kind alone (see above).
store_of_kind <- function(kind) {
  structure(list(kind = kind), class = c(paste0("circuit_breaker_store_", kind), "circuit_breaker_store"))
}

# The stores of the kinds in `kinds` (the `store` field of some breakers'
# metrics), each once, in the order of their names: so the fields and
# families they add come in the same order whatever the breakers' order.
stores_of_kinds <- function(kinds) lapply(sort(unique(as.character(kinds))), store_of_kind)

# The first of the fields that the stores of `kinds` add, by name
# (store_metrics_na() or store_status_fields() of each).
store_fields_of_kinds <- function(kinds, method) {
  fields <- do.call(c, lapply(stores_of_kinds(kinds), method))
  fields[!duplicated(if (is.null(names(fields))) fields else names(fields))]
}

store_location <- function(store, name, call) UseMethod("store_location")
store_clock <- function(store) UseMethod("store_clock")
store_polls <- function(store) UseMethod("store_polls")

store_link_news <- function(store) UseMethod("store_link_news")
#' @exportS3Method
store_link_news.circuit_breaker_store <- function(store) invisible()

store_metrics <- function(store, ptr) UseMethod("store_metrics")
#' @exportS3Method
store_metrics.circuit_breaker_store <- function(store, ptr) list()

store_label <- function(store, m) UseMethod("store_label")
#' @exportS3Method
store_label.circuit_breaker_store <- function(store, m) NULL

store_format_lines <- function(store, m) UseMethod("store_format_lines")
#' @exportS3Method
store_format_lines.circuit_breaker_store <- function(store, m) character()

store_badge <- function(store, m) UseMethod("store_badge")
#' @exportS3Method
store_badge.circuit_breaker_store <- function(store, m) NULL

store_metrics_na <- function(store) UseMethod("store_metrics_na")
#' @exportS3Method
store_metrics_na.circuit_breaker_store <- function(store) list()

store_status_fields <- function(store) UseMethod("store_status_fields")
#' @exportS3Method
store_status_fields.circuit_breaker_store <- function(store) character()

store_prometheus_families <- function(store) UseMethod("store_prometheus_families")
#' @exportS3Method
store_prometheus_families.circuit_breaker_store <- function(store) list()

store_unlink <- function(store, name, call) UseMethod("store_unlink")
#' @exportS3Method
store_unlink.default <- function(store, name, call) {
  abort_bad_argument("store", "a store from `breaker_store_host()` or `breaker_store_redis()`", store)
}

#' @rdname breaker_store_host
#' @order 3
#' @export
breaker_store_unlink <- function(name, store = breaker_store_host()) {
  check_string(name)
  invisible(store_unlink(store, name, call = rlang::current_call()))
}

# A shared store's breaker needs a name, within the core's one limit for
# every shared store (breaker_name.hpp): it is how processes find each other.
check_shared_name <- function(store, name, call) {
  if (is.null(name)) {
    cli::cli_abort(
      c("A shared breaker ({store$kind} store) needs a {.arg name}.",
        i = "Processes that give the same name (and store) share one breaker."),
      class = c("circuit_breaker_store_needs_name", "circuit_breaker_store_error",
                "circuit_breaker_error", "circuit_breaker_invalid_argument"),
      argument = "name",
      call = call
    )
  }
  cb_check_name(name, shared = TRUE)
  invisible(name)
}

# Every error of a store: classes `circuit_breaker_store_<.error>`,
# `circuit_breaker_store_error` and `circuit_breaker_error`, with the
# condition's fields in `...`. The bullets are interpolated in the caller's
# frame, as if the caller had called cli_abort().
abort_store <- function(.error, .bullets, ..., call = NULL, .envir = rlang::caller_env()) {
  cli::cli_abort(
    .bullets,
    class = c(paste0("circuit_breaker_store_", .error), "circuit_breaker_store_error",
              "circuit_breaker_error"),
    ...,
    call = call,
    .envir = .envir
  )
}

# A shared breaker (`what`, cli text) that the store keeps with other rule
# arguments than this process gave: `argument` is the first that differs,
# `given` and `stored` its values (the core's text: a number, `NULL` or a
# window type) in this process and in the store, `whose` says who has the
# stored value, `remedy` how to start afresh. `...` are more fields.
abort_wrong_config <- function(what, whose, remedy, argument, given, stored, ..., call = NULL,
                               .envir = rlang::caller_env()) {
  abort_store(
    "wrong_config",
    c(paste(what, "was created with another configuration."),
      x = wrong_config_bullet(argument, given, stored, whose),
      i = paste("Every process sharing a breaker must give the same rule arguments;", remedy)),
    ...,
    argument = argument,
    given = given,
    stored = stored,
    call = call,
    .envir = .envir
  )
}

# The bullet naming the differing argument, for cli in a frame that holds
# `argument`, `given` and `stored`: "`window_size` is `50` in this process;
# the breaker was created with `100`." (both values when the core read them).
wrong_config_bullet <- function(argument, given, stored, whose) {
  if (is.null(argument)) return(NULL)
  if (is.null(given) || is.null(stored)) return(paste0("{.arg {argument}} differs from the value ", whose, "."))
  paste0("{.arg {argument}} is {.code {given}} in this process; ", whose, " {.code {stored}}.")
}

# Raised by the binding (by this name) when $configure() is asked to change
# the core's arguments of a breaker of a shared store.
abort_shared_configure <- function(arguments, call = NULL) {
  abort_store(
    "configure",
    c("The rule arguments of a shared breaker cannot be changed: {.arg {arguments}}.",
      i = "They are the shared breaker's identity; every process must agree on them.",
      i = paste("Stop the processes, remove the shared state ({.fn breaker_store_unlink} for a host store,",
                "the breaker's keys for a fleet store), and create the breaker again with the new arguments.")),
    arguments = arguments,
    call = call
  )
}
