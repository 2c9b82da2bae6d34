// A bounded history of state transitions, for events and for plotting.
#ifndef CIRCUITBREAKER_TRANSITION_LOG_HPP
#define CIRCUITBREAKER_TRANSITION_LOG_HPP

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <cstring>

#include "types.hpp"

namespace circuitbreaker {

// Why the breaker moved, kept with each entry of the log: its own rules and
// controls (a trip, a probe's result, an expiry, a reset, a manual control,
// a fleet's word), or a passing health check (health.hpp).
enum class TransitionReason : std::uint8_t { Rules = 0, HealthCheck = 1 };

struct Transition {
  std::uint64_t seq = 0;  // 1, 2, 3, ... over the breaker's life
  Nanos at = 0;
  State from = State::Closed;
  State to = State::Closed;
  bool by_health_check = false;  // the entry's reason is HealthCheck
};

// The last kCapacity transitions in a ring. A transition's seq is not stored:
// the one of seq s sits at ring position (s - 1) % kCapacity, and the kept
// ones are last_seq - kCapacity + 1 ... last_seq. Times, states and reasons
// are kept in separate arrays so that nothing is padding.
class TransitionLog {
 public:
  static constexpr std::size_t kCapacity = 32;

  void push(Nanos at, State from, State to,
            TransitionReason why = TransitionReason::Rules) noexcept {
    const std::size_t i = last_seq_ % kCapacity;
    at_[i] = at;
    from_[i] = from;
    to_[i] = to;
    reason_[i] = why;
    ++last_seq_;
  }
  std::uint64_t last_seq() const noexcept { return last_seq_; }

  // Copies the transitions with seq > `after`, oldest first, into `out`
  // (at most `max` of them, the newest kept when more are available).
  std::size_t since(std::uint64_t after, Transition* out,
                    std::size_t max) const noexcept {
    if (after >= last_seq_ || max == 0) return 0;  // also keeps after + 1 from wrapping
    std::uint64_t first = after + 1;
    const std::uint64_t oldest_kept =
        last_seq_ > kCapacity ? last_seq_ - kCapacity + 1 : 1;
    if (first < oldest_kept) first = oldest_kept;
    if (last_seq_ - first + 1 > max) first = last_seq_ - max + 1;
    std::size_t n = 0;
    for (std::uint64_t s = first; s <= last_seq_; ++s) {
      const std::size_t i = static_cast<std::size_t>((s - 1) % kCapacity);
      out[n++] = Transition{s, at_[i], from_[i], to_[i],
                            reason_[i] == TransitionReason::HealthCheck};
    }
    return n;
  }

  // Whether every kept state is a State (a log read from shared memory; the
  // sequence number may be anything: since() bounds its loop by `max`; a
  // reason is only compared, so any byte is safe).
  // Eight states at a time (it runs under the lock on every call): a byte b
  // is below kStateCount iff neither b nor b + (0x80 - kStateCount) has its
  // high bit set (a carry into the next byte needs b >= 0x80 + kStateCount,
  // whose own high bit is set).
  bool valid() const noexcept {
    static_assert(sizeof(State) == 1 && kCapacity % 8 == 0, "whole words of states");
    constexpr std::uint64_t kOnes = 0x0101010101010101ull;
    constexpr std::uint64_t kAdd = (0x80 - kStateCount) * kOnes;
    constexpr std::uint64_t kHigh = 0x80 * kOnes;
    std::uint64_t bad = 0;
    for (const State* states : {from_, to_}) {
      for (std::size_t i = 0; i < kCapacity; i += 8) {
        std::uint64_t w;
        std::memcpy(&w, states + i, sizeof w);
        bad |= (w | (w + kAdd)) & kHigh;
      }
    }
    return bad == 0;
  }

 private:
  Nanos at_[kCapacity] = {};
  std::uint64_t last_seq_ = 0;
  State from_[kCapacity] = {};
  State to_[kCapacity] = {};
  TransitionReason reason_[kCapacity] = {};
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_TRANSITION_LOG_HPP
