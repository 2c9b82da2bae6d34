// Leased slots: the one structure behind half-open probes (probe_slots.hpp)
// and bulkhead permits (bulkhead.hpp). A slot is taken for one call, under a
// lease serial and an owner (a process id for a shared breaker, 0 when
// nobody tracks owners), and freed exactly once: by the call that holds it
// (its slot and lease must both still match, so a permit settled twice, or
// one from before its slot was freed and taken again, frees nothing), or,
// when its owner died, by whoever finds the slots full.
//
// Flat and fixed-size (a mask, a serial and two arrays), because it lives in
// the state block (state.hpp), which may be shared memory: any byte of it may
// have been written by another process, and valid() says whether it is safe
// to use.
#ifndef CIRCUITBREAKER_LEASED_SLOTS_HPP
#define CIRCUITBREAKER_LEASED_SLOTS_HPP

#include <bitset>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace circuitbreaker {

// A `gone` test (free_owned_by(), BasicBreaker::acquire()) that judges no
// owner dead: nothing to free, and no code for it.
struct NobodyGone {
  bool operator()(std::uint32_t) const noexcept { return false; }
};

template <std::uint32_t N>
class LeasedSlots {
 public:
  static constexpr std::uint32_t kCapacity = N;
  static_assert(N >= 1 && N <= 64, "one bit per slot in a 64-bit mask");
  // The last lease serial handed out before leases_exhausted().
  static constexpr std::uint32_t kMaxLease = std::numeric_limits<std::uint32_t>::max();

  // Slots held.
  std::uint32_t count() const noexcept {
    return static_cast<std::uint32_t>(std::bitset<64>(mask_).count());
  }
  bool any() const noexcept { return mask_ != 0; }
  bool held(std::uint32_t slot) const noexcept { return (mask_ & bit(slot)) != 0; }
  std::uint32_t last_lease() const noexcept { return serial_; }
  // Whether the serial reached kMaxLease: the next take() would start it over
  // at 1 (0 is never a lease), so a lease still out could match again. A
  // user that cannot tell an old lease from a new one by other means (a
  // probe's generation) clears the slots before that.
  bool leases_exhausted() const noexcept { return serial_ == kMaxLease; }

  // Takes the lowest free slot for `owner`. Precondition: count() < N (a
  // valid() mask has no bit at or above N, so a free slot below N exists).
  // Returns the slot; its lease is last_lease().
  std::uint32_t take(std::uint32_t owner) noexcept {
    std::uint32_t slot = 0;
    while (held(slot)) ++slot;
    mask_ |= bit(slot);
    if (++serial_ == 0) serial_ = 1;  // 0 is never a lease
    lease_[slot] = serial_;
    owner_[slot] = owner;
    return slot;
  }

  // Frees `slot` if it still holds lease `lease`; returns whether it did.
  bool free(std::uint32_t slot, std::uint32_t lease) noexcept {
    if (slot >= N || lease == 0 || !held(slot) || lease_[slot] != lease) return false;
    mask_ &= ~bit(slot);
    return true;
  }

  // Frees every slot held by a tracked owner for which `gone(owner)` is
  // true; returns how many it freed.
  template <typename Gone>
  std::uint32_t free_owned_by(Gone&& gone) noexcept {
    std::uint32_t n = 0;
    for (std::uint32_t i = 0; i < N; ++i) {
      if (held(i) && owner_[i] != 0 && gone(owner_[i])) {
        mask_ &= ~bit(i);
        ++n;
      }
    }
    return n;
  }

  // Whether only slots that exist are marked held (take() searches the mask
  // for a free slot; free_owned_by() never clears a bit at or above N). Any
  // serial, lease or owner is safe to use.
  bool valid() const noexcept {
    if constexpr (N < 64) {
      return (mask_ >> N) == 0;
    } else {
      return true;
    }
  }

 private:
  static constexpr std::uint64_t bit(std::uint32_t i) noexcept {
    return std::uint64_t{1} << i;
  }

  std::uint64_t mask_ = 0;                     // bit i: slot i is held
  std::uint32_t serial_ = 0;                   // the last lease handed out
  [[maybe_unused]] std::uint32_t unused_ = 0;  // explicit, so that nothing is padding
  std::uint32_t lease_[N] = {};
  std::uint32_t owner_[N] = {};
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_LEASED_SLOTS_HPP
