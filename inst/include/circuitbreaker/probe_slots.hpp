// The half-open probe slots: leased slots (leased_slots.hpp) with, beside
// each, the deadline by which its probe must settle. Flat and fixed-size,
// like the rest of the state block.
//
// A probe's lease is told from an older one by the breaker's generation as
// well: a new half-open period clears the slots and restarts the serials,
// and before the serial would start over in one period the breaker moves to
// a new generation (breaker.hpp's take_probe()).
#ifndef CIRCUITBREAKER_PROBE_SLOTS_HPP
#define CIRCUITBREAKER_PROBE_SLOTS_HPP

#include <cstdint>

#include "config.hpp"
#include "leased_slots.hpp"
#include "permit.hpp"
#include "types.hpp"

namespace circuitbreaker {

class ProbeSlots {
 public:
  using Slots = LeasedSlots<kMaxHalfOpenCalls>;
  static constexpr std::uint32_t kCapacity = Slots::kCapacity;

  // Frees every slot and restarts the lease serials (a new half-open period:
  // permits of the old one carry an older generation and never match).
  void clear() noexcept { *this = ProbeSlots{}; }

  std::uint32_t count() const noexcept { return slots_.count(); }
  bool any() const noexcept { return slots_.any(); }
  std::uint32_t last_lease() const noexcept { return slots_.last_lease(); }
  bool leases_exhausted() const noexcept { return slots_.leases_exhausted(); }

  // Takes the lowest free slot into probe `p` (slot, lease) for a probe that
  // must settle by `deadline` (kNever: no deadline), held by `owner` (0:
  // untracked). Precondition: count() < kCapacity and !leases_exhausted().
  void take(Permit& p, Nanos deadline, std::uint32_t owner = 0) noexcept {
    const std::uint32_t slot = slots_.take(owner);
    deadline_[slot] = deadline;
    p.slot = static_cast<std::uint8_t>(slot);
    p.lease = slots_.last_lease();
  }

  // Frees every slot held by a tracked owner for which `gone(owner)` is
  // true; returns how many it freed.
  template <typename Gone>
  std::uint32_t free_owned_by(Gone&& gone) noexcept {
    return slots_.free_owned_by(gone);
  }

  // Frees `slot` if it still holds lease `lease`; returns whether it did (a
  // permit settled twice frees nothing the second time).
  bool free(std::uint32_t slot, std::uint32_t lease) noexcept {
    return slots_.free(slot, lease);
  }

  // The earliest deadline of a probe in flight; kNever when none has one.
  Nanos earliest_deadline() const noexcept {
    Nanos first = kNever;
    for (std::uint32_t i = 0; i < kCapacity; ++i) {
      if (slots_.held(i) && deadline_[i] < first) first = deadline_[i];
    }
    return first;
  }

  // Whether a probe in flight is past its deadline at `now` (expired when
  // now > deadline); if so, `*expired_at` is the earliest such deadline.
  bool expired(Nanos now, Nanos* expired_at) const noexcept {
    if (!slots_.any()) return false;
    const Nanos first = earliest_deadline();
    if (first == kNever || now <= first) return false;
    *expired_at = first;
    return true;
  }

  // Whether only slots that exist are marked taken (a mask read from shared
  // memory may have any bit set). Any deadline is safe to use.
  bool valid() const noexcept { return slots_.valid(); }

 private:
  Slots slots_;
  Nanos deadline_[kCapacity] = {};
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_PROBE_SLOTS_HPP
