// The identity of a configuration, one rule for every store that shares a
// breaker between processes: processes may share a breaker only when every
// argument of the table (config_fields.hpp) has the same value.
#ifndef CIRCUITBREAKER_CONFIG_IDENTITY_HPP
#define CIRCUITBREAKER_CONFIG_IDENTITY_HPP

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "config.hpp"
#include "config_fields.hpp"

namespace circuitbreaker {

// 64-bit FNV-1a. Multi-byte values are fed least significant byte first, so a
// hash does not depend on how a value sits in memory.
class Fnv1a {
 public:
  constexpr void byte(std::uint8_t b) noexcept { h_ = (h_ ^ b) * 1099511628211ull; }
  constexpr void u64(std::uint64_t v) noexcept {
    for (int i = 0; i < 8; ++i) byte(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  constexpr void str(const char* s) noexcept {
    while (*s != '\0') byte(static_cast<std::uint8_t>(*s++));
    byte(0);
  }
  // A double by value: -0 as +0, every NaN as one NaN.
  void f64(double v) noexcept {
    if (v == 0) v = 0.0;
    if (std::isnan(v)) v = std::numeric_limits<double>::quiet_NaN();
    std::uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    u64(bits);
  }
  constexpr std::uint64_t value() const noexcept { return h_; }

 private:
  std::uint64_t h_ = 14695981039346656037ull;
};

// The identity of a configuration: every field of the argument table
// (config_fields.hpp) by name and value; an unset optional differs from every
// value (a "set" byte precedes the value), +0 and -0 are one value. rng_seed
// is not a rule (not in the table) and not hashed: processes sharing a
// segment may seed their jitter as they like. Stable across processes and
// builds of the same table.
inline std::uint64_t config_hash(const Config& c) noexcept {
  Fnv1a h;
  h.str("circuitbreaker config");
  for (const FieldInfo& f : kConfigFields) {
    h.str(f.name);
    h.byte(static_cast<std::uint8_t>(f.kind));
    const double v = config_get(c, f);
    if (f.kind == FieldKind::OptionalNumber && std::isnan(v)) {
      h.byte(0);
    } else {
      h.byte(1);
      h.f64(v);
    }
  }
  return h.value();
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_CONFIG_IDENTITY_HPP
