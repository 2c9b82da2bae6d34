// A bounded record of recent activity for plots and dashboards: calls,
// failures, slow calls and rejections in the last kHistoryBuckets buckets of
// kHistoryBucketWidth each (five minutes in all). Fixed size, O(1) to add to,
// nothing allocated; old buckets are recycled as time moves on.
#ifndef CIRCUITBREAKER_HISTORY_HPP
#define CIRCUITBREAKER_HISTORY_HPP

#include <cstddef>
#include <cstdint>

#include "types.hpp"

namespace circuitbreaker {

inline constexpr std::size_t kHistoryBuckets = 60;
inline constexpr Nanos kHistoryBucketWidth = 5 * kNanosPerSecond;

// One bucket as history() reports it.
struct ActivityBucket {
  std::int64_t index = -1;  // start time / kHistoryBucketWidth
  std::uint32_t calls = 0, failures = 0, slow = 0, rejected = 0;
};

// Bucket k (the one holding times [k * width, (k + 1) * width)) lives in slot
// k % kHistoryBuckets. Every slot holds one of the buckets newest_ - 59 ...
// newest_ (moving on empties the slots skipped), so a slot's bucket number is
// implied and not stored. Bucket numbers fit in 32 bits: clock readings stay
// below kMaxClockSeconds, 8e8 buckets.
class ActivityHistory {
 public:
  void add_result(Nanos now, bool failed, bool slow) noexcept {
    Counts* b = bucket_at(now);
    if (b == nullptr) return;
    ++b->calls;
    b->failures += failed;
    b->slow += slow;
  }
  void add_rejection(Nanos now, std::uint64_t n = 1) noexcept {
    if (Counts* b = bucket_at(now)) {
      const std::uint64_t sum = b->rejected + n;  // a bucket's count saturates
      b->rejected = sum > UINT32_MAX ? UINT32_MAX : static_cast<std::uint32_t>(sum);
    }
  }

  // Copies the buckets still in the history at `now`, oldest first; returns
  // how many (at most kHistoryBuckets). Buckets without activity are skipped.
  std::size_t recent(Nanos now, ActivityBucket* out) const noexcept {
    const std::int64_t k = now / kHistoryBucketWidth;
    const std::int64_t newest = newest_;
    std::int64_t first = k - kSpan + 1;
    if (first < newest - kSpan + 1) first = newest - kSpan + 1;
    if (first < 0) first = 0;
    const std::int64_t last = k < newest ? k : newest;
    std::size_t n = 0;
    for (std::int64_t i = first; i <= last; ++i) {
      const Counts& b = slots_[slot(i)];
      if (b.calls | b.failures | b.slow | b.rejected) {
        out[n++] = ActivityBucket{i, b.calls, b.failures, b.slow, b.rejected};
      }
    }
    return n;
  }

  // Whether the newest bucket is one a clock reading can fall in. (Every
  // other value is safe to use: slots are taken modulo the span and every
  // loop is bounded by it; this keeps a forged future bucket from hiding all
  // activity.)
  bool valid() const noexcept {
    return static_cast<Nanos>(newest_) <= kMaxClockNanos / kHistoryBucketWidth;
  }

 private:
  static constexpr std::int64_t kSpan = static_cast<std::int64_t>(kHistoryBuckets);
  struct Counts {
    std::uint32_t calls, failures, slow, rejected;
  };
  static std::size_t slot(std::int64_t k) noexcept {
    return static_cast<std::size_t>(k % kSpan);
  }

  // The counts of the bucket holding `now`; nullptr when that bucket is
  // already out of the history (a reading older than five minutes before
  // the newest one).
  Counts* bucket_at(Nanos now) noexcept {
    const std::int64_t k = now / kHistoryBucketWidth;
    const std::int64_t newest = newest_;
    if (k > newest) {
      const std::int64_t first = k - newest > kSpan ? k - kSpan + 1 : newest + 1;
      for (std::int64_t i = first; i <= k; ++i) slots_[slot(i)] = Counts{0, 0, 0, 0};
      newest_ = static_cast<std::uint32_t>(k);
    } else if (k <= newest - kSpan) {
      return nullptr;
    }
    return &slots_[slot(k)];
  }

  Counts slots_[kHistoryBuckets] = {};
  std::uint32_t newest_ = 0;  // number of the newest bucket
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HISTORY_HPP
