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

// A configuration with every rule on (rates on a 20-call window, slow
// calls, two probes with a deadline, backoff with a cap, jitter, ramp-up),
// its times in `unit` seconds: the base of the tests that need every rule
// (or every argument set), which change what they test from it.
inline circuitbreaker::Config every_rule_config(double unit = 1) {
  circuitbreaker::Config c;
  c.failure_threshold = 3;
  c.recovery_timeout = 2 * unit;
  c.failure_rate_threshold = 0.5;
  c.window_size = 20;
  c.minimum_calls = 4;
  c.slow_call_duration = 0.5 * unit;
  c.slow_call_rate_threshold = 0.8;
  c.half_open_max_calls = 2;
  c.half_open_max_wait = 3 * unit;
  c.backoff_multiplier = 1.5;
  c.max_recovery_timeout = 10 * unit;
  c.jitter = 0.3;
  c.ramp_up = 4 * unit;
  return c;
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
