// The lock that guards a breaker's state block, and the one guard that takes
// it.
//
// A lock type is anything with `void lock() noexcept` and
// `void unlock() noexcept` (the `Lock` requirement; checked by is_lock_v).
// BasicBreaker<Store> takes its lock from its store, so a store that keeps
// the state block in POSIX shared memory can supply a process-shared robust
// lock instead of SpinLock. Such a lock must deal with a dead owner itself
// (EOWNERDEAD: repair or roll back the block) before lock() returns: the
// state machine assumes that once lock() returns, the block is consistent.
#ifndef CIRCUITBREAKER_LOCK_HPP
#define CIRCUITBREAKER_LOCK_HPP

#include <atomic>
#include <thread>
#include <type_traits>
#include <utility>

namespace circuitbreaker {

template <typename L, typename = void>
struct is_lock : std::false_type {};
template <typename L>
struct is_lock<L, std::void_t<decltype(std::declval<L&>().lock()),
                              decltype(std::declval<L&>().unlock())>>
    : std::bool_constant<noexcept(std::declval<L&>().lock())&& noexcept(
          std::declval<L&>().unlock())> {};
template <typename L>
inline constexpr bool is_lock_v = is_lock<L>::value;

// Holds a lock for its lifetime.
template <typename L>
class LockGuard {
  static_assert(is_lock_v<L>, "a lock needs noexcept lock() and unlock()");

 public:
  explicit LockGuard(L& l) noexcept : lock_(l) { lock_.lock(); }
  ~LockGuard() { lock_.unlock(); }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

 private:
  L& lock_;
};

// The default lock: critical sections are a few dozen instructions and never
// call out (no user code, no allocation, no I/O), so spinning beats a mutex,
// and the lock is a single byte.
//
// It is not fair: two threads hammering one breaker without pause may see
// one of them served far more often (bench/RESULTS.md). A ticket lock was
// tried and was worse: on a loaded 2-core machine a waiter whose turn came
// while it was descheduled stalled everyone (1.5 us per lock instead of 24 ns).
// In the package, R's thread drives each breaker; the one other thread that
// takes a breaker's lock is a fleet breaker's sync thread (fleet/sync.hpp),
// a few times per sync to build a report and apply the reply: a short, rare
// contender, which unfairness cannot starve.
class SpinLock {
 public:
  // Busy-wait this many times on a held lock before yielding the CPU.
  static constexpr int kSpinsBeforeYield = 64;

  void lock() noexcept {
    for (int spins = 0; locked_.exchange(true, std::memory_order_acquire);) {
      // Wait on a plain load (no cache-line ping-pong), yield if it drags on.
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins > kSpinsBeforeYield) std::this_thread::yield();
      }
    }
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

static_assert(is_lock_v<SpinLock>);

// The guard by its old name.
using SpinGuard = LockGuard<SpinLock>;

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_LOCK_HPP
