// What the threads of one client (the routers of a store's threads) know of
// the Redis they talk to, shared between the sync thread and the callers'
// thread: whether it is a Cluster (found out once, on the first connection:
// redis/router.hpp), the cluster's slot map (ClusterTopology,
// redis/cluster.hpp), per master, whether it answered the last round trip
// that asked it and when it last did, and the slots whose last answer was
// CLUSTERDOWN or TRYAGAIN. That keeps `mode` and `sync_lag` true per
// breaker: a breaker whose master is unreachable, or whose slot is down
// while its master serves others (a failover, a slot not served), runs on
// local rules while the others sync.
//
// Pure C++, independent of hiredis and of the network; thread-safe (one
// mutex, held for lookups only, never across a round trip).
#ifndef CIRCUITBREAKER_REDIS_CLUSTER_VIEW_HPP
#define CIRCUITBREAKER_REDIS_CLUSTER_VIEW_HPP

#include <atomic>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../types.hpp"
#include "cluster.hpp"
#include "key_slot.hpp"
#include "node_address.hpp"
#include "redirect.hpp"

namespace circuitbreaker {

class ClusterView {
 public:
  enum class Mode : std::uint8_t { kUnknown, kSingle, kCluster };

  Mode mode() const noexcept { return mode_.load(std::memory_order_acquire); }
  void set_mode(Mode m) noexcept { mode_.store(m, std::memory_order_release); }
  bool cluster() const noexcept { return mode() == Mode::kCluster; }

  // A map freshly read from a node (CLUSTER SLOTS): replaces the current one.
  void install(ClusterSlotMap map) {
    std::lock_guard<std::mutex> g(mutex_);
    topology_.install(std::move(map));
  }
  void request_refresh() {
    std::lock_guard<std::mutex> g(mutex_);
    topology_.request_refresh();
  }
  bool refresh_due() const {
    std::lock_guard<std::mutex> g(mutex_);
    return topology_.refresh_due();
  }
  std::uint64_t generation() const {
    std::lock_guard<std::mutex> g(mutex_);
    return topology_.generation();
  }

  // The master serving each of `slots` (port 0: none known), and the
  // generation of the map they were read from (for on_moved()).
  std::vector<RedisNodeAddress> route(const std::vector<std::uint16_t>& slots,
                                      std::uint64_t& generation) const {
    std::vector<RedisNodeAddress> out(slots.size());
    std::lock_guard<std::mutex> g(mutex_);
    generation = topology_.generation();
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (const RedisNodeAddress* m = topology_.map().master_of_slot(slots[i]))
        out[i] = *m;
    }
    return out;
  }

  // A MOVED for a command routed with map `routed`, answered by `asked`:
  // the map is corrected (and a refresh asked for); where to resend.
  RedisNodeAddress on_moved(const ClusterRedirect& moved, const RedisNodeAddress& asked,
                            std::uint64_t routed) {
    std::lock_guard<std::mutex> g(mutex_);
    return topology_.on_moved(moved, asked, routed);
  }

  // The masters that serve at least one slot.
  std::vector<RedisNodeAddress> masters() const {
    std::vector<RedisNodeAddress> out;
    std::lock_guard<std::mutex> g(mutex_);
    for (const ClusterShard& s : topology_.map().shards()) {
      if (s.slots > 0) out.push_back(s.master);
    }
    return out;
  }
  std::size_t master_count() const {
    std::lock_guard<std::mutex> g(mutex_);
    return topology_.map().masters();
  }

  // Every node worth asking for the map, or for a subscription: the nodes
  // that answered last first, then the other masters, their replicas, and
  // the seeds the user gave; no node twice.
  std::vector<RedisNodeAddress> known_nodes(
      const std::vector<RedisNodeAddress>& seeds) const {
    std::vector<RedisNodeAddress> healthy, rest;
    {
      std::lock_guard<std::mutex> g(mutex_);
      for (const ClusterShard& s : topology_.map().shards()) {
        if (s.slots == 0) continue;
        const auto h = health_.find(s.master);
        (h != health_.end() && h->second.up ? healthy : rest).push_back(s.master);
      }
      for (const ClusterShard& s : topology_.map().shards()) {
        if (s.slots == 0) continue;
        rest.insert(rest.end(), s.replicas.begin(), s.replicas.end());
      }
    }
    rest.insert(rest.end(), seeds.begin(), seeds.end());
    std::vector<RedisNodeAddress> out;
    for (const auto* list : {&healthy, &rest}) {
      for (const RedisNodeAddress& a : *list) {
        bool seen = false;
        for (const RedisNodeAddress& o : out) seen = seen || o == a;
        if (!seen) out.push_back(a);
      }
    }
    return out;
  }

  // A round trip to `node` succeeded (`ok`) or failed, at `now` (the
  // store's clock).
  void note_node(const RedisNodeAddress& node, bool ok, Nanos now) {
    std::lock_guard<std::mutex> g(mutex_);
    if (health_.size() >= kMaxNodes && health_.count(node) == 0) health_.clear();
    NodeHealth& h = health_[node];
    h.up = ok;
    if (ok) h.last_ok = now;
  }

  // A command on a key of `slot` was answered CLUSTERDOWN or TRYAGAIN
  // (`ok` false: the slot is down, whatever its master's other slots do) or
  // served (`ok`). A slot stays down until a command on it is served.
  void note_slot(std::uint16_t slot, bool ok) {
    if (slot >= kClusterSlots) return;
    std::lock_guard<std::mutex> g(mutex_);
    slots_down_[slot] = !ok;
  }

  // What the master of the slot of `key` is known to be: whether one is
  // known, it, whether it answered the last round trip that asked it (and
  // the slot is not down), and when it last answered (0: never).
  struct KeyHealth {
    bool known = false;
    RedisNodeAddress master;
    bool up = false;
    Nanos last_ok = 0;
  };
  KeyHealth health_of_key(std::string_view key) const {
    KeyHealth out;
    std::lock_guard<std::mutex> g(mutex_);
    const RedisNodeAddress* m = topology_.map().master_of_key(key);
    if (m == nullptr) return out;
    out.known = true;
    out.master = *m;
    const auto h = health_.find(*m);
    if (h != health_.end()) {
      out.up = h->second.up && !slots_down_[cluster_key_slot(key)];
      out.last_ok = h->second.last_ok;
    }
    return out;
  }

 private:
  // Nodes whose health is kept, at most (the addresses come from replies).
  static constexpr std::size_t kMaxNodes = 1024;
  struct NodeHealth {
    bool up = false;
    Nanos last_ok = 0;
  };

  std::atomic<Mode> mode_{Mode::kUnknown};
  mutable std::mutex mutex_;
  ClusterTopology topology_;
  std::map<RedisNodeAddress, NodeHealth> health_;
  std::bitset<kClusterSlots> slots_down_;
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_REDIS_CLUSTER_VIEW_HPP
