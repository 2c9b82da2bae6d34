// Where a fleet store's breakers live in Redis: the store's specification
// (FleetSpec) and the names of its keys and channel. Independent of hiredis.
#ifndef CIRCUITBREAKER_FLEET_KEYS_HPP
#define CIRCUITBREAKER_FLEET_KEYS_HPP

#include <cstdint>
#include <string>
#include <vector>

#include "../config.hpp"
#include "../percent.hpp"
#include "../types.hpp"
#include "../redis/url.hpp"

namespace circuitbreaker {

struct FleetSpec {
  RedisEndpoint endpoint;
  std::string prefix;
  Nanos sync_interval = 100 * kNanosPerMs;
  Nanos timeout = 100 * kNanosPerMs;
  Nanos clock_offset = 0;  // tests: this process's clock, skewed
  std::int64_t key_ttl_ms = 24LL * 3600 * 1000;
  // An idle connection (the subscription's, the caller's) gets a PING this
  // often, so that proxies that drop idle connections keep it (tests
  // shorten it).
  Nanos keep_alive = 60 * kNanosPerSecond;

  // Processes that give the same spec share one FleetSync.
  std::string identity() const {
    return endpoint.host + '\n' + std::to_string(endpoint.port) + '\n' +
           std::to_string(endpoint.db) + '\n' + endpoint.username + '\n' +
           endpoint.password + '\n' + prefix + '\n' + std::to_string(sync_interval) +
           '\n' + std::to_string(timeout) + '\n' + std::to_string(clock_offset) + '\n' +
           std::to_string(keep_alive) +
           (endpoint.sentinels ? '\n' + endpoint.sentinels->identity() : std::string()) +
           seed_identity() + '\n' + endpoint.tls.identity();
  }
  std::string channel() const;

 private:
  std::string seed_identity() const {
    std::string out;
    for (const RedisNodeAddress& a : endpoint.seeds) out += '\n' + a.text();
    return out;
  }
};

// The key scheme (version 2). Every key of breaker `name` under `prefix` is
//   cb2:{<prefix>:<name>}<suffix>
// with prefix and name percent-encoded (percent.hpp: every byte but
// [A-Za-z0-9_.-] as %XX), so that no ':' of either part can be taken for
// the separator: (prefix, name) -> key is injective. The braces are a Redis
// Cluster hash tag holding the whole identity and nothing else, and no '{'
// comes before them, so that every key of a breaker (the hash, and the
// suffix ":p:<slot>" of fleet/script.hpp, and ":h", the
// health-check lease of fleet_health_key()) lands in one slot. "cb2" is the
// format's version, outside the tag: another format (cb1, whose hash kept
// one field per value and its window in a list) cannot read or clobber
// these keys, and `SCAN MATCH cb2:*` finds every key of this one. A store's
// events channel follows the same scheme:
//   cb2:{<prefix>}:events
inline constexpr const char* kFleetKeyVersion = "cb2";

inline std::string fleet_key(const std::string& prefix, const std::string& name) {
  std::string out = kFleetKeyVersion;
  out += ":{";
  append_encoded_name(out, prefix);
  out += ':';
  append_encoded_name(out, name);
  out += '}';
  return out;
}

inline std::string fleet_channel(const std::string& prefix) {
  std::string out = kFleetKeyVersion;
  out += ":{";
  append_encoded_name(out, prefix);
  out += "}:events";
  return out;
}

inline std::string FleetSpec::channel() const { return fleet_channel(prefix); }

// The keys of the breaker whose hash is `key`, as the SYNC script takes them
// in its KEYS (fleet/script.hpp): the hash, then ":p:<slot>" for each of
// `lease_slots` probe slots (its half_open_max_calls).
inline std::vector<std::string> fleet_script_keys(const std::string& key,
                                                  std::uint32_t lease_slots) {
  std::vector<std::string> out{key};
  for (std::uint32_t slot = 0; slot < lease_slots; ++slot) {
    out.push_back(key + ":p:" + std::to_string(slot));
  }
  return out;
}

// The keys the LEASE script takes: the hash, then its lease keys.
inline std::vector<std::string> fleet_lease_keys(const std::string& key,
                                                 std::uint32_t lease_slots) {
  std::vector<std::string> out{key};
  for (std::uint32_t slot = 0; slot < lease_slots; ++slot) {
    out.push_back(key + ":p:" + std::to_string(slot));
  }
  return out;
}

// The fleet-wide lease of the health check of the breaker whose hash is
// `key` (fleet/fleet_handle.hpp): a string key, set with NX and PX (the
// health_interval) by the one process that runs this interval's check.
inline std::string fleet_health_key(const std::string& key) { return key + ":h"; }

// The lease's time to live: the interval in whole milliseconds, rounded up
// (a shorter one would let a second process in before the interval ends).
inline std::int64_t fleet_health_lease_ms(Nanos interval) noexcept {
  const Nanos ms = interval / kNanosPerMs + (interval % kNanosPerMs != 0 ? 1 : 0);
  return ms < 1 ? 1 : static_cast<std::int64_t>(ms);
}

// Every key breaker `name` of `prefix` may have (fleet/script.hpp): its
// script keys for every probe slot a breaker can have (kMaxHalfOpenCalls),
// so that removing a breaker needs neither its half_open_max_calls nor a
// SCAN, then its health-check lease. They share one hash tag, so one DEL
// removes them all (in Redis Cluster too).
inline std::vector<std::string> fleet_breaker_keys(const std::string& prefix,
                                                   const std::string& name) {
  const std::string key = fleet_key(prefix, name);
  std::vector<std::string> out = fleet_script_keys(key, kMaxHalfOpenCalls);
  out.push_back(fleet_health_key(key));
  return out;
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_FLEET_KEYS_HPP
