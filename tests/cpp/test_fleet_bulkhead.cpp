// A fleet breaker's bulkhead per host (fleet/fleet_bulkhead.hpp): the
// permits of calls that one breaker decides (BasicBreaker::acquire_with())
// kept in another block (bulkhead.hpp's take_bulkhead_permit(),
// return_bulkhead_permit()),
// here a host segment shared by processes (fork); and the segment's file
// name, which names the fleet breaker without a secret.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include <circuitbreaker/circuitbreaker.hpp>
#include <circuitbreaker/fleet/fleet_breaker.hpp>
#include <circuitbreaker/fleet/fleet_bulkhead.hpp>

#include "breaker_test_support.hpp"
#include "process_test_support.hpp"

namespace cb = circuitbreaker;
using cb::Admission;
using cb::Breaker;
using cb::Config;
using cb::Nanos;
using cb::Outcome;
using cb::Permit;
using cb::Rejection;
using cb::State;
using cb_test::kS;
using cb_test::settings_of;

namespace {

Config with_bulkhead(double max_concurrent) {
  Config c;
  c.failure_threshold = 1;
  c.recovery_timeout = 10;
  c.half_open_max_calls = 1;
  c.max_concurrent = max_concurrent;
  c.rng_seed = 3;
  return c;
}

Config without_bulkhead() {
  Config c = with_bulkhead(1);
  c.max_concurrent.reset();
  return c;
}

// acquire_with()'s permits, kept in another breaker's block (`home`).
struct HomePermits {
  Breaker& home;
  Nanos now;
  Permit held;
  int asked = 0;
  bool limited() const noexcept { return true; }
  bool room() noexcept {
    ++asked;
    return cb::take_bulkhead_permit(home, now, held);
  }
  void take(Permit& p) const noexcept {
    p.bulk_slot = held.bulk_slot;
    p.bulk_lease = held.bulk_lease;
  }
  void unused() noexcept { cb::return_bulkhead_permit(home, held, now); }
};

struct DeadSet {
  const std::set<std::uint32_t>* dead;
  bool operator()(std::uint32_t owner) const { return dead->count(owner) > 0; }
};

cb::FleetSpec spec_of(const std::string& host, int port, int db,
                      const std::string& prefix) {
  cb::FleetSpec s;
  s.endpoint.host = host;
  s.endpoint.port = port;
  s.endpoint.db = db;
  s.prefix = prefix;
  return s;
}

}  // namespace

TEST_CASE("acquire_with(): the breaker decides first, its permits live in another block",
          "[fleet-bulkhead]") {
  Breaker home(settings_of(with_bulkhead(1)), 0);
  Breaker caller(settings_of(without_bulkhead()), 0);
  HomePermits permits{home, 1 * kS, Permit{}};
  const Admission a = caller.acquire_with(1 * kS, cb::kNever, permits);
  REQUIRE(a.permitted);
  CHECK(a.permit.bulk_lease != 0);
  CHECK(home.snapshot(1 * kS).in_flight == 1);

  // Full: refused as full, counted in the permits' home, nothing moves here.
  const cb::Snapshot before = caller.snapshot(2 * kS);
  HomePermits again{home, 2 * kS, Permit{}};
  const Admission full = caller.acquire_with(2 * kS, cb::kNever, again);
  CHECK_FALSE(full.permitted);
  CHECK(full.rejection == Rejection::Full);
  const cb::Snapshot after = caller.snapshot(2 * kS);
  CHECK(after.generation == before.generation);
  CHECK(after.totals.rejected == 0);
  CHECK(after.full_rejections == 0);
  CHECK(home.snapshot(2 * kS).full_rejections == 1);

  // The outcome trips the caller; the permit goes back to its home.
  caller.record(a.permit, Outcome::Failure, 3 * kS);
  cb::return_bulkhead_permit(home, a.permit, 3 * kS);
  cb::return_bulkhead_permit(home, a.permit, 3 * kS);  // once only
  CHECK(home.snapshot(3 * kS).in_flight == 0);
  REQUIRE(caller.snapshot(3 * kS).state == State::Open);

  // OPEN refuses as open: the permits are not asked.
  HomePermits open{home, 4 * kS, Permit{}};
  CHECK(caller.acquire_with(4 * kS, cb::kNever, open).rejection == Rejection::Open);
  CHECK(open.asked == 0);

  // A probe takes the permit; with the slot and the permit both taken, the
  // next call is refused as full before the breaker is asked.
  HomePermits probe{home, 20 * kS, Permit{}};
  const Admission p = caller.acquire_with(20 * kS, cb::kNever, probe);
  REQUIRE(p.permitted);
  CHECK(p.permit.kind == cb::PermitKind::Probe);
  CHECK(home.snapshot(20 * kS).in_flight == 1);
  HomePermits second{home, 20 * kS, Permit{}};
  CHECK(caller.acquire_with(20 * kS, cb::kNever, second).rejection == Rejection::Full);
}

TEST_CASE(
    "acquire_with(): a call the breaker refuses after the permit was taken gives it back",
    "[fleet-bulkhead]") {
  Breaker home(settings_of(with_bulkhead(2)), 0);
  Breaker caller(settings_of(without_bulkhead()), 0);
  caller.note(Outcome::Failure, 1 * kS);
  REQUIRE(caller.snapshot(1 * kS).state == State::Open);
  HomePermits probe{home, 20 * kS, Permit{}};
  const Admission p = caller.acquire_with(20 * kS, cb::kNever, probe);
  REQUIRE(p.permitted);
  // Half-open is full: the breaker refuses, the permit taken for it is back.
  HomePermits refused{home, 20 * kS, Permit{}};
  const Admission r = caller.acquire_with(20 * kS, cb::kNever, refused);
  CHECK(r.rejection == Rejection::HalfOpenFull);
  CHECK(refused.asked == 1);
  CHECK(home.snapshot(20 * kS).in_flight == 1);  // the probe's only
  CHECK(home.snapshot(20 * kS).full_rejections == 0);
}

TEST_CASE("take_bulkhead_permit(): acquire()'s rules for permits, dead owners and shares",
          "[fleet-bulkhead]") {
  Breaker home(settings_of(with_bulkhead(1)), 0);
  std::set<std::uint32_t> dead;
  Permit a, b;
  REQUIRE(cb::take_bulkhead_permit(home, 1, a, 7, DeadSet{&dead}));
  CHECK_FALSE(cb::take_bulkhead_permit(home, 2, b, 8, DeadSet{&dead}));
  CHECK(home.snapshot(2).full_rejections == 1);
  dead.insert(7);  // the holder died: its permit is freed by the next taker
  REQUIRE(cb::take_bulkhead_permit(home, 3, b, 8, DeadSet{&dead}));
  CHECK(b.bulk_lease != a.bulk_lease);
  CHECK(home.snapshot(3).totals.released == 1);
  cb::return_bulkhead_permit(home, a, 4);  // the dead owner's stale lease frees nothing
  CHECK(home.snapshot(4).in_flight == 1);

  Breaker shared(settings_of(with_bulkhead(-0.5)), 0);
  Permit p[4];
  for (std::uint32_t owner = 1; owner <= 3; ++owner) {
    Permit joined;
    REQUIRE(cb::take_bulkhead_permit(shared, 5, joined, owner));
    cb::return_bulkhead_permit(shared, joined, 5);
  }
  CHECK(shared.snapshot(5).bulkhead_members == 3);
  CHECK(shared.snapshot(5).max_concurrent == 2);
  REQUIRE(cb::take_bulkhead_permit(shared, 6, p[0], 1));
  REQUIRE(cb::take_bulkhead_permit(shared, 6, p[1], 2));
  CHECK_FALSE(cb::take_bulkhead_permit(shared, 6, p[2], 3));

  Breaker none(settings_of(without_bulkhead()), 0);
  Permit q;
  CHECK(cb::take_bulkhead_permit(none, 7, q, 1));
  CHECK(q.bulk_lease == 0);
}

TEST_CASE("a probe the fleet declines frees its bulkhead permit", "[fleet-bulkhead]") {
  cb::FleetBreaker fb(settings_of(with_bulkhead(1)), 0);
  fb.note(Outcome::Failure, 1 * kS);
  const Admission a = fb.acquire(20 * kS);
  REQUIRE(a.permitted);
  REQUIRE(a.permit.kind == cb::PermitKind::Probe);
  CHECK(fb.snapshot(20 * kS).in_flight == 1);
  const Admission d = fb.decline_probe(a.permit, 1 * kS, 20 * kS);
  CHECK(d.rejection == Rejection::HalfOpenFull);
  CHECK(fb.snapshot(20 * kS).in_flight == 0);
}

TEST_CASE(
    "a fleet bulkhead's file names the server, database, prefix and name, never a secret",
    "[fleet-bulkhead]") {
  const cb::FleetSpec a = spec_of("10.0.0.1", 6379, 0, "app");
  const std::string f = cb::fleet_bulkhead_file_name(a, "payments");
  CHECK(f.rfind("cbf-", 0) == 0);
  CHECK(f.size() == 4 + 16 + 1 + 8);
  CHECK(f.substr(f.size() - 9) == "-payments");
  CHECK_FALSE(cb::segment_breaker_name(f).has_value());  // not a host store breaker

  // Credentials, the sync's pace and the timeout are not the identity.
  cb::FleetSpec secret = a;
  secret.endpoint.username = "svc-user";
  secret.endpoint.password = "hunter2";
  secret.endpoint.has_password = true;
  secret.sync_interval = 5 * kS;
  secret.timeout = 2 * kS;
  CHECK(cb::fleet_bulkhead_file_name(secret, "payments") == f);
  CHECK(cb::fleet_bulkhead_identity(secret, "payments").find("hunter2") ==
        std::string::npos);
  CHECK(cb::fleet_bulkhead_identity(secret, "payments").find("svc-user") ==
        std::string::npos);

  // Another server, port, database, prefix or name: another file.
  std::set<std::string> names{f};
  names.insert(
      cb::fleet_bulkhead_file_name(spec_of("10.0.0.2", 6379, 0, "app"), "payments"));
  names.insert(
      cb::fleet_bulkhead_file_name(spec_of("10.0.0.1", 6380, 0, "app"), "payments"));
  names.insert(
      cb::fleet_bulkhead_file_name(spec_of("10.0.0.1", 6379, 1, "app"), "payments"));
  names.insert(
      cb::fleet_bulkhead_file_name(spec_of("10.0.0.1", 6379, 0, "ap"), "payments"));
  names.insert(cb::fleet_bulkhead_file_name(a, "payment"));
  CHECK(names.size() == 6);

  // A cluster's seeds in any order name one fleet; sentinels another.
  cb::FleetSpec s1 = a, s2 = a;
  s1.endpoint.seeds = {{"10.0.0.1", 6379}, {"10.0.0.2", 6379}};
  s2.endpoint.seeds = {{"10.0.0.2", 6379}, {"10.0.0.1", 6379}};
  CHECK(cb::fleet_bulkhead_file_name(s1, "x") == cb::fleet_bulkhead_file_name(s2, "x"));
  CHECK(cb::fleet_bulkhead_file_name(s1, "x") != cb::fleet_bulkhead_file_name(a, "x"));
  cb::FleetSpec sentinel = a;
  sentinel.endpoint.sentinels = std::make_shared<cb::RedisSentinels>(
      std::vector<cb::RedisNodeAddress>{{"10.0.0.9", 26379}}, "mymaster");
  const std::string via_sentinel = cb::fleet_bulkhead_file_name(sentinel, "x");
  sentinel.endpoint.sentinels->set_credentials("", "sentinel-secret");
  CHECK(cb::fleet_bulkhead_file_name(sentinel, "x") == via_sentinel);
  CHECK(via_sentinel != cb::fleet_bulkhead_file_name(a, "x"));

  // The longest name, every byte encoded: within 255 bytes, and two such
  // names that differ in their last byte still differ (by the hash).
  const std::string long_a(80, '\xff');
  std::string long_b = long_a;
  long_b.back() = '\xfe';
  const std::string fa = cb::fleet_bulkhead_file_name(a, long_a);
  CHECK(fa.size() == 255);
  CHECK(fa != cb::fleet_bulkhead_file_name(a, long_b));
}

TEST_CASE("FleetBulkhead: the processes of a host share one segment's permits",
          "[fleet-bulkhead][host]") {
  REQUIRE(cb::RobustMutex::supported());  // Linux: the host store's platform
  cbproc::TempDir dir;
  REQUIRE(dir.ok());
  const std::string path =
      dir.file(cb::fleet_bulkhead_file_name(spec_of("127.0.0.1", 6379, 0, "t"), "svc"));
  Config mine = with_bulkhead(1);
  cb::FleetBulkhead a;
  REQUIRE(a.open(path, mine, 1 * kS).ok());
  // Only the bulkhead is the segment's identity: other rule arguments are
  // the fleet's (which refuses them itself).
  Config other = mine;
  other.failure_threshold = 9;
  cb::FleetBulkhead b;
  REQUIRE(b.open(path, other, 1 * kS).ok());
  Config wider = mine;
  wider.max_concurrent = 2;
  cb::FleetBulkhead c;
  const cb::HostBreaker::OpenResult wrong = c.open(path, wider, 1 * kS);
  CHECK(wrong.status == cb::SegmentStatus::WrongConfig);
  REQUIRE(wrong.differing_field >= 0);
  CHECK(std::string(cb::kConfigFields[wrong.differing_field].name) == "max_concurrent");

  cb::FleetBreaker fa(settings_of(mine), 0);
  cb::FleetBulkhead::Call pa(a, 2 * kS);
  const Admission held = fa.acquire_with(2 * kS, cb::kNever, pa);
  REQUIRE(held.permitted);
  cb::Snapshot seen = fa.snapshot(2 * kS);
  b.show(seen, 2 * kS);
  CHECK(seen.in_flight == 1);
  CHECK(seen.max_concurrent == 1);

  // Another process finds the host's only permit held: refused as full, and
  // its own breaker does not move.
  cbproc::ChildReaper reaper;
  const pid_t full = cbproc::spawn([&]() {
    cb::FleetBulkhead mine_too;
    if (!mine_too.open(path, other, 3 * kS).ok()) return 2;
    cb::FleetBreaker fc(cb::make_settings(other), 0);
    cb::FleetBulkhead::Call pc(mine_too, 3 * kS);
    const Admission r = fc.acquire_with(3 * kS, cb::kNever, pc);
    if (r.permitted || r.rejection != Rejection::Full) return 3;
    if (fc.snapshot(3 * kS).totals.rejected != 0) return 4;
    return mine_too.take_fault() == cb::SegmentFault::None ? 0 : 5;
  });
  reaper.add(full);
  CHECK(cbproc::exited_ok(reaper.wait_all(std::chrono::seconds(60))[0]));
  seen = fa.snapshot(3 * kS);
  a.show(seen, 3 * kS);
  CHECK(seen.full_rejections == 1);

  // Given back, the permit goes to another process, which dies holding it:
  // the next call that finds the bulkhead full frees it.
  a.give_back(held.permit, 4 * kS);
  const pid_t holder = cbproc::spawn([&]() {
    cb::FleetBulkhead mine_too;
    if (!mine_too.open(path, mine, 5 * kS).ok()) return 2;
    Permit p;
    return mine_too.take(5 * kS, p) ? 0 : 3;  // exits without giving it back
  });
  reaper.add(holder);
  CHECK(cbproc::exited_ok(reaper.wait_all(std::chrono::seconds(60))[0]));
  seen = fa.snapshot(6 * kS);
  a.show(seen, 6 * kS);
  CHECK(seen.in_flight == 1);  // the dead process's
  Permit again;
  CHECK(a.take(6 * kS, again));
  CHECK(again.bulk_lease != 0);
  a.give_back(again, 7 * kS);
  CHECK(a.take_fault() == cb::SegmentFault::None);
}
