// One thread's way to the Redis of a fleet store (FleetSync, fleet/sync.hpp
// has two: the sync thread's and the callers'): a router (redis/router.hpp)
// for a single server, the master that the sentinels name or a Redis
// Cluster alike, and the fleet's round trips over it (fleet/round_trip.hpp).
// Which topology it is is found on the first connection of either thread
// and kept in the store's ClusterView, which both share.
#ifndef CIRCUITBREAKER_FLEET_TRANSPORT_HPP
#define CIRCUITBREAKER_FLEET_TRANSPORT_HPP

#ifdef CIRCUITBREAKER_HAVE_HIREDIS

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../clock.hpp"
#include "member.hpp"
#include "../redis/cluster_view.hpp"
#include "../redis/connection.hpp"
#include "keys.hpp"
#include "link.hpp"
#include "round_trip.hpp"
#include "../redis/router.hpp"

namespace circuitbreaker {

class FleetTransport {
 public:
  // `connect_timeout`: how long a sync may take to make a node's connection
  // (0: the store's timeout). The sync thread's may be longer than the
  // timeout, since no call waits for it; the callers' never is.
  explicit FleetTransport(std::shared_ptr<ClusterView> view, Nanos connect_timeout = 0)
      : router_(std::move(view)), connect_timeout_(connect_timeout) {}

  bool cluster() const noexcept { return router_.cluster(); }
  std::string error() const { return router_.error(); }

  // A sync of `members` (round_trip.hpp; with none, a PING of each node).
  bool sync(const FleetSpec& spec, const std::vector<FleetMember*>& members,
            FleetLink& link, bool ping_idle) {
    return fleet_sync(router_, spec, members, link, ping_idle, connect_timeout_);
  }

  // Connected (and found out), for a caller that found its connection
  // broken: on a single endpoint, its one connection with the scripts; on
  // a Cluster, per node when used.
  bool ready(const FleetSpec& spec) {
    const Nanos deadline = SteadyClock::now() + spec.timeout;
    if (!router_.ready(spec.endpoint, deadline)) return false;
    return cluster() ||
           router_.node(spec.endpoint, RedisRouter::home(spec.endpoint), deadline,
                        fleet_scripts_ready, fleet_load_scripts) != nullptr;
  }

  std::optional<std::vector<std::string>> lease(const FleetSpec& spec,
                                                const std::vector<std::string>& keys,
                                                const std::string& token,
                                                std::int64_t lease_ms, Nanos deadline) {
    return fleet_lease(router_, spec, keys, token, lease_ms, deadline);
  }

  // The health-check lease `key` (round_trip.hpp): true when taken, false
  // when another holds it, nullopt when Redis could not be reached.
  std::optional<bool> health_lease(const FleetSpec& spec, const std::string& key,
                                   const std::string& token, std::int64_t lease_ms,
                                   Nanos deadline) {
    return fleet_health_lease(router_, spec, key, token, lease_ms, deadline);
  }

  // A PING on each open connection (the sync thread's keep-alive of the
  // caller's connections).
  void keep_alive(const FleetSpec& spec) { router_.keep_alive(spec.timeout); }

  // The server the last sync went to (host:port; behind Sentinel, the
  // master found then); "" on a cluster (a connection per node).
  std::string server_address() const { return router_.server_address(); }

  // Connects `conn` for the subscription: to the server, or to any node of
  // the cluster that answers (classic pub/sub reaches every node).
  bool connect_subscriber(const FleetSpec& spec, RedisConnection& conn) {
    return router_.connect_any(spec.endpoint, conn, SteadyClock::now() + spec.timeout);
  }

 private:
  RedisRouter router_;
  const Nanos connect_timeout_;
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
#endif  // CIRCUITBREAKER_FLEET_TRANSPORT_HPP
