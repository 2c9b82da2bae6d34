// What the binding shares between its files: the handle an external pointer
// owns, how to get it back from R safely, and how to raise a classed R error.
#ifndef CIRCUITBREAKER_R_INTERFACE_H
#define CIRCUITBREAKER_R_INTERFACE_H

#include <Rcpp.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "circuitbreaker/breaker_name.hpp"
#include "circuitbreaker/circuitbreaker.hpp"
#include "circuitbreaker/fleet/member.hpp"
#include "circuitbreaker/host/host_breaker.hpp"
#include "circuitbreaker/redis/sync.hpp"

namespace cbr {

using circuitbreaker::Nanos;

// Raises the R error for a fault a host operation found (HostBreaker::
// take_fault(): Busy, a lock still held after its bound; Corrupt, a value
// out of range or an unusable mutex) on the segment at `path`.
[[noreturn]] void abort_host_fault(const std::string& path,
                                   circuitbreaker::SegmentFault fault,
                                   std::chrono::nanoseconds wait);

// One breaker in one of its stores: the state machine in this process
// (circuitbreaker::Breaker, inline), in a host segment (HostBreaker), or a
// fleet member (FleetMember: a Breaker in this process that a sync thread
// keeps in step with Redis). All run the same core; this only forwards. The
// fleet adds work only where the fleet needs a word: a half-open probe (its
// lease), a settled probe and manual control.
class AnyBreaker {
 public:
  explicit AnyBreaker(const circuitbreaker::Settings& s, Nanos now) {
    local_.emplace(s, now);
    core_ = &*local_;
  }
  AnyBreaker(std::unique_ptr<circuitbreaker::HostBreaker> host, std::string path)
      : host_(std::move(host)), host_path_(std::move(path)) {}
#ifdef CIRCUITBREAKER_HAVE_HIREDIS
  AnyBreaker(std::shared_ptr<circuitbreaker::FleetMember> member,
             std::shared_ptr<circuitbreaker::FleetSync> sync)
      : member_(std::move(member)), sync_(std::move(sync)) {
    core_ = &member_->breaker();
  }
  // A fleet member's last counts go out before it is freed (a finalizer, or
  // R exiting), bounded by the store's timeout.
  ~AnyBreaker() {
    if (member_) sync_->flush(member_);
  }
  AnyBreaker(const AnyBreaker&) = delete;
  AnyBreaker& operator=(const AnyBreaker&) = delete;
  circuitbreaker::FleetMember* member() const noexcept { return member_.get(); }
  circuitbreaker::FleetSync* sync() const noexcept { return sync_.get(); }
#else
  circuitbreaker::FleetMember* member() const noexcept { return nullptr; }
#endif

  circuitbreaker::HostBreaker* host() const noexcept { return host_.get(); }

  const circuitbreaker::Settings& settings() const noexcept {
    return host_ ? host_->settings() : core_->settings();
  }
  circuitbreaker::Admission acquire(Nanos now, Nanos lease) {
    if (host_) return checked(host_->acquire(now, lease));
    circuitbreaker::Admission a = core_->acquire(now, lease);
#ifdef CIRCUITBREAKER_HAVE_HIREDIS
    if (member_ && a.permitted && a.permit.kind == circuitbreaker::PermitKind::Probe) {
      circuitbreaker::FleetSync& sync = *sync_;
      const std::string& key = member_->key();
      a = member_->confirm_probe(
          a, now, sync.spec().sync_interval,
          [&sync, &key](const std::string& token, std::int64_t lease_ms) {
            return sync.lease(key, token, lease_ms);
          });
    }
#endif
    return a;
  }
  bool record(const circuitbreaker::Permit& p, circuitbreaker::Outcome o, Nanos now,
              Nanos open_for) {
    if (host_) return checked(host_->record(p, o, now, open_for));
#ifdef CIRCUITBREAKER_HAVE_HIREDIS
    if (member_) {
      // A local trip goes to the fleet at once, and a failure soon, not at
      // the next tick.
      const std::uint64_t before = core_->generation();
      const bool recorded = core_->record(p, o, now, open_for);
      if (core_->generation() != before) {
        sync_->wake();
      } else if (o == circuitbreaker::Outcome::Failure) {
        sync_->nudge();
      }
      settled(p, o == circuitbreaker::Outcome::Ignored, now,
              o == circuitbreaker::Outcome::Failure);
      return recorded;
    }
#endif
    return core_->record(p, o, now, open_for);
  }
  void release(const circuitbreaker::Permit& p, Nanos now) {
    if (host_) {
      host_->release(p, now);
      return check_host();
    }
    core_->release(p, now);
    settled(p, true, now);
  }
  bool note(circuitbreaker::Outcome o, Nanos now) {
    return host_ ? checked(host_->note(o, now)) : core_->note(o, now);
  }
  void reset(Nanos now) {
    host_ ? host_->reset(now) : core_->reset(now);
    check_host();
    tell_fleet(circuitbreaker::FleetCommand::Reset);
  }
  void force_open(Nanos now) {
    host_ ? host_->force_open(now) : core_->force_open(now);
    check_host();
    tell_fleet(circuitbreaker::FleetCommand::ForceOpen);
  }
  void disable(Nanos now) {
    host_ ? host_->disable(now) : core_->disable(now);
    check_host();
    tell_fleet(circuitbreaker::FleetCommand::Disable);
  }
  // Only for the process store (a shared breaker's configuration is its
  // identity; the caller checks host() and member() first).
  void reconfigure(const circuitbreaker::Settings& s, Nanos now) noexcept {
    local_->reconfigure(s, now);
  }
  circuitbreaker::Snapshot snapshot(Nanos now) const {
    return host_ ? checked(host_->snapshot(now)) : core_->snapshot(now);
  }
  std::size_t transitions_since(std::uint64_t after, circuitbreaker::Transition* out,
                                std::size_t max) const {
    return host_ ? checked(host_->transitions_since(after, out, max))
                 : core_->transitions_since(after, out, max);
  }
  std::size_t history(Nanos now, circuitbreaker::ActivityBucket* out) {
    return host_ ? checked(host_->history(now, out)) : core_->history(now, out);
  }

  // Raises the R error for what the last host operations found wrong with
  // the segment (a busy lock, a corrupt segment); nothing otherwise. Every
  // host operation above calls it before its result is used: a result
  // computed on the lock's scratch copy never reaches R.
  void check_host() const {
    if (!host_) return;
    const circuitbreaker::SegmentFault f = host_->take_fault();
    if (f != circuitbreaker::SegmentFault::None) {
      abort_host_fault(host_path_, f, host_->lock_wait());
    }
  }

 private:
  template <typename T>
  T checked(T result) const {
    check_host();
    return result;
  }

  // A fleet probe's outcome (or release) goes to the fleet at once.
  void settled(const circuitbreaker::Permit& p, bool released, Nanos now,
               bool failed = false) {
#ifdef CIRCUITBREAKER_HAVE_HIREDIS
    if (member_ && p.kind == circuitbreaker::PermitKind::Probe &&
        member_->probe_settled(p, released, now, failed)) {
      sync_->wake();
    }
#else
    (void)p;
    (void)released;
    (void)now;
    (void)failed;
#endif
  }
  void tell_fleet(circuitbreaker::FleetCommand c) {
#ifdef CIRCUITBREAKER_HAVE_HIREDIS
    if (member_) {
      member_->command(c);
      sync_->wake();
    }
#else
    (void)c;
#endif
  }

  std::optional<circuitbreaker::Breaker> local_;
  circuitbreaker::Breaker* core_ = nullptr;  // local_'s, or the fleet member's
  std::unique_ptr<circuitbreaker::HostBreaker> host_;
  std::string host_path_;  // the segment file, for error messages
#ifdef CIRCUITBREAKER_HAVE_HIREDIS
  std::shared_ptr<circuitbreaker::FleetMember> member_;
  std::shared_ptr<circuitbreaker::FleetSync> sync_;
#endif
};

// What an R breaker object's external pointer owns.
struct BreakerHandle {
  // In this process, on the system clock or a manual one.
  BreakerHandle(const circuitbreaker::Settings& s,
                const circuitbreaker::ManualClock* manual_clock)
      : clock(manual_clock), breaker(s, now_of(manual_clock)) {}
  // In a host segment (always on the system clock).
  BreakerHandle(std::unique_ptr<circuitbreaker::HostBreaker> host, std::string path)
      : clock(nullptr), breaker(std::move(host), std::move(path)) {}
#ifdef CIRCUITBREAKER_HAVE_HIREDIS
  // A fleet member, on its sync's clock (the system's, skewed in tests).
  BreakerHandle(std::shared_ptr<circuitbreaker::FleetMember> member,
                std::shared_ptr<circuitbreaker::FleetSync> sync)
      : clock(nullptr),
        offset(sync->spec().clock_offset),
        breaker(std::move(member), std::move(sync)) {}
#endif

  static Nanos now_of(const circuitbreaker::ManualClock* c) noexcept {
    return c ? c->now() : circuitbreaker::SteadyClock::now();
  }
  Nanos now() const noexcept { return now_of(clock) + offset; }

  // Owned by another external pointer, which this breaker's pointer keeps
  // alive in its protected field (so R's GC cannot free it first).
  const circuitbreaker::ManualClock* clock;
  Nanos offset = 0;
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

#ifdef CIRCUITBREAKER_HAVE_HIREDIS
// The FleetSpec of the list that R's redis_store_spec() makes (url, prefix,
// sync_interval, timeout, clock_offset; checked by breaker_store_redis()).
circuitbreaker::FleetSpec fleet_spec_from(SEXP spec);
#endif

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

// Raises the R error for a host segment found broken while in use.
[[noreturn]] void abort_host_broken(SEXP ptr);

}  // namespace cbr

#endif  // CIRCUITBREAKER_R_INTERFACE_H
