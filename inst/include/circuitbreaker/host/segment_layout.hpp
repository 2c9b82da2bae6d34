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
// (host/host_breaker.hpp wraps all of this, with the lock-free admission path.)
//
// Layout (struct Segment, at offset 0 of the mapping):
//   header   magic "CBSEG\0\0\1", layout version, init word (these three never
//            move, whatever the version), layout check, total size, hash of
//            the configuration, creator pid, creation time
//   control  a robust process-shared mutex (host/robust_mutex.hpp), the sequence
//            counter, the index of the committed slot, the dirty flag
//   slots    two SegmentSlots: a BreakerState block and the bulkhead's
//            permits, with the count of rejections folded in
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
// cost a mutex, a 3.3 kB copy when they write, and three atomic stores.
//
// The host/ headers are not part of circuitbreaker.hpp: they need POSIX (mmap,
// shm_open, pthreads; -pthread to link, and -lrt for shm_open on glibc before
// 2.34). Where robust mutexes are missing (macOS) or POSIX is (Windows) it
// still compiles; init_or_attach() then returns Unsupported and
// SegmentMapping's opens return ENOTSUP.
#ifndef CIRCUITBREAKER_HOST_SEGMENT_LAYOUT_HPP
#define CIRCUITBREAKER_HOST_SEGMENT_LAYOUT_HPP

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../bulkhead.hpp"
#include "../config.hpp"
#include "../config_fields.hpp"
#include "../config_identity.hpp"
#include "../rules.hpp"
#include "../state.hpp"
#include "../types.hpp"
#include "../version.hpp"
#include "os_probes.hpp"
#include "robust_mutex.hpp"

namespace circuitbreaker {

// Bump when the segment's own layout changes (the sizes checked below catch
// most changes of BreakerState and Settings anyway).
inline constexpr std::uint32_t kSegmentLayoutVersion =
    5;  // 3: the health-check and bulkhead blocks (state.hpp); 4: probe slots
        // and bulkhead permits as leased slots (leased_slots.hpp), a reason
        // per transition-log entry instead of health_closes; 5: the bulkhead
        // out of BreakerState, beside it in SegmentSlot
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
// has counted (see SegmentStore::take_pending_rejections()), and the
// bulkhead's permits (bulkhead.hpp), copied and committed with the state:
// a segment always has room for them, bulkhead or not.
struct SegmentSlot {
  BreakerState state;
  std::uint64_t rejections_folded;
  BulkheadPermits bulkhead;
};

// Whether a slot read from the segment can be used: its state passes
// state.hpp's valid() (for `settings`, or for any) and its permits theirs.
inline bool slot_valid(const SegmentSlot& s, const Settings& settings) noexcept {
  return valid(s.state, settings) && s.bulkhead.valid();
}
inline bool slot_valid(const SegmentSlot& s) noexcept {
  return valid(s.state) && s.bulkhead.valid();
}

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
      const bool ok = check(slots[c]);
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
           slot_valid(slots[c], settings);
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
  h.u64(sizeof(SegmentSlot));
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

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HOST_SEGMENT_LAYOUT_HPP
