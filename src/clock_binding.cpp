// R entry points of the manual clock. The allowed readings are the core's
// rule (clock.hpp); this file converts and reports.
#include <Rcpp.h>

#include <cmath>

#include "r_interface.h"

namespace {

// A single plain number (not logical, not a factor or date), or NaN.
double single_number(SEXP x) {
  const bool numeric = (TYPEOF(x) == REALSXP || TYPEOF(x) == INTSXP) && !OBJECT(x);
  return numeric && Rf_xlength(x) == 1 ? Rf_asReal(x) : NAN;
}

}  // namespace

// [[Rcpp::export(rng = false)]]
SEXP cb_clock_create(SEXP start) {
  const double s = single_number(start);
  if (const char* must = circuitbreaker::ManualClock::check_start(s)) {
    cbr::abort_argument("start", must, start);
  }
  return cbr::make_clock_pointer(circuitbreaker::seconds_to_nanos(s));
}

// [[Rcpp::export(rng = false)]]
double cb_clock_now(SEXP ptr) {
  return circuitbreaker::nanos_to_seconds(cbr::clock_from(ptr).now());
}

// [[Rcpp::export(rng = false)]]
double cb_clock_advance(SEXP ptr, SEXP by) {
  circuitbreaker::ManualClock& clock = cbr::clock_from(ptr);
  const double s = single_number(by);
  if (const char* must = clock.check_advance(s)) cbr::abort_argument("seconds", must, by);
  clock.advance(circuitbreaker::seconds_to_nanos(s));
  return circuitbreaker::nanos_to_seconds(clock.now());
}
