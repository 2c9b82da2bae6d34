// A small deterministic generator for jitter, and where its seed comes from.
// Deterministic so that a breaker given an rng_seed (and the reference model
// in tests/cpp) sees the same open durations; seeded from entropy otherwise.
#ifndef CIRCUITBREAKER_RANDOM_HPP
#define CIRCUITBREAKER_RANDOM_HPP

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>

namespace circuitbreaker {

// SplitMix64 (Steele, Lea and Flood 2014): one 64-bit word of state.
inline constexpr std::uint64_t kSplitMixGamma = 0x9e3779b97f4a7c15ULL;  // 2^64 / phi
inline constexpr std::uint64_t kSplitMixMul1 = 0xbf58476d1ce4e5b9ULL;
inline constexpr std::uint64_t kSplitMixMul2 = 0x94d049bb133111ebULL;

inline std::uint64_t splitmix64(std::uint64_t& state) noexcept {
  std::uint64_t z = (state += kSplitMixGamma);
  z = (z ^ (z >> 30)) * kSplitMixMul1;
  z = (z ^ (z >> 27)) * kSplitMixMul2;
  return z ^ (z >> 31);
}

// A double uniform in [0, 1), from the top 53 bits (a double's precision).
inline constexpr int kDoubleMantissaBits = 53;
inline constexpr double kTwoToMinus53 = 0x1.0p-53;

inline double uniform01(std::uint64_t& state) noexcept {
  return static_cast<double>(splitmix64(state) >> (64 - kDoubleMantissaBits)) *
         kTwoToMinus53;
}

// `digits` random lower-case hex digits (a token, an id), 16 from each
// word of the generator (its top bits for a last, shorter group).
inline std::string random_hex(std::uint64_t& state, int digits) {
  std::string out;
  char buf[20];
  for (int left = digits; left > 0; left -= 16) {
    const int n = left < 16 ? left : 16;
    const std::uint64_t word = splitmix64(state) >> (64 - 4 * n);
    std::snprintf(buf, sizeof buf, "%0*llx", n, static_cast<unsigned long long>(word));
    out += buf;
  }
  return out;
}

// A seed nobody chose: std::random_device, mixed with the steady clock and a
// per-process counter, so that two breakers made in the same nanosecond (or
// on a platform whose random_device is deterministic, or throws) still differ.
inline std::uint64_t entropy_seed() noexcept {
  static std::atomic<std::uint64_t> counter{0};
  std::uint64_t s = counter.fetch_add(1, std::memory_order_relaxed) * kSplitMixGamma;
  s ^= static_cast<std::uint64_t>(
      std::chrono::steady_clock::now().time_since_epoch().count());
  try {
    std::random_device rd;
    s ^= (static_cast<std::uint64_t>(rd()) << 32) ^ static_cast<std::uint64_t>(rd());
  } catch (...) {
    // No entropy source: the clock and the counter remain.
  }
  return splitmix64(s);
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_RANDOM_HPP
