// A robust, process-shared mutex that lives inside a shared-memory mapping
// (segment_layout.hpp places one in every host segment).
//
// It is a pthread_mutex_t with PTHREAD_PROCESS_SHARED and
// PTHREAD_MUTEX_ROBUST: when a process dies holding it (SIGKILL at any
// instruction), the next process to lock it gets EOWNERDEAD instead of waiting
// forever. RobustMutex::lock(recover) then runs `recover()` while holding the
// mutex (the caller repairs or rolls back the data the mutex guards) and marks
// the mutex consistent again with pthread_mutex_consistent().
//
// Never hold it across user code: it guards the state machine's short
// critical sections only (lock.hpp).
//
// No wait is without a bound. The memory the mutex lives in can be written
// by any process that maps it: a holder may be alive but stopped (SIGSTOP, a
// debugger), or the owner word may name a thread that will never unlock (a
// forged or overwritten word). lock_robust() therefore waits at most a given
// time (pthread_mutex_clocklock() on CLOCK_MONOTONIC where glibc has it,
// 2.30 and later; else pthread_mutex_timedlock() on CLOCK_REALTIME) and then
// reports TimedOut, and refuses at once (Failed) a mutex whose type word is
// not the one init() writes (glibc: an overwritten type word can send
// glibc's lock down paths that assert).
//
// Robust mutexes are used where they are known to work: Linux (glibc and
// musl). Elsewhere (macOS has no robust mutexes, Windows has no pthreads in
// the usual sense) RobustMutex still compiles, but supported() is false,
// init() returns ENOTSUP and nothing calls a robust-mutex function; a segment
// refuses to be created or attached there (SegmentStatus::Unsupported). Define
// CIRCUITBREAKER_NO_ROBUST_MUTEX to force that path (the tests compile it).
//
// This header is not part of circuitbreaker.hpp: it needs <pthread.h> (and
// -pthread to link) which not every platform R supports has.
#ifndef CIRCUITBREAKER_HOST_ROBUST_MUTEX_HPP
#define CIRCUITBREAKER_HOST_ROBUST_MUTEX_HPP

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>

#if defined(__linux__) && !defined(CIRCUITBREAKER_NO_ROBUST_MUTEX)
#define CIRCUITBREAKER_HAS_ROBUST_MUTEX 1
#include <pthread.h>
#else
#define CIRCUITBREAKER_HAS_ROBUST_MUTEX 0
#endif

namespace circuitbreaker {

class RobustMutex {
 public:
  // Whether this build has robust process-shared mutexes.
  static constexpr bool supported() noexcept {
    return CIRCUITBREAKER_HAS_ROBUST_MUTEX != 0;
  }

  // What lock_robust() found.
  enum class LockResult : std::uint8_t {
    Locked = 0,     // an ordinary acquisition
    Recovered = 1,  // the previous owner died; recover() ran; consistent again
    Failed = 2,     // not locked (unsupported, unrecoverable, or not a mutex)
    TimedOut = 3    // not locked: still held when the wait's bound passed
  };

  // The default bound of a wait for the lock. Critical sections last well
  // under a microsecond; a holder that keeps the lock for a second is stopped
  // or the owner word is forged.
  static constexpr std::chrono::nanoseconds kDefaultWait = std::chrono::seconds(1);

  // Initialises the mutex in place (in the mapping). Called once, by the
  // process that creates the segment, before anyone else may lock it.
  // Returns 0 or an errno value.
  int init() noexcept {
#if CIRCUITBREAKER_HAS_ROBUST_MUTEX
    pthread_mutexattr_t attr;
    int rc = pthread_mutexattr_init(&attr);
    if (rc != 0) return rc;
    rc = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    if (rc == 0) rc = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    if (rc == 0) rc = pthread_mutex_init(&m_, &attr);
    pthread_mutexattr_destroy(&attr);
    return rc;
#else
    return ENOTSUP;
#endif
  }

  // Locks; if the previous owner died holding the mutex, runs `recover()`
  // (noexcept, under the mutex) and makes the mutex consistent. A recovery
  // that itself dies before pthread_mutex_consistent() leaves the mutex
  // owner-dead, so the next locker runs recover() again: recover() must be
  // idempotent.
  template <typename Recover>
  LockResult lock_robust(Recover&& recover,
                         std::chrono::nanoseconds wait = kDefaultWait) noexcept {
#if CIRCUITBREAKER_HAS_ROBUST_MUTEX
    if (!plausible()) return LockResult::Failed;
    int rc = pthread_mutex_trylock(&m_);  // the common case: no clock read
    if (rc == EBUSY) rc = timed_lock(wait);
    if (rc == 0) return LockResult::Locked;
    if (rc == ETIMEDOUT) return LockResult::TimedOut;
    if (rc == EOWNERDEAD) {
      recover();
      if (pthread_mutex_consistent(&m_) == 0) return LockResult::Recovered;
      pthread_mutex_unlock(&m_);
    }
    return LockResult::Failed;
#else
    (void)recover;
    (void)wait;
    return LockResult::Failed;
#endif
  }

  // Whether the words that say what kind of mutex this is are those init()
  // wrote (glibc's type word; elsewhere always true). Anything else was
  // overwritten and is not locked at all: glibc trusts that word and asserts
  // on states a forged one can produce.
  //
  // Also false for a mutex that glibc marked not recoverable: its
  // pthread_mutex_trylock() (2.36) then returns ENOTRECOVERABLE but leaves
  // the lock word taken, so that every later lock would wait for nobody.
  bool plausible() const noexcept {
#if CIRCUITBREAKER_HAS_ROBUST_MUTEX && defined(__GLIBC__)
    constexpr int kNotRecoverable = 0x7ffffffe;  // glibc's PTHREAD_MUTEX_NOTRECOVERABLE
    return m_.__data.__kind == reference_kind() && m_.__data.__owner != kNotRecoverable;
#else
    return true;
#endif
  }

  // The Lock requirement (lock.hpp). A dead owner is recovered with no repair
  // of the guarded data: use lock_robust() when there is data to repair. A
  // mutex that cannot be locked at all (ENOTRECOVERABLE: someone unlocked it
  // after EOWNERDEAD without making it consistent, which this class never
  // does; or memory that is not an initialised mutex) aborts: running the
  // state machine unlocked would corrupt it silently. It waits as long as
  // it takes (lock.hpp's Lock has no way to say "not locked").
  void lock() noexcept {
    for (;;) {
      const LockResult r = lock_robust([]() noexcept {});
      if (r == LockResult::Failed) std::abort();
      if (r != LockResult::TimedOut) return;
    }
  }

  void unlock() noexcept {
#if CIRCUITBREAKER_HAS_ROBUST_MUTEX
    pthread_mutex_unlock(&m_);
#else
    std::abort();  // never locked: lock() cannot succeed here
#endif
  }

  // The raw owner thread id of a held mutex (glibc; 0 elsewhere or free),
  // for tests and diagnostics.
  int owner_word() const noexcept {
#if CIRCUITBREAKER_HAS_ROBUST_MUTEX && defined(__GLIBC__)
    return m_.__data.__owner;
#else
    return 0;
#endif
  }

  // Destroys the mutex (the last user, when the segment is removed). Not
  // needed before munmap(); never call it while another process may use it.
  void destroy() noexcept {
#if CIRCUITBREAKER_HAS_ROBUST_MUTEX
    pthread_mutex_destroy(&m_);
#endif
  }

 private:
#if CIRCUITBREAKER_HAS_ROBUST_MUTEX
  // Waits for the mutex at most `wait`: 0, EOWNERDEAD, ETIMEDOUT or an errno.
  int timed_lock(std::chrono::nanoseconds wait) noexcept {
    if (wait.count() <= 0) return ETIMEDOUT;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 30))
    const clockid_t clock = CLOCK_MONOTONIC;
#else
    const clockid_t clock = CLOCK_REALTIME;
#endif
    struct timespec ts;
    if (clock_gettime(clock, &ts) != 0) return errno;
    const long long ns = static_cast<long long>(ts.tv_nsec) + wait.count() % 1000000000;
    ts.tv_sec += static_cast<time_t>(wait.count() / 1000000000 + ns / 1000000000);
    ts.tv_nsec = static_cast<long>(ns % 1000000000);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 30))
    return pthread_mutex_clocklock(&m_, clock, &ts);
#else
    return pthread_mutex_timedlock(&m_, &ts);
#endif
  }

#if defined(__GLIBC__)
  // The type word of a robust process-shared mutex as init() makes it.
  static int reference_kind() noexcept {
    static const int kind = []() noexcept {
      RobustMutex probe;
      std::memset(static_cast<void*>(&probe.m_), 0, sizeof probe.m_);
      if (probe.init() != 0) return -1;
      const int k = probe.m_.__data.__kind;
      probe.destroy();
      return k;
    }();
    return kind;
  }
#endif

  pthread_mutex_t m_;
#else
  // Room for a mutex, so that the segment layout has the same shape.
  alignas(8) unsigned char m_[64];
#endif
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HOST_ROBUST_MUTEX_HPP
