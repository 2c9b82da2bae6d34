// A robust, process-shared mutex that lives inside a shared-memory mapping
// (segment.hpp places one in every host segment).
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
// Robust mutexes are used where they are known to work: Linux (glibc and
// musl). Elsewhere (macOS has no robust mutexes, Windows has no pthreads in
// the usual sense) RobustMutex still compiles, but supported() is false,
// init() returns ENOTSUP and nothing calls a robust-mutex function; a segment
// refuses to be created or attached there (SegmentStatus::Unsupported). Define
// CIRCUITBREAKER_NO_ROBUST_MUTEX to force that path (the tests compile it).
//
// This header is not part of circuitbreaker.hpp: it needs <pthread.h> (and
// -pthread to link) which not every platform R supports has.
#ifndef CIRCUITBREAKER_SHARED_LOCK_HPP
#define CIRCUITBREAKER_SHARED_LOCK_HPP

#include <cerrno>
#include <cstdint>
#include <cstdlib>

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
    Failed = 2      // not locked (unsupported, or the mutex is unrecoverable)
  };

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
  LockResult lock_robust(Recover&& recover) noexcept {
#if CIRCUITBREAKER_HAS_ROBUST_MUTEX
    int rc = pthread_mutex_lock(&m_);
    if (rc == 0) return LockResult::Locked;
    if (rc == EOWNERDEAD) {
      recover();
      if (pthread_mutex_consistent(&m_) == 0) return LockResult::Recovered;
      pthread_mutex_unlock(&m_);
    }
    return LockResult::Failed;
#else
    (void)recover;
    return LockResult::Failed;
#endif
  }

  // The Lock requirement (lock.hpp). A dead owner is recovered with no repair
  // of the guarded data: use lock_robust() when there is data to repair. A
  // mutex that cannot be locked at all (ENOTRECOVERABLE: someone unlocked it
  // after EOWNERDEAD without making it consistent, which this class never
  // does; or memory that is not an initialised mutex) aborts: running the
  // state machine unlocked would corrupt it silently.
  void lock() noexcept {
    if (lock_robust([]() noexcept {}) == LockResult::Failed) std::abort();
  }

  void unlock() noexcept {
#if CIRCUITBREAKER_HAS_ROBUST_MUTEX
    pthread_mutex_unlock(&m_);
#else
    std::abort();  // never locked: lock() cannot succeed here
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
  pthread_mutex_t m_;
#else
  // Room for a mutex, so that the segment layout has the same shape.
  alignas(8) unsigned char m_[64];
#endif
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_SHARED_LOCK_HPP
