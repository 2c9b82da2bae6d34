// The fleet store's threads together: FleetSync's background thread (and a
// second store's, standing for a second process) against a real
// redis-server, while this thread acquires, records, releases and takes
// probe leases on many breakers, issues manual commands, and the server is
// killed and started again in the middle. It asserts that the fleet comes
// back (linked again, its state rebuilt) and that manual control still
// reaches every process; its real purpose is to run under ThreadSanitizer
// (make -C tests/cpp tsan), which fails on any data race between the
// threads. Every loop is bounded in count and in time (a few seconds).
#include <catch2/catch.hpp>

#ifdef CIRCUITBREAKER_HAVE_HIREDIS

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "circuitbreaker/fleet/fleet_handle.hpp"
#include "circuitbreaker/fleet/sync.hpp"
#include "redis_test_support.hpp"
#include "tcp_freeze_proxy.hpp"

namespace cb = circuitbreaker;

namespace {

// One process's view of one fleet breaker, through the handle the binding
// holds (fleet/fleet_handle.hpp): a probe asks for the fleet's lease; a trip
// wakes the sync thread, a failure nudges it; a settled probe and a manual
// command wake it.
struct Caller {
  Caller(std::shared_ptr<cb::FleetSync> s, std::shared_ptr<cb::FleetMember> m)
      : sync(std::move(s)),
        member(std::move(m)),
        handle(std::make_unique<cb::FleetHandle>(member, sync)) {}
  // The handle first: it flushes its member's counts on its sync.
  void forget() {
    handle.reset();
    member.reset();
    sync.reset();
  }

  std::shared_ptr<cb::FleetSync> sync;
  std::shared_ptr<cb::FleetMember> member;
  std::unique_ptr<cb::FleetHandle> handle;

  cb::Admission acquire(cb::Nanos now) {
    return handle->acquire(now, cb::kNanosPerSecond);
  }
  void record(const cb::Permit& p, cb::Outcome o, cb::Nanos now) {
    handle->record(p, o, now, -1);
  }
  void release(const cb::Permit& p, cb::Nanos now) { handle->release(p, now); }
  void command(cb::FleetCommand c, cb::Nanos now) {
    if (c == cb::FleetCommand::ForceOpen) handle->force_open(now);
    if (c == cb::FleetCommand::Reset) handle->reset(now);
  }
};

// A store's spec on `endpoint`: prefix, sync interval and timeout in ms.
cb::FleetSpec spec_of(const cb::RedisEndpoint& endpoint, std::string prefix, int sync_ms,
                      int timeout_ms) {
  cb::FleetSpec spec;
  spec.endpoint = endpoint;
  spec.prefix = std::move(prefix);
  spec.sync_interval = sync_ms * cb::kNanosPerMs;
  spec.timeout = timeout_ms * cb::kNanosPerMs;
  return spec;
}

// Polls `done()` every 5 ms for at most `seconds`; its last value.
template <typename Done>
bool wait_for(Done&& done, double seconds) {
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<int>(seconds * 1000));
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return done();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// The ids of the server's subscribed clients (CLIENT LIST TYPE pubsub),
// sorted.
std::vector<std::string> pubsub_ids(cb::RedisConnection& redis) {
  std::vector<std::string> out;
  cb::RedisReply r = redis.command({"CLIENT", "LIST", "TYPE", "pubsub"});
  const std::string list = r ? cbredis::reply_text(r) : std::string();
  for (std::size_t at = list.find("id="); at != std::string::npos;
       at = list.find("\nid=", at + 1)) {
    const std::size_t from = list.find('=', at) + 1;
    out.push_back(list.substr(from, list.find(' ', from) - from));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// One store (a FleetSync) with `n` idle breakers "b0".. of one config.
struct Store {
  std::shared_ptr<cb::FleetSync> sync;
  std::vector<Caller> callers;
  Store(const cb::FleetSpec& spec, int n, const cb::Config& config)
      : sync(cb::FleetSync::for_spec(spec)) {
    for (int i = 0; i < n; ++i) {
      callers.push_back({sync, sync->join("b" + std::to_string(i), config)});
    }
  }
  ~Store() {
    for (Caller& c : callers) c.forget();
  }
  cb::State state(int i) const {
    return callers[static_cast<std::size_t>(i)]
        .member->breaker()
        .snapshot(sync->now())
        .state;
  }
  // Trips breaker `i` here (one failure trips it); the sync tells the fleet.
  void trip(int i) {
    Caller& c = callers[static_cast<std::size_t>(i)];
    const cb::Admission a = c.acquire(sync->now());
    REQUIRE(a.permitted);
    c.record(a.permit, cb::Outcome::Failure, sync->now());
  }
  // Whether two more syncs went through: a sync that ended after the link
  // came back, and the check that followed it, are done.
  bool synced_twice_more() const {
    const std::uint64_t from = sync->stats().syncs;
    return wait_for([&] { return sync->stats().syncs >= from + 2; }, 5);
  }
};

}  // namespace

// A sync that times out because Redis is slow (CLIENT PAUSE: no command is
// served for 0.3 s, the timeout is 0.1 s) loses no pub/sub message: the
// subscription is kept (the same client on the server), answers the PING of
// the liveness check, and no store reads all its breakers again; a trip
// published after the slow moment still reaches the other store. The last
// breaker of 50 is the one tripped: the sweep (one breaker a second, in
// order) cannot read it within the test, only a message can.
TEST_CASE("a slow Redis keeps the subscription and costs no full read", "[fleet-sync]") {
  cbredis::RedisServer server;
  cb::RedisConnection redis;
  if (!server.connect(redis)) return cbredis::skipped();
  cb::FleetSpec spec = spec_of(server.endpoint, "slow", 20, 100);
  cb::FleetSpec spec2 = spec;
  spec2.sync_interval = 30 * cb::kNanosPerMs;  // another store: a second process
  cb::Config config;
  config.failure_threshold = 1;
  config.recovery_timeout = 60;
  constexpr int kBreakers = 50;
  {
    Store one(spec, kBreakers, config), two(spec2, kBreakers, config);
    REQUIRE(wait_for([&] { return pubsub_ids(redis).size() == 2; }, 5));
    const std::vector<std::string> before = pubsub_ids(redis);
    CHECK(one.sync->subscriptions() == 1);
    CHECK(two.sync->subscriptions() == 1);

    const std::uint64_t failures = one.sync->stats().failures;
    const std::uint64_t failures2 = two.sync->stats().failures;
    REQUIRE(cbredis::reply_text(redis.command({"CLIENT", "PAUSE", "300", "ALL"})) ==
            "OK");
    CHECK(wait_for(
        [&] {
          return one.sync->stats().failures > failures &&
                 two.sync->stats().failures > failures2;
        },
        5));
    CHECK(wait_for([&] { return one.sync->stats().linked && two.sync->stats().linked; },
                   5));
    CHECK(one.synced_twice_more());
    CHECK(two.synced_twice_more());

    CHECK(pubsub_ids(redis) == before);  // the same subscribed clients
    CHECK(one.sync->subscriptions() == 1);
    CHECK(two.sync->subscriptions() == 1);

    const int last = kBreakers - 1;
    two.trip(last);
    CHECK(wait_for([&] { return one.state(last) == cb::State::Open; }, 5));
  }
  cb::FleetSync::shutdown_all(2 * cb::kNanosPerSecond);
}

// Managed services drop idle connections (Aiven after 300 s, Azure after
// 10 min): an idle subscription sends a PING every keep_alive, which the
// server sees as the subscribed client's last command, and the
// subscription stays the same client.
TEST_CASE("an idle subscription is kept alive with PINGs", "[fleet-sync]") {
  cbredis::RedisServer server;
  cb::RedisConnection redis;
  if (!server.connect(redis)) return cbredis::skipped();
  cb::FleetSpec spec = spec_of(server.endpoint, "keepalive", 20, 200);
  spec.keep_alive = 100 * cb::kNanosPerMs;
  cb::Config config;
  {
    Store one(spec, 1, config);
    REQUIRE(wait_for([&] { return pubsub_ids(redis).size() == 1; }, 5));
    const std::vector<std::string> before = pubsub_ids(redis);
    const auto last_command = [&] {
      const std::string list =
          cbredis::reply_text(redis.command({"CLIENT", "LIST", "TYPE", "pubsub"}));
      const std::size_t at = list.find(" cmd=");
      return at == std::string::npos
                 ? std::string()
                 : list.substr(at + 5, list.find(' ', at + 5) - at - 5);
    };
    CHECK(last_command() == "subscribe");
    CHECK(wait_for([&] { return last_command() == "ping"; }, 5));
    CHECK(pubsub_ids(redis) == before);
    CHECK(one.sync->subscriptions() == 1);
  }
}

// A subscription whose connection ends (CLIENT KILL of that client; a
// restarted Redis does the same) is replaced: the store subscribes again
// (each subscription asks for a read of every breaker), and messages reach
// it again.
TEST_CASE("a subscription that ends is replaced, and every breaker read",
          "[fleet-sync]") {
  cbredis::RedisServer server;
  cb::RedisConnection redis;
  if (!server.connect(redis)) return cbredis::skipped();
  cb::FleetSpec spec = spec_of(server.endpoint, "killed", 20, 100);
  cb::FleetSpec spec2 = spec;
  spec2.sync_interval = 30 * cb::kNanosPerMs;
  cb::Config config;
  config.failure_threshold = 1;
  config.recovery_timeout = 60;
  constexpr int kBreakers = 50;
  {
    Store one(spec, kBreakers, config);
    REQUIRE(wait_for([&] { return one.sync->subscriptions() == 1; }, 5));
    REQUIRE(wait_for([&] { return pubsub_ids(redis).size() == 1; }, 5));
    const std::vector<std::string> before = pubsub_ids(redis);

    // Another store (a second process), with a subscription of its own
    // that is left alone.
    Store two(spec2, kBreakers, config);
    REQUIRE(wait_for([&] { return pubsub_ids(redis).size() == 2; }, 5));
    const std::vector<std::string> both = pubsub_ids(redis);
    std::string other;
    for (const std::string& id : both) {
      if (id != before[0]) other = id;
    }
    REQUIRE_FALSE(other.empty());
    REQUIRE(redis.command({"CLIENT", "KILL", "ID", before[0]}));
    CHECK(wait_for([&] { return one.sync->subscriptions() == 2; }, 5));
    const std::vector<std::string> after = pubsub_ids(redis);
    CHECK(after.size() == 2);
    CHECK(std::find(after.begin(), after.end(), before[0]) == after.end());
    CHECK(two.sync->subscriptions() == 1);

    // Messages reach the new subscription.
    const int last = kBreakers - 1;
    two.trip(last);
    CHECK(wait_for([&] { return one.state(last) == cb::State::Open; }, 5));
  }
  cb::FleetSync::shutdown_all(2 * cb::kNanosPerSecond);
}

// A subscription that stops answering while its socket stays open (a hung
// server or network; here a proxy that stops passing its bytes) fails the
// liveness check after a failed sync (CLIENT PAUSE): it is replaced, and
// the read of every breaker that follows finds what was published to the
// dead one (a trip by another store).
TEST_CASE("a subscription that does not answer the check is replaced", "[fleet-sync]") {
  cbredis::RedisServer server;
  cb::RedisConnection redis;
  if (!server.connect(redis)) return cbredis::skipped();
  cbredis::FreezeProxy proxy(server.endpoint.port);
  REQUIRE(proxy.port() != 0);
  cb::FleetSpec spec = spec_of(server.endpoint, "frozen", 20, 100);
  spec.endpoint.port = proxy.port();
  cb::FleetSpec spec2 = spec;
  spec2.endpoint = server.endpoint;  // the other store, not through the proxy
  spec2.sync_interval = 30 * cb::kNanosPerMs;
  cb::Config config;
  config.failure_threshold = 1;
  config.recovery_timeout = 60;
  constexpr int kBreakers = 50;
  {
    Store one(spec, kBreakers, config), two(spec2, kBreakers, config);
    REQUIRE(wait_for([&] { return pubsub_ids(redis).size() == 2; }, 5));
    REQUIRE(one.sync->subscriptions() == 1);
    REQUIRE(proxy.freeze_subscribers());

    // Published to a subscription that passes nothing: lost for `one`.
    const int last = kBreakers - 1;
    const std::string key = two.callers[last].member->key();
    two.trip(last);
    REQUIRE(wait_for(
        [&] {
          return cbredis::reply_text(
                     redis.command({"EVAL", cb::kFleetReadScript, "1", key, "s"})) == "1";
        },
        5));
    CHECK(one.state(last) == cb::State::Closed);

    const std::uint64_t failures = one.sync->stats().failures;
    REQUIRE(cbredis::reply_text(redis.command({"CLIENT", "PAUSE", "300", "ALL"})) ==
            "OK");
    CHECK(wait_for([&] { return one.sync->stats().failures > failures; }, 5));
    CHECK(wait_for([&] { return one.sync->subscriptions() == 2; }, 5));
    CHECK(wait_for([&] { return one.state(last) == cb::State::Open; }, 5));
    CHECK(two.sync->subscriptions() == 1);
  }
  cb::FleetSync::shutdown_all(2 * cb::kNanosPerSecond);
}

TEST_CASE("the sync threads and a caller share fleet breakers without a race",
          "[fleet-sync]") {
  cbredis::RedisServer server;
  {
    cb::RedisConnection c;
    if (!server.connect(c)) return cbredis::skipped();
  }
  // Two stores on one server and prefix: two sync threads (two "processes")
  // on the same breakers.
  cb::FleetSpec spec =
      spec_of(server.endpoint, "stress:" + std::to_string(server.endpoint.port), 5, 200);
  cb::FleetSpec spec2 = spec;
  spec2.sync_interval = 7 * cb::kNanosPerMs;
  std::shared_ptr<cb::FleetSync> sync1 = cb::FleetSync::for_spec(spec);
  std::shared_ptr<cb::FleetSync> sync2 = cb::FleetSync::for_spec(spec2);
  REQUIRE(sync1 != sync2);

  cb::Config config;
  config.failure_threshold = 3;
  config.recovery_timeout = 0.02;
  config.half_open_max_calls = 2;
  constexpr int kBreakers = 12;
  std::vector<Caller> callers;
  for (int i = 0; i < kBreakers; ++i) {
    const std::string name = "b:" + std::to_string(i);  // ':' is encoded in the key
    callers.push_back({sync1, sync1->join(name, config)});
    callers.push_back({sync2, sync2->join(name, config)});
  }
  REQUIRE(callers[0].member->key() == callers[1].member->key());

  std::uint64_t rng = 0x5eedULL;
  const auto started = std::chrono::steady_clock::now();
  const auto budget = std::chrono::milliseconds(2500);
  bool restarted = false;
  int ops = 0, probes = 0;
  std::vector<cb::Permit> held;  // probes and calls still out
  constexpr int kMaxOps = 400000;
  for (; ops < kMaxOps && std::chrono::steady_clock::now() - started < budget; ++ops) {
    Caller& c = callers[cb::splitmix64(rng) % callers.size()];
    const cb::Nanos now = c.sync->now();
    const std::uint64_t dice = cb::splitmix64(rng) % 1000;
    if (dice < 3) {
      c.command(dice == 0 ? cb::FleetCommand::ForceOpen : cb::FleetCommand::Reset, now);
    } else {
      const cb::Admission a = c.acquire(now);
      if (a.permitted) {
        if (a.permit.kind == cb::PermitKind::Probe) ++probes;
        if (dice < 100) {
          c.release(a.permit, now);
        } else {
          c.record(a.permit, dice < 500 ? cb::Outcome::Failure : cb::Outcome::Success,
                   c.sync->now());
        }
      }
    }
    // A restart in the middle: the connections of both sync threads and of
    // this thread die; Redis comes back empty.
    if (!restarted &&
        (ops >= kMaxOps / 2 || std::chrono::steady_clock::now() - started > budget / 2)) {
      REQUIRE(server.restart());
      restarted = true;
    }
    if (ops % 64 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  INFO("operations: " << ops << ", probes: " << probes);
  CHECK(restarted);
  CHECK(ops > 100);
  CHECK(probes > 0);

  // Both stores link again, and rebuild the fleet's state.
  CHECK(wait_for([&] { return sync1->stats().linked && sync2->stats().linked; }, 5));
  cb::RedisConnection redis;
  REQUIRE(server.connect(redis));
  CHECK(wait_for(
      [&] {
        cb::RedisReply r = redis.command({"EXISTS", callers[0].member->key()});
        return r && r->is_integer() && r->integer == 1;
      },
      5));

  // What the loop's last operations left to report (a Reset queued in the
  // other process, say) reaches the fleet first: else it could land after
  // the command below, and undo it.
  CHECK(wait_for(
      [&] {
        for (const Caller& c : callers) {
          if (c.member->has_news(c.sync->now())) return false;
        }
        return true;
      },
      5));

  // A manual command in one process reaches the fleet and the other.
  for (int i = 0; i < kBreakers; ++i) {
    callers[2 * i].command(cb::FleetCommand::ForceOpen, sync1->now());
  }
  CHECK(wait_for(
      [&] {
        for (int i = 0; i < kBreakers; ++i) {
          const Caller& other = callers[2 * i + 1];
          if (other.member->breaker().snapshot(sync2->now()).state !=
              cb::State::ForcedOpen) {
            return false;
          }
        }
        return true;
      },
      5));
  for (int i = 0; i < kBreakers; ++i) {
    callers[2 * i + 1].command(cb::FleetCommand::Reset, sync2->now());
  }
  CHECK(wait_for(
      [&] {
        for (int i = 0; i < kBreakers; ++i) {
          if (callers[2 * i].member->breaker().snapshot(sync1->now()).state !=
              cb::State::Closed) {
            return false;
          }
        }
        return true;
      },
      5));

  // The threads end before the server goes (at most 2 s).
  callers.clear();
  sync1.reset();
  sync2.reset();
  cb::FleetSync::shutdown_all(2 * cb::kNanosPerSecond);
}

TEST_CASE("a probe takes the fleet's lease after the server closed idle connections",
          "[fleet-sync]") {
  cbredis::RedisServer server;
  cb::RedisConnection redis;
  if (!server.connect(redis)) return cbredis::skipped();
  cb::FleetSpec spec = spec_of(server.endpoint, "idle", 50, 500);
  cb::Config config;
  config.failure_threshold = 1;
  config.recovery_timeout = 0.3;
  std::shared_ptr<cb::FleetSync> sync = cb::FleetSync::for_spec(spec);
  Caller c{sync, sync->join("api", config)};
  const std::string key = c.member->key();
  auto field = [&redis, &key](const char* f) {
    cb::RedisReply r = redis.command({"EVAL", cb::kFleetReadScript, "1", key, f});
    return r ? cbredis::reply_text(r) : std::string("?");
  };
  auto leases = [&redis, &key] {
    cb::RedisReply r = redis.command({"EXISTS", key + ":p:0"});
    return r && r->is_integer() ? r->integer : -1;
  };
  // Trips, and the fleet opens; the connections are cut; the open period
  // ends; the probe holds the lease; its success closes the fleet.
  auto trip_cut_probe = [&](const std::function<void()>& cut) {
    const cb::Admission a = c.acquire(sync->now());
    REQUIRE(a.permitted);
    c.record(a.permit, cb::Outcome::Failure, sync->now());
    REQUIRE(wait_for([&] { return field("s") == "1"; }, 5));
    cut();
    std::this_thread::sleep_for(std::chrono::milliseconds(350));
    REQUIRE(sync->stats().linked);
    const cb::Admission probe = c.acquire(sync->now());
    REQUIRE(probe.permitted);
    CHECK(probe.permit.kind == cb::PermitKind::Probe);
    CHECK(leases() == 1);  // the fleet's lease, not local rules
    CHECK(sync->stats().linked);
    c.record(probe.permit, cb::Outcome::Success, sync->now());
    CHECK(wait_for([&] { return field("s") == "0"; }, 5));
    CHECK(leases() == 0);
  };
  SECTION("CLIENT KILL") {
    trip_cut_probe([&] {
      cb::RedisReply r = redis.command({"CLIENT", "KILL", "TYPE", "normal"});
      REQUIRE(r);
      CHECK(r->integer >= 2);  // the sync thread's and the caller's
    });
  }
  SECTION("the server's idle timeout") {
    trip_cut_probe([&] {
      REQUIRE(redis.command({"CONFIG", "SET", "timeout", "1"}));
      std::this_thread::sleep_for(std::chrono::milliseconds(1600));  // the caller idles
      REQUIRE(server.connect(redis));                                // ours was idle too
    });
  }
  c.forget();
  sync.reset();
  cb::FleetSync::shutdown_all(2 * cb::kNanosPerSecond);
}

#endif  // CIRCUITBREAKER_HAVE_HIREDIS
