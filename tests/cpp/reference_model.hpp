// A reference model of the circuit breaker's rules, for differential testing
// of breaker.hpp (see test_reference_model.cpp).
//
// It is written from the specification, not from breaker.hpp, and favours
// being obviously correct over being fast:
//   - the sliding window is a std::vector of every call added since the window
//     was last emptied, with its timestamp; totals are recounted by a loop;
//   - probes in flight are a std::map from lease serial to (slot, deadline);
//   - the transition log is a std::vector of every transition ever made;
//   - the activity history is a std::map from the index of every 5-second
//     bucket that ever saw activity to its counts (nothing is recycled).
// It shares nothing with breaker.hpp, state.hpp, probe_slots.hpp or window.hpp.
// From the core it uses only
// the vocabulary of types.hpp, Config / validate / make_settings of config.hpp
// and uniform01 of random.hpp (so that jitter draws the same numbers).
#ifndef CIRCUITBREAKER_TESTS_REFERENCE_MODEL_HPP
#define CIRCUITBREAKER_TESTS_REFERENCE_MODEL_HPP

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <vector>

#include <circuitbreaker/config.hpp>
#include <circuitbreaker/random.hpp>
#include <circuitbreaker/types.hpp>

namespace cbmodel {

using circuitbreaker::Config;
using circuitbreaker::kNever;
using circuitbreaker::Nanos;
using circuitbreaker::Outcome;
using circuitbreaker::Rejection;
using circuitbreaker::Settings;
using circuitbreaker::State;
using circuitbreaker::WindowType;

enum class Kind { Counted, Probe, PassThrough };

struct Permit {
  Kind kind = Kind::Counted;
  std::uint64_t generation = 0;
  std::uint64_t lease = 0;  // probes only: 1, 2, ... within one half-open period
  std::uint32_t slot = 0;   // probes only
  Nanos started_at = 0;
  std::uint64_t bulk = 0;  // the bulkhead permit held (1, 2, ...); 0: none
};

struct Admission {
  bool permitted = false;
  Permit permit;
  Rejection rejection = Rejection::None;
  Nanos retry_after = 0;
};

struct Counters {
  std::uint64_t calls = 0, successes = 0, failures = 0, slow = 0, ignored = 0,
                rejected = 0, released = 0, late = 0, expired = 0, times_opened = 0;
};

struct WindowCounts {
  std::uint64_t calls = 0, failures = 0, slow = 0;
};

struct Transition {
  std::uint64_t seq = 0;
  Nanos at = 0;
  State from = State::Closed;
  State to = State::Closed;
  bool by_health_check = false;  // a passing health check closed the breaker
};

// A health check's lease, as claim_health() grants it.
struct HealthClaim {
  bool granted = false;
  std::uint64_t generation = 0;
  Nanos retry_after = -1;  // not granted: until the lease is free; -1 not OPEN
};
// What a health check's result did: 1 passed (closed), 2 failed, 3 late.
enum class HealthDone { Passed = 1, Failed = 2, Late = 3 };

// One bucket of the activity history: the calls (recorded results, the same
// ones totals.calls counts), failures, slow calls and rejections whose time
// falls in [index * 5 s, (index + 1) * 5 s).
struct ActivityBucket {
  std::int64_t index = 0;
  std::uint64_t calls = 0, failures = 0, slow = 0, rejected = 0;
};

struct Snapshot {
  State state = State::Closed;
  std::uint64_t generation = 0;
  Nanos now = 0;
  Nanos state_since = 0;
  std::uint64_t consecutive_failures = 0;
  bool has_failure = false;
  Nanos last_failure_at = 0;
  Counters totals;
  WindowCounts window;
  double failure_rate = 0;
  double slow_rate = 0;
  Nanos open_duration = 0;
  Nanos retry_after = 0;
  std::uint32_t probes_in_flight = 0;
  std::uint32_t probe_successes = 0;
  std::uint64_t consecutive_opens = 0;
  double ramp_share = 1;
  std::uint64_t last_transition = 0;
  std::uint64_t health_passed = 0, health_failed = 0, health_late = 0;
  int health_last_result = 0;  // 0: none yet, else a HealthDone
  Nanos health_last_at = 0;
  std::uint32_t in_flight = 0;  // bulkhead permits held
  std::uint32_t max_concurrent = 0;
  std::uint64_t full_rejections = 0;
};

class Model {
 public:
  static constexpr std::size_t kLogCapacity = 32;
  static constexpr std::int64_t kBuckets = 10;
  // The activity history covers the last five minutes in 5-second buckets.
  static constexpr std::int64_t kHistoryBuckets = 60;
  static constexpr Nanos kHistoryWidth = 5 * circuitbreaker::kNanosPerSecond;

  Model(const Config& config, Nanos now) {
    s_ = circuitbreaker::make_settings(config);
    state_since_ = now;
    seed_rng();
    open_duration_ = s_.recovery_timeout;
  }

  const Settings& settings() const { return s_; }

  // ---- the operations -----------------------------------------------------

  // A probe must settle by now + half_open_max_wait if the configuration has
  // one, else by now + probe_lease; kNever or negative: no deadline.
  // With a bulkhead: a call the breaker does not refuse outright (OPEN
  // before its period ends, FORCED_OPEN) is refused as Full when every
  // permit is held, and nothing else happens; an admitted call holds a
  // permit until it is recorded or released.
  Admission acquire(Nanos now, Nanos probe_lease = kNever) {
    expire_probes(now);
    const std::uint32_t limit = bulk_limit();
    if (limit > 0) {
      const bool refused =
          state_ == State::ForcedOpen ||
          (state_ == State::Open && !(now - opened_at_ > open_duration_));
      if (!refused && bulk_.size() >= limit) {
        full_rejections_ += 1;
        Admission a;
        a.rejection = Rejection::Full;
        return a;
      }
    }
    Admission a = decide(now, probe_lease);
    if (a.permitted && limit > 0) {
      a.permit.bulk = ++bulk_serial_;
      bulk_.insert(a.permit.bulk);
    }
    return a;
  }

  // The bulkhead's limit: a count, or a share of one process (the model
  // does not track owners), at least 1.
  std::uint32_t bulk_limit() const {
    if (s_.max_concurrent_share > 0) return 1;
    return s_.max_concurrent;
  }

 private:
  Admission decide(Nanos now, Nanos probe_lease) {
    if (state_ == State::Closed) {
      if (ramping_ && !ramp_admits(now)) return reject(Rejection::RampUp, 0, now);
      return grant(Kind::Counted, now);
    }
    if (state_ == State::Open) {
      if (now - opened_at_ > open_duration_) {
        transition(State::HalfOpen, now);
        return take_probe(now, probe_lease);
      }
      return reject(Rejection::Open, opened_at_ + open_duration_ - now, now);
    }
    if (state_ == State::HalfOpen) return take_probe(now, probe_lease);
    if (state_ == State::ForcedOpen) return reject(Rejection::ForcedOpen, kNever, now);
    return grant(Kind::PassThrough, now);  // Disabled
  }

 public:
  // Returns whether the outcome was recorded: every permit but a
  // pass-through one.
  bool record(const Permit& p, Outcome outcome, Nanos now, Nanos open_for = -1) {
    expire_probes(now);
    bulk_.erase(p.bulk);
    if (p.kind == Kind::PassThrough) return false;
    const bool current = p.generation == generation_;
    if (outcome == Outcome::Ignored) {
      totals_.ignored += 1;
      if (current) free_lease(p);
      return true;
    }
    const bool failed = outcome == Outcome::Failure;
    const bool slow = s_.slow_tracking && (now - p.started_at) > s_.slow_call_duration;
    count(failed, slow, now);
    if (!current) {
      totals_.late += 1;
      return true;
    }
    if (p.kind == Kind::Counted) {
      closed_result(failed, slow, now, open_for);
      return true;
    }
    // A probe of the current generation: the state is HALF_OPEN. One already
    // settled (released, or recorded before) only counts as late.
    if (probes_.count(p.lease) == 0) {
      totals_.late += 1;
      return true;
    }
    free_lease(p);
    if (failed) {
      failure_seen(now);
      trip(now, open_for);
      return true;
    }
    consecutive_failures_ = 0;
    if (slow && s_.slow_rule) {
      trip(now, open_for);
      return true;
    }
    probe_successes_ += 1;
    if (probe_successes_ >= s_.half_open_max_calls) close(now);
    return true;
  }

  void release(const Permit& p, Nanos now) {
    expire_probes(now);
    bulk_.erase(p.bulk);
    if (p.kind == Kind::PassThrough) return;
    totals_.released += 1;
    if (p.generation == generation_) free_lease(p);
  }

  // Returns false when DISABLED (nothing recorded), true otherwise.
  bool note(Outcome outcome, Nanos now) {
    expire_probes(now);
    if (state_ == State::Disabled) return false;
    if (outcome == Outcome::Ignored) {
      totals_.ignored += 1;
      return true;
    }
    const bool failed = outcome == Outcome::Failure;
    count(failed, false, now);
    switch (state_) {
      case State::Closed: closed_result(failed, false, now, -1); break;
      case State::Open:
        if (failed) {
          failure_seen(now);
          opened_at_ = now;
        } else {
          close(now);
        }
        break;
      case State::HalfOpen:
        if (failed) {
          failure_seen(now);
          trip(now, -1);
        } else {
          close(now);
        }
        break;
      case State::ForcedOpen:
        if (failed) {
          failure_seen(now);
        } else {
          consecutive_failures_ = 0;
        }
        break;
      case State::Disabled: break;
    }
    return true;
  }

  void reset(Nanos now) {
    if (state_ == State::Closed) {
      generation_ += 1;
    } else {
      transition(State::Closed, now);
    }
    consecutive_failures_ = 0;
    consecutive_opens_ = 0;
    ramping_ = false;
    window_.clear();
  }

  void force_open(Nanos now) {
    if (state_ != State::ForcedOpen) transition(State::ForcedOpen, now);
  }

  void disable(Nanos now) {
    if (state_ != State::Disabled) transition(State::Disabled, now);
  }

  void reconfigure(const Config& config, Nanos now) {
    const Settings n = circuitbreaker::make_settings(config);
    const bool shape_changed = n.window_type != s_.window_type ||
                               n.window_calls != s_.window_calls ||
                               n.window_bucket != s_.window_bucket;
    const bool timing_changed = n.recovery_timeout != s_.recovery_timeout ||
                                n.backoff_multiplier != s_.backoff_multiplier ||
                                n.max_recovery_timeout != s_.max_recovery_timeout ||
                                n.max_open_hint != s_.max_open_hint;
    s_ = n;
    seed_rng();  // every reconfigure seeds the jitter generator anew
    if (shape_changed) window_.clear();
    if (timing_changed) {
      open_duration_ = duration(std::max<std::uint64_t>(consecutive_opens_, 1),
                                jitter_factor_, open_hint_);
    }
    if (s_.ramp_up == 0) ramping_ = false;
    if (state_ == State::HalfOpen && probe_successes_ >= s_.half_open_max_calls)
      close(now);
  }

  // Health checks: only while OPEN, one lease per health_interval within
  // one OPEN period (a new period frees it at once); a pass closes as the
  // last successful probe would, a failure changes nothing but its count,
  // and a result for a claim of another period (or never granted) is late.
  HealthClaim claim_health(Nanos now) {
    expire_probes(now);
    HealthClaim c;
    if (state_ != State::Open) return c;
    if (health_lease_generation_ == generation_ && now < health_due_) {
      c.retry_after = health_due_ - now;
      return c;
    }
    health_lease_generation_ = generation_;
    health_due_ = s_.health_interval >= kNever - now ? kNever : now + s_.health_interval;
    c.granted = true;
    c.generation = generation_;
    return c;
  }

  HealthDone health_result(const HealthClaim& c, bool passed, Nanos now) {
    expire_probes(now);
    health_last_at_ = now;
    HealthDone d = HealthDone::Late;
    if (!c.granted || c.generation != generation_ || state_ != State::Open) {
      health_late_ += 1;
    } else if (passed) {
      health_passed_ += 1;
      close(now);
      log_.back().by_health_check = true;
      d = HealthDone::Passed;
    } else {
      health_failed_ += 1;
      d = HealthDone::Failed;
    }
    health_last_result_ = static_cast<int>(d);
    return d;
  }

  // ---- observation --------------------------------------------------------

  Snapshot snapshot(Nanos now) const {
    Snapshot r;
    r.state = state_;
    r.generation = generation_;
    r.now = now;
    r.state_since = state_since_;
    r.consecutive_failures = consecutive_failures_;
    r.has_failure = has_failure_;
    r.last_failure_at = last_failure_at_;
    r.totals = totals_;
    r.window = window_counts(now);
    if (r.window.calls == 0) {
      r.failure_rate = std::numeric_limits<double>::quiet_NaN();
      r.slow_rate = std::numeric_limits<double>::quiet_NaN();
    } else {
      r.failure_rate = double(r.window.failures) / double(r.window.calls);
      r.slow_rate = double(r.window.slow) / double(r.window.calls);
    }
    r.open_duration = open_duration_;
    if (state_ == State::Open) {
      r.retry_after = std::max<Nanos>(0, opened_at_ + open_duration_ - now);
    } else if (state_ == State::HalfOpen) {
      r.retry_after = probes_full() ? half_open_retry_after(now) : 0;
    } else if (state_ == State::ForcedOpen) {
      r.retry_after = kNever;
    } else {
      r.retry_after = 0;
    }
    r.probes_in_flight = static_cast<std::uint32_t>(probes_.size());
    r.in_flight = static_cast<std::uint32_t>(bulk_.size());
    r.max_concurrent = bulk_limit();
    r.full_rejections = full_rejections_;
    r.probe_successes = probe_successes_;
    r.consecutive_opens = consecutive_opens_;
    r.ramp_share = 1;
    if (ramping_) {
      const Nanos elapsed = now - ramp_started_;
      if (elapsed < s_.ramp_up) r.ramp_share = double(elapsed) / double(s_.ramp_up);
    }
    r.last_transition = log_.empty() ? 0 : log_.back().seq;
    r.health_passed = health_passed_;
    r.health_failed = health_failed_;
    r.health_late = health_late_;
    r.health_last_result = health_last_result_;
    r.health_last_at = health_last_at_;
    return r;
  }

  // Transitions with seq > after, oldest first; only the last kLogCapacity
  // are kept, and only the newest `max` of those are returned.
  std::vector<Transition> transitions_since(std::uint64_t after, std::size_t max) const {
    std::vector<Transition> kept;
    const std::size_t first_kept =
        log_.size() > kLogCapacity ? log_.size() - kLogCapacity : 0;
    for (std::size_t i = first_kept; i < log_.size(); ++i) {
      if (log_[i].seq > after) kept.push_back(log_[i]);
    }
    if (kept.size() > max)
      kept.erase(kept.begin(), kept.end() - static_cast<std::ptrdiff_t>(max));
    return kept;
  }

  // The buckets of the last kHistoryBuckets (the one holding `now` and the
  // 59 before it, none before time 0) that saw any activity, oldest first.
  // `now` must not be earlier than the last operation's time.
  std::vector<ActivityBucket> history(Nanos now) const {
    std::vector<ActivityBucket> out;
    const std::int64_t k = now / kHistoryWidth;
    const std::int64_t first = std::max<std::int64_t>(0, k - kHistoryBuckets + 1);
    for (auto it = activity_.lower_bound(first); it != activity_.end() && it->first <= k;
         ++it) {
      out.push_back(it->second);
    }
    return out;
  }

  // Exposed for the test harness (to pick interesting clock advances).
  Nanos open_deadline() const { return opened_at_ + open_duration_; }
  Nanos earliest_probe_deadline() const {
    Nanos first = kNever;
    for (const auto& kv : probes_) first = std::min(first, kv.second.deadline);
    return first;
  }
  Nanos ramp_started() const { return ramp_started_; }
  bool ramping() const { return ramping_; }
  State state() const { return state_; }

  // The open duration formula D(k, f, h) of the specification.
  Nanos duration(std::uint64_t k, double f, Nanos h) const {
    double d = double(s_.recovery_timeout);
    if (d > 0 && s_.backoff_multiplier != 1 && k > 1) {
      d *= std::pow(s_.backoff_multiplier, double(k - 1));
    }
    const double cap = double(s_.max_recovery_timeout);
    if (d > cap) d = cap;
    d *= f;
    if (h >= 0) {
      // The caller's hint is capped by max_recovery_timeout, or an hour.
      double hp = double(h);
      const double hint_cap = double(s_.max_open_hint);
      if (hp > hint_cap) hp = hint_cap;
      if (hp > d) d = hp;
    }
    return static_cast<Nanos>(d + 0.5);
  }

 private:
  struct Event {
    Nanos at;
    bool failed;
    bool slow;
  };
  struct Lease {
    std::uint32_t slot;
    Nanos deadline;  // kNever: none
  };

  // The bulkhead: the permits held (by serial), the last serial, and the
  // calls refused because it was full. Transitions never touch it.
  std::set<std::uint64_t> bulk_;
  std::uint64_t bulk_serial_ = 0;
  std::uint64_t full_rejections_ = 0;

  // The harness always gives an rng_seed (the model cannot draw entropy
  // the way the breaker does).
  void seed_rng() { rng_ = s_.rng_seed.value_or(0); }

  // ---- helpers ------------------------------------------------------------

  Admission grant(Kind kind, Nanos now) {
    Admission a;
    a.permitted = true;
    a.permit.kind = kind;
    a.permit.generation = generation_;
    a.permit.started_at = now;
    return a;
  }

  Admission reject(Rejection why, Nanos retry_after, Nanos now) {
    totals_.rejected += 1;
    activity_at(now).rejected += 1;
    Admission a;
    a.permitted = false;
    a.rejection = why;
    if (retry_after == circuitbreaker::kUnknownWait) {
      a.retry_after = retry_after;
    } else {
      a.retry_after = retry_after < 0 ? 0 : retry_after;
    }
    return a;
  }

  bool probes_full() const {
    return probes_.size() + probe_successes_ >= s_.half_open_max_calls;
  }

  // Every slot is taken: until the earliest probe deadline; unknown when no
  // probe has one.
  Nanos half_open_retry_after(Nanos now) const {
    const Nanos first = earliest_probe_deadline();
    if (first == kNever) return circuitbreaker::kUnknownWait;
    return std::max<Nanos>(0, first - now);
  }

  Admission take_probe(Nanos now, Nanos probe_lease) {
    if (probes_full())
      return reject(Rejection::HalfOpenFull, half_open_retry_after(now), now);
    std::uint32_t slot = 0;
    while (slot_taken(slot)) ++slot;
    Nanos lease = s_.half_open_max_wait != kNever ? s_.half_open_max_wait : probe_lease;
    Nanos deadline = kNever;
    if (lease >= 0 && lease != kNever) {
      deadline = (lease > kNever - now) ? kNever : now + lease;
    }
    last_lease_ += 1;
    probes_[last_lease_] = Lease{slot, deadline};
    Admission a = grant(Kind::Probe, now);
    a.permit.lease = last_lease_;
    a.permit.slot = slot;
    return a;
  }

  bool slot_taken(std::uint32_t slot) const {
    for (const auto& kv : probes_) {
      if (kv.second.slot == slot) return true;
    }
    return false;
  }

  void free_lease(const Permit& p) {
    if (p.kind == Kind::Probe) probes_.erase(p.lease);
  }

  // The first probe past its deadline fails and re-opens the breaker as of
  // that deadline.
  void expire_probes(Nanos now) {
    if (state_ != State::HalfOpen) return;
    const Nanos first = earliest_probe_deadline();
    if (first == kNever || now <= first) return;
    totals_.expired += 1;
    failure_seen(first);
    trip(first, -1);
  }

  bool ramp_admits(Nanos now) {
    const Nanos elapsed = now - ramp_started_;
    if (elapsed >= s_.ramp_up) {
      ramping_ = false;
      return true;
    }
    ramp_credit_ += double(elapsed) / double(s_.ramp_up);
    if (ramp_credit_ >= 1) {
      ramp_credit_ -= 1;
      return true;
    }
    return false;
  }

  void count(bool failed, bool slow, Nanos now) {
    ActivityBucket& b = activity_at(now);
    b.calls += 1;
    if (failed) b.failures += 1;
    if (slow) b.slow += 1;
    totals_.calls += 1;
    if (failed) {
      totals_.failures += 1;
    } else {
      totals_.successes += 1;
    }
    if (slow) totals_.slow += 1;
  }

  ActivityBucket& activity_at(Nanos now) {
    const std::int64_t k = now / kHistoryWidth;
    ActivityBucket& b = activity_[k];
    b.index = k;
    return b;
  }

  void failure_seen(Nanos now) {
    consecutive_failures_ += 1;
    has_failure_ = true;
    last_failure_at_ = now;
  }

  void closed_result(bool failed, bool slow, Nanos now, Nanos open_for) {
    window_.push_back(Event{now, failed, slow});
    if (failed) {
      failure_seen(now);
    } else {
      consecutive_failures_ = 0;
    }
    bool trip_now = false;
    if (s_.failure_threshold != 0 && consecutive_failures_ >= s_.failure_threshold) {
      trip_now = true;
    }
    const WindowCounts w = window_counts(now);
    if (w.calls >= s_.minimum_calls) {
      if (s_.rate_rule &&
          double(w.failures) / double(w.calls) >= s_.failure_rate_threshold) {
        trip_now = true;
      }
      if (s_.slow_rule &&
          double(w.slow) / double(w.calls) >= s_.slow_call_rate_threshold) {
        trip_now = true;
      }
    }
    if (trip_now) trip(now, open_for);
  }

  WindowCounts window_counts(Nanos now) const {
    WindowCounts c;
    if (s_.window_type == WindowType::Count) {
      const std::size_t n = window_.size();
      const std::size_t first = n > s_.window_calls ? n - s_.window_calls : 0;
      for (std::size_t i = first; i < n; ++i) add_to(c, window_[i]);
    } else {
      const std::int64_t k_now = now / s_.window_bucket;
      for (const Event& e : window_) {
        const std::int64_t k = e.at / s_.window_bucket;
        if (k > k_now - kBuckets && k <= k_now) add_to(c, e);
      }
    }
    return c;
  }

  static void add_to(WindowCounts& c, const Event& e) {
    c.calls += 1;
    if (e.failed) c.failures += 1;
    if (e.slow) c.slow += 1;
  }

  void transition(State to, Nanos now) {
    Transition t;
    t.seq = log_.empty() ? 1 : log_.back().seq + 1;
    t.at = now;
    t.from = state_;
    t.to = to;
    log_.push_back(t);
    state_ = to;
    generation_ += 1;
    state_since_ = now;
    probes_.clear();
    last_lease_ = 0;  // lease serials restart in each period
    probe_successes_ = 0;
    ramping_ = false;
  }

  void trip(Nanos now, Nanos open_for) {
    transition(State::Open, now);
    opened_at_ = now;
    consecutive_opens_ += 1;
    totals_.times_opened += 1;
    if (s_.jitter > 0) {
      jitter_factor_ = 1 - s_.jitter * circuitbreaker::uniform01(rng_);
    } else {
      jitter_factor_ = 1;
    }
    open_hint_ = open_for;
    open_duration_ = duration(consecutive_opens_, jitter_factor_, open_for);
  }

  void close(Nanos now) {
    transition(State::Closed, now);
    consecutive_failures_ = 0;
    consecutive_opens_ = 0;
    window_.clear();
    if (s_.ramp_up > 0) {
      ramping_ = true;
      ramp_started_ = now;
      ramp_credit_ = 0;
    }
  }

  // ---- state --------------------------------------------------------------

  Settings s_;
  State state_ = State::Closed;
  std::uint64_t generation_ = 1;
  Nanos state_since_ = 0;

  std::uint64_t consecutive_failures_ = 0;
  bool has_failure_ = false;
  Nanos last_failure_at_ = 0;

  Nanos opened_at_ = 0;
  Nanos open_duration_ = 0;
  std::uint64_t consecutive_opens_ = 0;
  double jitter_factor_ = 1;
  Nanos open_hint_ = -1;

  std::map<std::uint64_t, Lease> probes_;  // lease serial -> slot, deadline
  std::uint32_t probe_successes_ = 0;
  std::uint64_t last_lease_ = 0;

  bool ramping_ = false;
  Nanos ramp_started_ = 0;
  double ramp_credit_ = 0;

  // Health checks: the lease (generation 0: none taken) and the counts.
  std::uint64_t health_lease_generation_ = 0;
  Nanos health_due_ = 0;
  std::uint64_t health_passed_ = 0, health_failed_ = 0, health_late_ = 0;
  int health_last_result_ = 0;
  Nanos health_last_at_ = 0;

  std::uint64_t rng_ = 0;
  Counters totals_;
  std::vector<Event> window_;    // every call since the window was emptied
  std::vector<Transition> log_;  // every transition ever made
  std::map<std::int64_t, ActivityBucket> activity_;  // bucket index -> counts
};

}  // namespace cbmodel

#endif  // CIRCUITBREAKER_TESTS_REFERENCE_MODEL_HPP
