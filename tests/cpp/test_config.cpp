// validate(): every field accepts its allowed values and rejects each kind of
// bad value, naming that field; make_settings(): the conversions to the
// state machine's units.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <circuitbreaker/circuitbreaker.hpp>

namespace cb = circuitbreaker;
using cb::Config;
using cb::WindowType;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The field validate() blames, or "" when it accepts the configuration.
std::string blamed(const Config& c) {
  const cb::ConfigError e = cb::validate(c);
  if (!e) return "";
  REQUIRE(e.requirement != nullptr);
  CHECK(std::strlen(e.requirement) > 0);
  return e.field;
}

struct Case {
  const char* label;
  std::function<void(Config&)> set;
};

// Applies each change to a valid base configuration and expects `field` to
// be blamed (or nothing, when `field` is empty).
void expect_all(const Config& base, const std::vector<Case>& cases,
                const std::string& field) {
  REQUIRE(blamed(base).empty());
  for (const Case& k : cases) {
    Config c = base;
    k.set(c);
    INFO(k.label);
    CHECK(blamed(c) == field);
  }
}

Config time_window() {
  Config c;
  c.window_type = WindowType::Time;
  return c;
}

}  // namespace

TEST_CASE("validate accepts the defaults (the R6 class's settings)", "[config]") {
  const Config c;
  CHECK_FALSE(cb::validate(c));
  CHECK(c.failure_threshold == 5);
  CHECK(c.recovery_timeout == 30);
  CHECK(c.half_open_max_calls == 1);
  CHECK(c.backoff_multiplier == 1);
  CHECK(c.jitter == 0);
  CHECK(c.ramp_up == 0);
  CHECK(c.window_type == WindowType::Count);
  CHECK_FALSE(c.failure_rate_threshold);
  CHECK_FALSE(c.slow_call_duration);
  CHECK_FALSE(c.half_open_max_wait);
  CHECK_FALSE(c.max_recovery_timeout);
  CHECK_FALSE(cb::validate(time_window()));
}

TEST_CASE("validate: failure_threshold", "[config]") {
  expect_all(Config{},
             {
                 {"1", [](Config& c) { c.failure_threshold = 1; }},
                 {"1e6", [](Config& c) { c.failure_threshold = 1e6; }},
                 {"1e300 (whole)", [](Config& c) { c.failure_threshold = 1e300; }},
                 {"+Inf", [](Config& c) { c.failure_threshold = kInf; }},
             },
             "");
  expect_all(Config{},
             {
                 {"NaN", [](Config& c) { c.failure_threshold = kNaN; }},
                 {"negative", [](Config& c) { c.failure_threshold = -1; }},
                 {"zero", [](Config& c) { c.failure_threshold = 0; }},
                 {"0.5", [](Config& c) { c.failure_threshold = 0.5; }},
                 {"non-whole", [](Config& c) { c.failure_threshold = 2.5; }},
                 {"-Inf", [](Config& c) { c.failure_threshold = -kInf; }},
             },
             "failure_threshold");
}

TEST_CASE("validate: recovery_timeout", "[config]") {
  expect_all(Config{},
             {
                 {"zero", [](Config& c) { c.recovery_timeout = 0; }},
                 {"fractional", [](Config& c) { c.recovery_timeout = 0.25; }},
                 {"1e9", [](Config& c) { c.recovery_timeout = 1e9; }},
             },
             "");
  expect_all(Config{},
             {
                 {"NaN", [](Config& c) { c.recovery_timeout = kNaN; }},
                 {"negative", [](Config& c) { c.recovery_timeout = -1; }},
                 {"-0.001", [](Config& c) { c.recovery_timeout = -0.001; }},
                 {"Inf", [](Config& c) { c.recovery_timeout = kInf; }},
                 {"above 1e9", [](Config& c) { c.recovery_timeout = 1.5e9; }},
             },
             "recovery_timeout");
}

TEST_CASE("validate: failure_rate_threshold", "[config]") {
  expect_all(Config{},
             {
                 {"1", [](Config& c) { c.failure_rate_threshold = 1; }},
                 {"0.5", [](Config& c) { c.failure_rate_threshold = 0.5; }},
                 {"tiny", [](Config& c) { c.failure_rate_threshold = 1e-12; }},
             },
             "");
  expect_all(Config{},
             {
                 {"NaN", [](Config& c) { c.failure_rate_threshold = kNaN; }},
                 {"negative", [](Config& c) { c.failure_rate_threshold = -0.5; }},
                 {"zero", [](Config& c) { c.failure_rate_threshold = 0; }},
                 {"above 1", [](Config& c) { c.failure_rate_threshold = 1.01; }},
                 {"Inf", [](Config& c) { c.failure_rate_threshold = kInf; }},
             },
             "failure_rate_threshold");
}

TEST_CASE("validate: window_size of a count window", "[config]") {
  expect_all(Config{},
             {
                 {"1",
                  [](Config& c) {
                    c.window_size = 1;
                    c.minimum_calls = 1;
                  }},
                 {"1024", [](Config& c) { c.window_size = 1024; }},
             },
             "");
  expect_all(Config{},
             {
                 {"NaN", [](Config& c) { c.window_size = kNaN; }},
                 {"negative", [](Config& c) { c.window_size = -10; }},
                 {"zero", [](Config& c) { c.window_size = 0; }},
                 {"non-whole", [](Config& c) { c.window_size = 10.5; }},
                 {"above 1024", [](Config& c) { c.window_size = 1025; }},
                 {"Inf", [](Config& c) { c.window_size = kInf; }},
             },
             "window_size");
}

TEST_CASE("validate: window_size of a time window", "[config]") {
  expect_all(time_window(),
             {
                 {"1e-6", [](Config& c) { c.window_size = 1e-6; }},
                 {"fractional", [](Config& c) { c.window_size = 2.5; }},
                 {"1e9", [](Config& c) { c.window_size = 1e9; }},
                 {"5000 (more than a count window may hold)",
                  [](Config& c) { c.window_size = 5000; }},
             },
             "");
  expect_all(time_window(),
             {
                 {"NaN", [](Config& c) { c.window_size = kNaN; }},
                 {"negative", [](Config& c) { c.window_size = -1; }},
                 {"zero", [](Config& c) { c.window_size = 0; }},
                 {"below 1e-6", [](Config& c) { c.window_size = 1e-7; }},
                 {"Inf", [](Config& c) { c.window_size = kInf; }},
                 {"above 1e9", [](Config& c) { c.window_size = 2e9; }},
             },
             "window_size");
}

TEST_CASE("validate: minimum_calls", "[config]") {
  expect_all(Config{},
             {
                 {"1", [](Config& c) { c.minimum_calls = 1; }},
                 {"= default window size", [](Config& c) { c.minimum_calls = 100; }},
                 {"= window size",
                  [](Config& c) {
                    c.window_size = 10;
                    c.minimum_calls = 10;
                  }},
             },
             "");
  expect_all(
      Config{},
      {
          {"NaN", [](Config& c) { c.minimum_calls = kNaN; }},
          {"negative", [](Config& c) { c.minimum_calls = -1; }},
          {"zero", [](Config& c) { c.minimum_calls = 0; }},
          {"non-whole", [](Config& c) { c.minimum_calls = 2.5; }},
          {"Inf", [](Config& c) { c.minimum_calls = kInf; }},
          {"above the default count window", [](Config& c) { c.minimum_calls = 101; }},
          {"above the count window",
           [](Config& c) {
             c.window_size = 10;
             c.minimum_calls = 11;
           }},
      },
      "minimum_calls");
  expect_all(time_window(),
             {
                 {"1e9 in a time window", [](Config& c) { c.minimum_calls = 1e9; }},
                 {"500 in a time window", [](Config& c) { c.minimum_calls = 500; }},
             },
             "");
  expect_all(time_window(),
             {
                 {"above 1e9", [](Config& c) { c.minimum_calls = 1e9 + 1; }},
                 {"zero", [](Config& c) { c.minimum_calls = 0; }},
                 {"non-whole", [](Config& c) { c.minimum_calls = 0.5; }},
             },
             "minimum_calls");
}

TEST_CASE("validate: slow_call_duration and slow_call_rate_threshold", "[config]") {
  expect_all(Config{},
             {
                 {"duration alone", [](Config& c) { c.slow_call_duration = 0.5; }},
                 {"duration 1e9", [](Config& c) { c.slow_call_duration = 1e9; }},
                 {"both",
                  [](Config& c) {
                    c.slow_call_duration = 2;
                    c.slow_call_rate_threshold = 1;
                  }},
             },
             "");
  expect_all(Config{},
             {
                 {"NaN", [](Config& c) { c.slow_call_duration = kNaN; }},
                 {"negative", [](Config& c) { c.slow_call_duration = -1; }},
                 {"zero", [](Config& c) { c.slow_call_duration = 0; }},
                 {"Inf", [](Config& c) { c.slow_call_duration = kInf; }},
                 {"above 1e9", [](Config& c) { c.slow_call_duration = 1.1e9; }},
             },
             "slow_call_duration");
  Config with_duration;
  with_duration.slow_call_duration = 1;
  expect_all(with_duration,
             {
                 {"NaN", [](Config& c) { c.slow_call_rate_threshold = kNaN; }},
                 {"negative", [](Config& c) { c.slow_call_rate_threshold = -0.1; }},
                 {"zero", [](Config& c) { c.slow_call_rate_threshold = 0; }},
                 {"above 1", [](Config& c) { c.slow_call_rate_threshold = 2; }},
                 {"Inf", [](Config& c) { c.slow_call_rate_threshold = kInf; }},
                 {"without a duration",
                  [](Config& c) {
                    c.slow_call_duration.reset();
                    c.slow_call_rate_threshold = 0.5;
                  }},
             },
             "slow_call_rate_threshold");
}

TEST_CASE("validate: half_open_max_calls and half_open_max_wait", "[config]") {
  expect_all(Config{},
             {
                 {"calls 1", [](Config& c) { c.half_open_max_calls = 1; }},
                 {"calls 32", [](Config& c) { c.half_open_max_calls = 32; }},
                 {"wait", [](Config& c) { c.half_open_max_wait = 0.001; }},
                 {"wait 1e9", [](Config& c) { c.half_open_max_wait = 1e9; }},
             },
             "");
  expect_all(Config{},
             {
                 {"NaN", [](Config& c) { c.half_open_max_calls = kNaN; }},
                 {"negative", [](Config& c) { c.half_open_max_calls = -1; }},
                 {"zero", [](Config& c) { c.half_open_max_calls = 0; }},
                 {"non-whole", [](Config& c) { c.half_open_max_calls = 1.5; }},
                 {"above 32", [](Config& c) { c.half_open_max_calls = 33; }},
                 {"Inf", [](Config& c) { c.half_open_max_calls = kInf; }},
             },
             "half_open_max_calls");
  expect_all(Config{},
             {
                 {"NaN", [](Config& c) { c.half_open_max_wait = kNaN; }},
                 {"negative", [](Config& c) { c.half_open_max_wait = -1; }},
                 {"zero", [](Config& c) { c.half_open_max_wait = 0; }},
                 {"Inf", [](Config& c) { c.half_open_max_wait = kInf; }},
                 {"above 1e9", [](Config& c) { c.half_open_max_wait = 1e10; }},
             },
             "half_open_max_wait");
}

TEST_CASE("validate: backoff_multiplier and max_recovery_timeout", "[config]") {
  expect_all(
      Config{},
      {
          {"backoff 1", [](Config& c) { c.backoff_multiplier = 1; }},
          {"backoff 1.5", [](Config& c) { c.backoff_multiplier = 1.5; }},
          {"backoff 1e6", [](Config& c) { c.backoff_multiplier = 1e6; }},
          {"cap = recovery_timeout", [](Config& c) { c.max_recovery_timeout = 30; }},
          {"cap 1e9", [](Config& c) { c.max_recovery_timeout = 1e9; }},
          {"cap 0 with timeout 0",
           [](Config& c) {
             c.recovery_timeout = 0;
             c.max_recovery_timeout = 0;
           }},
      },
      "");
  expect_all(Config{},
             {
                 {"NaN", [](Config& c) { c.backoff_multiplier = kNaN; }},
                 {"negative", [](Config& c) { c.backoff_multiplier = -2; }},
                 {"zero", [](Config& c) { c.backoff_multiplier = 0; }},
                 {"below 1", [](Config& c) { c.backoff_multiplier = 0.99; }},
                 {"Inf", [](Config& c) { c.backoff_multiplier = kInf; }},
                 {"above 1e6", [](Config& c) { c.backoff_multiplier = 1e6 + 1; }},
             },
             "backoff_multiplier");
  expect_all(
      Config{},
      {
          {"NaN", [](Config& c) { c.max_recovery_timeout = kNaN; }},
          {"negative", [](Config& c) { c.max_recovery_timeout = -1; }},
          {"zero (below recovery_timeout)",
           [](Config& c) { c.max_recovery_timeout = 0; }},
          {"Inf", [](Config& c) { c.max_recovery_timeout = kInf; }},
          {"above 1e9", [](Config& c) { c.max_recovery_timeout = 2e9; }},
          {"below recovery_timeout", [](Config& c) { c.max_recovery_timeout = 29.5; }},
      },
      "max_recovery_timeout");
}

TEST_CASE("validate: jitter", "[config]") {
  expect_all(Config{},
             {
                 {"0", [](Config& c) { c.jitter = 0; }},
                 {"0.5", [](Config& c) { c.jitter = 0.5; }},
                 {"1", [](Config& c) { c.jitter = 1; }},
             },
             "");
  expect_all(Config{},
             {
                 {"NaN", [](Config& c) { c.jitter = kNaN; }},
                 {"negative", [](Config& c) { c.jitter = -0.1; }},
                 {"above 1", [](Config& c) { c.jitter = 1.1; }},
                 {"Inf", [](Config& c) { c.jitter = kInf; }},
             },
             "jitter");
}

TEST_CASE("validate: ramp_up", "[config]") {
  expect_all(Config{},
             {
                 {"0", [](Config& c) { c.ramp_up = 0; }},
                 {"10", [](Config& c) { c.ramp_up = 10; }},
                 {"1e9", [](Config& c) { c.ramp_up = 1e9; }},
             },
             "");
  expect_all(Config{},
             {
                 {"NaN", [](Config& c) { c.ramp_up = kNaN; }},
                 {"negative", [](Config& c) { c.ramp_up = -1; }},
                 {"Inf", [](Config& c) { c.ramp_up = kInf; }},
                 {"above 1e9", [](Config& c) { c.ramp_up = 1e10; }},
             },
             "ramp_up");
}

TEST_CASE("validate reports the first bad field in declaration order", "[config]") {
  Config c;
  c.jitter = 2;
  c.recovery_timeout = -1;
  CHECK(blamed(c) == "recovery_timeout");
  c.recovery_timeout = 1;
  CHECK(blamed(c) == "jitter");
}

TEST_CASE("effective window size and minimum_calls", "[config]") {
  Config c;
  CHECK(cb::effective_window_size(c) == 100);
  CHECK(cb::effective_minimum_calls(c) == 20);
  c.window_size = 5;
  CHECK(cb::effective_minimum_calls(c) == 5);  // never more than the window
  c.minimum_calls = 3;
  CHECK(cb::effective_minimum_calls(c) == 3);
  Config t = time_window();
  CHECK(cb::effective_window_size(t) == 60);
  CHECK(cb::effective_minimum_calls(t) == 20);
  t.window_size = 1;
  CHECK(cb::effective_minimum_calls(t) == 20);  // a time window has no size cap
}

TEST_CASE("make_settings converts to nanoseconds and integers", "[config]") {
  SECTION("defaults") {
    const cb::Settings s = cb::make_settings(Config{});
    CHECK(s.failure_threshold == 5);
    CHECK(s.recovery_timeout == 30 * cb::kNanosPerSecond);
    CHECK_FALSE(s.rate_rule);
    CHECK(s.window_type == WindowType::Count);
    CHECK(s.window_calls == 100);
    CHECK(s.window_bucket == 0);
    CHECK(s.minimum_calls == 20);
    CHECK_FALSE(s.slow_tracking);
    CHECK_FALSE(s.slow_rule);
    CHECK(s.half_open_max_calls == 1);
    CHECK(s.half_open_max_wait == cb::kNever);  // no expiry
    CHECK(s.backoff_multiplier == 1);
    CHECK(s.max_recovery_timeout == 1000000000LL * cb::kNanosPerSecond);  // 1e9 s
    CHECK(s.jitter == 0);
    CHECK(s.ramp_up == 0);
    CHECK_FALSE(s.rng_seed.has_value());
  }
  SECTION("infinite or huge failure_threshold turns the consecutive rule off") {
    Config c;
    c.failure_threshold = kInf;
    CHECK(cb::make_settings(c).failure_threshold == 0);
    c.failure_threshold = 1e300;
    CHECK(cb::make_settings(c).failure_threshold == 0);
    c.failure_threshold = 1e15;
    CHECK(cb::make_settings(c).failure_threshold == 1000000000000000ULL);
  }
  SECTION("seconds round to the nearest nanosecond") {
    Config c;
    c.recovery_timeout = 1.5;
    CHECK(cb::make_settings(c).recovery_timeout == 1500000000);
    c.recovery_timeout = 2.5e-9;
    CHECK(cb::make_settings(c).recovery_timeout == 3);
    c.recovery_timeout = 1e-10;
    CHECK(cb::make_settings(c).recovery_timeout == 0);
    c.recovery_timeout = 0;
    CHECK(cb::make_settings(c).recovery_timeout == 0);
    c.recovery_timeout = 1e9;
    CHECK(cb::make_settings(c).recovery_timeout == 1000000000000000000LL);
  }
  SECTION("rules and thresholds") {
    Config c;
    c.failure_rate_threshold = 0.25;
    c.slow_call_duration = 0.2;
    c.slow_call_rate_threshold = 0.75;
    c.window_size = 50;
    c.minimum_calls = 7;
    const cb::Settings s = cb::make_settings(c);
    CHECK(s.rate_rule);
    CHECK(s.failure_rate_threshold == 0.25);
    CHECK(s.window_calls == 50);
    CHECK(s.minimum_calls == 7);
    CHECK(s.slow_tracking);
    CHECK(s.slow_call_duration == 200000000);
    CHECK(s.slow_rule);
    CHECK(s.slow_call_rate_threshold == 0.75);

    Config tracking_only;
    tracking_only.slow_call_duration = 1;
    const cb::Settings t = cb::make_settings(tracking_only);
    CHECK(t.slow_tracking);
    CHECK_FALSE(t.slow_rule);
  }
  SECTION("time window: ten buckets of a tenth of the window") {
    Config c = time_window();
    cb::Settings s = cb::make_settings(c);
    CHECK(s.window_type == WindowType::Time);
    CHECK(s.window_calls == 0);
    CHECK(s.window_bucket == 6 * cb::kNanosPerSecond);  // 60 s / 10
    CHECK(s.minimum_calls == 20);
    c.window_size = 1e-6;
    CHECK(cb::make_settings(c).window_bucket == 100);
    c.window_size = 1.5e-6;
    CHECK(cb::make_settings(c).window_bucket == 150);
    c.window_size = 1.23456789e-6;  // 1235 ns, integer division by 10
    CHECK(cb::make_settings(c).window_bucket == 123);
    c.window_size = 1e9;
    CHECK(cb::make_settings(c).window_bucket == 100000000000000000LL);
  }
  SECTION("half-open, backoff, jitter, ramp-up, rng_seed") {
    Config c;
    c.half_open_max_calls = 32;
    c.half_open_max_wait = 0.002;
    c.backoff_multiplier = 2;
    c.max_recovery_timeout = 300;
    c.jitter = 0.25;
    c.ramp_up = 10;
    c.rng_seed = 42;
    const cb::Settings s = cb::make_settings(c);
    CHECK(s.half_open_max_calls == 32);
    CHECK(s.half_open_max_wait == 2000000);
    CHECK(s.backoff_multiplier == 2);
    CHECK(s.max_recovery_timeout == 300 * cb::kNanosPerSecond);
    CHECK(s.jitter == 0.25);
    CHECK(s.ramp_up == 10 * cb::kNanosPerSecond);
    CHECK(s.rng_seed == std::optional<std::uint64_t>(42));
  }
}

TEST_CASE("seconds_to_nanos and nanos_to_seconds", "[config]") {
  CHECK(cb::seconds_to_nanos(0) == 0);
  CHECK(cb::seconds_to_nanos(-1) == 0);
  CHECK(cb::seconds_to_nanos(kNaN) == 0);
  CHECK(cb::seconds_to_nanos(1) == cb::kNanosPerSecond);
  CHECK(cb::seconds_to_nanos(1e10) == cb::kNever);  // saturates
  CHECK(cb::seconds_to_nanos(kInf) == cb::kNever);
  CHECK(cb::nanos_to_seconds(1500000000) == 1.5);
  CHECK(std::isinf(cb::nanos_to_seconds(cb::kNever)));
}
