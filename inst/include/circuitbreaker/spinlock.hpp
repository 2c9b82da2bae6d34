// A tiny lock for the breaker's state block. Critical sections are a few
// dozen instructions and never call out (no user code, no allocation, no I/O),
// so spinning beats a mutex, and the lock is a single byte that could live in
// shared memory beside the state it guards.
//
// It is not fair: two threads hammering one breaker without pause may see
// one of them served far more often (bench/RESULTS.md). A ticket lock was
// tried and was worse: on a loaded 2-core machine a waiter whose turn came
// while it was descheduled stalled everyone (1.5 us per lock instead of 24 ns).
// R drives a breaker from one thread, where none of this arises.
#ifndef CIRCUITBREAKER_SPINLOCK_HPP
#define CIRCUITBREAKER_SPINLOCK_HPP

#include <atomic>
#include <thread>

namespace circuitbreaker {

class SpinLock {
 public:
  void lock() noexcept {
    for (int spins = 0; locked_.exchange(true, std::memory_order_acquire);) {
      // Wait on a plain load (no cache-line ping-pong), yield if it drags on.
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins > 64) std::this_thread::yield();
      }
    }
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

class SpinGuard {
 public:
  explicit SpinGuard(SpinLock& l) noexcept : lock_(l) { lock_.lock(); }
  ~SpinGuard() { lock_.unlock(); }
  SpinGuard(const SpinGuard&) = delete;
  SpinGuard& operator=(const SpinGuard&) = delete;

 private:
  SpinLock& lock_;
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_SPINLOCK_HPP
