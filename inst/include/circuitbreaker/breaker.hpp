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
// at most kMaxHalfOpenCalls slots; the slot is freed exactly once, by record,
// release, or expiry after half_open_max_wait.
//
// Defaults reproduce the seed document's R6 class: CLOSED until
// failure_threshold consecutive failures; OPEN rejects until *more than*
// recovery_timeout has passed, then the next call (lazily, on acquire) moves
// it to HALF_OPEN as a probe; the probe's success closes and zeroes the
// failure count, its failure re-opens. failure_count is never zeroed by a
// trip, only by a success (or reset), exactly like the seed's field.
#ifndef CIRCUITBREAKER_BREAKER_HPP
#define CIRCUITBREAKER_BREAKER_HPP

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "config.hpp"
#include "history.hpp"
#include "random.hpp"
#include "spinlock.hpp"
#include "types.hpp"
#include "window.hpp"

namespace circuitbreaker {

enum class PermitKind : std::uint8_t {
  Counted = 0,     // issued in CLOSED: its result feeds the trip rules
  Probe = 1,       // issued in HALF_OPEN: holds a probe slot
  PassThrough = 2  // issued while DISABLED: its result is not recorded
};

inline constexpr std::uint8_t kNoSlot = 0xff;

struct Permit {
  std::uint64_t generation = 0;
  std::uint64_t lease = 0;  // serial of a probe's lease; 0 for other permits
  Nanos started_at = 0;
  std::uint8_t slot = kNoSlot;
  PermitKind kind = PermitKind::Counted;
};

struct Admission {
  bool permitted = false;
  Permit permit;
  Rejection rejection = Rejection::None;
  Nanos retry_after = 0;  // when rejected: time until a call may be admitted
};

// Cumulative counts since creation; never reset (reset() zeroes the rules'
// state, not history). `calls` counts recorded results: rejected, released
// and ignored calls are not calls.
struct Counters {
  std::uint64_t calls = 0;
  std::uint64_t successes = 0;
  std::uint64_t failures = 0;
  std::uint64_t slow = 0;
  std::uint64_t ignored = 0;
  std::uint64_t rejected = 0;
  std::uint64_t released = 0;
  std::uint64_t late = 0;     // results of an older generation
  std::uint64_t expired = 0;  // probes not settled within half_open_max_wait
  std::uint64_t times_opened = 0;
};

struct Transition {
  std::uint64_t seq = 0;  // 1, 2, 3, ... over the breaker's life
  Nanos at = 0;
  State from = State::Closed;
  State to = State::Closed;
};

// A bounded history of transitions, for events and for plotting.
class TransitionLog {
 public:
  static constexpr std::size_t kCapacity = 32;

  void push(Nanos at, State from, State to) noexcept {
    Transition& t = ring_[last_seq_ % kCapacity];
    t = Transition{++last_seq_, at, from, to};
  }
  std::uint64_t last_seq() const noexcept { return last_seq_; }

  // Copies the transitions with seq > `after`, oldest first, into `out`
  // (at most `max` of them, the newest kept when more are available).
  std::size_t since(std::uint64_t after, Transition* out,
                    std::size_t max) const noexcept {
    if (after >= last_seq_) return 0;  // also keeps after + 1 from wrapping
    std::uint64_t first = after + 1;
    const std::uint64_t oldest_kept =
        last_seq_ > kCapacity ? last_seq_ - kCapacity + 1 : 1;
    if (first < oldest_kept) first = oldest_kept;
    if (last_seq_ >= first && last_seq_ - first + 1 > max) {
      first = last_seq_ - max + 1;
    }
    std::size_t n = 0;
    for (std::uint64_t s = first; s <= last_seq_; ++s) {
      out[n++] = ring_[(s - 1) % kCapacity];
    }
    return n;
  }

 private:
  Transition ring_[kCapacity] = {};
  std::uint64_t last_seq_ = 0;
};

// Everything a caller may want to show or export, read under one lock.
struct Snapshot {
  State state = State::Closed;
  std::uint64_t generation = 0;
  Nanos now = 0;
  Nanos state_since = 0;
  std::uint64_t consecutive_failures = 0;  // the seed's failure_count
  bool has_failure = false;
  Nanos last_failure_at = 0;
  Counters totals;
  WindowTotals window;
  double failure_rate = std::numeric_limits<double>::quiet_NaN();
  double slow_rate = std::numeric_limits<double>::quiet_NaN();
  Nanos open_duration = 0;  // of the current or, when not open, the last opening
  Nanos retry_after = 0;    // until the next probe may be admitted
  std::uint32_t probes_in_flight = 0;
  std::uint32_t probe_successes = 0;
  std::uint64_t consecutive_opens = 0;
  double ramp_share = 1;  // share of calls admitted (ramp-up after closing)
  std::uint64_t last_transition = 0;
};

// The mutable state of one breaker: a flat block of fixed size (counters,
// timestamps, fixed-capacity arrays; no pointers, no heap), so that it could
// live in shared memory.
struct BreakerState {
  State state = State::Closed;
  std::uint64_t generation = 1;
  Nanos state_since = 0;

  std::uint64_t consecutive_failures = 0;
  bool has_failure = false;
  Nanos last_failure_at = 0;

  Nanos opened_at = 0;
  Nanos open_duration = 0;
  std::uint64_t consecutive_opens = 0;  // re-opens since the last close
  double jitter_factor = 1;
  Nanos open_hint = -1;  // an opening's duration asked for by the caller

  std::uint32_t probe_mask = 0;  // bit i: slot i holds a probe in flight
  std::uint32_t probe_successes = 0;
  std::uint64_t lease_serial = 0;
  std::uint64_t probe_lease[kMaxHalfOpenCalls] = {};
  Nanos probe_started[kMaxHalfOpenCalls] = {};

  bool ramping = false;
  Nanos ramp_started = 0;
  double ramp_credit = 0;

  std::uint64_t rng = 0;
  Counters totals;
  CountWindow count_window;
  TimeWindow time_window;
  TransitionLog log;
  ActivityHistory history;
};

class Breaker {
 public:
  Breaker(const Settings& settings, Nanos now) noexcept : settings_(settings) {
    st_.state_since = now;
    st_.rng = settings.seed;
    st_.open_duration = settings.recovery_timeout;
  }
  Breaker(const Breaker&) = delete;
  Breaker& operator=(const Breaker&) = delete;

  const Settings& settings() const noexcept { return settings_; }

  Admission acquire(Nanos now) noexcept {
    SpinGuard guard(lock_);
    expire_probes(now);
    switch (st_.state) {
      case State::Closed:
        if (st_.ramping && !ramp_admits(now)) return reject(Rejection::RampUp, 0, now);
        return grant(PermitKind::Counted, now);
      case State::Open:
        if (now - st_.opened_at > st_.open_duration) {
          transition(State::HalfOpen, now);
          return take_probe(now);
        }
        return reject(Rejection::Open, st_.opened_at + st_.open_duration - now, now);
      case State::HalfOpen:
        return take_probe(now);
      case State::ForcedOpen:
        return reject(Rejection::ForcedOpen, kNever, now);
      case State::Disabled:
        return grant(PermitKind::PassThrough, now);
    }
    return reject(Rejection::Open, 0, now);  // unreachable
  }

  // Settles a permit with the call's outcome. `open_for` >= 0 asks that, if
  // this failure opens the breaker, it stay open at least that long (a
  // server's Retry-After), within max_recovery_timeout (an hour if unset).
  void record(const Permit& p, Outcome outcome, Nanos now,
              Nanos open_for = -1) noexcept {
    SpinGuard guard(lock_);
    expire_probes(now);
    if (p.kind == PermitKind::PassThrough) return;
    const bool current = p.generation == st_.generation;
    if (outcome == Outcome::Ignored) {
      ++st_.totals.ignored;
      if (current) free_probe_slot(p);
      return;
    }
    const bool failed = outcome == Outcome::Failure;
    const bool slow = settings_.slow_tracking &&
                      now - p.started_at > settings_.slow_call_duration;
    count_result(failed, slow, now);
    if (!current) {
      ++st_.totals.late;
      return;
    }
    if (p.kind == PermitKind::Counted) {
      closed_result(failed, slow, now, open_for);
    } else if (free_probe_slot(p)) {
      probe_result(failed, slow, now, open_for);
    } else {
      ++st_.totals.late;  // settled before (released, or recorded twice)
    }
  }

  // Settles a permit whose call was interrupted or cancelled: frees its probe
  // slot, counts nothing but `released`.
  void release(const Permit& p, Nanos now) noexcept {
    SpinGuard guard(lock_);
    expire_probes(now);
    if (p.kind == PermitKind::PassThrough) return;
    ++st_.totals.released;
    if (p.generation == st_.generation) free_probe_slot(p);
  }

  // The seed's on_success() / on_failure(), called by hand outside a permit:
  // a success closes from any open state, a failure in OPEN restarts the open
  // timer (the seed measures it from the last failure).
  void note(Outcome outcome, Nanos now) noexcept {
    SpinGuard guard(lock_);
    expire_probes(now);
    if (st_.state == State::Disabled) return;
    if (outcome == Outcome::Ignored) {
      ++st_.totals.ignored;
      return;
    }
    const bool failed = outcome == Outcome::Failure;
    count_result(failed, false, now);
    switch (st_.state) {
      case State::Closed:
        closed_result(failed, false, now, -1);
        break;
      case State::Open:
      case State::HalfOpen:
        if (failed) {
          note_failure(now);
          if (st_.state == State::Open) {
            st_.opened_at = now;
          } else {
            trip(now, -1);
          }
        } else {
          close(now);
        }
        break;
      case State::ForcedOpen:
        if (failed) note_failure(now); else st_.consecutive_failures = 0;
        break;
      case State::Disabled:
        break;
    }
  }

  // Back to CLOSED with the rules' state cleared (counters are history and
  // stay). Outstanding permits become stale.
  void reset(Nanos now) noexcept {
    SpinGuard guard(lock_);
    if (st_.state == State::Closed) {
      ++st_.generation;  // in-flight results no longer feed the rules
    } else {
      transition(State::Closed, now);
    }
    st_.consecutive_failures = 0;
    st_.consecutive_opens = 0;
    st_.ramping = false;
    clear_window();
  }

  // Rejects every call until reset().
  void force_open(Nanos now) noexcept {
    SpinGuard guard(lock_);
    if (st_.state != State::ForcedOpen) transition(State::ForcedOpen, now);
  }

  // Admits every call and records nothing until reset().
  void disable(Nanos now) noexcept {
    SpinGuard guard(lock_);
    if (st_.state != State::Disabled) transition(State::Disabled, now);
  }

  // Applies a new (validated) configuration, keeping the state. A window of a
  // different shape starts empty; an open duration follows the new timeouts;
  // a half-open breaker whose probes already met a lowered
  // half_open_max_calls closes (it would otherwise wait forever).
  void reconfigure(const Settings& s, Nanos now) noexcept {
    SpinGuard guard(lock_);
    const bool window_changed = s.window_type != settings_.window_type ||
                                s.window_calls != settings_.window_calls ||
                                s.window_bucket != settings_.window_bucket;
    const bool timing_changed =
        s.recovery_timeout != settings_.recovery_timeout ||
        s.backoff_multiplier != settings_.backoff_multiplier ||
        s.max_recovery_timeout != settings_.max_recovery_timeout ||
        s.max_open_hint != settings_.max_open_hint;
    settings_ = s;
    if (window_changed) clear_window();
    if (timing_changed) {
      st_.open_duration = open_duration_for(
          st_.consecutive_opens == 0 ? 1 : st_.consecutive_opens,
          st_.jitter_factor, st_.open_hint);
    }
    if (settings_.ramp_up == 0) st_.ramping = false;
    if (st_.state == State::HalfOpen &&
        st_.probe_successes >= settings_.half_open_max_calls) {
      close(now);
    }
  }

  Snapshot snapshot(Nanos now) const noexcept {
    SpinGuard guard(lock_);
    Snapshot s;
    s.state = st_.state;
    s.generation = st_.generation;
    s.now = now;
    s.state_since = st_.state_since;
    s.consecutive_failures = st_.consecutive_failures;
    s.has_failure = st_.has_failure;
    s.last_failure_at = st_.last_failure_at;
    s.totals = st_.totals;
    s.window = window_totals(now);
    if (s.window.calls > 0) {
      s.failure_rate = ratio(s.window.failures, s.window.calls);
      s.slow_rate = ratio(s.window.slow, s.window.calls);
    }
    s.open_duration = st_.open_duration;
    switch (st_.state) {
      case State::Open: {
        const Nanos left = st_.opened_at + st_.open_duration - now;
        s.retry_after = left > 0 ? left : 0;
        break;
      }
      case State::HalfOpen:
        s.retry_after = probes_full() ? probe_retry_after(now) : 0;
        break;
      case State::ForcedOpen:
        s.retry_after = kNever;
        break;
      default:
        s.retry_after = 0;
    }
    s.probes_in_flight = popcount(st_.probe_mask);
    s.probe_successes = st_.probe_successes;
    s.consecutive_opens = st_.consecutive_opens;
    s.ramp_share = 1;
    if (st_.ramping && settings_.ramp_up > 0) {
      const Nanos elapsed = now - st_.ramp_started;
      if (elapsed < settings_.ramp_up) {
        s.ramp_share = static_cast<double>(elapsed) /
                       static_cast<double>(settings_.ramp_up);
      }
    }
    s.last_transition = st_.log.last_seq();
    return s;
  }

  std::size_t transitions_since(std::uint64_t after, Transition* out,
                                std::size_t max) const noexcept {
    SpinGuard guard(lock_);
    return st_.log.since(after, out, max);
  }

  // Activity in the last kHistoryBuckets buckets; `out` holds that many.
  std::size_t history(Nanos now, ActivityBucket* out) const noexcept {
    SpinGuard guard(lock_);
    return st_.history.recent(now, out);
  }

  // The failure rate (or slow rate) test shared by the state machine and its
  // tests: division keeps 3 failures in 10 calls >= 0.3 true.
  static bool rate_reached(std::uint64_t count, std::uint64_t calls,
                           double threshold) noexcept {
    return ratio(count, calls) >= threshold;
  }

 private:
  static double ratio(std::uint64_t count, std::uint64_t calls) noexcept {
    return static_cast<double>(count) / static_cast<double>(calls);
  }
  static std::uint32_t popcount(std::uint32_t x) noexcept {
    std::uint32_t n = 0;
    for (; x; x &= x - 1) ++n;
    return n;
  }
  static std::uint32_t lowest_clear_bit(std::uint32_t x) noexcept {
    std::uint32_t i = 0;
    while (x & (std::uint32_t{1} << i)) ++i;
    return i;
  }

  Admission grant(PermitKind kind, Nanos now) noexcept {
    Admission a;
    a.permitted = true;
    a.permit.generation = st_.generation;
    a.permit.started_at = now;
    a.permit.kind = kind;
    return a;
  }

  Admission reject(Rejection why, Nanos retry_after, Nanos now) noexcept {
    ++st_.totals.rejected;
    st_.history.add_rejection(now);
    Admission a;
    a.rejection = why;
    a.retry_after = retry_after > 0 ? retry_after : 0;
    return a;
  }

  bool probes_full() const noexcept {
    return popcount(st_.probe_mask) + st_.probe_successes >=
           settings_.half_open_max_calls;
  }

  // Until the oldest probe in flight expires, if probes expire at all.
  Nanos probe_retry_after(Nanos now) const noexcept {
    if (settings_.half_open_max_wait == kNever || st_.probe_mask == 0) return 0;
    Nanos first = kNever;
    for (std::uint32_t i = 0; i < kMaxHalfOpenCalls; ++i) {
      if ((st_.probe_mask >> i) & 1u) {
        const Nanos at = st_.probe_started[i] + settings_.half_open_max_wait - now;
        if (at < first) first = at;
      }
    }
    return first > 0 ? first : 0;
  }

  Admission take_probe(Nanos now) noexcept {
    if (probes_full()) return reject(Rejection::HalfOpenFull, probe_retry_after(now), now);
    const std::uint32_t slot = lowest_clear_bit(st_.probe_mask);
    st_.probe_mask |= std::uint32_t{1} << slot;
    st_.probe_lease[slot] = ++st_.lease_serial;
    st_.probe_started[slot] = now;
    Admission a = grant(PermitKind::Probe, now);
    a.permit.lease = st_.lease_serial;
    a.permit.slot = static_cast<std::uint8_t>(slot);
    return a;
  }

  // Frees the probe slot a permit of the current generation holds, if the
  // lease is still the one the slot was given for. Returns whether it did:
  // a permit settled twice frees nothing the second time.
  bool free_probe_slot(const Permit& p) noexcept {
    if (p.kind != PermitKind::Probe || p.slot >= kMaxHalfOpenCalls) return false;
    const std::uint32_t bit = std::uint32_t{1} << p.slot;
    if ((st_.probe_mask & bit) && st_.probe_lease[p.slot] == p.lease) {
      st_.probe_mask &= ~bit;
      return true;
    }
    return false;
  }

  // A probe not settled within half_open_max_wait counts as a failed probe,
  // so a lost probe can never leave the breaker stuck in HALF_OPEN.
  void expire_probes(Nanos now) noexcept {
    if (st_.state != State::HalfOpen || st_.probe_mask == 0 ||
        settings_.half_open_max_wait == kNever) {
      return;
    }
    for (std::uint32_t i = 0; i < kMaxHalfOpenCalls; ++i) {
      if (((st_.probe_mask >> i) & 1u) &&
          now - st_.probe_started[i] > settings_.half_open_max_wait) {
        ++st_.totals.expired;
        note_failure(now);
        trip(now, -1);
        return;
      }
    }
  }

  bool ramp_admits(Nanos now) noexcept {
    const Nanos elapsed = now - st_.ramp_started;
    if (elapsed >= settings_.ramp_up) {
      st_.ramping = false;
      return true;
    }
    // Error diffusion: over any run of calls, the admitted share follows the
    // ramp, deterministically.
    st_.ramp_credit += static_cast<double>(elapsed) /
                       static_cast<double>(settings_.ramp_up);
    if (st_.ramp_credit >= 1) {
      st_.ramp_credit -= 1;
      return true;
    }
    return false;
  }

  void count_result(bool failed, bool slow, Nanos now) noexcept {
    st_.history.add_result(now, failed, slow);
    ++st_.totals.calls;
    if (failed) ++st_.totals.failures; else ++st_.totals.successes;
    if (slow) ++st_.totals.slow;
  }

  void note_failure(Nanos now) noexcept {
    ++st_.consecutive_failures;
    st_.has_failure = true;
    st_.last_failure_at = now;
  }

  void closed_result(bool failed, bool slow, Nanos now, Nanos open_for) noexcept {
    if (settings_.window_type == WindowType::Count) {
      st_.count_window.add(settings_.window_calls, failed, slow);
    } else {
      st_.time_window.add(settings_.window_bucket, now, failed, slow);
    }
    if (failed) note_failure(now); else st_.consecutive_failures = 0;
    if (should_trip(now)) trip(now, open_for);
  }

  void probe_result(bool failed, bool slow, Nanos now, Nanos open_for) noexcept {
    if (failed) {
      note_failure(now);
      trip(now, open_for);
      return;
    }
    st_.consecutive_failures = 0;
    if (slow && settings_.slow_rule) {  // healthy but still too slow
      trip(now, open_for);
      return;
    }
    if (++st_.probe_successes >= settings_.half_open_max_calls) close(now);
  }

  WindowTotals window_totals(Nanos now) const noexcept {
    if (settings_.window_type == WindowType::Count) return st_.count_window.totals();
    return st_.time_window.totals_at(settings_.window_bucket, now);
  }

  bool should_trip(Nanos now) const noexcept {
    if (settings_.failure_threshold != 0 &&
        st_.consecutive_failures >= settings_.failure_threshold) {
      return true;
    }
    if (!settings_.rate_rule && !settings_.slow_rule) return false;
    const WindowTotals w = window_totals(now);
    if (w.calls == 0 || w.calls < settings_.minimum_calls) return false;
    return (settings_.rate_rule &&
            rate_reached(w.failures, w.calls, settings_.failure_rate_threshold)) ||
           (settings_.slow_rule &&
            rate_reached(w.slow, w.calls, settings_.slow_call_rate_threshold));
  }

  // recovery_timeout * backoff_multiplier^(opens - 1), capped, times the
  // jitter factor; at least `hint` (within the cap) when one was given.
  Nanos open_duration_for(std::uint64_t opens, double jitter_factor,
                          Nanos hint) const noexcept {
    const double cap = static_cast<double>(settings_.max_recovery_timeout);
    double d = static_cast<double>(settings_.recovery_timeout);
    // d > 0: backoff of a zero timeout stays zero (pow() may overflow to Inf,
    // and 0 * Inf is NaN).
    if (d > 0 && settings_.backoff_multiplier != 1 && opens > 1) {
      d *= std::pow(settings_.backoff_multiplier, static_cast<double>(opens - 1));
    }
    if (d > cap) d = cap;
    d *= jitter_factor;
    if (hint >= 0) {
      const double hint_cap = static_cast<double>(settings_.max_open_hint);
      const double h = static_cast<double>(hint) < hint_cap ? static_cast<double>(hint) : hint_cap;
      if (h > d) d = h;
    }
    return static_cast<Nanos>(d + 0.5);
  }

  void trip(Nanos now, Nanos open_for) noexcept {
    transition(State::Open, now);
    st_.opened_at = now;
    ++st_.consecutive_opens;
    ++st_.totals.times_opened;
    st_.jitter_factor =
        settings_.jitter > 0 ? 1 - settings_.jitter * uniform01(st_.rng) : 1;
    st_.open_hint = open_for;
    st_.open_duration =
        open_duration_for(st_.consecutive_opens, st_.jitter_factor, open_for);
  }

  void close(Nanos now) noexcept {
    transition(State::Closed, now);
    st_.consecutive_failures = 0;
    st_.consecutive_opens = 0;
    clear_window();
    if (settings_.ramp_up > 0) {
      st_.ramping = true;
      st_.ramp_started = now;
      st_.ramp_credit = 0;
    }
  }

  void clear_window() noexcept {
    st_.count_window.clear();
    st_.time_window.clear();
  }

  void transition(State to, Nanos now) noexcept {
    st_.log.push(now, st_.state, to);
    st_.state = to;
    ++st_.generation;
    st_.state_since = now;
    st_.probe_mask = 0;
    st_.probe_successes = 0;
    st_.ramping = false;
  }

  Settings settings_;
  BreakerState st_;
  mutable SpinLock lock_;
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_BREAKER_HPP
