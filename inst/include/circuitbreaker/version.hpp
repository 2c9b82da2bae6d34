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
#define CIRCUITBREAKER_API_VERSION 3

#endif  // CIRCUITBREAKER_VERSION_HPP
