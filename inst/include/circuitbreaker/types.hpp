// Basic vocabulary of the circuit-breaker core: time, states, outcomes.
//
// Header-only, C++17, no R headers: the core compiles and is tested on its own
// (tests/cpp) and other packages may use it through LinkingTo.
#ifndef CIRCUITBREAKER_TYPES_HPP
#define CIRCUITBREAKER_TYPES_HPP

#include <cstdint>
#include <limits>

// Limits that validation messages quote. Each is defined once, here, as a
// macro, so that a message ("... from 0 to 1e9") is built from the very token
// the constant below is made of: change the number and the message follows.
#define CIRCUITBREAKER_MAX_SECONDS 1e9
#define CIRCUITBREAKER_MAX_CLOCK_SECONDS 4e9
#define CIRCUITBREAKER_STRINGIFY_(x) #x
#define CIRCUITBREAKER_STRINGIFY(x) CIRCUITBREAKER_STRINGIFY_(x)

namespace circuitbreaker {

// Time is a count of nanoseconds on a monotonic clock. Integers keep the
// "more than recovery_timeout" comparison of the R6 `CircuitBreaker` class
// (from the article this package follows) exact: with a manual clock,
// advancing exactly 30 s past a 30 s timeout is not yet "more than".
using Nanos = std::int64_t;

inline constexpr Nanos kNanosPerSecond = 1000000000;
inline constexpr Nanos kNanosPerMs = 1000000;
inline constexpr double kNanosPerSecondD = 1e9;

// "Never": an open duration or deadline that does not expire.
inline constexpr Nanos kNever = std::numeric_limits<Nanos>::max();

// A wait that is not known: a half-open breaker whose probe slots are all
// taken by probes without a deadline cannot say when a call may be admitted.
inline constexpr Nanos kUnknownWait = -1;

// The longest duration a configuration may ask for (about 31.7 years). With
// clock readings below kMaxClockSeconds (about 127 years), a reading plus any
// duration stays far from overflow.
inline constexpr double kMaxSeconds = CIRCUITBREAKER_MAX_SECONDS;
inline constexpr double kMaxClockSeconds = CIRCUITBREAKER_MAX_CLOCK_SECONDS;

// The largest clock reading (kMaxClockSeconds) and the longest duration
// (kMaxSeconds) in nanoseconds: the bounds that a state block read from
// shared memory is checked against (state.hpp).
inline constexpr Nanos kMaxClockNanos =
    static_cast<Nanos>(CIRCUITBREAKER_MAX_CLOCK_SECONDS) * kNanosPerSecond;
inline constexpr Nanos kMaxDurationNanos =
    static_cast<Nanos>(CIRCUITBREAKER_MAX_SECONDS) * kNanosPerSecond;

// seconds_to_nanos() saturates to kNever from here: a double just below
// INT64_MAX (9.22e18) whose conversion cannot overflow.
inline constexpr double kMaxNanosAsDouble = 9.2e18;

enum class State : std::uint8_t {
  Closed = 0,
  Open = 1,
  HalfOpen = 2,
  ForcedOpen = 3,
  Disabled = 4
};
inline constexpr int kStateCount = 5;

// Whether `s` is one of the State values (a byte read from shared memory
// may hold any).
inline constexpr bool state_valid(State s) noexcept {
  return static_cast<int>(s) < kStateCount;
}

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
inline constexpr int kOutcomeCount = 3;

inline const char* outcome_name(Outcome o) noexcept {
  switch (o) {
    case Outcome::Success: return "success";
    case Outcome::Failure: return "failure";
    case Outcome::Ignored: return "ignored";
  }
  return "unknown";
}

// Why acquire() said no. Every rejection is handled the same way by callers
// (the fallback, or a condition): circuit_breaker_full for Full,
// circuit_breaker_open for the others.
enum class Rejection : std::uint8_t {
  None = 0,
  Open = 1,          // OPEN and the open duration has not passed yet
  HalfOpenFull = 2,  // HALF_OPEN and every probe slot is taken
  ForcedOpen = 3,    // forced open by hand
  RampUp = 4,        // recently closed and this call is outside the admitted share
  Full = 5           // the bulkhead (max_concurrent) has no free permit: not a
                     // failure of the dependency, it moves no breaker state
};
inline constexpr int kRejectionCount = 6;

inline const char* rejection_name(Rejection r) noexcept {
  switch (r) {
    case Rejection::None: return "none";
    case Rejection::Open: return "open";
    case Rejection::HalfOpenFull: return "half_open_full";
    case Rejection::ForcedOpen: return "forced_open";
    case Rejection::RampUp: return "ramp_up";
    case Rejection::Full: return "full";
  }
  return "unknown";
}

// Seconds (a user-facing double) to nanoseconds, saturating instead of
// overflowing. Callers validate ranges first; saturation is a safety net.
inline Nanos seconds_to_nanos(double seconds) noexcept {
  if (!(seconds > 0)) return 0;  // also maps NaN to 0
  const double ns = seconds * kNanosPerSecondD;
  if (ns >= kMaxNanosAsDouble) return kNever;
  return static_cast<Nanos>(ns + 0.5);
}

inline double nanos_to_seconds(Nanos ns) noexcept {
  if (ns == kNever) return std::numeric_limits<double>::infinity();
  return static_cast<double>(ns) / kNanosPerSecondD;
}

// A count given as a double (by a binding) as a 64-bit count: 0 for NaN or
// anything below 0, saturating near 2^64.
inline constexpr double kMaxCountAsDouble = 1.8e19;
inline std::uint64_t count_from_double(double x) noexcept {
  if (!(x > 0)) return 0;
  if (x >= kMaxCountAsDouble) return static_cast<std::uint64_t>(kMaxCountAsDouble);
  return static_cast<std::uint64_t>(x);
}

// a + b for a >= 0, b >= 0, saturating at kNever.
inline Nanos saturating_add(Nanos a, Nanos b) noexcept {
  return b >= kNever - a ? kNever : a + b;
}

// a + b for counts, saturating at 2^64 - 1.
inline std::uint64_t saturating_count_add(std::uint64_t a, std::uint64_t b) noexcept {
  return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_TYPES_HPP
