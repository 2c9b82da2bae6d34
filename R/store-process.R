#' @include store.R
NULL

# The process store: each process its own breaker, on the C++ heap. The
# default store (a breaker made without `store`, or with NULL, is of this
# store). It shares nothing, so it has nothing to add to what a breaker
# shows (the defaults of store.R).

#' @rdname breaker_store_host
#' @order 2
#' @export
breaker_store_process <- function() process_store

# The one process store: a breaker of it keeps no reference to its store
# (core_store(), breaker-core.R).
process_store <- structure(list(kind = "process", path = NULL),
                           class = c("circuit_breaker_store_process", "circuit_breaker_store"))

# nolint start: object_name_linter, object_length_linter. (lintr lints file by file and sees
# only the generics of the file it lints; store.R holds these.)

# In this process: cb_create() makes the breaker on the heap, with or
# without a name.
#' @exportS3Method
store_location.circuit_breaker_store_process <- function(store, name, call) NULL

# Any clock: nobody else reads this breaker's times.
#' @exportS3Method
store_clock.circuit_breaker_store_process <- function(store) NULL

# Only this process moves the breaker: its listeners hear every transition
# on the call that made it.
#' @exportS3Method
store_polls.circuit_breaker_store_process <- function(store) FALSE

# nolint end
