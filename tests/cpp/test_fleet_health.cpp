// The fleet-wide health-check lease (fleet/fleet_handle.hpp's
// claim_health_check(), keys.hpp's fleet_health_key()): two processes'
// handles of one fleet breaker (two FleetSyncs, as two processes have),
// against a real redis-server, on a real clock. In one interval one claim is
// granted fleet-wide; after it another may be; with Redis out of reach each
// claim is granted on local rules.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <circuitbreaker/fleet/fleet_handle.hpp>

#include "breaker_test_support.hpp"
#include "redis_test_support.hpp"

namespace cb = circuitbreaker;
using cb_test::kS;

#ifdef CIRCUITBREAKER_HAVE_HIREDIS
namespace {

cb::Config fleet_health_config() {
  cb::Config c;
  c.failure_threshold = 1;
  c.recovery_timeout = 600;  // OPEN for the whole test, unless a check passes
  c.health_interval = 1;
  return c;
}

// The spec of one "process": `sync_ms` differs between the two, so that
// each gets a FleetSync (and a caller's connection) of its own.
cb::FleetSpec fleet_health_spec(const cbredis::RedisServer& server, int sync_ms) {
  cb::FleetSpec spec;
  spec.endpoint = server.endpoint;
  spec.prefix = "health";
  spec.sync_interval = sync_ms * cb::kNanosPerMs;
  spec.timeout = 500 * cb::kNanosPerMs;
  return spec;
}

// Waits (bounded) until `h` is OPEN; true when it is.
bool wait_open(cb::FleetHandle& h, cb::FleetSync& sync) {
  for (int i = 0; i < 1000; ++i) {
    if (h.snapshot(sync.now()).state == cb::State::Open) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// How long the lease `key` has left (ms; -2 when there is none).
long long lease_ttl(const cbredis::RedisServer& server, const std::string& key) {
  cb::RedisConnection c;
  if (!server.connect(c)) return -3;
  cb::RedisReply r = c.command({"PTTL", key});
  return r && r->is_integer() ? r->integer : -3;
}

}  // namespace

TEST_CASE("fleet store: one process per interval runs the health check",
          "[health][fleet]") {
  cbredis::RedisServer server;
  {
    cb::RedisConnection probe;
    if (!server.connect(probe)) return cbredis::skipped();
  }
  const cb::Config c = fleet_health_config();
  std::shared_ptr<cb::FleetSync> sync_a =
      cb::FleetSync::for_spec(fleet_health_spec(server, 20));
  std::shared_ptr<cb::FleetSync> sync_b =
      cb::FleetSync::for_spec(fleet_health_spec(server, 21));
  REQUIRE(sync_a != sync_b);
  {
    cb::FleetHandle a(sync_a->join("dep", c), sync_a);
    cb::FleetHandle b(sync_b->join("dep", c), sync_b);
    const std::string key = cb::fleet_health_key(a.member().key());
    CHECK(key == cb::fleet_key("health", "dep") + ":h");

    // A trips the breaker; B hears it from the fleet.
    const cb::Admission first = a.acquire(sync_a->now(), kS);
    REQUIRE(first.permitted);
    a.record(first.permit, cb::Outcome::Failure, sync_a->now(), 0);
    REQUIRE(wait_open(a, *sync_a));
    REQUIRE(wait_open(b, *sync_b));

    // One interval: one of the two runs the check, whichever claims first.
    const cb::HealthClaim from_a = a.claim_health_check(sync_a->now());
    const cb::HealthClaim from_b = b.claim_health_check(sync_b->now());
    CHECK(from_a.granted);
    CHECK_FALSE(from_b.granted);
    // Not granted: B may try again when its own interval is over.
    CHECK(from_b.retry_after == kS);
    const long long ttl = lease_ttl(server, key);
    CHECK(ttl > 0);
    CHECK(ttl <= 1000);
    // Nor is A's second claim in the interval granted (the core's local rule).
    CHECK_FALSE(a.claim_health_check(sync_a->now()).granted);

    // After the interval (the lease expired in Redis): B's turn, and A waits.
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    const cb::HealthClaim later_b = b.claim_health_check(sync_b->now());
    CHECK(later_b.granted);
    CHECK_FALSE(a.claim_health_check(sync_a->now()).granted);
    CHECK(sync_a->stats().linked);
    CHECK(sync_b->stats().linked);

    // Redis out of reach: each process runs the check on local rules.
    server.kill();
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    CHECK(a.claim_health_check(sync_a->now()).granted);
    CHECK(b.claim_health_check(sync_b->now()).granted);
    // And again at the next interval, while the link is down.
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    CHECK(a.claim_health_check(sync_a->now()).granted);
    CHECK_FALSE(sync_a->stats().linked);
  }
  sync_a.reset();
  sync_b.reset();
  cb::FleetSync::shutdown_all(2 * kS);
}

TEST_CASE("fleet store: a store that never reached Redis runs the check locally",
          "[health][fleet]") {
  cb::FleetSpec spec;
  spec.endpoint.host = "127.0.0.1";
  spec.endpoint.port = cbredis::free_port();  // nothing listens
  spec.prefix = "health-unreachable";
  spec.timeout = 200 * cb::kNanosPerMs;
  std::shared_ptr<cb::FleetSync> sync = cb::FleetSync::for_spec(spec);
  {
    cb::FleetHandle h(sync->join("dep", fleet_health_config()), sync);
    const cb::Admission first = h.acquire(sync->now(), kS);
    REQUIRE(first.permitted);
    h.record(first.permit, cb::Outcome::Failure, sync->now(), 0);
    REQUIRE(h.snapshot(sync->now()).state == cb::State::Open);
    const cb::HealthClaim claim = h.claim_health_check(sync->now());
    CHECK(claim.granted);
    CHECK_FALSE(h.claim_health_check(sync->now()).granted);  // once per interval
    CHECK(h.health_result(claim, true, sync->now()) == cb::HealthResult::Passed);
    CHECK(h.snapshot(sync->now()).state == cb::State::Closed);
  }
  sync.reset();
  cb::FleetSync::shutdown_all(2 * kS);
}
#endif
