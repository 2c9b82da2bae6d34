// What a fleet store tells about its link to Redis (store_info.hpp): for
// one breaker (FleetHandle::store_info(), its master's link on a Cluster)
// and for the store as a whole (a store's print() and its "alone" news).
// The link's fields are named once, here, for both.
#ifndef CIRCUITBREAKER_FLEET_FLEET_INFO_HPP
#define CIRCUITBREAKER_FLEET_FLEET_INFO_HPP

#ifdef CIRCUITBREAKER_HAVE_HIREDIS

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "../clock.hpp"
#include "../store_info.hpp"
#include "member.hpp"
#include "sync.hpp"

namespace circuitbreaker {

// The fields both have: mode ("fleet" while the last round trip to Redis
// worked, else "local"), round trips and failures, the last error (without
// the password), the topology, the master ("" on a Cluster for the store,
// or while none is known), how many masters, and TLS ("off", "on" before a
// handshake finished, or the version).
inline void add_fleet_link_fields(StoreInfo& info, const FleetLink::Stats& st,
                                  const char* topology, std::string master,
                                  std::size_t masters) {
  info.text("mode", st.linked ? "fleet" : "local")
      .number("syncs", static_cast<double>(st.syncs))
      .number("sync_failures", static_cast<double>(st.failures))
      .text("last_error", st.last_error)
      .text("topology", topology)
      .text("master", std::move(master))
      .number("masters", static_cast<double>(masters))
      .text("tls", st.tls);
}

// Breaker `m` of `sync`: its link, plus the seconds since its last good
// sync and that sync's time (unknown before one), its key, and the fleet's
// generation and counts as the last sync said them (unknown before one).
inline StoreInfo fleet_breaker_info(const FleetSync& sync, const FleetMember& m) {
  const FleetLink::Stats st = sync.stats_for(m.key());
  const FleetMember::Status ms = m.status();
  const auto known = [&](std::uint64_t v) {
    return ms.known ? std::optional<double>(static_cast<double>(v)) : std::nullopt;
  };
  StoreInfo info;
  add_fleet_link_fields(info, st, sync.topology(), sync.master_for(m.key()),
                        sync.masters());
  info.number("sync_lag",
              st.since_last_sync < 0
                  ? std::nullopt
                  : std::optional<double>(nanos_to_seconds(st.since_last_sync)))
      .number("last_sync", st.last_sync_unix < 0
                               ? std::nullopt
                               : std::optional<double>(st.last_sync_unix))
      .text("key", m.key())
      .number("fleet_generation", known(ms.generation))
      .number("fleet_calls", known(ms.fleet_calls))
      .number("fleet_failures", known(ms.fleet_failures));
  return info;
}

// The store of `sync` as a whole: its link, and whether it is alone
// (FleetLink's rule).
inline StoreInfo fleet_store_info(const FleetSync& sync) {
  const FleetLink::Stats st = sync.stats();
  const char* topology = sync.topology();
  StoreInfo info;
  add_fleet_link_fields(info, st, topology,
                        std::string(topology) == "cluster" ? "" : sync.master_for(""),
                        sync.masters());
  info.flag("alone", st.alone);
  return info;
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HAVE_HIREDIS
#endif  // CIRCUITBREAKER_FLEET_FLEET_INFO_HPP
