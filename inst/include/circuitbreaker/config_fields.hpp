// The argument table: one entry per user-facing Config argument, in the
// order R shows them. Bindings iterate it to convert between their own lists
// and Config, to show defaults, and to store a configuration compactly (a
// vector of doubles in table order, see config_get / config_set). What makes
// two configurations the same (and a value's text in messages) is
// config_identity.hpp's.
#ifndef CIRCUITBREAKER_CONFIG_FIELDS_HPP
#define CIRCUITBREAKER_CONFIG_FIELDS_HPP

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <optional>

#include "config.hpp"

namespace circuitbreaker {

enum class FieldKind : std::uint8_t {
  Number = 0,          // a double with a default (Config::*number)
  OptionalNumber = 1,  // std::optional<double>, empty = unset (Config::*optional)
  WindowType = 2,      // the WindowType enum; as a double 0 = count, 1 = time
  Limit = 3            // an OptionalNumber that is a count (>= 1) or, stored
                       // as -p, a share p (config.hpp's max_concurrent)
};

struct FieldInfo {
  const char* name;
  FieldKind kind;
  double Config::*number;                   // Number fields; nullptr otherwise
  std::optional<double> Config::*optional;  // OptionalNumber and Limit fields
  double default_value;                     // NaN: an optional unset by default
};

namespace detail {
inline constexpr double kUnset = std::numeric_limits<double>::quiet_NaN();
constexpr FieldInfo number_field(const char* name, double Config::*m, double d) {
  return {name, FieldKind::Number, m, nullptr, d};
}
constexpr FieldInfo optional_field(const char* name, std::optional<double> Config::*m) {
  return {name, FieldKind::OptionalNumber, nullptr, m, kUnset};
}
}  // namespace detail

inline constexpr FieldInfo kConfigFields[] = {
    detail::number_field("failure_threshold", &Config::failure_threshold,
                         kDefaultFailureThreshold),
    detail::number_field("recovery_timeout", &Config::recovery_timeout,
                         kDefaultRecoveryTimeout),
    detail::optional_field("failure_rate_threshold", &Config::failure_rate_threshold),
    {"window_type", FieldKind::WindowType, nullptr, nullptr,
     static_cast<double>(WindowType::Count)},
    detail::optional_field("window_size", &Config::window_size),
    detail::optional_field("minimum_calls", &Config::minimum_calls),
    detail::optional_field("slow_call_duration", &Config::slow_call_duration),
    detail::optional_field("slow_call_rate_threshold", &Config::slow_call_rate_threshold),
    detail::number_field("half_open_max_calls", &Config::half_open_max_calls,
                         kDefaultHalfOpenMaxCalls),
    detail::optional_field("half_open_max_wait", &Config::half_open_max_wait),
    detail::number_field("backoff_multiplier", &Config::backoff_multiplier,
                         kDefaultBackoffMultiplier),
    detail::optional_field("max_recovery_timeout", &Config::max_recovery_timeout),
    detail::number_field("jitter", &Config::jitter, kDefaultJitter),
    detail::number_field("ramp_up", &Config::ramp_up, kDefaultRampUp),
    detail::number_field("health_interval", &Config::health_interval,
                         kDefaultHealthInterval),
    {"max_concurrent", FieldKind::Limit, nullptr, &Config::max_concurrent,
     detail::kUnset},
    detail::number_field("max_wait", &Config::max_wait, kDefaultMaxWait),
};

inline constexpr std::size_t kConfigFieldCount =
    sizeof(kConfigFields) / sizeof(kConfigFields[0]);
static_assert(kConfigFieldCount == 17, "one entry per user-facing Config argument");

// The entry named `name`, or nullptr.
inline const FieldInfo* find_config_field(const char* name) noexcept {
  if (name == nullptr) return nullptr;
  for (const FieldInfo& f : kConfigFields) {
    if (std::strcmp(f.name, name) == 0) return &f;
  }
  return nullptr;
}

// A field's value as a double: NaN for an unset optional, 0 / 1 for
// window_type count / time.
inline double config_get(const Config& c, const FieldInfo& f) noexcept {
  switch (f.kind) {
    case FieldKind::Number: return c.*(f.number);
    case FieldKind::OptionalNumber:
    case FieldKind::Limit: return (c.*(f.optional)).value_or(detail::kUnset);
    case FieldKind::WindowType: return static_cast<double>(c.window_type);
  }
  return detail::kUnset;
}

// Sets a field from a double: NaN unsets an optional; for window_type, 1 is
// time and anything else count. Nothing is validated: call validate() after.
inline void config_set(Config& c, const FieldInfo& f, double v) noexcept {
  switch (f.kind) {
    case FieldKind::Number: c.*(f.number) = v; break;
    case FieldKind::OptionalNumber:
    case FieldKind::Limit:
      if (std::isnan(v)) {
        (c.*(f.optional)).reset();
      } else {
        c.*(f.optional) = v;
      }
      break;
    case FieldKind::WindowType:
      c.window_type = v == static_cast<double>(WindowType::Time) ? WindowType::Time
                                                                 : WindowType::Count;
      break;
  }
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_CONFIG_FIELDS_HPP
