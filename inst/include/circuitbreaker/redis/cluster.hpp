// A Redis Cluster's slot map, as a client keeps it: which master serves
// each of the 16384 slots (and which replicas it has), built from a CLUSTER
// SLOTS or CLUSTER SHARDS reply, corrected by MOVED redirects, and
// refreshed when it proves out of date; and the grouping of keys by the
// node that serves them, for one pipeline per node.
//
// hiredis (in the versions distributions ship) has no cluster support, so
// this is ours. Everything here is pure C++, independent of hiredis and of
// the network: the replies come in as RedisValue trees (reply_value.hpp)
// and are untrusted input, checked element by element; a malformed reply
// is refused with a message and leaves the caller's map as it was. Not
// thread-safe: one thread (a router's thread) owns a map.
//
// Pieces: key_slot.hpp (key -> slot), redirect.hpp (MOVED / ASK),
// node_address.hpp (host:port), and here:
//   ClusterSlotRange       one range of slots with its master and replicas
//   parse_cluster_slots()  a CLUSTER SLOTS reply -> ranges
//   parse_cluster_shards() a CLUSTER SHARDS reply (Redis 7) -> ranges
//   ClusterSlotMap         ranges -> slot lookup, one shard per master
//   route_keys()           keys -> one batch per shard (and the unserved)
//   ClusterTopology        the map, its generation, when to refresh it
#ifndef CIRCUITBREAKER_REDIS_CLUSTER_HPP
#define CIRCUITBREAKER_REDIS_CLUSTER_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cluster_reply.hpp"
#include "key_slot.hpp"
#include "node_address.hpp"
#include "redirect.hpp"

namespace circuitbreaker {

// One master of the cluster with the slots it serves.
struct ClusterShard {
  RedisNodeAddress master;
  std::string master_id;  // the node's id, when the reply gave one
  std::vector<RedisNodeAddress> replicas;
  std::size_t slots = 0;  // how many slots it serves
};

class ClusterSlotMap {
 public:
  static constexpr std::size_t kNoShard = std::numeric_limits<std::size_t>::max();

  ClusterSlotMap() : owner_(kClusterSlots, 0) {}

  // Builds a map from `ranges` (any order; ranges of one master, as a
  // master's address names it, make one shard). Returns nullptr and fills
  // `out`, or what the ranges must be (`out` is then unchanged). Slots no
  // range covers are served by no shard.
  static const char* build(const std::vector<ClusterSlotRange>& ranges,
                           ClusterSlotMap& out) {
    ClusterSlotMap map;
    if (ranges.size() > kClusterSlots) return "at most 16384 slot ranges";
    std::map<RedisNodeAddress, std::size_t> index;
    for (const ClusterSlotRange& r : ranges) {
      if (r.first > r.last || r.last >= kClusterSlots) {
        return "slot ranges first..last with first <= last <= 16383";
      }
      if (!valid_node_host(r.master.host) || r.master.port < 1 || r.master.port > 65535) {
        return "slot ranges whose master has a valid host and port";
      }
      auto found = index.find(r.master);
      if (found == index.end()) {
        found = index.emplace(r.master, map.shards_.size()).first;
        map.shards_.push_back(ClusterShard{r.master, r.master_id, {}, 0});
      }
      ClusterShard& shard = map.shards_[found->second];
      if (shard.master_id.empty()) shard.master_id = r.master_id;
      for (const RedisNodeAddress& replica : r.replicas) {
        if (!valid_node_host(replica.host) || replica.port < 1 || replica.port > 65535) {
          return "slot ranges whose replicas have a valid host and port";
        }
        bool known = false;
        for (const RedisNodeAddress& have : shard.replicas)
          known = known || have == replica;
        if (!known && shard.replicas.size() < kMaxReplicas)
          shard.replicas.push_back(replica);
      }
      const auto owner = static_cast<std::uint16_t>(found->second + 1);
      for (std::size_t slot = r.first; slot <= r.last; ++slot) {
        if (map.owner_[slot] != 0) return "slot ranges that do not overlap";
        map.owner_[slot] = owner;
        ++shard.slots;
        ++map.covered_;
      }
    }
    out = std::move(map);
    return nullptr;
  }

  const std::vector<ClusterShard>& shards() const { return shards_; }

  // The masters that serve at least one slot.
  std::size_t masters() const {
    std::size_t n = 0;
    for (const ClusterShard& s : shards_) n += s.slots > 0 ? 1 : 0;
    return n;
  }

  std::size_t covered_slots() const { return covered_; }
  bool complete() const { return covered_ == kClusterSlots; }

  // The shard (an index into shards()) that serves `slot`, or kNoShard.
  std::size_t shard_index(std::uint16_t slot) const {
    if (slot >= kClusterSlots || owner_[slot] == 0) return kNoShard;
    return static_cast<std::size_t>(owner_[slot] - 1);
  }

  // The master that serves `slot`, or nullptr.
  const RedisNodeAddress* master_of_slot(std::uint16_t slot) const {
    const std::size_t i = shard_index(slot);
    return i == kNoShard ? nullptr : &shards_[i].master;
  }

  const RedisNodeAddress* master_of_key(std::string_view key) const {
    return master_of_slot(cluster_key_slot(key));
  }

  // The shard whose master is `master`, or kNoShard.
  std::size_t find_shard(const RedisNodeAddress& master) const {
    for (std::size_t i = 0; i < shards_.size(); ++i) {
      if (shards_[i].master == master) return i;
    }
    return kNoShard;
  }

  // The map as sorted ranges, adjacent slots of one shard merged.
  std::vector<ClusterSlotRange> ranges() const {
    std::vector<ClusterSlotRange> out;
    std::size_t slot = 0;
    while (slot < kClusterSlots) {
      const std::uint16_t owner = owner_[slot];
      std::size_t end = slot;
      while (end + 1 < kClusterSlots && owner_[end + 1] == owner) ++end;
      if (owner != 0) {
        const ClusterShard& s = shards_[owner - 1u];
        out.push_back(ClusterSlotRange{static_cast<std::uint16_t>(slot),
                                       static_cast<std::uint16_t>(end), s.master,
                                       s.master_id, s.replicas});
      }
      slot = end + 1;
    }
    return out;
  }

  // `slot` is served by `master` from now on (what a MOVED says): a new
  // shard when no shard has that master (one that serves nothing any more
  // is reused, so that there are never more shards than slots). False when
  // `master` is not a valid address (nothing changes).
  bool assign(std::uint16_t slot, const RedisNodeAddress& master) {
    if (slot >= kClusterSlots || !valid_node_host(master.host) || master.port < 1 ||
        master.port > 65535) {
      return false;
    }
    std::size_t target = find_shard(master);
    if (target == kNoShard) {
      for (std::size_t i = 0; i < shards_.size() && target == kNoShard; ++i) {
        if (shards_[i].slots == 0) target = i;
      }
      if (target == kNoShard) {
        target = shards_.size();
        shards_.emplace_back();
      }
      shards_[target] = ClusterShard{master, {}, {}, 0};
    }
    const std::size_t before = shard_index(slot);
    if (before == target) return true;
    if (before == kNoShard) {
      ++covered_;
    } else {
      --shards_[before].slots;
    }
    owner_[slot] = static_cast<std::uint16_t>(target + 1);
    ++shards_[target].slots;
    return true;
  }

 private:
  // Replicas kept per shard: a reply is untrusted, and a client reads only
  // a few.
  static constexpr std::size_t kMaxReplicas = 16;

  std::vector<ClusterShard> shards_;
  std::vector<std::uint16_t> owner_;  // per slot: 1 + shard index; 0: none
  std::size_t covered_ = 0;
};

// Keys (or slots) grouped by the shard that serves them, for one pipeline
// per node. Items are indices into the input, in input order within a
// batch; batches are in shard order.
struct ShardBatch {
  std::size_t shard = 0;
  std::vector<std::size_t> items;
};

struct ClusterRoute {
  std::vector<ShardBatch> batches;
  std::vector<std::size_t> unserved;  // slots no shard serves (a partial map)
};

inline ClusterRoute route_slots(const ClusterSlotMap& map,
                                const std::vector<std::uint16_t>& slots) {
  ClusterRoute out;
  std::vector<std::size_t> batch_of(map.shards().size(), ClusterSlotMap::kNoShard);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const std::size_t shard = map.shard_index(slots[i]);
    if (shard == ClusterSlotMap::kNoShard) {
      out.unserved.push_back(i);
      continue;
    }
    if (batch_of[shard] == ClusterSlotMap::kNoShard) {
      batch_of[shard] = out.batches.size();
      out.batches.push_back(ShardBatch{shard, {}});
    }
    out.batches[batch_of[shard]].items.push_back(i);
  }
  std::sort(out.batches.begin(), out.batches.end(),
            [](const ShardBatch& a, const ShardBatch& b) { return a.shard < b.shard; });
  return out;
}

inline ClusterRoute route_keys(const ClusterSlotMap& map,
                               const std::vector<std::string>& keys) {
  std::vector<std::uint16_t> slots;
  slots.reserve(keys.size());
  for (const std::string& key : keys) slots.push_back(cluster_key_slot(key));
  return route_slots(map, slots);
}

// Keys grouped by slot (what one script call may touch together), in
// ascending slot order; items in input order.
struct SlotGroup {
  std::uint16_t slot = 0;
  std::vector<std::size_t> items;
};

inline std::vector<SlotGroup> group_keys_by_slot(const std::vector<std::string>& keys) {
  std::vector<std::pair<std::uint16_t, std::size_t>> slotted;
  slotted.reserve(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    slotted.emplace_back(cluster_key_slot(keys[i]), i);
  }
  std::stable_sort(slotted.begin(), slotted.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<SlotGroup> out;
  for (const auto& [slot, item] : slotted) {
    if (out.empty() || out.back().slot != slot) out.push_back(SlotGroup{slot, {}});
    out.back().items.push_back(item);
  }
  return out;
}

// The map a client routes with, and its generation: a number that grows
// with every change, so that a reply can be told apart as news or as old
// news. A command batch records the generation it was routed with; a MOVED
// in its reply corrects the map at once (that one slot) and asks for a full
// refresh, unless a full map has been installed since the batch was
// routed (then the refresh already happened, and the redirect is only
// followed). Many MOVED replies of one batch ask for one refresh.
class ClusterTopology {
 public:
  // 0 until the first map is installed.
  std::uint64_t generation() const { return generation_; }
  const ClusterSlotMap& map() const { return map_; }

  // Whether the map should be read again (CLUSTER SLOTS) before routing.
  bool refresh_due() const { return refresh_due_; }

  // A freshly read map replaces the current one.
  void install(ClusterSlotMap map) {
    map_ = std::move(map);
    ++generation_;
    installed_ = generation_;
    refresh_due_ = !map_.complete();
  }

  // A MOVED for a command routed with generation `routed`, from node
  // `asked`; returns where to resend the command.
  RedisNodeAddress on_moved(const ClusterRedirect& moved, const RedisNodeAddress& asked,
                            std::uint64_t routed) {
    const RedisNodeAddress target = moved.target(asked);
    if (routed >= installed_) {
      const RedisNodeAddress* now = map_.master_of_slot(moved.slot);
      if ((now == nullptr || *now != target) && map_.assign(moved.slot, target)) {
        ++generation_;
      }
      refresh_due_ = true;
    }
    return target;
  }

  // Something else says the map is out of date: a node unreachable,
  // CLUSTERDOWN, READONLY, a malformed redirect.
  void request_refresh() { refresh_due_ = true; }

 private:
  ClusterSlotMap map_;
  std::uint64_t generation_ = 0;
  std::uint64_t installed_ = 0;  // the generation of the last full map
  bool refresh_due_ = true;
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_REDIS_CLUSTER_HPP
