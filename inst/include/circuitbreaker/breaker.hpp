// The circuit-breaker state machine.
//
// A call goes through three steps:
//   1. acquire(now): a permit, or a rejection with the time until the next
//      call may be admitted;
//   2. the caller runs its request (outside this class: no user code ever runs
//      under the lock);
//   3. record(permit, outcome, now) or, when the call was interrupted or
//      cancelled, release(permit, now).
// All three are O(1) and never allocate.
//
// A permit is a lease. It carries the generation it was issued in; the
// generation changes on every state transition, so a result that arrives after
// the breaker moved on (a slow call that started before a trip) updates the
// counters only and never moves the state. A half-open probe also holds one of
// at most kMaxHalfOpenCalls slots, with a deadline (half_open_max_wait, else
// the caller's probe_lease, else none); the slot is freed exactly once, by
// record, release, or expiry. A probe still in flight after its deadline is a
// failed probe: the breaker re-opens as of the deadline.
//
// Defaults reproduce the R6 `CircuitBreaker` class from the article this
// package follows: CLOSED until failure_threshold consecutive failures; OPEN
// rejects until *more than* recovery_timeout has passed, then the next call
// (lazily, on acquire) moves it to HALF_OPEN as a probe; the probe's success
// closes and zeroes the failure count, its failure re-opens. failure_count is
// never zeroed by a trip, only by a success (or reset), exactly like the
// class's field.
//
// Where the state lives is the store's business (BasicBreaker<Store>): the
// default Breaker keeps its BreakerState and SpinLock inside itself; an
// ExternalStore points at a block and a lock that live elsewhere (shared
// memory). The rules below are written once, for every store; store.hpp lists
// every hook a store (or a breaker derived from this one) may provide.
#ifndef CIRCUITBREAKER_BREAKER_HPP
#define CIRCUITBREAKER_BREAKER_HPP

#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>

#include "admission.hpp"
#include "bulkhead.hpp"
#include "config.hpp"
#include "health.hpp"
#include "history.hpp"
#include "lock.hpp"
#include "permit.hpp"
#include "probe_slots.hpp"
#include "random.hpp"
#include "rules.hpp"
#include "snapshot.hpp"
#include "state.hpp"
#include "store.hpp"
#include "tally.hpp"
#include "transition_log.hpp"
#include "types.hpp"
#include "window.hpp"

namespace circuitbreaker {

template <typename Store>
class BasicBreaker {
 public:
  using Lock = typename Store::Lock;

  // A new breaker whose store makes its own state block (LocalStore).
  BasicBreaker(const Settings& settings, Nanos now) noexcept : settings_(settings) {
    init(now);
  }

  // A new breaker on a store's block (ExternalStore): (re)initialises the
  // block as of `now`.
  BasicBreaker(Store store, const Settings& settings, Nanos now) noexcept
      : store_(store), settings_(settings) {
    init(now);
  }

  // Attaches to a state block that someone initialised before (another
  // process): nothing in it changes, the jitter generator included.
  struct Attach {};
  BasicBreaker(Attach, Store store, const Settings& settings) noexcept
      : store_(store), settings_(settings) {}

  BasicBreaker(const BasicBreaker&) = delete;
  BasicBreaker& operator=(const BasicBreaker&) = delete;

  const Settings& settings() const noexcept { return settings_; }
  const Store& store() const noexcept { return store_; }

  // A permit or a rejection. A probe issued in HALF_OPEN must settle by
  // now + half_open_max_wait when the configuration sets one, otherwise by
  // now + probe_lease (saturating); probe_lease kNever or negative: no
  // deadline (the call is synchronous and always settles). A probe's slot
  // records `owner` (0: untracked). When half-open is full, the slots whose
  // owner `gone(owner)` reports dead are freed first (counted as released),
  // in the same critical section: the call is decided once, on the slots
  // really taken, and counts as rejected only if it is. (`gone` runs under
  // the lock, and only when half-open is full; store.hpp.)
  //
  // With a bulkhead (max_concurrent), a call the breaker would admit also
  // takes one of its permits, held by `owner`. The breaker decides first (an
  // OPEN breaker rejects as open); a call it would admit is checked against
  // the bulkhead before anything moves: when every permit is held (after
  // freeing those of dead owners, as for probes) it is rejected as Full,
  // counted only as a full rejection, and no state changes (no OPEN ->
  // HALF_OPEN move, no probe slot, no window count).
  template <typename Gone = NobodyGone>
  Admission acquire(Nanos now, Nanos probe_lease = kNever, std::uint32_t owner = 0,
                    Gone gone = Gone{}) noexcept {
    OwnPermits<Gone> permits{*this, owner, gone};
    return admit(now, probe_lease, owner, gone, permits);
  }

  // acquire() for a breaker whose bulkhead's permits are kept outside its
  // block, by `permits` (a fleet breaker's permits, shared by the processes
  // of a host in a host segment: fleet/fleet_bulkhead.hpp). The same
  // decision in the same order: the breaker first, then the bulkhead before
  // anything moves, and a full bulkhead moves nothing here. `permits` has
  //   bool limited()        whether there is a bulkhead at all;
  //   bool room()           takes a permit for this call, or returns false
  //                         (every permit held: it counts the rejection);
  //   void take(Permit& p)  hands the permit room() took to the admitted call;
  //   void unused()         gives it back: the breaker refused the call.
  // They run under this breaker's lock; they may take a lock of their own
  // (never this one), with a bounded wait. Owners and probes are untracked.
  template <typename Permits>
  Admission acquire_with(Nanos now, Nanos probe_lease, Permits& permits) noexcept {
    NobodyGone gone;
    return admit(now, probe_lease, 0, gone, permits);
  }

  // The bulkhead alone, for permits that another breaker's calls hold
  // (acquire_with()'s `permits`: this breaker's block is then their home
  // and its state machine is not used): takes a permit for `owner` into
  // `p` (bulk_slot, bulk_lease) by the rules of acquire(), dead owners'
  // permits freed first when every one is held, or counts a full rejection
  // and returns false. True, and no permit, without a bulkhead.
  template <typename Gone = NobodyGone>
  bool take_bulkhead_permit(Nanos now, Permit& p, std::uint32_t owner = 0,
                            Gone gone = Gone{}) noexcept {
    const Critical section(*this, now, kKeepProbes);
    OwnPermits<Gone> permits{*this, owner, gone};
    if (!permits.limited()) return true;
    if (!permits.room()) return false;
    permits.take(p);
    return true;
  }

  // Gives back the permit take_bulkhead_permit() put in `p`, if its lease
  // still matches (once, as record() and release() free theirs).
  void return_bulkhead_permit(const Permit& p, Nanos now) noexcept {
    const Critical section(*this, now, kKeepProbes);
    free_bulkhead_permit(p);
  }

  // Forgets `owner` as a process using the bulkhead (it closes the breaker);
  // permits it still holds stay until settled.
  void leave(std::uint32_t owner) noexcept {
    LockGuard<Lock> guard(store_.lock());  // pending rejections stay pending
    st().bulkhead.leave(owner);
  }

 private:
  // acquire()'s permits: this block's own bulkhead. room() asks before the
  // breaker decides and take() takes after it admitted, so a call the
  // breaker refuses takes nothing.
  template <typename Gone>
  struct OwnPermits {
    BasicBreaker& b;
    std::uint32_t owner;
    Gone& gone;
    bool limited() const noexcept { return has_bulkhead(b.settings_); }
    bool room() noexcept {
      if (b.bulkhead_has_room(owner, gone)) return true;
      b.st().bulkhead.count_rejection();
      return false;
    }
    void take(Permit& p) noexcept {
      BulkheadPermits& permits = b.st().bulkhead;
      p.bulk_slot = static_cast<std::uint8_t>(permits.take(owner));
      p.bulk_lease = permits.last_lease();
    }
    void unused() noexcept {}
  };

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
    BreakerState& st = store_.state();
    switch (st.state) {
      case State::Closed:  // ramping up
        if (!ramp_admits(st, settings_, now)) return reject(Rejection::RampUp, 0, now);
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

  // Whether the bulkhead has a free permit for `owner` (who joins its
  // members first); when it has none, dead owners' permits and members are
  // dropped (counted as released) and it is asked again.
  template <typename Gone>
  bool bulkhead_has_room(std::uint32_t owner, Gone& gone) noexcept {
    BulkheadPermits& b = st().bulkhead;
    b.join(owner);
    if (b.count() < bulkhead_limit(settings_, b.members())) return true;
    if constexpr (!std::is_same_v<std::decay_t<Gone>, NobodyGone>) {
      st().totals.released += b.free_owned_by(gone);
      b.join(owner);
      return b.count() < bulkhead_limit(settings_, b.members());
    }
    return false;
  }

 public:
  // Settles a permit with the call's outcome. `open_for` >= 0 asks that, if
  // this failure opens the breaker, it stay open at least that long (a
  // server's Retry-After), within max_recovery_timeout (an hour if unset).
  //
  // Returns whether the outcome was recorded: false only for a PassThrough
  // permit (issued while DISABLED), which counts nowhere. Every other permit
  // is recorded, true: a success or failure adds to totals (calls,
  // successes / failures, slow) and the activity history even when it is
  // late (an older generation, or a probe settled before: totals.late), in
  // which case it moves no state; an Ignored outcome adds to totals.ignored
  // only and frees its probe slot. A caller reports a success / failure
  // event exactly when this returns true for a Success / Failure outcome.
  bool record(const Permit& p, Outcome outcome, Nanos now, Nanos open_for = -1) noexcept {
    const Critical section(*this, now, kExpireProbes);
    BreakerState& st = store_.state();
    free_bulkhead_permit(p);
    if (p.kind == PermitKind::PassThrough) return false;
    const bool current = p.generation == st.generation;
    if (outcome == Outcome::Ignored) {
      ++st.totals.ignored;
      if (current) free_probe_slot(p);
      return true;
    }
    const bool failed = outcome == Outcome::Failure;
    const bool slow =
        settings_.slow_tracking && now - p.started_at > settings_.slow_call_duration;
    tally_result(st, failed, slow, now);
    if (!current) {
      ++st.totals.late;
    } else if (p.kind == PermitKind::Counted) {
      closed_result(failed, slow, now, open_for);
    } else if (free_probe_slot(p)) {
      probe_result(failed, slow, now, open_for);
    } else {
      ++st.totals.late;  // settled before (released, or recorded twice)
    }
    return true;
  }

  // Settles a permit whose call was interrupted or cancelled: frees its probe
  // slot, counts nothing but `released`.
  void release(const Permit& p, Nanos now) noexcept {
    const Critical section(*this, now, kExpireProbes);
    BreakerState& st = store_.state();
    free_bulkhead_permit(p);
    if (p.kind == PermitKind::PassThrough) return;
    ++st.totals.released;
    if (p.generation == st.generation) free_probe_slot(p);
  }

  // The R6 class's on_success() / on_failure(), called by hand outside a
  // permit: a success closes from any open state, a failure in OPEN restarts
  // the open timer (the class measures it from the last failure). Returns
  // false (and records nothing) when DISABLED, true otherwise.
  bool note(Outcome outcome, Nanos now) noexcept {
    const Critical section(*this, now, kExpireProbes);
    BreakerState& st = store_.state();
    if (st.state == State::Disabled) return false;
    if (outcome == Outcome::Ignored) {
      ++st.totals.ignored;
      return true;
    }
    const bool failed = outcome == Outcome::Failure;
    tally_result(st, failed, false, now);
    switch (st.state) {
      case State::Closed: closed_result(failed, false, now, -1); break;
      case State::Open:
      case State::HalfOpen:
        if (!failed) {
          close(now);
        } else if (st.state == State::Open) {
          tally_failure(st, now);
          st.opened_at = now;
        } else {
          tally_failure(st, now);
          trip(now, -1);
        }
        break;
      case State::ForcedOpen:
        if (failed) {
          tally_failure(st, now);
        } else {
          st.consecutive_failures = 0;
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
    BreakerState& st = store_.state();
    if (st.state == State::Closed) {
      ++st.generation;  // in-flight results no longer feed the rules
    } else {
      transition(State::Closed, now);
    }
    st.consecutive_failures = 0;
    st.consecutive_opens = 0;
    st.ramping = false;
    clear_windows(st);
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
  // generator is seeded anew (from rng_seed, or from entropy); a window of a
  // different shape starts empty; an open duration follows the new timeouts;
  // a half-open breaker whose probes already met a lowered
  // half_open_max_calls closes (it would otherwise wait forever). Probes in
  // flight keep the deadlines they were given.
  void reconfigure(const Settings& s, Nanos now) noexcept {
    const Critical section(*this, now, kKeepProbes);
    BreakerState& st = store_.state();
    const bool window_changed = window_shape_differs(s, settings_);
    const bool timing_changed = open_timing_differs(s, settings_);
    settings_ = s;
    reseed();
    if (window_changed) clear_windows(st);
    if (timing_changed) {
      st.open_duration = open_duration_for(
          settings_, st.consecutive_opens == 0 ? 1 : st.consecutive_opens,
          st.jitter_factor, st.open_hint);
    }
    if (settings_.ramp_up == 0) st.ramping = false;
    if (st.state == State::HalfOpen &&
        st.probe_successes >= settings_.half_open_max_calls) {
      close(now);
    }
  }

  // A health check's lease (health.hpp): granted while OPEN when no check of
  // this OPEN period started less than health_interval ago; the caller then
  // runs its check (never under the lock) and reports with health_result().
  // `owner` names the holder (a pid; 0: untracked): a dead holder's lease
  // simply runs out with its interval.
  HealthClaim claim_health_check(Nanos now, std::uint32_t owner = 0) noexcept {
    const Critical section(*this, now, kExpireProbes);
    BreakerState& s = st();
    HealthClaim c;
    if (!health_lease_free(s.state, s.generation, s.health_generation, s.health_due_at,
                           now)) {
      if (s.state == State::Open) c.retry_after = s.health_due_at - now;
      return c;
    }
    s.health_generation = s.generation;
    s.health_due_at = saturating_add(now, settings_.health_interval);
    s.health_owner = owner;
    c.granted = true;
    c.generation = s.generation;
    return c;
  }

  // The result of the check a claim_health_check() granted: a pass closes the
  // breaker if it is still in that OPEN period; a failure moves nothing; a
  // result for a period that is over (or for a claim never granted) is late.
  // Returns what was recorded.
  HealthResult health_result(const HealthClaim& c, bool passed, Nanos now) noexcept {
    const Critical section(*this, now, kExpireProbes);
    BreakerState& s = st();
    s.health_last_at = now;
    HealthResult r = HealthResult::Late;
    if (!c.granted || c.generation != s.generation || s.state != State::Open) {
      ++s.health_late;
    } else if (passed) {
      ++s.health_passed;
      close(now);
      s.health_closes |= TransitionLog::entry_bit(s.log.last_seq());
      r = HealthResult::Passed;
    } else {
      ++s.health_failed;
      r = HealthResult::Failed;
    }
    s.health_last_result = r;
    return r;
  }

  // Rejections a store still holds pending count in the totals (history()
  // folds them in).
  Snapshot snapshot(Nanos now) const noexcept {
    LockGuard<Lock> guard(store_.lock());
    Snapshot snap = make_snapshot(store_.state(), settings_, now);
    snap.totals.rejected =
        saturating_count_add(snap.totals.rejected, store_.pending_rejections());
    return snap;
  }

  // The current generation: it changes with every transition (a caller
  // that must act on a transition compares two readings).
  std::uint64_t generation() const noexcept {
    LockGuard<Lock> guard(store_.lock());
    return store_.state().generation;
  }

  std::size_t transitions_since(std::uint64_t after, Transition* out,
                                std::size_t max) const noexcept {
    LockGuard<Lock> guard(store_.lock());
    const BreakerState& s = store_.state();
    const std::size_t n = s.log.since(after, out, max);
    for (std::size_t i = 0; i < n; ++i) {
      out[i].by_health_check =
          (s.health_closes & TransitionLog::entry_bit(out[i].seq)) != 0;
    }
    return n;
  }

  // Activity in the last kHistoryBuckets buckets; `out` holds that many.
  // A store's pending rejections are folded in first, so that they show.
  std::size_t history(Nanos now, ActivityBucket* out) noexcept {
    const Critical section(*this, now, kKeepProbes);
    return std::as_const(store_).state().history.recent(now, out);
  }

 protected:
  // The one preamble of every operation that may write: the store's lock,
  // held for the object's life, then the store's pending rejections folded
  // in as of `now`, then (kExpireProbes) the probes past their deadline
  // failed, as of their deadline. A derived breaker's operations open one
  // too (fleet/fleet_breaker.hpp).
  static constexpr bool kExpireProbes = true, kKeepProbes = false;
  class Critical {
   public:
    Critical(BasicBreaker& b, Nanos now, bool expire) noexcept : guard_(b.store_.lock()) {
      b.absorb_pending(now);
      if (expire) b.expire_probes(now);
    }

   private:
    LockGuard<Lock> guard_;
  };

  // For the operations of a derived breaker, under a Critical section: the
  // state, and the transitions (below) that keep the generation, the log and
  // the probe slots right.
  BreakerState& st() noexcept { return store_.state(); }
  const BreakerState& st() const noexcept { return store_.state(); }

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

  // Frees the bulkhead permit a permit holds, if its lease still matches
  // (whatever the generation: a permit outlives transitions). Returns
  // whether it did.
  bool free_bulkhead_permit(const Permit& p) noexcept {
    return p.bulk_lease != 0 && st().bulkhead.free(p.bulk_slot, p.bulk_lease);
  }

  // To CLOSED: the rules' counts and the window start again (a ramp-up, if
  // configured, starts).
  void close(Nanos now) noexcept {
    BreakerState& s = st();
    transition(State::Closed, now);
    s.consecutive_failures = 0;
    s.consecutive_opens = 0;
    clear_windows(st());
    if (settings_.ramp_up > 0) {
      s.ramping = true;
      s.ramp_started = now;
      s.ramp_credit = 0;
    }
  }

  // Every move between states: logged, a new generation (permits of the old
  // one are late), no probe in flight.
  void transition(State to, Nanos at) noexcept {
    BreakerState& s = st();
    s.log.push(at, s.state, to);
    s.health_closes &= ~TransitionLog::entry_bit(s.log.last_seq());  // an entry reused
    s.state = to;
    ++s.generation;
    s.state_since = at;
    s.probes.clear();
    s.probe_successes = 0;
    s.ramping = false;
  }

 private:
  void init(Nanos now) noexcept {
    LockGuard<Lock> guard(store_.lock());
    BreakerState& s = st();
    s = BreakerState{};
    s.state_since = now;
    s.open_duration = settings_.recovery_timeout;
    reseed();
  }

  void reseed() noexcept {
    st().rng = settings_.rng_seed ? *settings_.rng_seed : entropy_seed();
  }

  Admission grant(PermitKind kind, Nanos now) noexcept {
    return permit_granted(kind, std::as_const(store_).state().generation, now);
  }

  AdmissionView view() const noexcept { return admission_view(store_.state()); }

  // Folds a store's pending rejections (store.hpp) into the totals and the
  // history, as of `now`.
  void absorb_pending(Nanos now) noexcept {
    if (store_.pending_rejections() == 0) return;
    const std::uint64_t n = store_.take_pending_rejections();
    BreakerState& s = st();
    s.totals.rejected = saturating_count_add(s.totals.rejected, n);
    s.history.add_rejection(now, n);
  }

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
      // 2^32 - 1 probes in one half-open period: start the serials over
      // under a new generation, so that no outstanding lease can match again
      // (those probes' results count as late).
      ++s.generation;
      s.probes.clear();
    }
    const Nanos deadline = probe_deadline(settings_, now, probe_lease);
    const std::uint32_t slot = s.probes.take(deadline, owner);
    Admission a = grant(PermitKind::Probe, now);
    a.permit.lease = s.probes.last_lease();
    a.permit.slot = static_cast<std::uint8_t>(slot);
    return a;
  }

  // A probe not settled by its deadline counts as a failed probe, so a lost
  // probe can never leave the breaker stuck in HALF_OPEN. The breaker
  // re-opens as of that deadline, not as of `now`: when the expiry is noticed
  // late, the open period may be over already.
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

  Store store_;
  Settings settings_;
};

// The default breaker: state and lock in this object, in this process.
class Breaker : public BasicBreaker<LocalStore<SpinLock>> {
 public:
  Breaker(const Settings& settings, Nanos now) noexcept : BasicBreaker(settings, now) {}
};

inline constexpr std::size_t kMaxBreakerBytes =
    3496;  // 2600 + the health-check block (56) + the bulkhead block (840)
static_assert(sizeof(Breaker) <= kMaxBreakerBytes, "the breaker grew");

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_BREAKER_HPP
