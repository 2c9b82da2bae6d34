// What a caller may read about a breaker: cumulative counters and a snapshot
// of everything worth showing or exporting, taken under one lock.
#ifndef CIRCUITBREAKER_SNAPSHOT_HPP
#define CIRCUITBREAKER_SNAPSHOT_HPP

#include <cstdint>
#include <limits>

#include "types.hpp"
#include "window.hpp"

namespace circuitbreaker {

// Cumulative counts since creation; never reset (reset() zeroes the rules'
// state, not history). `calls` counts recorded results: rejected, released
// and ignored calls are not calls.
struct Counters {
  std::uint64_t calls = 0;
  std::uint64_t successes = 0;
  std::uint64_t failures = 0;
  std::uint64_t slow = 0;
  std::uint64_t ignored = 0;
  std::uint64_t rejected = 0;
  std::uint64_t released = 0;
  std::uint64_t late = 0;     // results of an older generation, or settled twice
  std::uint64_t expired = 0;  // probes not settled by their deadline
  std::uint64_t times_opened = 0;
};

struct Snapshot {
  State state = State::Closed;
  std::uint64_t generation = 0;
  Nanos now = 0;
  Nanos state_since = 0;
  std::uint64_t consecutive_failures = 0;  // the R6 class's failure_count
  bool has_failure = false;
  Nanos last_failure_at = 0;
  Counters totals;
  WindowTotals window;
  double failure_rate = std::numeric_limits<double>::quiet_NaN();
  double slow_rate = std::numeric_limits<double>::quiet_NaN();
  Nanos open_duration = 0;  // of the current or, when not open, the last opening
  // Until a call may be admitted: 0 when one may be now; kNever when forced
  // open; kUnknownWait when half-open, every slot is taken and no probe in
  // flight has a deadline.
  Nanos retry_after = 0;
  std::uint32_t probes_in_flight = 0;
  std::uint32_t probe_successes = 0;
  std::uint64_t consecutive_opens = 0;
  double ramp_share = 1;  // share of calls admitted (ramp-up after closing)
  std::uint64_t last_transition = 0;
  // Health checks (health.hpp): counts by result, the last result and when.
  std::uint64_t health_passed = 0, health_failed = 0, health_late = 0;
  std::uint8_t health_last_result = 0;  // a HealthResult
  Nanos health_last_at = 0;
  // The bulkhead (bulkhead.hpp): permits held now, the limit in effect (0:
  // no bulkhead), calls rejected because it was full, processes counted for
  // a share.
  std::uint32_t in_flight = 0;
  std::uint32_t max_concurrent = 0;
  std::uint64_t full_rejections = 0;
  std::uint32_t bulkhead_members = 0;
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_SNAPSHOT_HPP
