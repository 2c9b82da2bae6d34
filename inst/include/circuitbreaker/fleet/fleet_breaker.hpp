// The local copy a fleet member acts on (fleet/member.hpp): a Breaker with the
// two operations only a fleet needs, on the state machine's own transitions
// (breaker.hpp's protected hooks, store.hpp): taking on the state the fleet
// agreed on, and declining a probe the fleet would not lease.
#ifndef CIRCUITBREAKER_FLEET_FLEET_BREAKER_HPP
#define CIRCUITBREAKER_FLEET_FLEET_BREAKER_HPP

#include <cstdint>

#include "../breaker.hpp"
#include "../permit.hpp"
#include "../types.hpp"

namespace circuitbreaker {

class FleetBreaker : public Breaker {
 public:
  FleetBreaker(const Settings& settings, Nanos now) noexcept : Breaker(settings, now) {}

  // Takes on the state a fleet of processes agreed on, if this
  // breaker's generation is still `expected_generation`: the one it had when
  // its report was built. Anything that moved it since (a local trip, a
  // manual command) wins, and is reported next time. Returns whether the
  // view was applied.
  //
  // Only the state and the rules' counts are taken; the totals and history
  // stay this process's own. `failures_at_report` is the local run of
  // failures that the report carried: failures after it are added to the
  // fleet's run, so none is lost between the report and its reply.
  // `last_seq`, when given, receives the transition log's last seq after
  // the adoption (so a caller can tell its own adopted transitions from
  // later local ones).
  bool adopt(const FleetView& v, std::uint64_t expected_generation,
             std::uint64_t failures_at_report, Nanos now,
             std::uint64_t* last_seq = nullptr) noexcept {
    const Critical section(*this, now, kKeepProbes);
    BreakerState& s = st();
    if (s.generation != expected_generation) return false;
    const bool same = s.state == v.state;
    if (same && v.new_generation) {
      ++s.generation;  // a new period of the same state: in-flight results are late
      s.probes.clear();
      s.probe_successes = 0;
      if (v.state == State::Closed) clear_windows(s);
    }
    switch (v.state) {
      case State::Closed: {
        if (!same) close(now);
        const std::uint64_t local = s.consecutive_failures;
        if (!same || v.new_generation) {
          s.consecutive_failures =
              v.consecutive_failures;  // a fresh period: the fleet's run
        } else if (local >= failures_at_report) {
          s.consecutive_failures = v.consecutive_failures + (local - failures_at_report);
        }  // else a success here since the report ended the run: keep ours
        s.consecutive_opens = v.consecutive_opens;
        break;
      }
      case State::Open:
        if (!same) {
          transition(State::Open, now);
          ++s.totals.times_opened;
        }
        s.opened_at = now - (v.open_elapsed > 0 ? v.open_elapsed : 0);
        s.open_duration = v.open_duration > 0 ? v.open_duration : 0;
        s.consecutive_opens = v.consecutive_opens;
        break;
      case State::HalfOpen:
      case State::ForcedOpen:
      case State::Disabled:
        if (!same) transition(v.state, now);
        break;
    }
    if (last_seq != nullptr) *last_seq = s.log.last_seq();
    return true;
  }

  // A probe the fleet would not let go out (every fleet-wide probe lease is
  // taken): its slot and its bulkhead permit (when this block holds it) are
  // freed and the call counts as rejected, half-open full, with
  // `retry_after` as the wait.
  Admission decline_probe(const Permit& p, Nanos retry_after, Nanos now) noexcept {
    const Critical section(*this, now, kKeepProbes);
    free_bulkhead_permit(p);
    if (p.generation == st().generation) free_probe_slot(p);
    return reject(Rejection::HalfOpenFull, retry_after, now);
  }
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_FLEET_FLEET_BREAKER_HPP
