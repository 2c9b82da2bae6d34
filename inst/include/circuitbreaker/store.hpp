// Where a breaker's state block and its lock live. A store supplies
// `BreakerState& state()`, `const BreakerState& state() const` and
// `Lock& lock() const` (a Lock, see lock.hpp), and names its lock type
// `Lock`. BasicBreaker<Store> works on whatever the store hands it.
#ifndef CIRCUITBREAKER_STORE_HPP
#define CIRCUITBREAKER_STORE_HPP

#include "lock.hpp"
#include "state.hpp"

namespace circuitbreaker {

// The state block and its lock inside the breaker (one process).
template <typename LockT>
class LocalStore {
 public:
  using Lock = LockT;
  BreakerState& state() noexcept { return state_; }
  const BreakerState& state() const noexcept { return state_; }
  LockT& lock() const noexcept { return lock_; }

 private:
  BreakerState state_;
  mutable LockT lock_;
};

// A state block and a lock that live elsewhere (for instance in a
// shared-memory mapping); both must outlive the breaker.
template <typename LockT>
class ExternalStore {
 public:
  using Lock = LockT;
  ExternalStore(BreakerState& state, LockT& lock) noexcept
      : state_(&state), lock_(&lock) {}
  BreakerState& state() noexcept { return *state_; }
  const BreakerState& state() const noexcept { return *state_; }
  LockT& lock() const noexcept { return *lock_; }

 private:
  BreakerState* state_;
  LockT* lock_;
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_STORE_HPP
