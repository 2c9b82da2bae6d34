// Conversion of the R list of breaker arguments into a core Config.
#ifndef CIRCUITBREAKER_CONFIG_FROM_R_H
#define CIRCUITBREAKER_CONFIG_FROM_R_H

#include <Rcpp.h>

#include "circuitbreaker/circuitbreaker.hpp"

namespace cbr {

// Reads a named R list (as built by the R function breaker_config()) into a
// Config and validates it with the core's rules. On a value of the wrong type
// or one the core rejects, raises circuit_breaker_invalid_argument naming the
// argument and what it must be (the core's wording).
circuitbreaker::Config config_from_list(SEXP list);

// The inverse, for R: every field, NULL where an optional field is unset.
Rcpp::List config_to_list(const circuitbreaker::Config& config);

}  // namespace cbr

#endif  // CIRCUITBREAKER_CONFIG_FROM_R_H
