// When a fleet store's sync thread (fleet/sync.hpp) syncs on its own: one
// sync_interval after the last regular sync was due, give or take 10%, so
// that the processes of a fleet do not sync in step. Wake-ups (a trip, a
// message) sync at once without moving this schedule. Pure C++.
#ifndef CIRCUITBREAKER_FLEET_SYNC_SCHEDULE_HPP
#define CIRCUITBREAKER_FLEET_SYNC_SCHEDULE_HPP

#include <cstdint>

#include "../random.hpp"
#include "../types.hpp"

namespace circuitbreaker {

class SyncSchedule {
 public:
  explicit SyncSchedule(Nanos interval) noexcept : interval_(interval) {}

  // The regular sync after the one due at `due`, at `now`: one interval
  // (+-10%) after it was due, not after it ended, so that each process keeps
  // its own phase. Timed from the end, the syncs of many processes that a
  // busy Redis answered together would start together again one interval
  // later, and queue again: a convoy that made every round trip wait for
  // the whole fleet's (bench/RESULTS.md, 12d). One that fell a whole
  // interval behind is timed from now. After the first (due at 0), the next
  // comes at a random point of the interval, so that the stores a process
  // makes at once do not sync in step either.
  Nanos after(Nanos due, Nanos now) noexcept {
    if (due == 0) return now + scaled(uniform01(rng_));
    const Nanos next = due + scaled(0.9 + 0.2 * uniform01(rng_));
    return next > now ? next : now + scaled(0.9 + 0.2 * uniform01(rng_));
  }

 private:
  Nanos scaled(double f) const noexcept {
    return static_cast<Nanos>(static_cast<double>(interval_) * f);
  }
  const Nanos interval_;
  std::uint64_t rng_ = entropy_seed();
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_FLEET_SYNC_SCHEDULE_HPP
