// Configuration of one breaker: what the user asked for (Config, in the
// user's units), the rules about which values are allowed (validate), and the
// form the state machine works with (Settings, in nanoseconds and integers).
//
// Validation returns a description of the first problem instead of throwing,
// so that bindings can turn it into their own kind of error. The argument
// table (names, kinds, defaults) is in config_fields.hpp.
#ifndef CIRCUITBREAKER_CONFIG_HPP
#define CIRCUITBREAKER_CONFIG_HPP

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>

#include "types.hpp"

// Limits quoted by validation messages, defined once (see types.hpp).
#define CIRCUITBREAKER_MAX_COUNT_WINDOW 1024
#define CIRCUITBREAKER_MAX_HALF_OPEN_CALLS 32
#define CIRCUITBREAKER_MIN_TIME_WINDOW_SECONDS 1e-6
#define CIRCUITBREAKER_MAX_BACKOFF_MULTIPLIER 1e6
#define CIRCUITBREAKER_MAX_CONCURRENT 64

namespace circuitbreaker {

enum class WindowType : std::uint8_t { Count = 0, Time = 1 };

inline const char* window_type_name(WindowType w) noexcept {
  return w == WindowType::Time ? "time" : "count";
}
// "count" or "time"; nullopt for anything else.
inline std::optional<WindowType> parse_window_type(const char* name) noexcept {
  if (name == nullptr) return std::nullopt;
  if (std::strcmp(name, "count") == 0) return WindowType::Count;
  if (std::strcmp(name, "time") == 0) return WindowType::Time;
  return std::nullopt;
}

// Capacities of the fixed-size state block (see state.hpp).
inline constexpr std::uint32_t kMaxCountWindow =
    CIRCUITBREAKER_MAX_COUNT_WINDOW;  // calls
inline constexpr std::uint32_t kTimeWindowBuckets = 10;
// One bit each in a 32-bit mask.
inline constexpr std::uint32_t kMaxHalfOpenCalls = CIRCUITBREAKER_MAX_HALF_OPEN_CALLS;
// Permits of a bulkhead (bulkhead.hpp): one bit each in a 64-bit mask.
inline constexpr std::uint32_t kMaxConcurrent = CIRCUITBREAKER_MAX_CONCURRENT;

// Limits of the other arguments.
inline constexpr double kMinTimeWindowSeconds = CIRCUITBREAKER_MIN_TIME_WINDOW_SECONDS;
inline constexpr double kMaxBackoffMultiplier = CIRCUITBREAKER_MAX_BACKOFF_MULTIPLIER;
inline constexpr double kMaxMinimumCalls = 1e9;
// A failure_threshold from here on cannot be reached by a 64-bit count of
// consecutive failures (2^64 is about 1.8447e19): the rule is off.
inline constexpr double kUnreachableThreshold = kMaxCountAsDouble;

// Defaults of the arguments, defined once: the Config initialisers below and
// the argument table (config_fields.hpp) both use them. The first two are
// those of the R6 `CircuitBreaker` class from the article this package follows.
inline constexpr double kDefaultFailureThreshold = 5;
inline constexpr double kDefaultRecoveryTimeout = 30;  // seconds
inline constexpr double kDefaultHalfOpenMaxCalls = 1;
inline constexpr double kDefaultBackoffMultiplier = 1;
inline constexpr double kDefaultJitter = 0;
inline constexpr double kDefaultRampUp = 0;          // seconds; 0 = off
inline constexpr double kDefaultHealthInterval = 5;  // seconds (health.hpp)
inline constexpr double kDefaultMaxWait = 0;         // seconds; 0 = reject at once

// Defaults of the optional window parameters (when left unset).
inline constexpr double kDefaultCountWindow = 100;   // calls
inline constexpr double kDefaultTimeWindow = 60;     // seconds
inline constexpr double kDefaultMinimumCalls = 20;   // Hystrix's request volume
inline constexpr double kDefaultMaxOpenHint = 3600;  // seconds (an hour)

// What the user asked for. Defaults reproduce the article's R6 class: open
// after 5 consecutive failures, probe once more than 30 s have passed.
struct Config {
  double failure_threshold = kDefaultFailureThreshold;  // whole number >= 1; +Inf: off
  double recovery_timeout = kDefaultRecoveryTimeout;    // seconds

  std::optional<double> failure_rate_threshold;  // (0, 1]; empty = rule off
  WindowType window_type = WindowType::Count;
  std::optional<double> window_size;    // calls or seconds; empty = default
  std::optional<double> minimum_calls;  // empty = min(20, window size)

  std::optional<double> slow_call_duration;        // seconds; empty = off
  std::optional<double> slow_call_rate_threshold;  // (0, 1]; empty = off

  double half_open_max_calls = kDefaultHalfOpenMaxCalls;
  std::optional<double> half_open_max_wait;  // seconds; empty = no expiry

  double backoff_multiplier = kDefaultBackoffMultiplier;
  std::optional<double> max_recovery_timeout;  // seconds; empty = no cap
  double jitter = kDefaultJitter;              // [0, 1]

  double ramp_up = kDefaultRampUp;  // seconds; 0 = off
  // Seconds between health checks while OPEN (health.hpp); the check itself
  // is the caller's (a binding runs it).
  double health_interval = kDefaultHealthInterval;
  // The bulkhead (bulkhead.hpp): empty = none; a whole number from 1 to
  // kMaxConcurrent = that many permits; a negative number -p (-1 <= -p < 0)
  // = a share p of the processes using the breaker (R's share(p)), at least
  // one permit.
  std::optional<double> max_concurrent;
  // Seconds a call may wait for a permit (the binding polls; the core never
  // waits): 0 = reject at once.
  double max_wait = kDefaultMaxWait;

  // Seed of the jitter generator, applied on construction and on every
  // reconfigure(); empty: a fresh seed from entropy each time. Not a rule, so
  // not in the argument table.
  std::optional<std::uint64_t> rng_seed;
};

// The first problem found in a Config: which field (a name of the argument
// table), and what it must be (phrased to follow "`field` must be ..."). Both
// point to static storage.
struct ConfigError {
  const char* field = nullptr;
  const char* requirement = nullptr;
  explicit operator bool() const noexcept { return field != nullptr; }
};

namespace detail {

inline bool is_whole(double x) noexcept { return std::isfinite(x) && std::floor(x) == x; }
inline bool in_unit_interval(double x) noexcept {  // (0, 1]
  return x > 0 && x <= 1;
}
inline bool is_duration(double x, bool allow_zero) noexcept {
  return std::isfinite(x) && (allow_zero ? x >= 0 : x > 0) && x <= kMaxSeconds;
}

#define CIRCUITBREAKER_S_ CIRCUITBREAKER_STRINGIFY
inline constexpr const char* kSecondsFrom0 =
    "a number of seconds from 0 to " CIRCUITBREAKER_S_(CIRCUITBREAKER_MAX_SECONDS);
inline constexpr const char* kNullOrSecondsFrom0 =
    "NULL or a number of seconds from 0 to " CIRCUITBREAKER_S_(
        CIRCUITBREAKER_MAX_SECONDS);
inline constexpr const char* kPositiveSeconds =
    "a number of seconds in (0, " CIRCUITBREAKER_S_(CIRCUITBREAKER_MAX_SECONDS) "]";
inline constexpr const char* kNullOrPositiveSeconds =
    "NULL or a number of seconds in (0, " CIRCUITBREAKER_S_(
        CIRCUITBREAKER_MAX_SECONDS) "]";
inline constexpr const char* kCountWindowRange =
    "NULL or a whole number of calls from 1 to " CIRCUITBREAKER_S_(
        CIRCUITBREAKER_MAX_COUNT_WINDOW) " (window_type \"count\")";
inline constexpr const char* kTimeWindowRange =
    "NULL or a number of seconds from " CIRCUITBREAKER_S_(
        CIRCUITBREAKER_MIN_TIME_WINDOW_SECONDS) " to " CIRCUITBREAKER_S_(CIRCUITBREAKER_MAX_SECONDS) " (window_type \"time\")";
inline constexpr const char* kHalfOpenCallsRange =
    "a whole number from 1 to " CIRCUITBREAKER_S_(CIRCUITBREAKER_MAX_HALF_OPEN_CALLS);
inline constexpr const char* kBackoffRange =
    "a number from 1 to " CIRCUITBREAKER_S_(CIRCUITBREAKER_MAX_BACKOFF_MULTIPLIER);
inline constexpr const char* kMaxConcurrentRange =
    "NULL, a whole number from 1 to " CIRCUITBREAKER_S_(
        CIRCUITBREAKER_MAX_CONCURRENT) ", or share(p) with p in (0, 1]";
#undef CIRCUITBREAKER_S_

}  // namespace detail

// A share of processes for max_concurrent (R's share(p)): (0, 1].
inline bool share_valid(double p) noexcept { return p > 0 && p <= 1; }
inline constexpr const char* kShareRequirement = "a number in (0, 1]";

inline double effective_window_size(const Config& c) noexcept {
  if (c.window_size) return *c.window_size;
  return c.window_type == WindowType::Count ? kDefaultCountWindow : kDefaultTimeWindow;
}

inline double effective_minimum_calls(const Config& c) noexcept {
  if (c.minimum_calls) return *c.minimum_calls;
  if (c.window_type == WindowType::Count) {
    const double size = effective_window_size(c);
    return size < kDefaultMinimumCalls ? size : kDefaultMinimumCalls;
  }
  return kDefaultMinimumCalls;
}

// Every rule about allowed values lives here; bindings only check types.
inline ConfigError validate(const Config& c) noexcept {
  using detail::in_unit_interval;
  using detail::is_duration;
  using detail::is_whole;

  const double ft = c.failure_threshold;
  if (!((is_whole(ft) && ft >= 1) || (std::isinf(ft) && ft > 0)))
    return {"failure_threshold", "a whole number of at least 1, or Inf"};
  if (!is_duration(c.recovery_timeout, true))
    return {"recovery_timeout", detail::kSecondsFrom0};

  if (c.failure_rate_threshold && !in_unit_interval(*c.failure_rate_threshold))
    return {"failure_rate_threshold", "NULL or a number in (0, 1]"};

  if (c.window_size) {
    const double w = *c.window_size;
    if (c.window_type == WindowType::Count) {
      if (!(is_whole(w) && w >= 1 && w <= kMaxCountWindow))
        return {"window_size", detail::kCountWindowRange};
    } else if (!(is_duration(w, false) && w >= kMinTimeWindowSeconds)) {
      return {"window_size", detail::kTimeWindowRange};
    }
  }
  if (c.minimum_calls) {
    const double m = *c.minimum_calls;
    if (!(is_whole(m) && m >= 1 && m <= kMaxMinimumCalls))
      return {"minimum_calls", "NULL or a whole number of at least 1"};
    if (c.window_type == WindowType::Count && m > effective_window_size(c))
      return {"minimum_calls",
              "NULL or at most `window_size` (a count window never holds "
              "more calls than its size)"};
  }

  if (c.slow_call_duration && !is_duration(*c.slow_call_duration, false))
    return {"slow_call_duration", detail::kNullOrPositiveSeconds};
  if (c.slow_call_rate_threshold) {
    if (!in_unit_interval(*c.slow_call_rate_threshold))
      return {"slow_call_rate_threshold", "NULL or a number in (0, 1]"};
    if (!c.slow_call_duration)
      return {"slow_call_rate_threshold", "NULL unless `slow_call_duration` is set too"};
  }

  const double h = c.half_open_max_calls;
  if (!(is_whole(h) && h >= 1 && h <= kMaxHalfOpenCalls))
    return {"half_open_max_calls", detail::kHalfOpenCallsRange};
  if (c.half_open_max_wait && !is_duration(*c.half_open_max_wait, false))
    return {"half_open_max_wait", detail::kNullOrPositiveSeconds};

  const double b = c.backoff_multiplier;
  if (!(std::isfinite(b) && b >= 1 && b <= kMaxBackoffMultiplier))
    return {"backoff_multiplier", detail::kBackoffRange};
  if (c.max_recovery_timeout) {
    const double m = *c.max_recovery_timeout;
    if (!is_duration(m, true))
      return {"max_recovery_timeout", detail::kNullOrSecondsFrom0};
    if (m < c.recovery_timeout)
      return {"max_recovery_timeout", "NULL or at least `recovery_timeout`"};
  }
  if (!(c.jitter >= 0 && c.jitter <= 1)) return {"jitter", "a number from 0 to 1"};

  if (!is_duration(c.ramp_up, true)) return {"ramp_up", detail::kSecondsFrom0};
  if (!is_duration(c.health_interval, false))
    return {"health_interval", detail::kPositiveSeconds};
  if (c.max_concurrent) {
    const double m = *c.max_concurrent;
    const bool count = is_whole(m) && m >= 1 && m <= kMaxConcurrent;
    const bool share = share_valid(-m);
    if (!count && !share) return {"max_concurrent", detail::kMaxConcurrentRange};
  }
  if (!is_duration(c.max_wait, true)) return {"max_wait", detail::kSecondsFrom0};
  return {};
}

// The validated configuration in the units the state machine uses. Fields
// are ordered widest first, so that the struct has no padding holes.
struct Settings {
  std::uint64_t failure_threshold;  // 0: consecutive rule off
  Nanos recovery_timeout;
  double failure_rate_threshold;
  Nanos window_bucket;  // time window: width of one bucket
  std::uint64_t minimum_calls;
  Nanos slow_call_duration;
  double slow_call_rate_threshold;
  Nanos half_open_max_wait;  // kNever: probes get the caller's lease, if any
  double backoff_multiplier;
  Nanos max_recovery_timeout;  // cap of the backed-off open duration
  Nanos max_open_hint;         // cap of an opening asked for by the caller
  double jitter;
  Nanos ramp_up;                          // 0: off
  Nanos health_interval;                  // between health checks (health.hpp)
  Nanos max_wait;                         // 0: a full bulkhead rejects at once
  double max_concurrent_share;            // 0: none (bulkhead.hpp)
  std::optional<std::uint64_t> rng_seed;  // empty: seed from entropy
  std::uint32_t window_calls;             // count window size
  std::uint32_t half_open_max_calls;
  std::uint32_t max_concurrent;  // 0: none, or a share (bulkhead.hpp)
  WindowType window_type;
  bool rate_rule;
  bool slow_tracking;  // slow calls are counted
  bool slow_rule;      // and may trip the breaker
};

// Precondition: validate(c) found nothing.
inline Settings make_settings(const Config& c) noexcept {
  Settings s{};
  s.failure_threshold =
      (std::isinf(c.failure_threshold) || c.failure_threshold >= kUnreachableThreshold)
          ? 0
          : static_cast<std::uint64_t>(c.failure_threshold);
  s.recovery_timeout = seconds_to_nanos(c.recovery_timeout);

  s.rate_rule = c.failure_rate_threshold.has_value();
  s.failure_rate_threshold = c.failure_rate_threshold.value_or(1.0);
  s.window_type = c.window_type;
  const double size = effective_window_size(c);
  if (c.window_type == WindowType::Count) {
    s.window_calls = static_cast<std::uint32_t>(size);
    s.window_bucket = 0;
  } else {
    s.window_calls = 0;
    Nanos bucket = seconds_to_nanos(size) / kTimeWindowBuckets;
    s.window_bucket = bucket > 0 ? bucket : 1;
  }
  s.minimum_calls = static_cast<std::uint64_t>(effective_minimum_calls(c));

  s.slow_tracking = c.slow_call_duration.has_value();
  s.slow_call_duration = seconds_to_nanos(c.slow_call_duration.value_or(0));
  s.slow_rule = c.slow_call_rate_threshold.has_value();
  s.slow_call_rate_threshold = c.slow_call_rate_threshold.value_or(1.0);

  s.half_open_max_calls = static_cast<std::uint32_t>(c.half_open_max_calls);
  s.half_open_max_wait =
      c.half_open_max_wait ? seconds_to_nanos(*c.half_open_max_wait) : kNever;

  s.backoff_multiplier = c.backoff_multiplier;
  s.max_recovery_timeout = seconds_to_nanos(c.max_recovery_timeout.value_or(kMaxSeconds));
  // A server's Retry-After may keep the breaker open longer than its own
  // policy, within max_recovery_timeout; without one, within an hour, so that
  // a bogus header cannot keep it open for days.
  s.max_open_hint = c.max_recovery_timeout ? s.max_recovery_timeout
                                           : seconds_to_nanos(kDefaultMaxOpenHint);
  s.jitter = c.jitter;
  s.ramp_up = seconds_to_nanos(c.ramp_up);
  s.health_interval = seconds_to_nanos(c.health_interval);
  s.rng_seed = c.rng_seed;
  const double m = c.max_concurrent.value_or(0);
  s.max_concurrent = m >= 1 ? static_cast<std::uint32_t>(m) : 0;
  s.max_concurrent_share = m < 0 ? -m : 0;
  s.max_wait = seconds_to_nanos(c.max_wait);
  return s;
}

// What a change of configuration (reconfigure()) invalidates: a window of
// another shape starts empty; an open duration of other timeouts is
// computed again.
inline bool window_shape_differs(const Settings& a, const Settings& b) noexcept {
  return a.window_type != b.window_type || a.window_calls != b.window_calls ||
         a.window_bucket != b.window_bucket;
}
inline bool open_timing_differs(const Settings& a, const Settings& b) noexcept {
  return a.recovery_timeout != b.recovery_timeout ||
         a.backoff_multiplier != b.backoff_multiplier ||
         a.max_recovery_timeout != b.max_recovery_timeout ||
         a.max_open_hint != b.max_open_hint;
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_CONFIG_HPP
