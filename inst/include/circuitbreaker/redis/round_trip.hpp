// The round trips a fleet store (FleetSync, redis/sync.hpp) makes to Redis,
// each on a connection it is given and bounded by the store's timeout: one
// SYNC of the script (fleet/script.hpp) for many breakers, its retry on a
// new connection, and one LEASE of a half-open probe. What they find is told
// to the store's link (redis/link.hpp).
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
#include "connection.hpp"
#include "keys.hpp"
#include "link.hpp"

namespace circuitbreaker {

// The store's clock: this process's steady clock, moved by the spec's
// offset (tests skew it).
inline Nanos fleet_clock(const FleetSpec& spec) noexcept {
  return SteadyClock::now() + spec.clock_offset;
}

// `conn`, connected and with its scripts loaded (each round trip bounded by
// `timeout`).
inline bool fleet_connection_ready(RedisConnection& conn, const FleetSpec& spec) {
  return conn.connected() ||
         (conn.connect(spec.endpoint, spec.timeout) && conn.load_scripts());
}

// One SYNC for `members` on `conn` (one round trip, bounded by `timeout`);
// applies the replies. False when the round trip failed (the reports stay
// pending). With no members, a PING: the link is still known to be up (its
// mode, sync_lag), at the least cost to Redis.
inline bool fleet_sync_once(RedisConnection& conn, const FleetSpec& spec,
                            const std::vector<FleetMember*>& members, FleetLink& link) {
  if (members.empty()) {
    RedisConnection::ReplyPtr r = conn.command({"PING"});
    if (!r || r->type != REDIS_REPLY_STATUS) {
      if (r) {
        link.note_failure(r->type == REDIS_REPLY_ERROR ? RedisConnection::reply_text(r.r)
                                                       : "unexpected reply to PING");
      }
      conn.close();
      return false;
    }
    link.note_success(fleet_clock(spec));
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
  RedisConnection::ReplyPtr r = conn.eval(false, keys, args);
  if (!r || r->type != REDIS_REPLY_ARRAY ||
      r->elements != members.size() * FleetReply::kFields) {
    if (r && r->type != REDIS_REPLY_ERROR)
      link.note_failure("unexpected reply to the sync script");
    conn.close();
    return false;
  }
  const Nanos at = fleet_clock(spec);
  std::string fields[FleetReply::kFields];
  for (std::size_t i = 0; i < members.size(); ++i) {
    for (int j = 0; j < FleetReply::kFields; ++j) {
      fields[j] = RedisConnection::reply_text(r->element[i * FleetReply::kFields + j]);
    }
    FleetReply reply;
    if (reply.parse(fields)) members[i]->apply(reply, at, sent[i]);
  }
  link.note_success(fleet_clock(spec));
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

// A fleet-wide lease of a probe of the breaker whose LEASE keys are `keys`
// (fleet/script.hpp, LEASE; fleet_lease_keys()) on `conn`, by `deadline`.
// The first attempt goes out on `conn` as it is; when that fails without an
// answer (the server closed it: that costs no wait), the connection is made
// again and the lease asked once more, in what is left of the time. Returns
// the script's reply, or nullopt when Redis could not be reached
// (conn.error() says why).
inline std::optional<std::vector<std::string>> fleet_lease(
    RedisConnection& conn, const FleetSpec& spec, const std::vector<std::string>& keys,
    const std::string& token, std::int64_t lease_ms, Nanos deadline) {
  const std::vector<std::string> args{token, std::to_string(lease_ms), spec.channel()};
  for (int attempt = 0; attempt < 2; ++attempt) {
    const Nanos left = deadline - SteadyClock::now();
    if (left <= 0) break;
    if (!conn.connected() && !conn.connect(spec.endpoint, left)) break;
    conn.set_timeout(deadline - SteadyClock::now());
    RedisConnection::ReplyPtr r = conn.eval(true, keys, args);
    conn.set_timeout(spec.timeout);
    if (r && r->type == REDIS_REPLY_ARRAY) {
      std::vector<std::string> out;
      for (std::size_t i = 0; i < r->elements; ++i) {
        out.push_back(RedisConnection::reply_text(r->element[i]));
      }
      return out;
    }
    if (r) break;  // Redis answered with an error: not a dead connection
  }
  return std::nullopt;
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HAVE_HIREDIS
#endif  // CIRCUITBREAKER_REDIS_ROUND_TRIP_HPP
