// The fleet store's transport on a Redis Cluster: one thread's connections
// to the cluster's nodes, the sync of many breakers over them, and the
// leases of a probe and of a health check. The slot map, the redirects and
// each master's health are in redis/cluster_view.hpp (shared by the store's
// threads), the rules of a map and of a redirect in redis/cluster.hpp and
// redis/redirect.hpp.
//
// A sync (ClusterClient::sync()) sends no script that touches keys of two
// slots: one EVALSHA of the SYNC script per breaker (every key of a breaker
// is in the slot of its hash tag, redis/keys.hpp). The EVALSHAs of the
// breakers a master serves go to it in one pipeline; every node's pipeline
// is written before any reply is read, so that a sync costs about one round
// trip to the slowest node, however many masters and breakers; the whole
// sync is bounded by the store's `timeout`. A master that carries no
// breaker in the sync gets a PING in its pipeline, so that each master's
// health (and each breaker's `mode` and `sync_lag`) stays known; an idle
// store costs each master a PING per sync.
//
// What a node answers for one breaker:
//   - the script's reply: applied (fleet/member.hpp);
//   - MOVED: the map is corrected at once (and read again, CLUSTER SLOTS,
//     at the start of the next sync); the breaker's report goes again, to
//     the node named, in the same sync while time is left (reports carry
//     ids: a report applied twice is counted once);
//   - ASK (a slot being migrated): ASKING and the EVALSHA on the node named;
//   - NOSCRIPT: the scripts are loaded on that node, and the report goes
//     again;
//   - TRYAGAIN, CLUSTERDOWN, READONLY, no answer: that node's breakers run
//     on local rules this sync (their reports stay pending, and go with the
//     next), the map is read again from any other known node, and the other
//     nodes' breakers sync as usual.
// A node that could not be reached is not asked again for a quarter of a
// second (nor before the next sync), so that a dead master costs a sync
// one failed connect now and then, not one per sync.
//
// Which store is on a Cluster is found once, on its first connection
// (detect_cluster(): CLUSTER SLOTS answered with a map).
#ifndef CIRCUITBREAKER_REDIS_CLUSTER_SYNC_HPP
#define CIRCUITBREAKER_REDIS_CLUSTER_SYNC_HPP

#ifdef CIRCUITBREAKER_HAVE_HIREDIS

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../clock.hpp"
#include "../fleet/member.hpp"
#include "../fleet/protocol.hpp"
#include "cluster.hpp"
#include "cluster_reply.hpp"
#include "cluster_view.hpp"
#include "connection.hpp"
#include "keys.hpp"
#include "link.hpp"
#include "redirect.hpp"
#include "round_trip.hpp"

namespace circuitbreaker {

// Asks node `at` (connected on `conn`) for its slot map. Returns nullptr
// and fills `out` with a complete or partial map, or why not (the node is
// not a Cluster node, or its answer is not a map).
inline const char* read_cluster_map(RedisConnection& conn, const RedisNodeAddress& at,
                                    ClusterSlotMap& out) {
  RedisReply r = conn.command({"CLUSTER", "SLOTS"});
  if (!r) return "no answer to CLUSTER SLOTS";
  // Refused (not a Cluster node, or CLUSTER disabled by a managed
  // service's ACL or policy): a single endpoint.
  if (r->is_error()) return "not a Redis Cluster node";
  std::vector<ClusterSlotRange> ranges;
  if (const char* bad = parse_cluster_slots(*r, at, ranges)) return bad;
  if (ranges.empty()) return "a cluster without slots";
  return ClusterSlotMap::build(ranges, out);
}

// Connects `conn` to the first of `e`'s seed nodes that answers (the
// server, or through the sentinels, with one URL), within `timeout` in all.
inline bool connect_first_seed(RedisConnection& conn, const RedisEndpoint& e,
                               Nanos timeout) {
  if (e.seeds.size() <= 1) return conn.connect(e, timeout);
  const Nanos deadline = SteadyClock::now() + timeout;
  std::string why = "no seed node answered in time";
  for (const RedisNodeAddress& at : e.seeds) {
    const Nanos left = deadline - SteadyClock::now();
    if (left <= 0) break;
    if (conn.connect_node(e, at, left)) return true;
    why = at.text() + ": " + conn.error();
  }
  conn.fail(why);
  return false;
}

// A one-key command on `conn`; on a cluster node that answers MOVED or ASK,
// once more on the node named (a connection of its own), within `timeout`.
inline RedisReply command_following_redirect(RedisConnection& conn,
                                             const RedisEndpoint& e,
                                             const std::vector<std::string>& args,
                                             Nanos timeout, RedisConnection& other) {
  RedisReply r = conn.command(args);
  ClusterRedirect rd;
  if (!r || !r->is_error() || parse_cluster_redirect(r->str, rd) != nullptr) return r;
  // The host of a redirect is the asked node's when empty: the node that
  // answered (any seed that connect_first_seed() reached).
  const RedisNodeAddress asked = conn.node().port != 0 ? conn.node() : e.seed_nodes().front();
  if (!other.connect_node(e, rd.target(asked), timeout)) return std::nullopt;
  if (rd.ask && !other.command({"ASKING"})) return std::nullopt;
  return other.command(args);
}

class ClusterClient {
 public:
  explicit ClusterClient(std::shared_ptr<ClusterView> view) : view_(std::move(view)) {}
  ClusterClient(const ClusterClient&) = delete;
  ClusterClient& operator=(const ClusterClient&) = delete;

  std::string error() const { return error_; }

  void close_all() {
    for (auto& kv : nodes_) kv.second.conn->close();
  }

  // Reads the map from the first known node that answers, by `deadline`.
  bool refresh(const FleetSpec& spec, Nanos deadline) {
    for (const RedisNodeAddress& at : view_->known_nodes(spec.endpoint.seed_nodes())) {
      RedisConnection* c = node(spec, at, deadline, false);
      if (c == nullptr) continue;
      ClusterSlotMap map;
      if (const char* bad = read_cluster_map(*c, at, map)) {
        error_ = at.text() + ": " + bad;
        continue;
      }
      view_->install(std::move(map));
      return true;
    }
    return false;
  }

  // One sync of `members` (see the header). `ping_idle`: masters without a
  // breaker in the sync get a PING. True when at least one node answered.
  bool sync(const FleetSpec& spec, const std::vector<FleetMember*>& members,
            FleetLink& link, bool ping_idle) {
    const Nanos start = SteadyClock::now();
    const Nanos deadline = start + spec.timeout;
    if (view_->refresh_due()) refresh(spec, start + spec.timeout / 2);
    std::vector<Item> items;
    items.reserve(members.size());
    const Nanos t = fleet_clock(spec);
    std::vector<std::uint16_t> slots;
    for (FleetMember* m : members) {
      Item it;
      it.m = m;
      it.keys = fleet_script_keys(m->key(), m->breaker().settings().half_open_max_calls);
      it.args = {std::to_string(spec.key_ttl_ms), spec.channel(),
                 std::to_string(FleetReport::kArgs)};
      it.sent = m->build(t);
      it.sent.append_args(it.args, m->fingerprint(), m->rules());
      slots.push_back(cluster_key_slot(m->key()));
      items.push_back(std::move(it));
    }
    std::uint64_t routed = 0;
    const std::vector<RedisNodeAddress> home = view_->route(slots, routed);
    for (std::size_t i = 0; i < items.size(); ++i) {
      items[i].slot = slots[i];
      items[i].to = home[i];
      if (home[i].port == 0) view_->request_refresh();  // a slot no master serves
    }
    std::map<RedisNodeAddress, bool> answered;  // node -> answered (or failed)
    std::vector<std::size_t> todo;
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (items[i].to.port != 0) todo.push_back(i);
    }
    for (int round = 0; round < kRounds && SteadyClock::now() < deadline; ++round) {
      std::map<RedisNodeAddress, std::vector<std::size_t>> groups;
      for (const std::size_t i : todo) groups[items[i].to].push_back(i);
      if (round == 0 && ping_idle) {
        for (const RedisNodeAddress& m : view_->masters()) groups[m];  // a PING
      }
      todo.clear();
      if (groups.empty()) break;
      // Write every node's pipeline, then read them all.
      std::vector<std::pair<RedisNodeAddress, RedisConnection*>> written;
      for (auto& [at, idx] : groups) {
        RedisConnection* c = node(spec, at, deadline, true);
        if (c == nullptr || !write(*c, items, idx, deadline)) {
          if (c != nullptr) error_ = at.text() + ": " + c->error();
          answered[at] = false;
          continue;
        }
        written.emplace_back(at, c);
      }
      for (auto& [at, c] : written) {
        const bool ok =
            read(spec, *c, at, items, groups[at], routed, deadline, link, todo);
        auto found = answered.find(at);
        if (found == answered.end()) {
          answered[at] = ok;
        } else {
          found->second = found->second || ok;
        }
      }
    }
    bool any = false;
    const Nanos at = fleet_clock(spec);
    for (const auto& [node, ok] : answered) {
      view_->note_node(node, ok, at);
      any = any || ok;
      if (!ok) {
        view_->request_refresh();
        link.note_failure(error_);
      }
    }
    if (any) link.note_success(at);
    if (answered.empty()) error_ = "no node of the Redis Cluster is known: " + error_;
    return any;
  }

  // A LEASE of a probe of the breaker whose LEASE keys are `keys` on the
  // master of its slot (on_master()). nullopt when no node could answer
  // (error() says why).
  std::optional<std::vector<std::string>> lease(const FleetSpec& spec,
                                                const std::vector<std::string>& keys,
                                                const std::string& token,
                                                std::int64_t lease_ms, Nanos deadline) {
    const std::vector<std::string> args{token, std::to_string(lease_ms), spec.channel()};
    return fleet_lease_reply(on_master(
        spec, keys.at(0), deadline,
        [&](RedisConnection& c) { return c.eval(kFleetLeaseScript, keys, args); },
        [](const RedisValue& r) { return r.is_array(); }));
  }

  // The health-check lease `key` (round_trip.hpp's fleet_health_lease())
  // on the master of its slot (on_master()): true when this caller took it,
  // false when another holds it, nullopt when no node could answer.
  std::optional<bool> health_lease(const FleetSpec& spec, const std::string& key,
                                   const std::string& token, std::int64_t lease_ms,
                                   Nanos deadline) {
    const std::vector<std::string> cmd = fleet_health_lease_command(key, token, lease_ms);
    return fleet_health_lease_reply(on_master(
        spec, key, deadline, [&](RedisConnection& c) { return c.command(cmd); },
        [](const RedisValue& r) { return r.is_status() || r.is_nil(); }));
  }

  // A PING on every open node connection (keep-alive, transport.hpp).
  void keep_alive(const FleetSpec& spec) {
    for (auto& kv : nodes_) {
      RedisConnection& c = *kv.second.conn;
      if (!c.connected()) continue;
      c.set_timeout(spec.timeout);
      const RedisReply r = c.command({"PING"});
      (void)r;
    }
  }

  // A connection to any node that answers (for the subscription), by
  // `deadline`; nullptr when none does.
  bool connect_any(const FleetSpec& spec, RedisConnection& conn, Nanos deadline) {
    for (const RedisNodeAddress& at : view_->known_nodes(spec.endpoint.seed_nodes())) {
      const Nanos left = deadline - SteadyClock::now();
      if (left <= 0) break;
      if (conn.connect_node(spec.endpoint, at, left)) return true;
      error_ = at.text() + ": " + conn.error();
    }
    return false;
  }

 private:
  // Rounds of one sync or lease: the first send, and two redirects.
  static constexpr int kRounds = 3;

  // One request of the caller's thread for the slot of `key`, on the master
  // of that slot, following MOVED and ASK, by `deadline`: `send(c)` makes
  // the round trip on a connected node, `answer(reply)` says whether a reply
  // is the request's answer (anything else but a redirect is that node's
  // failure). Returns the answer, or an empty reply when no node could give
  // one (error() says why).
  template <class Send, class Answer>
  RedisReply on_master(const FleetSpec& spec, const std::string& key, Nanos deadline,
                       Send send, Answer answer) {
    std::uint64_t routed = 0;
    const std::uint16_t slot = cluster_key_slot(key);
    RedisNodeAddress to = view_->route({slot}, routed)[0];
    bool ask = false, retried = false;
    for (int hop = 0; hop < kRounds; ++hop) {
      if (to.port == 0) {
        view_->request_refresh();
        error_ = "no master known for slot " + std::to_string(slot);
        return std::nullopt;
      }
      const bool was_open = nodes_.count(to) != 0 && nodes_[to].conn->connected();
      RedisConnection* c = node(spec, to, deadline, true);
      if (c == nullptr) break;
      c->set_timeout(deadline - SteadyClock::now());
      RedisReply r;
      if (!ask || c->command({"ASKING"})) r = send(*c);
      c->set_timeout(spec.timeout);
      if (!r) {
        error_ = to.text() + ": " + c->error();
        // Closed while idle: once more on a new connection.
        if (was_open && !retried) {
          retried = true;
          --hop;
          continue;
        }
        break;
      }
      if (answer(*r)) {
        view_->note_node(to, true, fleet_clock(spec));
        return r;
      }
      const std::string text = r->text();
      ClusterRedirect rd;
      if (r->is_error() && parse_cluster_redirect(text, rd) == nullptr) {
        ask = rd.ask;
        to = rd.ask ? rd.target(to) : view_->on_moved(rd, to, routed);
        continue;
      }
      error_ = to.text() + ": " + text;
      view_->request_refresh();
      break;
    }
    view_->note_node(to, false, fleet_clock(spec));
    return std::nullopt;
  }
  // How long a node that could not be reached is left alone.
  static constexpr Nanos kRetryAfter = 250 * kNanosPerMs;

  struct Item {
    FleetMember* m = nullptr;
    FleetReport sent;
    std::vector<std::string> keys, args;
    std::uint16_t slot = 0;
    RedisNodeAddress to;
    bool ask = false;
  };
  struct Node {
    std::unique_ptr<RedisConnection> conn = std::make_unique<RedisConnection>();
    Nanos retry_at = 0;
  };

  // A connection to `at`, made (and its scripts loaded, with `scripts`) by
  // `deadline` if needed; nullptr when that failed, or when `at` failed
  // less than kRetryAfter ago.
  RedisConnection* node(const FleetSpec& spec, const RedisNodeAddress& at, Nanos deadline,
                        bool scripts) {
    if (nodes_.size() >= kMaxNodes && nodes_.count(at) == 0) nodes_.clear();
    Node& n = nodes_[at];
    RedisConnection& c = *n.conn;
    if (c.connected() && (!scripts || !c.script_sha(kFleetSyncScript).empty())) return &c;
    const Nanos t = SteadyClock::now();
    if (t < n.retry_at || t >= deadline) return nullptr;
    bool ok = c.connected() || c.connect_node(spec.endpoint, at, deadline - t);
    if (ok && scripts) {
      c.set_timeout(deadline - SteadyClock::now());
      ok = fleet_load_scripts(c);
      if (ok) c.set_timeout(spec.timeout);
    }
    if (!ok) {
      error_ = at.text() + ": " + c.error();
      n.retry_at = SteadyClock::now() + kRetryAfter;
      c.close();
      return nullptr;
    }
    return &c;
  }

  // Queues the pipeline of `idx` (a PING when empty) on `c` and writes it.
  static bool write(RedisConnection& c, const std::vector<Item>& items,
                    const std::vector<std::size_t>& idx, Nanos deadline) {
    c.set_timeout(deadline - SteadyClock::now());
    if (idx.empty()) return c.append({"PING"}) && c.flush();
    std::vector<std::string> argv;
    for (const std::size_t i : idx) {
      const Item& it = items[i];
      if (it.ask && !c.append({"ASKING"})) return false;
      if (!c.append(c.eval_command(kFleetSyncScript, it.keys, it.args))) return false;
    }
    return c.flush();
  }

  // Reads the replies of the pipeline of `idx` from node `at`; reports
  // redirected (or to load the scripts for) go into `todo`. True when the
  // node answered as a master of its slots.
  bool read(const FleetSpec& spec, RedisConnection& c, const RedisNodeAddress& at,
            std::vector<Item>& items, const std::vector<std::size_t>& idx,
            std::uint64_t routed, Nanos deadline, FleetLink& link,
            std::vector<std::size_t>& todo) {
    c.set_timeout(deadline - SteadyClock::now());
    if (idx.empty()) {
      RedisReply r = c.read();
      if (!r || !r->is_status()) {
        error_ = at.text() + ": " + (r ? r->text() : c.error());
        c.close();
        return false;
      }
      c.set_timeout(spec.timeout);
      link.note_tls(c.tls_version());
      return true;
    }
    link.note_tls(c.tls_version());
    bool ok = true, reload = false;
    for (const std::size_t i : idx) {
      Item& it = items[i];
      if (it.ask) c.read();  // ASKING's +OK
      RedisReply r = c.read();
      if (!r) {
        error_ = at.text() + ": " + c.error();
        return false;  // the rest of the node's reports stay pending
      }
      if (r->is_array() && r->elements.size() == FleetReply::kFields) {
        std::string fields[FleetReply::kFields];
        for (int j = 0; j < FleetReply::kFields; ++j) fields[j] = r->elements[j].text();
        FleetReply reply;
        if (reply.parse(fields)) it.m->apply(reply, fleet_clock(spec), it.sent);
        continue;
      }
      const std::string text = r->text();
      if (!r->is_error()) {
        error_ = at.text() + ": unexpected reply to the sync script";
        link.note_failure(error_);
        continue;
      }
      ClusterRedirect rd;
      if (parse_cluster_redirect(text, rd) == nullptr) {
        it.ask = rd.ask;
        it.to = rd.ask ? rd.target(at) : view_->on_moved(rd, at, routed);
        todo.push_back(i);
      } else if (text.compare(0, 8, "NOSCRIPT") == 0) {
        reload = true;
        it.ask = false;
        todo.push_back(i);
      } else {
        // TRYAGAIN, CLUSTERDOWN, READONLY (the map is out of date), or a
        // refusal of the script: the report stays pending.
        error_ = at.text() + ": " + text;
        if (cluster_error_kind(text) != ClusterError::kOther) ok = false;
      }
    }
    c.set_timeout(spec.timeout);
    if (reload) c.forget_scripts();  // node() loads them before the next round
    return ok;
  }

  static constexpr std::size_t kMaxNodes = 1024;
  std::shared_ptr<ClusterView> view_;
  std::map<RedisNodeAddress, Node> nodes_;
  std::string error_;
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HAVE_HIREDIS
#endif  // CIRCUITBREAKER_REDIS_CLUSTER_SYNC_HPP
