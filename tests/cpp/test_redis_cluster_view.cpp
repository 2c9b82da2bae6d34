// What the threads of a fleet store share about a Redis Cluster
// (redis/cluster_view.hpp): the mode found, routing many slots at once, a
// MOVED that corrects the map, the nodes to ask for a map or a
// subscription, and each master's health as a breaker's mode and sync_lag
// read it; and, with threads, that lookups and updates never race.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "circuitbreaker/redis/cluster.hpp"
#include "circuitbreaker/redis/cluster_view.hpp"
#include "circuitbreaker/redis/key_slot.hpp"
#include "circuitbreaker/fleet/keys.hpp"
#include "circuitbreaker/redis/redirect.hpp"

namespace cb = circuitbreaker;

namespace {

cb::RedisNodeAddress node(int port) { return cb::RedisNodeAddress{"127.0.0.1", port}; }

cb::ClusterSlotMap three_masters() {
  std::vector<cb::ClusterSlotRange> ranges{
      {0, 5460, node(7000), "a", {node(7003)}},
      {5461, 10922, node(7001), "b", {node(7004)}},
      {10923, 16383, node(7002), "c", {node(7005)}},
  };
  cb::ClusterSlotMap map;
  REQUIRE(cb::ClusterSlotMap::build(ranges, map) == nullptr);
  return map;
}

}  // namespace

TEST_CASE("cluster view: mode, routing and MOVED", "[redis-cluster-view]") {
  cb::ClusterView view;
  CHECK(view.mode() == cb::ClusterView::Mode::kUnknown);
  CHECK_FALSE(view.cluster());
  std::uint64_t gen = 99;
  // No map yet: nothing is routed, a refresh is due.
  CHECK(view.route({0, 16383}, gen) == std::vector<cb::RedisNodeAddress>(2));
  CHECK(gen == 0);
  CHECK(view.refresh_due());
  CHECK(view.master_count() == 0);

  view.install(three_masters());
  view.set_mode(cb::ClusterView::Mode::kCluster);
  CHECK(view.cluster());
  CHECK_FALSE(view.refresh_due());
  CHECK(view.master_count() == 3);
  CHECK(view.masters() ==
        std::vector<cb::RedisNodeAddress>{node(7000), node(7001), node(7002)});
  const std::vector<cb::RedisNodeAddress> routed =
      view.route({0, 5460, 5461, 16383}, gen);
  CHECK(routed == std::vector<cb::RedisNodeAddress>{node(7000), node(7000), node(7001),
                                                    node(7002)});
  CHECK(gen == 1);

  // A MOVED for a report routed with that map: the slot moves at once, and
  // a refresh is due.
  cb::ClusterRedirect moved;
  REQUIRE(cb::parse_cluster_redirect("MOVED 5461 127.0.0.1:7002", moved) == nullptr);
  CHECK(view.on_moved(moved, node(7001), gen) == node(7002));
  CHECK(view.refresh_due());
  std::uint64_t after = 0;
  CHECK(view.route({5461}, after)[0] == node(7002));
  CHECK(after > gen);

  // Every breaker key routes to the master of its hash tag's slot.
  const std::string key = cb::fleet_key("circuitbreaker", "payments");
  const std::uint16_t slot = cb::cluster_key_slot(key);
  CHECK(view.route({slot}, after)[0] == *three_masters().master_of_slot(slot));
}

TEST_CASE("cluster view: nodes to ask, healthy ones first, no node twice",
          "[redis-cluster-view]") {
  cb::ClusterView view;
  const std::vector<cb::RedisNodeAddress> seeds{node(7001), node(7100)};
  // Before any map: the seeds.
  CHECK(view.known_nodes(seeds) == seeds);
  view.install(three_masters());
  CHECK(view.known_nodes(seeds) ==
        std::vector<cb::RedisNodeAddress>{node(7000), node(7001), node(7002), node(7003),
                                          node(7004), node(7005), node(7100)});
  // A master that answered goes first; one that failed is asked after the
  // healthy ones.
  view.note_node(node(7002), true, 10);
  view.note_node(node(7000), false, 11);
  const std::vector<cb::RedisNodeAddress> order = view.known_nodes(seeds);
  REQUIRE(order.size() == 7);
  CHECK(order[0] == node(7002));
  CHECK(order[1] == node(7000));
}

TEST_CASE("cluster view: a breaker's master and its health", "[redis-cluster-view]") {
  cb::ClusterView view;
  const std::string key = cb::fleet_key("circuitbreaker", "payments");
  CHECK_FALSE(view.health_of_key(key).known);
  view.install(three_masters());
  const cb::RedisNodeAddress master = *three_masters().master_of_key(key);
  cb::ClusterView::KeyHealth h = view.health_of_key(key);
  CHECK(h.known);
  CHECK(h.master == master);
  CHECK_FALSE(h.up);  // never asked
  CHECK(h.last_ok == 0);
  view.note_node(master, true, 1000);
  h = view.health_of_key(key);
  CHECK(h.up);
  CHECK(h.last_ok == 1000);
  // It fails: down, and its last good round trip stays what it was (the
  // breaker's sync_lag grows from there).
  view.note_node(master, false, 2000);
  h = view.health_of_key(key);
  CHECK_FALSE(h.up);
  CHECK(h.last_ok == 1000);
  // Its slot moves to a master that answers: the breaker follows.
  cb::ClusterRedirect moved;
  const std::uint16_t slot = cb::cluster_key_slot(key);
  const cb::RedisNodeAddress other = master == node(7000) ? node(7001) : node(7000);
  REQUIRE(cb::parse_cluster_redirect("MOVED " + std::to_string(slot) + " " + other.text(),
                                     moved) == nullptr);
  std::uint64_t gen = 0;
  view.route({slot}, gen);
  view.on_moved(moved, master, gen);
  view.note_node(other, true, 3000);
  h = view.health_of_key(key);
  CHECK(h.master == other);
  CHECK(h.up);
  CHECK(h.last_ok == 3000);
}

TEST_CASE("cluster view: health of at most so many nodes (addresses come from replies)",
          "[redis-cluster-view]") {
  cb::ClusterView view;
  view.install(three_masters());
  for (int port = 1; port <= 5000; ++port) view.note_node(node(port), true, port);
  // Bounded: the map's masters are still routed, and health is kept.
  view.note_node(node(7000), true, 1);
  CHECK(view.health_of_key(cb::fleet_key("p", "x")).known);
}

TEST_CASE("cluster view: the sync thread and callers share it without races",
          "[redis-cluster-view][fleet-sync]") {
  cb::ClusterView view;
  view.install(three_masters());
  view.set_mode(cb::ClusterView::Mode::kCluster);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    cb::ClusterRedirect moved;
    for (int i = 0; i < 2000; ++i) {
      const int slot = i % 16384;
      REQUIRE(cb::parse_cluster_redirect("MOVED " + std::to_string(slot) +
                                             " 127.0.0.1:" + std::to_string(7000 + i % 3),
                                         moved) == nullptr);
      view.on_moved(moved, node(7000), view.generation());
      view.note_node(node(7000 + i % 3), i % 2 == 0, i);
      if (i % 100 == 0) view.install(three_masters());
    }
    stop = true;
  });
  std::size_t lookups = 0;
  do {  // at least once, however soon the writer ends (a loaded machine)
    std::uint64_t gen = 0;
    const auto r = view.route({0, 6000, 12000}, gen);
    CHECK(r.size() == 3);
    (void)view.health_of_key(cb::fleet_key("circuitbreaker", "x"));
    (void)view.known_nodes({node(7100)});
    CHECK(view.master_count() >= 3);
    ++lookups;
  } while (!stop);
  writer.join();
  CHECK(lookups > 0);
}
