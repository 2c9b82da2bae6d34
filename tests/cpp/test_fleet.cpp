// A fleet member's side of the Redis store, without Redis: adopt() and
// decline_probe() (fleet/fleet_breaker.hpp), and FleetMember's reports,
// replies and probe results (fleet/member.hpp). The script itself:
// test_fleet_script.cpp.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "circuitbreaker/fleet/member.hpp"
#include "circuitbreaker/fleet/sync_choice.hpp"

namespace cb = circuitbreaker;

namespace {

constexpr cb::Nanos kSec = cb::kNanosPerSecond;

cb::Settings settings(double threshold = 3, double recovery = 10) {
  cb::Config c;
  c.failure_threshold = threshold;
  c.recovery_timeout = recovery;
  return cb::make_settings(c);
}

void fail(cb::Breaker& b, cb::Nanos now, int n = 1) {
  for (int i = 0; i < n; ++i) {
    const cb::Admission a = b.acquire(now);
    REQUIRE(a.permitted);
    b.record(a.permit, cb::Outcome::Failure, now);
  }
}

// The script's reply (fleet/script.hpp) from its ten parts: "ok" and eight
// numbers (the tenth part unused), packed after a "k"; or "cfg" and, tenth,
// the fleet's configuration.
std::string reply_text_of(const std::vector<std::string>& v) {
  REQUIRE(v.size() == 10);
  if (v[0] == "cfg") return "cfg," + v[9];
  if (v[0] != "ok") return v[0];
  std::string packed = "k";
  for (int i = 1; i <= 8; ++i) {
    cb::fleet_pack_int(packed, std::stoll(v[static_cast<std::size_t>(i)]));
  }
  return packed;
}

cb::FleetReply reply_of(std::vector<std::string> v) {
  cb::FleetReply r;
  const std::string text = reply_text_of(v);
  REQUIRE(r.parse(&text));
  return r;
}

}  // namespace

TEST_CASE("adopt() takes the fleet's open period, on this process's clock", "[fleet]") {
  cb::FleetBreaker b(settings(), 0);
  const std::uint64_t g = b.snapshot(0).generation;
  cb::FleetView v;
  v.state = cb::State::Open;
  v.open_elapsed = 2 * kSec;
  v.open_duration = 10 * kSec;
  v.consecutive_opens = 1;
  std::uint64_t seq = 0;
  REQUIRE(b.adopt(v, g, 0, 100 * kSec, &seq));
  const cb::Snapshot s = b.snapshot(100 * kSec);
  CHECK(s.state == cb::State::Open);
  CHECK(s.retry_after == 8 * kSec);  // 10 s from 2 s ago
  CHECK(s.generation == g + 1);
  CHECK(seq == s.last_transition);
  CHECK(s.totals.times_opened == 1);
  CHECK_FALSE(b.acquire(101 * kSec).permitted);
  // After the fleet's period, the next call is a local half-open probe.
  const cb::Admission probe = b.acquire(108 * kSec + 1);
  CHECK(probe.permitted);
  CHECK(probe.permit.kind == cb::PermitKind::Probe);
}

TEST_CASE("adopt() yields to anything that moved the breaker since the report",
          "[fleet]") {
  cb::FleetBreaker b(settings(), 0);
  const std::uint64_t g = b.snapshot(0).generation;
  fail(b, 1, 3);  // a local trip after the report was built
  REQUIRE(b.snapshot(1).state == cb::State::Open);
  cb::FleetView closed;
  CHECK_FALSE(b.adopt(closed, g, 0, 2));
  CHECK(b.snapshot(2).state == cb::State::Open);
}

TEST_CASE("adopt() of CLOSED adds the failures made since the report", "[fleet]") {
  cb::FleetBreaker b(settings(10), 0);
  fail(b, 1, 2);
  const cb::Snapshot at_report = b.snapshot(1);
  fail(b, 2, 1);  // after the report
  cb::FleetView v;
  v.consecutive_failures = 5;  // the fleet's run, including our 2
  REQUIRE(b.adopt(v, at_report.generation, at_report.consecutive_failures, 3));
  CHECK(b.snapshot(3).consecutive_failures == 6);
  // A success since the report ended the run: ours stands.
  const cb::Admission a = b.acquire(4);
  b.record(a.permit, cb::Outcome::Success, 4);
  const cb::Snapshot s = b.snapshot(4);
  v.consecutive_failures = 7;
  REQUIRE(b.adopt(v, s.generation, 6, 5));
  CHECK(b.snapshot(5).consecutive_failures == 0);
}

TEST_CASE("adopt() of a new generation in the same state starts a new period",
          "[fleet]") {
  cb::FleetBreaker b(settings(10), 0);
  const cb::Admission inflight = b.acquire(1);
  REQUIRE(inflight.permitted);
  const cb::Snapshot before = b.snapshot(1);
  cb::FleetView v;
  v.new_generation = true;  // a fleet-wide reset
  REQUIRE(b.adopt(v, before.generation, 0, 2));
  CHECK(b.snapshot(2).generation == before.generation + 1);
  b.record(inflight.permit, cb::Outcome::Failure, 3);
  const cb::Snapshot s = b.snapshot(3);
  CHECK(s.totals.late == 1);
  CHECK(s.consecutive_failures == 0);
}

TEST_CASE("adopt() of manual states; decline_probe() rejects a probe", "[fleet]") {
  cb::FleetBreaker b(settings(1, 1), 0);
  cb::FleetView v;
  v.state = cb::State::ForcedOpen;
  REQUIRE(b.adopt(v, b.snapshot(0).generation, 0, 1));
  CHECK_FALSE(b.acquire(2).permitted);
  v.state = cb::State::Disabled;
  REQUIRE(b.adopt(v, b.snapshot(2).generation, 0, 3));
  CHECK(b.acquire(4).permit.kind == cb::PermitKind::PassThrough);
  v.state = cb::State::HalfOpen;
  REQUIRE(b.adopt(v, b.snapshot(4).generation, 0, 5));
  const cb::Admission probe = b.acquire(6);
  REQUIRE(probe.permit.kind == cb::PermitKind::Probe);
  const cb::Admission no = b.decline_probe(probe.permit, kSec / 10, 7);
  CHECK_FALSE(no.permitted);
  CHECK(no.rejection == cb::Rejection::HalfOpenFull);
  CHECK(no.retry_after == kSec / 10);
  const cb::Snapshot s = b.snapshot(7);
  CHECK(s.probes_in_flight == 0);
  CHECK(s.totals.rejected == 2);  // the forced-open call and this one
  CHECK(b.acquire(8).permit.kind == cb::PermitKind::Probe);  // the slot is free again
}

TEST_CASE("a member has news only when it has something to tell the fleet", "[fleet]") {
  // The sync sends a breaker only then (fleet/sync.hpp): an idle breaker
  // costs Redis nothing.
  cb::Config c;
  c.failure_threshold = 3;
  cb::FleetMember m("api", "{p:api}", c, 0, "proc");
  CHECK(m.has_news(1));  // never heard from the fleet: its registration is due
  const cb::FleetReply closed =
      reply_of({"ok", "7", "0", "0", "0", "0", "0", "0", "0", ""});
  m.apply(closed, 1, m.build(1));
  CHECK_FALSE(m.has_news(2));
  fail(m.breaker(), 3, 1);  // a call
  CHECK(m.has_news(4));
  const cb::FleetReport sent = m.build(4);
  CHECK(m.has_news(5));  // its report is not confirmed yet: it is sent again
  m.apply(closed, 5, sent);
  CHECK_FALSE(m.has_news(6));
  m.command(cb::FleetCommand::Reset);  // a manual command
  CHECK(m.has_news(7));
  m.apply(closed, 8, m.build(8));
  CHECK_FALSE(m.has_news(9));
  fail(m.breaker(), 10, 3);  // three in a row: a local trip, and calls
  const cb::FleetReport trip = m.build(11);
  CHECK(trip.tripped);
  m.apply(reply_of({"ok", "8", "1", "0", "60000", "1", "3", "3", "3", ""}), 12, trip);
  CHECK_FALSE(m.has_news(13));
  // Another process moved it: a read is wanted, once.
  CHECK_FALSE(m.take_wanted());
  m.want();
  CHECK(m.take_wanted());
  CHECK_FALSE(m.take_wanted());
}

TEST_CASE("a sync carries the breakers with news, the named ones and one swept",
          "[fleet]") {
  // fleet/sync_choice.hpp: idle breakers cost a sync nothing but the sweep.
  const cb::FleetReply closed =
      reply_of({"ok", "7", "0", "0", "0", "0", "0", "0", "0", ""});
  std::vector<std::shared_ptr<cb::FleetMember>> live;
  for (int i = 0; i < 300; ++i) {
    auto m = std::make_shared<cb::FleetMember>("b" + std::to_string(i),
                                               "{p:b" + std::to_string(i) + "}",
                                               cb::Config{}, 0, "proc");
    m->apply(closed, 1, m->build(1));  // registered: no news
    live.push_back(m);
  }
  cb::SyncChoice choice;
  bool left = true;
  const cb::Nanos t0 = 2 * cb::kNanosPerSecond;
  // The first sync sweeps one breaker; nothing else has news.
  CHECK(choice.choose(live, t0, left).size() == 1);
  CHECK_FALSE(left);
  // Within the second, an idle store's sync carries none.
  CHECK(choice.choose(live, t0 + 1, left).empty());
  // A breaker with counts, and one that a message named.
  fail(live[5]->breaker(), t0 + 2, 1);
  CHECK(choice.named(live[7]->key()));
  CHECK(choice.named("not a breaker of this process"));
  std::vector<cb::FleetMember*> got = choice.choose(live, t0 + 3, left);
  REQUIRE(got.size() == 2);
  CHECK(got[0] == live[5].get());
  CHECK(got[1] == live[7].get());
  live[5]->apply(closed, t0 + 3, live[5]->build(t0 + 3));  // its counts are confirmed
  // After a resubscription every breaker wants a read: at most
  // kMaxReadsPerSync a sync, the rest left for the next ones.
  for (auto& m : live) m->want();
  got = choice.choose(live, t0 + 4, left);
  CHECK(got.size() == cb::SyncChoice::kMaxReadsPerSync);
  CHECK(left);
  got = choice.choose(live, t0 + 5, left);
  CHECK(got.size() == cb::SyncChoice::kMaxReadsPerSync);
  got = choice.choose(live, t0 + 6, left);
  CHECK(got.size() == live.size() - 2 * cb::SyncChoice::kMaxReadsPerSync);
  CHECK_FALSE(left);
  CHECK(choice.choose(live, t0 + 7, left).empty());
  // A second later, the sweep reads the next breaker in turn.
  got = choice.choose(live, t0 + cb::kNanosPerSecond, left);
  REQUIRE(got.size() == 1);
  CHECK(got[0] == live[1].get());
}

TEST_CASE("a member's report is resent unchanged until the fleet answers", "[fleet]") {
  cb::Config c;
  c.failure_threshold = 3;
  cb::FleetMember m("api", "{p:api}", c, 0, "proc");
  fail(m.breaker(), 1, 2);
  const cb::FleetReport first = m.build(2);
  CHECK(first.id == "proc.1");
  CHECK(first.delta.calls == 2);
  CHECK(first.delta.failures == 2);
  CHECK(first.known_generation == 0);
  fail(m.breaker(), 3, 1);                   // trips locally
  const cb::FleetReport again = m.build(4);  // the first got no answer
  CHECK(again.id == "proc.1");
  CHECK(again.delta.calls == 2);
  CHECK(again.state == cb::State::Open);
  CHECK(again.tripped);
  m.apply(reply_of({"ok", "7", "1", "0", "60000", "1", "3", "3", "3", ""}), 5, again);
  const cb::FleetReport next = m.build(6);
  CHECK(next.id == "proc.2");
  CHECK(next.delta.calls == 1);
  CHECK(next.known_generation == 7);
  CHECK_FALSE(next.tripped);
  const cb::Snapshot s = m.breaker().snapshot(6);
  CHECK(s.state == cb::State::Open);
  CHECK(s.retry_after == 60 * kSec - 1);
  // Nothing new: a report without an id (state only).
  m.apply(reply_of({"ok", "7", "1", "0", "60000", "1", "3", "3", "3", ""}), 7, next);
  CHECK(m.build(8).id.empty());
}

TEST_CASE("counts made before the fleet moved on are reported as their generation's",
          "[fleet]") {
  // A process cut off from Redis keeps counting on its local rules; the
  // fleet moves on meanwhile (another process trips it and resets it). Its
  // counts from before it heard of that are the old generation's: they
  // reach the fleet's totals, never the new period's run of failures.
  cb::Config c;
  c.failure_threshold = 5;
  cb::FleetMember m("api", "{p:api}", c, 0, "proc");
  const cb::FleetReport join = m.build(1);
  m.apply(reply_of({"ok", "3", "0", "0", "0", "0", "0", "0", "0", ""}), 2, join);
  const cb::Admission ok = m.breaker().acquire(3);
  REQUIRE(ok.permitted);
  m.breaker().record(ok.permit, cb::Outcome::Success, 3);
  const cb::FleetReport lost = m.build(4);  // sent, no answer: cut off
  CHECK(lost.known_generation == 3);
  CHECK(lost.delta.calls == 1);
  fail(m.breaker(), 5, 5);  // on local rules: it trips on its own
  CHECK(m.breaker().snapshot(5).state == cb::State::Open);
  // Back: the fleet answers the report it had, in generation 5.
  m.apply(reply_of({"ok", "5", "0", "0", "0", "0", "0", "9", "0", ""}), 6, lost);
  const cb::FleetReport stale = m.build(7);
  CHECK_FALSE(stale.id.empty());
  CHECK(stale.known_generation == 3);  // the generation they were counted in
  CHECK(stale.delta.calls == 5);
  CHECK(stale.delta.failures == 5);
  // Resent unchanged while unanswered.
  CHECK(m.build(8).known_generation == 3);
  m.apply(reply_of({"ok", "5", "0", "0", "0", "0", "0", "14", "0", ""}), 9, stale);
  // The copy took the fleet's state; nothing stale is left.
  CHECK(m.breaker().snapshot(9).state == cb::State::Closed);
  const cb::FleetReport next = m.build(10);
  CHECK(next.known_generation == 5);
  CHECK(next.delta.calls == 0);
  CHECK(next.id.empty());
}

TEST_CASE("a report still unanswered when the fleet moves on keeps its generation",
          "[fleet]") {
  cb::Config c;
  c.failure_threshold = 5;
  cb::FleetMember m("api", "{p:api}", c, 0, "proc");
  const cb::FleetReport join = m.build(1);
  m.apply(reply_of({"ok", "3", "0", "0", "0", "0", "0", "0", "0", ""}), 2, join);
  fail(m.breaker(), 3, 2);
  const cb::FleetReport pending = m.build(4);  // counted in generation 3
  CHECK(pending.known_generation == 3);
  // A reply to an older report (another thread's) says generation 5.
  m.apply(reply_of({"ok", "5", "0", "0", "0", "0", "0", "9", "0", ""}), 5, join);
  const cb::FleetReport again = m.build(6);  // resent: still generation 3's
  CHECK(again.id == pending.id);
  CHECK(again.known_generation == 3);
  CHECK(again.delta.failures == 2);
  m.apply(reply_of({"ok", "5", "0", "0", "0", "0", "0", "11", "0", ""}), 7, again);
  CHECK(m.build(8).known_generation == 5);  // the next one is the fleet's now
}

TEST_CASE("a member keeps the fleet's configuration when it differs", "[fleet]") {
  cb::FleetMember m("api", "{p:api}", cb::Config{}, 0, "proc");
  const cb::FleetReport sent = m.build(1);
  m.apply(reply_of({"cfg", "0", "0", "0", "0", "0", "0", "0", "0", "3,1,nan"}), 2, sent);
  CHECK(m.status().fleet_config == "3,1,nan");
}

TEST_CASE("replies that are not the script's are refused", "[fleet]") {
  cb::FleetReply r;
  auto packed = [](std::vector<std::int64_t> x) {
    std::string out = "k";
    for (std::int64_t v : x) cb::fleet_pack_int(out, v);
    return out;
  };
  CHECK(r.parse_packed(packed({1, 0, 0, 0, 0, 0, 0, 0})));
  CHECK_FALSE(r.parse_packed(packed({1, 9, 0, 0, 0, 0, 0, 0})));  // no such state
  CHECK_FALSE(r.parse_packed(packed({1, -1, 0, 0, 0, 0, 0, 0})));
  CHECK_FALSE(r.parse_packed(packed({1, 0, 0, 0, 0, 0, 0})));        // a value short
  CHECK_FALSE(r.parse_packed(packed({1, 0, 0, 0, 0, 0, 0, 0, 0})));  // a value over
  std::string other = packed({1, 0, 0, 0, 0, 0, 0, 0});
  other[0] = 'x';
  CHECK_FALSE(r.parse_packed(other));
  CHECK_FALSE(r.parse_packed(""));
  CHECK_FALSE(r.parse_packed("ok,1,0,0,0,0,0,0,0"));
  // The lease script's state, as text.
  CHECK(r.parse_text("ok,1,0,0,0,0,0,0,0"));
  CHECK_FALSE(r.parse_text("ok,1,9,0,0,0,0,0,0"));
  CHECK_FALSE(r.parse_text("ok,x,0,0,0,0,0,0,0"));
  CHECK_FALSE(r.parse_text("ok,1,0,0,0,0,0,0"));
  CHECK_FALSE(r.parse_text("ok,1,0,0,0,0,0,0,0,0"));
  CHECK_FALSE(r.parse_text("ok,1,0,,0,0,0,0,0"));
  CHECK_FALSE(r.parse_text("ok,1,0,0,0,0,0,0,99999999999999999999"));
  CHECK_FALSE(r.parse_text(""));
}

TEST_CASE("a probe's outcome goes to the fleet with its lease token", "[fleet]") {
  cb::Config c;
  c.failure_threshold = 1;
  c.recovery_timeout = 1;
  cb::FleetMember m("api", "{p:api}", c, 0, "proc");
  fail(m.breaker(), 1, 1);
  const cb::Admission a = m.breaker().acquire(2 * kSec);
  REQUIRE(a.permit.kind == cb::PermitKind::Probe);
  std::string token;
  const cb::Admission ok = m.confirm_probe(
      a, 2 * kSec, kSec / 10, [&token](const std::string& t, std::int64_t lease_ms) {
        token = t;
        CHECK(lease_ms == 1000);
        return std::optional<std::vector<std::string>>({"probe", "4", "0"});
      });
  CHECK(ok.permitted);
  CHECK(token.size() == 32);
  m.breaker().record(ok.permit, cb::Outcome::Success, 2 * kSec + 1);
  CHECK(m.probe_settled(ok.permit, false, 2 * kSec + 1));
  CHECK_FALSE(m.probe_settled(ok.permit, false, 2 * kSec + 1));  // once
  CHECK(m.build(3 * kSec).probes == "0:" + token + ":4:s:-1;");
}

TEST_CASE("a probe without a fleet lease is declined, and the next calls wait",
          "[fleet]") {
  cb::Config c;
  c.failure_threshold = 1;
  c.recovery_timeout = 1;
  cb::FleetMember m("api", "{p:api}", c, 0, "proc");
  fail(m.breaker(), 1, 1);
  int asked = 0;
  auto full = [&asked](const std::string&, std::int64_t) {
    ++asked;
    return std::optional<std::vector<std::string>>({"full", "4", "300"});
  };
  const cb::Admission a = m.breaker().acquire(2 * kSec);
  const cb::Admission no = m.confirm_probe(a, 2 * kSec, kSec / 10, full);
  CHECK_FALSE(no.permitted);
  CHECK(no.rejection == cb::Rejection::HalfOpenFull);
  CHECK(no.retry_after == kSec / 10);  // the sync interval, shorter than the lease
  // Within the hold, no round trip.
  const cb::Admission b = m.breaker().acquire(2 * kSec + 1000);
  CHECK_FALSE(m.confirm_probe(b, 2 * kSec + 1000, kSec / 10, full).permitted);
  CHECK(asked == 1);
  // The store away: the probe goes out on local rules.
  const cb::Admission c2 = m.breaker().acquire(3 * kSec);
  const cb::Admission local =
      m.confirm_probe(c2, 3 * kSec, kSec / 10, [](const std::string&, std::int64_t) {
        return std::optional<std::vector<std::string>>();
      });
  CHECK(local.permitted);
}

TEST_CASE("a probe sent on local rules is reported to the fleet when the link returns",
          "[fleet]") {
  cb::Config c;
  c.failure_threshold = 1;
  c.recovery_timeout = 1;
  cb::FleetMember m("api", "{p:api}", c, 0, "proc");
  fail(m.breaker(), 1, 1);  // opened here, and the fleet knows (generation 7)
  m.apply(reply_of({"ok", "7", "1", "0", "1000", "1", "1", "1", "1", ""}), 1, m.build(1));
  const cb::Admission a = m.breaker().acquire(2 * kSec);
  REQUIRE(a.permit.kind == cb::PermitKind::Probe);
  const cb::Admission local =
      m.confirm_probe(a, 2 * kSec, kSec / 10, [](const std::string&, std::int64_t) {
        return std::optional<std::vector<std::string>>();  // Redis away
      });
  REQUIRE(local.permitted);
  m.breaker().record(local.permit, cb::Outcome::Success, 2 * kSec + 1);
  CHECK(m.probe_settled(local.permit, false, 2 * kSec + 1));
  CHECK_FALSE(m.probe_settled(local.permit, false, 2 * kSec + 1));  // once
  const cb::FleetReport r = m.build(3 * kSec);
  CHECK(r.probes == "L7/s/-1;");
  CHECK_FALSE(r.id.empty());  // counted once, with its report
}

TEST_CASE("a reply confirms only the report it answers", "[fleet]") {
  cb::Config c;
  c.failure_threshold = 10;
  cb::FleetMember m("api", "{p:api}", c, 0, "proc");
  fail(m.breaker(), 1, 1);
  const cb::FleetReport first = m.build(2);  // one thread sends it ...
  const cb::FleetReport same = m.build(2);   // ... and another, again
  CHECK(same.id == first.id);
  m.apply(reply_of({"ok", "1", "0", "0", "0", "0", "1", "1", "1", ""}), 3, first);
  fail(m.breaker(), 4, 2);
  const cb::FleetReport second = m.build(5);
  CHECK(second.id != first.id);
  CHECK(second.delta.calls == 2);
  // The late reply to the first report does not drop the second.
  m.apply(reply_of({"ok", "1", "0", "0", "0", "0", "1", "1", "1", ""}), 6, same);
  const cb::FleetReport again = m.build(7);
  CHECK(again.id == second.id);
  CHECK(again.delta.calls == 2);
}

TEST_CASE("a probe's own outcome is reported, even when a sync moved the copy meanwhile",
          "[fleet]") {
  cb::Config c;
  c.failure_threshold = 1;
  c.recovery_timeout = 1;
  cb::FleetMember m("api", "{p:api}", c, 0, "proc");
  fail(m.breaker(), 1, 1);
  m.apply(reply_of({"ok", "7", "1", "0", "1000", "1", "1", "1", "1", ""}), 1, m.build(1));
  const cb::Admission a = m.breaker().acquire(2 * kSec);
  REQUIRE(a.permit.kind == cb::PermitKind::Probe);
  const cb::Admission local =
      m.confirm_probe(a, 2 * kSec, kSec / 10, [](const std::string&, std::int64_t) {
        return std::optional<std::vector<std::string>>();  // Redis away
      });
  REQUIRE(local.permitted);
  // The link is back while the probe runs, and the fleet says: still OPEN
  // (just opened again, for 10 s).
  m.apply(reply_of({"ok", "9", "1", "0", "10000", "2", "1", "1", "1", ""}), 2 * kSec + 1,
          m.build(2 * kSec + 1));
  CHECK(m.breaker().snapshot(2 * kSec + 2).state == cb::State::Open);
  m.breaker().record(local.permit, cb::Outcome::Success, 2 * kSec + 2);
  CHECK(m.probe_settled(local.permit, false, 2 * kSec + 2, false));
  CHECK(m.build(2 * kSec + 3).probes == "L7/s/-1;");
}

// The [any-breaker] fleet flake: the sync thread built a report
// after a probe's success closed the local copy but before its outcome was
// queued. That report said CLOSED without the probe; the fleet, still
// half-open, answered HALF_OPEN in the generation of the local close, and
// adopt() took it: the copy went back to half-open. settle_probe() records
// and queues in one step: a report that holds the close holds its probe.
TEST_CASE("no report is built between a probe's outcome and its queueing",
          "[fleet][regression]") {
  cb::Config c;
  c.failure_threshold = 1;
  c.recovery_timeout = 1;
  cb::FleetMember m("api", "{p:api}", c, 0, "proc");
  fail(m.breaker(), 1, 1);
  m.apply(reply_of({"ok", "7", "1", "0", "1000", "1", "1", "1", "1", ""}), 1, m.build(1));
  const cb::Admission a = m.breaker().acquire(2 * kSec);
  REQUIRE(a.permit.kind == cb::PermitKind::Probe);
  std::string token;
  const cb::Admission probe = m.confirm_probe(
      a, 2 * kSec, kSec / 10, [&token](const std::string& t, std::int64_t) {
        token = t;
        return std::optional<std::vector<std::string>>({"probe", "8", "0"});
      });
  REQUIRE(probe.permitted);

  // The sync thread builds a report right after the local close (it waits,
  // bounded, for the member: with the fix it cannot get in before the
  // outcome is queued).
  std::future<cb::FleetReport> report;
  bool to_send = false;
  const bool recorded = m.settle_probe(
      probe.permit, false, 2 * kSec + 1, false,
      [&]() {
        const bool r =
            m.breaker().record(probe.permit, cb::Outcome::Success, 2 * kSec + 1);
        report = std::async(std::launch::async, [&m]() { return m.build(2 * kSec + 2); });
        (void)report.wait_for(std::chrono::milliseconds(200));
        return r;
      },
      &to_send);
  CHECK(recorded);
  CHECK(to_send);
  const cb::FleetReport sent = report.get();
  CHECK(sent.state == cb::State::Closed);
  CHECK(sent.probes == "0:" + token + ":8:s:-1;");  // the close goes with its cause
  // The fleet closes on it (generation 9): the copy stays closed.
  m.apply(reply_of({"ok", "9", "0", "0", "0", "0", "0", "1", "1", ""}), 2 * kSec + 3,
          sent);
  CHECK(m.breaker().snapshot(2 * kSec + 4).state == cb::State::Closed);

  // Why it must be one step: adopt()'s generation fence alone does not stop
  // it. A report that says CLOSED without the probe (what the sync thread
  // built in between, before), and the fleet's half-open answer to it, pass
  // the fence and undo the local close.
  cb::FleetMember old("api", "{p:api}", c, 0, "proc");
  fail(old.breaker(), 1, 1);
  old.apply(reply_of({"ok", "7", "1", "0", "1000", "1", "1", "1", "1", ""}), 1,
            old.build(1));
  const cb::Admission b = old.breaker().acquire(2 * kSec);
  REQUIRE(old.confirm_probe(
                 b, 2 * kSec, kSec / 10,
                 [](const std::string&, std::int64_t) {
                   return std::optional<std::vector<std::string>>({"probe", "8", "0"});
                 })
              .permitted);
  old.breaker().record(b.permit, cb::Outcome::Success, 2 * kSec + 1);
  const cb::FleetReport early = old.build(2 * kSec + 2);
  CHECK(early.probes.empty());
  old.apply(reply_of({"ok", "8", "2", "0", "0", "1", "0", "1", "1", ""}), 2 * kSec + 3,
            early);
  CHECK(old.breaker().snapshot(2 * kSec + 4).state == cb::State::HalfOpen);
}

// The [any-breaker] fleet flake (the race seen there): the probe's
// LEASE moved the fleet to HALF_OPEN in generation 3, Redis then ran the sync
// thread's SYNC (built in the local half-open period), and its reply was
// applied before the caller's thread had the lease's reply: against the
// generation known then (2), generation 3 looked like a new half-open period,
// adopt() started it again, and the probe leased in it was late: its success
// did not close the copy. A reply that arrives while a lease is out is not
// adopted.
TEST_CASE("a sync reply that overtakes a probe's lease does not make the probe late",
          "[fleet][regression]") {
  cb::Config c;
  c.failure_threshold = 1;
  c.recovery_timeout = 1;
  cb::FleetMember m("api", "{p:api}", c, 0, "proc");
  fail(m.breaker(), 1, 1);
  m.apply(reply_of({"ok", "2", "1", "0", "1000", "1", "1", "1", "1", ""}), 1, m.build(1));
  const cb::Admission a = m.breaker().acquire(2 * kSec);
  REQUIRE(a.permit.kind == cb::PermitKind::Probe);
  const cb::Admission probe =
      m.confirm_probe(a, 2 * kSec, kSec / 10, [&m](const std::string&, std::int64_t) {
        // The sync thread, meanwhile: its report says HALF_OPEN, and the
        // fleet answers half-open in the lease's generation.
        const cb::FleetReport r = m.build(2 * kSec + 1);
        CHECK(r.state == cb::State::HalfOpen);
        m.apply(reply_of({"ok", "3", "2", "0", "0", "1", "0", "1", "1", ""}),
                2 * kSec + 1, r);
        return std::optional<std::vector<std::string>>({"probe", "3", "0"});
      });
  REQUIRE(probe.permitted);
  CHECK(m.status().generation == 3);
  CHECK(m.breaker().record(probe.permit, cb::Outcome::Success, 2 * kSec + 2));
  CHECK(m.breaker().snapshot(2 * kSec + 3).state == cb::State::Closed);
  // The fleet's next answer in the same half-open period is no new one.
  CHECK(m.probe_settled(probe.permit, false, 2 * kSec + 3));
  const cb::FleetReport r = m.build(2 * kSec + 4);
  m.apply(reply_of({"ok", "4", "0", "0", "0", "0", "0", "1", "1", ""}), 2 * kSec + 5, r);
  CHECK(m.breaker().snapshot(2 * kSec + 6).state == cb::State::Closed);
}

TEST_CASE("times from Redis saturate instead of overflowing", "[fleet]") {
  CHECK(cb::ms_to_nanos(5) == 5 * cb::kNanosPerMs);
  CHECK(cb::ms_to_nanos(-5) == -5 * cb::kNanosPerMs);
  CHECK(cb::ms_to_nanos(cb::nanos_to_ms(cb::kNever)) == cb::kNever);  // 2^53 ms
  CHECK(cb::ms_to_nanos(INT64_MAX) == cb::kNever);
  CHECK(cb::ms_to_nanos(INT64_MIN) == -cb::kNever);
}
