// A Redis master behind Sentinel: which sentinels to ask, under which name
// they monitor the master, with which password, and the rules for reading
// what they (and the master) answer. Pure and independent of hiredis: the
// round trips are in redis/connection.hpp (RedisConnection::connect()).
//
// How the store finds its master (RedisConnection::connect()):
//   1. ask the sentinels, one after the other, `SENTINEL
//      get-master-addr-by-name <master>`, each bounded by what is left of
//      the store's timeout; the first that names a valid address wins. The
//      order (sentinel_order()) starts with the sentinel that answered
//      last, then follows the list as the user gave it, so that a dead
//      first sentinel costs one failed attempt, not one per connection;
//   2. connect there (AUTH, SELECT as for a single server) and send `ROLE`:
//      the node must say "master" (a sentinel may still name the old master
//      for a moment after a failover, or a demoted master may answer);
//   3. every new connection asks again: a connection is made anew after
//      any failed round trip, and a `-READONLY` reply (a write reached a
//      node that was demoted to a replica) closes the connection, so the
//      next round trip asks the sentinels again.
//
// Everything a sentinel or a node answers is untrusted input: the address
// is checked as a cluster's redirects are (redis/node_address.hpp) before
// anything connects to it.
#ifndef CIRCUITBREAKER_REDIS_SENTINEL_HPP
#define CIRCUITBREAKER_REDIS_SENTINEL_HPP

#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "node_address.hpp"
#include "reply_value.hpp"

namespace circuitbreaker {

// The sentinels of one store, shared (through a shared_ptr in its
// RedisEndpoint) by every connection of the store, which record there the
// master they found and the sentinel that named it.
class RedisSentinels {
 public:
  RedisSentinels(std::vector<RedisNodeAddress> addresses, std::string master)
      : addresses_(std::move(addresses)), master_(std::move(master)) {}
  RedisSentinels(const RedisSentinels&) = delete;
  RedisSentinels& operator=(const RedisSentinels&) = delete;

  // The sentinels' own credentials (their requirepass, or an ACL user):
  // not the master's, which the store's URL gives.
  void set_credentials(std::string username, std::string password) {
    username_ = std::move(username);
    password_ = std::move(password);
    has_password_ = true;
  }

  const std::vector<RedisNodeAddress>& addresses() const noexcept { return addresses_; }
  const std::string& master() const noexcept { return master_; }
  const std::string& username() const noexcept { return username_; }
  const std::string& password() const noexcept { return password_; }
  bool has_password() const noexcept { return has_password_; }

  // What makes two endpoints the same (a store's identity): the sentinels,
  // the name and the credentials.
  std::string identity() const {
    std::string out = "sentinel\n" + master_ + '\n' + username_ + '\n' +
                      (has_password_ ? "1" : "0") + password_ + '\n';
    for (const RedisNodeAddress& a : addresses_) out += a.text() + ',';
    return out;
  }

  // The master found last ("host:port"), or "" before the first.
  std::string current_master() const {
    std::lock_guard<std::mutex> g(mutex_);
    return current_.port == 0 ? std::string() : current_.text();
  }
  void found_master(const RedisNodeAddress& master, std::size_t sentinel) {
    std::lock_guard<std::mutex> g(mutex_);
    current_ = master;
    preferred_ = sentinel;
  }
  std::size_t preferred() const {
    std::lock_guard<std::mutex> g(mutex_);
    return preferred_;
  }

 private:
  const std::vector<RedisNodeAddress> addresses_;
  const std::string master_;
  std::string username_, password_;
  bool has_password_ = false;
  mutable std::mutex mutex_;
  RedisNodeAddress current_;
  std::size_t preferred_ = 0;
};

// The order in which to ask `n` sentinels: `preferred` (the one that
// answered last) first, then the others as listed.
inline std::vector<std::size_t> sentinel_order(std::size_t n, std::size_t preferred) {
  std::vector<std::size_t> out;
  out.reserve(n);
  if (preferred < n) out.push_back(preferred);
  for (std::size_t i = 0; i < n; ++i) {
    if (i != preferred) out.push_back(i);
  }
  return out;
}

// A sentinel's address as a user gives it: "host:port" or "[v6]:port".
// Returns nullptr and fills `out`, or what it must be.
inline const char* parse_sentinel_address(std::string_view text, RedisNodeAddress& out) {
  return parse_node_address(text, out, false);
}

// A master's name as the sentinels know it: 1 to 200 letters, digits, '_',
// '-' and '.' (it goes into a command, and into messages).
inline bool valid_master_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > 200) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

// Reads a sentinel's answer to SENTINEL get-master-addr-by-name: a pair of
// strings, the host and the port. Returns nullptr and fills `out`, or why
// the answer cannot be used (a nil: the sentinel does not monitor that
// name; an error; anything else).
inline const char* read_master_address(const RedisValue& reply, RedisNodeAddress& out) {
  out = RedisNodeAddress{};
  using Kind = RedisValue::Kind;
  if (reply.kind == Kind::kNil) return "the sentinel does not know this master name";
  if (reply.kind == Kind::kError) return "the sentinel answered with an error";
  if (reply.kind != Kind::kArray || reply.elements.size() != 2 ||
      reply.elements[0].kind != Kind::kString ||
      reply.elements[1].kind != Kind::kString) {
    return "the sentinel's answer is not a host and a port";
  }
  int port = 0;
  if (!valid_node_host(reply.elements[0].str) ||
      !parse_node_port(reply.elements[1].str, port)) {
    return "the sentinel named an invalid address";
  }
  out.host = reply.elements[0].str;
  out.port = port;
  return nullptr;
}

// Whether a node's answer to ROLE says it is a master: an array whose first
// element is "master" (a replica says "slave", a sentinel "sentinel").
inline bool role_is_master(const RedisValue& reply) noexcept {
  return reply.kind == RedisValue::Kind::kArray && !reply.elements.empty() &&
         reply.elements[0].kind == RedisValue::Kind::kString &&
         reply.elements[0].str == "master";
}

// Whether an error reply says the node is a read-only replica: the master
// it was has been demoted, and the store must ask the sentinels again.
inline bool is_readonly_error(std::string_view error) noexcept {
  return error.substr(0, 8) == "READONLY";
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_REDIS_SENTINEL_HPP
