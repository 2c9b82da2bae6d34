// Health checks: a caller-run check of the dependency, while the breaker is
// OPEN, whose pass closes the breaker before its open period ends.
//
// The rules (one home: this header for the vocabulary and the lease's and
// results' bookkeeping, breaker.hpp's health_result() for the one move, the
// close):
//
//   - The lease. Only while OPEN may a check start, and only one per
//     `health_interval` for the whole store: claim_health_check(now, owner)
//     takes the lease under the breaker's lock (for a host-shared breaker, the
//     segment's lock: one process of the host runs each check; a fleet
//     breaker's local copy grants it only with the fleet's lease in Redis as
//     well, fleet/fleet_handle.hpp). The lease is
//     free when none was taken in this OPEN period (a new generation) or when
//     the last one's interval has passed, so a holder that died (or whose
//     check never returns) holds it for one interval at most.
//   - A pass closes the breaker, as the last successful probe would: counts
//     and backoff reset, ramp-up where set. One pass is enough even when
//     half_open_max_calls asks for several probe successes: a health check is
//     a deliberate check of the whole service, not one sampled call.
//   - A failure (FALSE, anything but TRUE, an error) leaves the breaker as it
//     is: still OPEN, the open timer and the backoff untouched. It is not a
//     failed probe: re-arming the timer would let a check that runs more often
//     than recovery_timeout keep the breaker from ever probing, and the probes
//     stay a second way back.
//   - A result applies only to the OPEN period it was claimed in (the
//     breaker's generation then): a check that returns after the breaker
//     moved (a probe, a reset, a re-opening) counts as late and moves nothing.
#ifndef CIRCUITBREAKER_HEALTH_HPP
#define CIRCUITBREAKER_HEALTH_HPP

#include <cstdint>

#include "config.hpp"
#include "types.hpp"

namespace circuitbreaker {

// The last health check's result, as the state block keeps it.
enum class HealthResult : std::uint8_t {
  None = 0,    // no check has reported yet
  Passed = 1,  // passed and closed the breaker
  Failed = 2,  // failed (or raised an error): the breaker stays OPEN
  Late = 3     // arrived after the breaker had left that OPEN period
};
inline constexpr int kHealthResultCount = 4;

inline const char* health_result_name(HealthResult r) noexcept {
  switch (r) {
    case HealthResult::None: return "none";
    case HealthResult::Passed: return "passed";
    case HealthResult::Failed: return "failed";
    case HealthResult::Late: return "late";
  }
  return "unknown";
}

// What claim_health_check() answers.
struct HealthClaim {
  bool granted = false;          // run the check now, then report with this claim
  std::uint64_t generation = 0;  // the OPEN period the check is for
  // Not granted: until the lease is free (when another caller holds it), or
  // -1 when the breaker is not OPEN (no check is due at all).
  Nanos retry_after = -1;
};

// Whether a health check may start now: OPEN, and no lease of this OPEN
// period whose interval is still running.
inline bool health_lease_free(State state, std::uint64_t generation,
                              std::uint64_t lease_generation, Nanos due_at,
                              Nanos now) noexcept {
  return state == State::Open && (lease_generation != generation || now >= due_at);
}

// A lease's end can be up to a clock reading plus the longest duration.
inline bool health_due_valid(Nanos t) noexcept {
  return t >= 0 && t <= kMaxClockNanos + kMaxDurationNanos;
}

// The bookkeeping below works on the state block's health fields
// (state.hpp's BreakerState, which includes this header: hence templates on
// `Block`), under the breaker's lock, and moves no state.

// claim_health_check(): grants the lease to `owner` (a pid; 0: untracked)
// for `interval` when it is free at `now`; a dead holder's lease simply runs
// out with its interval.
template <typename Block>
HealthClaim claim_health_lease(Block& s, Nanos interval, std::uint32_t owner,
                               Nanos now) noexcept {
  HealthClaim c;
  if (!health_lease_free(s.state, s.generation, s.health_generation, s.health_due_at,
                         now)) {
    if (s.state == State::Open) c.retry_after = s.health_due_at - now;
    return c;
  }
  s.health_generation = s.generation;
  s.health_due_at = saturating_add(now, interval);
  s.health_owner = owner;
  c.granted = true;
  c.generation = s.generation;
  return c;
}

// health_result(): what the result of claim `c` is, counted and kept as
// the last one. Passed only for a pass in the OPEN period the claim was
// granted in (the caller then closes the breaker); a result for a period
// that is over, or for a claim never granted, is Late.
template <typename Block>
HealthResult count_health_result(Block& s, const HealthClaim& c, bool passed,
                                 Nanos now) noexcept {
  HealthResult r = HealthResult::Late;
  if (!c.granted || c.generation != s.generation || s.state != State::Open) {
    ++s.health_late;
  } else if (passed) {
    ++s.health_passed;
    r = HealthResult::Passed;
  } else {
    ++s.health_failed;
    r = HealthResult::Failed;
  }
  s.health_last_at = now;
  s.health_last_result = r;
  return r;
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HEALTH_HPP
