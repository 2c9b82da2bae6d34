// The fleet store behind the handle a binding holds (any_breaker.hpp): a
// FleetMember (fleet/member.hpp: a Breaker in this process that the fleet
// keeps in step) and the FleetSync (fleet/sync.hpp) that moves its reports.
// The calls run on the member's local copy as any breaker's do; what the
// fleet needs in addition happens here, and only here:
//   - a half-open probe goes out only with a fleet-wide lease
//     (FleetMember::confirm_probe(), asked on the sync's connection), and a
//     health check runs only with one (claim_health_check());
//   - a local trip wakes the sync thread at once, a failure nudges it (so
//     the fleet hears of a run of failures soon, not at the next tick), and
//     a settled probe wakes it when its outcome is due to the fleet;
//   - reset, force_open and disable are the fleet's (FleetMember::command());
//   - the member's last counts are flushed when the handle goes (a
//     finalizer, or the process exiting), within the store's timeout;
//   - with a bulkhead, where the host can share memory, its permits are
//     the host's (fleet/fleet_bulkhead.hpp: a host segment every process
//     of the host using the breaker maps), taken and freed there with no
//     round trip; the segment's faults are this handle's. Without such a
//     segment the local copy holds them, per process.
//
// Like fleet/sync.hpp, empty without hiredis (CIRCUITBREAKER_HAVE_HIREDIS).
#ifndef CIRCUITBREAKER_FLEET_FLEET_HANDLE_HPP
#define CIRCUITBREAKER_FLEET_FLEET_HANDLE_HPP

#ifdef CIRCUITBREAKER_HAVE_HIREDIS

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../any_breaker.hpp"
#include "member.hpp"
#include "../host/host_handle.hpp"
#include "fleet_bulkhead.hpp"
#include "fleet_info.hpp"
#include "keys.hpp"
#include "sync.hpp"

namespace circuitbreaker {

class FleetHandle final : public AnyBreaker {
 public:
  // `member` joined `sync` (FleetSync::join()); `bulkhead`, when given, is
  // open and holds the bulkhead's permits for the host.
  FleetHandle(std::shared_ptr<FleetMember> member, std::shared_ptr<FleetSync> sync,
              std::unique_ptr<FleetBulkhead> bulkhead = nullptr)
      : AnyBreaker(bulkhead != nullptr),
        member_(std::move(member)),
        sync_(std::move(sync)),
        bulkhead_(std::move(bulkhead)) {}
  ~FleetHandle() override { sync_->flush(member_); }

  FleetMember& member() noexcept { return *member_; }
  FleetSync& sync() noexcept { return *sync_; }

  const char* store_kind() const noexcept override { return "redis"; }
  const std::string& location() const noexcept override { return member_->key(); }
  const std::string& fault_location() const noexcept override {
    return bulkhead_ ? bulkhead_->path() : location();
  }
  // The host segment of the bulkhead's permits; nullptr when the local copy
  // holds them.
  const FleetBulkhead* bulkhead() const noexcept { return bulkhead_.get(); }
  const Settings& settings() const noexcept override {
    return member_->breaker().settings();
  }

  Admission acquire(Nanos now, Nanos probe_lease) override {
    Admission a;
    if (bulkhead_) {
      FleetBulkhead::Call permits(*bulkhead_, now);
      a = local().acquire_with(now, probe_lease, permits);
    } else {
      a = local().acquire(now, probe_lease);
    }
    if (!a.permitted || a.permit.kind != PermitKind::Probe) return a;
    const Admission r = confirm_probe(a, now);
    // A probe the fleet declined gives its host permit back (the local copy
    // frees one it holds itself).
    if (!r.permitted && bulkhead_) bulkhead_->give_back(a.permit, now);
    return r;
  }
  bool record(const Permit& p, Outcome o, Nanos now, Nanos open_for) override {
    if (bulkhead_) bulkhead_->give_back(p, now);
    return record_outcome(p, o, now, open_for);
  }
  void release(const Permit& p, Nanos now) override {
    if (bulkhead_) bulkhead_->give_back(p, now);
    local().release(p, now);
    settled(p, true, now, false);
  }
  bool note(Outcome o, Nanos now) override { return local().note(o, now); }
  void reset(Nanos now) override {
    local().reset(now);
    tell_fleet(FleetCommand::Reset);
  }
  void force_open(Nanos now) override {
    local().force_open(now);
    tell_fleet(FleetCommand::ForceOpen);
  }
  void disable(Nanos now) override {
    local().disable(now);
    tell_fleet(FleetCommand::Disable);
  }
  // The configuration is the fleet's identity (fleet/protocol.hpp).
  bool reconfigure(const Settings&, Nanos) override { return false; }
  // The bulkhead's counts are the host's when the host holds its permits.
  Snapshot snapshot(Nanos now) const override {
    Snapshot s = member_->breaker().snapshot(now);
    if (bulkhead_) bulkhead_->show(s, now);
    return s;
  }

  std::size_t transitions_since(std::uint64_t after, Transition* out,
                                std::size_t max) const override {
    return member_->breaker().transitions_since(after, out, max);
  }
  std::size_t history(Nanos now, ActivityBucket* out) override {
    return local().history(now, out);
  }
  // A health check runs in one process of the fleet per interval: after
  // the local claim (the core's rules: only while OPEN, once per interval
  // in this process), the fleet-wide lease (keys.hpp's fleet_health_key():
  // SET NX PX health_interval, one round trip bounded by the store's
  // timeout, on later's event loop, never inside a user's call). Another
  // process holds it: not granted, try again when this process's interval
  // has passed. Redis cannot be reached: granted on local rules, as a probe
  // would be. A holder that dies holds the lease for one interval at most.
  // A pass closes the local copy and travels to the fleet like a manual
  // command (FleetCommand::HealthClose), which the fleet applies only while
  // it is still in the OPEN period this process knew.
  HealthClaim claim_health_check(Nanos now) override {
    HealthClaim c = local().claim_health_check(now);
    if (!c.granted) return c;
    const Nanos interval = settings().health_interval;
    const std::optional<bool> ours =
        sync_->health_lease(fleet_health_key(member_->key()), member_->new_token(),
                            fleet_health_lease_ms(interval));
    if (ours.value_or(true)) return c;
    c.granted = false;
    c.retry_after = interval;  // when this process's own lease ends
    return c;
  }
  HealthResult health_result(const HealthClaim& c, bool passed, Nanos now) override {
    const HealthResult r = local().health_result(c, passed, now);
    if (r == HealthResult::Passed) tell_fleet(FleetCommand::HealthClose);
    return r;
  }

  // Asked only with a bulkhead segment (AnyBreaker(true)): its faults.
  StoreInfo store_info() override { return fleet_breaker_info(*sync_, *member_); }

  bool store_usable() const noexcept override { return bulkhead_->healthy(); }
  StoreFault store_fault() noexcept override {
    return store_fault_of(bulkhead_->take_fault(), bulkhead_->host().lock_wait());
  }

 private:
  FleetBreaker& local() noexcept { return member_->breaker(); }

  // The outcome on the local copy, and what the fleet is told of it.
  bool record_outcome(const Permit& p, Outcome o, Nanos now, Nanos open_for) {
    const std::uint64_t before = local().generation();
    const auto record_locally = [&]() { return local().record(p, o, now, open_for); };
    bool recorded = false, to_send = false;
    if (p.kind == PermitKind::Probe) {
      // A probe's outcome reaches the local copy and the fleet's queue in
      // one step (FleetMember::settle_probe() says why).
      recorded = member_->settle_probe(p, o == Outcome::Ignored, now,
                                       o == Outcome::Failure, record_locally, &to_send);
    } else {
      recorded = record_locally();
    }
    if (local().generation() != before || to_send) {
      sync_->wake();
    } else if (o == Outcome::Failure) {
      sync_->nudge();
    }
    return recorded;
  }

  // A probe the local copy admitted goes out only with a fleet-wide lease
  // (FleetMember::confirm_probe()).
  Admission confirm_probe(const Admission& a, Nanos now) {
    FleetSync& sync = *sync_;
    FleetMember& member = *member_;
    return member_->confirm_probe(
        a, now, sync.spec().sync_interval,
        [&sync, &member](const std::string& token, std::int64_t lease_ms) {
          std::optional<std::vector<std::string>> r = sync.lease(
              fleet_lease_keys(member.key(),
                               member.breaker().settings().half_open_max_calls),
              token, lease_ms);
          // No fleet state (Redis restarted empty): the next sync rebuilds
          // it from this breaker's report, though it has no news.
          if (r && !r->empty() && (*r)[0] == "absent") {
            member.want();
            sync.wake();
          }
          return r;
        });
  }

  // A probe's outcome (or release) goes to the fleet at once.
  void settled(const Permit& p, bool released, Nanos now, bool failed) {
    if (p.kind == PermitKind::Probe && member_->probe_settled(p, released, now, failed)) {
      sync_->wake();
    }
  }
  void tell_fleet(FleetCommand c) {
    member_->command(c);
    sync_->wake();
  }

  std::shared_ptr<FleetMember> member_;
  std::shared_ptr<FleetSync> sync_;
  std::unique_ptr<FleetBulkhead> bulkhead_;
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HAVE_HIREDIS
#endif  // CIRCUITBREAKER_FLEET_FLEET_HANDLE_HPP
