// The version of the circuitbreaker C++ API (every header that needs it
// includes this one).
#ifndef CIRCUITBREAKER_VERSION_HPP
#define CIRCUITBREAKER_VERSION_HPP

// The version of this C++ API, an integer that grows whenever the API changes
// incompatibly. For LinkingTo users: test it at compile time
// (`#if CIRCUITBREAKER_API_VERSION >= 2`) to support several releases.
//   1  circuitbreaker 0.1.0
//   2  acquire(now, probe_lease) with probe deadlines, kUnknownWait,
//      record() / note() return bool, Config::rng_seed (was seed),
//      the argument table (config_fields.hpp), BasicBreaker<Store>,
//      endpoint_key() (endpoint.hpp)
//   3  headers in folders by role (host/, fleet/, redis/), any_breaker.hpp,
//      config_identity.hpp, version.hpp
//      (config_fingerprint() was fleet_config_fingerprint(), config_value_text()
//      moved there), rules.hpp's probe_hold() (was permit.hpp's
//      async_probe_lease()) and draw_jitter_factor()
//   4  policies beside the state machine: stored_breaker.hpp (the state on
//      its store, the critical section, the reads) under breaker.hpp;
//      leased_slots.hpp under ProbeSlots and BulkheadPermits; the bulkhead on
//      another breaker's block is bulkhead.hpp's take_bulkhead_permit(),
//      return_bulkhead_permit() and leave_bulkhead() (were BasicBreaker
//      members); the health lease's bookkeeping in health.hpp; a reason per
//      transition log entry (TransitionReason); AnyBreaker's health and
//      bulkhead virtuals, Rejection::Full and Permit's bulkhead fields (added
//      in 3 without a bump). The Redis client: redis/wire.hpp (RedisWire),
//      RedisReply (an owned RedisValue; no hiredis type above the wire),
//      RedisConnection::eval(source, ...) and scripts by source, redis/router.hpp
//      (RedisRouter), RedisTls (redis/tls_options.hpp) in RedisEndpoint; the
//      fleet store's files moved from redis/ to fleet/ (keys, link, registry,
//      round_trip, sync, transport, fleet_handle, fleet_bulkhead), with
//      fleet/subscription.hpp, fleet/sync_schedule.hpp, fleet/script_lease.hpp;
//      redis/cluster_sync.hpp removed (ClusterClient: RedisRouter and
//      fleet/round_trip.hpp's fleet_sync(), fleet_lease(),
//      fleet_health_lease()). AnyBreaker::store_info() (store_info.hpp;
//      fleet/fleet_info.hpp) for what a store tells of a breaker;
//      ClusterView::note_slot() (a slot down without its master). The
//      bulkhead's permits out of BreakerState: a store's bulkhead() and
//      keep_bulkhead() (store.hpp), PolicyBlocks for a policy's section,
//      make_snapshot(state, bulkhead, settings, now), SegmentSlot::bulkhead;
//      outcome_name().
#define CIRCUITBREAKER_API_VERSION 4

#endif  // CIRCUITBREAKER_VERSION_HPP
