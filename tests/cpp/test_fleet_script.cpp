// The fleet's script (fleet/script.hpp) against the core's rules, on a real
// redis-server (started here on 127.0.0.1, a free port; skipped with a
// warning where redis-server is missing). The script is the one second
// implementation of the trip rules, so it is checked against the core: a
// fleet fed one call per report must trip exactly when a Breaker fed the
// same calls does, with the same open duration.
#include <catch2/catch.hpp>

#ifdef CIRCUITBREAKER_HAVE_HIREDIS

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "circuitbreaker/fleet/sync.hpp"
#include "redis_test_support.hpp"

namespace cb = circuitbreaker;

namespace {

using cbredis::RedisServer;
using cbredis::skipped;

// The SYNC script's KEYS for the breaker at `key` with rules `rules`
// (fleet_rules(), packed: half_open_max_calls is the ninth value).
std::vector<std::string> script_keys(const std::string& key, const std::string& rules) {
  std::uint64_t hm = 0;
  for (int i = 7; i >= 0; --i) hm = (hm << 8) | static_cast<unsigned char>(rules[64 + i]);
  return cb::fleet_script_keys(key, static_cast<std::uint32_t>(hm));
}

// One field of a breaker's fleet state (fleet/script.hpp's READ script).
std::string fleet_field(cb::RedisConnection& conn, const std::string& key,
                        const char* f) {
  cb::RedisReply r = conn.command({"EVAL", cb::kFleetReadScript, "1", key, f});
  REQUIRE(r);
  return cbredis::reply_text(r);
}

// One report for one call and what the script said back.
struct Fleet {
  cb::RedisConnection& conn;
  std::string key, fingerprint, rules;
  std::uint64_t generation = 0;
  int serial = 0;
  std::string ttl = "60000";

  cb::FleetReply send(cb::FleetReport r, bool fresh_id = true) {
    if (fresh_id) r.id = "t." + std::to_string(++serial);
    std::vector<std::string> args{ttl, "{t}:events",
                                  std::to_string(cb::FleetReport::kArgs)};
    r.append_args(args, fingerprint, rules);
    cb::RedisReply reply = conn.eval(cb::kFleetSyncScript, script_keys(key, rules), args);
    REQUIRE(reply);
    INFO(cbredis::reply_text(reply));
    REQUIRE(reply->is_array());
    REQUIRE(reply->elements.size() == cb::FleetReply::kFields);
    std::string v[cb::FleetReply::kFields];
    for (int i = 0; i < cb::FleetReply::kFields; ++i) {
      v[i] = cbredis::reply_text(reply->elements[i]);
    }
    cb::FleetReply out;
    REQUIRE(out.parse(v));
    generation = out.generation;
    return out;
  }
};

}  // namespace

TEST_CASE("the fleet script trips exactly when the core does", "[fleet-script]") {
  RedisServer server;
  cb::RedisConnection conn;
  if (!server.connect(conn)) return skipped();
  std::mt19937_64 rng(20261201);
  int trips = 0, scenarios = 0;
  for (int scenario = 0; scenario < 60; ++scenario) {
    cb::Config c;
    const int kind = scenario % 3;
    c.failure_threshold = kind == 1 ? 1e30 : static_cast<double>(1 + rng() % 6);
    c.recovery_timeout = static_cast<double>(1 + rng() % 100);
    if (kind >= 1) {
      c.failure_rate_threshold = 0.2 + 0.1 * static_cast<double>(rng() % 6);
      c.window_size = static_cast<double>(4 + rng() % 20);
      c.minimum_calls = static_cast<double>(1 + rng() % 4);
    }
    if (kind == 2) {
      c.slow_call_duration = 1;
      c.slow_call_rate_threshold = 0.5;
    }
    const cb::Settings s = cb::make_settings(c);
    cb::Breaker ref(s, 0);
    Fleet fleet{conn, "{t:s" + std::to_string(scenario) + "}", cb::config_fingerprint(c),
                cb::fleet_rules(s)};
    ++scenarios;
    cb::Nanos now = cb::kNanosPerSecond;
    const double p_fail = 0.15 + 0.1 * static_cast<double>(rng() % 6);
    for (int step = 0; step < 150; ++step) {
      const bool failed = std::uniform_real_distribution<double>(0, 1)(rng) < p_fail;
      const bool slow = kind == 2 && rng() % 3 == 0;
      const cb::Admission a = ref.acquire(now);
      REQUIRE(a.permitted);
      const cb::Nanos end = now + (slow ? 2 : 0) * cb::kNanosPerSecond;
      ref.record(a.permit, failed ? cb::Outcome::Failure : cb::Outcome::Success, end);
      const cb::Snapshot snap = ref.snapshot(end);
      cb::FleetReport r;
      r.known_generation = fleet.generation;
      r.delta.calls = 1;
      r.delta.failures = failed ? 1 : 0;
      r.delta.successes = failed ? 0 : 1;
      r.delta.slow = slow ? 1 : 0;
      r.consecutive_failures = snap.consecutive_failures;
      r.state = cb::State::Closed;  // the script decides alone
      const cb::FleetReply reply = fleet.send(r);
      INFO("scenario " << scenario << " step " << step << " fingerprint "
                       << fleet.fingerprint);
      REQUIRE((reply.state == cb::State::Open) == (snap.state == cb::State::Open));
      if (snap.state == cb::State::Open) {
        ++trips;
        CHECK(reply.open_ms == cb::nanos_to_ms(snap.open_duration));
        // A report of the generation before the trip counts, and moves nothing.
        cb::FleetReport stale;
        stale.known_generation = fleet.generation - 1;
        stale.delta.calls = 3;
        stale.delta.failures = 3;
        stale.consecutive_failures = 3;
        const cb::FleetReply after = fleet.send(stale);
        CHECK(after.generation == reply.generation);
        CHECK(after.fleet_calls == reply.fleet_calls + 3);
        // Both start again.
        cb::FleetReport reset;
        reset.known_generation = fleet.generation;
        reset.command = cb::FleetCommand::Reset;
        const cb::FleetReply closed = fleet.send(reset);
        REQUIRE(closed.state == cb::State::Closed);
        ref.reset(end);
      }
      now = end + cb::kNanosPerMs;
    }
  }
  CHECK(scenarios == 60);
  CHECK(trips > 100);  // the scenarios do trip
}

TEST_CASE("the fleet script applies a report once, and fences old generations",
          "[fleet-script]") {
  RedisServer server;
  cb::RedisConnection conn;
  if (!server.connect(conn)) return skipped();
  cb::Config c;
  c.failure_threshold = 3;
  c.recovery_timeout = 30;
  const cb::Settings s = cb::make_settings(c);
  Fleet fleet{conn, "{t:once}", cb::config_fingerprint(c), cb::fleet_rules(s)};
  cb::FleetReport r;
  r.delta.calls = 2;
  r.delta.failures = 2;
  r.consecutive_failures = 2;
  cb::FleetReply first = fleet.send(r);
  CHECK(first.fleet_calls == 2);
  CHECK(first.consecutive_failures == 2);  // the report that creates the state counts
  // The same report again (a retry after a timeout): nothing added.
  const cb::FleetReply again = fleet.send(r, false);
  CHECK(again.fleet_calls == 2);
  CHECK(again.consecutive_failures == 2);
  // A report of an older generation adds to the totals only.
  r.known_generation = fleet.generation + 5;
  const cb::FleetReply fenced = fleet.send(r);
  CHECK(fenced.fleet_calls == 4);
  CHECK(fenced.consecutive_failures == 2);
  // A local trip opens the fleet, with the trip's own time and duration.
  cb::FleetReport trip;
  trip.known_generation = fleet.generation;
  trip.state = cb::State::Open;
  trip.tripped = true;
  trip.open_elapsed_ms = 5000;
  trip.open_ms = 20000;
  const cb::FleetReply open = fleet.send(trip);
  CHECK(open.state == cb::State::Open);
  CHECK(open.open_ms == 20000);
  CHECK(open.open_elapsed_ms >= 5000);
  CHECK(open.open_elapsed_ms < 6000);
  // An observer that reports OPEN without having tripped re-stamps nothing.
  cb::FleetReport observer;
  observer.known_generation = fleet.generation;
  observer.state = cb::State::Open;
  observer.open_elapsed_ms = 0;
  observer.open_ms = 999999;
  const cb::FleetReply still = fleet.send(observer);
  CHECK(still.open_ms == 20000);
  CHECK(still.open_elapsed_ms >= 5000);
  // Another process's later trip extends to the later open-until.
  cb::FleetReport later = trip;
  later.known_generation = fleet.generation;
  later.open_elapsed_ms = 0;
  const cb::FleetReply extended = fleet.send(later);
  CHECK(extended.generation == open.generation);
  CHECK(extended.open_ms >= 25000);
  // One hash field per process remembers the last report applied.
  cb::RedisReply marks = conn.command({"HGET", "{t:once}", "p:t"});
  REQUIRE(marks);
  CHECK(cbredis::reply_text(marks) == std::to_string(fleet.serial));
  // A configuration that differs is refused, with the fleet's.
  Fleet other{conn, "{t:once}", "9,9", cb::fleet_rules(s)};
  const cb::FleetReport nothing;
  std::vector<std::string> args{"60000", "{t}:events",
                                std::to_string(cb::FleetReport::kArgs)};
  nothing.append_args(args, other.fingerprint, other.rules);
  cb::RedisReply reply =
      conn.eval(cb::kFleetSyncScript, script_keys(other.key, other.rules), args);
  REQUIRE(reply);
  REQUIRE(reply->is_array());
  REQUIRE(reply->elements.size() == 1);
  CHECK(cbredis::reply_text(reply->elements[0]) == "cfg," + fleet.fingerprint);
}

TEST_CASE("the fleet's count window holds window_size calls", "[fleet-script]") {
  RedisServer server;
  cb::RedisConnection conn;
  if (!server.connect(conn)) return skipped();
  cb::Config c;
  c.failure_threshold = 1e30;
  c.failure_rate_threshold = 0.9;
  c.window_size = 10;
  const cb::Settings s = cb::make_settings(c);
  Fleet fleet{conn, "{t:window}", cb::config_fingerprint(c), cb::fleet_rules(s)};
  auto field = [&conn](const char* f) {
    return std::stoll(fleet_field(conn, "{t:window}", f));
  };
  cb::FleetReport r;
  r.delta.calls = 50;  // one busy sync: 50 calls, 25 failed
  r.delta.failures = 25;
  r.delta.successes = 25;
  CHECK(fleet.send(r).state == cb::State::Closed);
  CHECK(field("wc") == 10);
  CHECK(field("wf") == 5);
  r.known_generation = fleet.generation;
  r.delta.calls = 4;  // then 4 calls, all failed: 6 of the old and 4 new
  r.delta.failures = 4;
  r.delta.successes = 0;
  CHECK(fleet.send(r).state == cb::State::Closed);
  CHECK(field("wc") == 10);
  CHECK(field("wf") == 7);
  r.delta.calls = 9;  // 9 failures: 1 of the 4 before and these 9, all failed
  r.delta.failures = 9;
  CHECK(fleet.send(r).state == cb::State::Open);
}

TEST_CASE("a window that is not the script's is taken as empty", "[fleet-script]") {
  RedisServer server;
  cb::RedisConnection conn;
  if (!server.connect(conn)) return skipped();
  cb::Config c;
  c.failure_threshold = 1e30;
  c.failure_rate_threshold = 0.9;
  c.window_size = 10;
  Fleet fleet{conn, "{t:odd}", cb::config_fingerprint(c),
              cb::fleet_rules(cb::make_settings(c))};
  auto field = [&conn](const char* f) {
    return std::stoll(fleet_field(conn, "{t:odd}", f));
  };
  auto set_window = [&conn](const std::string& w) {
    REQUIRE(conn.command({"HSET", "{t:odd}", "w", w}));
  };
  cb::FleetReport r;  // 8 calls, 1 failed, a report
  r.delta.calls = 8;
  r.delta.failures = 1;
  r.delta.successes = 7;
  fleet.send(r);
  r.known_generation = fleet.generation;
  // Bytes that are no whole number of entries: the window starts again.
  set_window("not a window");
  fleet.send(r);
  CHECK(field("wc") == 8);
  CHECK(field("wf") == 1);
  fleet.send(r);  // 16 calls: the oldest entry is cut to 2
  CHECK(field("wc") == 10);
  CHECK(field("xc") == 6);
  // An oldest entry of no calls, while the state says some were cut from
  // it: dropped, not divided by.
  std::string w;
  for (std::int64_t v : {0, 0, 0, 0, 0, 8, 1, 0}) cb::fleet_pack_int(w, v);
  set_window(w);
  CHECK(fleet.send(r).state == cb::State::Closed);
  CHECK(field("wc") == 10);
  CHECK(field("wf") == 1);
}

TEST_CASE("every key a sync makes expires, and is given its time again at ttl / 8",
          "[fleet-script]") {
  RedisServer server;
  cb::RedisConnection conn;
  if (!server.connect(conn)) return skipped();
  cb::Config c;
  c.failure_threshold = 1e30;
  c.failure_rate_threshold = 0.9;
  const std::string key = "{t:ttl}";
  Fleet fleet{conn, key, cb::config_fingerprint(c),
              cb::fleet_rules(cb::make_settings(c))};
  auto run = [&conn](std::vector<std::string> argv) {
    cb::RedisReply r = conn.command(argv);
    REQUIRE(r);
    return r;
  };
  auto pttl = [&run](const std::string& k) { return run({"PTTL", k})->integer; };
  cb::FleetReport r;
  r.delta.calls = 2;
  r.delta.successes = 2;
  fleet.send(r);
  r.known_generation = fleet.generation;
  // Made with its time to live.
  for (const std::string& k : {key}) {
    INFO(k);
    CHECK(pttl(k) > 50000);
    CHECK(pttl(k) <= 60000);
  }
  // Not given it again by every report: a report soon after leaves it.
  run({"PEXPIRE", key, "30000"});
  fleet.send(r);
  CHECK(pttl(key) <= 30000);
  // A report ttl / 8 (7.5 s) after the last refresh refreshes every key.
  cb::RedisReply t = run({"TIME"});
  const long long now_ms =
      std::stoll(t->elements[0].str) * 1000 + std::stoll(t->elements[1].str) / 1000;
  // (ex, the state's 16th value, set back by 8 s.)
  run({"EVAL",
       "local f = '" CIRCUITBREAKER_FLEET_STATE "'\n"
       "local v = {struct.unpack(f, redis.call('HGET', KEYS[1], 'v'))}\n"
       "v[16] = tonumber(ARGV[1])\n"
       "redis.call('HSET', KEYS[1], 'v', struct.pack(f, unpack(v, 1, 18)))",
       "1", key, std::to_string(now_ms - 8000)});
  CHECK(fleet_field(conn, key, "ex") == std::to_string(now_ms - 8000));
  fleet.send(r);
  CHECK(pttl(key) > 50000);
}

TEST_CASE("the lease script gives out half_open_max_calls leases", "[fleet-script]") {
  RedisServer server;
  cb::RedisConnection conn;
  if (!server.connect(conn)) return skipped();
  cb::Config c;
  c.failure_threshold = 1;
  c.recovery_timeout = 0.2;
  c.half_open_max_calls = 2;
  const cb::Settings s = cb::make_settings(c);
  Fleet fleet{conn, "{t:lease}", cb::config_fingerprint(c), cb::fleet_rules(s)};
  cb::FleetReport r;
  (void)fleet.send(r);
  r.known_generation = fleet.generation;
  r.delta.calls = 1;
  r.delta.failures = 1;
  r.consecutive_failures = 1;
  REQUIRE(fleet.send(r).state == cb::State::Open);
  auto lease = [&conn](const std::string& token) {
    cb::RedisReply x =
        conn.eval(cb::kFleetLeaseScript, cb::fleet_lease_keys("{t:lease}", 2),
                  {token, "10000", "{t}:events"});
    REQUIRE(x);
    REQUIRE(x->is_array());
    return cbredis::reply_text(x->elements[0]);
  };
  CHECK(lease("aa") == "state");  // still open
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(lease("aa") == "probe");
  CHECK(lease("bb") == "probe");
  CHECK(lease("cc") == "full");
  CHECK(lease("dd") == "full");
}

TEST_CASE("the scripts refuse keys they were not given as declared", "[fleet-script]") {
  // Every key a script touches is in its KEYS (Redis Cluster routes by
  // them): a call that leaves a lease key out is
  // an error, and changes nothing.
  RedisServer server;
  cb::RedisConnection conn;
  if (!server.connect(conn)) return skipped();
  cb::Config c;
  c.half_open_max_calls = 3;
  const cb::Settings s = cb::make_settings(c);
  const std::string rules = cb::fleet_rules(s);
  cb::FleetReport r;
  std::vector<std::string> args{"60000", "{t}:events",
                                std::to_string(cb::FleetReport::kArgs)};
  r.append_args(args, cb::config_fingerprint(c), rules);
  std::vector<std::string> keys = script_keys("{t:keys}", rules);
  REQUIRE(keys.size() == 4);
  for (std::size_t drop = 0; drop < keys.size(); ++drop) {
    std::vector<std::string> fewer = keys;
    fewer.erase(fewer.begin() + static_cast<std::ptrdiff_t>(drop));
    cb::RedisReply bad = conn.eval(cb::kFleetSyncScript, fewer, args);
    REQUIRE(bad);
    CHECK(bad->is_error());
  }
  cb::RedisReply none = conn.command({"EXISTS", "{t:keys}"});
  REQUIRE(none);
  CHECK(none->integer == 0);
  cb::RedisReply good = conn.eval(cb::kFleetSyncScript, keys, args);
  REQUIRE(good);
  CHECK(good->is_array());
  cb::RedisReply lease = conn.eval(cb::kFleetLeaseScript, {"{t:keys}", "{t:keys}:p:1"},
                                   {"aa", "10000", "{t}:events"});
  REQUIRE(lease);
  CHECK(lease->is_error());
}

TEST_CASE("fleet keys are versioned, injective in (prefix, name), one slot each",
          "[fleet-script]") {
  CHECK(cb::fleet_key("circuitbreaker", "payments") == "cb2:{circuitbreaker:payments}");
  CHECK(cb::fleet_channel("circuitbreaker") == "cb2:{circuitbreaker}:events");
  // The pairs that were one key.
  CHECK(cb::fleet_key("a", "b:c") == "cb2:{a:b%3Ac}");
  CHECK(cb::fleet_key("a:b", "c") == "cb2:{a%3Ab:c}");
  CHECK(cb::fleet_key("a", "b:c") != cb::fleet_key("a:b", "c"));
  // Braces, '%', spaces, control and non-ASCII bytes are encoded: the hash
  // tag is the first '{' and the last character of the key, whole.
  const std::string odd = cb::fleet_key("p", std::string("x}{%\n\0 \xc3\xa9", 9));
  CHECK(odd == "cb2:{p:x%7D%7B%25%0A%00%20%C3%A9}");
  CHECK(odd.find('{') == 4);
  CHECK(odd.find('}') == odd.size() - 1);
  // Different pairs, different keys (a sample of tricky ones).
  const char* parts[] = {"", "a", ":", "a:", ":a", "%3A", "%", "{", "}", "a.b", "a-b"};
  std::vector<std::string> keys;
  for (const char* p : parts) {
    for (const char* n : parts) keys.push_back(cb::fleet_key(p, n));
  }
  std::sort(keys.begin(), keys.end());
  CHECK(std::adjacent_find(keys.begin(), keys.end()) == keys.end());
}

TEST_CASE(
    "a breaker's key list has its hash, every probe slot and its "
    "health-check lease",
    "[fleet-script]") {
  const std::vector<std::string> keys = cb::fleet_breaker_keys("a", "b:c");
  REQUIRE(keys.size() == 2 + cb::kMaxHalfOpenCalls);
  CHECK(keys[0] == "cb2:{a:b%3Ac}");
  CHECK(keys[1] == "cb2:{a:b%3Ac}:p:0");
  CHECK(keys[keys.size() - 2] ==
        "cb2:{a:b%3Ac}:p:" + std::to_string(cb::kMaxHalfOpenCalls - 1));
  CHECK(keys.back() == "cb2:{a:b%3Ac}:h");
  CHECK(keys.back() == cb::fleet_health_key(cb::fleet_key("a", "b:c")));
  // No key of another breaker, even one whose name starts the same.
  for (const std::string& k : keys) CHECK(k.rfind("cb2:{a:b%3Ac}", 0) == 0);
  for (const std::string& k : cb::fleet_breaker_keys("a", "b")) {
    CHECK(std::find(keys.begin(), keys.end(), k) == keys.end());
  }
}

TEST_CASE("a probe sent on local rules counts once in the fleet's next half-open period",
          "[fleet-script]") {
  RedisServer server;
  cb::RedisConnection conn;
  if (!server.connect(conn)) return skipped();
  cb::Config c;
  c.failure_threshold = 1;
  c.recovery_timeout = 0.2;
  const cb::Settings s = cb::make_settings(c);
  Fleet fleet{conn, "{t:local}", cb::config_fingerprint(c), cb::fleet_rules(s)};
  cb::FleetReport r;
  (void)fleet.send(r);
  r.known_generation = fleet.generation;
  r.delta.calls = 1;
  r.delta.failures = 1;
  r.consecutive_failures = 1;
  REQUIRE(fleet.send(r).state == cb::State::Open);
  const std::uint64_t opened = fleet.generation;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  cb::FleetReport after;
  after.known_generation = opened;
  after.state = cb::State::Closed;  // the local copy closed on its probe
  after.probes = "L" + std::to_string(opened) + "/s/-1;";
  // It is the probe of the half-open period after generation `opened`'s
  // open period: the fleet closes. The same report again (a retry) counts
  // nothing, and neither does it in a later generation.
  const cb::FleetReply closed = fleet.send(after);
  CHECK(closed.state == cb::State::Closed);
  CHECK(closed.generation == opened + 2);
  CHECK(fleet.send(after, false).generation == opened + 2);
  CHECK(fleet.send(after).generation == opened + 2);
}

#endif  // CIRCUITBREAKER_HAVE_HIREDIS

TEST_CASE("a health check's pass closes the fleet only in the open period it knew",
          "[fleet-script][health]") {
  RedisServer server;
  cb::RedisConnection conn;
  if (!server.connect(conn)) return skipped();
  cb::Config c;
  c.failure_threshold = 1;
  c.recovery_timeout = 30;
  const cb::Settings s = cb::make_settings(c);
  Fleet fleet{conn, "{t:health}", cb::config_fingerprint(c), cb::fleet_rules(s)};
  cb::FleetReport trip;
  trip.state = cb::State::Open;
  trip.tripped = true;
  trip.open_ms = 30000;
  const cb::FleetReply open = fleet.send(trip);
  REQUIRE(open.state == cb::State::Open);
  // A pass reported with an older generation (the fleet moved on since that
  // process knew it): nothing.
  cb::FleetReport stale;
  stale.known_generation = open.generation - 1;
  stale.command = cb::FleetCommand::HealthClose;
  CHECK(fleet.send(stale).state == cb::State::Open);
  // A pass of the current open period closes the fleet, backoff reset.
  cb::FleetReport pass;
  pass.known_generation = open.generation;
  pass.command = cb::FleetCommand::HealthClose;
  const cb::FleetReply closed = fleet.send(pass);
  CHECK(closed.state == cb::State::Closed);
  CHECK(closed.generation == open.generation + 1);
  CHECK(closed.consecutive_opens == 0);
  // Not OPEN (closed, or forced open by hand): a pass changes nothing.
  cb::FleetReport again = pass;
  again.known_generation = closed.generation;
  CHECK(fleet.send(again).generation == closed.generation);
  cb::FleetReport force;
  force.known_generation = closed.generation;
  force.command = cb::FleetCommand::ForceOpen;
  const cb::FleetReply forced = fleet.send(force);
  REQUIRE(forced.state == cb::State::ForcedOpen);
  cb::FleetReport late = pass;
  late.known_generation = forced.generation;
  CHECK(fleet.send(late).state == cb::State::ForcedOpen);
}
