// The breaker's bookkeeping that moves no state: what a result, a failure
// and a rejection add to a state block's counts, windows and history, and
// the ramp's share of admitted calls. The state machine (breaker.hpp) calls
// them under its lock; keeping them here (as rules.hpp keeps the rules that
// write nothing) leaves breaker.hpp with the transitions.
#ifndef CIRCUITBREAKER_TALLY_HPP
#define CIRCUITBREAKER_TALLY_HPP

#include <cstdint>

#include "config.hpp"
#include "state.hpp"
#include "types.hpp"

namespace circuitbreaker {

// A recorded call: the totals and the activity history.
inline void tally_result(BreakerState& s, bool failed, bool slow, Nanos now) noexcept {
  s.history.add_result(now, failed, slow);
  ++s.totals.calls;
  if (failed) {
    ++s.totals.failures;
  } else {
    ++s.totals.successes;
  }
  if (slow) ++s.totals.slow;
}

// A rejected call.
inline void tally_rejection(BreakerState& s, Nanos now) noexcept {
  ++s.totals.rejected;
  s.history.add_rejection(now);
}

// A failure of the dependency, at `at`: the run of consecutive failures.
inline void tally_failure(BreakerState& s, Nanos at) noexcept {
  ++s.consecutive_failures;
  s.has_failure = true;
  s.last_failure_at = at;
}

// A call recorded in CLOSED: the sliding window of the configured kind.
inline void tally_window(BreakerState& s, const Settings& settings, bool failed,
                         bool slow, Nanos now) noexcept {
  if (settings.window_type == WindowType::Count) {
    s.count_window.add(settings.window_calls, failed, slow);
  } else {
    s.time_window.add(settings.window_bucket, now, failed, slow);
  }
}

inline void clear_windows(BreakerState& s) noexcept {
  s.count_window.clear();
  s.time_window.clear();
}

// Whether a call in a ramp-up after a close is admitted. Error diffusion:
// over any run of calls, the admitted share follows the ramp,
// deterministically. The ramp ends (ramping false) once ramp_up has passed.
inline bool ramp_admits(BreakerState& s, const Settings& settings, Nanos now) noexcept {
  const Nanos elapsed = now - s.ramp_started;
  if (elapsed >= settings.ramp_up) {
    s.ramping = false;
    return true;
  }
  s.ramp_credit += static_cast<double>(elapsed) / static_cast<double>(settings.ramp_up);
  if (s.ramp_credit >= 1) {
    s.ramp_credit -= 1;
    return true;
  }
  return false;
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_TALLY_HPP
