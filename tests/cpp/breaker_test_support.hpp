// Helpers the Catch2 tests of the state machine share: seconds, a validated
// Settings, and an admission that must be granted.
#ifndef CIRCUITBREAKER_BREAKER_TEST_SUPPORT_HPP
#define CIRCUITBREAKER_BREAKER_TEST_SUPPORT_HPP

#include <catch2/catch.hpp>

#include <circuitbreaker/circuitbreaker.hpp>

namespace cb_test {

inline constexpr circuitbreaker::Nanos kS = circuitbreaker::kNanosPerSecond;

// The Settings of a configuration the test means to be valid.
inline circuitbreaker::Settings settings_of(const circuitbreaker::Config& c) {
  const circuitbreaker::ConfigError e = circuitbreaker::validate(c);
  INFO("invalid test configuration: " << (e ? e.field : ""));
  REQUIRE_FALSE(e);
  return circuitbreaker::make_settings(c);
}

// The permit of an acquire() the test expects to be granted.
inline circuitbreaker::Permit admit(
    circuitbreaker::Breaker& b, circuitbreaker::Nanos now,
    circuitbreaker::Nanos lease = circuitbreaker::kNever) {
  const circuitbreaker::Admission a = b.acquire(now, lease);
  INFO("acquire at " << now
                     << " was rejected: " << circuitbreaker::rejection_name(a.rejection));
  REQUIRE(a.permitted);
  return a.permit;
}

}  // namespace cb_test

#endif  // CIRCUITBREAKER_BREAKER_TEST_SUPPORT_HPP
