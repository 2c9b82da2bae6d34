// The handle that a binding holds for one breaker, whatever store keeps its
// state: AnyBreaker, one abstract class with one virtual call per operation.
//
//   std::unique_ptr<AnyBreaker> b = std::make_unique<ProcessHandle>(settings, now);
//   // or host/host_handle.hpp's HostHandle, fleet/fleet_handle.hpp's FleetHandle
//   Admission a = b->acquire(now, kNever);
//   if (StoreFault f = b->take_fault()) { /* report f; do not use `a` */ }
//
// Each store implements it beside its own code: the process store here
// (ProcessHandle), the host store in host/host_handle.hpp, the fleet store in
// fleet/fleet_handle.hpp. Whatever a store adds to the core's operations (the
// host's lock-free admission and its faults, the fleet's probe lease and its
// words to the sync thread) lives in its implementation, so a binding only
// converts: it calls an operation, then asks take_fault() before it uses the
// result (a shared store may have found its memory overwritten or its lock
// held too long; the result is then a private scratch copy's).
#ifndef CIRCUITBREAKER_ANY_BREAKER_HPP
#define CIRCUITBREAKER_ANY_BREAKER_HPP

#include <cstddef>
#include <cstdint>
#include <string>

#include "breaker.hpp"
#include "config.hpp"
#include "health.hpp"
#include "history.hpp"
#include "permit.hpp"
#include "snapshot.hpp"
#include "store_info.hpp"
#include "transition_log.hpp"
#include "types.hpp"

namespace circuitbreaker {

// What a store found wrong in the operations since it was last asked.
enum class StoreFaultKind : std::uint8_t {
  None = 0,
  Busy = 1,    // its lock was still held when the wait's bound passed
  Corrupt = 2  // its memory holds what this code never writes
};

struct StoreFault {
  StoreFaultKind kind = StoreFaultKind::None;
  Nanos waited = 0;  // Busy: the bound of the wait that passed
  explicit operator bool() const noexcept { return kind != StoreFaultKind::None; }
};

class AnyBreaker {
 public:
  virtual ~AnyBreaker() = default;
  AnyBreaker(const AnyBreaker&) = delete;
  AnyBreaker& operator=(const AnyBreaker&) = delete;

  // The store's name as users write it: "process", "host" or "redis".
  virtual const char* store_kind() const noexcept = 0;
  // Where the store keeps the breaker, for messages (the segment file, the
  // Redis key); empty in this process.
  virtual const std::string& location() const noexcept { return no_location(); }
  // Where the store keeps what a fault (take_fault(), usable()) is about,
  // for its message: location(), unless the store says otherwise (a fleet
  // breaker's bulkhead segment).
  virtual const std::string& fault_location() const noexcept { return location(); }

  virtual const Settings& settings() const noexcept = 0;
  virtual Admission acquire(Nanos now, Nanos probe_lease) = 0;
  virtual bool record(const Permit& p, Outcome o, Nanos now, Nanos open_for) = 0;
  virtual void release(const Permit& p, Nanos now) = 0;
  virtual bool note(Outcome o, Nanos now) = 0;
  virtual void reset(Nanos now) = 0;
  virtual void force_open(Nanos now) = 0;
  virtual void disable(Nanos now) = 0;
  // A new configuration, keeping the state; false (nothing changes) where
  // the configuration is the breaker's identity (a shared store: every
  // process would have to agree).
  virtual bool reconfigure(const Settings& s, Nanos now) = 0;
  virtual Snapshot snapshot(Nanos now) const = 0;
  virtual std::size_t transitions_since(std::uint64_t after, Transition* out,
                                        std::size_t max) const = 0;
  virtual std::size_t history(Nanos now, ActivityBucket* out) = 0;
  // A health check's lease and its result (health.hpp): the store decides
  // who may run the check (one process of a host for the host store) and
  // where a pass goes (the fleet, for the fleet store).
  virtual HealthClaim claim_health_check(Nanos now) = 0;
  virtual HealthResult health_result(const HealthClaim& c, bool passed, Nanos now) = 0;
  // What the store tells about this breaker beyond its state (store_info.hpp):
  // nothing for the process store.
  virtual StoreInfo store_info() { return {}; }

  // Whether the store may still be used at all (a host segment whose header
  // was overwritten, or whose lock was found unrecoverable, may not).
  bool usable() const noexcept { return !may_fault_ || store_usable(); }
  // What the operations since the last call found wrong, and forgets it.
  // The result of an operation that found a fault must not be used.
  StoreFault take_fault() noexcept { return may_fault_ ? store_fault() : StoreFault{}; }

 protected:
  // `may_fault`: the store's memory or lock can fail (shared memory); only
  // then are store_usable() and store_fault() asked, so that the stores that
  // cannot fail pay a branch, not a call, for the binding's checks.
  explicit AnyBreaker(bool may_fault = false) noexcept : may_fault_(may_fault) {}
  virtual bool store_usable() const noexcept { return true; }
  virtual StoreFault store_fault() noexcept { return {}; }

 private:
  bool may_fault_;

  static const std::string& no_location() noexcept {
    static const std::string empty;
    return empty;
  }
};

// A handle whose operations are its inner breaker's, unchanged: the process
// store's (a Breaker) and the host store's (a HostBreaker). `Derived::inner()`
// gives the inner breaker (a static call: no second virtual one). An
// operation added to the state machine is forwarded here, once, for both.
// The kind, reconfigure() (a shared store refuses it) and whatever else a
// store adds are Derived's.
template <typename Derived, typename Inner>
class ForwardingHandle : public AnyBreaker {
 public:
  const Settings& settings() const noexcept override { return in().settings(); }
  Admission acquire(Nanos now, Nanos probe_lease) override {
    return in().acquire(now, probe_lease);
  }
  bool record(const Permit& p, Outcome o, Nanos now, Nanos open_for) override {
    return in().record(p, o, now, open_for);
  }
  void release(const Permit& p, Nanos now) override { in().release(p, now); }
  bool note(Outcome o, Nanos now) override { return in().note(o, now); }
  void reset(Nanos now) override { in().reset(now); }
  void force_open(Nanos now) override { in().force_open(now); }
  void disable(Nanos now) override { in().disable(now); }
  Snapshot snapshot(Nanos now) const override { return in().snapshot(now); }
  std::size_t transitions_since(std::uint64_t after, Transition* out,
                                std::size_t max) const override {
    return in().transitions_since(after, out, max);
  }
  std::size_t history(Nanos now, ActivityBucket* out) override {
    return in().history(now, out);
  }
  HealthClaim claim_health_check(Nanos now) override {
    return in().claim_health_check(now);
  }
  HealthResult health_result(const HealthClaim& c, bool passed, Nanos now) override {
    return in().health_result(c, passed, now);
  }

 protected:
  explicit ForwardingHandle(bool may_fault = false) noexcept : AnyBreaker(may_fault) {}

 private:
  Inner& in() noexcept { return static_cast<Derived&>(*this).inner(); }
  const Inner& in() const noexcept { return static_cast<const Derived&>(*this).inner(); }
};

// The process store: the state machine and its state in this process.
class ProcessHandle final : public ForwardingHandle<ProcessHandle, Breaker> {
 public:
  ProcessHandle(const Settings& s, Nanos now) noexcept : breaker_(s, now) {}

  Breaker& breaker() noexcept { return breaker_; }
  Breaker& inner() noexcept { return breaker_; }
  const Breaker& inner() const noexcept { return breaker_; }

  const char* store_kind() const noexcept override { return "process"; }
  bool reconfigure(const Settings& s, Nanos now) override {
    breaker_.reconfigure(s, now);
    return true;
  }

 private:
  Breaker breaker_;
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_ANY_BREAKER_HPP
