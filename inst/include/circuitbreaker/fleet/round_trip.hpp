// The round trips a fleet store (FleetSync, fleet/sync.hpp) makes to Redis,
// each written once for a single server, the master behind Sentinel and a
// Redis Cluster (redis/router.hpp: a single endpoint is a cluster of one
// node), and bounded by the store's timeout: the SYNC of many breakers, the
// LEASE of a half-open probe, and the health-check lease. What they find is
// told to the store's link (fleet/link.hpp).
//
// A sync groups the breakers by the node that serves them and writes every
// node's pipeline before it reads any reply, so that it costs about one
// round trip to the slowest node, however many nodes and breakers. On a
// single endpoint a node's breakers go in one EVALSHA of the SYNC script;
// on a Cluster, one EVALSHA per breaker (no script spans two slots: every
// key of a breaker is in the slot of its hash tag, fleet/keys.hpp). A node
// that carries no breaker in the sync gets a PING (`ping_idle`), so that
// each node's health, and each breaker's `mode` and `sync_lag`, stays known.
//
// What a node answers for a breaker:
//   - the script's reply: applied (fleet/member.hpp);
//   - MOVED: the map is corrected (and read again at the start of the next
//     sync); the report goes again, to the node named, in the same sync
//     while time is left (reports carry ids: one applied twice counts once);
//   - ASK (a slot being migrated): ASKING, then the EVALSHA on the node named;
//   - NOSCRIPT: the scripts are loaded on that node, and the report goes again;
//   - CLUSTERDOWN, TRYAGAIN: that breaker's report stays pending for the next
//     sync and its slot is down (it runs on local rules: its `mode` says so)
//     until a command on the slot is served; the node's other breakers sync
//     as usual; after CLUSTERDOWN the map is read again (a slot no longer
//     served leaves it);
//   - READONLY, another error, no answer: the node's breakers run on local
//     rules this sync (their reports stay pending) and the map is read again;
//     behind Sentinel, READONLY closes the connection, so the next one asks
//     the sentinels where the master is now.
// A node's pipeline that fails at once on a connection the server closed
// while it was idle is sent once more on a new connection (IdleRetry).
#ifndef CIRCUITBREAKER_FLEET_ROUND_TRIP_HPP
#define CIRCUITBREAKER_FLEET_ROUND_TRIP_HPP

#ifdef CIRCUITBREAKER_HAVE_HIREDIS

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../clock.hpp"
#include "member.hpp"
#include "protocol.hpp"
#include "script.hpp"
#include "../redis/connection.hpp"
#include "keys.hpp"
#include "link.hpp"
#include "../redis/router.hpp"

namespace circuitbreaker {

// The store's clock: this process's steady clock, moved by the spec's
// offset (tests skew it).
inline Nanos fleet_clock(const FleetSpec& spec) noexcept {
  return SteadyClock::now() + spec.clock_offset;
}

// Whether a connection has the fleet's scripts, and loading them (one
// round trip each), so that each later EVALSHA costs one.
inline bool fleet_scripts_ready(RedisConnection& c) {
  return c.has_script(kFleetSyncScript) && c.has_script(kFleetLeaseScript);
}
inline bool fleet_load_scripts(RedisConnection& c) {
  return c.load_script(kFleetSyncScript) && c.load_script(kFleetLeaseScript);
}

namespace round_trip_detail {

struct Item {
  FleetMember* m = nullptr;
  FleetReport sent;
  std::vector<std::string> keys, args;  // args: the header (3), then the report's
  RedisNodeAddress to;
  bool ask = false;
};

// The header of every SYNC: key TTL, events channel, arguments per report.
inline std::vector<std::string> sync_header(const FleetSpec& spec) {
  return {std::to_string(spec.key_ttl_ms), spec.channel(),
          std::to_string(FleetReport::kArgs)};
}

// Queues node `at`'s part of a sync on `c` (a PING when it has no breaker)
// and writes it: one batched EVALSHA on a single endpoint, one per breaker
// on a Cluster.
inline bool write(RedisConnection& c, bool cluster, const FleetSpec& spec,
                  const std::vector<Item>& items, const std::vector<std::size_t>& idx) {
  if (idx.empty()) return c.append({"PING"}) && c.flush();
  if (!cluster) {
    std::vector<std::string> keys, args = sync_header(spec);
    for (const std::size_t i : idx) {
      keys.insert(keys.end(), items[i].keys.begin(), items[i].keys.end());
      args.insert(args.end(), items[i].args.begin() + 3, items[i].args.end());
    }
    return c.append(c.eval_command(kFleetSyncScript, keys, args)) && c.flush();
  }
  for (const std::size_t i : idx) {
    const Item& it = items[i];
    if (it.ask && !c.append({"ASKING"})) return false;
    if (!c.append(c.eval_command(kFleetSyncScript, it.keys, it.args))) return false;
  }
  return c.flush();
}

// Applies one script reply (kFields values) to item `it`; false when it is
// not one.
inline bool apply(const FleetSpec& spec, Item& it, const std::vector<RedisValue>& v,
                  std::size_t from) {
  std::string fields[FleetReply::kFields];
  for (int j = 0; j < FleetReply::kFields; ++j) fields[j] = v[from + j].text();
  FleetReply reply;
  if (reply.parse(fields)) it.m->apply(reply, fleet_clock(spec), it.sent);
  return true;
}

// What one node's part of a sync came to.
enum class Node { kOk, kFailed, kRetried };

// Reads node `at`'s replies to write() on `c`: a PING's, one batched reply,
// or one per breaker (after ASKING's +OK where asked). Reports to send
// again (redirected, NOSCRIPT, or all after an idle close) go to `todo`.
// The node answered when any breaker's reply was applied (or the PING's
// came): a node whose every reply was CLUSTERDOWN or TRYAGAIN is down
// for this sync, its reports pending.
inline Node read_node(RedisConnection& c, bool cluster, const FleetSpec& spec,
                      std::vector<Item>& items, const std::vector<std::size_t>& idx,
                      RedisRouter& router, std::uint64_t routed, FleetLink& link,
                      std::vector<std::size_t>& todo, std::string& error,
                      IdleRetry& retry, bool was_open, Nanos start) {
  const std::string where = cluster ? c.address() + ": " : std::string();
  const std::size_t replies = idx.empty() || !cluster ? 1 : idx.size();
  bool down = false, reload = false;
  std::size_t applied = 0;
  for (std::size_t k = 0; k < replies && !down; ++k) {
    Item* it = idx.empty() ? nullptr : &items[idx[cluster ? k : 0]];
    if (it != nullptr && it->ask) c.read();  // ASKING's +OK
    const RedisReply r = c.read();
    if (!r) {
      if (retry.again(was_open, c, start, spec.timeout)) {
        todo.insert(todo.end(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end());
        return Node::kRetried;
      }
      error = where + c.error();
      return Node::kFailed;
    }
    if (it == nullptr) {
      if (r->is_status()) return Node::kOk;
      error = where + (r->is_error() ? r->str : "unexpected reply to PING");
      return Node::kFailed;
    }
    const std::size_t n = cluster ? 1 : idx.size();
    if (r->is_array() && r->elements.size() == n * FleetReply::kFields) {
      for (std::size_t j = 0; j < n; ++j) {
        apply(spec, items[idx[cluster ? k : j]], r->elements, j * FleetReply::kFields);
      }
      if (cluster) router.note_slot_up(cluster_key_slot(it->m->key()));
      applied += n;
      continue;
    }
    if (!r->is_error()) {
      link.note_failure("unexpected reply to the sync script");
      if (!cluster) down = true;
      continue;
    }
    const ClusterError kind = cluster_error_kind(r->str);
    ClusterRedirect rd;
    if (cluster && parse_cluster_redirect(r->str, rd) == nullptr) {
      it->ask = rd.ask;
      it->to = router.redirected(rd, it->to, routed);
      todo.push_back(idx[k]);
      ++applied;  // the node answered
    } else if (r->is_error("NOSCRIPT")) {
      reload = true;
      for (std::size_t j = cluster ? k : 0; j < (cluster ? k + 1 : idx.size()); ++j) {
        items[idx[j]].ask = false;
        todo.push_back(idx[j]);
      }
      ++applied;
    } else {
      // CLUSTERDOWN, TRYAGAIN (pending), READONLY (the map, or behind
      // Sentinel the master, is out of date), a refusal of the script
      // (NOPERM, an out-of-memory Redis): the reports stay pending.
      error = where + r->str;
      if (cluster) router.note_slot_down(r->str, cluster_key_slot(it->m->key()));
      if (kind == ClusterError::kReadOnly || !cluster) down = true;
      if (!cluster && is_readonly_error(r->str)) c.close();
    }
  }
  if (reload) c.forget_scripts();  // loaded before the next round
  return !down && (applied > 0 || !cluster) ? Node::kOk : Node::kFailed;
}

}  // namespace round_trip_detail

// One sync of `members` over `router` (see the header); a PING for each
// node when there are none and `ping_idle`. A node's new connection may
// take `connect_timeout` (at least `timeout`: the sync thread's TLS
// handshakes, which no caller waits for). True when at least one node
// answered.
inline bool fleet_sync(RedisRouter& router, const FleetSpec& spec,
                       const std::vector<FleetMember*>& members, FleetLink& link,
                       bool ping_idle, Nanos connect_timeout = 0) {
  if (connect_timeout < spec.timeout) connect_timeout = spec.timeout;
  using round_trip_detail::Item;
  using round_trip_detail::Node;
  // Each step is bounded by `timeout`: finding the topology, a node's
  // connection (TLS, AUTH, SELECT, the scripts), each round's replies (this
  // is the sync thread's time, not a caller's: a caller's lease is bounded
  // by one `timeout` in all).
  const Nanos start = SteadyClock::now();
  const RedisEndpoint& e = spec.endpoint;
  router.set_error("");
  if (!router.ready(e, start + spec.timeout)) return false;
  if (router.cluster() && router.view().refresh_due()) {
    router.refresh(e, SteadyClock::now() + spec.timeout / 2);
  }
  const Nanos last_round = SteadyClock::now() + spec.timeout;
  const bool cluster = router.cluster();
  std::vector<Item> items(members.size());
  std::vector<std::uint16_t> slots;
  const Nanos t = fleet_clock(spec);
  for (std::size_t i = 0; i < members.size(); ++i) {
    Item& it = items[i];
    it.m = members[i];
    it.keys =
        fleet_script_keys(it.m->key(), it.m->breaker().settings().half_open_max_calls);
    it.args = round_trip_detail::sync_header(spec);
    it.sent = it.m->build(t);
    it.sent.append_args(it.args, it.m->fingerprint(), it.m->rules());
    slots.push_back(cluster_key_slot(it.m->key()));
  }
  std::uint64_t routed = 0;
  const std::vector<RedisNodeAddress> home = router.route(e, slots, routed);
  std::vector<std::size_t> todo;
  for (std::size_t i = 0; i < items.size(); ++i) {
    items[i].to = home[i];
    if (home[i].port != 0) todo.push_back(i);
  }
  std::map<RedisNodeAddress, bool> answered;
  std::map<RedisNodeAddress, IdleRetry> retries;
  std::string error;
  for (int round = 0; round < 3 && (round == 0 || SteadyClock::now() < last_round);
       ++round) {
    std::map<RedisNodeAddress, std::vector<std::size_t>> groups;
    for (const std::size_t i : todo) groups[items[i].to].push_back(i);
    if (round == 0 && (ping_idle || members.empty())) {
      for (const RedisNodeAddress& m : router.masters(e)) groups[m];  // a PING
    }
    todo.clear();
    if (groups.empty()) break;
    // Every node's pipeline written, then every reply read.
    std::vector<std::pair<RedisNodeAddress, RedisConnection*>> written;
    std::map<RedisNodeAddress, bool> was_open;
    for (auto& [at, idx] : groups) {
      was_open[at] = router.is_open(at);
      RedisConnection* c = router.node(e, at, SteadyClock::now() + connect_timeout,
                                       fleet_scripts_ready, fleet_load_scripts);
      if (c != nullptr) c->set_timeout(spec.timeout);
      if (c != nullptr && round_trip_detail::write(*c, cluster, spec, items, idx)) {
        written.emplace_back(at, c);
      } else if (c != nullptr &&
                 retries[at].again(was_open[at], *c, start, spec.timeout)) {
        todo.insert(todo.end(), idx.begin(), idx.end());
      } else {
        error = c != nullptr ? c->error() : router.error();
        answered.emplace(at, false);
      }
    }
    // This round's replies: within `timeout` of the last write.
    const Nanos replies_by = SteadyClock::now() + spec.timeout;
    for (auto& [at, c] : written) {
      const std::vector<std::size_t>& idx = groups[at];
      c->set_timeout(replies_by - SteadyClock::now());
      const Node r = read_node(*c, cluster, spec, items, idx, router, routed, link, todo,
                               error, retries[at], was_open[at], start);
      if (r == Node::kOk) link.note_tls(c->tls_version());
      if (r != Node::kRetried) answered.emplace(at, r == Node::kOk);
      if (r == Node::kOk) answered[at] = true;
      c->set_timeout(spec.timeout);
    }
  }
  bool any = false;
  const Nanos at = fleet_clock(spec);
  for (const auto& [node, ok] : answered) {
    router.note(node, ok, at);
    any = any || ok;
    // On a cluster each node's failure is told; one server's, by the caller.
    if (!ok && cluster) link.note_failure(error.empty() ? router.error() : error);
  }
  if (any) link.note_success(at);
  if (answered.empty()) {
    router.set_error(members.empty() || !cluster
                         ? (error.empty() ? router.error() : error)
                         : "no node of the Redis Cluster is known: " + error);
  } else if (!error.empty()) {
    router.set_error(error);
  }
  return any;
}

// The LEASE script's reply (an array of strings), or nullopt.
inline std::optional<std::vector<std::string>> fleet_lease_reply(const RedisReply& r) {
  if (!r || !r->is_array()) return std::nullopt;
  std::vector<std::string> out;
  for (const RedisValue& v : r->elements) out.push_back(v.text());
  return out;
}

// A fleet-wide lease of a probe of the breaker whose LEASE keys are `keys`
// (fleet/script.hpp, LEASE; fleet_lease_keys()), on the node that serves
// them, by `deadline`. Returns the script's reply, or nullopt when Redis
// could not be reached or answered otherwise (router.error() says why).
inline std::optional<std::vector<std::string>> fleet_lease(
    RedisRouter& router, const FleetSpec& spec, const std::vector<std::string>& keys,
    const std::string& token, std::int64_t lease_ms, Nanos deadline) {
  const std::vector<std::string> args{token, std::to_string(lease_ms), spec.channel()};
  return fleet_lease_reply(router.request(
      spec.endpoint, keys.at(0), deadline, fleet_scripts_ready, fleet_load_scripts,
      [&](RedisConnection& c) { return c.eval(kFleetLeaseScript, keys, args); },
      [](const RedisValue& v) { return v.is_array(); },
      [&] { return fleet_clock(spec); }));
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

// The health-check lease of `key`, on the node that serves it, by
// `deadline`.
inline std::optional<bool> fleet_health_lease(RedisRouter& router, const FleetSpec& spec,
                                              const std::string& key,
                                              const std::string& token,
                                              std::int64_t lease_ms, Nanos deadline) {
  const std::vector<std::string> cmd = fleet_health_lease_command(key, token, lease_ms);
  return fleet_health_lease_reply(router.request(
      spec.endpoint, key, deadline, RedisRouter::any, RedisRouter::any,
      [&](RedisConnection& c) { return c.command(cmd); },
      [](const RedisValue& v) { return v.is_status() || v.is_nil(); },
      [&] { return fleet_clock(spec); }));
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HAVE_HIREDIS
#endif  // CIRCUITBREAKER_FLEET_ROUND_TRIP_HPP
