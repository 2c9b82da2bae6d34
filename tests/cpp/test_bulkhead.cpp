// The bulkhead (bulkhead.hpp, breaker.hpp's acquire()): permits as leases,
// a full bulkhead that moves no breaker state, dead owners' permits, shares.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <set>

#include <circuitbreaker/circuitbreaker.hpp>

#include "breaker_test_support.hpp"

namespace cb = circuitbreaker;
using cb::Admission;
using cb::Breaker;
using cb::Config;
using cb::Nanos;
using cb::Outcome;
using cb::Permit;
using cb::Rejection;
using cb::State;
using cb_test::admit;
using cb_test::kS;
using cb_test::settings_of;

namespace {

Config bulkhead_config(double max_concurrent) {
  Config c;
  c.failure_threshold = 2;
  c.recovery_timeout = 10;
  c.max_concurrent = max_concurrent;
  c.rng_seed = 1;
  return c;
}

// A `gone` hook that judges the owners in a set dead.
struct DeadSet {
  const std::set<std::uint32_t>* dead;
  bool operator()(std::uint32_t owner) const { return dead->count(owner) > 0; }
};

}  // namespace

TEST_CASE("max_concurrent is validated: a count, or a share as -p",
          "[bulkhead][config]") {
  for (double ok : {1.0, 2.0, 64.0, -1.0, -0.5, -1e-9}) {
    Config c;
    c.max_concurrent = ok;
    CAPTURE(ok);
    CHECK_FALSE(cb::validate(c));
  }
  for (double bad :
       {0.0, -0.0, 0.5, 1.5, 65.0, -1.5, -2.0, std::nan(""), double(INFINITY)}) {
    Config c;
    c.max_concurrent = bad;
    CAPTURE(bad);
    const cb::ConfigError e = cb::validate(c);
    REQUIRE(e);
    CHECK(std::strcmp(e.field, "max_concurrent") == 0);
  }
  for (double bad : {-1.0, std::nan(""), double(INFINITY), 2e9}) {
    Config c;
    c.max_wait = bad;
    const cb::ConfigError e = cb::validate(c);
    REQUIRE(e);
    CHECK(std::strcmp(e.field, "max_wait") == 0);
  }
  const cb::Settings s = settings_of(bulkhead_config(-0.5));
  CHECK(s.max_concurrent == 0);
  CHECK(s.max_concurrent_share == 0.5);
  CHECK(cb::bulkhead_limit(s, 0) == 1);  // nobody counted: one process
  CHECK(cb::bulkhead_limit(s, 1) == 1);
  CHECK(cb::bulkhead_limit(s, 4) == 2);
  CHECK(cb::bulkhead_limit(s, 5) == 3);  // rounded up
  CHECK(cb::bulkhead_limit(settings_of(bulkhead_config(-1)), 64) == 64);
  CHECK(cb::bulkhead_limit(settings_of(Config{}), 3) == 0);
  CHECK_FALSE(cb::has_bulkhead(settings_of(Config{})));
}

TEST_CASE("a full bulkhead rejects as full and moves no breaker state", "[bulkhead]") {
  Breaker b(settings_of(bulkhead_config(2)), 0);
  const Permit p1 = admit(b, 1);
  const Permit p2 = admit(b, 2);
  CHECK(p1.bulk_lease != 0);
  CHECK(p2.bulk_lease != p1.bulk_lease);
  CHECK(p1.bulk_slot != p2.bulk_slot);
  const cb::Snapshot before = b.snapshot(3);
  const Admission full = b.acquire(3);
  CHECK_FALSE(full.permitted);
  CHECK(full.rejection == Rejection::Full);
  CHECK(full.retry_after == 0);
  const cb::Snapshot after = b.snapshot(3);
  CHECK(after.state == State::Closed);
  CHECK(after.generation == before.generation);
  CHECK(after.totals.rejected == 0);  // not a breaker rejection
  CHECK(after.totals.calls == 0);
  CHECK(after.window.calls == 0);
  CHECK(after.in_flight == 2);
  CHECK(after.max_concurrent == 2);
  CHECK(after.full_rejections == 1);
  // Settling frees a permit: one more call fits.
  b.record(p1, Outcome::Success, 4);
  CHECK(b.snapshot(4).in_flight == 1);
  const Permit p3 = admit(b, 5);
  CHECK(b.acquire(5).rejection == Rejection::Full);
  b.release(p2, 6);
  b.release(p3, 6);
  CHECK(b.snapshot(6).in_flight == 0);
}

TEST_CASE("an open breaker rejects as open before the bulkhead is asked", "[bulkhead]") {
  Breaker b(settings_of(bulkhead_config(1)), 0);
  const Permit held = admit(b, 1);  // the only permit, held across the trip
  b.note(Outcome::Failure, 2);
  b.note(Outcome::Failure, 2);
  REQUIRE(b.snapshot(2).state == State::Open);
  CHECK(b.acquire(3).rejection == Rejection::Open);
  CHECK(b.snapshot(3).totals.rejected == 1);
  CHECK(b.snapshot(3).full_rejections == 0);

  // The open period is over but the bulkhead is full: rejected as full,
  // and the breaker stays OPEN (no probe, no new generation).
  const Nanos later = 2 + 10 * kS + 1;
  const std::uint64_t gen = b.generation();
  const Admission a = b.acquire(later);
  CHECK(a.rejection == Rejection::Full);
  CHECK(b.snapshot(later).state == State::Open);
  CHECK(b.generation() == gen);
  CHECK(b.snapshot(later).probes_in_flight == 0);

  // The held permit is late (an older generation) but still frees its
  // bulkhead permit; then the probe goes.
  b.record(held, Outcome::Success, later);
  CHECK(b.snapshot(later).in_flight == 0);
  CHECK(b.snapshot(later).totals.late == 1);
  const Admission probe = b.acquire(later + 1);
  REQUIRE(probe.permitted);
  CHECK(probe.permit.kind == cb::PermitKind::Probe);
  CHECK(b.snapshot(later + 1).in_flight == 1);
}

TEST_CASE("a permit is freed once: settling twice or a stale lease frees nothing",
          "[bulkhead]") {
  Breaker b(settings_of(bulkhead_config(2)), 0);
  const Permit p1 = admit(b, 1);
  const Permit p2 = admit(b, 1);
  b.release(p1, 2);
  CHECK(b.snapshot(2).in_flight == 1);
  b.release(p1, 2);  // again: nothing
  b.record(p1, Outcome::Success, 2);
  CHECK(b.snapshot(2).in_flight == 1);
  // p1's slot is taken again by a new lease; p1 cannot free it.
  const Permit p3 = admit(b, 3);
  CHECK(p3.bulk_slot == p1.bulk_slot);
  CHECK(p3.bulk_lease != p1.bulk_lease);
  b.release(p1, 4);
  CHECK(b.snapshot(4).in_flight == 2);
  // A made-up permit (any slot, any lease) frees nothing either.
  Permit forged = p2;
  forged.bulk_lease += 100;
  b.release(forged, 4);
  forged.bulk_slot = 200;  // out of range
  b.release(forged, 4);
  CHECK(b.snapshot(4).in_flight == 2);
  b.record(p2, Outcome::Failure, 5);
  b.record(p3, Outcome::Ignored, 5);
  CHECK(b.snapshot(5).in_flight == 0);
}

TEST_CASE("the bulkhead applies while disabled, and reset() keeps permits",
          "[bulkhead]") {
  Breaker b(settings_of(bulkhead_config(1)), 0);
  b.disable(0);
  const Permit p = admit(b, 1);
  CHECK(p.kind == cb::PermitKind::PassThrough);
  CHECK(b.acquire(1).rejection == Rejection::Full);
  CHECK_FALSE(b.record(p, Outcome::Success, 2));  // records nothing, frees the permit
  CHECK(b.snapshot(2).in_flight == 0);
  const Permit q = admit(b, 3);
  b.reset(3);
  CHECK(b.snapshot(3).in_flight == 1);
  CHECK(b.acquire(3).rejection == Rejection::Full);
  b.release(q, 4);
  CHECK(admit(b, 5).bulk_lease != 0);
}

TEST_CASE("a dead owner's permit is freed by the next admission that finds it full",
          "[bulkhead]") {
  Breaker b(settings_of(bulkhead_config(2)), 0);
  std::set<std::uint32_t> dead;
  const DeadSet gone{&dead};
  REQUIRE(b.acquire(1, cb::kNever, 101, gone).permitted);
  REQUIRE(b.acquire(1, cb::kNever, 102, gone).permitted);
  CHECK(b.acquire(2, cb::kNever, 103, gone).rejection == Rejection::Full);
  dead.insert(101);
  const Admission a = b.acquire(3, cb::kNever, 103, gone);
  REQUIRE(a.permitted);
  const cb::Snapshot s = b.snapshot(3);
  CHECK(s.in_flight == 2);
  CHECK(s.totals.released == 1);  // the dead owner's permit
  CHECK(s.full_rejections == 1);
  // Without a `gone` hook nothing is judged dead.
  dead.insert(102);
  CHECK(b.acquire(4, cb::kNever, 104).rejection == Rejection::Full);
}

TEST_CASE("share(p) counts the processes that use the breaker", "[bulkhead]") {
  Breaker b(settings_of(bulkhead_config(-0.5)), 0);
  std::set<std::uint32_t> dead;
  const DeadSet gone{&dead};
  // One process: one permit.
  const Admission a1 = b.acquire(1, cb::kNever, 1, gone);
  REQUIRE(a1.permitted);
  CHECK(b.snapshot(1).max_concurrent == 1);
  CHECK(b.acquire(1, cb::kNever, 1, gone).rejection == Rejection::Full);
  // Processes join as they ask: 2 members, ceil(1) = 1 permit (held); 3
  // members, ceil(1.5) = 2; 4 members, 2 (both held).
  CHECK(b.acquire(2, cb::kNever, 2, gone).rejection == Rejection::Full);
  CHECK(b.acquire(2, cb::kNever, 3, gone).permitted);
  CHECK(b.acquire(2, cb::kNever, 4, gone).rejection == Rejection::Full);
  const cb::Snapshot s = b.snapshot(2);
  CHECK(s.bulkhead_members == 4);
  CHECK(s.max_concurrent == 2);
  CHECK(s.in_flight == 2);
  // Dead members are dropped when the bulkhead is full.
  dead.insert(2);
  dead.insert(3);
  dead.insert(4);
  CHECK(b.acquire(3, cb::kNever, 1, gone).rejection == Rejection::Full);
  CHECK(b.snapshot(3).totals.released == 1);  // process 3's permit
  CHECK(b.snapshot(3).in_flight == 1);
  CHECK(b.snapshot(3).bulkhead_members == 1);
  CHECK(b.snapshot(3).max_concurrent == 1);
  // A member that leaves is no longer counted.
  cb::leave_bulkhead(b, 1);
  CHECK(b.snapshot(3).bulkhead_members == 0);
}

TEST_CASE("valid() refuses a bulkhead block with an impossible member count",
          "[bulkhead][state]") {
  cb::BulkheadPermits permits;
  CHECK(permits.valid());
  std::uint32_t members = cb::kMaxConcurrent + 1;
  // The member count comes first.
  std::memcpy(reinterpret_cast<unsigned char*>(&permits), &members, sizeof members);
  CHECK_FALSE(permits.valid());
}

TEST_CASE(
    "a breaker without a bulkhead carries no bulkhead block; one that gains one gets it",
    "[bulkhead][state]") {
  Config c;
  Breaker plain(cb_test::settings_of(c), 0);
  CHECK(plain.store().bulkhead() == nullptr);
  CHECK(sizeof(Breaker) < sizeof(cb::BreakerState) + sizeof(cb::BulkheadPermits));
  const Permit p = admit(plain, 1);
  CHECK(p.bulk_lease == 0);
  CHECK(plain.record(p, Outcome::Success, 2));
  CHECK(plain.snapshot(2).max_concurrent == 0);
  CHECK(plain.snapshot(2).in_flight == 0);

  c.max_concurrent = 1;
  plain.reconfigure(cb_test::settings_of(c), 3);
  REQUIRE(plain.store().bulkhead() != nullptr);
  const Permit held = admit(plain, 4);
  CHECK(plain.acquire(5).rejection == Rejection::Full);
  CHECK(plain.snapshot(5).in_flight == 1);
  CHECK(plain.snapshot(5).full_rejections == 1);
  plain.release(held, 6);
  CHECK(plain.snapshot(6).in_flight == 0);

  Breaker bounded(cb_test::settings_of(c), 0);
  CHECK(bounded.store().bulkhead() != nullptr);
}
