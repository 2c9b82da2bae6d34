// Where one thread's Redis commands go: to the node that serves a key's
// slot. A single server, and the master behind Sentinel, are a cluster of
// one node (home()) that serves every slot, so that whoever sends commands
// (the round trips above it) is written once for all three
// topologies. Which one it is is found on the first connection (detect():
// CLUSTER SLOTS answered with a map is a Cluster; refused, a single
// endpoint: managed services that disable CLUSTER are single endpoints) and
// kept in a ClusterView (cluster_view.hpp) that the threads of a store share.
//
// The router owns a connection per node (TLS, AUTH and SELECT as the
// endpoint says: connection.hpp), leaves a node that could not be reached
// alone for a quarter of a second (nor before the next round trip), follows
// MOVED (the map is corrected) and ASK (ASKING first) and tries once more,
// on a new connection, a request that failed at once on a connection the
// server had closed while it was idle (IdleRetry): only a second failure
// says that a node cannot be reached, and a round trip that timed out is
// not tried again, so that a hung node costs one timeout. It knows Redis,
// not breakers.
#ifndef CIRCUITBREAKER_REDIS_ROUTER_HPP
#define CIRCUITBREAKER_REDIS_ROUTER_HPP

#ifdef CIRCUITBREAKER_HAVE_HIREDIS

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../clock.hpp"
#include "cluster.hpp"
#include "cluster_reply.hpp"
#include "cluster_view.hpp"
#include "connection.hpp"
#include "key_slot.hpp"
#include "redirect.hpp"

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
  const RedisNodeAddress asked =
      conn.node().port != 0 ? conn.node() : e.seed_nodes().front();
  if (!other.connect_node(e, rd.target(asked), timeout)) return std::nullopt;
  if (rd.ask && !other.command({"ASKING"})) return std::nullopt;
  return other.command(args);
}

// When a failed request is tried once more on a new connection: it failed
// without an answer (the connection is closed), on a connection that was
// open before it (the server may have closed it while it was idle, which
// only the next command finds out), not yet retried, and in the first half
// of its time (a request that timed out is not tried again).
struct IdleRetry {
  bool retried = false;
  bool again(bool was_open, const RedisConnection& c, Nanos started, Nanos timeout) {
    if (retried || !was_open || c.connected() ||
        SteadyClock::now() - started >= timeout / 2) {
      return false;
    }
    retried = true;
    return true;
  }
};

class RedisRouter {
 public:
  explicit RedisRouter(std::shared_ptr<ClusterView> view) : view_(std::move(view)) {}
  RedisRouter(const RedisRouter&) = delete;
  RedisRouter& operator=(const RedisRouter&) = delete;

  bool cluster() const noexcept { return view_->cluster(); }
  ClusterView& view() noexcept { return *view_; }
  const std::string& error() const noexcept { return error_; }
  void set_error(std::string why) { error_ = std::move(why); }

  // The topology found (once, on the first connection), by `deadline`.
  bool ready(const RedisEndpoint& e, Nanos deadline) {
    return view_->mode() != ClusterView::Mode::kUnknown || detect(e, deadline);
  }

  // The one node of a single server or of the master behind Sentinel.
  static RedisNodeAddress home(const RedisEndpoint& e) { return e.seed_nodes().front(); }

  // The node that serves each of `slots` (port 0: none known; a refresh of
  // the map is asked for), and the generation of the map that said so.
  std::vector<RedisNodeAddress> route(const RedisEndpoint& e,
                                      const std::vector<std::uint16_t>& slots,
                                      std::uint64_t& generation) {
    if (!cluster()) {
      generation = 0;
      return std::vector<RedisNodeAddress>(slots.size(), home(e));
    }
    std::vector<RedisNodeAddress> out = view_->route(slots, generation);
    for (const RedisNodeAddress& a : out) {
      if (a.port == 0) view_->request_refresh();
    }
    return out;
  }
  // Every node that serves slots.
  std::vector<RedisNodeAddress> masters(const RedisEndpoint& e) const {
    if (!cluster()) return {home(e)};
    return view_->masters();
  }

  // Where a redirect answered by `at` sends the command (a MOVED corrects
  // the map, read with `generation`).
  RedisNodeAddress redirected(const ClusterRedirect& rd, const RedisNodeAddress& at,
                              std::uint64_t generation) {
    return rd.ask ? rd.target(at) : view_->on_moved(rd, at, generation);
  }

  // A round trip to `at` worked or failed, at `now` (the caller's clock).
  void note(const RedisNodeAddress& at, bool ok, Nanos now) {
    if (!cluster()) return;
    view_->note_node(at, ok, now);
    if (!ok) view_->request_refresh();
  }

  // When `error` (a node's answer on a key of `slot`) is CLUSTERDOWN or
  // TRYAGAIN: the slot is marked down (ClusterView::note_slot()), the map is
  // read again after a CLUSTERDOWN, and true. Otherwise false.
  bool note_slot_down(const std::string& error, std::uint16_t slot) {
    const ClusterError kind = cluster_error_kind(error);
    if (kind != ClusterError::kClusterDown && kind != ClusterError::kTryAgain)
      return false;
    view_->note_slot(slot, false);
    if (kind == ClusterError::kClusterDown) view_->request_refresh();
    return true;
  }
  // A command on a key of `slot` was served.
  void note_slot_up(std::uint16_t slot) { view_->note_slot(slot, true); }

  // Whether the connection to `at` is open now.
  bool is_open(const RedisNodeAddress& at) const {
    const auto n = nodes_.find(at);
    return n != nodes_.end() && n->second.conn->connected();
  }

  // A connection to `at`, made by `deadline` if needed (then `prepare(c)`
  // runs on it: false fails it), or made ready when `prepared(c)` says it
  // is not; nullptr when that failed (error() says why), or when `at`
  // failed less than kRetryAfter ago.
  template <class Prepared, class Prepare>
  RedisConnection* node(const RedisEndpoint& e, const RedisNodeAddress& at,
                        Nanos deadline, Prepared prepared, Prepare prepare) {
    if (nodes_.size() >= kMaxNodes && nodes_.count(at) == 0) nodes_.clear();
    Node& n = nodes_[at];
    RedisConnection& c = *n.conn;
    if (c.connected() && prepared(c)) return &c;
    const Nanos t = SteadyClock::now();
    if (t < n.retry_at || t >= deadline) {
      if (error_.empty()) error_ = at.text() + ": not reachable a moment ago";
      return nullptr;
    }
    // A single endpoint connects as its URL says (through the sentinels,
    // with SELECT); a Cluster node by its address.
    bool ok = c.connected() || (cluster() ? c.connect_node(e, at, deadline - t)
                                          : c.connect(e, deadline - t));
    if (ok) {
      c.set_timeout(deadline - SteadyClock::now());
      ok = prepare(c);
    }
    if (!ok) {
      error_ = where(at) + c.error();
      n.retry_at = SteadyClock::now() + kRetryAfter;
      c.close();
      return nullptr;
    }
    return &c;
  }

  // One request for the slot of `key`, on the node that serves it,
  // following MOVED and ASK, once more after an idle close (IdleRetry), by
  // `deadline`: `send(c)` makes the round trip on a ready connection,
  // `answer(v)` says whether a reply is the request's answer (anything else
  // but a redirect is that node's failure). Returns the answer, or nullopt
  // (error() says why); `now()` is the clock of note().
  template <class Prepared, class Prepare, class Send, class Answer, class Now>
  RedisReply request(const RedisEndpoint& e, const std::string& key, Nanos deadline,
                     Prepared prepared, Prepare prepare, Send send, Answer answer,
                     Now now) {
    if (!ready(e, deadline)) return std::nullopt;
    std::uint64_t routed = 0;
    const std::uint16_t slot = cluster_key_slot(key);
    RedisNodeAddress to = route(e, {slot}, routed)[0];
    bool ask = false;
    IdleRetry retry;
    const Nanos started = SteadyClock::now();
    for (int hop = 0; hop < kHops; ++hop) {
      if (to.port == 0) {
        error_ = "no master known for the slot of the key";
        return std::nullopt;
      }
      const bool was_open = is_open(to);
      RedisConnection* c = node(e, to, deadline, prepared, prepare);
      if (c == nullptr) break;
      c->set_timeout(deadline - SteadyClock::now());
      RedisReply r;
      if (!ask || c->command({"ASKING"})) r = send(*c);
      c->set_timeout(deadline - started);
      if (!r) {
        error_ = where(to) + c->error();
        if (retry.again(was_open, *c, started, deadline - started)) {
          --hop;
          continue;
        }
        break;
      }
      if (answer(*r)) {
        note(to, true, now());
        if (cluster()) note_slot_up(slot);
        return r;
      }
      ClusterRedirect rd;
      if (cluster() && r->is_error() && parse_cluster_redirect(r->str, rd) == nullptr) {
        ask = rd.ask;
        to = redirected(rd, to, routed);
        continue;
      }
      error_ = where(to) + r->text();
      // The slot is down, not its master (which answered): only the keys
      // of that slot wait. A slot no longer served leaves the map when it
      // is read again.
      if (cluster() && r->is_error() && note_slot_down(r->str, slot)) return std::nullopt;
      break;
    }
    note(to, false, now());
    return std::nullopt;
  }

  // A connection of the caller's own (the subscription) to the single
  // endpoint, or to any node of the cluster that answers (classic pub/sub
  // reaches every node), by `deadline`.
  bool connect_any(const RedisEndpoint& e, RedisConnection& conn, Nanos deadline) {
    if (!cluster()) return conn.connect(e, deadline - SteadyClock::now());
    for (const RedisNodeAddress& at : view_->known_nodes(e.seed_nodes())) {
      const Nanos left = deadline - SteadyClock::now();
      if (left <= 0) break;
      if (conn.connect_node(e, at, left)) return true;
      error_ = at.text() + ": " + conn.error();
    }
    return false;
  }

  // Reads the map again from the first known node that answers.
  bool refresh(const RedisEndpoint& e, Nanos deadline) {
    for (const RedisNodeAddress& at : view_->known_nodes(e.seed_nodes())) {
      RedisConnection* c = node(e, at, deadline, any, any);
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

  // A PING on every open connection (keep-alive through proxies that drop
  // idle connections); one that fails is closed, and made again when used.
  void keep_alive(Nanos timeout) {
    for (auto& kv : nodes_) {
      RedisConnection& c = *kv.second.conn;
      if (!c.connected()) continue;
      c.set_timeout(timeout);
      const RedisReply r = c.command({"PING"});
      (void)r;
    }
  }

  // The single endpoint's server of the moment (host:port; behind
  // Sentinel, the master found last); "" on a cluster or when unconnected.
  std::string server_address() const {
    if (cluster()) return std::string();
    for (const auto& kv : nodes_) {
      if (kv.second.conn->connected()) return kv.second.conn->address();
    }
    return std::string();
  }
  // The TLS version of any open connection ("" for none, or plain).
  std::string tls_version() const {
    for (const auto& kv : nodes_) {
      if (kv.second.conn->connected()) return kv.second.conn->tls_version();
    }
    return std::string();
  }

  static bool any(RedisConnection&) { return true; }

 private:
  // Rounds of one request: the first send and two redirects.
  static constexpr int kHops = 3;
  // How long a node that could not be reached is left alone.
  static constexpr Nanos kRetryAfter = 250 * kNanosPerMs;
  static constexpr std::size_t kMaxNodes = 1024;

  struct Node {
    std::unique_ptr<RedisConnection> conn = std::make_unique<RedisConnection>();
    Nanos retry_at = 0;
  };

  // Which node an error is of, on a cluster (one server's errors read as
  // they always have).
  std::string where(const RedisNodeAddress& at) const {
    return cluster() ? at.text() + ": " : std::string();
  }

  // Whether the endpoint is a Cluster node: CLUSTER SLOTS on the first seed
  // that answers. A map: a Cluster, whose map is kept. Refused: a single
  // endpoint (several seeds must be a Cluster). Behind Sentinel: a single
  // master, without asking.
  bool detect(const RedisEndpoint& e, Nanos deadline) {
    if (e.sentinels) {
      view_->set_mode(ClusterView::Mode::kSingle);
      return true;
    }
    std::string why = "no answer in time";
    const bool several = e.seeds.size() > 1;
    for (const RedisNodeAddress& at : e.seed_nodes()) {
      const Nanos left = deadline - SteadyClock::now();
      if (left <= 0) break;
      auto owned = std::make_unique<RedisConnection>();
      RedisConnection& probe = *owned;
      if (!probe.connect_node(e, at, left)) {
        why = (several ? at.text() + ": " : std::string()) + probe.error();
        continue;
      }
      ClusterSlotMap map;
      const char* bad = read_cluster_map(probe, at, map);
      if (bad == nullptr) {
        view_->install(std::move(map));
        view_->set_mode(ClusterView::Mode::kCluster);
        return true;
      }
      if (!probe.connected()) {
        why = (several ? at.text() + ": " : std::string()) + probe.error();
        continue;
      }
      if (several) {
        error_ = at.text() + " is not a Redis Cluster node (" + bad +
                 "): several URLs are the seed nodes of one cluster";
        return false;
      }
      view_->set_mode(ClusterView::Mode::kSingle);
      nodes_[home(e)].conn = std::move(owned);  // the one node's connection
      return true;
    }
    error_ = why;
    return false;
  }

  std::shared_ptr<ClusterView> view_;
  std::map<RedisNodeAddress, Node> nodes_;
  std::string error_;
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HAVE_HIREDIS
#endif  // CIRCUITBREAKER_REDIS_ROUTER_HPP
