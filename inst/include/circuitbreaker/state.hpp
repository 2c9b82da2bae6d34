// The mutable state of one breaker: a flat block of fixed size (counters,
// timestamps, fixed-capacity arrays; no pointers, no heap, trivially
// copyable), so that it can live in shared memory and be copied as a whole.
#ifndef CIRCUITBREAKER_STATE_HPP
#define CIRCUITBREAKER_STATE_HPP

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "health.hpp"
#include "history.hpp"
#include "permit.hpp"
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

  // --- Health checks (health.hpp). One block, kept at the end. ---
  // The lease: no check may start before health_due_at in the OPEN period
  // of generation health_generation (0: no lease taken yet); its holder's
  // owner id (a pid for the host store; 0: untracked).
  Nanos health_due_at = 0;
  std::uint64_t health_generation = 0;
  // The last result reported (HealthResult) and when.
  Nanos health_last_at = 0;
  std::uint64_t health_passed = 0;  // checks that passed and closed the breaker
  std::uint64_t health_failed = 0;  // checks that failed or raised an error
  std::uint64_t health_late = 0;    // results for an OPEN period that was over
  std::uint32_t health_owner = 0;
  HealthResult health_last_result = HealthResult::None;
  std::uint8_t health_unused_[3] = {};  // explicit, so that nothing is padding
  // The bulkhead's permits are not in the block: a store keeps them beside
  // it, for a breaker that has a bulkhead (store.hpp's bulkhead()).
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

// The byte behind a bool of a block read from shared memory, which may hold
// any value: reading a bool that is neither 0 nor 1 is undefined behaviour,
// so such a field is looked at as a byte first.
inline std::uint8_t bool_byte(const bool& b) noexcept {
  std::uint8_t x;
  std::memcpy(&x, &b, 1);
  return x;
}

inline bool time_valid(Nanos t) noexcept { return t >= 0 && t <= kMaxClockNanos; }
inline bool duration_valid(Nanos d) noexcept { return d >= 0 && d <= kMaxDurationNanos; }

// Whether a state block can be run by the state machine with `settings`
// without an index, loop bound or enum out of range and without an
// arithmetic overflow: the rule a block read from shared memory must pass
// before use (host/segment_layout.hpp checks it under the lock, when the working copy
// is made, and when attaching). It looks at the few indices, enums, bools,
// times and factors, and the transition log's 64 state bytes: a few dozen
// comparisons, never the windows' or history's arrays of counts (any count
// there is safe to use). Every block the state machine writes passes it.
inline bool valid(const BreakerState& s, std::uint32_t count_capacity, Nanos bucket_width,
                  std::uint32_t max_probes) noexcept {
  return state_valid(s.state) && bool_byte(s.has_failure) <= 1 &&
         bool_byte(s.ramping) <= 1 && time_valid(s.state_since) &&
         time_valid(s.last_failure_at) && time_valid(s.opened_at) &&
         duration_valid(s.open_duration) && s.open_hint >= -1 &&
         time_valid(s.ramp_started) && std::isfinite(s.jitter_factor) &&
         s.jitter_factor >= 0 && s.jitter_factor <= 1 && std::isfinite(s.ramp_credit) &&
         s.ramp_credit >= 0 && s.ramp_credit < 2 && s.probes.valid() &&
         s.probes.count() <= max_probes && s.count_window.valid(count_capacity) &&
         s.time_window.valid(bucket_width) && s.log.valid() && s.history.valid() &&
         health_due_valid(s.health_due_at) && time_valid(s.health_last_at) &&
         static_cast<int>(s.health_last_result) < kHealthResultCount;
}
inline bool valid(const BreakerState& s, const Settings& settings) noexcept {
  const bool count = settings.window_type == WindowType::Count;
  return valid(s, count ? settings.window_calls : 0, count ? 0 : settings.window_bucket,
               settings.half_open_max_calls);
}
// The same without settings (listing a store): windows of any size, any
// number of probes.
inline bool valid(const BreakerState& s) noexcept {
  return valid(s, 0, 0, ProbeSlots::kCapacity);
}

// The admission fields of a block that another process may be writing
// (host/segment_layout.hpp's lock-free read), checked as valid() checks them: false when
// any is out of range, and then `out` is unchanged.
inline bool checked_admission_view(const BreakerState& s, AdmissionView& out) noexcept {
  AdmissionView v;
  v.state = s.state;
  const std::uint8_t ramping = bool_byte(s.ramping);
  v.generation = s.generation;
  v.opened_at = s.opened_at;
  v.open_duration = s.open_duration;
  if (!state_valid(v.state) || ramping > 1 || !time_valid(v.opened_at) ||
      !duration_valid(v.open_duration)) {
    return false;
  }
  v.ramping = ramping != 0;
  out = v;
  return true;
}

static_assert(std::is_trivially_copyable_v<BreakerState>,
              "the state block is copied and shared as raw bytes");
static_assert(std::is_standard_layout_v<BreakerState>,
              "the state block has one layout for every process that maps it");
inline constexpr std::size_t kMaxBreakerStateBytes =
    2536;  // with the health-check block (56); the bulkhead's 800 are beside it
static_assert(sizeof(BreakerState) <= kMaxBreakerStateBytes, "the state block grew");

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_STATE_HPP
