// What one process and the fleet's store say to each other about one breaker
// (FleetReport, FleetReply) and the manual commands a process asks of the
// whole fleet. The configuration travels as its fingerprint
// (config_identity.hpp's config_fingerprint()). The member
// (member.hpp) builds reports and applies replies; the script (script.hpp)
// is the store's side.
#ifndef CIRCUITBREAKER_FLEET_PROTOCOL_HPP
#define CIRCUITBREAKER_FLEET_PROTOCOL_HPP

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "../config.hpp"
#include "../rules.hpp"
#include "../types.hpp"
#include "script.hpp"

namespace circuitbreaker {

// Manual control a process asks of the whole fleet.
enum class FleetCommand : std::uint8_t {
  None = 0,
  ForceOpen = 1,
  Disable = 2,
  Reset = 3,
  // A passing health check (health.hpp): close, only if the fleet is still
  // OPEN in the generation the reporter knows.
  HealthClose = 4
};

inline std::int64_t nanos_to_ms(Nanos n) noexcept {
  return n >= kNever ? (std::int64_t{1} << 53) : static_cast<std::int64_t>(n / 1000000);
}
// Saturating: a time from Redis (a reply is untrusted input) may be any
// 64-bit number, and nanos_to_ms(kNever) comes back as 2^53 ms.
inline Nanos ms_to_nanos(std::int64_t ms) noexcept {
  constexpr std::int64_t kLimit = kNever / 1000000;
  if (ms >= kLimit) return kNever;
  if (ms <= -kLimit) return -kNever;
  return static_cast<Nanos>(ms) * 1000000;
}

// Little-endian 64-bit integers and doubles, as the scripts' struct
// formats read them (fleet/script.hpp).
inline void fleet_pack_int(std::string& out, std::int64_t v) {
  const auto u = static_cast<std::uint64_t>(v);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
}
inline void fleet_pack_double(std::string& out, double v) {
  static_assert(sizeof(double) == 8 && std::numeric_limits<double>::is_iec559,
                "the scripts read IEEE 754 doubles");
  std::uint64_t u = 0;
  std::memcpy(&u, &v, sizeof u);
  fleet_pack_int(out, static_cast<std::int64_t>(u));
}
// A count as the scripts keep it: at most 2^53 (Lua's numbers are doubles).
inline std::int64_t fleet_count(std::uint64_t v) noexcept {
  constexpr std::uint64_t kMax = std::uint64_t{1} << 53;
  return static_cast<std::int64_t>(v > kMax ? kMax : v);
}

// The rules the script applies, packed (fleet/script.hpp's report format,
// after the report's own values): failure_threshold (0 off),
// recovery_timeout (ms), the failure and slow rate thresholds (-1 off),
// minimum_calls, the window type (0 count, 1 time), the count window's size,
// the time window's length (ms), half_open_max_calls, backoff_multiplier,
// max_recovery_timeout (ms).
inline std::string fleet_rules(const Settings& s) {
  const bool time = s.window_type == WindowType::Time;
  std::string out;
  out.reserve(11 * 8);
  fleet_pack_double(out, static_cast<double>(s.failure_threshold));
  fleet_pack_int(out, nanos_to_ms(s.recovery_timeout));
  fleet_pack_double(out, s.rate_rule ? s.failure_rate_threshold : -1.0);
  fleet_pack_double(out, s.slow_rule ? s.slow_call_rate_threshold : -1.0);
  fleet_pack_double(out, static_cast<double>(s.minimum_calls));
  fleet_pack_int(out, time ? 1 : 0);
  fleet_pack_int(out, s.window_calls);
  fleet_pack_int(out, time ? nanos_to_ms(s.window_bucket * kTimeWindowBuckets) : 0);
  fleet_pack_int(out, s.half_open_max_calls);
  fleet_pack_double(out, s.backoff_multiplier);
  fleet_pack_int(out, nanos_to_ms(s.max_recovery_timeout));
  return out;
}

// What one process tells the fleet about one breaker in one sync.
struct FleetReport {
  std::string id;                      // "" carries no counts; else applied once
  std::uint64_t known_generation = 0;  // 0: never heard from the fleet
  Counters delta;
  std::uint64_t consecutive_failures = 0;
  State state = State::Closed;
  bool tripped = false;  // opened here, on this process's counts
  std::int64_t open_elapsed_ms = 0, open_ms = 0;
  std::uint64_t consecutive_opens = 0;
  FleetCommand command = FleetCommand::None;
  std::string probes;  // "slot:token:generation:s|f|i:open_ms;" per settled probe
  double jitter_factor = 1;
  // Not sent: the local generation and failure run at build(), which
  // apply() compares against (the local copy may have moved since).
  std::uint64_t built_generation = 0, built_failures = 0;

  // The script's values for this breaker (fleet/script.hpp, SYNC): the
  // process's part of the id, the packed report (its serial, its values,
  // then `rules`, fleet_rules()), the probes, the configuration's
  // fingerprint. An id is "<process>.<serial>" (FleetMember::build()).
  void append_args(std::vector<std::string>& out, const std::string& fingerprint,
                   const std::string& rules) const {
    const std::size_t dot = id.rfind('.');
    std::int64_t serial = 0;
    if (dot != std::string::npos) {
      serial =
          static_cast<std::int64_t>(std::strtoull(id.c_str() + dot + 1, nullptr, 10));
    }
    out.push_back(dot == std::string::npos || serial <= 0 ? std::string()
                                                          : id.substr(0, dot));
    std::string p;
    p.reserve(15 * 8 + rules.size());
    fleet_pack_int(p, serial);
    fleet_pack_int(p, fleet_count(known_generation));
    fleet_pack_int(p, fleet_count(delta.calls));
    fleet_pack_int(p, fleet_count(delta.failures));
    fleet_pack_int(p, fleet_count(delta.slow));
    fleet_pack_int(p, fleet_count(delta.successes));
    fleet_pack_int(p, fleet_count(delta.rejected));
    fleet_pack_int(p, fleet_count(consecutive_failures));
    fleet_pack_int(p, static_cast<int>(state));
    fleet_pack_int(p, tripped ? 1 : 0);
    fleet_pack_int(p, open_elapsed_ms);
    fleet_pack_int(p, open_ms);
    fleet_pack_int(p, fleet_count(consecutive_opens));
    fleet_pack_int(p, static_cast<int>(command));
    fleet_pack_double(p, jitter_factor);
    p += rules;
    out.push_back(std::move(p));
    out.push_back(probes);
    out.push_back(fingerprint);
  }
  static constexpr int kArgs = 4;
  // The packed report: 15 values, then fleet_rules()'s 11.
  static_assert(kFleetReportBytes == (15 + 11) * 8, "fleet/script.hpp's report format");
};

// What the script says back about one breaker: "k" and eight packed
// numbers (fleet/script.hpp's reply format), or "cfg,<the fleet's cfg>".
struct FleetReply {
  static constexpr int kFields = 1;
  bool config_differs = false;
  std::string fleet_config;  // when it differs
  std::uint64_t generation = 0;
  State state = State::Closed;
  std::int64_t open_elapsed_ms = 0, open_ms = 0;
  std::uint64_t consecutive_opens = 0, consecutive_failures = 0;
  std::uint64_t fleet_calls = 0, fleet_failures = 0;

  // From the script's reply (kFields strings); false when it is not what
  // the script sends.
  bool parse(const std::string* v) { return parse_packed(v[0]); }

  bool parse_packed(const std::string& reply) {
    if (reply.compare(0, 4, "cfg,") == 0) {
      config_differs = true;
      fleet_config = reply.substr(4);
      return true;
    }
    if (reply.size() != static_cast<std::size_t>(kFleetReplyBytes) || reply[0] != 'k') {
      return false;
    }
    std::int64_t x[8];
    for (int i = 0; i < 8; ++i) {
      std::uint64_t u = 0;
      for (int b = 7; b >= 0; --b) {
        u = (u << 8) |
            static_cast<unsigned char>(reply[static_cast<std::size_t>(1 + 8 * i + b)]);
      }
      x[i] = static_cast<std::int64_t>(u);
    }
    return take(x);
  }

  // From "ok," and eight numbers as text (the lease script's state reply).
  bool parse_text(const std::string& text) {
    if (text.compare(0, 3, "ok,") != 0) return false;
    std::int64_t x[8];
    const char* p = text.c_str() + 3;
    for (int i = 0; i < 8; ++i) {
      char* end = nullptr;
      errno = 0;
      x[i] = std::strtoll(p, &end, 10);
      if (end == p || errno != 0 || *end != (i < 7 ? ',' : '\0')) return false;
      p = end + (i < 7 ? 1 : 0);
    }
    return take(x);
  }

 private:
  // g, s, open elapsed, od, o, cf, tc, tf; false when the state is none.
  bool take(const std::int64_t (&x)[8]) {
    if (x[1] < 0 || x[1] >= kStateCount) return false;
    generation = static_cast<std::uint64_t>(x[0] < 0 ? 0 : x[0]);
    state = static_cast<State>(x[1]);
    open_elapsed_ms = x[2];
    open_ms = x[3];
    consecutive_opens = static_cast<std::uint64_t>(x[4] < 0 ? 0 : x[4]);
    consecutive_failures = static_cast<std::uint64_t>(x[5] < 0 ? 0 : x[5]);
    fleet_calls = static_cast<std::uint64_t>(x[6] < 0 ? 0 : x[6]);
    fleet_failures = static_cast<std::uint64_t>(x[7] < 0 ? 0 : x[7]);
    return true;
  }
};

inline Counters counters_minus(const Counters& a, const Counters& b) noexcept {
  auto d = [](std::uint64_t x, std::uint64_t y) { return x >= y ? x - y : 0; };
  Counters c;
  c.calls = d(a.calls, b.calls);
  c.successes = d(a.successes, b.successes);
  c.failures = d(a.failures, b.failures);
  c.slow = d(a.slow, b.slow);
  c.rejected = d(a.rejected, b.rejected);
  return c;
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_FLEET_PROTOCOL_HPP
