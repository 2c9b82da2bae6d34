// How a Redis Cluster node describes its slot map, read into plain ranges
// (ClusterSlotRange) that redis/cluster.hpp turns into a ClusterSlotMap.
// Two replies say it:
//
//   CLUSTER SLOTS (every version; deprecated in Redis 7 but served):
//     [[first, last, [host, port, id, meta...], [replica...]...], ...]
//   CLUSTER SHARDS (Redis 7):
//     [{"slots": [first, last, first, last...],
//       "nodes": [{"id", "port", "ip", "endpoint", "role", "health"...}...]}, ...]
//
// A node's host is the "preferred endpoint": an address or name; nil (SLOTS)
// or "" (SHARDS) when the cluster does not know it (cluster-preferred-
// endpoint-type unknown-endpoint), which means the host the client asked,
// with the port given; "?" for a node without an announced hostname, which
// no client can reach. A replica that cannot be reached is left out; a
// master that cannot be reached makes the reply unusable.
//
// The reply is untrusted input: every element used is checked for its kind
// and range; anything else is refused with a message (never a crash, and
// the caller's ranges are left empty). Unknown extra elements and fields
// are ignored, as later Redis versions may add some. Pure and independent
// of hiredis (reply_value_hiredis.hpp converts a hiredis reply).
#ifndef CIRCUITBREAKER_REDIS_CLUSTER_REPLY_HPP
#define CIRCUITBREAKER_REDIS_CLUSTER_REPLY_HPP

#include <cstdint>
#include <string>
#include <vector>

#include "key_slot.hpp"
#include "node_address.hpp"
#include "reply_value.hpp"

namespace circuitbreaker {

// Slots first..last (inclusive), served by `master`.
struct ClusterSlotRange {
  std::uint16_t first = 0;
  std::uint16_t last = 0;
  RedisNodeAddress master;
  std::string master_id;  // may be empty
  std::vector<RedisNodeAddress> replicas;
};

namespace cluster_reply_detail {

enum class Host : std::uint8_t { kOk, kUnusable, kMalformed };

// A node's host: a valid name or address, or the asked node's host for nil
// and "" (see above).
inline Host node_host(const RedisValue* v, const RedisNodeAddress& asked,
                      std::string& out) {
  if (v == nullptr) return Host::kMalformed;
  if (v->is_nil() || (v->is_string() && v->str.empty())) {
    if (!valid_node_host(asked.host)) return Host::kUnusable;
    out = asked.host;
    return Host::kOk;
  }
  if (!v->is_string()) return Host::kMalformed;
  if (v->str == "?") return Host::kUnusable;
  if (!valid_node_host(v->str)) return Host::kMalformed;
  out = v->str;
  return Host::kOk;
}

inline bool node_port(const RedisValue* v, int& out) {
  if (v == nullptr || !v->is_integer() || v->integer < 1 || v->integer > 65535) {
    return false;
  }
  out = static_cast<int>(v->integer);
  return true;
}

inline bool slot_number(const RedisValue& v, std::uint16_t& out) {
  if (!v.is_integer() || v.integer < 0 || v.integer >= kClusterSlots) return false;
  out = static_cast<std::uint16_t>(v.integer);
  return true;
}

// An optional node id: absent, or a string of at most 64 bytes.
inline bool node_id(const RedisValue* v, std::string& out) {
  if (v == nullptr) return true;
  if (!v->is_string() || v->str.size() > 64) return false;
  out = v->str;
  return true;
}

}  // namespace cluster_reply_detail

// Reads a CLUSTER SLOTS reply that node `asked` gave. Returns nullptr and
// fills `out`, or what the reply must be (and `out` is empty).
inline const char* parse_cluster_slots(const RedisValue& reply,
                                       const RedisNodeAddress& asked,
                                       std::vector<ClusterSlotRange>& out) {
  using namespace cluster_reply_detail;
  constexpr const char* kMust =
      "a CLUSTER SLOTS reply: an array of [first slot, last slot, master, replicas...], "
      "each node [host, port, id...], slots in 0..16383, ports in 1..65535";
  out.clear();
  if (!reply.is_array() || reply.elements.size() > kClusterSlots) return kMust;
  for (const RedisValue& entry : reply.elements) {
    if (!entry.is_array() || entry.elements.size() < 3) break;
    ClusterSlotRange range;
    if (!slot_number(entry.elements[0], range.first) ||
        !slot_number(entry.elements[1], range.last) || range.first > range.last) {
      break;
    }
    bool ok = true;
    for (std::size_t i = 2; i < entry.elements.size() && ok; ++i) {
      const RedisValue& node = entry.elements[i];
      RedisNodeAddress address;
      std::string id;
      if (!node.is_array() || node.elements.size() < 2 ||
          !node_port(&node.elements[1], address.port) ||
          !node_id(node.elements.size() > 2 ? &node.elements[2] : nullptr, id)) {
        ok = false;
        break;
      }
      const Host host = node_host(&node.elements[0], asked, address.host);
      if (host == Host::kMalformed || (i == 2 && host == Host::kUnusable)) {
        ok = false;
      } else if (i == 2) {
        range.master = address;
        range.master_id = id;
      } else if (host == Host::kOk) {
        range.replicas.push_back(address);
      }
    }
    if (!ok) break;
    out.push_back(std::move(range));
  }
  if (out.size() != reply.elements.size()) {
    out.clear();
    return kMust;
  }
  return nullptr;
}

// Reads a CLUSTER SHARDS reply that node `asked` gave. A shard that serves
// no slot is skipped: Redis 7.0 lists a dead master that way after its
// replica took over, with health "fail" (the documentation says "failed").
// A shard's master is its node with role "master" and health "online" (one
// at most); failing that, its only master. Replicas are the nodes with role
// "replica" and health "online" (a node reports another's replica as
// "loading" until it has heard of its replication offset).
inline const char* parse_cluster_shards(const RedisValue& reply,
                                        const RedisNodeAddress& asked,
                                        std::vector<ClusterSlotRange>& out) {
  using namespace cluster_reply_detail;
  constexpr const char* kMust =
      "a CLUSTER SHARDS reply: an array of maps with \"slots\" (pairs of slots in "
      "0..16383) and \"nodes\" (maps with \"port\", \"ip\" or \"endpoint\", \"role\"), "
      "one reachable master per shard that serves slots";
  out.clear();
  if (!reply.is_array() || reply.elements.size() > kClusterSlots) return kMust;
  for (const RedisValue& shard : reply.elements) {
    const RedisValue* slots = shard.field("slots");
    const RedisValue* nodes = shard.field("nodes");
    if (slots == nullptr || nodes == nullptr || !slots->is_array() ||
        slots->elements.size() % 2 != 0 || slots->elements.size() > 2 * kClusterSlots ||
        !nodes->is_array()) {
      out.clear();
      return kMust;
    }
    ClusterSlotRange proto;
    std::size_t masters = 0;       // nodes with role "master"
    std::size_t live_masters = 0;  // ... and health "online"
    Host master_host = Host::kUnusable;
    for (const RedisValue& node : nodes->elements) {
      const RedisValue* role = node.field("role");
      const RedisValue* health = node.field("health");
      const RedisValue* endpoint = node.field("endpoint");
      if (endpoint == nullptr) endpoint = node.field("ip");
      RedisNodeAddress address;
      std::string id;
      if (role == nullptr || !role->is_string() ||
          (health != nullptr && !health->is_string()) ||
          !node_port(node.field("port"), address.port) ||
          !node_id(node.field("id"), id)) {
        out.clear();
        return kMust;
      }
      const Host host = node_host(endpoint, asked, address.host);
      if (host == Host::kMalformed) {
        out.clear();
        return kMust;
      }
      const bool online = health == nullptr || health->str == "online";
      if (role->str == "master") {
        ++masters;
        // The live master wins over a failed one; the first one otherwise.
        if ((online && live_masters == 0) || masters == 1) {
          proto.master = address;
          proto.master_id = id;
          master_host = host;
        }
        live_masters += online ? 1 : 0;
      } else if (role->str == "replica" && online && host == Host::kOk &&
                 proto.replicas.size() < 16) {
        proto.replicas.push_back(address);
      }
    }
    if (slots->elements.empty()) continue;
    if (live_masters > 1 || (live_masters == 0 && masters != 1) ||
        master_host != Host::kOk) {
      out.clear();
      return kMust;
    }
    for (std::size_t i = 0; i < slots->elements.size(); i += 2) {
      ClusterSlotRange range = proto;
      if (!slot_number(slots->elements[i], range.first) ||
          !slot_number(slots->elements[i + 1], range.last) || range.first > range.last ||
          out.size() >= kClusterSlots) {
        out.clear();
        return kMust;
      }
      out.push_back(std::move(range));
    }
  }
  return nullptr;
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_REDIS_CLUSTER_REPLY_HPP
