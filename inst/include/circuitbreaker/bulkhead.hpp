// The bulkhead: at most `max_concurrent` calls through one breaker at once.
// Its permits are leases, like probe slots (probe_slots.hpp): each taken
// permit records a lease serial and its owner (a process id for a shared
// breaker, 0 when nobody tracks owners). A permit is freed exactly once, by
// the record() or release() of the call that holds it; a permit presented
// again, or one whose serial no longer matches its slot, frees nothing. A
// dead owner's permits are freed by the next admission that finds the
// bulkhead full (the store's `gone(owner)` hook, store.hpp).
//
// The limit is a number of permits, or a share of the processes that use
// the breaker (semian's quota): the block keeps the ids of the processes
// that acquired through it (its members, at most kMaxConcurrent; a process
// joins on its first admission under the lock, leaves when it closes the
// breaker, and a dead one is dropped by the same admissions that free dead
// owners' permits). A store that does not track owners (the process store)
// counts one member.
//
// Flat and fixed-size, like the rest of the state block (state.hpp).
#ifndef CIRCUITBREAKER_BULKHEAD_HPP
#define CIRCUITBREAKER_BULKHEAD_HPP

#include <cmath>
#include <cstdint>

#include "config.hpp"
#include "types.hpp"

namespace circuitbreaker {

// The permits a bulkhead holds at once, for the settings: 0 when there is
// no bulkhead; a share of `members` processes (at least one counted) rounded
// up, at least 1 and at most kMaxConcurrent.
inline std::uint32_t bulkhead_limit(const Settings& s, std::uint32_t members) noexcept {
  if (s.max_concurrent_share > 0) {
    const double n = members > 0 ? members : 1;
    const double want = std::ceil(s.max_concurrent_share * n - 1e-9);
    if (!(want >= 1)) return 1;
    return want >= kMaxConcurrent ? kMaxConcurrent : static_cast<std::uint32_t>(want);
  }
  return s.max_concurrent;
}

inline bool has_bulkhead(const Settings& s) noexcept {
  return s.max_concurrent > 0 || s.max_concurrent_share > 0;
}

class BulkheadPermits {
 public:
  static constexpr std::uint32_t kCapacity = kMaxConcurrent;
  static_assert(kCapacity <= 64, "one bit per permit in a 64-bit mask");

  std::uint32_t count() const noexcept {
    std::uint32_t n = 0;
    for (std::uint64_t x = mask_; x; x &= x - 1) ++n;
    return n;
  }
  std::uint32_t members() const noexcept { return members_; }
  std::uint64_t rejected() const noexcept { return rejected_; }
  void count_rejection() noexcept {
    if (rejected_ != UINT64_MAX) ++rejected_;
  }

  // Counts `owner` (0: untracked, counted nowhere) as a member, once; a
  // full member list keeps the members it has.
  void join(std::uint32_t owner) noexcept {
    if (owner == 0) return;
    for (std::uint32_t i = 0; i < members_; ++i) {
      if (member_[i] == owner) return;
    }
    if (members_ < kCapacity) member_[members_++] = owner;
  }

  // Forgets `owner` as a member (its permits stay until settled).
  void leave(std::uint32_t owner) noexcept {
    for (std::uint32_t i = 0; i < members_; ++i) {
      if (member_[i] == owner) {
        member_[i] = member_[--members_];
        member_[members_] = 0;
        return;
      }
    }
  }

  // Frees every permit held by a tracked owner for which `gone(owner)` is
  // true, and forgets such members; returns how many permits it freed.
  template <typename Gone>
  std::uint32_t free_owned_by(Gone&& gone) noexcept {
    std::uint32_t n = 0;
    for (std::uint32_t i = 0; i < kCapacity; ++i) {
      if ((mask_ & bit(i)) && owner_[i] != 0 && gone(owner_[i])) {
        mask_ &= ~bit(i);
        ++n;
      }
    }
    for (std::uint32_t i = 0; i < members_;) {
      if (gone(member_[i])) {
        member_[i] = member_[--members_];
        member_[members_] = 0;
      } else {
        ++i;
      }
    }
    return n;
  }

  // Takes the lowest free permit for `owner`. Precondition: count() <
  // kCapacity. Returns the slot; its lease is last_lease().
  std::uint32_t take(std::uint32_t owner) noexcept {
    std::uint32_t slot = 0;
    while (mask_ & bit(slot)) ++slot;
    mask_ |= bit(slot);
    if (++serial_ == 0) serial_ = 1;  // 0 is never a lease
    lease_[slot] = serial_;
    owner_[slot] = owner;
    return slot;
  }
  std::uint32_t last_lease() const noexcept { return serial_; }

  // Frees `slot` if it still holds lease `lease`; returns whether it did.
  bool free(std::uint32_t slot, std::uint32_t lease) noexcept {
    if (slot >= kCapacity || lease == 0 || !(mask_ & bit(slot)) ||
        lease_[slot] != lease) {
      return false;
    }
    mask_ &= ~bit(slot);
    return true;
  }

  // Whether the block can be used as it is (bytes read from shared memory):
  // the member count indexes the member list. Any mask, serial or owner is
  // safe to use.
  bool valid() const noexcept { return members_ <= kCapacity; }

 private:
  static constexpr std::uint64_t bit(std::uint32_t i) noexcept {
    return std::uint64_t{1} << i;
  }

  std::uint64_t mask_ = 0;      // bit i: permit i is held
  std::uint64_t rejected_ = 0;  // calls rejected because every permit was held
  std::uint32_t serial_ = 0;    // the last lease handed out
  std::uint32_t members_ = 0;   // processes in member_
  std::uint32_t lease_[kCapacity] = {};
  std::uint32_t owner_[kCapacity] = {};
  std::uint32_t member_[kCapacity] = {};
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_BULKHEAD_HPP
