// A breaker's state on its store, without the rules: what every breaker has
// whatever moves its state. The store and the settings, the critical section
// that every operation that writes opens, the reads, and a section for a
// policy's own operations on its part of the block. The state machine
// (breaker.hpp's BasicBreaker) derives from it and adds the transitions and
// the order of admission.
//
// Where the state lives is the store's business (store.hpp): a LocalStore
// keeps its BreakerState and lock inside the breaker; an ExternalStore or the
// host store's SegmentStore points at a block and a lock that live elsewhere
// (shared memory).
#ifndef CIRCUITBREAKER_STORED_BREAKER_HPP
#define CIRCUITBREAKER_STORED_BREAKER_HPP

#include <cstddef>
#include <cstdint>
#include <utility>

#include "bulkhead.hpp"
#include "config.hpp"
#include "history.hpp"
#include "lock.hpp"
#include "random.hpp"
#include "rules.hpp"
#include "snapshot.hpp"
#include "state.hpp"
#include "store.hpp"
#include "transition_log.hpp"
#include "types.hpp"

namespace circuitbreaker {

// What a policy writes, in a section: the state block and the bulkhead's
// permits beside it (nullptr when the store keeps none; store.hpp).
struct PolicyBlocks {
  BreakerState& state;
  BulkheadPermits* bulkhead;
};

template <typename Store>
class StoredBreaker {
 public:
  using Lock = typename Store::Lock;

  // A new block as of `now`, on a store that makes its own (LocalStore).
  StoredBreaker(const Settings& settings, Nanos now) noexcept : settings_(settings) {
    init(now);
  }

  // A new block as of `now` on a store's memory (ExternalStore):
  // (re)initialises it.
  StoredBreaker(Store store, const Settings& settings, Nanos now) noexcept
      : store_(store), settings_(settings) {
    init(now);
  }

  // Attaches to a state block that someone initialised before (another
  // process): nothing in it changes, the jitter generator included.
  struct Attach {};
  StoredBreaker(Attach, Store store, const Settings& settings) noexcept
      : store_(store), settings_(settings) {}

  StoredBreaker(const StoredBreaker&) = delete;
  StoredBreaker& operator=(const StoredBreaker&) = delete;

  const Settings& settings() const noexcept { return settings_; }
  const Store& store() const noexcept { return store_; }

  // Rejections a store still holds pending count in the totals (history()
  // folds them in).
  Snapshot snapshot(Nanos now) const noexcept {
    LockGuard<Lock> guard(store_.lock());
    Snapshot snap = make_snapshot(store_.state(), bulkhead(), settings_, now);
    snap.totals.rejected =
        saturating_count_add(snap.totals.rejected, store_.pending_rejections());
    return snap;
  }

  // The current generation: it changes with every transition (a caller
  // that must act on a transition compares two readings).
  std::uint64_t generation() const noexcept {
    LockGuard<Lock> guard(store_.lock());
    return store_.state().generation;
  }

  std::size_t transitions_since(std::uint64_t after, Transition* out,
                                std::size_t max) const noexcept {
    LockGuard<Lock> guard(store_.lock());
    return store_.state().log.since(after, out, max);
  }

  // Activity in the last kHistoryBuckets buckets; `out` holds that many.
  // A store's pending rejections are folded in first, so that they show.
  std::size_t history(Nanos now, ActivityBucket* out) noexcept {
    const Section section(*this, now);
    return std::as_const(store_).state().history.recent(now, out);
  }

  // For a policy kept on the store that acts on its own (bulkhead.hpp's
  // take_bulkhead_permit(): the bulkhead alone, for calls that another
  // breaker decides): runs `f(block)` in the section every operation opens,
  // where `block()` returns the PolicyBlocks to write. Ask for them only to
  // write: a store may copy them then (host/segment_layout.hpp). `f` moves
  // no state. Without `now`, the lock alone: pending rejections stay
  // pending (an operation without a time, such as leaving a bulkhead).
  template <typename F>
  decltype(auto) policy_section(Nanos now, F&& f) noexcept {
    const Section section(*this, now);
    return f(policy_blocks());
  }
  template <typename F>
  decltype(auto) policy_section(F&& f) noexcept {
    LockGuard<Lock> guard(store_.lock());
    return f(policy_blocks());
  }

 protected:
  // The preamble of every operation that may write: the store's lock, held
  // for the object's life, then the store's pending rejections (store.hpp)
  // folded into the totals and the history as of `now`.
  class Section {
   public:
    Section(StoredBreaker& b, Nanos now) noexcept : guard_(b.store_.lock()) {
      if (b.store_.pending_rejections() == 0) return;
      const std::uint64_t n = b.store_.take_pending_rejections();
      BreakerState& s = b.st();
      s.totals.rejected = saturating_count_add(s.totals.rejected, n);
      s.history.add_rejection(now, n);
    }

   private:
    LockGuard<Lock> guard_;
  };

  // The state, under a section: to write (a store may copy it on first
  // use) and to read.
  BreakerState& st() noexcept { return store_.state(); }
  const BreakerState& st() const noexcept { return store_.state(); }

  // The jitter generator, seeded from rng_seed, or from entropy.
  void reseed() noexcept {
    st().rng = settings_.rng_seed ? *settings_.rng_seed : entropy_seed();
  }

  // Under a section: `block()` returns the blocks to write (PolicyBlocks).
  auto policy_blocks() noexcept {
    return [this]() { return PolicyBlocks{st(), store_.bulkhead()}; };
  }

  // New settings (reconfigure()); a bulkhead they add gets its permits.
  void set_settings(const Settings& next) noexcept {
    settings_ = next;
    if (has_bulkhead(settings_)) store_.keep_bulkhead();
  }

  // The bulkhead's permits to read (nullptr: none kept).
  const BulkheadPermits* bulkhead() const noexcept {
    return std::as_const(store_).bulkhead();
  }

  Store store_;
  Settings settings_;

 private:
  void init(Nanos now) noexcept {
    LockGuard<Lock> guard(store_.lock());
    BreakerState& s = st();
    s = BreakerState{};
    if (has_bulkhead(settings_)) store_.keep_bulkhead();
    if (BulkheadPermits* b = store_.bulkhead()) *b = BulkheadPermits{};
    s.state_since = now;
    s.open_duration = settings_.recovery_timeout;
    reseed();
  }
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_STORED_BREAKER_HPP
