// The circuitbreaker core: a header-only C++17 circuit breaker with no
// dependency on R. Include this one header.
//
//   circuitbreaker::Config config;                 // the R6 class's defaults
//   if (auto err = circuitbreaker::validate(config)) { /* err.field ... */ }
//   circuitbreaker::Breaker breaker(circuitbreaker::make_settings(config),
//                                   circuitbreaker::SteadyClock::now());
//   auto a = breaker.acquire(circuitbreaker::SteadyClock::now());
//   if (a.permitted) {
//     bool ok = call_the_dependency();
//     breaker.record(a.permit, ok ? circuitbreaker::Outcome::Success
//                                 : circuitbreaker::Outcome::Failure,
//                    circuitbreaker::SteadyClock::now());
//   }
//
// Other R packages can use it with `LinkingTo: circuitbreaker`.
#ifndef CIRCUITBREAKER_CIRCUITBREAKER_HPP
#define CIRCUITBREAKER_CIRCUITBREAKER_HPP

#include "version.hpp"

#include "types.hpp"
#include "clock.hpp"
#include "lock.hpp"
#include "random.hpp"
#include "config.hpp"
#include "config_fields.hpp"
#include "config_identity.hpp"
#include "health.hpp"
#include "window.hpp"
#include "history.hpp"
#include "permit.hpp"
#include "admission.hpp"
#include "leased_slots.hpp"
#include "probe_slots.hpp"
#include "bulkhead.hpp"
#include "transition_log.hpp"
#include "snapshot.hpp"
#include "state.hpp"
#include "store.hpp"
#include "rules.hpp"
#include "tally.hpp"
#include "stored_breaker.hpp"
#include "breaker.hpp"
#include "any_breaker.hpp"
#include "endpoint.hpp"

#endif  // CIRCUITBREAKER_CIRCUITBREAKER_HPP
