// The API of version 2 (CIRCUITBREAKER_API_VERSION): probe deadlines from
// half_open_max_wait or the caller's probe_lease, expiry as of the deadline,
// kUnknownWait, what record() / note() return, lease serials, and breakers
// whose state block and lock live outside them (ExternalStore).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

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

static_assert(CIRCUITBREAKER_API_VERSION >= 2);

namespace {

using cb_test::admit;
using cb_test::kS;
using cb_test::settings_of;

Config one_failure_opens(double recovery_timeout) {
  Config c;
  c.failure_threshold = 1;
  c.recovery_timeout = recovery_timeout;
  return c;
}

void trip(Breaker& b, Nanos now) {
  REQUIRE(b.record(admit(b, now), Outcome::Failure, now));
  REQUIRE(b.snapshot(now).state == State::Open);
}

}  // namespace

TEST_CASE("a lost probe re-opens the breaker as of its deadline", "[breaker][lease]") {
  // half_open_max_wait 30 s, recovery_timeout 30 s, one failure opens.
  Config c = one_failure_opens(30);
  c.half_open_max_wait = 30;
  Breaker b(settings_of(c), 0);
  trip(b, 0);
  const Permit lost = admit(b, 31 * kS);  // a probe, never settled
  CHECK(lost.kind == PermitKind::Probe);

  // The next call comes an hour later: the probe expired at 61 s, the
  // breaker re-opened then, and that open period ended at 91 s.
  const Admission a = b.acquire(3600 * kS);
  REQUIRE(a.permitted);
  CHECK(a.permit.kind == PermitKind::Probe);
  const Snapshot s = b.snapshot(3600 * kS);
  CHECK(s.state == State::HalfOpen);
  CHECK(s.state_since == 3600 * kS);
  CHECK(s.totals.expired == 1);
  CHECK(s.totals.times_opened == 2);
  CHECK(s.last_failure_at == 61 * kS);
  CHECK(s.consecutive_failures == 2);
  cb::Transition log[cb::TransitionLog::kCapacity];
  const std::size_t n = b.transitions_since(0, log, cb::TransitionLog::kCapacity);
  REQUIRE(n == 4);
  CHECK((log[2].from == State::HalfOpen && log[2].to == State::Open));
  CHECK(log[2].at == 61 * kS);
  CHECK(log[2].seq == 3);
  CHECK((log[3].from == State::Open && log[3].to == State::HalfOpen));
  CHECK(log[3].at == 3600 * kS);

  SECTION("noticed while the re-opening still runs: rejected until it ends") {
    Breaker b2(settings_of(c), 0);
    trip(b2, 0);
    admit(b2, 31 * kS);
    const Admission r = b2.acquire(80 * kS);
    CHECK(r.rejection == Rejection::Open);
    CHECK(r.retry_after == 11 * kS);  // 61 s + 30 s - 80 s
    CHECK(b2.snapshot(80 * kS).last_failure_at == 61 * kS);
  }
}

TEST_CASE("probe_lease gives probes a deadline when half_open_max_wait is unset",
          "[breaker][lease]") {
  Breaker b(settings_of(one_failure_opens(1)), 0);
  trip(b, 0);
  const Nanos t = kS + 1;

  SECTION("the lease's deadline is the wait reported when full") {
    const Permit p = admit(b, t, 10 * kS);
    Admission a = b.acquire(t + 4 * kS, 10 * kS);
    CHECK(a.rejection == Rejection::HalfOpenFull);
    CHECK(a.retry_after == 6 * kS);
    CHECK(b.snapshot(t + 4 * kS).retry_after == 6 * kS);
    a = b.acquire(t + 10 * kS);  // exactly at the deadline: not expired yet
    CHECK(a.rejection == Rejection::HalfOpenFull);
    CHECK(a.retry_after == 0);
    a = b.acquire(t + 10 * kS + 1);
    CHECK(a.rejection == Rejection::Open);  // expired: re-opened as of t + 10 s
    CHECK(a.retry_after == kS - 1);
    CHECK(b.snapshot(t + 10 * kS + 1).totals.expired == 1);
    CHECK(b.record(p, Outcome::Success, t + 11 * kS));  // late, but recorded
    CHECK(b.snapshot(t + 11 * kS).totals.late == 1);
  }
  SECTION("no lease (kNever, or negative): the wait is unknown, never 0") {
    for (const Nanos lease : {cb::kNever, Nanos{-1}}) {
      Breaker b2(settings_of(one_failure_opens(1)), 0);
      trip(b2, 0);
      admit(b2, t, lease);
      const Admission a = b2.acquire(t + 1000 * kS);
      CHECK(a.rejection == Rejection::HalfOpenFull);
      CHECK(a.retry_after == cb::kUnknownWait);
      CHECK(b2.snapshot(t + 1000 * kS).retry_after == cb::kUnknownWait);
      CHECK(b2.snapshot(t).totals.expired == 0);
    }
  }
  SECTION("a huge lease saturates instead of overflowing") {
    admit(b, t, cb::kNever - 1);
    const Admission a = b.acquire(t + 1);
    CHECK(a.rejection == Rejection::HalfOpenFull);
    CHECK(a.retry_after == cb::kUnknownWait);  // the deadline is kNever: none
  }
  SECTION("a lease of 0 expires one nanosecond later") {
    admit(b, t, 0);
    CHECK(b.acquire(t).rejection == Rejection::HalfOpenFull);
    CHECK(b.acquire(t + 1).rejection == Rejection::Open);
  }
}

TEST_CASE("half_open_max_wait overrides the caller's probe_lease", "[breaker][lease]") {
  Config c = one_failure_opens(1);
  c.half_open_max_wait = 5;
  c.half_open_max_calls = 2;
  Breaker b(settings_of(c), 0);
  trip(b, 0);
  const Nanos t = kS + 1;
  admit(b, t, cb::kNever);
  admit(b, t + kS, 100 * kS);
  const Admission a = b.acquire(t + 2 * kS, 1);
  CHECK(a.rejection == Rejection::HalfOpenFull);
  CHECK(a.retry_after == 3 * kS);  // the first probe's deadline, t + 5 s
}

TEST_CASE("mixed deadlines: the earliest one counts", "[breaker][lease]") {
  Config c = one_failure_opens(1);
  c.half_open_max_calls = 3;
  Breaker b(settings_of(c), 0);
  trip(b, 0);
  const Nanos t = kS + 1;
  admit(b, t);               // no deadline
  admit(b, t, 20 * kS);      // t + 20 s
  admit(b, t + kS, 8 * kS);  // t + 9 s
  CHECK(b.acquire(t + 2 * kS).retry_after == 7 * kS);
  const Admission a = b.acquire(t + 9 * kS + 1);
  CHECK(a.rejection == Rejection::Open);
  cb::Transition log[4];
  const std::size_t n = b.transitions_since(2, log, 4);
  REQUIRE(n == 1);
  CHECK(log[0].at == t + 9 * kS);
}

TEST_CASE("record() and note() say whether they recorded", "[breaker][record]") {
  Breaker b(settings_of(one_failure_opens(1)), 0);
  const Permit counted = admit(b, 0);
  CHECK(b.record(counted, Outcome::Success, 0));
  CHECK(b.record(counted, Outcome::Ignored, 0));  // counts as ignored
  CHECK(b.note(Outcome::Success, 0));
  CHECK(b.note(Outcome::Ignored, 0));

  b.disable(1);
  const Permit pass = admit(b, 1);
  CHECK(pass.kind == PermitKind::PassThrough);
  CHECK_FALSE(b.record(pass, Outcome::Failure, 1));
  CHECK_FALSE(b.record(pass, Outcome::Success, 1));
  CHECK_FALSE(b.note(Outcome::Failure, 1));
  const Snapshot s = b.snapshot(1);
  CHECK(s.totals.calls == 2);  // the counted permit and note(Success)
  CHECK(s.totals.ignored == 2);

  b.reset(2);
  CHECK_FALSE(b.record(pass, Outcome::Failure, 2));  // a pass-through stays one
  const Permit stale = admit(b, 2);
  b.reset(3);
  CHECK(b.record(stale, Outcome::Failure, 3));  // late: counters only
  CHECK(b.snapshot(3).totals.late == 1);
  CHECK(b.snapshot(3).state == State::Closed);
}

TEST_CASE("ramp-up rejections say RampUp and that the next call may pass",
          "[breaker][ramp]") {
  Config c = one_failure_opens(1);
  c.ramp_up = 10;
  Breaker b(settings_of(c), 0);
  trip(b, 0);
  REQUIRE(b.record(admit(b, kS + 1), Outcome::Success, kS + 1));
  REQUIRE(b.snapshot(kS + 1).state == State::Closed);
  const Admission a = b.acquire(kS + 2);
  CHECK_FALSE(a.permitted);
  CHECK(a.rejection == Rejection::RampUp);
  CHECK(a.retry_after == 0);
  CHECK(b.snapshot(kS + 2).ramp_share < 1);
}

TEST_CASE("lease serials restart in every half-open period", "[breaker][lease]") {
  Config c = one_failure_opens(1);
  c.half_open_max_calls = 2;
  Breaker b(settings_of(c), 0);
  trip(b, 0);
  const Permit p1 = admit(b, kS + 1);
  const Permit p2 = admit(b, kS + 1);
  CHECK(p1.lease == 1);
  CHECK(p2.lease == 2);
  b.record(p1, Outcome::Failure, kS + 2);  // re-opens
  const Nanos t = b.snapshot(kS + 2).retry_after + kS + 3;
  const Permit q1 = admit(b, t);
  CHECK(q1.lease == 1);                   // the same serial as p1 ...
  CHECK(q1.slot == p1.slot);              // ... in the same slot ...
  CHECK(q1.generation != p1.generation);  // ... but never the same lease
  b.release(p1, t);                       // stale: frees nothing
  CHECK(b.acquire(t).permitted);          // the second slot
  CHECK(b.acquire(t).rejection == Rejection::HalfOpenFull);
}

TEST_CASE("a breaker on a state block and a lock that live elsewhere",
          "[breaker][store]") {
  using Store = cb::ExternalStore<cb::SpinLock>;
  using Shared = cb::BasicBreaker<Store>;
  cb::BreakerState block;  // think: a shared-memory mapping
  cb::SpinLock lock;
  const cb::Settings s = settings_of(one_failure_opens(1));
  Shared first(Store(block, lock), s, 0);
  const Admission a = first.acquire(0);
  REQUIRE(a.permitted);
  CHECK(first.record(a.permit, Outcome::Failure, 0));
  CHECK(block.state == State::Open);

  // A second breaker attaches to the same block: it sees and changes the
  // same state, and attaching changes nothing.
  cb::BreakerState copy;
  std::memcpy(static_cast<void*>(&copy), &block, sizeof block);
  Shared second(Shared::Attach{}, Store(block, lock), s);
  CHECK(std::memcmp(static_cast<const void*>(&copy), &block, sizeof block) == 0);
  CHECK(second.snapshot(0).state == State::Open);
  const Admission p = second.acquire(kS + 1);
  REQUIRE(p.permitted);
  CHECK(first.snapshot(kS + 1).state == State::HalfOpen);
  CHECK(first.record(p.permit, Outcome::Success, kS + 1));
  CHECK(second.snapshot(kS + 1).state == State::Closed);
}

TEST_CASE("state block sizes", "[breaker][sizeof]") {
  CHECK(sizeof(cb::BreakerState) <= cb::kMaxBreakerStateBytes);
  CHECK(sizeof(cb::Breaker) <= cb::kMaxBreakerBytes);
  // Capacities users see did not shrink.
  CHECK(cb::kMaxCountWindow == 1024);
  CHECK(cb::kMaxHalfOpenCalls == 32);
  CHECK(cb::TransitionLog::kCapacity == 32);
  CHECK(cb::kHistoryBuckets == 60);
  CHECK(cb::kHistoryBucketWidth == 5 * kS);
}

TEST_CASE("a rejection names the state that refused the call", "[leases][rejection]") {
  Config c;
  c.failure_threshold = 1;
  c.ramp_up = 10;
  c.recovery_timeout = 1;
  Breaker b(settings_of(c), 0);
  Admission a = b.acquire(0);
  b.record(a.permit, Outcome::Failure, 0);
  const Admission open = b.acquire(kS / 2);
  CHECK_FALSE(open.permitted);
  CHECK(open.state == State::Open);
  CHECK(open.rejection == Rejection::Open);

  const Admission probe = b.acquire(2 * kS);  // the probe, held
  REQUIRE(probe.permitted);
  const Admission full = b.acquire(2 * kS);
  CHECK(full.state == State::HalfOpen);
  CHECK(full.rejection == Rejection::HalfOpenFull);
  CHECK(full.retry_after == cb::kUnknownWait);
  b.record(probe.permit, Outcome::Success, 2 * kS);

  const Admission ramp = b.acquire(2 * kS);  // just closed: nothing admitted yet
  CHECK_FALSE(ramp.permitted);
  CHECK(ramp.state == State::Closed);
  CHECK(ramp.rejection == Rejection::RampUp);
  CHECK(ramp.retry_after == 0);

  b.force_open(3 * kS);
  const Admission forced = b.acquire(3 * kS);
  CHECK(forced.state == State::ForcedOpen);
  CHECK(forced.retry_after == cb::kNever);
}

TEST_CASE("an async probe's lease is its timeout, else recovery_timeout",
          "[leases][async]") {
  Config c;
  c.recovery_timeout = 30;
  const cb::Settings s = settings_of(c);
  CHECK(cb::probe_hold(s, std::optional<Nanos>(5 * kS)) == 5 * kS);
  CHECK(cb::probe_hold(s, std::nullopt) == 30 * kS);
  // half_open_max_wait wins over the lease, in acquire().
  c.half_open_max_wait = 12;
  c.failure_threshold = 1;
  Breaker b(settings_of(c), 0);
  b.record(b.acquire(0).permit, Outcome::Failure, 0);
  REQUIRE(b.acquire(31 * kS, cb::probe_hold(b.settings(), 5 * kS)).permitted);
  CHECK(b.acquire(31 * kS).retry_after == 12 * kS);
}

TEST_CASE("how long a probe may hold its slot: one rule for every caller and store",
          "[leases][probe-hold]") {
  Config c;
  c.recovery_timeout = 30;
  cb::Settings s = settings_of(c);
  // A holder that always settles (kNever, or any negative lease): no deadline.
  CHECK(cb::probe_hold(s, cb::kNever) == cb::kNever);
  CHECK(cb::probe_hold(s, Nanos{-1}) == cb::kNever);
  CHECK(cb::probe_deadline(s, 7, cb::kNever) == cb::kNever);
  // Its own bound, or recovery_timeout when it gives none.
  CHECK(cb::probe_hold(s, 0) == 0);
  CHECK(cb::probe_hold(s, 2 * kS) == 2 * kS);
  CHECK(cb::probe_deadline(s, 7, 2 * kS) == 7 + 2 * kS);
  CHECK(cb::probe_hold(s, std::nullopt) == 30 * kS);
  // A floor (the fleet's lease) lifts a shorter hold, never kNever.
  CHECK(cb::probe_hold(s, std::nullopt, 60 * kS) == 60 * kS);
  CHECK(cb::probe_hold(s, 0, kS) == kS);
  CHECK(cb::probe_hold(s, cb::kNever, kS) == cb::kNever);
  // half_open_max_wait wins over every lease, the floor still applies.
  c.half_open_max_wait = 0.25;
  s = settings_of(c);
  CHECK(cb::probe_hold(s, cb::kNever) == kS / 4);
  CHECK(cb::probe_hold(s, 5 * kS) == kS / 4);
  CHECK(cb::probe_hold(s, std::nullopt) == kS / 4);
  CHECK(cb::probe_hold(s, std::nullopt, kS) == kS);
  CHECK(cb::probe_deadline(s, 7, cb::kNever) == 7 + kS / 4);
  // Saturates.
  CHECK(cb::probe_deadline(s, cb::kNever - 1, 5 * kS) == cb::kNever);
}

TEST_CASE("the jitter factor: uniform in (1 - jitter, 1], no draw without jitter",
          "[leases][jitter]") {
  std::uint64_t rng = 42;
  CHECK(cb::draw_jitter_factor(0, rng) == 1);
  CHECK(rng == 42);
  for (int i = 0; i < 1000; ++i) {
    const double f = cb::draw_jitter_factor(0.25, rng);
    CHECK(f > 0.75);
    CHECK(f <= 1);
  }
  // The same draws as the generator's: breakers seeded alike open alike.
  std::uint64_t a = 7, b = 7;
  CHECK(cb::draw_jitter_factor(0.5, a) == 1 - 0.5 * cb::uniform01(b));
}

TEST_CASE("random_hex: tokens and ids of the digits asked for", "[leases][random]") {
  std::uint64_t a = 1, b = 1;
  const std::string t = cb::random_hex(a, 32);
  CHECK(t.size() == 32);
  CHECK(t.find_first_not_of("0123456789abcdef") == std::string::npos);
  // Two words: 16 digits of each.
  char buf[40];
  const unsigned long long w1 = cb::splitmix64(b), w2 = cb::splitmix64(b);
  std::snprintf(buf, sizeof buf, "%016llx%016llx", w1, w2);
  CHECK(t == buf);
  // A shorter last group: the top bits of its word.
  std::uint64_t c = 9, d = 9;
  const std::string id = cb::random_hex(c, 24);
  const unsigned long long x1 = cb::splitmix64(d), x2 = cb::splitmix64(d) >> 32;
  std::snprintf(buf, sizeof buf, "%016llx%08llx", x1, x2);
  CHECK(id == buf);
  CHECK(cb::random_hex(c, 0).empty());
}

TEST_CASE("counts from doubles saturate, and manual clock readings stay in range",
          "[types][clock]") {
  CHECK(cb::count_from_double(-1) == 0);
  CHECK(cb::count_from_double(std::numeric_limits<double>::quiet_NaN()) == 0);
  CHECK(cb::count_from_double(42.9) == 42);
  CHECK(cb::count_from_double(1e300) ==
        static_cast<std::uint64_t>(cb::kMaxCountAsDouble));

  CHECK(cb::ManualClock::check_start(0) == nullptr);
  CHECK(cb::ManualClock::check_start(cb::kMaxClockSeconds) == nullptr);
  const char* must = cb::ManualClock::check_start(cb::kMaxClockSeconds * 2);
  REQUIRE(must != nullptr);
  CHECK(std::strstr(must, CIRCUITBREAKER_STRINGIFY(CIRCUITBREAKER_MAX_CLOCK_SECONDS)) !=
        nullptr);
  CHECK(cb::ManualClock::check_start(-1) != nullptr);
  cb::ManualClock clock(cb::seconds_to_nanos(cb::kMaxClockSeconds - 1));
  CHECK(clock.check_advance(1) == nullptr);
  CHECK(clock.check_advance(2) != nullptr);
  CHECK(clock.check_advance(std::numeric_limits<double>::infinity()) != nullptr);
}
