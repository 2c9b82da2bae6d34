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

struct ActivityBucket {
  std::int64_t index = -1;  // start time / kHistoryBucketWidth; -1: unused
  std::uint32_t calls = 0, failures = 0, slow = 0, rejected = 0;
};

class ActivityHistory {
 public:
  void add_result(Nanos now, bool failed, bool slow) noexcept {
    ActivityBucket& b = bucket_at(now);
    ++b.calls;
    b.failures += failed;
    b.slow += slow;
  }
  void add_rejection(Nanos now) noexcept { ++bucket_at(now).rejected; }

  // Copies the buckets still in the history at `now`, oldest first; returns
  // how many (at most kHistoryBuckets). Buckets without activity are skipped.
  std::size_t recent(Nanos now, ActivityBucket* out) const noexcept {
    const std::int64_t k = now / kHistoryBucketWidth;
    const std::int64_t first = k - static_cast<std::int64_t>(kHistoryBuckets) + 1;
    std::size_t n = 0;
    for (std::int64_t i = first; i <= k; ++i) {
      if (i < 0) continue;
      const ActivityBucket& b = buckets_[static_cast<std::size_t>(i) % kHistoryBuckets];
      if (b.index == i) out[n++] = b;
    }
    return n;
  }

 private:
  ActivityBucket& bucket_at(Nanos now) noexcept {
    const std::int64_t k = now / kHistoryBucketWidth;
    ActivityBucket& b = buckets_[static_cast<std::size_t>(k) % kHistoryBuckets];
    if (b.index != k) b = ActivityBucket{k, 0, 0, 0, 0};
    return b;
  }

  ActivityBucket buckets_[kHistoryBuckets] = {};
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HISTORY_HPP
