// R entry points of the manual clock.
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
  if (!(std::isfinite(s) && s >= 0 && s <= circuitbreaker::kMaxClockSeconds)) {
    cbr::abort_argument("start", "a number of seconds from 0 to 4e9", start);
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
  const double now = circuitbreaker::nanos_to_seconds(clock.now());
  if (!(std::isfinite(s) && s >= 0 && now + s <= circuitbreaker::kMaxClockSeconds)) {
    cbr::abort_argument("seconds", "a number of seconds, at least 0, that keeps the clock below 4e9",
                        by);
  }
  clock.advance(circuitbreaker::seconds_to_nanos(s));
  return circuitbreaker::nanos_to_seconds(clock.now());
}
