// libFuzzer target: a host segment is untrusted input.
//
// Each input opens a fresh segment file (in a private temporary directory)
// with one of a few configurations and runs HostBreaker operations from the
// input: acquire, record, release, note, reset, force_open, disable,
// snapshot, transitions_since, history, and re-attaching (init_or_attach())
// and listing (inspect_segment()) the file. Between operations it writes
// fuzz-chosen bytes at fuzz-chosen offsets of the live segment, through a
// second mapping of the file, as another process could: anywhere in the
// segment, or aimed at the header, the robust mutex, the control words, or
// the indices of the committed state (window positions, probe mask, state
// enum, bools, times).
//
// What must hold: no crash, no sanitizer report (ASan, UBSan), no hang. The
// segment's lock waits at most kLockWait (5 ms) for a held mutex, so that an
// input with a forged owner word costs at most kMaxOps * kLockWait; the make
// target runs with -timeout=10. After an operation, take_fault() says Busy or
// Corrupt; a corrupt breaker is used no further (as the R binding does), and
// the input re-attaches instead, which must refuse the file or attach to a
// usable segment.
//
//   make -C tests/cpp fuzz-segment FUZZ_SECONDS=60
//   build/fuzz/fuzz_segment CRASH_FILE      replay one input
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <circuitbreaker/host/host_breaker.hpp>

namespace {

namespace cb = circuitbreaker;
using cb::Nanos;

constexpr std::chrono::nanoseconds kLockWait = std::chrono::milliseconds(5);
constexpr std::size_t kMaxOps = 400;  // at most 2 s of lock waits per input
constexpr std::size_t kMaxPermits = 8;

// The fuzzer's private directory, made once (in $CB_FUZZ_SEGMENT_DIR, which
// the make target creates and removes, else in /tmp) and removed at a normal
// exit (libFuzzer's workers and a crash do not run atexit handlers: hence
// the make target's directory).
const std::string& segment_path() {
  static const std::string path = []() {
    const char* parent = std::getenv("CB_FUZZ_SEGMENT_DIR");
    std::string tmpl =
        std::string(parent != nullptr ? parent : "/tmp") + "/cb-fuzz-segment-XXXXXX";
    const char* dir = ::mkdtemp(tmpl.data());
    if (dir == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    static std::string d = dir;
    std::atexit([]() {
      ::unlink((d + "/cb-fuzz").c_str());
      ::rmdir(d.c_str());
    });
    return d + "/cb-fuzz";
  }();
  return path;
}

cb::Config config_for(std::uint8_t which) {
  cb::Config c;
  c.rng_seed = 7;
  c.failure_threshold = 3;
  c.recovery_timeout = 1;
  switch (which % 4) {
    case 0: break;  // the seed's rule only
    case 1:         // count window rates, slow calls, several probes
      c.failure_rate_threshold = 0.5;
      c.window_size = 10;
      c.minimum_calls = 4;
      c.slow_call_duration = 0.5;
      c.slow_call_rate_threshold = 0.5;
      c.half_open_max_calls = 3;
      c.half_open_max_wait = 2;
      c.max_concurrent = 2;  // a bulkhead, whose permits the bytes may overwrite
      break;
    case 2:  // time window, backoff, jitter, ramp-up
      c.window_type = cb::WindowType::Time;
      c.failure_rate_threshold = 0.5;
      c.window_size = 10;
      c.minimum_calls = 3;
      c.backoff_multiplier = 2;
      c.max_recovery_timeout = 60;
      c.jitter = 0.5;
      c.ramp_up = 5;
      break;
    default:  // many probes with leases, a bulkhead of share(0.5)
      c.half_open_max_calls = 5;
      c.failure_threshold = 1;
      c.max_concurrent = -0.5;
      break;
  }
  return c;
}

// Reads the input a byte at a time; 0 once it runs out.
class Input {
 public:
  Input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  bool more() const noexcept { return pos_ < size_; }
  std::uint8_t byte() noexcept { return pos_ < size_ ? data_[pos_++] : 0; }
  std::uint32_t u16() noexcept {
    const std::uint32_t lo = byte();
    return lo | (static_cast<std::uint32_t>(byte()) << 8);
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

// Offsets worth aiming at: where a single changed byte has meant a crash or
// a hang.
std::size_t aimed_offset(std::uint8_t which, std::uint32_t within) {
  const std::size_t control = offsetof(cb::Segment, control);
  const std::size_t slot = offsetof(cb::Segment, slots) +
                           (within & 1u) * sizeof(cb::SegmentSlot) +
                           offsetof(cb::SegmentSlot, state);
  switch (which % 8) {
    case 0: return within % sizeof(cb::SegmentHeader);
    case 1: return control + within % sizeof(cb::RobustMutex);  // the mutex
    case 2: return control + offsetof(cb::SegmentControl, seq) + within % 8;
    case 3: return control + offsetof(cb::SegmentControl, committed) + within % 12;
    case 4:
      return slot + offsetof(cb::BreakerState, count_window) +
             cb::CountWindow::position_offset() + within % 8;
    case 5: return slot + offsetof(cb::BreakerState, state) + within % 24;
    case 6: return slot + offsetof(cb::BreakerState, probes) + within % 8;
    default: return slot + (within >> 1) % sizeof(cb::BreakerState);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input in(data, size);
  const std::string& path = segment_path();
  ::unlink(path.c_str());
  const cb::Config config = config_for(in.byte());

  Nanos now = 1000;
  cb::HostBreaker hb;
  hb.set_lock_wait(kLockWait);
  if (!hb.open(path, config, now).ok()) std::abort();  // a fresh file must open
  cb::SegmentMapping view;  // another process's view: the writer
  if (view.open_file(path.c_str(), 0, false) != 0) std::abort();
  auto* raw = static_cast<unsigned char*>(view.data());

  cb::Permit permits[kMaxPermits];
  std::size_t held = 0;
  int reattached = 0;  // at most once: a forged "initialising" word costs 2 s
  for (std::size_t op = 0; op < kMaxOps && in.more(); ++op) {
    const std::uint8_t code = in.byte();
    now += static_cast<Nanos>(in.byte()) * 50 * cb::kNanosPerMs;
    switch (code % 16) {
      case 0:
      case 1: {  // a byte anywhere
        raw[in.u16() % sizeof(cb::Segment)] = in.byte();
        continue;
      }
      case 2:
      case 3: {  // a byte where it hurts
        const std::uint8_t which = in.byte();
        raw[aimed_offset(which, in.u16())] = in.byte();
        continue;
      }
      case 4: {  // a 32-bit word where it hurts (an owner tid, an index)
        const std::uint8_t which = in.byte();
        std::size_t at = aimed_offset(which, in.u16()) & ~std::size_t{3};
        std::uint32_t w = in.u16() | (in.u16() << 16);
        if ((in.byte() & 1) != 0) w = static_cast<std::uint32_t>(::getpid());
        std::memcpy(raw + at, &w, sizeof w);
        continue;
      }
      case 5: {  // listing the store reads the file as it is
        (void)cb::inspect_segment(view.data(), view.size());
        continue;
      }
      default: break;
    }
    if (!hb.is_open()) {
      // Re-attach, as a new process (or a restored breaker) would.
      if (reattached++ > 0) break;
      hb.open(path, config, now);
      continue;
    }
    switch (code % 16) {
      case 6:
      case 7:
      case 8: {
        const cb::Admission a =
            hb.acquire(now, (code & 16) ? cb::kNever : cb::kNanosPerSecond);
        if (a.permitted && held < kMaxPermits) permits[held++] = a.permit;
        break;
      }
      case 9:
      case 10:
        if (held > 0) {
          const cb::Permit p = permits[--held];
          hb.record(
              p, static_cast<cb::Outcome>(in.byte() % 3), now,
              (code & 16) ? static_cast<Nanos>(in.byte()) * cb::kNanosPerSecond : -1);
        }
        break;
      case 11:
        if (held > 0) hb.release(permits[--held], now);
        break;
      case 12: hb.note(static_cast<cb::Outcome>(in.byte() % 3), now); break;
      case 13:
        switch (in.byte() % 3) {
          case 0: hb.reset(now); break;
          case 1: hb.force_open(now); break;
          default: hb.disable(now); break;
        }
        break;
      case 14: {
        const cb::Snapshot s = hb.snapshot(now);
        (void)cb::state_name(s.state);
        cb::Transition t[cb::TransitionLog::kCapacity];
        const std::size_t n =
            hb.transitions_since(in.byte(), t, cb::TransitionLog::kCapacity);
        for (std::size_t i = 0; i < n; ++i) (void)cb::state_name(t[i].to);
        break;
      }
      default: {
        cb::ActivityBucket b[cb::kHistoryBuckets];
        (void)hb.history(now, b);
        (void)hb.recoveries();
        break;
      }
    }
    // As the R binding does: a corrupt breaker is not used again (the next
    // operation re-attaches); a busy one is tried again.
    if (hb.take_fault() == cb::SegmentFault::Corrupt || !hb.healthy()) {
      hb.close();
      held = 0;
    }
  }
  hb.close();
  return 0;
}
