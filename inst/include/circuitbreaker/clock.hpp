// Clocks. The breaker itself never reads a clock: every operation takes `now`
// as an argument, so that tests (and users' tests) can drive time by hand.
// These are the two sources callers pick from.
#ifndef CIRCUITBREAKER_CLOCK_HPP
#define CIRCUITBREAKER_CLOCK_HPP

#include <atomic>
#include <cmath>
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

  // Moves time forward; callers check `by` with check_advance() first.
  void advance(Nanos by) noexcept { now_.fetch_add(by, std::memory_order_acq_rel); }

  // The readings a manual clock may show: from 0 to kMaxClockSeconds, so
  // that a reading plus any configured duration cannot overflow. Each check
  // returns nullptr when `seconds` is allowed, else what it must be.
  static const char* check_start(double seconds) noexcept {
    if (std::isfinite(seconds) && seconds >= 0 && seconds <= kMaxClockSeconds)
      return nullptr;
    return "a number of seconds from 0 to " CIRCUITBREAKER_STRINGIFY(
        CIRCUITBREAKER_MAX_CLOCK_SECONDS);
  }
  const char* check_advance(double seconds) const noexcept {
    const double at = nanos_to_seconds(now());
    if (std::isfinite(seconds) && seconds >= 0 && at + seconds <= kMaxClockSeconds)
      return nullptr;
    return "a number of seconds, at least 0, that keeps the clock "
           "below " CIRCUITBREAKER_STRINGIFY(CIRCUITBREAKER_MAX_CLOCK_SECONDS);
  }

 private:
  std::atomic<Nanos> now_;
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_CLOCK_HPP
