// The identity of a configuration, the one rule for every store that shares
// a breaker between processes: processes may share a breaker only when every
// argument of the table (config_fields.hpp) has the same value. This file
// says what "the same" is, and everything derived from it:
//   - the values: ConfigValues, the table's fields in table order;
//   - equality: same_config_value() (unset optionals are equal, +0 == -0);
//   - the first argument that differs from a store's, with both values'
//     text for messages (config_difference(), config_value_text());
//   - the hash a host segment keeps (config_hash());
//   - the fingerprint a fleet's store keeps (config_fingerprint(), text
//     whose string equality is this equality; read back with
//     read_config_fingerprint()).
// A store's side of a comparison (StoredConfigValues) is input from outside
// the process: it may hold anything, or nothing, where a value should be.
#ifndef CIRCUITBREAKER_CONFIG_IDENTITY_HPP
#define CIRCUITBREAKER_CONFIG_IDENTITY_HPP

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "config.hpp"
#include "config_fields.hpp"

namespace circuitbreaker {

// A configuration's values: every field of the argument table, in table
// order, as config_get() gives them (NaN: an unset optional).
using ConfigValues = std::array<double, kConfigFieldCount>;

// Another process's values as a store keeps them (a segment's header, a
// fleet's fingerprint): nullopt where the store held no number.
using StoredConfigValues = std::array<std::optional<double>, kConfigFieldCount>;

inline ConfigValues config_values(const Config& c) noexcept {
  ConfigValues v{};
  for (std::size_t i = 0; i < kConfigFieldCount; ++i) {
    v[i] = config_get(c, kConfigFields[i]);
  }
  return v;
}

// The one equality of two values of a field: unset (NaN, any NaN) equals
// unset, +0 equals -0, else ==.
inline bool same_config_value(double a, double b) noexcept {
  return (std::isnan(a) && std::isnan(b)) || a == b;
}

// The index (in kConfigFields) of the first field whose value differs
// between `given` (this process's) and `stored` (a store's), or -1 when
// none does. A field the store held no number for differs.
inline int first_config_difference(const ConfigValues& given,
                                   const StoredConfigValues& stored) noexcept {
  for (std::size_t i = 0; i < kConfigFieldCount; ++i) {
    if (!stored[i] || !same_config_value(given[i], *stored[i])) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

// A field's value as a user writes it, for messages: NULL for an unset
// optional, "count" or "time" for window_type, else the number. A value read
// from a shared store (untrusted) is shown as it is: a window_type other
// than 0 or 1 is shown as a number.
inline std::string config_value_text(const FieldInfo& f, double v) {
  if (std::isnan(v)) return "NULL";
  if (f.kind == FieldKind::WindowType && (v == 0 || v == 1)) {
    return v == 1 ? "\"time\"" : "\"count\"";
  }
  char buf[48];
  if (f.kind == FieldKind::Limit && v < 0 && v >= -1) {
    std::snprintf(buf, sizeof buf, "share(%.15g)", -v);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

// The text of a value a store held, or "unknown" where it held none.
inline std::string config_value_text(const FieldInfo& f, const std::optional<double>& v) {
  return v ? config_value_text(f, *v) : "unknown";
}

// Why a store refused this process's configuration, for the message.
struct ConfigDifference {
  int field = -1;  // kConfigFields index of the first argument that differs; -1: none
  std::string given, stored;  // its value here and in the store (config_value_text())
};

inline ConfigDifference config_difference(const ConfigValues& given,
                                          const StoredConfigValues& stored) {
  ConfigDifference d;
  d.field = first_config_difference(given, stored);
  if (d.field >= 0) {
    const auto i = static_cast<std::size_t>(d.field);
    d.given = config_value_text(kConfigFields[i], given[i]);
    d.stored = config_value_text(kConfigFields[i], stored[i]);
  }
  return d;
}

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

// The hash of a configuration's values: every field by name and value; an
// unset optional differs from every value (a "set" byte precedes the value),
// +0 and -0 are one value: equal values by same_config_value() hash alike.
// rng_seed is not a rule (not in the table) and not hashed: processes
// sharing a segment may seed their jitter as they like. Stable across
// processes and builds of the same table.
inline std::uint64_t config_hash(const ConfigValues& v) noexcept {
  Fnv1a h;
  h.str("circuitbreaker config");
  for (std::size_t i = 0; i < kConfigFieldCount; ++i) {
    const FieldInfo& f = kConfigFields[i];
    h.str(f.name);
    h.byte(static_cast<std::uint8_t>(f.kind));
    if ((f.kind == FieldKind::OptionalNumber || f.kind == FieldKind::Limit) &&
        std::isnan(v[i])) {
      h.byte(0);
    } else {
      h.byte(1);
      h.f64(v[i]);
    }
  }
  return h.value();
}

inline std::uint64_t config_hash(const Config& c) noexcept {
  return config_hash(config_values(c));
}

// The fingerprint of a configuration's values: each value as "%.17g" (exact
// for a double), comma-separated in table order, -0 written as 0 and every
// NaN as "nan", so that two fingerprints are equal as strings exactly when
// the values are equal by same_config_value(). A fleet's store compares
// fingerprints as strings (fleet/script.hpp), and keeps its creator's.
inline std::string config_fingerprint(const ConfigValues& v) {
  std::string out;
  char buf[32];
  for (std::size_t i = 0; i < kConfigFieldCount; ++i) {
    const double x = std::isnan(v[i]) ? std::numeric_limits<double>::quiet_NaN()
                     : v[i] == 0      ? 0.0
                                      : v[i];
    std::snprintf(buf, sizeof buf, "%.17g", x);
    if (i > 0) out += ',';
    out += buf;
  }
  return out;
}

inline std::string config_fingerprint(const Config& c) {
  return config_fingerprint(config_values(c));
}

// The values of a fingerprint read from a store (untrusted): a field is
// nullopt where the text holds no number (missing, empty, longer than 32
// characters, or not all of it a number); text after the last field is
// ignored.
inline StoredConfigValues read_config_fingerprint(std::string_view fp) {
  StoredConfigValues out{};
  std::size_t at = 0;
  for (std::size_t i = 0; i < kConfigFieldCount && at <= fp.size(); ++i) {
    const std::size_t comma = fp.find(',', at);
    const std::string_view item = fp.substr(
        at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
    if (!item.empty() && item.size() <= 32) {
      const std::string text(item);
      char* end = nullptr;
      const double x = std::strtod(text.c_str(), &end);
      if (end != text.c_str() && *end == '\0') out[i] = x;
    }
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  return out;
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_CONFIG_IDENTITY_HPP
