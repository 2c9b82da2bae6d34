// What a Redis Cluster node's error reply asks of a client (Redis Cluster
// specification, "Redirection and resharding"):
//
//   MOVED <slot> <host>:<port>   the slot lives on that node now: send this
//                                command, and every later one for the slot,
//                                there (the client's slot map is out of date)
//   ASK <slot> <host>:<port>     the slot is being migrated: send this one
//                                command there, preceded by ASKING, and keep
//                                the map as it is
//
// <host> is empty when the node does not know the target's endpoint
// (cluster-preferred-endpoint-type unknown-endpoint): the client then uses
// the host it sent the command to, with the port given. An IPv6 host comes
// without brackets ("MOVED 1 ::1:7001"); brackets are accepted too.
//
// The reply is untrusted input: anything that is not exactly one of these
// forms (a slot outside 0..16383, a bad port, a host with spaces or control
// bytes, trailing bytes) is refused, and the caller refreshes its map
// instead of following it. Pure and independent of hiredis.
#ifndef CIRCUITBREAKER_REDIS_REDIRECT_HPP
#define CIRCUITBREAKER_REDIS_REDIRECT_HPP

#include <cstdint>
#include <string_view>
#include <utility>

#include "key_slot.hpp"
#include "node_address.hpp"

namespace circuitbreaker {

// The cluster errors a client acts on; kOther for every other error.
enum class ClusterError : std::uint8_t {
  kMoved,        // follow, update the map
  kAsk,          // follow once with ASKING
  kTryAgain,     // TRYAGAIN: a multi-key command during a migration; retry later
  kClusterDown,  // CLUSTERDOWN: the cluster cannot serve now (failover under way)
  kReadOnly,     // READONLY: a replica answered (the map is out of date)
  kOther,
};

namespace redirect_detail {

inline bool starts_with(std::string_view s, std::string_view prefix) noexcept {
  return s.substr(0, prefix.size()) == prefix;
}

// The text without the '-' of the wire format, which hiredis strips but a
// raw reply keeps.
inline std::string_view bare(std::string_view error) noexcept {
  if (!error.empty() && error.front() == '-') error.remove_prefix(1);
  return error;
}

}  // namespace redirect_detail

// What kind of cluster error `error` (an error reply's text) is, by its
// first word only: a kMoved or kAsk must still be parsed, and may prove
// malformed.
inline ClusterError cluster_error_kind(std::string_view error) noexcept {
  using redirect_detail::starts_with;
  const std::string_view e = redirect_detail::bare(error);
  if (starts_with(e, "MOVED ")) return ClusterError::kMoved;
  if (starts_with(e, "ASK ")) return ClusterError::kAsk;
  if (starts_with(e, "TRYAGAIN")) return ClusterError::kTryAgain;
  if (starts_with(e, "CLUSTERDOWN")) return ClusterError::kClusterDown;
  if (starts_with(e, "READONLY")) return ClusterError::kReadOnly;
  return ClusterError::kOther;
}

struct ClusterRedirect {
  bool ask = false;  // ASK; false: MOVED
  std::uint16_t slot = 0;
  RedisNodeAddress node;  // node.host is empty for "the node you asked"

  // Where to send the command, `asked` being the node that replied.
  RedisNodeAddress target(const RedisNodeAddress& asked) const {
    if (!node.host.empty()) return node;
    return RedisNodeAddress{asked.host, node.port};
  }
};

// Parses a MOVED or ASK error reply (its text, with or without the leading
// '-'). Returns nullptr and fills `out`, or what the reply must be.
inline const char* parse_cluster_redirect(std::string_view error, ClusterRedirect& out) {
  constexpr const char* kMust =
      "\"MOVED <slot> <host>:<port>\" or \"ASK <slot> <host>:<port>\" with a slot in "
      "0..16383";
  out = ClusterRedirect{};
  ClusterRedirect r;
  std::string_view rest = redirect_detail::bare(error);
  if (redirect_detail::starts_with(rest, "MOVED ")) {
    rest.remove_prefix(6);
  } else if (redirect_detail::starts_with(rest, "ASK ")) {
    r.ask = true;
    rest.remove_prefix(4);
  } else {
    return kMust;
  }
  const std::size_t space = rest.find(' ');
  if (space == std::string_view::npos) return kMust;
  const std::string_view slot_text = rest.substr(0, space);
  if (slot_text.empty() || slot_text.size() > 5 ||
      (slot_text.size() > 1 && slot_text[0] == '0')) {
    return kMust;
  }
  unsigned slot = 0;
  for (const char c : slot_text) {
    if (c < '0' || c > '9') return kMust;
    slot = slot * 10 + static_cast<unsigned>(c - '0');
  }
  if (slot >= kClusterSlots) return kMust;
  if (parse_node_address(rest.substr(space + 1), r.node, true) != nullptr) return kMust;
  r.slot = static_cast<std::uint16_t>(slot);
  out = std::move(r);
  return nullptr;
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_REDIS_REDIRECT_HPP
