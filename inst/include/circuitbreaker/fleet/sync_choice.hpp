// Which breakers one sync carries, so that what a sync costs Redis follows
// activity: every breaker with news of its own (counts, a settled probe, a
// command, a registration, a retry), the breakers that pub/sub messages
// named (another process changed them), at most kMaxReadsPerSync of those
// that want a read without news (a full read after a resubscription is
// spread over syncs), and one breaker a second in turn (the sweep, which
// refreshes keys that expired or were flushed). Idle breakers are carried
// by nothing else. Independent of the transport; the sync thread owns one.
#ifndef CIRCUITBREAKER_FLEET_SYNC_CHOICE_HPP
#define CIRCUITBREAKER_FLEET_SYNC_CHOICE_HPP

#include <cstddef>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "../types.hpp"
#include "member.hpp"

namespace circuitbreaker {

class SyncChoice {
 public:
  // Reads without news of their own, at most, per sync.
  static constexpr std::size_t kMaxReadsPerSync = 128;
  // How often the sweep reads one breaker.
  static constexpr Nanos kSweepEvery = kNanosPerSecond;
  // Keys named by messages not yet read by a sync, at most (a flood of
  // messages, from a fleet much larger than this process, cannot grow it).
  static constexpr std::size_t kMaxNamed = 1 << 16;

  // A message named breaker key `key` (untrusted: it is only compared with
  // the keys of this process's breakers). False when the set is full.
  bool named(std::string key) {
    if (named_.size() >= kMaxNamed) return false;
    named_.insert(std::move(key));
    return true;
  }

  // The breakers of `live` that the sync at `now` carries; `left` is set
  // when wanted reads remain for the next sync.
  std::vector<FleetMember*> choose(const std::vector<std::shared_ptr<FleetMember>>& live,
                                   Nanos now, bool& left) {
    left = false;
    std::vector<FleetMember*> out;
    if (live.empty()) return out;
    for (const auto& m : live) {
      if (named_.count(m->key()) != 0) m->want();
    }
    named_.clear();
    std::size_t reads = 0;
    std::size_t swept = live.size();  // none
    if (now - last_sweep_ >= kSweepEvery) {
      last_sweep_ = now;
      swept = sweep_++ % live.size();
    }
    for (std::size_t i = 0; i < live.size(); ++i) {
      FleetMember* m = live[i].get();
      if (m->has_news(now)) {
        (void)m->take_wanted();  // its report's reply tells it the fleet's state
        out.push_back(m);
      } else if (reads < kMaxReadsPerSync && m->take_wanted()) {
        ++reads;
        out.push_back(m);
      } else if (i == swept) {
        out.push_back(m);
      } else {
        left = left || reads >= kMaxReadsPerSync;
      }
    }
    return out;
  }

 private:
  std::unordered_set<std::string> named_;
  std::size_t sweep_ = 0;
  Nanos last_sweep_ = 0;
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_FLEET_SYNC_CHOICE_HPP
