// Basic vocabulary of the circuit-breaker core: time, states, outcomes.
//
// Header-only, C++17, no R headers: the core compiles and is tested on its own
// (tests/cpp) and other packages may use it through LinkingTo.
#ifndef CIRCUITBREAKER_TYPES_HPP
#define CIRCUITBREAKER_TYPES_HPP

#include <cstdint>
#include <limits>

namespace circuitbreaker {

// Time is a count of nanoseconds on a monotonic clock. Integers keep the
// seed's "more than recovery_timeout" comparison exact: with a manual clock,
// advancing exactly 30 s past a 30 s timeout is not yet "more than".
using Nanos = std::int64_t;

inline constexpr Nanos kNanosPerSecond = 1000000000;

// "Never": an open duration or deadline that does not expire.
inline constexpr Nanos kNever = std::numeric_limits<Nanos>::max();

// The longest duration a configuration may ask for (about 31.7 years). With
// clock readings below kMaxClockSeconds, a reading plus any duration stays far
// from overflow.
inline constexpr double kMaxSeconds = 1e9;
inline constexpr double kMaxClockSeconds = 4e9;

enum class State : std::uint8_t {
  Closed = 0,
  Open = 1,
  HalfOpen = 2,
  ForcedOpen = 3,
  Disabled = 4
};
inline constexpr int kStateCount = 5;

inline const char* state_name(State s) noexcept {
  switch (s) {
    case State::Closed: return "CLOSED";
    case State::Open: return "OPEN";
    case State::HalfOpen: return "HALF_OPEN";
    case State::ForcedOpen: return "FORCED_OPEN";
    case State::Disabled: return "DISABLED";
  }
  return "UNKNOWN";
}

enum class Outcome : std::uint8_t { Success = 0, Failure = 1, Ignored = 2 };

// Why acquire() said no. Only informational: every rejection is handled the
// same way by callers (fallback or a circuit_breaker_open condition).
enum class Rejection : std::uint8_t {
  None = 0,
  Open = 1,         // OPEN and the open duration has not passed yet
  HalfOpenFull = 2, // HALF_OPEN and every probe slot is taken
  ForcedOpen = 3,   // forced open by hand
  RampUp = 4        // recently closed and this call is outside the admitted share
};

inline const char* rejection_name(Rejection r) noexcept {
  switch (r) {
    case Rejection::None: return "none";
    case Rejection::Open: return "open";
    case Rejection::HalfOpenFull: return "half_open_full";
    case Rejection::ForcedOpen: return "forced_open";
    case Rejection::RampUp: return "ramp_up";
  }
  return "unknown";
}

// Seconds (a user-facing double) to nanoseconds, saturating instead of
// overflowing. Callers validate ranges first; saturation is a safety net.
inline Nanos seconds_to_nanos(double seconds) noexcept {
  if (!(seconds > 0)) return 0;  // also maps NaN to 0
  const double ns = seconds * 1e9;
  if (ns >= 9.2e18) return kNever;
  return static_cast<Nanos>(ns + 0.5);
}

inline double nanos_to_seconds(Nanos ns) noexcept {
  if (ns == kNever) return std::numeric_limits<double>::infinity();
  return static_cast<double>(ns) / 1e9;
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_TYPES_HPP
