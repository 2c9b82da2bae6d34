// A breaker's state in a shared-memory mapping: the host store's core.
//
// Every process on a host that maps the same file (or POSIX shm object) and
// attaches to it runs the one state machine (breaker.hpp) on one state block:
//
//   SegmentMapping map;   // path: a segment file in a checked store directory
//   if (int err = map.open_file(path, sizeof(Segment))) ...;
//   SegmentStatus st = init_or_attach(map.data(), map.size(), config,
//                                     make_settings(config), now, getpid());
//   if (st != SegmentStatus::Created && st != SegmentStatus::Attached) ...;
//   SharedBreaker breaker(SharedBreaker::Attach{}, SegmentStore(*map.segment()),
//                         settings);
//   breaker.acquire(now) ...   // as any Breaker, under the segment's lock
//
// (host_breaker.hpp wraps all of this, with the lock-free admission path.)
//
// Layout (struct Segment, at offset 0 of the mapping):
//   header   magic "CBSEG\0\0\1", layout version, init word (these three never
//            move, whatever the version), layout check, total size, hash of
//            the configuration, creator pid, creation time
//   control  a robust process-shared mutex (shared_lock.hpp), the sequence
//            counter, the index of the committed slot, the dirty flag
//   slots    two BreakerState blocks
//
// Crash consistency (copy and switch). A process may be SIGKILLed at any
// instruction, in the middle of an update and holding the lock. Recovering
// the mutex is not enough: the block it guarded may be half written. So:
//   - slots[committed] is always a whole, consistent state. Nobody writes it.
//   - The first write access in a critical section (SegmentStore::state(),
//     i.e. Segment::working()) copies slots[committed] into the other slot,
//     sets `dirty`, and hands out that copy; the state machine mutates it.
//   - unlock() publishes a dirty copy: seq becomes odd, `committed` flips to
//     the copy (a release store: the commit point), seq becomes even again,
//     dirty is cleared; then the mutex is unlocked. A critical section that
//     only read (snapshot(), history()) reads slots[committed] and commits
//     nothing.
//   - When the mutex reports EOWNERDEAD, the recovery hook clears `dirty`
//     (the dead owner's copy, whole or not, is discarded and overwritten by
//     the next copy) and makes an odd seq even. `committed` is whatever the
//     dead owner last stored: the old slot if it died before the flip, the
//     new one (fully written before the flip) if after. Either is whole.
// The hook only clears and bumps words, so running it twice (the recovering
// process dies too) is harmless.
//
// Readers that do not lock (a later seqlock fast path) can copy
// slots[committed] between two reads of seq and retry when seq was odd or
// changed: the lock holder never writes the committed slot, and while seq
// stays the same `committed` does not move.
//
// Initialisation: one creator takes the init word and initialises; the
// others wait (at most init_wait). A creator that died while initialising
// (a dead pid of this pid namespace, or no pid yet) is taken over by a
// waiter. A segment initialised before this boot of the host (a file kept on
// disk) is initialised again: its times are of another monotonic clock and
// its mutex may be owned by a thread no kernel will declare dead.
//
// Identity: init_or_attach() refuses a segment made by another layout
// (WrongLayout: the layout version, sizeof(BreakerState), sizeof(Settings),
// CIRCUITBREAKER_API_VERSION and the segment's own size are checked) or with
// another configuration (WrongConfig: config_hash(), an FNV-1a over the
// argument table, config_fields.hpp).
//
// Distrust: any process that maps the segment can write any byte of it, so
// nothing read from it is used unchecked. The lock-free admission checks the
// fields it copies (checked_admission_view()); SegmentLock checks the
// mutex's type word, waits for it at most its bound, and once it holds it
// checks the control words and the committed state (valid(), state.hpp)
// before the state machine sees them; attaching and listing check the
// committed state too. What fails is reported (SegmentFault: Busy, Corrupt),
// never used.
//
// OS calls (open, mmap, sleeping while another process initialises) happen in
// SegmentMapping and init_or_attach() only; the state machine's operations
// cost a mutex, a 2.3 kB copy when they write, and three atomic stores.
//
// This header is not part of circuitbreaker.hpp: it needs POSIX (mmap,
// shm_open, pthreads; -pthread to link, and -lrt for shm_open on glibc before
// 2.34). Where robust mutexes are missing (macOS) or POSIX is (Windows) it
// still compiles; init_or_attach() then returns Unsupported and
// SegmentMapping's opens return ENOTSUP.
#ifndef CIRCUITBREAKER_SEGMENT_HPP
#define CIRCUITBREAKER_SEGMENT_HPP

// CIRCUITBREAKER_API_VERSION is defined at the top of the umbrella header,
// before it includes anything (so this include is harmless either way round).
#include "circuitbreaker.hpp"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <limits>
#include <optional>
#include <thread>
#include <type_traits>

#include "breaker.hpp"
#include "config.hpp"
#include "config_fields.hpp"
#include "shared_lock.hpp"
#include "state.hpp"
#include "store_files.hpp"
#include "types.hpp"

#if defined(__unix__) || defined(__APPLE__)
#define CIRCUITBREAKER_HAS_POSIX_MAP 1
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#else
#define CIRCUITBREAKER_HAS_POSIX_MAP 0
#endif

namespace circuitbreaker {

#if CIRCUITBREAKER_HAS_POSIX_MAP
using ProcessId = pid_t;
#else
using ProcessId = int;
#endif

// An identity of this process's pid namespace (the inode of
// /proc/self/ns/pid), 0 where unknown. Process ids name the owners of probes
// (to free a dead process's probe); they mean something only to processes in
// the same namespace.
inline std::uint64_t pid_namespace_id() noexcept {
#if defined(__linux__)
  struct stat sb;
  if (::stat("/proc/self/ns/pid", &sb) == 0) return static_cast<std::uint64_t>(sb.st_ino);
#endif
  return 0;
}

// Whether process `pid` is gone: no such process, or a zombie (killed, not
// yet reaped by its parent). Reads /proc; only called when half-open is full.
inline bool process_gone(std::uint32_t pid) noexcept {
#if CIRCUITBREAKER_HAS_POSIX_MAP
  if (::kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
#if defined(__linux__)
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%u/stat", static_cast<unsigned>(pid));
  if (std::FILE* f = std::fopen(path, "r")) {
    char buf[512];
    const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = '\0';
    // "pid (comm) S ...": the state follows the last ')'.
    const std::string_view line(buf, n);
    const std::size_t close = line.rfind(')');
    if (close != std::string_view::npos && close + 2 < line.size()) {
      const char st = line[close + 2];
      return st == 'Z' || st == 'X';
    }
  }
#endif
  return false;
#else
  (void)pid;
  return false;
#endif
}

// ---------------------------------------------------------------------------
// Hashing

// 64-bit FNV-1a. Multi-byte values are fed least significant byte first, so a
// hash does not depend on how a value sits in memory.
class Fnv1a {
 public:
  constexpr void byte(std::uint8_t b) noexcept { h_ = (h_ ^ b) * 1099511628211ull; }
  constexpr void u64(std::uint64_t v) noexcept {
    for (int i = 0; i < 8; ++i) byte(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  constexpr void str(const char* s) noexcept {
    while (*s != '\0') byte(static_cast<std::uint8_t>(*s++));
    byte(0);
  }
  // A double by value: -0 as +0, every NaN as one NaN.
  void f64(double v) noexcept {
    if (v == 0) v = 0.0;
    if (std::isnan(v)) v = std::numeric_limits<double>::quiet_NaN();
    std::uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    u64(bits);
  }
  constexpr std::uint64_t value() const noexcept { return h_; }

 private:
  std::uint64_t h_ = 14695981039346656037ull;
};

// The identity of a configuration: every field of the argument table
// (config_fields.hpp) by name and value; an unset optional differs from every
// value (a "set" byte precedes the value), +0 and -0 are one value. rng_seed
// is not a rule (not in the table) and not hashed: processes sharing a
// segment may seed their jitter as they like. Stable across processes and
// builds of the same table.
inline std::uint64_t config_hash(const Config& c) noexcept {
  Fnv1a h;
  h.str("circuitbreaker config");
  for (const FieldInfo& f : kConfigFields) {
    h.str(f.name);
    h.byte(static_cast<std::uint8_t>(f.kind));
    const double v = config_get(c, f);
    if (f.kind == FieldKind::OptionalNumber && std::isnan(v)) {
      h.byte(0);
    } else {
      h.byte(1);
      h.f64(v);
    }
  }
  return h.value();
}

// An identity of the current boot of this host (a hash of Linux's
// /proc/sys/kernel/random/boot_id), 0 where unknown. A segment file kept on
// disk outlives a reboot, but the times in it (the monotonic clock) and its
// mutex (owned by a thread of the old boot, which no kernel will ever declare
// dead) do not: a segment from another boot is initialised again.
inline std::uint64_t boot_id() noexcept {
#if defined(__linux__)
  if (std::FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char buf[64];
    const std::size_t n = std::fread(buf, 1, sizeof buf, f);
    std::fclose(f);
    Fnv1a h;
    for (std::size_t i = 0; i < n; ++i) h.byte(static_cast<std::uint8_t>(buf[i]));
    return n > 0 ? h.value() : 0;
  }
#endif
  return 0;
}

// ---------------------------------------------------------------------------
// Layout

// Bump when the segment's own layout changes (the sizes checked below catch
// most changes of BreakerState and Settings anyway).
inline constexpr std::uint32_t kSegmentLayoutVersion = 2;
inline constexpr char kSegmentMagic[8] = {'C', 'B', 'S', 'E', 'G', '\0', '\0', '\1'};

enum class InitState : std::uint32_t { Uninitialised = 0, Initialising = 1, Ready = 2 };

static_assert(std::atomic<std::uint64_t>::is_always_lock_free &&
                  std::atomic<std::uint32_t>::is_always_lock_free,
              "atomics shared between processes must be lock-free");

struct SegmentHeader {
  // Never move these three: every version must read them.
  std::atomic<std::uint64_t> magic;       // kSegmentMagic's bytes; written last
  std::uint32_t layout_version;           // kSegmentLayoutVersion
  std::atomic<std::uint32_t> init_state;  // InitState
  // Valid once init_state is Ready.
  std::uint64_t layout_check;  // segment_layout_check()
  std::uint64_t total_size;    // sizeof(Segment)
  std::uint64_t config_hash;
  std::int64_t creator_pid;
  std::uint64_t creator_pid_namespace;  // pid_namespace_id() of the creator
  std::uint64_t boot;                   // boot_id() when it was initialised
  Nanos created_at;
  // The creator's configuration, field by field (kConfigFields order, NaN
  // for an unset optional): to name the first argument an attacher differs in.
  double config_values[kConfigFieldCount];
};

struct SegmentControl {
  RobustMutex mutex;
  // Bumped twice per commit: odd while `committed` flips. seq / 2 commits.
  std::atomic<std::uint64_t> seq;
  std::atomic<std::uint32_t> committed;  // 0 or 1: the slot holding the state
  // Under the mutex: 1 when the other slot holds this critical section's copy.
  std::uint32_t dirty;
  std::uint64_t recoveries;  // under the mutex: dead owners recovered
};

// One copy of the state, with the number of lock-free rejections that copy
// has counted (see SegmentStore::take_pending_rejections()).
struct SegmentSlot {
  BreakerState state;
  std::uint64_t rejections_folded;
};

// The segment, at offset 0 of a mapping of at least sizeof(Segment) bytes.
struct Segment {
  SegmentHeader header;
  alignas(64) SegmentControl control;
  // Rejections decided without the lock, ever (monotonic). On its own cache
  // line: rejecting processes write it, every admission reads `seq`.
  alignas(64) std::atomic<std::uint64_t> fast_rejected;
  alignas(64) SegmentSlot slots[2];

  // Under the lock: the copy this critical section writes (made on first use).
  SegmentSlot& working() noexcept {
    const std::uint32_t c = control.committed.load(std::memory_order_relaxed);
    if (control.dirty == 0) {
      slots[1 - c] = slots[c];
      control.dirty = 1;
    }
    return slots[1 - c];
  }

  // Under the lock: the state as this critical section sees it.
  const SegmentSlot& current() const noexcept {
    const std::uint32_t c = control.committed.load(std::memory_order_relaxed);
    return slots[control.dirty != 0 ? 1 - c : c];
  }

  // Under the lock (or for a test): the last committed state.
  const BreakerState& committed_state() const noexcept {
    return slots[control.committed.load(std::memory_order_acquire)].state;
  }

  // Under the lock: publishes a dirty copy (the commit point is the store to
  // `committed`; seq is odd around it).
  void commit() noexcept {
    if (control.dirty == 0) return;
    const std::uint32_t c = control.committed.load(std::memory_order_relaxed);
    const std::uint64_t s = control.seq.load(std::memory_order_relaxed);
    control.seq.store(s + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    control.committed.store(1 - c, std::memory_order_release);  // the commit
    control.seq.store(s + 2, std::memory_order_release);
    control.dirty = 0;
  }

  // Without the lock: copies the admission fields of the committed state
  // (a seqlock read), checked (state.hpp's checked_admission_view()). The lock holder
  // never writes the committed slot, and while seq stays even and unchanged `committed`
  // does not move, so a copy made between two equal even reads of seq is whole. Gives up
  // (false) after a few torn reads: the caller then takes the lock.
  //
  // The fields are read with plain loads while another process may be
  // writing the slot being read (the copy is then discarded): the usual
  // seqlock race, which the C++ memory model calls a data race but every
  // platform this builds on handles as intended.
  bool read_admission(AdmissionView& out) const noexcept {
    for (int attempt = 0; attempt < 4; ++attempt) {
      const std::uint64_t s1 = control.seq.load(std::memory_order_acquire);
      if ((s1 & 1) != 0) continue;
      const std::uint32_t c = control.committed.load(std::memory_order_acquire) & 1u;
      AdmissionView v;
      const bool ok = checked_admission_view(slots[c].state, v);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (control.seq.load(std::memory_order_relaxed) == s1) {
        // A whole copy out of range: the segment was overwritten. The
        // caller takes the lock, which checks the block and says so.
        if (!ok) return false;
        out = v;
        return true;
      }
    }
    return false;
  }

  // Without the lock (attaching, listing): whether the committed state
  // passes `check`, read between two equal even readings of seq as
  // read_admission() reads. A slot index out of range fails; a seq that
  // keeps changing passes (the lock checks the state before its first use).
  template <typename Check>
  bool committed_passes(Check&& check) const noexcept {
    for (int attempt = 0; attempt < 4; ++attempt) {
      const std::uint64_t s1 = control.seq.load(std::memory_order_acquire);
      if ((s1 & 1) != 0) continue;
      const std::uint32_t c = control.committed.load(std::memory_order_acquire);
      if (c > 1) return false;
      const bool ok = check(slots[c].state);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (control.seq.load(std::memory_order_relaxed) == s1) return ok;
    }
    return true;
  }

  // Under the lock, just taken: whether the control words are what every
  // holder leaves them (a slot index, nothing dirty, an even seq) and the
  // committed state passes valid() for `settings`. Anything else was written
  // by something that is not this code, and nothing in the segment is used.
  bool valid_under_lock(const Settings& settings) const noexcept {
    const std::uint32_t c = control.committed.load(std::memory_order_relaxed);
    return c <= 1 && control.dirty == 0 &&
           (control.seq.load(std::memory_order_relaxed) & 1) == 0 &&
           valid(slots[c].state, settings);
  }

  // EOWNERDEAD: discard the dead owner's copy; an odd seq (it died while
  // flipping) becomes even. Idempotent.
  void recover() noexcept {
    control.dirty = 0;
    const std::uint64_t s = control.seq.load(std::memory_order_relaxed);
    if ((s & 1) != 0) control.seq.store(s + 1, std::memory_order_release);
    ++control.recoveries;
  }
};

static_assert(std::is_standard_layout_v<Segment>, "one layout for every process");
static_assert(offsetof(Segment, header) == 0 && offsetof(SegmentHeader, magic) == 0 &&
                  offsetof(SegmentHeader, layout_version) == 8 &&
                  offsetof(SegmentHeader, init_state) == 12,
              "the fixed prefix of every segment version");

// What a segment made by this build says about its layout.
inline constexpr std::uint64_t segment_layout_check() noexcept {
  Fnv1a h;
  h.u64(kSegmentLayoutVersion);
  h.u64(CIRCUITBREAKER_API_VERSION);
  h.u64(sizeof(BreakerState));
  h.u64(alignof(BreakerState));
  h.u64(sizeof(Settings));
  h.u64(sizeof(RobustMutex));
  h.u64(sizeof(Segment));
  h.u64(offsetof(Segment, slots));
  h.u64(kConfigFieldCount);
  return h.value();
}

inline std::uint64_t segment_magic_word() noexcept {
  std::uint64_t w = 0;
  std::memcpy(&w, kSegmentMagic, sizeof w);
  return w;
}

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
    if (!valid(scratch_.state, settings_)) scratch_ = SegmentSlot{};
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

// ---------------------------------------------------------------------------
// Creating or attaching

enum class SegmentStatus : std::uint8_t {
  Created = 0,      // this call initialised the segment
  Attached = 1,     // someone else had (or just has) initialised it
  WrongLayout = 2,  // made by a build with another layout or API version
  WrongConfig = 3,  // made with another configuration
  TooSmall = 4,     // the mapping is smaller than a segment (or null)
  InitTimeout = 5,  // another process started initialising it and never finished
  Corrupt = 6,      // not a segment (bad magic, init word, slot index or state)
  Unsupported = 7   // no robust process-shared mutex on this platform
};

// A short name of a status, for error classes.
inline const char* segment_status_name(SegmentStatus s) noexcept {
  switch (s) {
    case SegmentStatus::Created: return "created";
    case SegmentStatus::Attached: return "attached";
    case SegmentStatus::WrongLayout: return "wrong_layout";
    case SegmentStatus::WrongConfig: return "wrong_config";
    case SegmentStatus::TooSmall: return "too_small";
    case SegmentStatus::InitTimeout: return "init_timeout";
    case SegmentStatus::Corrupt: return "corrupt";
    case SegmentStatus::Unsupported: return "unsupported";
  }
  return "unknown";
}

inline const char* segment_status_message(SegmentStatus s) noexcept {
  switch (s) {
    case SegmentStatus::Created: return "created a new shared breaker segment";
    case SegmentStatus::Attached: return "attached to an existing shared breaker segment";
    case SegmentStatus::WrongLayout:
      return "the shared segment was made by another version of circuitbreaker "
             "(different layout); remove it or use another name";
    case SegmentStatus::WrongConfig:
      return "the shared segment holds a breaker with another configuration; "
             "attach with the same configuration or use another name";
    case SegmentStatus::TooSmall:
      return "the shared mapping is too small for a breaker segment (truncated?)";
    case SegmentStatus::InitTimeout:
      return "timed out waiting for another process to initialise the shared segment "
             "(it may have died while doing so; remove the segment)";
    case SegmentStatus::Corrupt:
      return "the shared mapping is not a valid breaker segment (bad magic, or a value "
             "out of range in its state)";
    case SegmentStatus::Unsupported:
      return "shared breakers need robust process-shared mutexes, which this "
             "platform lacks";
  }
  return "unknown segment status";
}

// The first argument (an index into kConfigFields) whose value in `config`
// differs from the segment creator's, by the rule config_hash() applies
// (unset optionals are equal, +0 and -0 are equal); -1 when none does.
inline int first_config_difference(const Segment& seg, const Config& config) noexcept {
  for (std::size_t i = 0; i < kConfigFieldCount; ++i) {
    const double mine = config_get(config, kConfigFields[i]);
    const double theirs = seg.header.config_values[i];
    const bool same = (std::isnan(mine) && std::isnan(theirs)) || mine == theirs;
    if (!same) return static_cast<int>(i);
  }
  return -1;
}

inline bool segment_ok(SegmentStatus s) noexcept {
  return s == SegmentStatus::Created || s == SegmentStatus::Attached;
}

// A header whose init word says Ready: Corrupt (no magic), WrongLayout
// (made by a build with another layout or API version), else Attached.
inline SegmentStatus ready_header_status(const SegmentHeader& h) noexcept {
  if (h.magic.load(std::memory_order_acquire) != segment_magic_word()) {
    return SegmentStatus::Corrupt;
  }
  if (h.layout_version != kSegmentLayoutVersion ||
      h.layout_check != segment_layout_check() || h.total_size != sizeof(Segment)) {
    return SegmentStatus::WrongLayout;
  }
  return SegmentStatus::Attached;
}

// What a mapped segment file is, read without attaching, waiting or writing
// (for listing a store): TooSmall, Corrupt (not a finished segment, a bad
// slot index, or a committed state that fails valid() for any settings),
// WrongLayout, or Attached (a segment of this layout).
inline SegmentStatus inspect_segment(const void* mapping, std::size_t size) noexcept {
  if (mapping == nullptr || size < sizeof(Segment)) return SegmentStatus::TooSmall;
  const Segment& seg = *static_cast<const Segment*>(mapping);
  if (seg.header.init_state.load(std::memory_order_acquire) !=
      static_cast<std::uint32_t>(InitState::Ready)) {
    return SegmentStatus::Corrupt;
  }
  const SegmentStatus st = ready_header_status(seg.header);
  if (st != SegmentStatus::Attached) return st;
  const bool ok = seg.committed_passes(
      [](const BreakerState& state) noexcept { return valid(state); });
  return ok ? st : SegmentStatus::Corrupt;
}

// Whether the process that created a segment is alive; nullopt when this
// process cannot tell (the creator is in another pid namespace).
inline std::optional<bool> segment_creator_alive(const SegmentHeader& h) noexcept {
  if (h.creator_pid <= 0 || h.creator_pid_namespace != pid_namespace_id())
    return std::nullopt;
  return !process_gone(static_cast<std::uint32_t>(h.creator_pid));
}

// Initialises the segment at `mapping` (`size` bytes, zero-filled when new,
// aligned as a page) if nobody did, else checks it: layout, configuration,
// integrity. Exactly one of several concurrent callers on a fresh mapping
// gets Created; it initialises the state as BasicBreaker(store, settings, now)
// does. The others wait (sleeping, at most `init_wait`) until it is ready.
// A mapping whose init word and magic are both 0 counts as fresh.
inline SegmentStatus init_or_attach(
    void* mapping, std::size_t size, const Config& config, const Settings& settings,
    Nanos now, ProcessId self,
    std::chrono::nanoseconds init_wait = std::chrono::seconds(2)) noexcept {
  if (!RobustMutex::supported()) return SegmentStatus::Unsupported;
  if (mapping == nullptr || size < sizeof(Segment)) return SegmentStatus::TooSmall;
  if (reinterpret_cast<std::uintptr_t>(mapping) % alignof(Segment) != 0) {
    return SegmentStatus::Corrupt;
  }
  Segment& seg = *static_cast<Segment*>(mapping);
  SegmentHeader& h = seg.header;
  const std::uint64_t magic = segment_magic_word();
  const std::uint64_t cfg_hash = config_hash(config);
  const std::uint64_t this_boot = boot_id();
  double config_values[kConfigFieldCount];
  for (std::size_t i = 0; i < kConfigFieldCount; ++i) {
    config_values[i] = config_get(config, kConfigFields[i]);
  }

  // Initialises the segment: only ever called by the one process that moved
  // the init word to Initialising.
  const auto initialise = [&]() noexcept -> SegmentStatus {
    h.layout_version = kSegmentLayoutVersion;
    h.layout_check = segment_layout_check();
    h.total_size = sizeof(Segment);
    h.config_hash = cfg_hash;
    h.creator_pid = static_cast<std::int64_t>(self);
    h.creator_pid_namespace = pid_namespace_id();
    h.boot = this_boot;
    h.created_at = now;
    for (std::size_t i = 0; i < kConfigFieldCount; ++i) {
      h.config_values[i] = config_values[i];
    }
    std::memset(static_cast<void*>(&seg.control), 0,
                sizeof(Segment) - offsetof(Segment, control));
    if (seg.control.mutex.init() != 0) {
      h.init_state.store(0, std::memory_order_release);
      return SegmentStatus::Unsupported;
    }
    { SharedBreaker init(SegmentStore(seg, settings), settings, now); }
    h.magic.store(magic, std::memory_order_release);
    h.init_state.store(static_cast<std::uint32_t>(InitState::Ready),
                       std::memory_order_release);
    return SegmentStatus::Created;
  };
  constexpr auto kInitialising = static_cast<std::uint32_t>(InitState::Initialising);
  constexpr auto kReady = static_cast<std::uint32_t>(InitState::Ready);

  // A few rounds: a takeover (a dead creator, a segment of another boot)
  // starts the protocol over once.
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::uint32_t st = h.init_state.load(std::memory_order_acquire);
    if (st == 0) {
      if (h.magic.load(std::memory_order_acquire) != 0) {
        // The creator writes the magic only after taking the init word.
        st = h.init_state.load(std::memory_order_acquire);
        if (st == 0) return SegmentStatus::Corrupt;
      } else if (h.init_state.compare_exchange_strong(st, kInitialising,
                                                      std::memory_order_acq_rel)) {
        return initialise();
      }
      // Lost the race: `st` holds the winner's word.
    }

    const auto deadline = std::chrono::steady_clock::now() + init_wait;
    bool taken_over = false;
    for (int round = 0; st == kInitialising; ++round) {
      const std::uint64_t m = h.magic.load(std::memory_order_acquire);
      if (m != 0 && m != magic) return SegmentStatus::Corrupt;
      if (std::chrono::steady_clock::now() >= deadline) {
        // The creator died while initialising (its pid is written right
        // after it took the init word; 0: it died before that): start over.
        // Only a creator of this pid namespace can be judged.
        const std::int64_t pid = h.creator_pid;
        const bool judged = pid == 0 || h.creator_pid_namespace == pid_namespace_id();
        const bool dead = pid == 0 || process_gone(static_cast<std::uint32_t>(pid));
        std::uint32_t expected = kInitialising;
        if (!judged || !dead) return SegmentStatus::InitTimeout;
        h.magic.store(0, std::memory_order_release);
        h.init_state.compare_exchange_strong(expected, 0, std::memory_order_acq_rel);
        taken_over = true;
        break;
      }
      if (round < 64) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      st = h.init_state.load(std::memory_order_acquire);
    }
    if (taken_over) continue;
    if (st != kReady) return SegmentStatus::Corrupt;
    if (const SegmentStatus ready = ready_header_status(h);
        ready != SegmentStatus::Attached) {
      return ready;
    }
    if (h.boot != this_boot) {
      // Made before this boot: nobody of this boot uses it (whoever attached
      // first would have initialised it again), its times and its mutex are
      // meaningless. One process initialises it afresh.
      std::uint32_t expected = kReady;
      if (h.init_state.compare_exchange_strong(expected, kInitialising,
                                               std::memory_order_acq_rel)) {
        return initialise();
      }
      continue;  // another process does it: wait for it
    }
    if (h.config_hash != cfg_hash) return SegmentStatus::WrongConfig;
    const bool ok = seg.committed_passes([&settings](const BreakerState& state) noexcept {
      return valid(state, settings);
    });
    return ok ? SegmentStatus::Attached : SegmentStatus::Corrupt;
  }
  return SegmentStatus::InitTimeout;
}

// ---------------------------------------------------------------------------
// Mapping a file or a POSIX shm object

// A shared mapping of a whole file, unmapped on destruction (move-only). The
// file descriptor is closed once mapped.
class SegmentMapping {
 public:
  SegmentMapping() noexcept = default;
  SegmentMapping(const SegmentMapping&) = delete;
  SegmentMapping& operator=(const SegmentMapping&) = delete;
  SegmentMapping(SegmentMapping&& o) noexcept : data_(o.data_), size_(o.size_) {
    o.data_ = nullptr;
    o.size_ = 0;
  }
  SegmentMapping& operator=(SegmentMapping&& o) noexcept {
    if (this != &o) {
      close();
      data_ = o.data_;
      size_ = o.size_;
      o.data_ = nullptr;
      o.size_ = 0;
    }
    return *this;
  }
  ~SegmentMapping() { close(); }

  // Opens `path` (created exclusively, mode 0600, if missing, unless
  // `create` is false) and maps it read-write. An existing file is used only
  // when it is ours (store_files.hpp: a regular file of this effective user
  // with no group/other permission bits, not reached through a link, in a
  // directory nobody else can change); else kStoreUntrusted is returned and
  // `refused` (when given) names the file or directory and says why. A file
  // created here is grown to `size` (zero-filled); a file that has a size is
  // mapped at that size, whatever `size` says, for init_or_attach() to judge.
  // Returns 0, an errno value or kStoreUntrusted.
  int open_file(const char* path, std::size_t size, bool create = true,
                StoreRefusal* refused = nullptr) noexcept {
#if CIRCUITBREAKER_HAS_POSIX_MAP
    close();
    int fd = -1;
    try {
      if (const int err = open_segment_file(path, create, true, &fd, refused)) return err;
    } catch (...) {  // std::bad_alloc from a path or a reason
      if (fd >= 0) ::close(fd);
      return ENOMEM;
    }
    return map_fd(fd, size, true);
#else
    (void)path;
    (void)size;
    (void)create;
    (void)refused;
    return ENOTSUP;
#endif
  }

  // Maps an existing segment file read-only (PROT_READ), for looking at it
  // without changing it (listing a store): never creates, never writes, and
  // refuses what open_file() refuses. Returns 0, an errno value or
  // kStoreUntrusted.
  int open_file_readonly(const char* path, StoreRefusal* refused = nullptr) noexcept {
#if CIRCUITBREAKER_HAS_POSIX_MAP
    close();
    int fd = -1;
    try {
      if (const int err = open_segment_file(path, false, false, &fd, refused)) return err;
    } catch (...) {
      if (fd >= 0) ::close(fd);
      return ENOMEM;
    }
    return map_fd(fd, 0, false);
#else
    (void)path;
    (void)refused;
    return ENOTSUP;
#endif
  }

  // The same for a POSIX shared-memory object (`name` as shm_open wants it:
  // "/something", no other slash), with the same rules: created
  // exclusively, an existing one opened without following a link or
  // blocking and kept only when fstat() says it is ours.
  int open_shm(const char* name, std::size_t size,
               StoreRefusal* refused = nullptr) noexcept {
#if CIRCUITBREAKER_HAS_POSIX_MAP
    close();
    for (int attempt = 0; attempt < 4; ++attempt) {
      int fd = ::shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
      if (fd >= 0) {
        (void)::fchmod(fd, 0600);  // whatever the umask
        return map_fd(fd, size, true);
      }
      if (errno != EEXIST) return errno;
      fd = ::shm_open(name, O_RDWR | O_NOFOLLOW | O_NONBLOCK, 0600);
      if (fd < 0) {
        if (errno == ENOENT) continue;  // removed in between: create it
        if (errno == ELOOP) return refuse_shm(refused, name, "it is a symbolic link");
        return errno;
      }
      struct stat sb;
      if (::fstat(fd, &sb) != 0) {
        const int err = errno;
        ::close(fd);
        return err;
      }
      try {
        const std::string problem = segment_file_problem(sb, ::geteuid());
        if (!problem.empty()) {
          ::close(fd);
          return refuse_shm(refused, name, problem.c_str());
        }
      } catch (...) {
        ::close(fd);
        return ENOMEM;
      }
      return map_fd(fd, size, true);
    }
    return ENOENT;
#else
    (void)name;
    (void)size;
    (void)refused;
    return ENOTSUP;
#endif
  }

  void close() noexcept {
#if CIRCUITBREAKER_HAS_POSIX_MAP
    if (data_ != nullptr) ::munmap(data_, size_);
#endif
    data_ = nullptr;
    size_ = 0;
  }

  bool is_open() const noexcept { return data_ != nullptr; }
  void* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  // Only after init_or_attach() said Created or Attached.
  Segment* segment() const noexcept { return static_cast<Segment*>(data_); }

 private:
#if CIRCUITBREAKER_HAS_POSIX_MAP
  // Maps the whole file open as `fd` (an empty one, when `writable`, first
  // grown to `size`) and closes `fd`.
  int map_fd(int fd, std::size_t size, bool writable) noexcept {
    struct stat sb;
    int err = 0;
    if (::fstat(fd, &sb) != 0) {
      err = errno;
    } else if (sb.st_size == 0) {
      if (size == 0 || !writable) {
        err = EINVAL;
      } else if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
        err = errno;
      }
    } else {
      size = static_cast<std::size_t>(sb.st_size);
    }
    if (err == 0) {
      const int prot = writable ? PROT_READ | PROT_WRITE : PROT_READ;
      void* p = ::mmap(nullptr, size, prot, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) {
        err = errno;
      } else {
        data_ = p;
        size_ = size;
      }
    }
    ::close(fd);
    return err;
  }

  static int refuse_shm(StoreRefusal* refused, const char* name,
                        const char* reason) noexcept {
    if (refused != nullptr) {
      try {
        refused->path = name;
        refused->reason = reason;
      } catch (...) {
        return ENOMEM;
      }
    }
    return kStoreUntrusted;
  }
#endif

  void* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_SEGMENT_HPP
