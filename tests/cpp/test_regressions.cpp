// Regression tests for defects found in the core (by the fuzzer,
// fuzz_breaker.cpp, or by the host store's tests), now fixed.
#include <catch2/catch.hpp>

#include <cstdint>

#include <circuitbreaker/circuitbreaker.hpp>

namespace cb = circuitbreaker;

TEST_CASE("transitions_since(UINT64_MAX) returns no transition",
          "[breaker][regression]") {
  // TransitionLog::since() computed first = after + 1, which wrapped to 0
  // for after == UINT64_MAX: the whole retained log came back instead of
  // nothing. Not reachable from R, only through the C++ API (LinkingTo).
  cb::Breaker b(cb::make_settings(cb::Config{}), 0);
  b.force_open(1);
  b.reset(2);
  cb::Transition out[cb::TransitionLog::kCapacity];
  CHECK(b.transitions_since(UINT64_MAX - 1, out, cb::TransitionLog::kCapacity) == 0);
  CHECK(b.transitions_since(UINT64_MAX, out, cb::TransitionLog::kCapacity) == 0);
}

TEST_CASE("acquire with a `gone` test frees dead owners' probes in one decision",
          "[breaker][regression]") {
  // The host store used to call acquire(), free_abandoned_probes() and
  // acquire() again: a call admitted into a dead owner's slot also counted
  // as rejected. acquire(now, lease, owner, gone) frees the slots of dead
  // owners when half-open is full, under the same lock, before deciding.
  cb::Config c;
  c.failure_threshold = 1;
  c.recovery_timeout = 1;
  c.half_open_max_calls = 2;
  cb::Breaker b(cb::make_settings(c), 0);
  const cb::Admission first = b.acquire(0);
  b.record(first.permit, cb::Outcome::Failure, 0);
  const cb::Nanos t = 2 * cb::kNanosPerSecond;
  const cb::Admission p7 = b.acquire(t, cb::kNever, 7);
  const cb::Admission p8 = b.acquire(t, cb::kNever, 8);
  REQUIRE(p7.permitted);
  REQUIRE(p8.permitted);
  std::uint32_t asked = 0;
  auto gone = [&](std::uint32_t owner) {
    ++asked;
    return owner == 8;
  };
  // Full, owner 8 dead: its slot is freed and the call admitted, not rejected.
  const cb::Admission a = b.acquire(t + 1, cb::kNever, 9, gone);
  REQUIRE(a.permitted);
  CHECK(a.permit.kind == cb::PermitKind::Probe);
  CHECK(a.permit.slot == p8.permit.slot);
  CHECK(asked == 2);
  cb::Snapshot s = b.snapshot(t + 1);
  CHECK(s.totals.rejected == 0);
  CHECK(s.totals.released == 1);
  CHECK(s.probes_in_flight == 2);
  // Full, nobody dead: one rejection, nothing freed.
  const cb::Admission r =
      b.acquire(t + 2, cb::kNever, 10, [](std::uint32_t) { return false; });
  CHECK_FALSE(r.permitted);
  CHECK(r.rejection == cb::Rejection::HalfOpenFull);
  s = b.snapshot(t + 2);
  CHECK(s.totals.rejected == 1);
  CHECK(s.totals.released == 1);
  // Without a `gone` test, dead owners are not looked for.
  asked = 0;
  CHECK_FALSE(b.acquire(t + 3, cb::kNever, 11).permitted);
  CHECK(asked == 0);
  // The probe freed for its dead owner settles as late, if it ever comes.
  b.record(p8.permit, cb::Outcome::Success, t + 4);
  s = b.snapshot(t + 4);
  CHECK(s.totals.late == 1);
  CHECK(s.probe_successes == 0);
  // An untracked probe (owner 0) is never judged.
  cb::Breaker u(cb::make_settings(c), 0);
  const cb::Admission f = u.acquire(0);
  u.record(f.permit, cb::Outcome::Failure, 0);
  REQUIRE(u.acquire(t).permitted);
  REQUIRE(u.acquire(t).permitted);
  asked = 0;
  CHECK_FALSE(u.acquire(t + 1, cb::kNever, 9, gone).permitted);
  CHECK(asked == 0);
}
