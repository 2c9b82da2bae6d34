// The bulkhead: at most `max_concurrent` calls through one breaker at once.
// Its permits are leased slots (leased_slots.hpp), like probe slots: each
// taken permit records a lease serial and its owner (a process id for a
// shared breaker, 0 when nobody tracks owners). A permit is freed exactly
// once, by the record() or release() of the call that holds it; a permit
// presented again, or one whose serial no longer matches its slot, frees
// nothing. A dead owner's permits are freed by the next admission that finds
// the bulkhead full (the store's `gone(owner)` hook, store.hpp).
//
// The limit is a number of permits, or a share of the processes that use
// the breaker (semian's quota): the block keeps the ids of the processes
// that acquired through it (its members, at most kMaxConcurrent; a process
// joins on its first admission under the lock, leaves when it closes the
// breaker, and a dead one is dropped by the same admissions that free dead
// owners' permits). A store that does not track owners (the process store)
// counts one member.
//
// Where the bulkhead stands in admission (after the breaker: a call the
// breaker refuses takes no permit, and a full bulkhead moves no state) is
// the state machine's order, breaker.hpp's acquire(). The rules of the
// permits themselves are here: BulkheadPermits for the block, and, below it,
// the bulkhead alone on a breaker's block, for permits that calls decided
// by another breaker hold (acquire_with(); fleet/fleet_bulkhead.hpp).
//
// Flat and fixed-size, like the rest of the state block (state.hpp).
#ifndef CIRCUITBREAKER_BULKHEAD_HPP
#define CIRCUITBREAKER_BULKHEAD_HPP

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "config.hpp"
#include "leased_slots.hpp"
#include "permit.hpp"
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

  std::uint32_t count() const noexcept { return permits_.count(); }
  std::uint32_t members() const noexcept { return members_; }
  std::uint64_t rejected() const noexcept { return rejected_; }

  // Whether a call of `owner` (who joins the members first) may take a
  // permit under `s`. When every permit is held, the permits and
  // memberships of owners that `gone` judges dead are dropped first (the
  // permits added to `released`, the breaker's count of settled-by-release
  // calls) and it asks again; a call still without a permit counts as a
  // full rejection.
  template <typename Gone>
  bool room(const Settings& s, std::uint32_t owner, Gone& gone,
            std::uint64_t& released) noexcept {
    join(owner);
    if (count() < bulkhead_limit(s, members_)) return true;
    if constexpr (!std::is_same_v<std::decay_t<Gone>, NobodyGone>) {
      released += free_owned_by(gone);
      join(owner);
      if (count() < bulkhead_limit(s, members_)) return true;
    }
    if (rejected_ != UINT64_MAX) ++rejected_;
    return false;
  }

  // Takes the lowest free permit for `owner` into `p` (bulk_slot,
  // bulk_lease). Precondition: room() said yes.
  void take(Permit& p, std::uint32_t owner) noexcept {
    p.bulk_slot = static_cast<std::uint8_t>(permits_.take(owner));
    p.bulk_lease = permits_.last_lease();
  }

  // Frees the permit `p` holds, if its lease still matches (whatever the
  // generation: a permit outlives transitions). Returns whether it did.
  bool give_back(const Permit& p) noexcept {
    return permits_.free(p.bulk_slot, p.bulk_lease);
  }

  // Forgets `owner` as a member (its permits stay until settled).
  void leave(std::uint32_t owner) noexcept {
    for (std::uint32_t i = 0; i < members_; ++i) {
      if (member_[i] == owner) {
        drop_member(i);
        return;
      }
    }
  }

  // Whether the block can be used as it is (bytes read from shared memory):
  // the member count indexes the member list, and only permits that exist
  // are held. Any serial, owner or member id is safe to use.
  bool valid() const noexcept { return members_ <= kCapacity && permits_.valid(); }

 private:
  // Counts `owner` (0: untracked, counted nowhere) as a member, once; a
  // full member list keeps the members it has.
  void join(std::uint32_t owner) noexcept {
    if (owner == 0) return;
    for (std::uint32_t i = 0; i < members_; ++i) {
      if (member_[i] == owner) return;
    }
    if (members_ < kCapacity) member_[members_++] = owner;
  }

  void drop_member(std::uint32_t i) noexcept {
    member_[i] = member_[--members_];
    member_[members_] = 0;
  }

  // Frees every permit held by a tracked owner for which `gone(owner)` is
  // true, and forgets such members; returns how many permits it freed.
  template <typename Gone>
  std::uint32_t free_owned_by(Gone& gone) noexcept {
    const std::uint32_t n = permits_.free_owned_by(gone);
    for (std::uint32_t i = 0; i < members_;) {
      if (gone(member_[i])) {
        drop_member(i);
      } else {
        ++i;
      }
    }
    return n;
  }

  std::uint32_t members_ = 0;                  // processes in member_
  [[maybe_unused]] std::uint32_t unused_ = 0;  // explicit, so that nothing is padding
  std::uint64_t rejected_ = 0;  // calls rejected because every permit was held
  LeasedSlots<kCapacity> permits_;
  std::uint32_t member_[kCapacity] = {};
};

// A bulkhead's permits as admission asks for them (breaker.hpp's acquire()
// and acquire_with()): the breaker decides between room() and take() or
// unused(), so that a call it refuses takes nothing. A permits type has
//   bool limited()        whether there is a bulkhead at all;
//   bool room()           whether this call may have a permit (false: every
//                         permit held; the rejection is counted);
//   void take(Permit& p)  hands the admitted call its permit;
//   void unused()         the breaker refused the call: gives back what
//                         room() may have taken.
// They run under the breaker's lock; they may take a lock of their own
// (never that one), with a bounded wait.
//
// BlockPermits is the bulkhead a store keeps beside a breaker's state block
// (store.hpp's bulkhead()), for `owner` with the dead-owner test `gone`.
// `block()` returns the blocks to write (stored_breaker.hpp's PolicyBlocks:
// `state`, and `bulkhead`, nullptr when the store could keep none, which
// refuses every call as Full) and is asked for only when there is a
// bulkhead: a store may copy the blocks on first write
// (host/segment_layout.hpp). Another is fleet/fleet_bulkhead.hpp's
// FleetBulkhead::Call, a fleet breaker's permits in a host segment.
template <typename Block, typename Gone>
struct BlockPermits {
  Block block;
  const Settings& settings;
  std::uint32_t owner;
  Gone& gone;
  bool limited() const noexcept { return has_bulkhead(settings); }
  bool room() noexcept {
    auto b = block();
    return b.bulkhead != nullptr &&
           b.bulkhead->room(settings, owner, gone, b.state.totals.released);
  }
  void take(Permit& p) noexcept { block().bulkhead->take(p, owner); }
  void unused() noexcept {}
};
template <typename Block, typename Gone>
BlockPermits(Block, const Settings&, std::uint32_t, Gone&) -> BlockPermits<Block, Gone>;

// The bulkhead alone on the block of breaker `home`, for permits that calls
// decided by another breaker hold (acquire_with()'s permits): `home`'s
// state machine is not used, only its bulkhead block, in the critical
// section every operation of `home` opens (stored_breaker.hpp's
// policy_section()).
//
// Takes a permit for `owner` into `p` by acquire()'s rules (the permits of
// owners `gone` judges dead freed first when every one is held), or counts
// a full rejection and returns false. True, and no permit, without a
// bulkhead.
template <typename Home, typename Gone = NobodyGone>
bool take_bulkhead_permit(Home& home, Nanos now, Permit& p, std::uint32_t owner = 0,
                          Gone gone = Gone{}) noexcept {
  return home.policy_section(now, [&](auto block) {
    BlockPermits permits{block, home.settings(), owner, gone};
    if (!permits.limited()) return true;
    if (!permits.room()) return false;
    permits.take(p);
    return true;
  });
}

// Gives back the permit take_bulkhead_permit() put in `p`, if its lease
// still matches (once, as record() and release() free theirs).
template <typename Home>
void return_bulkhead_permit(Home& home, const Permit& p, Nanos now) noexcept {
  home.policy_section(now, [&](auto block) {
    if (p.bulk_lease == 0) return;
    if (BulkheadPermits* b = block().bulkhead) b->give_back(p);
  });
}

// Forgets `owner` as a process using `home`'s bulkhead (it closes the
// breaker); permits it still holds stay until settled.
template <typename Home>
void leave_bulkhead(Home& home, std::uint32_t owner) noexcept {
  home.policy_section([&](auto block) {
    if (BulkheadPermits* b = block().bulkhead) b->leave(owner);
  });
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_BULKHEAD_HPP
