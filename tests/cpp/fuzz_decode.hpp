// The byte format of the fuzzer's inputs (fuzz_breaker.cpp), shared with the
// program that writes the seed corpus (make_fuzz_corpus.cpp).
//
// Every byte string decodes to something: a reader past the end yields zeros.
//
//   input  := config start op*
//   config := 0xFF                      the defaults (Config{}, rng_seed 0)
//           | scale field{16}           scale: byte % 10 picks a typical
//                                       duration; each field decodes itself
//   start  := byte [u64]                the clock's first reading
//   op     := byte args                 byte % 32 through kOpTable
//
// Numbers inside fields are picked from small tables of interesting values
// (boundaries, the defaults, exact nanoseconds, values that round to
// 0 ns) most of the time, and read raw (8 bytes as a double) sometimes, so
// that invalid values reach validate() too. A configuration that validate()
// rejects after fix() ends the input (the initial one) or is skipped (a
// reconfigure), as a binding would refuse it.
#ifndef CIRCUITBREAKER_TESTS_FUZZ_DECODE_HPP
#define CIRCUITBREAKER_TESTS_FUZZ_DECODE_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>

#include <circuitbreaker/config.hpp>
#include <circuitbreaker/types.hpp>

namespace cbfuzz {

namespace cb = circuitbreaker;

class Reader {
 public:
  Reader(const std::uint8_t* data, std::size_t size) : p_(data), n_(size) {}
  bool done() const { return i_ >= n_; }
  std::size_t position() const { return i_; }
  std::uint8_t u8() { return i_ < n_ ? p_[i_++] : 0; }
  std::uint16_t u16() {
    const std::uint16_t lo = u8();
    return static_cast<std::uint16_t>(lo | (std::uint16_t{u8()} << 8));
  }
  std::uint64_t u64() {
    std::uint64_t v = 0;
    for (int k = 0; k < 8; ++k) v |= std::uint64_t{u8()} << (8 * k);
    return v;
  }
  double f64() {
    const std::uint64_t bits = u64();
    double d;
    std::memcpy(&d, &bits, sizeof d);
    return d;
  }

 private:
  const std::uint8_t* p_;
  std::size_t n_;
  std::size_t i_ = 0;
};

// ---------------------------------------------------------------------------
// Operations.

enum class Op : std::uint8_t {
  Acquire,       // -
  AcquireLease,  // lease-byte [u64]: acquire(now, probe_lease)
  Record,        // permit-byte outcome-byte open_for-byte [u64]
  Release,       // permit-byte
  Note,          // outcome-byte
  Advance,       // advance-byte [args]
  Reset,         // -
  ForceOpen,     // -
  Disable,       // -
  Reconfigure,   // mode-byte (config | field-byte field-bytes [field-byte field-bytes])
  Snapshot,      // advance-byte [args]: compare at a later time without moving the clock
  Transitions,   // after-byte max-byte
  HealthClaim,   // -: claim_health_check(now), the claim kept
  HealthResult,  // claim-byte passed-byte: health_result() of a kept claim
  kCount
};

inline constexpr int kOpCodes = 32;
inline constexpr Op kOpTable[kOpCodes] = {
    Op::Acquire,      Op::Acquire,      Op::Acquire,     Op::Acquire,      Op::Acquire,
    Op::AcquireLease, Op::AcquireLease, Op::Record,      Op::Record,       Op::Record,
    Op::Record,       Op::Record,       Op::Record,      Op::HealthClaim,  Op::Release,
    Op::Release,      Op::Note,         Op::Note,        Op::Advance,      Op::Advance,
    Op::Advance,      Op::Advance,      Op::Advance,     Op::HealthResult, Op::Reset,
    Op::ForceOpen,    Op::Disable,      Op::Reconfigure, Op::Snapshot,     Op::Snapshot,
    Op::Transitions,  Op::Transitions};

// The first byte of each operation in kOpTable (for writing seeds).
inline std::uint8_t op_byte(Op op) {
  for (std::uint8_t i = 0; i < kOpCodes; ++i) {
    if (kOpTable[i] == op) return i;
  }
  return 0;
}

inline cb::Outcome decode_outcome(std::uint8_t b) {
  const unsigned v = b % 20u;
  return v < 9 ? cb::Outcome::Success
               : (v < 18 ? cb::Outcome::Failure : cb::Outcome::Ignored);
}

// ---------------------------------------------------------------------------
// Configurations.

inline constexpr double kScales[10] = {1e-9, 1e-8, 1e-6, 1e-3, 0.1,
                                       1,    30,   3600, 1e6,  1e9};
// The 15 arguments of the argument table but max_concurrent and max_wait
// (14 rules and health_interval), then rng_seed, then the bulkhead
// (max_concurrent; max_wait is the binding's and stays 0).
inline constexpr int kConfigFields = 17;
inline constexpr std::uint8_t kDefaultsByte = 0xFF;

class ConfigDecoder {
 public:
  explicit ConfigDecoder(Reader& r) : r_(r) {}

  // A whole configuration; nullopt when it is not valid (after fix()).
  std::optional<cb::Config> fresh() {
    const std::uint8_t s = r_.u8();
    if (s == kDefaultsByte) {
      cb::Config c;
      c.rng_seed = 0;  // the model needs a known seed
      return c;
    }
    scale_ = kScales[s % 10];
    cb::Config c;
    for (int f = 0; f < kConfigFields; ++f) field(c, f);
    return finish(c);
  }

  // `c` with one or two fields decoded anew; nullopt when not valid.
  std::optional<cb::Config> mutate(cb::Config c) {
    const std::uint8_t mode = r_.u8();
    if (mode >= 192) return fresh();
    const int n = mode < 128 ? 1 : 2;
    for (int i = 0; i < n; ++i) field(c, r_.u8() % kConfigFields);
    return finish(c);
  }

  double scale() const { return scale_; }

 private:
  std::optional<cb::Config> finish(cb::Config c) {
    // The cross-field rules a caller usually honours.
    if (c.max_recovery_timeout && *c.max_recovery_timeout < c.recovery_timeout) {
      c.max_recovery_timeout = c.recovery_timeout;
    }
    if (c.minimum_calls && c.window_type == cb::WindowType::Count &&
        *c.minimum_calls > cb::effective_window_size(c)) {
      c.minimum_calls = cb::effective_window_size(c);
    }
    if (!c.rng_seed) c.rng_seed = 0;  // the model needs a known seed
    if (cb::validate(c)) return std::nullopt;
    return c;
  }

  double duration(bool allow_zero) {
    const std::uint8_t s = r_.u8();
    switch (s % 16) {
      case 0: return allow_zero ? 0.0 : scale_;
      case 1: return scale_;
      case 2: return scale_ * 0.5;
      case 3: return scale_ * 2;
      case 4: return scale_ * 10;
      case 5: return 1e-9;     // exactly one nanosecond
      case 6: return 2.5e-9;   // rounds to 3 ns
      case 7: return 4.9e-10;  // valid where zero is not, yet rounds to 0 ns
      case 8: return cb::kMaxSeconds;
      case 9: return r_.f64();  // anything; validate() decides
      case 10: return static_cast<double>(r_.u16()) * 1e-9;
      default: return scale_ * 3 * static_cast<double>(r_.u8()) / 255;
    }
  }

  double rate() {
    const std::uint8_t s = r_.u8();
    switch (s % 8) {
      case 0: return 1;
      case 1: return 0.5;
      case 2: return 0.3;
      case 3: return 0.25;
      case 4: return 0.1;
      case 5: return 1e-9;
      case 6: return r_.f64();
      default: return static_cast<double>(r_.u8() + 1) / 256;
    }
  }

  // Present with probability about `present`/256.
  bool present(int threshold) { return r_.u8() < threshold; }

  void field(cb::Config& c, int f) {
    switch (f) {
      case 0: {
        const std::uint8_t s = r_.u8();
        static constexpr double v[] = {1, 2, 3, 5, 10, 1e300};
        switch (s % 9) {
          case 6: c.failure_threshold = std::numeric_limits<double>::infinity(); break;
          case 7: c.failure_threshold = static_cast<double>(r_.u8()) + 1; break;
          case 8: c.failure_threshold = r_.f64(); break;
          default: c.failure_threshold = v[s % 9];
        }
        break;
      }
      case 1: c.recovery_timeout = duration(true); break;
      case 2:
        if (present(140))
          c.failure_rate_threshold = rate();
        else
          c.failure_rate_threshold.reset();
        break;
      case 3:
        c.window_type = (r_.u8() & 1) ? cb::WindowType::Time : cb::WindowType::Count;
        break;
      case 4:
        c.window_size.reset();
        if (!present(220)) break;
        if (c.window_type == cb::WindowType::Count) {
          const std::uint8_t s = r_.u8();
          static constexpr double v[] = {1, 2, 3, 4, 5, 10, 20, 100, 1024};
          c.window_size = s < 128 ? v[s % 9] : static_cast<double>(s - 127);
        } else {
          double w = duration(false);
          if (w < 1e-6 && w == w && r_.u8() < 200) w = 1e-6;  // mostly made valid
          c.window_size = w;
        }
        break;
      case 5:
        c.minimum_calls.reset();
        if (present(190)) {
          const std::uint8_t s = r_.u8();
          c.minimum_calls = s < 250 ? static_cast<double>(s % 40 + 1) : r_.f64();
        }
        break;
      case 6:
        if (present(150))
          c.slow_call_duration = duration(false);
        else
          c.slow_call_duration.reset();
        break;
      case 7:
        if (present(130))
          c.slow_call_rate_threshold = rate();
        else
          c.slow_call_rate_threshold.reset();
        break;
      case 8: {
        const std::uint8_t s = r_.u8();
        static constexpr double v[] = {1, 1, 2, 3, 5, 32};
        c.half_open_max_calls =
            s < 160 ? v[s % 6] : static_cast<double>(s % 34);  // 0, 33: invalid
        break;
      }
      case 9:
        if (present(150))
          c.half_open_max_wait = duration(false);
        else
          c.half_open_max_wait.reset();
        break;
      case 10: {
        const std::uint8_t s = r_.u8();
        static constexpr double v[] = {1, 1, 1, 1.5, 2, 3, 10, 1e6};
        c.backoff_multiplier =
            s < 200 ? v[s % 8] : 1 + 3 * static_cast<double>(r_.u8()) / 255;
        break;
      }
      case 11: {
        c.max_recovery_timeout.reset();
        const std::uint8_t s = r_.u8();
        const double rt = c.recovery_timeout;
        switch (s % 8) {
          case 0:
          case 1:
          case 2: break;  // no cap
          case 3: c.max_recovery_timeout = rt; break;
          case 4: c.max_recovery_timeout = rt * 2; break;
          case 5: c.max_recovery_timeout = rt * 10; break;
          case 6: c.max_recovery_timeout = rt + duration(true); break;
          default: c.max_recovery_timeout = cb::kMaxSeconds;
        }
        if (c.max_recovery_timeout && *c.max_recovery_timeout > cb::kMaxSeconds) {
          c.max_recovery_timeout = cb::kMaxSeconds;
        }
        break;
      }
      case 12: {
        const std::uint8_t s = r_.u8();
        static constexpr double v[] = {0, 0, 0, 0.1, 0.5, 1};
        c.jitter = s < 200 ? v[s % 6] : static_cast<double>(r_.u8()) / 255;
        break;
      }
      case 13: c.ramp_up = (r_.u8() & 1) ? duration(true) : 0.0; break;
      case 14: c.health_interval = duration(false); break;
      case 15: c.rng_seed = r_.u64(); break;
      default: {  // the bulkhead: 0 none, else 1 to 4 permits or share(0.5)
        const std::uint8_t s = r_.u8();
        if (s == 0) {
          c.max_concurrent.reset();
        } else if (s % 5 == 0) {
          c.max_concurrent = -0.5;
        } else {
          c.max_concurrent = static_cast<double>(s % 5);
        }
        break;
      }
    }
  }

  Reader& r_;
  double scale_ = 1;
};

}  // namespace cbfuzz

#endif  // CIRCUITBREAKER_TESTS_FUZZ_DECODE_HPP
