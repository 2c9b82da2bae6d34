// The breaker's rules that change nothing: pure functions of the settings
// and of a const state block. The state machine (breaker.hpp) calls them
// under its lock; keeping them here leaves breaker.hpp with the transitions.
#ifndef CIRCUITBREAKER_RULES_HPP
#define CIRCUITBREAKER_RULES_HPP

#include <cmath>
#include <cstdint>
#include <optional>

#include "bulkhead.hpp"
#include "config.hpp"
#include "random.hpp"
#include "snapshot.hpp"
#include "state.hpp"
#include "types.hpp"
#include "window.hpp"

namespace circuitbreaker {

inline double ratio(std::uint64_t count, std::uint64_t calls) noexcept {
  return static_cast<double>(count) / static_cast<double>(calls);
}

// The failure rate (or slow rate) test: division keeps 3 failures in 10 calls
// >= 0.3 true.
inline bool rate_reached(std::uint64_t count, std::uint64_t calls,
                         double threshold) noexcept {
  return ratio(count, calls) >= threshold;
}

// The factor an open duration is multiplied by (open_duration_for()):
// uniform in (1 - jitter, 1], so that processes and breakers that opened
// together do not all probe at once; 1 without jitter, and then `rng` does
// not move.
inline double draw_jitter_factor(double jitter, std::uint64_t& rng) noexcept {
  return jitter > 0 ? 1 - jitter * uniform01(rng) : 1;
}

// recovery_timeout * backoff_multiplier^(opens - 1), capped, times the
// jitter factor; at least `hint` (within its cap) when one was given.
inline Nanos open_duration_for(const Settings& s, std::uint64_t opens,
                               double jitter_factor, Nanos hint) noexcept {
  const double cap = static_cast<double>(s.max_recovery_timeout);
  double d = static_cast<double>(s.recovery_timeout);
  // d > 0: backoff of a zero timeout stays zero (pow() may overflow to Inf,
  // and 0 * Inf is NaN).
  if (d > 0 && s.backoff_multiplier != 1 && opens > 1) {
    d *= std::pow(s.backoff_multiplier, static_cast<double>(opens - 1));
  }
  if (d > cap) d = cap;
  d *= jitter_factor;
  if (hint >= 0) {
    const double hint_cap = static_cast<double>(s.max_open_hint);
    const double h =
        static_cast<double>(hint) < hint_cap ? static_cast<double>(hint) : hint_cap;
    if (h > d) d = h;
  }
  return static_cast<Nanos>(d + 0.5);
}

// How long a probe may hold its half-open slot: the one rule, for every
// store and every kind of caller.
//   1. half_open_max_wait, when the configuration sets one;
//   2. else `lease`, the bound the holder gives: an asynchronous call's own
//      timeout, or kNever (any negative lease too) for a holder that always
//      settles, so that its probe needs no deadline: a synchronous call (an
//      interrupt releases its permit) in a process whose death the store
//      sees (the host store frees a dead process's slots);
//   3. else, when the holder gives no bound (nullopt) and may never settle,
//      recovery_timeout: an asynchronous call without a timeout, a
//      synchronous call in a process whose death the store cannot see (the
//      host store, another pid namespace), a probe's fleet-wide lease;
//   4. at least `floor`, where a store cannot hold a shorter one: the
//      fleet's lease (fleet/member.hpp's kMinFleetProbeLease) lives in Redis,
//      a round trip and a clock away.
// kNever: no deadline.
inline Nanos probe_hold(const Settings& s, std::optional<Nanos> lease,
                        Nanos floor = 0) noexcept {
  const Nanos hold = s.half_open_max_wait != kNever ? s.half_open_max_wait
                     : lease                        ? *lease
                                                    : s.recovery_timeout;
  if (hold < 0 || hold == kNever) return kNever;
  return hold < floor ? floor : hold;
}

// The deadline of a probe taken at `now` by a caller whose lease is
// `probe_lease` (probe_hold()); kNever (none) for a lease of kNever or a
// negative one. Saturates at kNever.
inline Nanos probe_deadline(const Settings& s, Nanos now, Nanos probe_lease) noexcept {
  const Nanos hold = probe_hold(s, probe_lease);
  return hold == kNever ? kNever : saturating_add(now, hold);
}

inline WindowTotals window_totals(const BreakerState& st, const Settings& s,
                                  Nanos now) noexcept {
  if (s.window_type == WindowType::Count) return st.count_window.totals();
  return st.time_window.totals_at(s.window_bucket, now);
}

// Whether the trip rules of CLOSED say open, as of `now`.
inline bool should_trip(const BreakerState& st, const Settings& s, Nanos now) noexcept {
  if (s.failure_threshold != 0 && st.consecutive_failures >= s.failure_threshold)
    return true;
  if (!s.rate_rule && !s.slow_rule) return false;
  const WindowTotals w = window_totals(st, s, now);
  if (w.calls == 0 || w.calls < s.minimum_calls) return false;
  return (s.rate_rule && rate_reached(w.failures, w.calls, s.failure_rate_threshold)) ||
         (s.slow_rule && rate_reached(w.slow, w.calls, s.slow_call_rate_threshold));
}

inline bool probes_full(const BreakerState& st, const Settings& s) noexcept {
  return st.probes.count() + st.probe_successes >= s.half_open_max_calls;
}

// When every probe slot is taken: until the earliest deadline of a probe in
// flight, or kUnknownWait when none has one.
inline Nanos probe_retry_after(const BreakerState& st, Nanos now) noexcept {
  const Nanos first = st.probes.earliest_deadline();
  if (first == kNever) return kUnknownWait;
  return first > now ? first - now : 0;
}

// Until a call may be admitted, as a snapshot at `now` reports it.
inline Nanos retry_after(const BreakerState& st, const Settings& s, Nanos now) noexcept {
  switch (st.state) {
    case State::Open: {
      const Nanos left = st.opened_at + st.open_duration - now;
      return left > 0 ? left : 0;
    }
    case State::HalfOpen: return probes_full(st, s) ? probe_retry_after(st, now) : 0;
    case State::ForcedOpen: return kNever;
    default: return 0;
  }
}

// `bulkhead`: the permits the store keeps beside the block (nullptr: none).
inline Snapshot make_snapshot(const BreakerState& st, const BulkheadPermits* bulkhead,
                              const Settings& s, Nanos now) noexcept {
  Snapshot r;
  r.state = st.state;
  r.generation = st.generation;
  r.now = now;
  r.state_since = st.state_since;
  r.consecutive_failures = st.consecutive_failures;
  r.has_failure = st.has_failure;
  r.last_failure_at = st.last_failure_at;
  r.totals = st.totals;
  r.window = window_totals(st, s, now);
  if (r.window.calls > 0) {
    r.failure_rate = ratio(r.window.failures, r.window.calls);
    r.slow_rate = ratio(r.window.slow, r.window.calls);
  }
  r.open_duration = st.open_duration;
  r.retry_after = retry_after(st, s, now);
  r.probes_in_flight = st.probes.count();
  r.probe_successes = st.probe_successes;
  r.consecutive_opens = st.consecutive_opens;
  r.ramp_share = 1;
  if (st.ramping && s.ramp_up > 0) {
    const Nanos elapsed = now - st.ramp_started;
    if (elapsed < s.ramp_up) {
      r.ramp_share = static_cast<double>(elapsed) / static_cast<double>(s.ramp_up);
    }
  }
  r.last_transition = st.log.last_seq();
  r.health_passed = st.health_passed;
  r.health_failed = st.health_failed;
  r.health_late = st.health_late;
  r.health_last_result = static_cast<std::uint8_t>(st.health_last_result);
  r.health_last_at = st.health_last_at;
  if (bulkhead != nullptr) {
    r.in_flight = bulkhead->count();
    r.full_rejections = bulkhead->rejected();
    r.bulkhead_members = bulkhead->members();
  }
  r.max_concurrent = bulkhead_limit(s, r.bulkhead_members);
  return r;
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_RULES_HPP
