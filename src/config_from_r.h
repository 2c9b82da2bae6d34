// Conversion between R values and the core's Config, table-driven
// (circuitbreaker/config_fields.hpp holds the one list of arguments).
#ifndef CIRCUITBREAKER_CONFIG_FROM_R_H
#define CIRCUITBREAKER_CONFIG_FROM_R_H

#include <Rcpp.h>

#include "circuitbreaker/circuitbreaker.hpp"

namespace cbr {

// `base` with the arguments named in the R list `changes` applied (an
// optional argument given as NULL is unset), validated with the core's rules.
// On a value of the wrong type or one the core rejects, raises
// circuit_breaker_invalid_argument naming the argument and what it must be
// (the core's wording).
circuitbreaker::Config config_merge(const circuitbreaker::Config& base, SEXP changes);

// The compact form an external pointer keeps for rebuilding after readRDS():
// a double vector in table order (NaN for an unset optional).
SEXP config_to_vector(const circuitbreaker::Config& config);
circuitbreaker::Config config_from_vector(SEXP x);

// A named R list in table order: NULL for an unset optional, or with
// `effective`, the window size and minimum calls in effect filled in.
SEXP config_to_list(const circuitbreaker::Config& config, bool effective);

}  // namespace cbr

#endif  // CIRCUITBREAKER_CONFIG_FROM_R_H
