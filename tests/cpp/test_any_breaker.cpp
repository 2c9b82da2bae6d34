// The handle a binding holds (any_breaker.hpp): one scenario (trip, an open
// rejection, a probe that closes, manual control, snapshot, history and
// transitions) through each store's handle, as the R binding drives it:
// every operation followed by take_fault(). The process store (ProcessHandle),
// the host store (HostHandle, on a segment file in a temporary directory) and
// the fleet store (FleetHandle, against a real redis-server, where one can be
// started). A host segment damaged under a live handle is reported by the
// handle, and the result of that operation is not the segment's.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <circuitbreaker/any_breaker.hpp>
#include <circuitbreaker/host/host_handle.hpp>
#include <circuitbreaker/fleet/fleet_handle.hpp>

#include "process_test_support.hpp"
#include "redis_test_support.hpp"

namespace cb = circuitbreaker;
using cbproc::TempDir;

namespace {

constexpr cb::Nanos kS = cb::kNanosPerSecond;

cb::Config scenario_config(double recovery_seconds) {
  cb::Config c;
  c.failure_threshold = 2;
  c.recovery_timeout = recovery_seconds;
  c.half_open_max_calls = 1;
  c.rng_seed = 3;
  return c;
}

// An operation's result, once the handle says its store found nothing wrong
// (what the binding does before anything reaches R).
template <typename T>
T checked(cb::AnyBreaker& b, T result) {
  INFO("store: " << b.store_kind());
  REQUIRE_FALSE(b.take_fault());
  return result;
}

// Whether `want` occurs in `got` in order (other transitions may sit in
// between: a fleet member may take a state from the fleet).
bool in_order(const std::vector<std::pair<cb::State, cb::State>>& got,
              const std::vector<std::pair<cb::State, cb::State>>& want) {
  std::size_t i = 0;
  for (const auto& t : got) {
    if (i < want.size() && t == want[i]) ++i;
  }
  return i == want.size();
}

// The scenario. `now()` is the handle's clock; `past_open(b)` returns a time
// after the open period (advancing a fake clock, or waiting for a real one);
// `exact`: the transition log holds exactly this scenario's transitions.
void run_scenario(cb::AnyBreaker& b, const std::function<cb::Nanos()>& now,
                  const std::function<cb::Nanos(cb::AnyBreaker&)>& past_open,
                  bool exact) {
  using cb::State;
  CHECK(checked(b, b.snapshot(now())).state == State::Closed);

  // Two failures trip it.
  for (int i = 0; i < 2; ++i) {
    const cb::Admission a = checked(b, b.acquire(now(), cb::kNever));
    REQUIRE(a.permitted);
    CHECK(a.permit.kind == cb::PermitKind::Counted);
    CHECK(checked(b, b.record(a.permit, cb::Outcome::Failure, now(), -1)));
  }
  CHECK(checked(b, b.snapshot(now())).state == State::Open);

  // Open: rejected, with the wait until the next probe.
  const cb::Admission rejected = checked(b, b.acquire(now(), cb::kNever));
  CHECK_FALSE(rejected.permitted);
  CHECK(rejected.rejection == cb::Rejection::Open);
  CHECK(rejected.retry_after > 0);

  // After the open period: a probe, whose success closes.
  const cb::Nanos later = past_open(b);
  const cb::Admission probe = checked(b, b.acquire(later, cb::kNever));
  REQUIRE(probe.permitted);
  CHECK(probe.permit.kind == cb::PermitKind::Probe);
  CHECK(checked(b, b.record(probe.permit, cb::Outcome::Success, now(), -1)));
  CHECK(checked(b, b.snapshot(now())).state == State::Closed);

  // Manual control.
  b.force_open(now());
  REQUIRE_FALSE(b.take_fault());
  const cb::Admission forced = checked(b, b.acquire(now(), cb::kNever));
  CHECK_FALSE(forced.permitted);
  CHECK(forced.rejection == cb::Rejection::ForcedOpen);
  b.reset(now());
  REQUIRE_FALSE(b.take_fault());
  CHECK(checked(b, b.snapshot(now())).state == State::Closed);
  b.disable(now());
  REQUIRE_FALSE(b.take_fault());
  const cb::Admission through = checked(b, b.acquire(now(), cb::kNever));
  REQUIRE(through.permitted);
  CHECK(through.permit.kind == cb::PermitKind::PassThrough);
  CHECK_FALSE(checked(b, b.record(through.permit, cb::Outcome::Failure, now(), -1)));
  b.reset(now());
  REQUIRE_FALSE(b.take_fault());

  // A released call and a noted success count where they should.
  const cb::Admission cancelled = checked(b, b.acquire(now(), cb::kNever));
  REQUIRE(cancelled.permitted);
  b.release(cancelled.permit, now());
  REQUIRE_FALSE(b.take_fault());
  CHECK(checked(b, b.note(cb::Outcome::Success, now())));

  // What the breaker says about itself.
  const cb::Snapshot s = checked(b, b.snapshot(now()));
  CHECK(s.state == State::Closed);
  CHECK(s.totals.calls == 4);  // two failures, the probe, the noted success
  CHECK(s.totals.failures == 2);
  CHECK(s.totals.successes == 2);
  CHECK(s.totals.rejected == 2);  // open, forced open
  CHECK(s.totals.released == 1);
  CHECK(s.totals.times_opened == 1);

  cb::ActivityBucket buckets[cb::kHistoryBuckets];
  const std::size_t nb = checked(b, b.history(now(), buckets));
  std::uint64_t calls = 0, rejections = 0;
  for (std::size_t i = 0; i < nb; ++i) {
    calls += buckets[i].calls;
    rejections += buckets[i].rejected;
  }
  CHECK(calls == 4);
  CHECK(rejections == 2);

  cb::Transition log[cb::TransitionLog::kCapacity];
  const std::size_t n =
      checked(b, b.transitions_since(0, log, cb::TransitionLog::kCapacity));
  std::vector<std::pair<State, State>> got;
  for (std::size_t i = 0; i < n; ++i) got.emplace_back(log[i].from, log[i].to);
  const std::vector<std::pair<State, State>> want = {
      {State::Closed, State::Open},       {State::Open, State::HalfOpen},
      {State::HalfOpen, State::Closed},   {State::Closed, State::ForcedOpen},
      {State::ForcedOpen, State::Closed}, {State::Closed, State::Disabled},
      {State::Disabled, State::Closed}};
  if (exact) {
    CHECK(got == want);
  } else {
    CHECK(in_order(got, want));
  }
  CHECK(b.usable());
}

// A HostBreaker opened on `path`, in its handle.
std::unique_ptr<cb::HostHandle> open_host(const std::string& path, const cb::Config& c,
                                          cb::Nanos now) {
  auto hb = std::make_unique<cb::HostBreaker>();
  const cb::HostBreaker::OpenResult r = hb->open(path, c, now);
  REQUIRE(r.ok());
  return std::make_unique<cb::HostHandle>(std::move(hb), path);
}

}  // namespace

TEST_CASE("the process handle runs the scenario", "[any-breaker]") {
  const cb::Config c = scenario_config(10);
  cb::Nanos t = 0;
  std::unique_ptr<cb::AnyBreaker> b =
      std::make_unique<cb::ProcessHandle>(cb::make_settings(c), t);
  CHECK(std::strcmp(b->store_kind(), "process") == 0);
  CHECK(b->location().empty());
  run_scenario(
      *b, [&t]() { return t += 1000; }, [&t](cb::AnyBreaker&) { return t += 11 * kS; },
      true);
  // The process store takes a new configuration; the shared ones do not.
  cb::Config more = c;
  more.failure_threshold = 9;
  CHECK(b->reconfigure(cb::make_settings(more), t));
  CHECK(b->settings().failure_threshold == 9);
  CHECK(b->store_info().empty());  // nothing beyond its state to tell
}

TEST_CASE("the host handle runs the scenario on a segment another handle shares",
          "[any-breaker][host]") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string path = dir.file("scenario");
  const cb::Config c = scenario_config(10);
  cb::Nanos t = 0;
  std::unique_ptr<cb::HostHandle> h = open_host(path, c, t);
  std::unique_ptr<cb::HostHandle> other = open_host(path, c, t);  // attaches
  CHECK(std::strcmp(h->store_kind(), "host") == 0);
  CHECK(h->location() == path);
  run_scenario(
      *h, [&t]() { return t += 1000; }, [&t](cb::AnyBreaker&) { return t += 11 * kS; },
      true);
  // The other handle sees the same breaker.
  const cb::Snapshot s = checked(*other, other->snapshot(t));
  CHECK(s.totals.calls == 4);
  CHECK(s.totals.rejected == 2);
  // The configuration is the segment's identity.
  CHECK_FALSE(h->reconfigure(cb::make_settings(scenario_config(20)), t));
  CHECK(h->settings().recovery_timeout == 10 * kS);
  // What the store tells of it, by name, in its order.
  const cb::StoreInfo info = h->store_info();
  std::vector<std::string> names;
  for (const auto& f : info.fields()) names.push_back(f.name);
  CHECK(names == std::vector<std::string>{"path", "creator_pid", "seconds_since_created",
                                          "commits", "recovered_owners",
                                          "tracks_probe_owners"});
  CHECK(info.fields()[0].text == path);
  REQUIRE(info.fields()[1].number.has_value());
  CHECK(*info.fields()[1].number == static_cast<double>(::getpid()));
  CHECK(info.fields()[3].number.value_or(0) > 0);  // the scenario committed
}

TEST_CASE("a damaged segment is reported by the handle, and its result is not used",
          "[any-breaker][host]") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string path = dir.file("damaged");
  const cb::Config c = scenario_config(10);
  std::unique_ptr<cb::HostHandle> h = open_host(path, c, 0);
  const cb::Admission ok = checked(*h, h->acquire(1, cb::kNever));
  REQUIRE(ok.permitted);
  checked(*h, h->record(ok.permit, cb::Outcome::Failure, 2, -1));
  const std::uint64_t commits = h->host().commits();

  // Another process (here: a second mapping) writes a state that is not one.
  cb::SegmentMapping view;
  REQUIRE(view.open_file(path.c_str(), sizeof(cb::Segment), false) == 0);
  cb::Segment& seg = *view.segment();
  auto* state = reinterpret_cast<unsigned char*>(
      &seg.slots[seg.control.committed.load() & 1u].state);
  state[offsetof(cb::BreakerState, state)] = 7;

  const cb::Admission a = h->acquire(3, cb::kNever);
  const cb::StoreFault f = h->take_fault();
  CHECK(f.kind == cb::StoreFaultKind::Corrupt);
  CHECK_FALSE(h->usable());
  (void)a;  // a binding raises the fault instead: `a` is the scratch copy's
  (void)h->snapshot(4);
  CHECK(h->take_fault().kind == cb::StoreFaultKind::Corrupt);
  CHECK(h->host().commits() == commits);  // nothing was written through it
  CHECK_FALSE(h->take_fault());           // asked once, forgotten
}

#ifdef CIRCUITBREAKER_HAVE_HIREDIS
TEST_CASE("the fleet handle runs the scenario against a real Redis",
          "[any-breaker][fleet-sync]") {
  cbredis::RedisServer server;
  {
    cb::RedisConnection probe;
    if (!server.connect(probe)) return cbredis::skipped();
  }
  cb::FleetSpec spec;
  spec.endpoint = server.endpoint;
  spec.prefix = "anybreaker:" + std::to_string(server.endpoint.port);
  spec.sync_interval = 20 * cb::kNanosPerMs;
  spec.timeout = 1000 * cb::kNanosPerMs;
  std::shared_ptr<cb::FleetSync> sync = cb::FleetSync::for_spec(spec);
  {
    const cb::Config c = scenario_config(0.2);
    auto h = std::make_unique<cb::FleetHandle>(sync->join("scenario", c), sync);
    CHECK(std::strcmp(h->store_kind(), "redis") == 0);
    CHECK_FALSE(h->location().empty());  // the breaker's key
    const auto now = [&sync]() { return sync->now(); };
    // A real clock: wait (bounded) until the open period is over.
    const auto past_open = [&now](cb::AnyBreaker& b) {
      for (int i = 0; i < 2000 && b.snapshot(now()).retry_after > 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      return now();
    };
    run_scenario(*h, now, past_open, false);
    CHECK_FALSE(h->reconfigure(cb::make_settings(scenario_config(1)), now()));
    // The probe went out with the fleet's lease: the link worked.
    CHECK(sync->stats().linked);
    // What the store tells of it: its link, then its own fields.
    const cb::StoreInfo info = h->store_info();
    REQUIRE(info.fields().size() == 14);
    CHECK(info.fields()[0].name == "mode");
    CHECK(info.fields()[0].text == "fleet");
    CHECK(info.fields()[4].name == "topology");
    CHECK(info.fields()[4].text == "single");
    CHECK(info.fields()[10].name == "key");
    CHECK(info.fields()[10].text == h->location());
    const cb::StoreInfo store = cb::fleet_store_info(*sync);
    CHECK(store.fields().back().name == "alone");
    CHECK(store.fields().back().kind == cb::StoreInfo::Field::Kind::kFlag);
    CHECK_FALSE(store.fields().back().flag);
  }  // the handle flushes its member's last counts
  sync.reset();
  cb::FleetSync::shutdown_all(2 * kS);
}
#endif
