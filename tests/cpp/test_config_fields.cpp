// The argument table (config_fields.hpp) and the validation messages built
// from the limits they quote.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include <circuitbreaker/circuitbreaker.hpp>

namespace cb = circuitbreaker;
using cb::Config;
using cb::FieldKind;

namespace {

// How a constant is written in a message: the shortest form %g gives
// ("1e+09" is spelled "1e9" in messages, so exponents are normalised).
std::string spelled(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  std::string s = buf;
  const std::size_t e = s.find("e+");
  if (e != std::string::npos) s.erase(e + 1, 1);
  const std::size_t z = s.find("e0");
  if (z != std::string::npos) s.erase(z + 1, 1);
  const std::size_t m = s.find("e-0");
  if (m != std::string::npos) s.erase(m + 2, 1);
  return s;
}

std::string requirement_for(const Config& c, const char* field) {
  const cb::ConfigError e = cb::validate(c);
  REQUIRE(e);
  CHECK(std::string(e.field) == field);
  return e.requirement;
}

bool mentions(const std::string& message, double v) {
  return message.find(spelled(v)) != std::string::npos;
}

}  // namespace

TEST_CASE("validation messages quote the constants they check", "[config][messages]") {
  CHECK(spelled(1e9) == "1e9");
  CHECK(spelled(1e-6) == "1e-6");
  CHECK(spelled(1024) == "1024");
  Config c;
  c.half_open_max_calls = cb::kMaxHalfOpenCalls + 1;
  const std::string h = requirement_for(c, "half_open_max_calls");
  CHECK(h == "a whole number from 1 to " + spelled(cb::kMaxHalfOpenCalls));

  c = Config{};
  c.window_size = cb::kMaxCountWindow + 1;
  CHECK(mentions(requirement_for(c, "window_size"), cb::kMaxCountWindow));

  c = Config{};
  c.window_type = cb::WindowType::Time;
  c.window_size = cb::kMinTimeWindowSeconds / 2;
  const std::string w = requirement_for(c, "window_size");
  CHECK(mentions(w, cb::kMinTimeWindowSeconds));
  CHECK(mentions(w, cb::kMaxSeconds));

  c = Config{};
  c.recovery_timeout = cb::kMaxSeconds * 2;
  CHECK(requirement_for(c, "recovery_timeout") ==
        "a number of seconds from 0 to " + spelled(cb::kMaxSeconds));

  c = Config{};
  c.ramp_up = -1;
  CHECK(mentions(requirement_for(c, "ramp_up"), cb::kMaxSeconds));

  c = Config{};
  c.half_open_max_wait = 0;
  CHECK(mentions(requirement_for(c, "half_open_max_wait"), cb::kMaxSeconds));

  c = Config{};
  c.slow_call_duration = cb::kMaxSeconds * 2;
  CHECK(mentions(requirement_for(c, "slow_call_duration"), cb::kMaxSeconds));

  c = Config{};
  c.max_recovery_timeout = -1;
  CHECK(mentions(requirement_for(c, "max_recovery_timeout"), cb::kMaxSeconds));

  c = Config{};
  c.backoff_multiplier = cb::kMaxBackoffMultiplier * 2;
  CHECK(requirement_for(c, "backoff_multiplier") ==
        "a number from 1 to " + spelled(cb::kMaxBackoffMultiplier));
}

TEST_CASE("every field validate() names is in the argument table", "[config][fields]") {
  const char* fields[] = {"failure_threshold",
                          "recovery_timeout",
                          "failure_rate_threshold",
                          "window_size",
                          "minimum_calls",
                          "slow_call_duration",
                          "slow_call_rate_threshold",
                          "half_open_max_calls",
                          "half_open_max_wait",
                          "backoff_multiplier",
                          "max_recovery_timeout",
                          "jitter",
                          "ramp_up",
                          "max_concurrent",
                          "max_wait"};
  for (const char* f : fields) {
    INFO(f);
    CHECK(cb::find_config_field(f) != nullptr);
  }
  CHECK(cb::find_config_field("seed") == nullptr);
  CHECK(cb::find_config_field("rng_seed") == nullptr);  // not a user rule
  CHECK(cb::find_config_field(nullptr) == nullptr);
}

TEST_CASE("the argument table: order, kinds, defaults", "[config][fields]") {
  const char* order[] = {"failure_threshold",
                         "recovery_timeout",
                         "failure_rate_threshold",
                         "window_type",
                         "window_size",
                         "minimum_calls",
                         "slow_call_duration",
                         "slow_call_rate_threshold",
                         "half_open_max_calls",
                         "half_open_max_wait",
                         "backoff_multiplier",
                         "max_recovery_timeout",
                         "jitter",
                         "ramp_up",
                         "health_interval",
                         "max_concurrent",
                         "max_wait"};
  REQUIRE(cb::kConfigFieldCount == sizeof(order) / sizeof(order[0]));
  const Config defaults;
  for (std::size_t i = 0; i < cb::kConfigFieldCount; ++i) {
    const cb::FieldInfo& f = cb::kConfigFields[i];
    INFO(f.name);
    CHECK(std::string(f.name) == order[i]);
    CHECK(cb::find_config_field(f.name) == &f);
    switch (f.kind) {
      case FieldKind::Number:
        CHECK(f.number != nullptr);
        CHECK(f.optional == nullptr);
        CHECK(defaults.*(f.number) == f.default_value);  // one definition of each default
        break;
      case FieldKind::OptionalNumber:
      case FieldKind::Limit:
        CHECK(f.number == nullptr);
        CHECK(f.optional != nullptr);
        CHECK(std::isnan(f.default_value));
        CHECK_FALSE((defaults.*(f.optional)).has_value());
        break;
      case FieldKind::WindowType:
        CHECK(f.number == nullptr);
        CHECK(f.optional == nullptr);
        CHECK(f.default_value == 0);
        break;
    }
    const double got = cb::config_get(defaults, f);
    if (std::isnan(f.default_value)) {
      CHECK(std::isnan(got));
    } else {
      CHECK(got == f.default_value);
    }
  }
  CHECK(cb::kConfigFields[0].default_value == cb::kDefaultFailureThreshold);
  CHECK(cb::kDefaultFailureThreshold == 5);
  CHECK(cb::kDefaultRecoveryTimeout == 30);
  CHECK(cb::kDefaultHalfOpenMaxCalls == 1);
  CHECK(cb::kDefaultBackoffMultiplier == 1);
  CHECK(cb::kDefaultJitter == 0);
  CHECK(cb::kDefaultRampUp == 0);
  CHECK(cb::kDefaultHealthInterval == 5);
  CHECK(cb::kDefaultMaxWait == 0);
}

TEST_CASE("config_get / config_set round-trip every field", "[config][fields]") {
  Config c;
  double values[cb::kConfigFieldCount];
  // A valid, non-default configuration written field by field in table order.
  const double wanted[] = {3, 12, 0.5, 1,    120, 7,   2,    0.4, 2,
                           9, 2,  600, 0.25, 4,   1.5, -0.5, 1.5};
  static_assert(sizeof(wanted) / sizeof(wanted[0]) == cb::kConfigFieldCount);
  for (std::size_t i = 0; i < cb::kConfigFieldCount; ++i) {
    cb::config_set(c, cb::kConfigFields[i], wanted[i]);
  }
  CHECK_FALSE(cb::validate(c));
  CHECK(c.window_type == cb::WindowType::Time);
  CHECK(c.window_size == std::optional<double>(120));
  CHECK(c.jitter == 0.25);
  for (std::size_t i = 0; i < cb::kConfigFieldCount; ++i) {
    values[i] = cb::config_get(c, cb::kConfigFields[i]);
    CHECK(values[i] == wanted[i]);
  }
  // NaN unsets an optional; 0 is the count window.
  const cb::FieldInfo* f = cb::find_config_field("window_size");
  REQUIRE(f != nullptr);
  cb::config_set(c, *f, std::numeric_limits<double>::quiet_NaN());
  CHECK_FALSE(c.window_size.has_value());
  CHECK(std::isnan(cb::config_get(c, *f)));
  cb::config_set(c, *cb::find_config_field("window_type"), 0);
  CHECK(c.window_type == cb::WindowType::Count);
  CHECK(cb::config_get(c, *cb::find_config_field("window_type")) == 0);
}

TEST_CASE("a field's value as a message shows it", "[config][fields]") {
  const auto field = [](const char* name) { return *cb::find_config_field(name); };
  CHECK(cb::config_value_text(field("failure_threshold"), 5) == "5");
  CHECK(cb::config_value_text(field("jitter"), 0.1) == "0.1");
  CHECK(cb::config_value_text(field("window_size"), std::nan("")) == "NULL");
  CHECK(cb::config_value_text(field("window_type"), 0) == "\"count\"");
  CHECK(cb::config_value_text(field("window_type"), 1) == "\"time\"");
  // An untrusted stored value is shown as it is.
  CHECK(cb::config_value_text(field("window_type"), 7) == "7");
  CHECK(cb::config_value_text(field("jitter"), 1e300) == "1e+300");
}

TEST_CASE("window type names", "[config][fields]") {
  CHECK(std::string(cb::window_type_name(cb::WindowType::Count)) == "count");
  CHECK(std::string(cb::window_type_name(cb::WindowType::Time)) == "time");
  CHECK(cb::parse_window_type("count") == cb::WindowType::Count);
  CHECK(cb::parse_window_type("time") == cb::WindowType::Time);
  CHECK_FALSE(cb::parse_window_type("Time").has_value());
  CHECK_FALSE(cb::parse_window_type(nullptr).has_value());
}

TEST_CASE("validate() stays noexcept and its strings outlive the call",
          "[config][messages]") {
  static_assert(noexcept(cb::validate(Config{})));
  const char* requirement = nullptr;
  {
    Config c;
    c.jitter = 2;
    requirement = cb::validate(c).requirement;
  }
  CHECK(std::string(requirement) == "a number from 0 to 1");
}
