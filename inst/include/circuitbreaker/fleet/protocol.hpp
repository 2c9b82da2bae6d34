// What one process and the fleet's store say to each other about one breaker
// (FleetReport, FleetReply) and the manual commands a process asks of the
// whole fleet. The configuration travels as its fingerprint
// (config_identity.hpp's config_fingerprint()). The member
// (member.hpp) builds reports and applies replies; the script (script.hpp)
// is the store's side.
#ifndef CIRCUITBREAKER_FLEET_PROTOCOL_HPP
#define CIRCUITBREAKER_FLEET_PROTOCOL_HPP

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../config.hpp"
#include "../rules.hpp"
#include "../types.hpp"

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
inline Nanos ms_to_nanos(std::int64_t ms) noexcept {
  return static_cast<Nanos>(ms) * 1000000;
}

// The rules the script applies (fleet/script.hpp's hash fields ft ... mx).
inline std::string fleet_rules(const Settings& s) {
  char buf[256];
  const bool time = s.window_type == WindowType::Time;
  std::snprintf(
      buf, sizeof buf, "%llu,%lld,%.17g,%.17g,%llu,%d,%u,%lld,%u,%.17g,%lld",
      static_cast<unsigned long long>(s.failure_threshold),
      static_cast<long long>(nanos_to_ms(s.recovery_timeout)),
      s.rate_rule ? s.failure_rate_threshold : -1.0,
      s.slow_rule ? s.slow_call_rate_threshold : -1.0,
      static_cast<unsigned long long>(s.minimum_calls), time ? 1 : 0, s.window_calls,
      static_cast<long long>(time ? nanos_to_ms(s.window_bucket * kTimeWindowBuckets)
                                  : 0),
      s.half_open_max_calls, s.backoff_multiplier,
      static_cast<long long>(nanos_to_ms(s.max_recovery_timeout)));
  return buf;
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

  // The script's values for this breaker (fleet/script.hpp, SYNC), after the
  // configuration's fingerprint and rules.
  void append_args(std::vector<std::string>& out, const std::string& fingerprint,
                   const std::string& rules) const {
    auto u = [](std::uint64_t v) { return std::to_string(v); };
    out.push_back(id);
    out.push_back(u(known_generation));
    out.push_back(u(delta.calls));
    out.push_back(u(delta.failures));
    out.push_back(u(delta.slow));
    out.push_back(u(delta.successes));
    out.push_back(u(delta.rejected));
    out.push_back(u(consecutive_failures));
    out.push_back(std::to_string(static_cast<int>(state)));
    out.push_back(tripped ? "1" : "0");
    out.push_back(std::to_string(open_elapsed_ms));
    out.push_back(std::to_string(open_ms));
    out.push_back(u(consecutive_opens));
    out.push_back(std::to_string(static_cast<int>(command)));
    out.push_back(probes);
    out.push_back(fingerprint);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6f", jitter_factor);
    out.push_back(buf);
    out.push_back(rules);
  }
  static constexpr int kArgs = 18;
};

// What the script says back about one breaker.
struct FleetReply {
  static constexpr int kFields = 10;
  bool config_differs = false;
  std::string fleet_config;  // when it differs
  std::uint64_t generation = 0;
  State state = State::Closed;
  std::int64_t open_elapsed_ms = 0, open_ms = 0;
  std::uint64_t consecutive_opens = 0, consecutive_failures = 0;
  std::uint64_t fleet_calls = 0, fleet_failures = 0;

  // From the script's ten strings; false when they are not what it sends.
  bool parse(const std::string* v) {
    auto num = [](const std::string& s, std::int64_t& out) {
      char* end = nullptr;
      out = std::strtoll(s.c_str(), &end, 10);
      return !s.empty() && end != nullptr && *end == '\0';
    };
    if (v[0] == "cfg") {
      config_differs = true;
      fleet_config = v[9];
      return true;
    }
    if (v[0] != "ok") return false;
    std::int64_t x[8];
    for (int i = 0; i < 8; ++i) {
      if (!num(v[i + 1], x[i])) return false;
    }
    if (x[1] < 0 || x[1] >= kStateCount) return false;
    generation = static_cast<std::uint64_t>(x[0]);
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
