// A small deterministic generator for jitter. Deterministic so that a seeded
// breaker (and the reference model in tests/cpp) sees the same open durations.
#ifndef CIRCUITBREAKER_RANDOM_HPP
#define CIRCUITBREAKER_RANDOM_HPP

#include <cstdint>

namespace circuitbreaker {

// SplitMix64 (Steele, Lea and Flood 2014): one 64-bit word of state.
inline std::uint64_t splitmix64(std::uint64_t& state) noexcept {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A double uniform in [0, 1), from the top 53 bits.
inline double uniform01(std::uint64_t& state) noexcept {
  return static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_RANDOM_HPP
