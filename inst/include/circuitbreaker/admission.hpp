// The admission decisions that write nothing, as pure functions of a few
// fields of the state (AdmissionView): CLOSED when not ramping up, OPEN
// before its open period is over, FORCED_OPEN and DISABLED. The state
// machine (breaker.hpp) asks them first under its lock; a store that can
// read those fields without the lock (the host store's seqlock,
// host/host_breaker.hpp) asks them before it takes the lock at all.
#ifndef CIRCUITBREAKER_ADMISSION_HPP
#define CIRCUITBREAKER_ADMISSION_HPP

#include <cstdint>
#include <optional>

#include "permit.hpp"
#include "types.hpp"

namespace circuitbreaker {

// A permit of `kind`, issued in `generation` at `now`.
inline Admission permit_granted(PermitKind kind, std::uint64_t generation,
                                Nanos now) noexcept {
  Admission a;
  a.permitted = true;
  a.permit.generation = generation;
  a.permit.started_at = now;
  a.permit.kind = kind;
  return a;
}

// A rejection; `retry_after` is clamped to >= 0, except kUnknownWait.
inline Admission call_refused(Rejection why, State state, Nanos retry_after) noexcept {
  Admission a;
  a.rejection = why;
  a.state = state;
  a.retry_after =
      retry_after == kUnknownWait ? kUnknownWait : (retry_after > 0 ? retry_after : 0);
  return a;
}

// Admission in the cases that write nothing. Anything else (HALF_OPEN, the
// end of an open period, a ramp) gives nullopt, for the state machine to
// decide under the lock. A rejection returned here is not counted: the
// caller counts it (the state machine does; a store that admits without the
// lock counts it as a pending rejection, store.hpp).
inline std::optional<Admission> admit_without_writing(const AdmissionView& v,
                                                      Nanos now) noexcept {
  switch (v.state) {
    case State::Closed:
      if (v.ramping) return std::nullopt;
      return permit_granted(PermitKind::Counted, v.generation, now);
    case State::Open:
      if (now - v.opened_at > v.open_duration) return std::nullopt;
      return call_refused(Rejection::Open, v.state, v.opened_at + v.open_duration - now);
    case State::ForcedOpen: return call_refused(Rejection::ForcedOpen, v.state, kNever);
    case State::Disabled:
      return permit_granted(PermitKind::PassThrough, v.generation, now);
    case State::HalfOpen: break;
  }
  return std::nullopt;
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_ADMISSION_HPP
