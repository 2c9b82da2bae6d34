// The round trips a fleet store (FleetSync, redis/sync.hpp) makes to Redis,
// each on a connection it is given and bounded by the store's timeout: one
// SYNC of the script (fleet/script.hpp) for many breakers, its retry on a
// new connection, one LEASE of a half-open probe and one health-check
// lease. What they find is told to the store's link (redis/link.hpp).
#ifndef CIRCUITBREAKER_REDIS_ROUND_TRIP_HPP
#define CIRCUITBREAKER_REDIS_ROUND_TRIP_HPP

#ifdef CIRCUITBREAKER_HAVE_HIREDIS

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../clock.hpp"
#include "../fleet/member.hpp"
#include "../fleet/protocol.hpp"
#include "../fleet/script.hpp"
#include "connection.hpp"
#include "keys.hpp"
#include "link.hpp"

namespace circuitbreaker {

// The store's clock: this process's steady clock, moved by the spec's
// offset (tests skew it).
inline Nanos fleet_clock(const FleetSpec& spec) noexcept {
  return SteadyClock::now() + spec.clock_offset;
}

// Loads the fleet's two scripts on `conn` (one round trip each), so that
// each later EVALSHA costs one.
inline bool fleet_load_scripts(RedisConnection& conn) {
  return conn.load_script(kFleetSyncScript) && conn.load_script(kFleetLeaseScript);
}

// `conn`, connected and with its scripts loaded (each round trip bounded by
// `timeout`).
inline bool fleet_connection_ready(RedisConnection& conn, const FleetSpec& spec) {
  return conn.connected() ||
         (conn.connect(spec.endpoint, spec.timeout) && fleet_load_scripts(conn));
}

// One SYNC for `members` on `conn` (one round trip, bounded by `timeout`);
// applies the replies. False when the round trip failed (the reports stay
// pending). With no members, a PING: the link is still known to be up (its
// mode, sync_lag), at the least cost to Redis.
inline bool fleet_sync_once(RedisConnection& conn, const FleetSpec& spec,
                            const std::vector<FleetMember*>& members, FleetLink& link) {
  if (members.empty()) {
    RedisReply r = conn.command({"PING"});
    if (!r || !r->is_status()) {
      if (r) link.note_failure(r->is_error() ? r->str : "unexpected reply to PING");
      conn.close();
      return false;
    }
    link.note_success(fleet_clock(spec));
    link.note_tls(conn.tls_version());
    return true;
  }
  std::vector<std::string> keys, args;
  keys.reserve(members.size());
  args.reserve(3 + members.size() * FleetReport::kArgs);
  args.push_back(std::to_string(spec.key_ttl_ms));
  args.push_back(spec.channel());
  args.push_back(std::to_string(FleetReport::kArgs));
  const Nanos t = fleet_clock(spec);
  std::vector<FleetReport> sent;
  sent.reserve(members.size());
  for (FleetMember* m : members) {
    const std::vector<std::string> own =
        fleet_script_keys(m->key(), m->breaker().settings().half_open_max_calls);
    keys.insert(keys.end(), own.begin(), own.end());
    sent.push_back(m->build(t));
    sent.back().append_args(args, m->fingerprint(), m->rules());
  }
  RedisReply r = conn.eval(kFleetSyncScript, keys, args);
  if (!r || !r->is_array() ||
      r->elements.size() != members.size() * FleetReply::kFields) {
    if (r && !r->is_error()) link.note_failure("unexpected reply to the sync script");
    conn.close();
    return false;
  }
  const Nanos at = fleet_clock(spec);
  std::string fields[FleetReply::kFields];
  for (std::size_t i = 0; i < members.size(); ++i) {
    for (int j = 0; j < FleetReply::kFields; ++j) {
      fields[j] = r->elements[i * FleetReply::kFields + j].text();
    }
    FleetReply reply;
    if (reply.parse(fields)) members[i]->apply(reply, at, sent[i]);
  }
  link.note_success(fleet_clock(spec));
  link.note_tls(conn.tls_version());
  return true;
}

// One SYNC on `conn`, made first if needed; once more on a new connection
// when `conn` was open but failed at once (the server closed it while it
// was idle: only a second failure says that Redis cannot be reached; a
// round trip that timed out is not tried again, so that a hung Redis costs
// one timeout). A retried report is applied once (reports carry ids).
inline bool fleet_sync(RedisConnection& conn, const FleetSpec& spec,
                       const std::vector<FleetMember*>& members, FleetLink& link) {
  const bool was_open = conn.connected();
  const Nanos started = SteadyClock::now();
  if (fleet_connection_ready(conn, spec) && fleet_sync_once(conn, spec, members, link))
    return true;
  return was_open && SteadyClock::now() - started < spec.timeout / 2 &&
         fleet_connection_ready(conn, spec) && fleet_sync_once(conn, spec, members, link);
}

// One request of the caller's thread on `conn`, by `deadline`: `send(c)`
// makes the round trip on a connected `c`. The first attempt goes out on
// `conn` as it is; when that fails without an answer (the server closed it:
// that costs no wait), the connection is made again and the request sent
// once more, in what is left of the time. Returns Redis's first answer (an
// error too: Redis answered, so the connection is not dead), or an empty
// reply when Redis could not be reached (conn.error() says why).
template <class Send>
inline RedisReply fleet_caller_request(RedisConnection& conn, const FleetSpec& spec,
                                       Nanos deadline, Send send) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    const Nanos left = deadline - SteadyClock::now();
    if (left <= 0) break;
    if (!conn.connected() && !conn.connect(spec.endpoint, left)) break;
    conn.set_timeout(deadline - SteadyClock::now());
    RedisReply r = send(conn);
    conn.set_timeout(spec.timeout);
    if (r) return r;
  }
  return std::nullopt;
}

// The LEASE script's reply (an array of strings), or nullopt.
inline std::optional<std::vector<std::string>> fleet_lease_reply(const RedisReply& r) {
  if (!r || !r->is_array()) return std::nullopt;
  std::vector<std::string> out;
  for (const RedisValue& v : r->elements) out.push_back(v.text());
  return out;
}

// A fleet-wide lease of a probe of the breaker whose LEASE keys are `keys`
// (fleet/script.hpp, LEASE; fleet_lease_keys()) on `conn`, by `deadline`
// (fleet_caller_request()). Returns the script's reply, or nullopt when
// Redis could not be reached (conn.error() says why) or answered otherwise.
inline std::optional<std::vector<std::string>> fleet_lease(
    RedisConnection& conn, const FleetSpec& spec, const std::vector<std::string>& keys,
    const std::string& token, std::int64_t lease_ms, Nanos deadline) {
  const std::vector<std::string> args{token, std::to_string(lease_ms), spec.channel()};
  return fleet_lease_reply(fleet_caller_request(
      conn, spec, deadline,
      [&](RedisConnection& c) { return c.eval(kFleetLeaseScript, keys, args); }));
}

// The health-check lease (keys.hpp's fleet_health_key()): a plain
// SET <key> <token> NX PX <lease_ms>, so that one process of the fleet runs
// each interval's check and a dead holder's lease ends with the interval.
inline std::vector<std::string> fleet_health_lease_command(const std::string& key,
                                                           const std::string& token,
                                                           std::int64_t lease_ms) {
  return {"SET", key, token, "NX", "PX", std::to_string(lease_ms)};
}

// What the SET answered: true (+OK: this caller holds the lease), false
// (nil: another holds it), nullopt (no answer, or anything else, another
// status included: a reply is input, not a promise).
inline std::optional<bool> fleet_health_lease_reply(const RedisReply& r) {
  if (r && r->is_status() && r->str == "OK") return true;
  if (r && r->is_nil()) return false;
  return std::nullopt;
}

// The health-check lease of `key` on `conn`, by `deadline`
// (fleet_caller_request()).
inline std::optional<bool> fleet_health_lease(RedisConnection& conn,
                                              const FleetSpec& spec,
                                              const std::string& key,
                                              const std::string& token,
                                              std::int64_t lease_ms, Nanos deadline) {
  const std::vector<std::string> cmd = fleet_health_lease_command(key, token, lease_ms);
  return fleet_health_lease_reply(fleet_caller_request(
      conn, spec, deadline, [&](RedisConnection& c) { return c.command(cmd); }));
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HAVE_HIREDIS
#endif  // CIRCUITBREAKER_REDIS_ROUND_TRIP_HPP
