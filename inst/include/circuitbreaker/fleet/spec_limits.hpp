// The limits of a fleet store's settings (breaker_store_redis()'s seed
// URLs, prefix, sync interval and timeout), named once, as config_fields.hpp
// names a breaker's arguments, and the check of a specification against
// them. R checks a user's arguments with it; the binding checks again every
// specification R hands it (an R object is untrusted input). Pure: no
// hiredis, so a build without it still checks arguments the same way.
#ifndef CIRCUITBREAKER_FLEET_SPEC_LIMITS_HPP
#define CIRCUITBREAKER_FLEET_SPEC_LIMITS_HPP

#include <cmath>
#include <cstddef>
#include <string_view>

namespace circuitbreaker {

struct FleetSpecLimit {
  const char* field;  // the argument's name
  double min, max;    // its range (a count, bytes, seconds)
  const char* must;   // what it must be, for messages
};

enum class FleetSpecField { Url = 0, Prefix = 1, SyncInterval = 2, Timeout = 3 };

// In the order they are checked.
inline constexpr FleetSpecLimit kFleetSpecLimits[] = {
    {"url", 1, 100,
     "a redis:// URL, or the URLs of 1 to 100 seed nodes of one Redis Cluster"},
    {"prefix", 1, 100, "at most 100 letters, digits, `_`, `-`, `.` and `:`"},
    {"sync_interval", 0.01, 60, "a number of seconds from 0.01 to 60"},
    {"timeout", 0.001, 60, "a number of seconds from 0.001 to 60"},
};
inline constexpr int kFleetSpecFieldCount =
    static_cast<int>(sizeof kFleetSpecLimits / sizeof kFleetSpecLimits[0]);

inline constexpr const FleetSpecLimit& fleet_spec_limit(FleetSpecField f) noexcept {
  return kFleetSpecLimits[static_cast<int>(f)];
}

// A prefix is part of every key, of the channel and of the key pattern a
// least-privilege ACL names (`~cb2:{<prefix>:*`): letters, digits and `_-.:`
// only, so that no character of it means anything in that pattern (no `*`,
// `?`, `[`, spaces).
inline bool fleet_prefix_valid(std::string_view prefix) noexcept {
  const FleetSpecLimit& l = fleet_spec_limit(FleetSpecField::Prefix);
  if (prefix.size() < l.min || prefix.size() > l.max) return false;
  for (const char c : prefix) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' ||
                    c == ':';
    if (!ok) return false;
  }
  return true;
}

inline bool within_limit(const FleetSpecLimit& l, double x) noexcept {
  return std::isfinite(x) && x >= l.min && x <= l.max;
}

// nullptr, or the first limit that `urls` (how many URLs: one server, or a
// cluster's seeds), `prefix`, `sync_interval` and `timeout` (seconds) break.
inline const FleetSpecLimit* fleet_spec_problem(std::size_t urls, std::string_view prefix,
                                                double sync_interval,
                                                double timeout) noexcept {
  using F = FleetSpecField;
  if (!within_limit(fleet_spec_limit(F::Url), static_cast<double>(urls))) {
    return &fleet_spec_limit(F::Url);
  }
  if (!fleet_prefix_valid(prefix)) return &fleet_spec_limit(F::Prefix);
  if (!within_limit(fleet_spec_limit(F::SyncInterval), sync_interval)) {
    return &fleet_spec_limit(F::SyncInterval);
  }
  if (!within_limit(fleet_spec_limit(F::Timeout), timeout))
    return &fleet_spec_limit(F::Timeout);
  return nullptr;
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_FLEET_SPEC_LIMITS_HPP
