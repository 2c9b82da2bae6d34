// Clocks. The breaker itself never reads a clock: every operation takes `now`
// as an argument, so that tests (and users' tests) can drive time by hand.
// These are the two sources callers pick from.
#ifndef CIRCUITBREAKER_CLOCK_HPP
#define CIRCUITBREAKER_CLOCK_HPP

#include <atomic>
#include <chrono>

#include "types.hpp"

namespace circuitbreaker {

// The default: std::chrono::steady_clock, which never jumps with wall-clock
// changes (NTP, daylight saving), unlike the Sys.time() of the R6 class from the article
// this package follows.
struct SteadyClock {
  static Nanos now() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

// A clock that only moves when told to. Atomic so that a benchmark or test
// thread may advance it while another reads it.
class ManualClock {
 public:
  explicit ManualClock(Nanos start = 0) noexcept : now_(start) {}

  Nanos now() const noexcept { return now_.load(std::memory_order_acquire); }

  // Moves time forward; callers validate that `by` is not negative.
  void advance(Nanos by) noexcept { now_.fetch_add(by, std::memory_order_acq_rel); }

 private:
  std::atomic<Nanos> now_;
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_CLOCK_HPP
