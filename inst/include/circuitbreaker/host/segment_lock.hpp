// A segment's lock as one process holds it, and the store (store.hpp) that
// runs the state machine (breaker.hpp) on a segment: SharedBreaker.
#ifndef CIRCUITBREAKER_HOST_SEGMENT_LOCK_HPP
#define CIRCUITBREAKER_HOST_SEGMENT_LOCK_HPP

#include <chrono>
#include <cstdint>

#include "../breaker.hpp"
#include "../lock.hpp"
#include "../store.hpp"
#include "segment_layout.hpp"

namespace circuitbreaker {

// What went wrong with a segment's lock, as one operation found it.
enum class SegmentFault : std::uint8_t {
  None = 0,
  Busy = 1,    // the lock was still held when the wait's bound passed
  Corrupt = 2  // the mutex or the state is not what this code ever leaves
};

// The lock of a segment, as one process holds it: one per process and
// breaker, in that process's memory. unlock() commits what the critical
// section wrote.
//
// The segment is untrusted input (any process that maps it can write any
// byte), so lock() may fail in two ways, and running the state machine on
// shared memory that it has not locked, or on a block out of range, is never
// an option (nor is aborting the process):
//   - Busy: the mutex was still held after the wait's bound (wait(); a
//     holder stopped by SIGSTOP, or a forged owner word). Not counted as
//     damage: the next operation tries again.
//   - Corrupt: the mutex cannot be locked (unrecoverable, or its type word
//     overwritten), or once locked the control words or the committed state
//     fail Segment::valid_under_lock(): an index, count, enum or time out of
//     range. Counted in failures(); the caller (HostBreaker) reports the
//     segment as broken.
// Either way the critical section runs on a private scratch copy, which is
// discarded, and fault() says what happened.
class SegmentLock {
 public:
  SegmentLock(Segment& s, const Settings& settings) noexcept
      : seg_(&s), settings_(settings) {}

  void lock() noexcept {
    const RobustMutex::LockResult r =
        seg_->control.mutex.lock_robust([this]() noexcept { seg_->recover(); }, wait_);
    if (r == RobustMutex::LockResult::TimedOut) return fail(SegmentFault::Busy);
    if (r == RobustMutex::LockResult::Failed) return fail(SegmentFault::Corrupt);
    if (!seg_->valid_under_lock(settings_)) {
      seg_->control.mutex.unlock();
      fail(SegmentFault::Corrupt);
    }
  }

  void unlock() noexcept {
    if (failing_) {
      failing_ = false;
      return;
    }
    seg_->commit();
    seg_->control.mutex.unlock();
  }

  // How many lock() calls found the mutex or the state corrupt.
  std::uint64_t failures() const noexcept { return failures_; }
  // The worst fault since the last take_fault(), which clears it.
  SegmentFault fault() const noexcept { return fault_; }
  SegmentFault take_fault() noexcept {
    const SegmentFault f = fault_;
    fault_ = SegmentFault::None;
    return f;
  }

  // The bound of a wait for the mutex (RobustMutex::kDefaultWait unless set).
  std::chrono::nanoseconds wait() const noexcept { return wait_; }
  void set_wait(std::chrono::nanoseconds w) noexcept { wait_ = w; }

  Segment& segment() const noexcept { return *seg_; }
  SegmentSlot& working() noexcept { return failing_ ? scratch_ : seg_->working(); }
  const SegmentSlot& current() const noexcept {
    return failing_ ? scratch_ : seg_->current();
  }
  bool failing() const noexcept { return failing_; }

 private:
  void fail(SegmentFault f) noexcept {
    failing_ = true;
    if (f == SegmentFault::Corrupt) ++failures_;
    if (f > fault_) fault_ = f;
    // From the last committed state if it passes (so that what a broken
    // breaker still reports is that state), else a fresh block: the state
    // machine only ever runs on a valid one.
    const std::uint32_t c = seg_->control.committed.load(std::memory_order_acquire);
    std::memcpy(static_cast<void*>(&scratch_), &seg_->slots[c & 1u], sizeof scratch_);
    if (!slot_valid(scratch_, settings_)) scratch_ = SegmentSlot{};
  }

  Segment* seg_;
  Settings settings_;
  std::chrono::nanoseconds wait_ = RobustMutex::kDefaultWait;
  bool failing_ = false;
  SegmentFault fault_ = SegmentFault::None;
  std::uint64_t failures_ = 0;
  SegmentSlot scratch_{};
};

static_assert(is_lock_v<SegmentLock>);

// A store on a segment (store.hpp): state() is the working copy, lock() the
// process's SegmentLock, whose unlock() commits. BasicBreaker runs unchanged
// on it. `settings` are the breaker's (the lock checks the state against
// them).
class SegmentStore {
 public:
  using Lock = SegmentLock;
  SegmentStore(Segment& s, const Settings& settings) noexcept : lock_(s, settings) {}

  BreakerState& state() noexcept { return lock_.working().state; }
  const BreakerState& state() const noexcept { return lock_.current().state; }
  BulkheadPermits* bulkhead() noexcept { return &lock_.working().bulkhead; }
  const BulkheadPermits* bulkhead() const noexcept { return &lock_.current().bulkhead; }
  static constexpr bool keep_bulkhead() noexcept { return true; }
  SegmentLock& lock() const noexcept { return lock_; }
  Segment& segment() const noexcept { return lock_.segment(); }

  // Rejections made without the lock (Segment::fast_rejected) that the state
  // has not counted yet. take_pending_rejections() (under the lock) marks
  // them counted in the working copy, so they are counted exactly once: if
  // the critical section dies before its commit, the mark dies with it.
  std::uint64_t pending_rejections() const noexcept {
    if (lock_.failing()) return 0;
    const std::uint64_t total = segment().fast_rejected.load(std::memory_order_relaxed);
    const std::uint64_t folded = lock_.current().rejections_folded;
    return total > folded ? total - folded : 0;
  }
  std::uint64_t take_pending_rejections() noexcept {
    const std::uint64_t n = pending_rejections();
    if (n != 0) lock_.working().rejections_folded += n;
    return n;
  }

 private:
  mutable SegmentLock lock_;
};

using SharedBreaker = BasicBreaker<SegmentStore>;

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HOST_SEGMENT_LOCK_HPP
