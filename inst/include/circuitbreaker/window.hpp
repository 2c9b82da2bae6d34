// Sliding windows over recent calls, for the failure-rate and slow-call-rate
// rules. Both keep running totals, so adding a call and reading the totals are
// O(1) (the time window clears at most kTimeWindowBuckets stale buckets when
// time jumps). Both are fixed-size arrays: no allocation, ever.
#ifndef CIRCUITBREAKER_WINDOW_HPP
#define CIRCUITBREAKER_WINDOW_HPP

#include <cstddef>
#include <cstdint>

#include "config.hpp"
#include "types.hpp"

namespace circuitbreaker {

struct WindowTotals {
  std::uint64_t calls = 0;
  std::uint64_t failures = 0;
  std::uint64_t slow = 0;
};

// The last N calls. Each call is two bits (failed, slow) in two ring bitsets.
class CountWindow {
 public:
  void clear() noexcept { *this = CountWindow{}; }

  void add(std::uint32_t capacity, bool failed, bool slow) noexcept {
    if (filled_ == capacity) {  // full: the oldest call falls out
      totals_.failures -= get(failed_bits_, next_);
      totals_.slow -= get(slow_bits_, next_);
    } else {
      ++filled_;
      ++totals_.calls;
    }
    set(failed_bits_, next_, failed);
    set(slow_bits_, next_, slow);
    totals_.failures += failed;
    totals_.slow += slow;
    next_ = (next_ + 1 == capacity) ? 0 : next_ + 1;
  }

  const WindowTotals& totals() const noexcept { return totals_; }

  // Whether the positions are within a window of `capacity` calls (at most
  // kMaxCountWindow; 0 for a breaker that keeps no count window: positions
  // within the array). A block read from shared memory is checked before
  // add() indexes the bitsets with next_.
  bool valid(std::uint32_t capacity) const noexcept {
    const std::uint32_t cap = capacity == 0 ? kMaxCountWindow : capacity;
    return cap <= kMaxCountWindow && next_ < cap && filled_ <= cap;
  }

  // Where the position of the next call sits in the object (for tests that
  // damage a block on purpose).
  static constexpr std::size_t position_offset() noexcept {
    return offsetof(CountWindow, next_);
  }

 private:
  static constexpr std::uint32_t kBitsPerWord = 64;
  static constexpr std::uint32_t kWords = kMaxCountWindow / kBitsPerWord;
  static_assert(kMaxCountWindow % kBitsPerWord == 0, "whole words of calls");
  static std::uint64_t get(const std::uint64_t* bits, std::uint32_t i) noexcept {
    return (bits[i / kBitsPerWord] >> (i % kBitsPerWord)) & 1u;
  }
  static void set(std::uint64_t* bits, std::uint32_t i, bool v) noexcept {
    const std::uint64_t mask = std::uint64_t{1} << (i % kBitsPerWord);
    std::uint64_t& w = bits[i / kBitsPerWord];
    w = v ? (w | mask) : (w & ~mask);
  }

  std::uint64_t failed_bits_[kWords] = {};
  std::uint64_t slow_bits_[kWords] = {};
  std::uint32_t next_ = 0;    // where the next call goes
  std::uint32_t filled_ = 0;  // calls held, up to the capacity
  WindowTotals totals_;
};

// The last S seconds in kTimeWindowBuckets buckets of S / kTimeWindowBuckets
// each. Bucket k holds the calls made in [k * width, (k + 1) * width); the
// window at time t holds buckets k with  k_t - B < k <= k_t, where k_t is the
// bucket of t. Old buckets leave the window as time passes, whether or not a
// call arrives: totals_at() accounts for time without changing anything.
// Bucket k lives in slot k % B, and every slot holds one of the buckets
// head_ - B + 1 ... head_ (moving the head empties the slots it skips), so a
// slot's bucket number is implied and not stored.
class TimeWindow {
 public:
  void clear() noexcept { *this = TimeWindow{}; }

  void add(Nanos width, Nanos now, bool failed, bool slow) noexcept {
    advance(width, now);
    Bucket& b = buckets_[slot(head_)];
    ++b.calls;
    b.failures += failed;
    b.slow += slow;
    ++totals_.calls;
    totals_.failures += failed;
    totals_.slow += slow;
  }

  // Totals of the window as seen at `now` (>= the last add's time).
  WindowTotals totals_at(Nanos width, Nanos now) const noexcept {
    const std::int64_t k = bucket_of(width, now);
    if (k == head_) return totals_;
    WindowTotals t;
    for (std::int64_t i = head_; i > head_ - kB && i >= 0; --i) {
      if (i <= k - kB || i > k) continue;
      const Bucket& b = buckets_[slot(i)];
      t.calls += b.calls;
      t.failures += b.failures;
      t.slow += b.slow;
    }
    return t;
  }

  // Whether the head is a bucket number a clock reading can have with
  // buckets of `width` (0: a breaker that keeps no time window, any
  // non-negative head). slot() of a negative head would index before the
  // array.
  bool valid(Nanos width) const noexcept {
    if (head_ < 0) return false;
    return width <= 0 || head_ <= kMaxClockNanos / width;
  }

 private:
  static constexpr std::int64_t kB = kTimeWindowBuckets;
  struct Bucket {
    std::uint32_t calls = 0, failures = 0, slow = 0;
  };

  static std::int64_t bucket_of(Nanos width, Nanos now) noexcept {
    return now / width;  // clock readings are never negative
  }
  static std::size_t slot(std::int64_t k) noexcept {
    return static_cast<std::size_t>(k % kB);
  }

  // Moves the head to the bucket of `now`, emptying the buckets that fall out.
  void advance(Nanos width, Nanos now) noexcept {
    const std::int64_t k = bucket_of(width, now);
    if (k <= head_) return;
    const std::int64_t first = (k - head_ > kB) ? k - kB + 1 : head_ + 1;
    for (std::int64_t i = first; i <= k; ++i) {
      Bucket& b = buckets_[slot(i)];
      totals_.calls -= b.calls;
      totals_.failures -= b.failures;
      totals_.slow -= b.slow;
      b = Bucket{};
    }
    if (k - head_ > kB) {  // a jump past the whole window: nothing is left
      totals_ = WindowTotals{};
    }
    head_ = k;
  }

  std::int64_t head_ = 0;  // bucket index of the newest call
  WindowTotals totals_;
  Bucket buckets_[kTimeWindowBuckets] = {};
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_WINDOW_HPP
