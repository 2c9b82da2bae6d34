// What acquire() hands out: a permit (a lease on the right to make one call)
// or a rejection with the reason and the time until a call may be admitted.
#ifndef CIRCUITBREAKER_PERMIT_HPP
#define CIRCUITBREAKER_PERMIT_HPP

#include <cstdint>
#include <limits>

#include "types.hpp"

namespace circuitbreaker {

enum class PermitKind : std::uint8_t {
  Counted = 0,     // issued in CLOSED: its result feeds the trip rules
  Probe = 1,       // issued in HALF_OPEN: holds a probe slot
  PassThrough = 2  // issued while DISABLED: its result is not recorded
};

// Permit::slot of a permit that holds no probe slot.
inline constexpr std::uint8_t kNoSlot = std::numeric_limits<std::uint8_t>::max();

struct Permit {
  std::uint64_t generation = 0;
  Nanos started_at = 0;
  std::uint32_t lease =
      0;  // serial of a probe's lease (1, 2, ... per half-open period); 0 otherwise
  // The bulkhead permit this call holds (bulkhead.hpp), whatever its kind:
  // its lease serial (0: none) and slot. Freed by record() or release(),
  // once.
  std::uint32_t bulk_lease = 0;
  std::uint8_t slot = kNoSlot;
  std::uint8_t bulk_slot = kNoSlot;
  PermitKind kind = PermitKind::Counted;
};

struct Admission {
  bool permitted = false;
  Rejection rejection = Rejection::None;
  State state = State::Closed;  // when rejected: the state that refused the call
  // When rejected: the time until a call may be admitted; kNever when forced
  // open, kUnknownWait when half-open with every slot held by a probe
  // without a deadline. 0 when permitted.
  Nanos retry_after = 0;
  Permit permit;
};

// The few fields of a state block that admission reads when it writes
// nothing (admission.hpp's admit_without_writing()): small enough to copy out
// of shared memory under a seqlock.
struct AdmissionView {
  State state = State::Closed;
  bool ramping = false;
  std::uint64_t generation = 0;
  Nanos opened_at = 0;
  Nanos open_duration = 0;
};

// The state a fleet of processes shares (fleet/member.hpp), as one of them receives
// it, for FleetBreaker::adopt(). Times are durations measured by the shared
// store's clock, so each process can place them on its own clock.
struct FleetView {
  State state = State::Closed;
  bool new_generation = false;  // the fleet moved on since this process last looked
  Nanos open_elapsed = 0;       // Open: how long ago the fleet opened
  Nanos open_duration = 0;      // Open: how long it stays open
  std::uint64_t consecutive_opens = 0;
  std::uint64_t consecutive_failures = 0;  // Closed: the fleet's run of failures
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_PERMIT_HPP
