// The circuit-breaker state machine.
//
// A call goes through three steps, each O(1) and without allocation:
//   1. acquire(now): a permit, or a rejection with the time until the next
//      call may be admitted;
//   2. the caller runs its request (outside this class: no user code ever runs
//      under the lock);
//   3. record(permit, outcome, now) or, when the call was interrupted or
//      cancelled, release(permit, now).
//
// A permit is a lease. It carries the generation it was issued in, which
// changes on every transition, so a result that arrives after the breaker
// moved on (a slow call that started before a trip) updates the counters only
// and never moves the state. A half-open probe also holds a slot with a
// deadline, freed exactly once (record, release or expiry); a probe still in
// flight after its deadline is a failed probe, as of the deadline.
//
// Defaults reproduce the R6 `CircuitBreaker` class from the article this
// package follows: CLOSED until failure_threshold consecutive failures; OPEN
// rejects until *more than* recovery_timeout has passed, then the next call
// (lazily, on acquire) moves it to HALF_OPEN as a probe; the probe's success
// closes and zeroes the failure count, its failure re-opens. failure_count is
// never zeroed by a trip, only by a success (or reset), exactly like the
// class's field.
//
// This file holds the transitions and the order of admission, written once
// for every store. The state on its store, the critical section and the reads
// are stored_breaker.hpp's; bulkhead.hpp and health.hpp keep their policies'
// bookkeeping, tally.hpp the counts that move no state, rules.hpp the tests.
// store.hpp lists every hook a store (or a derived breaker) may provide.
#ifndef CIRCUITBREAKER_BREAKER_HPP
#define CIRCUITBREAKER_BREAKER_HPP

#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>

#include "admission.hpp"
#include "bulkhead.hpp"
#include "health.hpp"
#include "leased_slots.hpp"
#include "random.hpp"
#include "rules.hpp"
#include "stored_breaker.hpp"  // the state, the store, the settings, the locks
#include "tally.hpp"
#include "transition_log.hpp"

namespace circuitbreaker {

template <typename Store>
class BasicBreaker : public StoredBreaker<Store> {
  using Base = StoredBreaker<Store>;

 public:
  using Base::Base;  // a new block, or one attached to (stored_breaker.hpp)

  // A permit or a rejection. The order of admission: the breaker decides
  // first (an OPEN breaker rejects as open); a call it would admit is checked
  // against the bulkhead (bulkhead.hpp) before anything moves: with every
  // permit held it is rejected as Full, counted only as a full rejection, and
  // nothing changes (no OPEN -> HALF_OPEN move, no probe slot, no window count).
  //
  // A probe must settle by now + half_open_max_wait when set, otherwise by
  // now + probe_lease (saturating; kNever or negative: no deadline, the call
  // is synchronous). Probe slots and bulkhead permits record `owner` (0:
  // untracked); when they are full, those whose owner `gone(owner)` reports
  // dead are freed first (counted as released) in the same critical section,
  // so the call is decided once, on what is really held. (`gone` runs under
  // the lock, only when full; store.hpp.)
  template <typename Gone = NobodyGone>
  Admission acquire(Nanos now, Nanos probe_lease = kNever, std::uint32_t owner = 0,
                    Gone gone = Gone{}) noexcept {
    BlockPermits permits{this->policy_blocks(), settings_, owner, gone};
    return admit(now, probe_lease, owner, gone, permits);
  }

  // acquire() for a breaker whose bulkhead's permits are kept outside its
  // block, by `permits` (bulkhead.hpp says what they do: a fleet breaker's,
  // shared by the processes of a host in a host segment), in the same order.
  // Owners and probes are untracked.
  template <typename Permits>
  Admission acquire_with(Nanos now, Nanos probe_lease, Permits& permits) noexcept {
    NobodyGone gone;
    return admit(now, probe_lease, 0, gone, permits);
  }

 private:
  // The one admission rule, whichever permits the bulkhead has.
  template <typename Gone, typename Permits>
  Admission admit(Nanos now, Nanos probe_lease, std::uint32_t owner, Gone& gone,
                  Permits& permits) noexcept {
    const Critical section(*this, now, kExpireProbes);
    std::optional<Admission> a = admit_without_writing(view(), now);
    if (a && !a->permitted) {
      tally_rejection(st(), now);
      return *a;
    }
    if (!permits.limited()) return a ? *a : decide(now, probe_lease, owner, gone);
    if (!permits.room()) {
      return call_refused(Rejection::Full, std::as_const(store_).state().state, 0);
    }
    Admission r = a ? *a : decide(now, probe_lease, owner, gone);
    if (r.permitted) {
      permits.take(r.permit);
    } else {
      permits.unused();
    }
    return r;
  }

  // Admission under the lock in the cases admit_without_writing() leaves
  // open: HALF_OPEN, the end of an open period, ramp-up.
  template <typename Gone>
  Admission decide(Nanos now, Nanos probe_lease, std::uint32_t owner,
                   Gone& gone) noexcept {
    BreakerState& s = st();
    switch (s.state) {
      case State::Closed:  // ramping up
        if (!ramp_admits(s, settings_, now)) return reject(Rejection::RampUp, 0, now);
        return grant(PermitKind::Counted, now);
      case State::Open:  // the open period is over
        transition(State::HalfOpen, now);
        return take_probe(now, probe_lease, owner, gone);
      case State::HalfOpen: return take_probe(now, probe_lease, owner, gone);
      case State::ForcedOpen:
      case State::Disabled: break;  // decided above
    }
    return reject(Rejection::Open, 0, now);  // unreachable
  }

 public:
  // Settles a permit with the call's outcome. `open_for` >= 0 asks that, if
  // this failure opens the breaker, it stay open at least that long (a
  // server's Retry-After), within max_recovery_timeout (an hour if unset).
  // Returns whether the outcome was recorded (a caller reports a success or
  // failure event exactly then): false only for a PassThrough permit (issued
  // while DISABLED). A late result (an older generation, or a probe settled
  // before: totals.late) still adds to the totals and the history but moves
  // no state; an Ignored outcome frees its probe slot and adds to
  // totals.ignored only.
  bool record(const Permit& p, Outcome outcome, Nanos now, Nanos open_for = -1) noexcept {
    const Critical section(*this, now, kExpireProbes);
    BreakerState& s = st();
    free_bulkhead_permit(p);
    if (p.kind == PermitKind::PassThrough) return false;
    const bool current = p.generation == s.generation;
    if (outcome == Outcome::Ignored) {
      ++s.totals.ignored;
      if (current) free_probe_slot(p);
      return true;
    }
    const bool failed = outcome == Outcome::Failure;
    const bool slow =
        settings_.slow_tracking && now - p.started_at > settings_.slow_call_duration;
    tally_result(s, failed, slow, now);
    if (!current) {
      ++s.totals.late;
    } else if (p.kind == PermitKind::Counted) {
      closed_result(failed, slow, now, open_for);
    } else if (free_probe_slot(p)) {
      probe_result(failed, slow, now, open_for);
    } else {
      ++s.totals.late;  // settled before (released, or recorded twice)
    }
    return true;
  }

  // Settles a permit whose call was interrupted or cancelled: frees its probe
  // slot, counts nothing but `released`.
  void release(const Permit& p, Nanos now) noexcept {
    const Critical section(*this, now, kExpireProbes);
    BreakerState& s = st();
    free_bulkhead_permit(p);
    if (p.kind == PermitKind::PassThrough) return;
    ++s.totals.released;
    if (p.generation == s.generation) free_probe_slot(p);
  }

  // The R6 class's on_success() / on_failure(), called by hand outside a
  // permit: a success closes from any open state, a failure in OPEN restarts
  // the open timer (the class measures it from the last failure). Returns
  // false (and records nothing) when DISABLED, true otherwise.
  bool note(Outcome outcome, Nanos now) noexcept {
    const Critical section(*this, now, kExpireProbes);
    BreakerState& s = st();
    if (s.state == State::Disabled) return false;
    if (outcome == Outcome::Ignored) {
      ++s.totals.ignored;
      return true;
    }
    const bool failed = outcome == Outcome::Failure;
    tally_result(s, failed, false, now);
    switch (s.state) {
      case State::Closed: closed_result(failed, false, now, -1); break;
      case State::Open:
      case State::HalfOpen:
        if (!failed) {
          close(now);
        } else if (s.state == State::Open) {
          tally_failure(s, now);
          s.opened_at = now;
        } else {
          tally_failure(s, now);
          trip(now, -1);
        }
        break;
      case State::ForcedOpen:
        if (failed) {
          tally_failure(s, now);
        } else {
          s.consecutive_failures = 0;
        }
        break;
      case State::Disabled: break;
    }
    return true;
  }

  // Back to CLOSED with the rules' state cleared (counters are history and
  // stay). Outstanding permits become stale.
  void reset(Nanos now) noexcept {
    const Critical section(*this, now, kKeepProbes);
    BreakerState& s = st();
    if (s.state == State::Closed) {
      ++s.generation;  // in-flight results no longer feed the rules
    } else {
      transition(State::Closed, now);
    }
    s.consecutive_failures = 0;
    s.consecutive_opens = 0;
    s.ramping = false;
    clear_windows(s);
  }

  // Rejects every call until reset().
  void force_open(Nanos now) noexcept {
    const Critical section(*this, now, kKeepProbes);
    if (store_.state().state != State::ForcedOpen) transition(State::ForcedOpen, now);
  }

  // Admits every call and records nothing until reset().
  void disable(Nanos now) noexcept {
    const Critical section(*this, now, kKeepProbes);
    if (store_.state().state != State::Disabled) transition(State::Disabled, now);
  }

  // Applies a new (validated) configuration, keeping the state. The jitter
  // generator is seeded anew; a window of a different shape starts empty; an
  // open duration follows the new timeouts; a half-open breaker whose probes
  // already met a lowered half_open_max_calls closes (it would otherwise wait
  // forever). Probes in flight keep their deadlines.
  void reconfigure(const Settings& next, Nanos now) noexcept {
    const Critical section(*this, now, kKeepProbes);
    BreakerState& s = st();
    const bool window_changed = window_shape_differs(next, settings_);
    const bool timing_changed = open_timing_differs(next, settings_);
    Base::set_settings(next);
    reseed();
    if (window_changed) clear_windows(s);
    if (timing_changed) {
      s.open_duration =
          open_duration_for(settings_, s.consecutive_opens == 0 ? 1 : s.consecutive_opens,
                            s.jitter_factor, s.open_hint);
    }
    if (settings_.ramp_up == 0) s.ramping = false;
    if (s.state == State::HalfOpen &&
        s.probe_successes >= settings_.half_open_max_calls) {
      close(now);
    }
  }

  // A health check's lease for `owner` (a pid; 0: untracked; health.hpp);
  // the caller runs its check, never under the lock, then health_result().
  HealthClaim claim_health_check(Nanos now, std::uint32_t owner = 0) noexcept {
    const Critical section(*this, now, kExpireProbes);
    return claim_health_lease(st(), settings_.health_interval, owner, now);
  }

  // The result of the check a claim_health_check() granted, counted
  // (health.hpp's count_health_result()); a pass in the claim's OPEN period
  // closes the breaker, and the log says why. Returns what was recorded.
  HealthResult health_result(const HealthClaim& c, bool passed, Nanos now) noexcept {
    const Critical section(*this, now, kExpireProbes);
    const HealthResult r = count_health_result(st(), c, passed, now);
    if (r == HealthResult::Passed) close(now, TransitionReason::HealthCheck);
    return r;
  }

 protected:
  // The one preamble of every operation that may write: stored_breaker.hpp's
  // section (the store's lock, its pending rejections folded in), then
  // (kExpireProbes) the probes past their deadline failed, as of it. A derived
  // breaker's operations open one too (fleet/fleet_breaker.hpp).
  static constexpr bool kExpireProbes = true, kKeepProbes = false;
  class Critical {
   public:
    Critical(BasicBreaker& b, Nanos now, bool expire) noexcept : section_(b, now) {
      if (expire) b.expire_probes(now);
    }

   private:
    typename Base::Section section_;
  };
  using Base::reseed;
  using Base::settings_;
  using Base::st;
  using Base::store_;

  // A rejection, counted.
  Admission reject(Rejection why, Nanos retry_after, Nanos now) noexcept {
    tally_rejection(st(), now);
    return call_refused(why, std::as_const(store_).state().state, retry_after);
  }

  // Frees the probe slot a permit of the current generation holds, if the
  // lease is still the one the slot was given for. Returns whether it did.
  bool free_probe_slot(const Permit& p) noexcept {
    return p.kind == PermitKind::Probe && st().probes.free(p.slot, p.lease);
  }

  // Frees the bulkhead permit a permit holds; returns whether it did.
  bool free_bulkhead_permit(const Permit& p) noexcept {
    BulkheadPermits* b = p.bulk_lease != 0 ? store_.bulkhead() : nullptr;
    return b != nullptr && b->give_back(p);
  }

  // To CLOSED: the rules' counts and the window start again (a ramp-up, if
  // configured, starts).
  void close(Nanos now, TransitionReason why = TransitionReason::Rules) noexcept {
    BreakerState& s = st();
    transition(State::Closed, now, why);
    s.consecutive_failures = 0;
    s.consecutive_opens = 0;
    clear_windows(st());
    if (settings_.ramp_up > 0) {
      s.ramping = true;
      s.ramp_started = now;
      s.ramp_credit = 0;
    }
  }

  // Every move between states: logged with its reason, a new generation
  // (permits of the old one are late), no probe in flight.
  void transition(State to, Nanos at,
                  TransitionReason why = TransitionReason::Rules) noexcept {
    BreakerState& s = st();
    s.log.push(at, s.state, to, why);
    s.state = to;
    ++s.generation;
    s.state_since = at;
    s.probes.clear();
    s.probe_successes = 0;
    s.ramping = false;
  }

 private:
  Admission grant(PermitKind kind, Nanos now) noexcept {
    return permit_granted(kind, std::as_const(store_).state().generation, now);
  }

  AdmissionView view() const noexcept { return admission_view(store_.state()); }

  template <typename Gone>
  Admission take_probe(Nanos now, Nanos probe_lease, std::uint32_t owner,
                       Gone& gone) noexcept {
    BreakerState& s = st();
    if constexpr (!std::is_same_v<std::decay_t<Gone>, NobodyGone>) {
      if (probes_full(s, settings_)) s.totals.released += s.probes.free_owned_by(gone);
    }
    if (probes_full(s, settings_)) {
      return reject(Rejection::HalfOpenFull, probe_retry_after(s, now), now);
    }
    if (s.probes.leases_exhausted()) {
      // 2^32 - 1 probes in one half-open period: the serials start over under
      // a new generation, so no outstanding lease matches (those are late).
      ++s.generation;
      s.probes.clear();
    }
    Admission a = grant(PermitKind::Probe, now);
    s.probes.take(a.permit, probe_deadline(settings_, now, probe_lease), owner);
    return a;
  }

  // A probe not settled by its deadline is a failed probe, so a lost probe
  // never leaves the breaker stuck in HALF_OPEN. It re-opens as of the
  // deadline, not `now`: noticed late, the open period may be over already.
  void expire_probes(Nanos now) noexcept {
    const BreakerState& seen = std::as_const(store_).state();  // reading writes nothing
    Nanos deadline = 0;
    if (seen.state != State::HalfOpen || !seen.probes.expired(now, &deadline)) return;
    ++st().totals.expired;
    tally_failure(st(), deadline);
    trip(deadline, -1);
  }

  void closed_result(bool failed, bool slow, Nanos now, Nanos open_for) noexcept {
    BreakerState& s = st();
    tally_window(s, settings_, failed, slow, now);
    if (failed) {
      tally_failure(s, now);
    } else {
      s.consecutive_failures = 0;
    }
    if (should_trip(s, settings_, now)) trip(now, open_for);
  }

  void probe_result(bool failed, bool slow, Nanos now, Nanos open_for) noexcept {
    BreakerState& s = st();
    if (failed) {
      tally_failure(st(), now);
      trip(now, open_for);
      return;
    }
    s.consecutive_failures = 0;
    if (slow && settings_.slow_rule) {  // healthy but still too slow
      trip(now, open_for);
      return;
    }
    if (++s.probe_successes >= settings_.half_open_max_calls) close(now);
  }

  void trip(Nanos at, Nanos open_for) noexcept {
    BreakerState& s = st();
    transition(State::Open, at);
    s.opened_at = at;
    ++s.consecutive_opens;
    ++s.totals.times_opened;
    s.jitter_factor = draw_jitter_factor(settings_.jitter, s.rng);
    s.open_hint = open_for;
    s.open_duration =
        open_duration_for(settings_, s.consecutive_opens, s.jitter_factor, open_for);
  }
};

// The default breaker: state and lock in this object, in this process.
class Breaker : public BasicBreaker<LocalStore<SpinLock>> {
 public:
  Breaker(const Settings& settings, Nanos now) noexcept : BasicBreaker(settings, now) {}
};

inline constexpr std::size_t kMaxBreakerBytes =
    2712;  // the state block (kMaxBreakerStateBytes), its lock, the settings and
           // the pointer to the bulkhead's permits (800 bytes more with one)
static_assert(sizeof(Breaker) <= kMaxBreakerBytes, "the breaker grew");

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_BREAKER_HPP
