// Scenario tests of the Breaker state machine, one group per rule, with the
// expected values worked out by hand. (The randomized comparison against the
// reference model lives in test_reference_model.cpp.)
//
// This file replaces the global operator new/delete with counting versions,
// to check that acquire/record/release never allocate.
#include "counting_new.hpp"
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include <circuitbreaker/circuitbreaker.hpp>

#include "breaker_test_support.hpp"

namespace cb = circuitbreaker;
using cb::Admission;
using cb::Breaker;
using cb::Config;
using cb::Nanos;
using cb::Outcome;
using cb::Permit;
using cb::PermitKind;
using cb::Rejection;
using cb::Snapshot;
using cb::State;

// ---------------------------------------------------------------------------
// Allocations are counted by counting_new.cpp, linked into this binary.

namespace {
void* volatile g_sink = nullptr;
}  // namespace

// ---------------------------------------------------------------------------

namespace Catch {
template <>
struct StringMaker<State> {
  static std::string convert(State s) { return cb::state_name(s); }
};
template <>
struct StringMaker<Rejection> {
  static std::string convert(Rejection r) { return cb::rejection_name(r); }
};
template <>
struct StringMaker<PermitKind> {
  static std::string convert(PermitKind k) {
    return k == PermitKind::Counted ? "counted"
           : k == PermitKind::Probe ? "probe"
                                    : "pass-through";
  }
};
}  // namespace Catch

namespace {

using cb_test::admit;
using cb_test::kS;
using cb_test::settings_of;
constexpr Nanos kMs = 1000000;

void call(Breaker& b, Outcome o, Nanos now, Nanos took = 0, Nanos open_for = -1) {
  const Permit p = admit(b, now);
  b.record(p, o, now + took, open_for);
}

State state_at(const Breaker& b, Nanos now) { return b.snapshot(now).state; }

// From OPEN: waits out the open duration, takes a probe, records `o`.
// Returns the time of the probe.
Nanos probe(Breaker& b, Nanos now, Outcome o, Nanos open_for = -1) {
  const Snapshot s = b.snapshot(now);
  REQUIRE(s.state == State::Open);
  const Nanos t = now + s.retry_after + 1;
  const Permit p = admit(b, t);
  REQUIRE(p.kind == PermitKind::Probe);
  b.record(p, o, t, open_for);
  return t;
}

}  // namespace

// ===========================================================================

TEST_CASE(
    "defaults (the article's R6 class): 5 consecutive failures open, probe after more "
    "than 30 s",
    "[breaker][defaults]") {
  Breaker b(settings_of(Config{}), 0);
  Snapshot s = b.snapshot(0);
  CHECK(s.state == State::Closed);
  CHECK(s.generation == 1);
  CHECK(s.state_since == 0);
  CHECK(s.consecutive_failures == 0);
  CHECK_FALSE(s.has_failure);
  CHECK(s.open_duration == 30 * kS);
  CHECK(s.retry_after == 0);
  CHECK(s.last_transition == 0);
  CHECK(s.ramp_share == 1);
  CHECK(std::isnan(s.failure_rate));
  CHECK(std::isnan(s.slow_rate));

  const Permit first = admit(b, 0);
  CHECK(first.kind == PermitKind::Counted);
  CHECK(first.generation == 1);
  CHECK(first.started_at == 0);
  b.release(first, 0);

  for (int i = 0; i < 4; ++i) call(b, Outcome::Failure, i * kS);
  CHECK(state_at(b, 4 * kS) == State::Closed);
  CHECK(b.snapshot(4 * kS).consecutive_failures == 4);
  call(b, Outcome::Success, 4 * kS);  // a success starts the count again
  CHECK(b.snapshot(4 * kS).consecutive_failures == 0);
  for (int i = 5; i < 9; ++i) call(b, Outcome::Failure, i * kS);
  CHECK(state_at(b, 8 * kS) == State::Closed);
  call(b, Outcome::Failure, 9 * kS);  // the fifth in a row

  s = b.snapshot(9 * kS);
  CHECK(s.state == State::Open);
  CHECK(s.generation == 2);
  CHECK(s.state_since == 9 * kS);
  CHECK(s.consecutive_failures == 5);  // not zeroed by the trip
  CHECK(s.has_failure);
  CHECK(s.last_failure_at == 9 * kS);
  CHECK(s.totals.times_opened == 1);
  CHECK(s.consecutive_opens == 1);
  CHECK(s.open_duration == 30 * kS);
  CHECK(s.retry_after == 30 * kS);
  CHECK(s.last_transition == 1);
  CHECK(s.totals.calls == 10);
  CHECK(s.totals.failures == 9);
  CHECK(s.totals.successes == 1);
  CHECK(s.totals.released == 1);

  Admission a = b.acquire(20 * kS);
  CHECK_FALSE(a.permitted);
  CHECK(a.rejection == Rejection::Open);
  CHECK(a.retry_after == 19 * kS);

  // Exactly 30 s later is not "more than" 30 s.
  a = b.acquire(39 * kS);
  CHECK_FALSE(a.permitted);
  CHECK(a.rejection == Rejection::Open);
  CHECK(a.retry_after == 0);
  CHECK(b.snapshot(39 * kS).totals.rejected == 2);

  const Nanos t = 39 * kS + 1;
  const Permit p = admit(b, t);
  CHECK(p.kind == PermitKind::Probe);
  CHECK(p.generation == 3);
  CHECK(p.started_at == t);
  CHECK(state_at(b, t) == State::HalfOpen);
  a = b.acquire(t);  // the one probe slot is taken
  CHECK(a.rejection == Rejection::HalfOpenFull);
  CHECK(a.retry_after == cb::kUnknownWait);  // no deadline: no known time

  SECTION("the probe's success closes and zeroes the failure count") {
    b.record(p, Outcome::Success, t + kS);
    s = b.snapshot(t + kS);
    CHECK(s.state == State::Closed);
    CHECK(s.generation == 4);
    CHECK(s.consecutive_failures == 0);
    CHECK(s.consecutive_opens == 0);
    CHECK(s.last_transition == 3);
    CHECK(s.window.calls == 0);  // the window starts empty after closing
    CHECK(b.acquire(t + kS).permitted);
  }
  SECTION("the probe's failure re-opens for another 30 s (no backoff)") {
    b.record(p, Outcome::Failure, t + kS);
    s = b.snapshot(t + kS);
    CHECK(s.state == State::Open);
    CHECK(s.generation == 4);
    CHECK(s.consecutive_failures == 6);
    CHECK(s.consecutive_opens == 2);
    CHECK(s.totals.times_opened == 2);
    CHECK(s.open_duration == 30 * kS);
    CHECK(s.retry_after == 30 * kS);
  }
}

TEST_CASE("consecutive rule", "[breaker][consecutive]") {
  Config c;
  c.failure_threshold = 3;

  SECTION("any success resets the run; ignored results do not") {
    Breaker b(settings_of(c), 0);
    call(b, Outcome::Failure, 0);
    call(b, Outcome::Failure, 0);
    call(b, Outcome::Success, 0);
    call(b, Outcome::Failure, 0);
    call(b, Outcome::Failure, 0);
    call(b, Outcome::Ignored, 0);
    CHECK(state_at(b, 0) == State::Closed);
    CHECK(b.snapshot(0).consecutive_failures == 2);
    CHECK(b.snapshot(0).totals.ignored == 1);
    CHECK(b.snapshot(0).totals.calls == 5);  // ignored results are not calls
    CHECK(b.snapshot(0).window.calls == 5);
    call(b, Outcome::Failure, 0);
    CHECK(state_at(b, 0) == State::Open);
  }
  SECTION("a threshold of 1 opens on the first failure") {
    c.failure_threshold = 1;
    Breaker b(settings_of(c), 0);
    call(b, Outcome::Failure, 7);
    CHECK(state_at(b, 7) == State::Open);
    CHECK(b.snapshot(7).state_since == 7);
  }
  SECTION("an infinite threshold turns the rule off") {
    c.failure_threshold = std::numeric_limits<double>::infinity();
    Breaker b(settings_of(c), 0);
    for (int i = 0; i < 1000; ++i) call(b, Outcome::Failure, i);
    CHECK(state_at(b, 1000) == State::Closed);
    CHECK(b.snapshot(1000).consecutive_failures == 1000);
  }
}

TEST_CASE("failure-rate rule with minimum_calls", "[breaker][rate]") {
  Config c;
  c.failure_threshold = std::numeric_limits<double>::infinity();
  c.failure_rate_threshold = 0.5;
  c.window_size = 10;
  c.minimum_calls = 5;

  SECTION("no trip below minimum_calls; a success can complete the trip") {
    Breaker b(settings_of(c), 0);
    for (int i = 0; i < 4; ++i) call(b, Outcome::Failure, i);
    Snapshot s = b.snapshot(4);
    CHECK(s.state == State::Closed);  // 100% failures, but only 4 calls
    CHECK(s.window.calls == 4);
    CHECK(s.failure_rate == 1.0);
    call(b, Outcome::Success, 5);  // 4 of 5 failed
    s = b.snapshot(5);
    CHECK(s.state == State::Open);
    CHECK(s.window.calls == 5);  // the window is kept while open
    CHECK(s.window.failures == 4);
    CHECK(s.failure_rate == 0.8);
  }
  SECTION("exactly at the threshold trips (3 of 10 >= 0.3)") {
    c.failure_rate_threshold = 0.3;
    c.minimum_calls = 10;
    Breaker b(settings_of(c), 0);
    for (int i = 0; i < 7; ++i) call(b, Outcome::Success, 0);
    call(b, Outcome::Failure, 0);
    call(b, Outcome::Failure, 0);
    call(b, Outcome::Success, 0);  // 2 of 10
    CHECK(state_at(b, 0) == State::Closed);
    CHECK(b.snapshot(0).failure_rate == 0.2);
    call(b, Outcome::Failure, 0);  // the oldest success leaves: 3 of 10
    CHECK(state_at(b, 0) == State::Open);
    CHECK(cb::rate_reached(3, 10, 0.3));
    CHECK_FALSE(cb::rate_reached(2, 10, 0.3));
  }
  SECTION("old failures leave the count window") {
    c.window_size = 4;
    c.minimum_calls = 4;
    c.failure_rate_threshold = 0.75;
    Breaker b(settings_of(c), 0);
    call(b, Outcome::Failure, 0);
    call(b, Outcome::Failure, 0);
    call(b, Outcome::Success, 0);
    call(b, Outcome::Success, 0);  // 2 of 4
    call(b, Outcome::Failure, 0);  // F S S F: 2 of 4
    call(b, Outcome::Failure, 0);  // S S F F: 2 of 4
    call(b, Outcome::Success, 0);  // S F F S: 2 of 4
    Snapshot s = b.snapshot(0);
    CHECK(s.state == State::Closed);
    CHECK(s.window.calls == 4);
    CHECK(s.window.failures == 2);
    call(b, Outcome::Failure, 0);  // F F S F: 3 of 4
    CHECK(state_at(b, 0) == State::Open);
  }
  SECTION("time window: calls older than the window do not count") {
    c.window_type = cb::WindowType::Time;
    c.window_size = 10;  // ten buckets of 1 s
    c.minimum_calls = 3;
    Breaker b(settings_of(c), 0);
    call(b, Outcome::Failure, 0);
    call(b, Outcome::Failure, 1 * kS);
    CHECK(b.snapshot(9 * kS).window.calls == 2);
    CHECK(b.snapshot(10 * kS).window.calls == 1);  // bucket 0 left
    call(b, Outcome::Failure, 10 * kS);
    CHECK(state_at(b, 10 * kS) == State::Closed);  // 2 calls in the window
    CHECK(b.snapshot(10 * kS).window.failures == 2);
    call(b, Outcome::Failure, 10 * kS + kS / 2);
    CHECK(state_at(b, 11 * kS) == State::Open);
  }
  SECTION("the rate rule works alongside the consecutive rule") {
    c.failure_threshold = 2;
    c.minimum_calls = 10;
    Breaker b(settings_of(c), 0);
    call(b, Outcome::Failure, 0);
    call(b, Outcome::Failure, 0);
    CHECK(state_at(b, 0) == State::Open);
  }
}

TEST_CASE("slow-call rule", "[breaker][slow]") {
  Config c;
  c.failure_threshold = std::numeric_limits<double>::infinity();
  c.slow_call_duration = 1;
  c.slow_call_rate_threshold = 0.5;
  c.window_size = 4;
  c.minimum_calls = 2;

  SECTION("slow means more than slow_call_duration; slow successes trip") {
    Breaker b(settings_of(c), 0);
    call(b, Outcome::Success, 0, kS);  // exactly 1 s: not slow
    Snapshot s = b.snapshot(kS);
    CHECK(s.totals.slow == 0);
    CHECK(s.slow_rate == 0);
    call(b, Outcome::Success, kS, kS + 1);  // slow
    s = b.snapshot(3 * kS);
    CHECK(s.totals.slow == 1);
    CHECK(s.totals.failures == 0);
    CHECK(s.window.slow == 1);
    CHECK(s.state == State::Open);  // 1 slow of 2 calls >= 0.5
    CHECK(s.slow_rate == 0.5);
  }
  SECTION("a slow failure is both") {
    c.slow_call_rate_threshold = 1;
    Breaker b(settings_of(c), 0);
    call(b, Outcome::Failure, 0, 5 * kS);
    const Snapshot s = b.snapshot(5 * kS);
    CHECK(s.totals.failures == 1);
    CHECK(s.totals.slow == 1);
    CHECK(s.state == State::Closed);  // below minimum_calls
    call(b, Outcome::Success, 5 * kS, 2 * kS);
    CHECK(state_at(b, 7 * kS) == State::Open);
  }
  SECTION("slow tracking without a rate threshold only counts") {
    c.slow_call_rate_threshold.reset();
    Breaker b(settings_of(c), 0);
    for (int i = 0; i < 10; ++i) call(b, Outcome::Success, i * 10 * kS, 9 * kS);
    const Snapshot s = b.snapshot(100 * kS);
    CHECK(s.state == State::Closed);
    CHECK(s.totals.slow == 10);
    CHECK(s.slow_rate == 1.0);
  }
  SECTION("a slow successful probe re-opens when the slow rule is on") {
    c.failure_threshold = 1;
    c.recovery_timeout = 1;
    Breaker b(settings_of(c), 0);
    call(b, Outcome::Failure, 0);
    const Nanos t = kS + 1;
    const Permit p = admit(b, t);
    b.record(p, Outcome::Success, t + 2 * kS);
    const Snapshot s = b.snapshot(t + 2 * kS);
    CHECK(s.state == State::Open);
    CHECK(s.consecutive_failures == 0);  // it did succeed
    CHECK(s.consecutive_opens == 2);
    CHECK(s.probe_successes == 0);
  }
  SECTION("a slow successful probe counts as a success without the slow rule") {
    c.failure_threshold = 1;
    c.recovery_timeout = 1;
    c.slow_call_rate_threshold.reset();
    Breaker b(settings_of(c), 0);
    call(b, Outcome::Failure, 0);
    const Nanos t = kS + 1;
    const Permit p = admit(b, t);
    b.record(p, Outcome::Success, t + 2 * kS);
    CHECK(state_at(b, t + 2 * kS) == State::Closed);
    CHECK(b.snapshot(t + 2 * kS).totals.slow == 1);
  }
}

TEST_CASE("half-open probes and half_open_max_calls", "[breaker][half-open]") {
  Config c;
  c.failure_threshold = 1;
  c.recovery_timeout = 1;
  c.half_open_max_calls = 3;
  Breaker b(settings_of(c), 0);
  call(b, Outcome::Failure, 0);
  const Nanos t = kS + 1;
  const Permit p1 = admit(b, t);
  const Permit p2 = admit(b, t);
  const Permit p3 = admit(b, t);
  CHECK(p1.kind == PermitKind::Probe);
  CHECK(p1.slot == 0);
  CHECK(p2.slot == 1);
  CHECK(p3.slot == 2);
  CHECK(p1.lease == 1);
  CHECK(p2.lease == 2);
  CHECK(p3.lease == 3);
  CHECK(p1.generation == 3);
  CHECK(p3.generation == 3);
  Admission a = b.acquire(t);
  CHECK(a.rejection == Rejection::HalfOpenFull);
  CHECK(a.retry_after == cb::kUnknownWait);  // no deadline: no known time
  Snapshot s = b.snapshot(t);
  CHECK(s.state == State::HalfOpen);
  CHECK(s.probes_in_flight == 3);
  CHECK(s.retry_after == cb::kUnknownWait);

  SECTION("successes count toward the limit; all succeed -> CLOSED") {
    b.record(p1, Outcome::Success, t);
    s = b.snapshot(t);
    CHECK(s.probe_successes == 1);
    CHECK(s.probes_in_flight == 2);
    CHECK(s.consecutive_failures == 0);
    CHECK(s.state == State::HalfOpen);
    CHECK(b.acquire(t).rejection == Rejection::HalfOpenFull);  // 2 + 1 >= 3

    b.release(p2, t);  // frees its slot
    s = b.snapshot(t);
    CHECK(s.probes_in_flight == 1);
    CHECK(s.totals.released == 1);
    const Permit p4 = admit(b, t);
    CHECK(p4.slot == 0);  // the lowest free slot
    CHECK(p4.lease == 4);

    b.record(p3, Outcome::Success, t);
    CHECK(state_at(b, t) == State::HalfOpen);
    b.record(p4, Outcome::Success, t);
    s = b.snapshot(t);
    CHECK(s.state == State::Closed);
    CHECK(s.probe_successes == 0);
    CHECK(s.probes_in_flight == 0);
    CHECK(s.generation == 4);
  }
  SECTION("one failure re-opens; the other probes become late") {
    b.record(p1, Outcome::Success, t);
    b.record(p2, Outcome::Failure, t);
    s = b.snapshot(t);
    CHECK(s.state == State::Open);
    CHECK(s.consecutive_opens == 2);
    CHECK(s.probes_in_flight == 0);
    CHECK(s.probe_successes == 0);
    b.record(p3, Outcome::Success, t);
    s = b.snapshot(t);
    CHECK(s.state == State::Open);
    CHECK(s.totals.late == 1);
  }
  SECTION("an ignored probe frees its slot and counts nothing else") {
    b.record(p1, Outcome::Ignored, t);
    s = b.snapshot(t);
    CHECK(s.probes_in_flight == 2);
    CHECK(s.probe_successes == 0);
    CHECK(s.totals.ignored == 1);
    CHECK(s.totals.calls == 1);  // only the failure that opened
    CHECK(s.state == State::HalfOpen);
    CHECK(admit(b, t).slot == 0);
  }
  SECTION("a settled probe cannot free the slot a newer probe holds") {
    b.release(p1, t);
    const Permit p4 = admit(b, t);
    CHECK(p4.slot == p1.slot);
    b.release(p1, t);  // again: the slot now holds p4's lease
    b.record(p1, Outcome::Ignored, t);
    s = b.snapshot(t);
    CHECK(s.probes_in_flight == 3);
    CHECK(s.totals.released == 2);
    CHECK(b.acquire(t).rejection == Rejection::HalfOpenFull);
  }
}

TEST_CASE("probe lease expiry after half_open_max_wait", "[breaker][expiry]") {
  Config c;
  c.failure_threshold = 1;
  c.recovery_timeout = 1;
  c.half_open_max_calls = 2;
  c.half_open_max_wait = 5;
  Breaker b(settings_of(c), 0);
  call(b, Outcome::Failure, 0);
  const Nanos t = kS + 1;
  const Permit p1 = admit(b, t);

  SECTION("retry_after counts down to the expiry; exactly max_wait is not expired") {
    const Permit p2 = admit(b, t + 2 * kS);
    Admission a = b.acquire(t + 3 * kS);
    CHECK(a.rejection == Rejection::HalfOpenFull);
    CHECK(a.retry_after == 2 * kS);
    CHECK(b.snapshot(t + 3 * kS).retry_after == 2 * kS);
    a = b.acquire(t + 5 * kS);
    CHECK(a.rejection == Rejection::HalfOpenFull);
    CHECK(a.retry_after == 0);
    CHECK(state_at(b, t + 5 * kS) == State::HalfOpen);

    const Nanos late = t + 5 * kS + 1;
    a = b.acquire(late);  // p1 has now waited more than 5 s
    CHECK_FALSE(a.permitted);
    CHECK(a.rejection == Rejection::Open);  // it expired, re-opened, then refused
    CHECK(a.retry_after == kS - 1);         // re-opened as of the deadline, t + 5 s
    Snapshot s = b.snapshot(late);
    CHECK(s.state == State::Open);
    CHECK(s.totals.expired == 1);
    CHECK(s.consecutive_failures == 2);
    CHECK(s.has_failure);
    CHECK(s.last_failure_at == t + 5 * kS);  // the deadline
    CHECK(s.state_since == t + 5 * kS);
    CHECK(s.consecutive_opens == 2);
    CHECK(s.totals.times_opened == 2);
    CHECK(s.totals.rejected == 3);
    CHECK(s.probes_in_flight == 0);

    b.record(p2, Outcome::Success, late + 1);  // from the old generation
    s = b.snapshot(late + 1);
    CHECK(s.totals.late == 1);
    CHECK(s.state == State::Open);
    CHECK(s.totals.expired == 1);
  }
  SECTION("several expired probes count once per operation") {
    admit(b, t);
    b.note(Outcome::Ignored, t + 10 * kS);
    const Snapshot s = b.snapshot(t + 10 * kS);
    CHECK(s.totals.expired == 1);
    CHECK(s.totals.times_opened == 2);
    CHECK(s.totals.ignored == 1);
    CHECK(s.state == State::Open);
  }
  SECTION("record and release apply expiry first") {
    const Permit p2 = admit(b, t + 4 * kS);
    b.release(p2, t + 5 * kS + 1);  // p1 expires first, so p2 is stale
    Snapshot s = b.snapshot(t + 5 * kS + 1);
    CHECK(s.state == State::Open);
    CHECK(s.totals.expired == 1);
    CHECK(s.totals.released == 1);
    b.record(p1, Outcome::Success, t + 6 * kS);
    s = b.snapshot(t + 6 * kS);
    CHECK(s.totals.late == 1);
    CHECK(s.state == State::Open);
  }
  SECTION("snapshot never expires anything") {
    const Snapshot s = b.snapshot(t + 100 * kS);
    CHECK(s.state == State::HalfOpen);
    CHECK(s.probes_in_flight == 1);
    CHECK(s.totals.expired == 0);
    CHECK(s.retry_after == 0);  // not full: another probe may start
  }
  SECTION("a settled probe does not expire") {
    b.release(p1, t + kS);
    const Admission a = b.acquire(t + 60 * kS);
    CHECK(a.permitted);
    CHECK(b.snapshot(t + 60 * kS).totals.expired == 0);
  }
}

TEST_CASE("without half_open_max_wait probes never expire", "[breaker][expiry]") {
  Config c;
  c.failure_threshold = 1;
  c.recovery_timeout = 1;
  Breaker b(settings_of(c), 0);
  call(b, Outcome::Failure, 0);
  const Permit p = admit(b, kS + 1);
  const Nanos much_later = 1000000 * kS;
  const Admission a = b.acquire(much_later);
  CHECK(a.rejection == Rejection::HalfOpenFull);
  CHECK(a.retry_after == cb::kUnknownWait);
  CHECK(state_at(b, much_later) == State::HalfOpen);
  b.record(p, Outcome::Success, much_later);
  CHECK(state_at(b, much_later) == State::Closed);
}

TEST_CASE("stale generations update counters only", "[breaker][generation]") {
  Config c;
  c.failure_threshold = 2;

  SECTION("results that arrive after a trip") {
    Breaker b(settings_of(c), 0);
    const Permit p1 = admit(b, 0), p2 = admit(b, 0), p3 = admit(b, 0);
    b.record(p1, Outcome::Failure, kS);
    b.record(p2, Outcome::Failure, kS);
    Snapshot s = b.snapshot(kS);
    REQUIRE(s.state == State::Open);
    CHECK(s.generation == 2);
    b.record(p3, Outcome::Failure, 2 * kS);
    s = b.snapshot(2 * kS);
    CHECK(s.totals.late == 1);
    CHECK(s.totals.calls == 3);
    CHECK(s.totals.failures == 3);
    CHECK(s.consecutive_failures == 2);  // unchanged
    CHECK(s.last_failure_at == kS);      // unchanged
    CHECK(s.retry_after == 29 * kS);     // the timer did not restart
    b.record(p3, Outcome::Success, 2 * kS);
    s = b.snapshot(2 * kS);
    CHECK(s.totals.late == 2);
    CHECK(s.totals.successes == 1);
    CHECK(s.consecutive_failures == 2);
    CHECK(s.state == State::Open);
  }
  SECTION("reset while CLOSED makes outstanding permits stale, unlogged") {
    Breaker b(settings_of(c), 0);
    const Permit p = admit(b, 0);
    call(b, Outcome::Failure, 0);
    b.reset(0);
    Snapshot s = b.snapshot(0);
    CHECK(s.generation == 2);
    CHECK(s.last_transition == 0);
    CHECK(s.consecutive_failures == 0);
    b.record(p, Outcome::Failure, 0);
    s = b.snapshot(0);
    CHECK(s.totals.late == 1);
    CHECK(s.consecutive_failures == 0);
    CHECK(s.window.calls == 0);
    CHECK(s.state == State::Closed);
  }
  SECTION("a stale release counts as released and nothing else") {
    Breaker b(settings_of(c), 0);
    const Permit p = admit(b, 0);
    b.force_open(0);
    b.release(p, 0);
    const Snapshot s = b.snapshot(0);
    CHECK(s.totals.released == 1);
    CHECK(s.totals.calls == 0);
    CHECK(s.totals.late == 0);
  }
  SECTION("a stale probe cannot free a probe slot of a later half-open period") {
    c.failure_threshold = 1;
    c.recovery_timeout = 1;
    Breaker b(settings_of(c), 0);
    call(b, Outcome::Failure, 0);
    const Permit old_probe = admit(b, kS + 1);
    b.note(Outcome::Failure, kS + 1);  // re-opens
    const Permit new_probe = admit(b, 3 * kS);
    CHECK(new_probe.slot == old_probe.slot);
    b.release(old_probe, 3 * kS);
    b.record(old_probe, Outcome::Ignored, 3 * kS);
    const Snapshot s = b.snapshot(3 * kS);
    CHECK(s.probes_in_flight == 1);
    CHECK(b.acquire(3 * kS).rejection == Rejection::HalfOpenFull);
  }
}

TEST_CASE("exponential backoff with a cap", "[breaker][backoff]") {
  Config c;
  c.failure_threshold = 1;
  c.recovery_timeout = 1;
  c.backoff_multiplier = 2;
  c.max_recovery_timeout = 5;
  Breaker b(settings_of(c), 0);
  call(b, Outcome::Failure, 0);
  CHECK(b.snapshot(0).open_duration == 1 * kS);
  Nanos t = 0;
  for (Nanos expected : {2 * kS, 4 * kS, 5 * kS, 5 * kS}) {
    t = probe(b, t, Outcome::Failure);
    const Snapshot s = b.snapshot(t);
    CHECK(s.open_duration == expected);
    CHECK(s.retry_after == expected);
    CHECK(b.acquire(t + expected).rejection == Rejection::Open);
  }
  CHECK(b.snapshot(t).consecutive_opens == 5);

  SECTION("closing starts again from recovery_timeout") {
    t = probe(b, t, Outcome::Success);
    CHECK(state_at(b, t) == State::Closed);
    CHECK(b.snapshot(t).consecutive_opens == 0);
    call(b, Outcome::Failure, t);
    CHECK(b.snapshot(t).open_duration == 1 * kS);
  }
  SECTION("so does reset") {
    b.reset(t);
    call(b, Outcome::Failure, t);
    CHECK(b.snapshot(t).open_duration == 1 * kS);
  }
}

TEST_CASE("backoff without a cap stops at 1e9 s", "[breaker][backoff]") {
  Config c;
  c.failure_threshold = 1;
  c.recovery_timeout = 1;
  c.backoff_multiplier = 10;
  Breaker b(settings_of(c), 0);
  call(b, Outcome::Failure, 0);
  Nanos t = 0;
  double expected = 1;
  for (int k = 2; k <= 11; ++k) {
    t = probe(b, t, Outcome::Failure);
    expected = expected * 10 > 1e9 ? 1e9 : expected * 10;
    INFO("opening " << k);
    CHECK(b.snapshot(t).open_duration == static_cast<Nanos>(expected * 1e9));
  }
  CHECK(b.snapshot(t).open_duration == 1000000000 * kS);
}

TEST_CASE("jitter shortens the open duration by up to `jitter`, deterministically",
          "[breaker][jitter]") {
  Config c;
  c.failure_threshold = 1;
  c.recovery_timeout = 10;
  c.jitter = 0.5;
  c.rng_seed = 12345;

  auto durations = [](const Config& config, int n) {
    Breaker b(settings_of(config), 0);
    call(b, Outcome::Failure, 0);
    std::vector<Nanos> out{b.snapshot(0).open_duration};
    Nanos t = 0;
    for (int i = 1; i < n; ++i) {
      t = probe(b, t, Outcome::Failure);
      out.push_back(b.snapshot(t).open_duration);
    }
    return out;
  };

  const std::vector<Nanos> d = durations(c, 200);
  std::uint64_t rng = *c.rng_seed;
  Nanos lo = cb::kNever, hi = 0;
  for (std::size_t i = 0; i < d.size(); ++i) {
    const double u = cb::uniform01(rng);
    double want = 10e9;
    want *= 1 - 0.5 * u;
    INFO("opening " << i + 1);
    CHECK(d[i] == static_cast<Nanos>(want + 0.5));
    CHECK(d[i] >= 5 * kS);
    CHECK(d[i] <= 10 * kS);
    lo = std::min(lo, d[i]);
    hi = std::max(hi, d[i]);
  }
  CHECK(lo < 6 * kS);  // the draws do spread over the range
  CHECK(hi > 9 * kS);
  CHECK(durations(c, 200) == d);  // same seed, same durations
  c.rng_seed = 54321;
  CHECK(durations(c, 200) != d);

  SECTION("jitter 1: anywhere in (0, recovery_timeout]") {
    c.jitter = 1;
    for (Nanos x : durations(c, 200)) {
      CHECK(x > 0);
      CHECK(x <= 10 * kS);
    }
  }
  SECTION("jitter 0 does not draw from the generator") {
    c.jitter = 0;
    c.rng_seed = 12345;
    Breaker b(settings_of(c), 0);
    call(b, Outcome::Failure, 0);
    Nanos t = 0;
    for (int i = 0; i < 3; ++i) t = probe(b, t, Outcome::Failure);
    CHECK(b.snapshot(t).open_duration == 10 * kS);
    Config jittery = c;
    jittery.jitter = 0.5;
    b.reconfigure(settings_of(jittery), t);
    t = probe(b, t, Outcome::Failure);
    CHECK(b.snapshot(t).open_duration ==
          d[0]);  // the first draw of the rng_seed: reseeded
  }
}

TEST_CASE("the jitter generator is seeded on construction and on every reconfigure",
          "[breaker][jitter]") {
  // Created with jitter 0, reconfigured to jitter 0.9: without an rng_seed
  // each breaker draws its own seed (an old build used one fixed default
  // seed, so every such breaker opened for exactly the same time).
  Config plain;
  plain.failure_threshold = 1;
  plain.recovery_timeout = 100;
  Config jittery = plain;
  jittery.jitter = 0.9;
  auto open_duration = [&](const Config& created, const Config& then) {
    Breaker b(settings_of(created), 0);
    b.reconfigure(settings_of(then), 0);
    call(b, Outcome::Failure, 0);
    REQUIRE(state_at(b, 0) == State::Open);
    return b.snapshot(0).open_duration;
  };
  SECTION("no rng_seed: different durations") {
    const Nanos a = open_duration(plain, jittery);
    const Nanos b = open_duration(plain, jittery);
    const Nanos c = open_duration(plain, jittery);
    CHECK(!(a == b && b == c));
    CHECK((a != b && b != c && a != c));
  }
  SECTION("the same rng_seed: the same durations, the generator's first draw") {
    jittery.rng_seed = 777;
    const Nanos a = open_duration(plain, jittery);
    CHECK(open_duration(plain, jittery) == a);
    CHECK(open_duration(plain, jittery) == a);
    std::uint64_t rng = 777;
    CHECK(a == static_cast<Nanos>(100e9 * (1 - 0.9 * cb::uniform01(rng)) + 0.5));
  }
  SECTION("an rng_seed given at creation is applied again on reconfigure") {
    Config seeded = jittery;
    seeded.rng_seed = 99;
    Breaker b(settings_of(seeded), 0);
    call(b, Outcome::Failure, 0);
    const Nanos first = b.snapshot(0).open_duration;
    b.reset(1);
    b.reconfigure(settings_of(seeded), 1);  // the generator starts over
    call(b, Outcome::Failure, 1);
    CHECK(b.snapshot(1).open_duration == first);
  }
}

TEST_CASE("ramp-up after closing admits a growing share of calls", "[breaker][ramp]") {
  Config c;
  c.failure_threshold = 1;
  c.recovery_timeout = 1;
  c.ramp_up = 10;
  Breaker b(settings_of(c), 0);
  call(b, Outcome::Failure, 0);
  const Nanos t = probe(b, 0, Outcome::Success);  // closes at t
  REQUIRE(state_at(b, t) == State::Closed);
  CHECK(b.snapshot(t).ramp_share == 0);

  SECTION("error diffusion: the admitted share follows elapsed / ramp_up") {
    Admission a = b.acquire(t);
    CHECK_FALSE(a.permitted);
    CHECK(a.rejection == Rejection::RampUp);
    CHECK(a.retry_after == 0);

    const Nanos q = t + 2500 * kMs;  // a quarter of the way
    CHECK(b.snapshot(q).ramp_share == 0.25);
    std::vector<bool> got;
    for (int i = 0; i < 8; ++i) got.push_back(b.acquire(q).permitted);
    CHECK(got == std::vector<bool>{false, false, false, true, false, false, false, true});

    const Nanos h = t + 5 * kS;
    got.clear();
    for (int i = 0; i < 4; ++i) got.push_back(b.acquire(h).permitted);
    CHECK(got == std::vector<bool>{false, true, false, true});
    CHECK(b.snapshot(h).totals.rejected == 1 + 6 + 2);

    const Nanos end = t + 10 * kS;
    CHECK(b.snapshot(end).ramp_share == 1);
    for (int i = 0; i < 5; ++i) CHECK(b.acquire(end).permitted);
    CHECK(b.snapshot(end + 1).ramp_share == 1);
  }
  SECTION("reset does not ramp") {
    b.reset(t);
    CHECK(b.acquire(t).permitted);
    CHECK(b.snapshot(t).ramp_share == 1);
  }
  SECTION("reconfiguring ramp_up to 0 stops the ramp for good") {
    Config no_ramp = c;
    no_ramp.ramp_up = 0;
    b.reconfigure(settings_of(no_ramp), t);
    CHECK(b.acquire(t).permitted);
    b.reconfigure(settings_of(c), t);
    CHECK(b.acquire(t).permitted);
    CHECK(b.snapshot(t).ramp_share == 1);
  }
  SECTION("a different ramp_up keeps ramping with the new length") {
    Config longer = c;
    longer.ramp_up = 20;
    b.reconfigure(settings_of(longer), t);
    CHECK(b.snapshot(t + 5 * kS).ramp_share == 0.25);
  }
  SECTION("a trip ends the ramp; the next close starts a new one") {
    b.note(Outcome::Failure, t + kS);
    CHECK(state_at(b, t + kS) == State::Open);
    b.note(Outcome::Success, t + kS);  // the R6 class's on_success() closes
    CHECK(state_at(b, t + kS) == State::Closed);
    CHECK(b.snapshot(t + 2 * kS).ramp_share == 0.1);
    CHECK(b.acquire(t + kS).rejection == Rejection::RampUp);
  }
}

TEST_CASE("force_open, disable and reset", "[breaker][manual]") {
  Breaker b(settings_of(Config{}), 0);
  const Permit before = admit(b, 0);

  SECTION("force_open rejects everything with retry_after = never") {
    b.force_open(5);
    Snapshot s = b.snapshot(5);
    CHECK(s.state == State::ForcedOpen);
    CHECK(s.generation == 2);
    CHECK(s.state_since == 5);
    CHECK(s.retry_after == cb::kNever);
    const Admission a = b.acquire(1000 * kS);
    CHECK_FALSE(a.permitted);
    CHECK(a.rejection == Rejection::ForcedOpen);
    CHECK(a.retry_after == cb::kNever);
    b.force_open(6);  // already there: nothing happens
    s = b.snapshot(6);
    CHECK(s.generation == 2);
    CHECK(s.last_transition == 1);
    CHECK(s.state_since == 5);
    b.record(before, Outcome::Failure, 7);
    CHECK(b.snapshot(7).totals.late == 1);

    b.reset(8);
    s = b.snapshot(8);
    CHECK(s.state == State::Closed);
    CHECK(s.generation == 3);
    CHECK(s.last_transition == 2);
    CHECK(s.consecutive_failures == 0);
    CHECK(s.totals.rejected == 1);  // history stays
    CHECK(b.acquire(8).permitted);
  }
  SECTION("disable admits everything and records nothing") {
    b.disable(5);
    Snapshot s = b.snapshot(5);
    CHECK(s.state == State::Disabled);
    CHECK(s.generation == 2);
    CHECK(s.retry_after == 0);
    const Permit p = admit(b, 6);
    CHECK(p.kind == PermitKind::PassThrough);
    b.record(p, Outcome::Failure, 7);
    b.record(p, Outcome::Ignored, 7);
    b.release(p, 7);
    b.note(Outcome::Failure, 7);
    b.note(Outcome::Ignored, 7);
    s = b.snapshot(7);
    CHECK(s.totals.calls == 0);
    CHECK(s.totals.ignored == 0);
    CHECK(s.totals.released == 0);
    CHECK(s.consecutive_failures == 0);
    CHECK(s.state == State::Disabled);
    b.disable(8);
    CHECK(b.snapshot(8).last_transition == 1);
    b.force_open(9);
    CHECK(state_at(b, 9) == State::ForcedOpen);
    b.reset(10);
    CHECK(state_at(b, 10) == State::Closed);
    CHECK(b.snapshot(10).last_transition == 3);
  }
  SECTION("reset from OPEN clears the rules' state") {
    for (int i = 0; i < 5; ++i) call(b, Outcome::Failure, 1);
    REQUIRE(state_at(b, 1) == State::Open);
    b.reset(2);
    Snapshot s = b.snapshot(2);
    CHECK(s.state == State::Closed);
    CHECK(s.consecutive_failures == 0);
    CHECK(s.consecutive_opens == 0);
    CHECK(s.window.calls == 0);
    CHECK(s.has_failure);           // history
    CHECK(s.last_failure_at == 1);  // history
    CHECK(s.totals.failures == 5);  // history
  }
  SECTION("reset while CLOSED empties the window and bumps the generation") {
    call(b, Outcome::Failure, 1);
    b.reset(2);
    const Snapshot s = b.snapshot(2);
    CHECK(s.generation == 2);
    CHECK(s.last_transition == 0);
    CHECK(s.state_since == 0);
    CHECK(s.window.calls == 0);
    CHECK(s.consecutive_failures == 0);
  }
}

TEST_CASE("note(): the R6 class's on_success / on_failure", "[breaker][note]") {
  Config c;
  c.failure_threshold = 2;
  c.recovery_timeout = 10;
  c.slow_call_duration = 1e-9;  // a note is never slow
  Breaker b(settings_of(c), 0);

  SECTION("CLOSED: counted like a recorded call") {
    b.note(Outcome::Failure, kS);
    Snapshot s = b.snapshot(kS);
    CHECK(s.totals.calls == 1);
    CHECK(s.totals.failures == 1);
    CHECK(s.totals.slow == 0);
    CHECK(s.window.calls == 1);
    CHECK(s.consecutive_failures == 1);
    b.note(Outcome::Success, kS);
    CHECK(b.snapshot(kS).consecutive_failures == 0);
    b.note(Outcome::Ignored, kS);
    s = b.snapshot(kS);
    CHECK(s.totals.ignored == 1);
    CHECK(s.totals.calls == 2);
    b.note(Outcome::Failure, 2 * kS);
    b.note(Outcome::Failure, 3 * kS);
    CHECK(state_at(b, 3 * kS) == State::Open);
  }
  SECTION("OPEN: a failure restarts the timer; a success closes") {
    b.note(Outcome::Failure, 0);
    b.note(Outcome::Failure, 0);
    REQUIRE(state_at(b, 0) == State::Open);
    b.note(Outcome::Failure, 4 * kS);
    Snapshot s = b.snapshot(4 * kS);
    CHECK(s.state == State::Open);
    CHECK(s.retry_after == 10 * kS);
    CHECK(s.consecutive_failures == 3);
    CHECK(s.last_failure_at == 4 * kS);
    CHECK(s.last_transition == 1);  // no transition
    CHECK(s.consecutive_opens == 1);
    CHECK(b.acquire(14 * kS).rejection == Rejection::Open);
    b.note(Outcome::Success, 5 * kS);
    s = b.snapshot(5 * kS);
    CHECK(s.state == State::Closed);
    CHECK(s.consecutive_failures == 0);
    CHECK(s.consecutive_opens == 0);
  }
  SECTION("HALF_OPEN: a failure trips; a success closes") {
    b.note(Outcome::Failure, 0);
    b.note(Outcome::Failure, 0);
    const Permit p = admit(b, 10 * kS + 1);
    REQUIRE(p.kind == PermitKind::Probe);
    b.note(Outcome::Failure, 11 * kS);
    Snapshot s = b.snapshot(11 * kS);
    CHECK(s.state == State::Open);
    CHECK(s.consecutive_opens == 2);
    CHECK(s.consecutive_failures == 3);
    admit(b, 21 * kS + 1);
    b.note(Outcome::Success, 22 * kS);
    s = b.snapshot(22 * kS);
    CHECK(s.state == State::Closed);
    CHECK(s.last_transition == 5);
  }
  SECTION("FORCED_OPEN: counts only") {
    b.force_open(0);
    b.note(Outcome::Failure, kS);
    b.note(Outcome::Failure, kS);
    b.note(Outcome::Failure, 2 * kS);
    Snapshot s = b.snapshot(2 * kS);
    CHECK(s.state == State::ForcedOpen);
    CHECK(s.consecutive_failures == 3);
    CHECK(s.last_failure_at == 2 * kS);
    CHECK(s.window.calls == 0);
    b.note(Outcome::Success, 3 * kS);
    s = b.snapshot(3 * kS);
    CHECK(s.state == State::ForcedOpen);
    CHECK(s.consecutive_failures == 0);
    CHECK(s.totals.calls == 4);
  }
}

TEST_CASE("reconfigure keeps the state and applies the new rules",
          "[breaker][reconfigure]") {
  Config c;
  c.failure_threshold = std::numeric_limits<double>::infinity();
  c.failure_rate_threshold = 0.9;
  c.window_size = 10;

  SECTION("a window of another shape starts empty; the same shape is kept") {
    Breaker b(settings_of(c), 0);
    for (int i = 0; i < 4; ++i) call(b, Outcome::Failure, 0);
    Config same_shape = c;
    same_shape.failure_rate_threshold = 0.95;
    same_shape.minimum_calls = 3;
    b.reconfigure(settings_of(same_shape), 0);
    CHECK(b.snapshot(0).window.calls == 4);
    CHECK(b.settings().failure_rate_threshold == 0.95);
    Config bigger = same_shape;
    bigger.window_size = 20;
    b.reconfigure(settings_of(bigger), 0);
    CHECK(b.snapshot(0).window.calls == 0);
    for (int i = 0; i < 2; ++i) call(b, Outcome::Failure, 0);
    Config timed = bigger;
    timed.window_type = cb::WindowType::Time;
    timed.window_size = 10;
    b.reconfigure(settings_of(timed), 0);
    CHECK(b.snapshot(0).window.calls == 0);
    for (int i = 0; i < 2; ++i) call(b, Outcome::Failure, 0);
    Config timed_same = timed;
    timed_same.failure_rate_threshold = 1;
    b.reconfigure(settings_of(timed_same), 0);
    CHECK(b.snapshot(0).window.calls == 2);
    Config timed_wider = timed_same;
    timed_wider.window_size = 20;
    b.reconfigure(settings_of(timed_wider), 0);
    CHECK(b.snapshot(0).window.calls == 0);
  }
  SECTION("new timeouts apply to the current opening") {
    Config d;
    d.failure_threshold = 1;
    d.recovery_timeout = 10;
    d.backoff_multiplier = 2;
    Breaker b(settings_of(d), 0);
    call(b, Outcome::Failure, 0);
    const Nanos t = probe(b, 0, Outcome::Failure);  // second opening: 20 s
    CHECK(b.snapshot(t).open_duration == 20 * kS);
    d.recovery_timeout = 5;
    b.reconfigure(settings_of(d), t);
    CHECK(b.snapshot(t).open_duration == 10 * kS);  // 5 s * 2
    CHECK(b.snapshot(t).retry_after == 10 * kS);
    d.max_recovery_timeout = 7;
    b.reconfigure(settings_of(d), t);
    CHECK(b.snapshot(t).open_duration == 7 * kS);
    d.backoff_multiplier = 1;
    b.reconfigure(settings_of(d), t);
    CHECK(b.snapshot(t).open_duration == 5 * kS);
    d.jitter = 0.5;  // not a timing change: nothing is recomputed
    b.reconfigure(settings_of(d), t);
    CHECK(b.snapshot(t).open_duration == 5 * kS);
  }
  SECTION("the open_for hint survives a reconfigure, within the new cap") {
    Config d;
    d.failure_threshold = 1;
    Breaker b(settings_of(d), 0);
    call(b, Outcome::Failure, 0, 0, 60 * kS);
    CHECK(b.snapshot(0).open_duration == 60 * kS);
    d.recovery_timeout = 20;
    b.reconfigure(settings_of(d), 0);
    CHECK(b.snapshot(0).open_duration == 60 * kS);
    d.max_recovery_timeout = 40;
    b.reconfigure(settings_of(d), 0);
    CHECK(b.snapshot(0).open_duration == 40 * kS);
  }
  SECTION("while CLOSED the next opening's duration is recomputed") {
    Config d;
    Breaker b(settings_of(d), 0);
    d.recovery_timeout = 7;
    b.reconfigure(settings_of(d), 0);
    CHECK(b.snapshot(0).open_duration == 7 * kS);
  }
}

TEST_CASE("the transition log", "[breaker][log]") {
  Config c;
  c.failure_threshold = 1;
  c.recovery_timeout = 1;
  Breaker b(settings_of(c), 0);
  cb::Transition buf[64];
  CHECK(b.transitions_since(0, buf, 64) == 0);

  call(b, Outcome::Failure, 10);
  const Nanos t = probe(b, 10, Outcome::Success);
  b.force_open(t + 5);
  REQUIRE(b.transitions_since(0, buf, 64) == 4);
  CHECK(buf[0].seq == 1);
  CHECK(buf[0].at == 10);
  CHECK(buf[0].from == State::Closed);
  CHECK(buf[0].to == State::Open);
  CHECK(buf[1].seq == 2);
  CHECK(buf[1].at == t);
  CHECK(buf[1].from == State::Open);
  CHECK(buf[1].to == State::HalfOpen);
  CHECK(buf[2].seq == 3);
  CHECK(buf[2].from == State::HalfOpen);
  CHECK(buf[2].to == State::Closed);
  CHECK(buf[3].seq == 4);
  CHECK(buf[3].at == t + 5);
  CHECK(buf[3].to == State::ForcedOpen);
  REQUIRE(b.transitions_since(2, buf, 64) == 2);
  CHECK(buf[0].seq == 3);
  CHECK(buf[1].seq == 4);
  REQUIRE(b.transitions_since(0, buf, 1) == 1);  // the newest kept
  CHECK(buf[0].seq == 4);
  CHECK(b.transitions_since(4, buf, 64) == 0);
  CHECK(b.transitions_since(99, buf, 64) == 0);
  CHECK(b.transitions_since(0, buf, 0) == 0);

  // 40 transitions in all: only the last 32 are kept.
  for (int i = 0; i < 18; ++i) {
    b.reset(t + 10 + i);
    b.force_open(t + 10 + i);
  }
  CHECK(b.snapshot(t + 100).last_transition == 40);
  REQUIRE(b.transitions_since(0, buf, 64) == 32);
  for (std::size_t i = 0; i < 32; ++i) {
    INFO("entry " << i);
    CHECK(buf[i].seq == 9 + i);
    CHECK(buf[i].to == (buf[i].seq % 2 == 0 ? State::ForcedOpen : State::Closed));
  }
  REQUIRE(b.transitions_since(35, buf, 64) == 5);
  CHECK(buf[0].seq == 36);
  CHECK(buf[4].seq == 40);
  REQUIRE(b.transitions_since(0, buf, 3) == 3);
  CHECK(buf[0].seq == 38);
  CHECK(buf[2].seq == 40);
  REQUIRE(b.transitions_since(30, buf, 3) == 3);
  CHECK(buf[0].seq == 38);
}

TEST_CASE("retry_after values", "[breaker][retry-after]") {
  SECTION("CLOSED and DISABLED: 0; FORCED_OPEN: never") {
    Breaker b(settings_of(Config{}), 0);
    CHECK(b.snapshot(0).retry_after == 0);
    b.disable(0);
    CHECK(b.snapshot(0).retry_after == 0);
    b.force_open(0);
    CHECK(b.snapshot(0).retry_after == cb::kNever);
  }
  SECTION("OPEN: time left, never negative") {
    Config c;
    c.failure_threshold = 1;
    Breaker b(settings_of(c), 0);
    call(b, Outcome::Failure, 100);
    CHECK(b.snapshot(100).retry_after == 30 * kS);
    CHECK(b.snapshot(100 + 10 * kS).retry_after == 20 * kS);
    CHECK(b.acquire(100 + 10 * kS).retry_after == 20 * kS);
    CHECK(b.snapshot(100 + 30 * kS).retry_after == 0);
    CHECK(b.snapshot(100 + 90 * kS).retry_after == 0);  // OPEN until an acquire
    CHECK(b.snapshot(100 + 90 * kS).state == State::Open);
  }
  SECTION("HALF_OPEN full: until the earliest probe in flight expires") {
    Config c;
    c.failure_threshold = 1;
    c.recovery_timeout = 1;
    c.half_open_max_calls = 3;
    c.half_open_max_wait = 10;
    Breaker b(settings_of(c), 0);
    call(b, Outcome::Failure, 0);
    const Nanos t = 2 * kS;
    const Permit p1 = admit(b, t);
    CHECK(b.snapshot(t).retry_after == 0);  // not full
    admit(b, t + 2 * kS);
    admit(b, t + 4 * kS);
    Admission a = b.acquire(t + 5 * kS);
    CHECK(a.rejection == Rejection::HalfOpenFull);
    CHECK(a.retry_after == 5 * kS);
    CHECK(b.snapshot(t + 5 * kS).retry_after == 5 * kS);
    b.release(p1, t + 5 * kS);
    admit(b, t + 5 * kS);
    a = b.acquire(t + 5 * kS);
    CHECK(a.retry_after == 7 * kS);  // the probe of t + 2 s is now the oldest
    CHECK(b.snapshot(t + 12 * kS).retry_after == 0);
  }
}

TEST_CASE("the open_for hint", "[breaker][open-for]") {
  Config c;
  c.failure_threshold = 1;  // recovery_timeout 30 s

  SECTION("longer than the computed duration: used") {
    Breaker b(settings_of(c), 0);
    call(b, Outcome::Failure, 0, 0, 60 * kS);
    CHECK(b.snapshot(0).open_duration == 60 * kS);
    CHECK(b.acquire(60 * kS).rejection == Rejection::Open);
    CHECK(b.acquire(60 * kS + 1).permitted);
  }
  SECTION("shorter: the computed duration wins") {
    Breaker b(settings_of(c), 0);
    call(b, Outcome::Failure, 0, 0, 10 * kS);
    CHECK(b.snapshot(0).open_duration == 30 * kS);
    call(b, Outcome::Failure, 30 * kS + 1, 0, 0);  // a probe's failure, hint 0
    CHECK(b.snapshot(30 * kS + 1).open_duration == 30 * kS);
  }
  SECTION("capped by max_recovery_timeout") {
    c.max_recovery_timeout = 45;
    Breaker b(settings_of(c), 0);
    call(b, Outcome::Failure, 0, 0, 60 * kS);
    CHECK(b.snapshot(0).open_duration == 45 * kS);
    const Nanos t = probe(b, 0, Outcome::Failure, cb::kNever);
    CHECK(b.snapshot(t).open_duration == 45 * kS);
  }
  SECTION("without max_recovery_timeout a hint is capped at an hour") {
    Breaker b(settings_of(c), 0);
    call(b, Outcome::Failure, 0, 0, 7200 * kS);  // two hours
    CHECK(b.snapshot(0).open_duration == 3600 * kS);
    const Nanos t = probe(b, 0, Outcome::Failure, cb::kNever);
    CHECK(b.snapshot(t).open_duration == 3600 * kS);
  }
  SECTION("only the failure that opens carries it") {
    c.failure_threshold = 2;
    Breaker b(settings_of(c), 0);
    call(b, Outcome::Failure, 0, 0, 60 * kS);
    call(b, Outcome::Failure, 0);
    CHECK(b.snapshot(0).open_duration == 30 * kS);
  }
  SECTION("on a probe's failure, and not carried to the next opening") {
    Breaker b(settings_of(c), 0);
    call(b, Outcome::Failure, 0);
    Nanos t = probe(b, 0, Outcome::Failure, 90 * kS);
    CHECK(b.snapshot(t).open_duration == 90 * kS);
    t = probe(b, t, Outcome::Failure);
    CHECK(b.snapshot(t).open_duration == 30 * kS);
  }
  SECTION("a negative hint means none") {
    Breaker b(settings_of(c), 0);
    call(b, Outcome::Failure, 0, 0, -5);
    CHECK(b.snapshot(0).open_duration == 30 * kS);
  }
  SECTION("with jitter the hint is still a lower bound") {
    c.jitter = 1;
    Breaker b(settings_of(c), 0);
    call(b, Outcome::Failure, 0, 0, 30 * kS);
    Nanos t = 0;
    for (int i = 0; i < 20; ++i) {
      CHECK(b.snapshot(t).open_duration == 30 * kS);
      t = probe(b, t, Outcome::Failure, 30 * kS);
    }
  }
}

TEST_CASE("acquire, record and release never allocate", "[breaker][alloc]") {
  // Every rule, in milliseconds, on a 50 ms time window.
  Config c = cb_test::every_rule_config(0.001);
  c.window_type = cb::WindowType::Time;
  c.window_size = 0.05;
  const cb::Settings settings = settings_of(c);
  Breaker b(settings, 0);

  std::uint64_t admitted = 0, rejected = 0, probes = 0, seen = 0;
  // Some permits are held for a while (a fixed ring, no allocation), so that
  // calls are slow, results arrive late and probes expire.
  constexpr int kHeld = 40;
  Permit held[kHeld];
  bool holding[kHeld] = {};
  cb::Transition log[cb::TransitionLog::kCapacity];
  Nanos t = 0;
  const std::uint64_t before = cbtest::allocations();
  for (int i = 0; i < 10000; ++i) {
    t += 97 * 1000;  // 97 us; time never goes back
    // Alternating bad (mostly failing) and good (mostly succeeding) phases.
    const bool bad = (i / 500) % 2 == 0;
    const int r = i % 7;
    const Outcome o = (r == 0 || (bad && r < 4)) ? Outcome::Failure : Outcome::Success;
    const Admission a = b.acquire(t);
    if (!a.permitted) {
      ++rejected;
      if (i % 173 == 0) b.note(i % 2 == 0 ? Outcome::Failure : Outcome::Success, t);
    } else {
      ++admitted;
      if (a.permit.kind == PermitKind::Probe) ++probes;
      if (i % 3 == 0) {
        const int k = (i / 3) % kHeld;
        if (holding[k]) b.record(held[k], o, t, r == 4 ? 5 * kMs : -1);
        held[k] = a.permit;
        holding[k] = true;
      } else if (r == 6) {
        b.release(a.permit, t);
      } else {
        b.record(a.permit, o, t, r == 4 ? 5 * kMs : -1);
      }
    }
    if (i % 100 == 0) {
      seen += b.snapshot(t).totals.calls;
      seen += b.transitions_since(0, log, cb::TransitionLog::kCapacity);
    }
  }
  const std::uint64_t after = cbtest::allocations();
  CHECK(after == before);

  // The loop did go through every state the rules reach.
  const Snapshot s = b.snapshot(t);
  CAPTURE(admitted, rejected, probes, s.totals.times_opened, s.totals.expired,
          s.totals.released, s.totals.slow, s.totals.late);
  CHECK(admitted > 1000);
  CHECK(rejected > 100);
  CHECK(probes > 100);
  CHECK(s.totals.times_opened > 100);
  CHECK(s.totals.released > 100);
  CHECK(s.totals.slow > 100);
  CHECK(s.totals.late > 100);
  CHECK(s.totals.expired > 0);
  CHECK(seen > 0);

  // The counting allocator does count (so the check above can fail).
  const std::uint64_t before_probe = cbtest::allocations();
  g_sink = ::operator new(16);
  ::operator delete(g_sink);
  CHECK(cbtest::allocations() == before_probe + 1);
}

// ---------------------------------------------------------------------------
// Regressions: defects found while writing these tests, now fixed.

TEST_CASE("backoff of a zero recovery_timeout stays zero (no 0 * Inf = NaN)",
          "[breaker][backoff]") {
  // recovery_timeout 0 (or anything below 0.5 ns) with backoff: after enough
  // consecutive openings std::pow overflows to Inf, 0 * Inf is NaN, and
  // static_cast<Nanos>(NaN + 0.5) is undefined (INT64_MIN on x86-64); the
  // snapshot's retry_after then overflows.
  Config c;
  c.failure_threshold = 1;
  c.recovery_timeout = 0;
  c.backoff_multiplier = 1e6;
  Breaker b(settings_of(c), 0);
  call(b, Outcome::Failure, 0);
  Nanos t = 0;
  for (int i = 0; i < 60; ++i) {
    t += 1;
    const Permit p = admit(b, t);
    b.record(p, Outcome::Failure, t);
  }
  const Snapshot s = b.snapshot(t + 5);
  CHECK(s.consecutive_opens == 61);
  CHECK(s.open_duration == 0);
  CHECK(s.retry_after == 0);
}

TEST_CASE(
    "lowering half_open_max_calls to the probe successes so far closes "
    "the breaker",
    "[breaker][reconfigure]") {
  // With no probe in flight and probe_successes >= the new limit, every
  // acquire is HalfOpenFull (retry_after 0) and nothing can close or re-open
  // the breaker: probes neither succeed nor expire.
  Config c;
  c.failure_threshold = 1;
  c.recovery_timeout = 1;
  c.half_open_max_calls = 3;
  c.half_open_max_wait = 1;
  Breaker b(settings_of(c), 0);
  call(b, Outcome::Failure, 0);
  const Nanos t = 2 * kS;
  call(b, Outcome::Success, t);
  call(b, Outcome::Success, t);  // probe_successes 2 of 3
  c.half_open_max_calls = 2;
  b.reconfigure(settings_of(c), t);
  const Admission a = b.acquire(t + 1000 * kS);
  CHECK((a.permitted || state_at(b, t + 1000 * kS) != State::HalfOpen));
}

TEST_CASE("a probe settled twice counts once", "[breaker][half_open]") {
  Config c;
  c.failure_threshold = 1;
  c.recovery_timeout = 1;
  c.half_open_max_calls = 2;
  Breaker b(settings_of(c), 0);
  call(b, Outcome::Failure, 0);
  const Nanos t = 2 * kS;
  const Permit p = admit(b, t);
  b.record(p, Outcome::Success, t);
  b.record(p, Outcome::Success, t);  // the same permit again
  Snapshot s = b.snapshot(t);
  CHECK(s.state == State::HalfOpen);
  CHECK(s.probe_successes == 1);
  CHECK(s.totals.late == 1);
  const Permit q = admit(b, t);
  b.release(q, t);
  b.record(q, Outcome::Failure, t);  // released, then recorded: too late
  s = b.snapshot(t);
  CHECK(s.state == State::HalfOpen);
  CHECK(s.totals.late == 2);
}
