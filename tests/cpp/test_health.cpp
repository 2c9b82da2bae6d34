// Health checks (health.hpp, breaker.hpp's claim_health_check() and
// health_result()): the lease, what a pass and a failure do, late results,
// the reason in the transition log, and the host-wide lease shared by real
// processes (fork) with fake times.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <string>

#include <circuitbreaker/circuitbreaker.hpp>
#include <circuitbreaker/host/host_breaker.hpp>

#include "breaker_test_support.hpp"
#include "process_test_support.hpp"

#include <sys/types.h>
#include <unistd.h>

namespace cb = circuitbreaker;
using cb_test::kS;
using cb_test::settings_of;

namespace {

cb::Config health_config() {
  cb::Config c;
  c.failure_threshold = 1;
  c.recovery_timeout = 30;
  c.health_interval = 5;
  c.rng_seed = 3;
  return c;
}

template <typename B>
void trip_at(B& b, cb::Nanos at) {
  const cb::Admission a = b.acquire(at);
  REQUIRE(a.permitted);
  b.record(a.permit, cb::Outcome::Failure, at);
}

}  // namespace

TEST_CASE("health_interval is validated and in the argument table", "[health]") {
  cb::Config c;
  CHECK(c.health_interval == 5);
  REQUIRE(cb::find_config_field("health_interval") != nullptr);
  CHECK(cb::find_config_field("health_interval")->default_value == 5);
  for (double bad : {0.0, -1.0, std::nan(""), HUGE_VAL, 2e9}) {
    c.health_interval = bad;
    const cb::ConfigError e = cb::validate(c);
    REQUIRE(e);
    CHECK(std::string(e.field) == "health_interval");
  }
  c.health_interval = 0.25;
  CHECK_FALSE(cb::validate(c));
  CHECK(cb::make_settings(c).health_interval == kS / 4);
}

TEST_CASE("the lease: only while OPEN, once per interval and OPEN period", "[health]") {
  cb::Breaker b(settings_of(health_config()), 0);
  CHECK_FALSE(b.claim_health_check(1 * kS).granted);  // CLOSED: nothing to check
  CHECK(b.claim_health_check(1 * kS).retry_after == -1);
  trip_at(b, 10 * kS);
  const cb::HealthClaim first = b.claim_health_check(11 * kS, 42);
  REQUIRE(first.granted);
  // The same interval: nobody else, with the wait until the lease is free.
  const cb::HealthClaim second = b.claim_health_check(12 * kS);
  CHECK_FALSE(second.granted);
  CHECK(second.retry_after == 4 * kS);
  // The holder never reports (it died): the lease runs out with the interval.
  const cb::HealthClaim third = b.claim_health_check(16 * kS);
  CHECK(third.granted);
  CHECK(third.generation == first.generation);
  // FORCED_OPEN and DISABLED are manual: no check.
  b.force_open(17 * kS);
  CHECK_FALSE(b.claim_health_check(30 * kS).granted);
  b.disable(31 * kS);
  CHECK_FALSE(b.claim_health_check(40 * kS).granted);
}

TEST_CASE("a pass closes the OPEN breaker at once, with the reason logged", "[health]") {
  cb::Config c = health_config();
  c.half_open_max_calls = 3;  // a pass closes even when probes need three
  c.backoff_multiplier = 2;
  c.ramp_up = 10;
  cb::Breaker b(settings_of(c), 0);
  trip_at(b, 1 * kS);
  const cb::HealthClaim claim = b.claim_health_check(2 * kS);
  REQUIRE(claim.granted);
  CHECK(b.health_result(claim, true, 3 * kS) == cb::HealthResult::Passed);
  const cb::Snapshot s = b.snapshot(3 * kS);
  CHECK(s.state == cb::State::Closed);
  CHECK(s.consecutive_failures == 0);
  CHECK(s.consecutive_opens == 0);  // the backoff starts over
  CHECK(s.ramp_share == 0);         // ramp-up, as after a probe's close
  CHECK(s.health_passed == 1);
  CHECK(s.health_last_result == static_cast<std::uint8_t>(cb::HealthResult::Passed));
  CHECK(s.health_last_at == 3 * kS);
  cb::Transition tr[cb::TransitionLog::kCapacity];
  const std::size_t n = b.transitions_since(0, tr, cb::TransitionLog::kCapacity);
  REQUIRE(n == 2);
  CHECK_FALSE(tr[0].by_health_check);  // CLOSED -> OPEN: the rules
  CHECK(tr[1].from == cb::State::Open);
  CHECK(tr[1].to == cb::State::Closed);
  CHECK(tr[1].by_health_check);
  // Once the log wraps, the entry's reason goes with it.
  for (int i = 0; i < 40; ++i) {
    const cb::Nanos t = (20 + i) * kS;
    trip_at(b, t);
    b.reset(t);
  }
  const std::size_t m = b.transitions_since(0, tr, cb::TransitionLog::kCapacity);
  for (std::size_t i = 0; i < m; ++i) CHECK_FALSE(tr[i].by_health_check);
}

TEST_CASE("a failed check leaves the open timer and the backoff alone", "[health]") {
  cb::Config c = health_config();
  c.backoff_multiplier = 2;
  cb::Breaker b(settings_of(c), 0);
  trip_at(b, 1 * kS);
  const cb::Snapshot before = b.snapshot(2 * kS);
  const cb::HealthClaim claim = b.claim_health_check(2 * kS);
  REQUIRE(claim.granted);
  CHECK(b.health_result(claim, false, 3 * kS) == cb::HealthResult::Failed);
  const cb::Snapshot after = b.snapshot(3 * kS);
  CHECK(after.state == cb::State::Open);
  CHECK(after.generation == before.generation);
  CHECK(after.open_duration == before.open_duration);
  CHECK(after.consecutive_opens == before.consecutive_opens);
  CHECK(after.retry_after == before.retry_after - 1 * kS);
  CHECK(after.totals.calls == before.totals.calls);  // not a call
  CHECK(after.health_failed == 1);
  // The probe still comes when the open period is over, and a failed probe
  // backs off as ever.
  const cb::Admission probe = b.acquire(32 * kS);
  REQUIRE(probe.permitted);
  CHECK(probe.permit.kind == cb::PermitKind::Probe);
  b.record(probe.permit, cb::Outcome::Failure, 32 * kS);
  CHECK(b.snapshot(32 * kS).open_duration == 60 * kS);
}

TEST_CASE("a late result moves nothing", "[health]") {
  cb::Breaker b(settings_of(health_config()), 0);
  trip_at(b, 1 * kS);
  const cb::HealthClaim claim = b.claim_health_check(2 * kS);
  REQUIRE(claim.granted);
  const int how = GENERATE(0, 1, 2, 3);
  CAPTURE(how);
  switch (how) {
    case 0: b.reset(3 * kS); break;  // reset while the check ran
    case 1:                          // reset, then opened again
      b.reset(3 * kS);
      trip_at(b, 4 * kS);
      break;
    case 2: {  // the open period ended and a probe is out
      const cb::Admission a = b.acquire(40 * kS);
      REQUIRE(a.permitted);
      break;
    }
    case 3: b.force_open(3 * kS); break;
  }
  const cb::Snapshot before = b.snapshot(41 * kS);
  CHECK(b.health_result(claim, true, 41 * kS) == cb::HealthResult::Late);
  const cb::Snapshot after = b.snapshot(41 * kS);
  CHECK(after.state == before.state);
  CHECK(after.generation == before.generation);
  CHECK(after.health_late == 1);
  CHECK(after.health_passed == 0);
  // A claim never granted is late too.
  CHECK(b.health_result(cb::HealthClaim{}, true, 42 * kS) == cb::HealthResult::Late);
}

TEST_CASE("a new OPEN period frees the lease at once", "[health]") {
  cb::Breaker b(settings_of(health_config()), 0);
  trip_at(b, 1 * kS);
  const cb::HealthClaim a = b.claim_health_check(2 * kS);
  REQUIRE(a.granted);
  b.reset(3 * kS);
  trip_at(b, 3 * kS);
  const cb::HealthClaim again = b.claim_health_check(3 * kS);
  CHECK(again.granted);
  CHECK(again.generation != a.generation);
}

TEST_CASE("a state block with a bad health field is not valid", "[health]") {
  const cb::Settings s = settings_of(health_config());
  cb::BreakerState st;
  CHECK(cb::valid(st, s));
  cb::BreakerState bad = st;
  bad.health_due_at = -1;
  CHECK_FALSE(cb::valid(bad, s));
  bad = st;
  bad.health_last_at = cb::kNever;
  CHECK_FALSE(cb::valid(bad, s));
  bad = st;
  std::uint8_t byte = 9;
  std::memcpy(&bad.health_last_result, &byte, 1);
  CHECK_FALSE(cb::valid(bad, s));
}

TEST_CASE("host store: one process holds the lease; every process sees the close",
          "[health][host]") {
  cbproc::TempDir dir;
  REQUIRE(dir.ok());
  const std::string path = dir.file("health");
  const cb::Config c = health_config();
  cb::HostBreaker hb;
  REQUIRE(hb.open(path, c, 0).ok());
  trip_at(hb, 1 * kS);

  // A child takes the lease and dies without reporting.
  const pid_t pid = cbproc::spawn([&]() {
    cb::HostBreaker mine;
    if (!mine.open(path, c, 2 * kS).ok()) return 2;
    return mine.claim_health_check(2 * kS).granted ? 0 : 3;
  });
  REQUIRE(pid > 0);
  REQUIRE(cbproc::exited_ok(cbproc::wait_child(pid, std::chrono::seconds(30))));
  // Its lease holds for the interval, here too.
  const cb::HealthClaim blocked = hb.claim_health_check(3 * kS);
  CHECK_FALSE(blocked.granted);
  CHECK(blocked.retry_after == 4 * kS);
  const cb::HealthClaim mine = hb.claim_health_check(7 * kS);
  REQUIRE(mine.granted);

  // A pass here closes the breaker for a process that attaches after.
  CHECK(hb.health_result(mine, true, 8 * kS) == cb::HealthResult::Passed);
  const pid_t reader = cbproc::spawn([&]() {
    cb::HostBreaker other;
    if (!other.open(path, c, 9 * kS).ok()) return 2;
    const cb::Snapshot s = other.snapshot(9 * kS);
    cb::Transition tr[cb::TransitionLog::kCapacity];
    const std::size_t n = other.transitions_since(0, tr, cb::TransitionLog::kCapacity);
    return s.state == cb::State::Closed && s.health_passed == 1 && n == 2 &&
                   tr[1].by_health_check
               ? 0
               : 4;
  });
  REQUIRE(pid > 0);
  CHECK(cbproc::exited_ok(cbproc::wait_child(reader, std::chrono::seconds(30))));
  CHECK(hb.take_fault() == cb::SegmentFault::None);
}
