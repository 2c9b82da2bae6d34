// One breaker of a fleet, as one process holds it: a local copy (a Breaker
// in this process) that every call acts on, plus what this process reports
// to the fleet's store and takes back from it. The transport (fleet/sync.hpp)
// moves FleetReports and FleetReplies; the rules of the exchange live here
// and in the store's script (script.hpp).
//
// Threads: the caller's thread (R's) calls the Breaker (it has its own
// lock), confirm_probe(), probe_settled() and command(); the sync thread
// calls build() and apply(). Member fields are under `mutex_`; the hot path
// (acquire and record in CLOSED and OPEN) never takes it.
#ifndef CIRCUITBREAKER_FLEET_MEMBER_HPP
#define CIRCUITBREAKER_FLEET_MEMBER_HPP

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../config_identity.hpp"
#include "../random.hpp"
#include "fleet_breaker.hpp"
#include "protocol.hpp"

namespace circuitbreaker {

// The shortest probe lease the fleet's store holds (probe_hold()'s floor):
// the lease is taken a round trip away and expires by the store's clock, so
// a shorter one could lapse before the probe it guards has started.
inline constexpr Nanos kMinFleetProbeLease = kNanosPerSecond;

class FleetMember {
 public:
  // `id_prefix` makes report ids unique across processes (a random token).
  FleetMember(std::string name, std::string key, const Config& config, Nanos now,
              std::string id_prefix)
      : name_(std::move(name)),
        key_(std::move(key)),
        values_(config_values(config)),
        fingerprint_(config_fingerprint(values_)),
        rules_(fleet_rules(make_settings(config))),
        id_prefix_(std::move(id_prefix)),
        breaker_(make_settings(config), now),
        rng_(entropy_seed()),
        token_rng_(entropy_seed()) {}

  FleetMember(const FleetMember&) = delete;
  FleetMember& operator=(const FleetMember&) = delete;

  FleetBreaker& breaker() noexcept { return breaker_; }
  const FleetBreaker& breaker() const noexcept { return breaker_; }
  const std::string& name() const noexcept { return name_; }
  const std::string& key() const noexcept { return key_; }
  const std::string& fingerprint() const noexcept { return fingerprint_; }
  const std::string& rules() const noexcept { return rules_; }

  // --- The caller's thread -------------------------------------------------

  // A random token for a lease this process takes (a probe's, a health
  // check's): what the lease key holds, so that its holder is known.
  std::string new_token() { return random_hex(token_rng_, 32); }

  // A probe the local copy admitted goes out only with a fleet-wide lease.
  // `lease(token, lease_ms)` asks the store (on a live connection, bounded
  // by the transport's timeout) and returns the script's reply, or nullopt
  // when the store cannot be reached: then the probe goes out on local rules
  // (the transport's mode says "local"), and its outcome is reported to the
  // fleet when the link returns (probe_settled()). Any other reply that is
  // not a lease ("full", "state", "absent": the fleet has no state yet and
  // the next sync rebuilds it, "busy": the connection stayed in use) holds
  // this process's probes back for a while. Returns the admission to use:
  // `a` itself, or a rejection (half-open full).
  template <typename Lease>
  Admission confirm_probe(const Admission& a, Nanos now, Nanos hold, Lease&& lease) {
    const Nanos denied = denied_until_.load(std::memory_order_relaxed);
    if (now < denied) return breaker_.decline_probe(a.permit, denied - now, now);
    // A lease in Redis outlives this process: its holder may never settle.
    const std::int64_t lease_ms =
        nanos_to_ms(probe_hold(breaker_.settings(), std::nullopt, kMinFleetProbeLease));
    const std::string token = new_token();
    {
      std::lock_guard<std::mutex> g(mutex_);
      leasing_ = true;  // apply() does not judge generations meanwhile
    }
    const std::optional<std::vector<std::string>> r = lease(token, lease_ms);
    {
      std::lock_guard<std::mutex> g(mutex_);
      leasing_ = false;
      if (r && r->size() == 3 && (*r)[0] == "probe") {
        learn_generation(std::strtoull((*r)[1].c_str(), nullptr, 10), now);
      }
    }
    if (!r) {
      // Redis cannot be reached: a probe on local rules, in the open period
      // of the generation this process last knew.
      if (a.permit.slot < kMaxHalfOpenCalls) {
        ProbeToken& t = tokens_[a.permit.slot];
        std::lock_guard<std::mutex> g(mutex_);
        t.token.clear();
        t.fleet_slot.clear();
        t.generation = std::to_string(known_ ? known_generation_ : 0);
        t.lease = a.permit.lease;
        t.local = known_;  // never heard from the fleet: nothing to report
        t.active = known_;
      }
      return a;
    }
    const std::vector<std::string>& v = *r;
    if (!v.empty() && v[0] == "probe" && v.size() == 3 &&
        a.permit.slot < kMaxHalfOpenCalls) {
      ProbeToken& t = tokens_[a.permit.slot];
      t.token = token;
      t.fleet_slot = v[2];
      t.generation = v[1];
      t.lease = a.permit.lease;
      t.local = false;
      t.active = true;
      return a;
    }
    // Not this call: hold further probes back for a while (a round trip per
    // call while the fleet's probes are out would cost what we save).
    Nanos wait = hold;
    if (v.size() == 3 && v[0] == "full") {
      const std::int64_t ms = std::strtoll(v[2].c_str(), nullptr, 10);
      if (ms >= 0 && ms_to_nanos(ms) < wait) wait = ms_to_nanos(ms);
    }
    denied_until_.store(now + wait, std::memory_order_relaxed);
    const Admission refused = breaker_.decline_probe(a.permit, wait, now);
    if (v.size() == 7 && v[0] == "state") adopt_state_reply(v, now);
    return refused;
  }

  // After a probe's outcome (`failed`, or a success; or its release) was
  // recorded locally: tells the fleet, in the next sync. A leased probe goes
  // as "slot:token:generation:s|f|i:open_ms;" (the script counts it once, by
  // its token); a probe sent on local rules as "L<generation>/s|f/open_ms;"
  // (the generation it was sent in the open period of; the script counts it
  // once, with the report's id). The outcome is the probe's own, by the
  // core's rule (a failure, or a success too slow under the slow-call rule,
  // re-opens), not read back from the local copy's state: a sync may have
  // moved the copy while the probe ran (the link came back, and the fleet
  // said OPEN), and then a success would read as a failure. Returns whether
  // there is something to send (the caller wakes the sync thread).
  bool probe_settled(const Permit& p, bool released, Nanos now, bool failed = false) {
    std::lock_guard<std::mutex> g(mutex_);
    return queue_probe_outcome(p, released, now, failed);
  }

  // Records a probe's outcome on the local copy (`record_locally()`, whose
  // result is returned) and queues it for the fleet (probe_settled(), whose
  // answer goes to `*to_send`) as one step under mutex_, so that the sync
  // thread builds no report in between. Such a report would carry the state
  // after the probe (closed, say) without the probe's outcome, in the
  // generation the probe's own transition started: the fleet, still
  // half-open as it has not heard of the probe, answers half-open, adopt()'s
  // generation fence lets that answer through, and the local copy goes back
  // to half-open until the next sync (the [any-breaker] fleet
  // flake; test_fleet.cpp's "no report is built between a probe's outcome
  // and its queueing").
  template <typename Record>
  auto settle_probe(const Permit& p, bool released, Nanos now, bool failed,
                    Record&& record_locally, bool* to_send) {
    std::lock_guard<std::mutex> g(mutex_);
    auto result = record_locally();
    *to_send = queue_probe_outcome(p, released, now, failed);
    return result;
  }

  // Manual control for the whole fleet (the local copy has moved already).
  void command(FleetCommand c) {
    std::lock_guard<std::mutex> g(mutex_);
    command_ = c;
    denied_until_.store(0, std::memory_order_relaxed);
  }

  // --- The sync thread -----------------------------------------------------

  // Whether this breaker has something to tell the fleet (the sync thread
  // sends a report for it in the next sync): it never heard from the fleet
  // (a registration not yet through), a report waits to be confirmed (a
  // retry, counted once by its id), it counted calls or rejections since its
  // last report, a probe settled, a manual command waits, or its local copy
  // moved on its own (a local trip). An idle breaker has nothing, and costs
  // Redis nothing: what others do reaches it by pub/sub (wanted()).
  bool has_news(Nanos now) const {
    std::lock_guard<std::mutex> g(mutex_);
    if (!known_ || pending_ || command_ != FleetCommand::None || !probes_.empty()) {
      return true;
    }
    const Snapshot snap = breaker_.snapshot(now);
    const Counters d = counters_minus(snap.totals, baseline_);
    return d.calls || d.rejected || snap.last_transition != last_seq_;
  }

  // Asks the sync thread to read this breaker's fleet state in its next
  // sync (another process moved it: its transition was published; or the
  // events channel was (re)subscribed, and what was published meanwhile is
  // lost). take_wanted() clears the request as the sync takes it.
  void want() noexcept { wanted_.store(true, std::memory_order_relaxed); }
  bool take_wanted() noexcept {
    return wanted_.exchange(false, std::memory_order_relaxed);
  }

  // This breaker's report for the next sync. A report not yet confirmed is
  // sent again with the same id and counts; its state fields are fresh.
  FleetReport build(Nanos now) {
    std::lock_guard<std::mutex> g(mutex_);
    const Snapshot snap = breaker_.snapshot(now);
    if (!pending_) {
      FleetReport r;
      if (stale_) {
        // Counts of a generation the fleet has left (learn_generation()):
        // alone, as that generation's; commands and probes wait for the
        // next report, of the current one.
        r.delta = counters_minus(stale_->totals, baseline_);
        baseline_ = stale_->totals;
        pending_generation_ = stale_->generation;
        stale_.reset();
      } else {
        r.delta = counters_minus(snap.totals, baseline_);
        baseline_ = snap.totals;
        r.command = command_;
        command_ = FleetCommand::None;
        r.probes.swap(probes_);
      }
      if (r.delta.calls || r.delta.rejected || r.command != FleetCommand::None ||
          !r.probes.empty()) {
        r.id = id_prefix_ + '.' + std::to_string(++serial_);
      }
      pending_ = r;
    }
    Transition seen[TransitionLog::kCapacity];
    const std::size_t n =
        breaker_.transitions_since(last_seq_, seen, TransitionLog::kCapacity);
    for (std::size_t i = 0; i < n; ++i) {
      if (seen[i].to == State::Open) tripped_ = true;
    }
    last_seq_ = snap.last_transition;
    FleetReport r = *pending_;
    r.known_generation =
        pending_generation_ ? *pending_generation_ : (known_ ? known_generation_ : 0);
    r.consecutive_failures = snap.consecutive_failures;
    r.state = snap.state;
    r.tripped = tripped_ && snap.state == State::Open;
    if (snap.state == State::Open) {
      r.open_ms = nanos_to_ms(snap.open_duration);
      r.open_elapsed_ms = nanos_to_ms(snap.open_duration - snap.retry_after);
    }
    r.consecutive_opens = snap.consecutive_opens;
    r.jitter_factor = draw_jitter_factor(breaker_.settings().jitter, rng_);
    r.built_generation = snap.generation;
    r.built_failures = snap.consecutive_failures;
    return r;
  }

  // The fleet's reply to report `sent` (from build()): the report is
  // confirmed, and the local copy takes the fleet's state unless it moved
  // since that build. Two threads may sync one member at once (the sync
  // thread, and a caller's flush), so a reply confirms the pending report
  // only when it answers that one: a late reply to an older report never
  // drops a newer one.
  void apply(const FleetReply& reply, Nanos now, const FleetReport& sent) {
    std::lock_guard<std::mutex> g(mutex_);
    if (pending_ && pending_->id == sent.id) {
      pending_.reset();
      pending_generation_.reset();
      tripped_ = false;
    }
    if (reply.config_differs) {
      fleet_config_ = reply.fleet_config;
      return;
    }
    // A probe lease is out (confirm_probe()), on another connection: Redis
    // may have run it before this report, moving the fleet from OPEN to
    // HALF_OPEN in a new generation, and this reply may carry that
    // generation before the caller's thread has taken the lease's reply.
    // Judged against known_generation_, that half-open period would look
    // new: adopt() would start it again, and the probe leased in it would be
    // late (the [any-breaker] fleet flake). The reply is not
    // adopted (the next sync's is), and known_generation_ stays what the
    // lease's reply sets.
    if (leasing_) {
      fleet_calls_ = reply.fleet_calls;
      fleet_failures_ = reply.fleet_failures;
      return;
    }
    const FleetView v = view_of(reply);
    std::uint64_t seq = 0;
    if (breaker_.adopt(v, sent.built_generation, sent.built_failures, now, &seq)) {
      last_seq_ = seq;
    }
    if (v.new_generation || reply.state == State::Closed) {
      denied_until_.store(0, std::memory_order_relaxed);
    }
    learn_generation(reply.generation, now);
    fleet_calls_ = reply.fleet_calls;
    fleet_failures_ = reply.fleet_failures;
  }

  struct Status {
    bool known = false;
    std::uint64_t generation = 0, fleet_calls = 0, fleet_failures = 0;
    std::string fleet_config;  // non-empty: the fleet has another configuration
  };
  Status status() const {
    std::lock_guard<std::mutex> g(mutex_);
    return {known_, known_generation_, fleet_calls_, fleet_failures_, fleet_config_};
  }

  // Whether the fleet keeps this breaker with another configuration, and
  // then the index (in kConfigFields) of the first argument that differs, or
  // -1 when none can be named.
  // `given` and `stored` get that argument's value as this process gave it
  // and as the fleet keeps it (config_difference()).
  bool config_conflict(int* field, std::string* given = nullptr,
                       std::string* stored = nullptr) const {
    const std::string theirs = status().fleet_config;
    if (theirs.empty()) return false;
    ConfigDifference d = config_difference(values_, read_config_fingerprint(theirs));
    *field = d.field;
    if (*field >= 0 && given != nullptr && stored != nullptr) {
      *given = std::move(d.given);
      *stored = std::move(d.stored);
    }
    return true;
  }

 private:
  struct ProbeToken {
    std::string token, fleet_slot, generation;
    std::uint32_t lease = 0;
    bool local = false;  // sent on local rules, without a lease
    bool active = false;
  };

  // probe_settled()'s work, under mutex_ (held by the caller).
  bool queue_probe_outcome(const Permit& p, bool released, Nanos now, bool failed) {
    if (p.kind != PermitKind::Probe || p.slot >= kMaxHalfOpenCalls) return false;
    ProbeToken& t = tokens_[p.slot];
    if (!t.active || t.lease != p.lease) return false;
    t.active = false;
    const Settings& s = breaker_.settings();
    const bool too_slow =
        s.slow_rule && s.slow_tracking && now - p.started_at > s.slow_call_duration;
    char outcome = 's';
    std::int64_t open_ms = -1;
    if (released) {
      outcome = 'i';
    } else if (failed || too_slow) {
      outcome = 'f';
      const Snapshot snap = breaker_.snapshot(now);
      if (snap.state == State::Open) open_ms = nanos_to_ms(snap.open_duration);
    }
    if (t.local) {
      if (released) return false;  // a local probe holds no lease to free
      probes_ += 'L' + t.generation + '/' + outcome + '/' + std::to_string(open_ms) + ';';
      return true;
    }
    probes_ += t.fleet_slot + ':' + t.token + ':' + t.generation + ':' + outcome + ':' +
               std::to_string(open_ms) + ';';
    return true;
  }

  // A reply as the core takes it (under mutex_: "new" is against the
  // generation this process knew).
  FleetView view_of(const FleetReply& r) const noexcept {
    FleetView v;
    v.state = r.state;
    v.new_generation = known_ && r.generation != known_generation_;
    v.open_elapsed = ms_to_nanos(r.open_elapsed_ms);
    v.open_duration = ms_to_nanos(r.open_ms);
    v.consecutive_opens = r.consecutive_opens;
    v.consecutive_failures = r.consecutive_failures;
    return v;
  }

  // The lease script's {'state', g, s, elapsed, od, o, cf}: the fleet is not
  // half-open (a sync had not told us yet).
  void adopt_state_reply(const std::vector<std::string>& v, Nanos now) {
    FleetReply r;
    if (!r.parse_text("ok," + v[1] + ',' + v[2] + ',' + v[3] + ',' + v[4] + ',' + v[5] +
                      ',' + v[6] + ",0,0")) {
      return;
    }
    std::lock_guard<std::mutex> g(mutex_);
    const FleetView fv = view_of(r);
    const Snapshot snap = breaker_.snapshot(now);
    std::uint64_t seq = 0;
    if (breaker_.adopt(fv, snap.generation, snap.consecutive_failures, now, &seq)) {
      last_seq_ = seq;
    }
    learn_generation(r.generation, now);
  }

  // The fleet is in generation `g` (a reply said so; under mutex_). Counts
  // not reported yet (and an unanswered report's) were made in the one known
  // until now: when the fleet has moved on, they go as that generation's (the
  // script adds them to the totals only). As the new one's, failures made
  // while cut off from Redis would count toward the new period's trip rules.
  void learn_generation(std::uint64_t g, Nanos now) {
    if (known_ && g != known_generation_) {
      if (pending_ && !pending_generation_) pending_generation_ = known_generation_;
      const Counters totals = breaker_.snapshot(now).totals;
      const Counters unreported = counters_minus(totals, baseline_);
      if (!stale_ && (unreported.calls || unreported.rejected)) {
        stale_ = StaleCounts{totals, known_generation_};
      }
    }
    known_generation_ = g;
    known_ = true;
  }

  const std::string name_, key_;
  const ConfigValues values_;
  const std::string fingerprint_, rules_, id_prefix_;
  FleetBreaker breaker_;
  std::uint64_t rng_;                   // jitter factors: the sync thread
  std::uint64_t token_rng_;             // lease tokens: the caller's thread
  std::atomic<Nanos> denied_until_{0};  // no probe lease is asked for before this
  std::atomic<bool> wanted_{false};     // read the fleet's state in the next sync
  std::array<ProbeToken, kMaxHalfOpenCalls> tokens_{};  // the caller's thread only

  mutable std::mutex mutex_;
  std::optional<FleetReport> pending_;
  Counters baseline_;
  std::uint64_t serial_ = 0;
  std::uint64_t last_seq_ = 0;
  bool tripped_ = false;
  FleetCommand command_ = FleetCommand::None;
  std::string probes_;
  bool known_ = false;
  std::uint64_t known_generation_ = 0;
  // Counts up to `totals` were made in `generation`, which the fleet has
  // left (learn_generation()); so were a pending report's, when set.
  struct StaleCounts {
    Counters totals;
    std::uint64_t generation = 0;
  };
  std::optional<StaleCounts> stale_;
  std::optional<std::uint64_t> pending_generation_;
  bool leasing_ = false;  // confirm_probe() waits for a probe lease
  std::uint64_t fleet_calls_ = 0, fleet_failures_ = 0;
  std::string fleet_config_;
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_FLEET_MEMBER_HPP
