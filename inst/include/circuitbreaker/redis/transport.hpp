// One thread's way to the Redis of a fleet store (FleetSync, redis/sync.hpp
// has two: the sync thread's and the callers'): a single server (or the
// master that the sentinels name) on one connection (redis/round_trip.hpp),
// or a Redis Cluster on a connection per node (redis/cluster_sync.hpp).
// Which of the two is found on the first connection of either thread
// (detect()) and kept in the store's ClusterView, which both share.
#ifndef CIRCUITBREAKER_REDIS_TRANSPORT_HPP
#define CIRCUITBREAKER_REDIS_TRANSPORT_HPP

#ifdef CIRCUITBREAKER_HAVE_HIREDIS

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../clock.hpp"
#include "../fleet/member.hpp"
#include "cluster_sync.hpp"
#include "cluster_view.hpp"
#include "connection.hpp"
#include "keys.hpp"
#include "link.hpp"
#include "round_trip.hpp"

namespace circuitbreaker {

class FleetTransport {
 public:
  explicit FleetTransport(std::shared_ptr<ClusterView> view)
      : view_(view), cluster_(std::move(view)) {}

  bool cluster() const noexcept { return view_->cluster(); }
  std::string error() const { return cluster() ? cluster_.error() : single_.error(); }

  // A sync of `members` (a PING with none; `ping_idle`: on a cluster,
  // every master without a breaker in the sync gets one).
  bool sync(const FleetSpec& spec, const std::vector<FleetMember*>& members,
            FleetLink& link, bool ping_idle) {
    if (view_->mode() == ClusterView::Mode::kUnknown && !detect(spec)) return false;
    if (cluster()) return cluster_.sync(spec, members, link, ping_idle);
    return fleet_sync(single_, spec, members, link);
  }

  // Connected (and found out), for a caller that found its connection
  // broken.
  bool ready(const FleetSpec& spec) {
    if (view_->mode() == ClusterView::Mode::kUnknown) return detect(spec);
    if (cluster()) return true;  // per node, when used
    return fleet_connection_ready(single_, spec);
  }

  std::optional<std::vector<std::string>> lease(const FleetSpec& spec,
                                                const std::vector<std::string>& keys,
                                                const std::string& token,
                                                std::int64_t lease_ms, Nanos deadline) {
    if (cluster()) return cluster_.lease(spec, keys, token, lease_ms, deadline);
    return fleet_lease(single_, spec, keys, token, lease_ms, deadline);
  }

  // The health-check lease `key` (round_trip.hpp): true when taken, false
  // when another holds it, nullopt when Redis could not be reached.
  std::optional<bool> health_lease(const FleetSpec& spec, const std::string& key,
                                   const std::string& token, std::int64_t lease_ms,
                                   Nanos deadline) {
    if (cluster()) return cluster_.health_lease(spec, key, token, lease_ms, deadline);
    return fleet_health_lease(single_, spec, key, token, lease_ms, deadline);
  }

  // A PING on each open connection that no call used for a while (the
  // sync thread's keep-alive of the caller's connections); one that fails
  // is closed, and made again when next needed.
  void keep_alive(const FleetSpec& spec) {
    if (cluster()) {
      cluster_.keep_alive(spec);
    } else if (single_.connected()) {
      single_.set_timeout(spec.timeout);
      const RedisReply r = single_.command({"PING"});
      (void)r;
    }
  }

  // The server the last sync went to (host:port; behind Sentinel, the
  // master found then); "" on a cluster (a connection per node).
  std::string server_address() const {
    return cluster() ? std::string() : single_.address();
  }

  // Connects `conn` for the subscription: to the server, or to any node of
  // the cluster that answers (classic pub/sub reaches every node).
  bool connect_subscriber(const FleetSpec& spec, RedisConnection& conn) {
    if (!cluster()) return conn.connect(spec.endpoint, spec.timeout);
    return cluster_.connect_any(spec, conn, SteadyClock::now() + spec.timeout);
  }

 private:
  // Whether the server is a Cluster node: CLUSTER SLOTS on the first seed
  // that answers, within `timeout`. A map: a Cluster, whose map is kept.
  // An error: a single server (several seeds must be a Cluster). Behind
  // Sentinel: a single master, without asking.
  bool detect(const FleetSpec& spec) {
    if (spec.endpoint.sentinels) {
      view_->set_mode(ClusterView::Mode::kSingle);
      return true;
    }
    const Nanos deadline = SteadyClock::now() + spec.timeout;
    std::string why = "no answer in time";
    for (const RedisNodeAddress& at : spec.endpoint.seed_nodes()) {
      const Nanos left = deadline - SteadyClock::now();
      if (left <= 0) break;
      if (!single_.connect_node(spec.endpoint, at, left)) {
        why = where(spec, at) + single_.error();
        continue;
      }
      ClusterSlotMap map;
      const char* bad = read_cluster_map(single_, at, map);
      if (bad == nullptr) {
        view_->install(std::move(map));
        view_->set_mode(ClusterView::Mode::kCluster);
        single_.close();
        return true;
      }
      if (!single_.connected()) {
        why = where(spec, at) + single_.error();
        continue;
      }
      if (spec.endpoint.seeds.size() > 1) {
        single_.fail(at.text() + " is not a Redis Cluster node (" + bad +
                     "): several URLs are the seed nodes of one cluster");
        return false;
      }
      view_->set_mode(ClusterView::Mode::kSingle);
      return true;
    }
    single_.fail(why);
    return false;
  }

  // Which seed an error is of, when there are several (one URL's errors
  // read as they always have).
  static std::string where(const FleetSpec& spec, const RedisNodeAddress& at) {
    return spec.endpoint.seeds.size() > 1 ? at.text() + ": " : std::string();
  }

  std::shared_ptr<ClusterView> view_;
  RedisConnection single_;
  ClusterClient cluster_;
};

// What one breaker's link says (`store`: the store's): on a cluster, its
// master's, so that a master out of reach leaves its breakers on local
// rules (mode "local", sync_lag growing) while the others sync.
inline FleetLink::Stats breaker_link_stats(FleetLink::Stats store,
                                           const ClusterView& view,
                                           const std::string& key, Nanos now) {
  if (!view.cluster()) return store;
  const ClusterView::KeyHealth h = view.health_of_key(key);
  store.linked = store.linked && h.known && h.up;
  store.since_last_sync = h.last_ok > 0 ? now - h.last_ok : -1;
  return store;
}

// "single", "sentinel" or "cluster", as $metrics() and print() show it.
inline const char* store_topology(const ClusterView& view,
                                  const RedisEndpoint& e) noexcept {
  return view.cluster() ? "cluster" : e.topology();
}

// The master that serves `key` ("" when none is known yet).
inline std::string master_of_key(const ClusterView& view, const RedisEndpoint& e,
                                 const std::string& key) {
  if (!view.cluster()) return e.master_address();
  const ClusterView::KeyHealth h = view.health_of_key(key);
  return h.known ? h.master.text() : std::string();
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HAVE_HIREDIS
#endif  // CIRCUITBREAKER_REDIS_TRANSPORT_HPP
