// The fleet store's transport on a real Redis Cluster (fleet/transport.hpp,
// redis/router.hpp, fleet/round_trip.hpp): three cluster-enabled redis-servers on
// 127.0.0.1 that this test joins into a cluster (CLUSTER ADDSLOTSRANGE, CLUSTER MEET);
// then detection, a sync of breakers over every master with one EVALSHA each, a slot
// moved under the store (MOVED followed in the same sync), scripts flushed on a node
// (NOSCRIPT), the leases (a probe's, a health check's, which follows MOVED) on the slot's
// master, and a master killed (only its breakers wait). Detection on a plain server, and
// several seeds that are not a cluster.
#include <catch2/catch.hpp>

#ifdef CIRCUITBREAKER_HAVE_HIREDIS

#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "circuitbreaker/redis/cluster_view.hpp"
#include "circuitbreaker/fleet/sync.hpp"
#include "circuitbreaker/fleet/transport.hpp"
#include "redis_test_support.hpp"

namespace cb = circuitbreaker;
using cbredis::RedisServer;

namespace {

std::string text(const cb::RedisReply& r) {
  return r ? cbredis::reply_text(r) : std::string();
}

// Three masters, slots split evenly, no replicas.
struct Cluster {
  std::array<std::unique_ptr<RedisServer>, 3> nodes;
  std::array<cb::RedisConnection, 3> conns;
  bool ok = false;

  Cluster() {
    for (auto& n : nodes) n = std::make_unique<RedisServer>(RedisServer::ClusterNode{});
    for (std::size_t i = 0; i < 3; ++i) {
      if (!nodes[i]->connect(conns[i])) return;
    }
    const char* ranges[3][2] = {{"0", "5460"}, {"5461", "10922"}, {"10923", "16383"}};
    for (std::size_t i = 0; i < 3; ++i) {
      if (text(conns[i].command(
              {"CLUSTER", "ADDSLOTSRANGE", ranges[i][0], ranges[i][1]})) != "OK") {
        return;
      }
    }
    for (std::size_t i = 1; i < 3; ++i) {
      conns[0].command(
          {"CLUSTER", "MEET", "127.0.0.1", std::to_string(nodes[i]->endpoint.port)});
    }
    for (int tries = 0; tries < 300 && !ok; ++tries) {
      ok = true;
      for (auto& c : conns) {
        const std::string info = text(c.command({"CLUSTER", "INFO"}));
        ok = ok && info.find("cluster_state:ok") != std::string::npos &&
             info.find("cluster_known_nodes:3") != std::string::npos;
      }
      if (!ok) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  std::size_t index_of(const cb::RedisNodeAddress& a) const {
    for (std::size_t i = 0; i < 3; ++i) {
      if (nodes[i]->endpoint.port == a.port) return i;
    }
    return 3;
  }
  std::string id(std::size_t i) { return text(conns[i].command({"CLUSTER", "MYID"})); }
  long long evalsha_calls(std::size_t i) {
    const std::string s = text(conns[i].command({"INFO", "commandstats"}));
    const std::size_t at = s.find("cmdstat_evalsha:calls=");
    return at == std::string::npos ? 0 : std::stoll(s.substr(at + 22));
  }
  // Moves `slot` and its keys from node `from` to node `to`, as a
  // resharding does.
  bool move_slot(std::uint16_t slot, std::size_t from, std::size_t to) {
    const std::string s = std::to_string(slot);
    conns[to].command({"CLUSTER", "SETSLOT", s, "IMPORTING", id(from)});
    conns[from].command({"CLUSTER", "SETSLOT", s, "MIGRATING", id(to)});
    cb::RedisReply keys = conns[from].command({"CLUSTER", "GETKEYSINSLOT", s, "100"});
    if (!keys || !keys->is_array()) return false;
    if (keys->elements.size() > 0) {
      std::vector<std::string> migrate{
          "MIGRATE", "127.0.0.1", std::to_string(nodes[to]->endpoint.port), "", "0",
          "5000",    "KEYS"};
      for (std::size_t k = 0; k < keys->elements.size(); ++k) {
        migrate.push_back(cbredis::reply_text(keys->elements[k]));
      }
      if (text(conns[from].command(migrate)) != "OK") return false;
    }
    const std::string target = id(to);
    for (const std::size_t i : {to, from, 3 - to - from}) {
      conns[i].command({"CLUSTER", "SETSLOT", s, "NODE", target});
    }
    return true;
  }
};

void one_call(cb::FleetMember& m, const cb::FleetSpec& spec) {
  const cb::Nanos t = cb::fleet_clock(spec);
  const cb::Admission a = m.breaker().acquire(t);
  REQUIRE(a.permitted);
  m.breaker().record(a.permit, cb::Outcome::Success, t);
}

// The ids of node `c`'s subscribed clients (CLIENT LIST TYPE pubsub).
std::set<std::string> pubsub_ids(cb::RedisConnection& c) {
  std::set<std::string> out;
  const std::string list = text(c.command({"CLIENT", "LIST", "TYPE", "pubsub"}));
  for (std::size_t at = list.find("id="); at != std::string::npos;
       at = list.find("\nid=", at + 1)) {
    const std::size_t from = list.find('=', at) + 1;
    out.insert(list.substr(from, list.find(' ', from) - from));
  }
  return out;
}

// Polls `done()` every 5 ms for at most 5 s; its last value.
template <typename Done>
bool within_5s(Done&& done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return done();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace

TEST_CASE(
    "cluster transport: a real cluster, every master, MOVED, NOSCRIPT, a dead master",
    "[redis-cluster-transport]") {
  Cluster cluster;
  if (!cluster.ok) {
    cbredis::skipped();
    return;
  }
  cb::FleetSpec spec;
  spec.endpoint.host = "127.0.0.1";
  spec.endpoint.port = cluster.nodes[1]->endpoint.port;
  spec.prefix = "transport";
  spec.timeout = cb::kNanosPerSecond;
  auto view = std::make_shared<cb::ClusterView>();
  cb::FleetTransport transport(view);
  cb::FleetLink link(spec, cb::fleet_clock(spec));

  std::vector<std::unique_ptr<cb::FleetMember>> members;
  std::vector<cb::FleetMember*> raw;
  std::set<std::size_t> masters;
  for (int i = 0; i < 30; ++i) {
    const std::string name = "b" + std::to_string(i);
    members.push_back(std::make_unique<cb::FleetMember>(
        name, cb::fleet_key(spec.prefix, name), cb::Config{}, cb::fleet_clock(spec),
        "p" + std::to_string(i)));
    raw.push_back(members.back().get());
  }
  for (auto* m : raw) one_call(*m, spec);

  // Found to be a cluster; one EVALSHA per breaker, on its slot's master.
  REQUIRE(transport.sync(spec, raw, link, true));
  CHECK(transport.cluster());
  CHECK(view->master_count() == 3);
  long long evalshas = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    evalshas += cluster.evalsha_calls(i);
    CHECK(cluster.evalsha_calls(i) > 0);  // the breakers span every master
  }
  CHECK(evalshas == 30);
  for (auto* m : raw) {
    CHECK(m->status().known);
    CHECK(m->status().fleet_calls == 1);
    CHECK_FALSE(m->has_news(cb::fleet_clock(spec)));
    masters.insert(cluster.index_of(view->health_of_key(m->key()).master));
  }
  CHECK(masters.size() == 3);

  // The lease goes to the slot's master.
  const std::optional<std::vector<std::string>> lease =
      transport.lease(spec, cb::fleet_lease_keys(raw[0]->key(), 1), "token", 1000,
                      cb::SteadyClock::now() + spec.timeout);
  REQUIRE(lease.has_value());
  CHECK_FALSE(lease->empty());
  // So does the health check's: one holder per interval.
  const std::string health_key = cb::fleet_health_key(raw[0]->key());
  CHECK(transport.health_lease(spec, health_key, "one", 60000,
                               cb::SteadyClock::now() + spec.timeout) == true);
  CHECK(transport.health_lease(spec, health_key, "two", 60000,
                               cb::SteadyClock::now() + spec.timeout) == false);

  // A slot moved under the store: the old master answers MOVED, the report
  // goes to the new one in the same sync, and the map follows.
  cb::FleetMember& moved = *raw[0];
  const std::uint16_t slot = cb::cluster_key_slot(moved.key());
  const std::size_t from = cluster.index_of(view->health_of_key(moved.key()).master);
  const std::size_t to = (from + 1) % 3;
  REQUIRE(cluster.move_slot(slot, from, to));
  one_call(moved, spec);
  REQUIRE(transport.sync(spec, {&moved}, link, false));
  CHECK(moved.status().fleet_calls == 2);
  CHECK_FALSE(moved.has_news(cb::fleet_clock(spec)));
  CHECK(cluster.index_of(view->health_of_key(moved.key()).master) == to);
  // The health lease moved with its slot, and is still held.
  CHECK(transport.health_lease(spec, health_key, "three", 60000,
                               cb::SteadyClock::now() + spec.timeout) == false);
  // A slot moved that the store has not seen move: the health lease follows
  // MOVED to the new master.
  cb::FleetMember& other = *raw[1];
  const std::uint16_t other_slot = cb::cluster_key_slot(other.key());
  const std::size_t other_from =
      cluster.index_of(view->health_of_key(other.key()).master);
  if (other_slot != slot &&
      cluster.move_slot(other_slot, other_from, (other_from + 1) % 3)) {
    const std::string other_key = cb::fleet_health_key(other.key());
    CHECK(transport.health_lease(spec, other_key, "one", 60000,
                                 cb::SteadyClock::now() + spec.timeout) == true);
    CHECK(cluster.index_of(view->health_of_key(other.key()).master) ==
          (other_from + 1) % 3);
    CHECK(transport.health_lease(spec, other_key, "two", 60000,
                                 cb::SteadyClock::now() + spec.timeout) == false);
  }

  // Scripts flushed on a node: loaded again, and every report applied.
  for (auto& c : cluster.conns) c.command({"SCRIPT", "FLUSH"});
  for (auto* m : raw) one_call(*m, spec);
  REQUIRE(transport.sync(spec, raw, link, true));
  for (auto* m : raw) CHECK_FALSE(m->has_news(cb::fleet_clock(spec)));

  // A slot that its master no longer serves (CLUSTERDOWN Hash slot not
  // served, as for a slot whose master failed, with
  // cluster-require-full-coverage off): only the breakers of that slot wait
  // and run on local rules; the master's other breakers sync, and its
  // health is not marked down by a lease on that slot either.
  cb::FleetMember* unserved = nullptr;
  for (auto* m : raw) {
    const std::uint16_t s = cb::cluster_key_slot(m->key());
    if (s != slot && s != other_slot) unserved = m;
  }
  REQUIRE(unserved != nullptr);
  const std::uint16_t down_slot = cb::cluster_key_slot(unserved->key());
  const std::size_t owner = cluster.index_of(view->health_of_key(unserved->key()).master);
  std::vector<cb::FleetMember*> neighbours;  // the owner's other breakers
  for (auto* m : raw) {
    if (m != unserved && cb::cluster_key_slot(m->key()) != down_slot &&
        cluster.index_of(view->health_of_key(m->key()).master) == owner) {
      neighbours.push_back(m);
    }
  }
  REQUIRE_FALSE(neighbours.empty());
  for (auto& c : cluster.conns) {
    REQUIRE(text(c.command({"CONFIG", "SET", "cluster-require-full-coverage", "no"})) ==
            "OK");
    REQUIRE(text(c.command({"CLUSTER", "DELSLOTS", std::to_string(down_slot)})) == "OK");
  }
  const auto linked = [&](cb::FleetMember* m) {
    return cb::breaker_link_stats(link.stats(cb::fleet_clock(spec), true), *view,
                                  m->key(), cb::fleet_clock(spec))
        .linked;
  };
  one_call(*unserved, spec);
  for (auto* m : neighbours) one_call(*m, spec);
  std::vector<cb::FleetMember*> owners_breakers = neighbours;
  owners_breakers.push_back(unserved);
  CHECK(transport.sync(spec, owners_breakers, link, false));
  CHECK(unserved->has_news(cb::fleet_clock(spec)));  // its report waits
  CHECK_FALSE(linked(unserved));
  for (auto* m : neighbours) {
    CHECK_FALSE(m->has_news(cb::fleet_clock(spec)));
    CHECK(linked(m));
  }
  CHECK_FALSE(transport
                  .lease(spec, cb::fleet_lease_keys(unserved->key(), 1), "t2", 1000,
                         cb::SteadyClock::now() + spec.timeout)
                  .has_value());
  CHECK(linked(neighbours[0]));
  CHECK_FALSE(linked(unserved));
  // Served again (by its master): the next syncs send the waiting report,
  // and the breaker is linked again.
  const std::string owner_id = cluster.id(owner);
  REQUIRE(text(cluster.conns[owner].command(
              {"CLUSTER", "ADDSLOTS", std::to_string(down_slot)})) == "OK");
  for (std::size_t i = 0; i < 3; ++i) {
    if (i != owner) {
      cluster.conns[i].command(
          {"CLUSTER", "SETSLOT", std::to_string(down_slot), "NODE", owner_id});
    }
  }
  CHECK(within_5s([&] {
    view->request_refresh();
    transport.sync(spec, {unserved}, link, false);
    return !unserved->has_news(cb::fleet_clock(spec)) && linked(unserved);
  }));

  // A master killed: its breakers' reports wait, the others sync, and each
  // breaker's link says which.
  const std::size_t dead = (to + 1) % 3;
  cluster.nodes[dead]->kill();
  for (auto* m : raw) one_call(*m, spec);
  const auto started = std::chrono::steady_clock::now();
  CHECK(transport.sync(spec, raw, link, true));
  CHECK(std::chrono::steady_clock::now() - started <
        std::chrono::seconds(10));  // no hang
  std::size_t waiting = 0;
  for (auto* m : raw) {
    const bool on_dead = cluster.index_of(view->health_of_key(m->key()).master) == dead;
    const cb::FleetLink::Stats s = cb::breaker_link_stats(
        link.stats(cb::fleet_clock(spec), true), *view, m->key(), cb::fleet_clock(spec));
    CHECK(m->has_news(cb::fleet_clock(spec)) == on_dead);
    CHECK(s.linked == !on_dead);
    waiting += on_dead ? 1 : 0;
  }
  CHECK(waiting > 0);
  CHECK(waiting < raw.size());
}

TEST_CASE("cluster transport: a plain server is single; several seeds must be a cluster",
          "[redis-cluster-transport]") {
  RedisServer server;
  cb::RedisConnection probe;
  if (!server.connect(probe)) {
    cbredis::skipped();
    return;
  }
  cb::FleetSpec spec;
  spec.endpoint = server.endpoint;
  spec.prefix = "single";
  cb::FleetMember m("one", cb::fleet_key(spec.prefix, "one"), cb::Config{},
                    cb::fleet_clock(spec), "p");
  auto view = std::make_shared<cb::ClusterView>();
  cb::FleetTransport transport(view);
  cb::FleetLink link(spec, cb::fleet_clock(spec));
  REQUIRE(transport.sync(spec, {&m}, link, true));
  CHECK(view->mode() == cb::ClusterView::Mode::kSingle);
  CHECK(m.status().known);
  CHECK(std::string(cb::store_topology(*view, spec.endpoint)) == "single");

  cb::FleetSpec seeds = spec;
  seeds.endpoint.seeds = {{"127.0.0.1", server.endpoint.port},
                          {"127.0.0.1", cbredis::free_port()}};
  auto view2 = std::make_shared<cb::ClusterView>();
  cb::FleetTransport two(view2);
  CHECK_FALSE(two.sync(seeds, {&m}, link, true));
  CHECK(view2->mode() == cb::ClusterView::Mode::kUnknown);
  CHECK(two.error().find("is not a Redis Cluster node") != std::string::npos);
}

// The subscription of a store on a Cluster lives on one node. A moment when
// every node is slow (CLIENT PAUSE on each: the syncs time out) keeps it
// (the same client, no new subscription, messages still arrive); that node
// killed, the store subscribes on another and messages arrive there.
TEST_CASE("cluster transport: the subscription survives a slow moment, not its node",
          "[redis-cluster-transport]") {
  Cluster cluster;
  if (!cluster.ok) {
    cbredis::skipped();
    return;
  }
  // The masters left serve their slots when one is gone.
  for (auto& c : cluster.conns) {
    REQUIRE(text(c.command({"CONFIG", "SET", "cluster-require-full-coverage", "no"})) ==
            "OK");
  }
  cb::FleetSpec spec;
  spec.endpoint.host = "127.0.0.1";
  spec.endpoint.port = cluster.nodes[0]->endpoint.port;
  spec.prefix = "sub";
  spec.sync_interval = 20 * cb::kNanosPerMs;
  spec.timeout = 100 * cb::kNanosPerMs;
  cb::FleetSpec spec2 = spec;
  spec2.sync_interval = 30 * cb::kNanosPerMs;  // a second process
  cb::Config config;
  config.failure_threshold = 1;
  config.recovery_timeout = 60;
  // 30 breakers: the sweep (one a second, in order) does not reach the last
  // ones within the test; only a message can.
  constexpr int kBreakers = 30;
  auto subscribed = [&cluster] {
    std::array<std::set<std::string>, 3> out;
    for (std::size_t i = 0; i < 3; ++i) {
      if (cluster.conns[i].connected()) out[i] = pubsub_ids(cluster.conns[i]);
    }
    return out;
  };
  auto count = [](const std::array<std::set<std::string>, 3>& a) {
    return a[0].size() + a[1].size() + a[2].size();
  };
  {
    std::shared_ptr<cb::FleetSync> one = cb::FleetSync::for_spec(spec);
    std::vector<std::shared_ptr<cb::FleetMember>> mine, theirs;
    for (int i = 0; i < kBreakers; ++i)
      mine.push_back(one->join("b" + std::to_string(i), config));
    REQUIRE(within_5s([&] { return count(subscribed()) == 1; }));
    const std::array<std::set<std::string>, 3> own = subscribed();
    std::size_t home = 0;
    while (own[home].empty()) ++home;

    std::shared_ptr<cb::FleetSync> two = cb::FleetSync::for_spec(spec2);
    for (int i = 0; i < kBreakers; ++i)
      theirs.push_back(two->join("b" + std::to_string(i), config));
    REQUIRE(within_5s([&] { return count(subscribed()) == 2; }));
    const std::array<std::set<std::string>, 3> before = subscribed();
    auto trip = [&](int i) {
      const cb::Nanos t = two->now();
      const cb::Admission a = theirs[static_cast<std::size_t>(i)]->breaker().acquire(t);
      REQUIRE(a.permitted);
      theirs[static_cast<std::size_t>(i)]->breaker().record(
          a.permit, cb::Outcome::Failure, two->now());
      two->wake();
    };
    auto opened = [&](int i) {
      return mine[static_cast<std::size_t>(i)]->breaker().snapshot(one->now()).state ==
             cb::State::Open;
    };

    // Every node paused for 0.3 s; the timeout is 0.1 s.
    const std::uint64_t failures = one->stats().failures;
    for (auto& c : cluster.conns) {
      REQUIRE(text(c.command({"CLIENT", "PAUSE", "300", "ALL"})) == "OK");
    }
    CHECK(within_5s([&] { return one->stats().failures > failures; }));
    const std::uint64_t syncs = one->stats().syncs;
    CHECK(within_5s(
        [&] { return one->stats().linked && one->stats().syncs >= syncs + 3; }));
    CHECK(subscribed() == before);  // the same clients on the same nodes
    CHECK(one->subscriptions() == 1);
    CHECK(two->subscriptions() == 1);
    trip(kBreakers - 1);
    CHECK(within_5s([&] { return opened(kBreakers - 1); }));

    // The node of the subscription killed: another node's, and messages.
    const std::string dead =
        "127.0.0.1:" + std::to_string(cluster.nodes[home]->endpoint.port);
    cluster.nodes[home]->kill();
    cluster.conns[home].close();
    CHECK(within_5s([&] { return one->subscriptions() == 2; }));
    CHECK(subscribed()[home].empty());
    int last = kBreakers - 2;
    while (last > 0 &&
           one->master_for(mine[static_cast<std::size_t>(last)]->key()) == dead)
      --last;
    REQUIRE(last > kBreakers / 2);
    trip(last);
    CHECK(within_5s([&] { return opened(last); }));

    mine.clear();
    theirs.clear();
  }
  cb::FleetSync::shutdown_all(2 * cb::kNanosPerSecond);
}

#endif  // CIRCUITBREAKER_HAVE_HIREDIS
