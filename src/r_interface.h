// What the binding shares between its files: the handle an external pointer
// owns, how to get it back from R safely, and how to raise a classed R error.
#ifndef CIRCUITBREAKER_R_INTERFACE_H
#define CIRCUITBREAKER_R_INTERFACE_H

#include <Rcpp.h>

#include <memory>
#include <optional>
#include <string>

#include "circuitbreaker/circuitbreaker.hpp"
#include "circuitbreaker/host_breaker.hpp"

namespace cbr {

using circuitbreaker::Nanos;

// One breaker in one of its stores: the state machine in this process
// (circuitbreaker::Breaker, inline) or in a host segment (HostBreaker). Both
// run the same core; this only forwards, with one predictable branch.
class AnyBreaker {
 public:
  explicit AnyBreaker(const circuitbreaker::Settings& s, Nanos now) {
    local_.emplace(s, now);
  }
  explicit AnyBreaker(std::unique_ptr<circuitbreaker::HostBreaker> host)
      : host_(std::move(host)) {}

  circuitbreaker::HostBreaker* host() const noexcept { return host_.get(); }

  const circuitbreaker::Settings& settings() const noexcept {
    return host_ ? host_->settings() : local_->settings();
  }
  circuitbreaker::Admission acquire(Nanos now, Nanos lease) noexcept {
    return host_ ? host_->acquire(now, lease) : local_->acquire(now, lease);
  }
  bool record(const circuitbreaker::Permit& p, circuitbreaker::Outcome o, Nanos now,
              Nanos open_for) noexcept {
    return host_ ? host_->record(p, o, now, open_for)
                 : local_->record(p, o, now, open_for);
  }
  void release(const circuitbreaker::Permit& p, Nanos now) noexcept {
    host_ ? host_->release(p, now) : local_->release(p, now);
  }
  bool note(circuitbreaker::Outcome o, Nanos now) noexcept {
    return host_ ? host_->note(o, now) : local_->note(o, now);
  }
  void reset(Nanos now) noexcept { host_ ? host_->reset(now) : local_->reset(now); }
  void force_open(Nanos now) noexcept {
    host_ ? host_->force_open(now) : local_->force_open(now);
  }
  void disable(Nanos now) noexcept { host_ ? host_->disable(now) : local_->disable(now); }
  // Only for the process store (a host breaker's configuration is its
  // identity; the caller checks host() first).
  void reconfigure(const circuitbreaker::Settings& s, Nanos now) noexcept {
    local_->reconfigure(s, now);
  }
  circuitbreaker::Snapshot snapshot(Nanos now) const noexcept {
    return host_ ? host_->snapshot(now) : local_->snapshot(now);
  }
  std::size_t transitions_since(std::uint64_t after, circuitbreaker::Transition* out,
                                std::size_t max) const noexcept {
    return host_ ? host_->transitions_since(after, out, max)
                 : local_->transitions_since(after, out, max);
  }
  std::size_t history(Nanos now, circuitbreaker::ActivityBucket* out) noexcept {
    return host_ ? host_->history(now, out) : local_->history(now, out);
  }

 private:
  std::optional<circuitbreaker::Breaker> local_;
  std::unique_ptr<circuitbreaker::HostBreaker> host_;
};

// What an R breaker object's external pointer owns.
struct BreakerHandle {
  // In this process, on the system clock or a manual one.
  BreakerHandle(const circuitbreaker::Settings& s,
                const circuitbreaker::ManualClock* manual_clock)
      : clock(manual_clock), breaker(s, now_of(manual_clock)) {}
  // In a host segment (always on the system clock).
  explicit BreakerHandle(std::unique_ptr<circuitbreaker::HostBreaker> host)
      : clock(nullptr), breaker(std::move(host)) {}

  static Nanos now_of(const circuitbreaker::ManualClock* c) noexcept {
    return c ? c->now() : circuitbreaker::SteadyClock::now();
  }
  Nanos now() const noexcept { return now_of(clock); }

  // Owned by another external pointer, which this breaker's pointer keeps
  // alive in its protected field (so R's GC cannot free it first).
  const circuitbreaker::ManualClock* clock;
  AnyBreaker breaker;
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
// vector of config_from_r.h), its clock pointer (or NULL) and the path of its
// host segment (or NULL) in the protected field, for rebuilding; that vector
// is the one home of the configuration. A host breaker that cannot be opened
// raises a classed error (abort_host_store()).
SEXP make_breaker_pointer(const circuitbreaker::Config& config, SEXP clock, SEXP segment);

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

// Raises an R error of class circuit_breaker_invalid_object.
[[noreturn]] void abort_invalid_object(const char* what);

// Raises the R error for a host segment that could not be opened or attached
// (R's abort_host_store(): the class names the reason).
[[noreturn]] void abort_host_store(const std::string& path,
                                   const circuitbreaker::HostBreaker::OpenResult& r);

// Raises the R error for a host segment found broken while in use.
[[noreturn]] void abort_host_broken(SEXP ptr);

}  // namespace cbr

#endif  // CIRCUITBREAKER_R_INTERFACE_H
