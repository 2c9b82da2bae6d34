// What the binding shares between its files: the handle an external pointer
// owns, how to get it back from R safely, and how to raise a classed R error.
#ifndef CIRCUITBREAKER_R_INTERFACE_H
#define CIRCUITBREAKER_R_INTERFACE_H

#include <Rcpp.h>

#include "circuitbreaker/circuitbreaker.hpp"

namespace cbr {

using circuitbreaker::Nanos;

// What an R breaker object's external pointer owns.
struct BreakerHandle {
  BreakerHandle(const circuitbreaker::Settings& s,
                const circuitbreaker::ManualClock* manual_clock)
      : clock(manual_clock), breaker(s, now_of(manual_clock)) {}

  static Nanos now_of(const circuitbreaker::ManualClock* c) noexcept {
    return c ? c->now() : circuitbreaker::SteadyClock::now();
  }
  Nanos now() const noexcept { return now_of(clock); }

  // Owned by another external pointer, which this breaker's pointer keeps
  // alive in its protected field (so R's GC cannot free it first).
  const circuitbreaker::ManualClock* clock;
  circuitbreaker::Breaker breaker;
  // Whether R registered listeners: if not, a rejected call with a
  // zero-argument fallback needs nothing from R but the fallback itself.
  bool listening = false;
};

// The handle behind a breaker pointer. A pointer restored by readRDS() (or
// otherwise NULL) is rebuilt from the configuration stored beside it, with
// fresh state. Anything that is not a breaker pointer raises a classed error.
BreakerHandle& breaker_from(SEXP ptr);

// The manual clock behind a clock pointer, rebuilt (at time 0) if restored.
circuitbreaker::ManualClock& clock_from(SEXP ptr);

// New external pointers. The breaker's keeps its configuration (the compact
// vector of config_from_r.h) and its clock pointer (or NULL) in the protected
// field, for rebuilding; that vector is the one home of the configuration.
SEXP make_breaker_pointer(const circuitbreaker::Config& config, SEXP clock);

// The configuration a breaker pointer keeps, and replacing it.
circuitbreaker::Config stored_config(SEXP ptr);
void store_config(SEXP ptr, const circuitbreaker::Config& config);
SEXP make_clock_pointer(Nanos start);

// Raises an R error of class circuit_breaker_invalid_argument (a
// circuit_breaker_error) naming the argument, what it must be, and the value.
// Implemented by calling back into the package's R code; safe from inside an
// Rcpp-exported function (Rcpp turns the R error into a C++ unwind).
[[noreturn]] void abort_argument(const char* arg, const char* must, SEXP value);

// Raises an R error of class circuit_breaker_invalid_object.
[[noreturn]] void abort_invalid_object(const char* what);

}  // namespace cbr

#endif  // CIRCUITBREAKER_R_INTERFACE_H
