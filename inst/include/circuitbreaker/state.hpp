// The mutable state of one breaker: a flat block of fixed size (counters,
// timestamps, fixed-capacity arrays; no pointers, no heap, trivially
// copyable), so that it can live in shared memory and be copied as a whole.
#ifndef CIRCUITBREAKER_STATE_HPP
#define CIRCUITBREAKER_STATE_HPP

#include <cstdint>
#include <type_traits>

#include "history.hpp"
#include "probe_slots.hpp"
#include "snapshot.hpp"
#include "transition_log.hpp"
#include "types.hpp"
#include "window.hpp"

namespace circuitbreaker {

struct BreakerState {
  std::uint64_t generation = 1;
  Nanos state_since = 0;

  std::uint64_t consecutive_failures = 0;
  Nanos last_failure_at = 0;

  Nanos opened_at = 0;
  Nanos open_duration = 0;
  std::uint64_t consecutive_opens = 0;  // re-opens since the last close
  double jitter_factor = 1;
  Nanos open_hint = -1;  // an opening's duration asked for by the caller

  Nanos ramp_started = 0;
  double ramp_credit = 0;
  std::uint64_t rng = 0;

  State state = State::Closed;
  bool has_failure = false;
  bool ramping = false;
  std::uint32_t probe_successes = 0;
  ProbeSlots probes;

  Counters totals;
  CountWindow count_window;
  TimeWindow time_window;
  TransitionLog log;
  ActivityHistory history;
};

inline AdmissionView admission_view(const BreakerState& s) noexcept {
  AdmissionView v;
  v.state = s.state;
  v.ramping = s.ramping;
  v.generation = s.generation;
  v.opened_at = s.opened_at;
  v.open_duration = s.open_duration;
  return v;
}

static_assert(std::is_trivially_copyable_v<BreakerState>,
              "the state block is copied and shared as raw bytes");
static_assert(std::is_standard_layout_v<BreakerState>,
              "the state block has one layout for every process that maps it");
inline constexpr std::size_t kMaxBreakerStateBytes = 2448;
static_assert(sizeof(BreakerState) <= kMaxBreakerStateBytes, "the state block grew");

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_STATE_HPP
