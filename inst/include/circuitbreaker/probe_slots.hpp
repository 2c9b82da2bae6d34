// The half-open probe slots: which slots hold a probe in flight, the lease
// serial each was given for, each probe's deadline and its owner (a process
// id for a shared breaker, 0 when nobody tracks owners). Flat and fixed-size
// (a mask and three arrays), like the rest of the state block.
#ifndef CIRCUITBREAKER_PROBE_SLOTS_HPP
#define CIRCUITBREAKER_PROBE_SLOTS_HPP

#include <cstdint>
#include <limits>

#include "config.hpp"
#include "types.hpp"

namespace circuitbreaker {

// A `gone` test (ProbeSlots::free_owned_by(), BasicBreaker::acquire()) that
// judges no owner dead: nothing to free, and no code for it.
struct NobodyGone {
  bool operator()(std::uint32_t) const noexcept { return false; }
};

class ProbeSlots {
 public:
  static constexpr std::uint32_t kCapacity = kMaxHalfOpenCalls;
  static_assert(kCapacity <= 32, "one bit per slot in a 32-bit mask");
  // The last lease serial handed out before take() reports exhaustion.
  static constexpr std::uint32_t kMaxLease = std::numeric_limits<std::uint32_t>::max();

  // Frees every slot and restarts the lease serials (a new half-open period:
  // permits of the old one carry an older generation and never match).
  void clear() noexcept { *this = ProbeSlots{}; }

  std::uint32_t count() const noexcept {
    std::uint32_t n = 0;
    for (std::uint32_t x = mask_; x; x &= x - 1) ++n;
    return n;
  }
  bool any() const noexcept { return mask_ != 0; }
  std::uint32_t last_lease() const noexcept { return serial_; }
  bool leases_exhausted() const noexcept { return serial_ == kMaxLease; }

  // Takes the lowest free slot for a probe that must settle by `deadline`
  // (kNever: no deadline), held by `owner` (0: untracked). Precondition:
  // count() < kCapacity and !leases_exhausted(). Returns the slot; its lease
  // is last_lease().
  std::uint32_t take(Nanos deadline, std::uint32_t owner = 0) noexcept {
    std::uint32_t slot = 0;
    while (mask_ & bit(slot)) ++slot;
    mask_ |= bit(slot);
    lease_[slot] = ++serial_;
    deadline_[slot] = deadline;
    owner_[slot] = owner;
    return slot;
  }

  // Frees every slot held by a tracked owner for which `gone(owner)` is
  // true; returns how many it freed.
  template <typename Gone>
  std::uint32_t free_owned_by(Gone&& gone) noexcept {
    std::uint32_t n = 0;
    for (std::uint32_t i = 0; i < kCapacity; ++i) {
      if ((mask_ & bit(i)) && owner_[i] != 0 && gone(owner_[i])) {
        mask_ &= ~bit(i);
        ++n;
      }
    }
    return n;
  }

  // Frees `slot` if it still holds lease `lease`; returns whether it did (a
  // permit settled twice frees nothing the second time).
  bool free(std::uint32_t slot, std::uint32_t lease) noexcept {
    if (slot >= kCapacity || !(mask_ & bit(slot)) || lease_[slot] != lease) return false;
    mask_ &= ~bit(slot);
    return true;
  }

  // The earliest deadline of a probe in flight; kNever when none has one.
  Nanos earliest_deadline() const noexcept {
    Nanos first = kNever;
    for (std::uint32_t i = 0; i < kCapacity; ++i) {
      if ((mask_ & bit(i)) && deadline_[i] < first) first = deadline_[i];
    }
    return first;
  }

  // Whether a probe in flight is past its deadline at `now` (expired when
  // now > deadline); if so, `*expired_at` is the earliest such deadline.
  bool expired(Nanos now, Nanos* expired_at) const noexcept {
    if (mask_ == 0) return false;
    const Nanos first = earliest_deadline();
    if (first == kNever || now <= first) return false;
    *expired_at = first;
    return true;
  }

  // Whether only slots that exist are marked taken (a mask read from shared
  // memory may have any bit set; take() searches the mask for a free slot).
  bool valid() const noexcept {
    if constexpr (kCapacity < 32) {
      return (mask_ >> kCapacity) == 0;
    } else {
      return true;
    }
  }

 private:
  static constexpr std::uint32_t bit(std::uint32_t i) noexcept {
    return std::uint32_t{1} << i;
  }

  std::uint32_t mask_ = 0;    // bit i: slot i holds a probe in flight
  std::uint32_t serial_ = 0;  // the last lease handed out in this period
  std::uint32_t lease_[kCapacity] = {};
  Nanos deadline_[kCapacity] = {};
  std::uint32_t owner_[kCapacity] = {};
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_PROBE_SLOTS_HPP
