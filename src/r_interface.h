// What the binding shares between its files: the handle an external pointer
// owns, how to get it back from R safely, and how to raise a classed R error.
#ifndef CIRCUITBREAKER_R_INTERFACE_H
#define CIRCUITBREAKER_R_INTERFACE_H

#include <Rcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "circuitbreaker/any_breaker.hpp"
#include "circuitbreaker/breaker_name.hpp"
#include "circuitbreaker/circuitbreaker.hpp"
#include "circuitbreaker/host/host_handle.hpp"
#include "circuitbreaker/fleet/fleet_handle.hpp"

namespace cbr {

using circuitbreaker::Nanos;

// Raises the R error for a fault a store found (AnyBreaker::take_fault():
// Busy, a lock still held after its bound; Corrupt, a value out of range or
// an unusable mutex) where it keeps the breaker (`location`: a segment file).
[[noreturn]] void abort_store_fault(const std::string& location,
                                    circuitbreaker::StoreFault fault);

// What an R breaker object's external pointer owns: the core's handle of the
// breaker (any_breaker.hpp: process, host or fleet store; this file never asks
// which) and the clock it is driven by.
struct BreakerHandle {
  // `manual_clock`: a manual clock or NULL (the system's); `offset` is added
  // to its readings (a fleet's skew, in tests).
  BreakerHandle(std::unique_ptr<circuitbreaker::AnyBreaker> b,
                const circuitbreaker::ManualClock* manual_clock, Nanos offset = 0)
      : clock(manual_clock), offset(offset), breaker(std::move(b)) {}

  static Nanos now_of(const circuitbreaker::ManualClock* c) noexcept {
    return c ? c->now() : circuitbreaker::SteadyClock::now();
  }
  Nanos now() const noexcept { return now_of(clock) + offset; }

  // Raises the R error for what the store found wrong in the operations
  // since the last check; nothing otherwise. Every entry point calls it
  // after each operation, before the result is used: a result computed on a
  // shared store's scratch copy never reaches R.
  void check() const {
    const circuitbreaker::StoreFault f = breaker->take_fault();
    if (f) abort_store_fault(breaker->fault_location(), f);
  }
  // `result`, once check() found nothing wrong.
  template <typename T>
  T checked(T result) const {
    check();
    return result;
  }

  // Owned by another external pointer, which this breaker's pointer keeps
  // alive in its protected field (so R's GC cannot free it first).
  const circuitbreaker::ManualClock* clock;
  Nanos offset = 0;
  std::unique_ptr<circuitbreaker::AnyBreaker> breaker;
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
// vector of config_from_r.h), its clock pointer (or NULL), its store's
// location (NULL, the path of a host segment, the fleet's connection
// details) and the store's kind (R's store$kind) in the protected field, for
// rebuilding; that vector is the one home of the configuration. A host
// breaker that cannot be opened raises a classed error (abort_host_store()).
SEXP make_breaker_pointer(const circuitbreaker::Config& config, SEXP clock, SEXP kind,
                          SEXP location);

#ifdef CIRCUITBREAKER_HAVE_HIREDIS
// The FleetSpec of the list that R's fleet_store_spec() makes (url, prefix,
// sync_interval, timeout, clock_offset; checked by breaker_store_redis()).
circuitbreaker::FleetSpec fleet_spec_from(SEXP spec);
// The `tls` list of a store's spec (R's merged, checked settings).
circuitbreaker::RedisTls tls_from(SEXP tls);
#endif

// What a store tells (store_info.hpp) as a named list, in its order: numbers
// as doubles (NA when unknown), texts as strings, flags as logicals; NULL
// when it tells nothing.
SEXP store_info_to_r(const circuitbreaker::StoreInfo& info);

// The configuration a breaker pointer keeps, and replacing it.
circuitbreaker::Config stored_config(SEXP ptr);
void store_config(SEXP ptr, const circuitbreaker::Config& config);
SEXP make_clock_pointer(Nanos start);

// Raises an R error of class circuit_breaker_invalid_argument (a
// circuit_breaker_error) naming the argument, what it must be, and the value.
// Implemented by calling back into the package's R code; safe from inside an
// Rcpp-exported function (Rcpp turns the R error into a C++ unwind).
[[noreturn]] void abort_argument(const char* arg, const char* must, SEXP value);

// Calls the package's R function `fun` (one that signals a classed error)
// with one argument.
[[noreturn]] void abort_by(const char* fun, SEXP arg);

// Raises the R error for a name that cannot name a breaker (R's
// abort_name_too_long(): it names the argument and the core's limit).
[[noreturn]] void abort_name(SEXP name, const char* must, std::size_t limit);

// Raises an R error of class circuit_breaker_invalid_object.
[[noreturn]] void abort_invalid_object(const char* what);

// Raises the R error for a host segment that could not be opened or attached
// (R's abort_host_store(): the class names the reason), or whose file or
// directory the core refused as not ours (R's abort_host_untrusted()).
[[noreturn]] void abort_host_store(const std::string& path,
                                   const circuitbreaker::HostBreaker::OpenResult& r);

// Raises the R error for a fleet breaker whose keys could not be removed
// (R's abort_fleet_unreachable(): Redis could not be reached, or refused;
// `reason` has no password).
[[noreturn]] void abort_fleet_unreachable(const std::string& name,
                                          const std::string& reason);

// Raises the R error for a host segment found broken while in use
// (`location`: its file).
[[noreturn]] void abort_host_broken(const std::string& location);

}  // namespace cbr

#endif  // CIRCUITBREAKER_R_INTERFACE_H
