// Where a breaker's state block and its lock live, and every hook through
// which a store adds to the one state machine (breaker.hpp). A store supplies
// the memory, the lock and the way events arrive, never a rule of its own.
//
// Hooks of a Store (the template argument of BasicBreaker<Store>):
//   using Lock                    a lock type (lock.hpp); every store.
//   Lock& lock() const            the lock of the block. Once lock() returns,
//                                 the block is consistent (a lock of shared
//                                 memory repairs or rolls back a dead owner's
//                                 work first); a lock that cannot be taken
//                                 runs the section on a scratch copy and says
//                                 so itself (host/segment_lock.hpp's faults).
//   BreakerState& state()         the block to write, under the lock; the
//   const BreakerState& state() const   block to read. A store may hand out a
//                                 copy on the first write and publish it on
//                                 unlock() (host/segment_layout.hpp).
//   BulkheadPermits* bulkhead()   the bulkhead's permits (bulkhead.hpp) to
//   const BulkheadPermits* bulkhead() const   write and to read, beside the
//                                 block and under the same lock; nullptr when
//                                 the store keeps none. A breaker without a
//                                 bulkhead carries none: the block is the
//                                 state machine's alone.
//   bool keep_bulkhead()          makes sure bulkhead() is not nullptr (the
//                                 breaker's settings gained a bulkhead);
//                                 false when it cannot (no memory), and then
//                                 every call is refused as Full. A shared
//                                 store's segment always holds one.
//   uint64_t pending_rejections() const   rejections decided without the lock
//   uint64_t take_pending_rejections()    and not yet counted, and, under the
//                                 lock, taking them (exactly once, even if the
//                                 section dies before its commit). 0 for
//                                 stores that never admit without the lock
//                                 (NoPendingRejections, below); the host
//                                 store's SegmentStore counts its lock-free
//                                 rejections this way. Every mutating
//                                 operation folds them in first (the
//                                 Section, stored_breaker.hpp); snapshot()
//                                 adds them to its totals.
//
// Hooks that are not the store's type but sit beside it:
//   acquire(now, lease, owner, gone)   `gone(owner)` tells whether a probe's
//                                 owner is dead, so that its slot is freed
//                                 when half-open is full (the host store:
//                                 host/os_probes.hpp's process_gone, under
//                                 the lock, so it must not block); NobodyGone
//                                 by default.
//   acquire_with(now, lease, permits)  (breaker.hpp) admission by the same
//                                 rule, with the bulkhead's permits kept
//                                 outside the block (bulkhead.hpp says what
//                                 permits do; the fleet store's are in a host
//                                 segment: fleet/fleet_bulkhead.hpp, through
//                                 bulkhead.hpp's take_bulkhead_permit() and
//                                 return_bulkhead_permit() on that segment).
//   policy_section(now, f)        (stored_breaker.hpp) a policy's own
//                                 operation on its part of the block, in the
//                                 section every operation opens; it moves
//                                 no state.
//   admit_without_writing(view, now)   (admission.hpp) the decisions that
//                                 write nothing, for a store that can read
//                                 an AdmissionView without the lock (the host
//                                 store's seqlock): it then counts a
//                                 rejection as pending (above).
//   class X : public Breaker      a breaker with operations of its own (the
//                                 fleet's FleetBreaker, fleet/fleet_breaker.hpp:
//                                 adopt a fleet's state, decline a probe)
//                                 opens a Critical section and moves the state
//                                 only through BasicBreaker's protected
//                                 transitions (transition, close, reject,
//                                 free_probe_slot, free_bulkhead_permit;
//                                 tally.hpp for the counts).
//   AnyBreaker                    (any_breaker.hpp) the handle a binding
//                                 holds: each store implements it beside its
//                                 code (ProcessHandle there, HostHandle in
//                                 host/host_handle.hpp, FleetHandle in
//                                 fleet/fleet_handle.hpp), with what the store
//                                 adds around the operations (a fleet's probe
//                                 lease and sync) and, for a store that can
//                                 fail (AnyBreaker(true)), its faults
//                                 (store_fault(), store_usable(): the binding
//                                 reports them instead of a result).
#ifndef CIRCUITBREAKER_STORE_HPP
#define CIRCUITBREAKER_STORE_HPP

#include <cstdint>
#include <memory>
#include <new>

#include "bulkhead.hpp"
#include "lock.hpp"
#include "state.hpp"

namespace circuitbreaker {

// The pending-rejection hooks of a store that never admits without its lock.
struct NoPendingRejections {
  static constexpr std::uint64_t pending_rejections() noexcept { return 0; }
  static constexpr std::uint64_t take_pending_rejections() noexcept { return 0; }
};

// The state block and its lock inside the breaker (one process). The
// bulkhead's permits are allocated beside it only for a breaker that has a
// bulkhead (when its settings first ask for one), and kept after.
template <typename LockT>
class LocalStore : public NoPendingRejections {
 public:
  using Lock = LockT;
  BreakerState& state() noexcept { return state_; }
  const BreakerState& state() const noexcept { return state_; }
  LockT& lock() const noexcept { return lock_; }
  BulkheadPermits* bulkhead() noexcept { return bulkhead_.get(); }
  const BulkheadPermits* bulkhead() const noexcept { return bulkhead_.get(); }
  bool keep_bulkhead() noexcept {
    if (!bulkhead_) bulkhead_.reset(new (std::nothrow) BulkheadPermits());
    return bulkhead_ != nullptr;
  }

 private:
  BreakerState state_;
  mutable LockT lock_;
  std::unique_ptr<BulkheadPermits> bulkhead_;
};

// A state block, a lock and (optionally) bulkhead permits that live
// elsewhere (for instance in a shared-memory mapping); all must outlive the
// breaker.
template <typename LockT>
class ExternalStore : public NoPendingRejections {
 public:
  using Lock = LockT;
  ExternalStore(BreakerState& state, LockT& lock,
                BulkheadPermits* bulkhead = nullptr) noexcept
      : state_(&state), lock_(&lock), bulkhead_(bulkhead) {}
  BreakerState& state() noexcept { return *state_; }
  const BreakerState& state() const noexcept { return *state_; }
  LockT& lock() const noexcept { return *lock_; }
  BulkheadPermits* bulkhead() noexcept { return bulkhead_; }
  const BulkheadPermits* bulkhead() const noexcept { return bulkhead_; }
  bool keep_bulkhead() noexcept { return bulkhead_ != nullptr; }

 private:
  BreakerState* state_;
  LockT* lock_;
  BulkheadPermits* bulkhead_;
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_STORE_HPP
