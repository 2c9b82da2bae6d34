// The link of one fleet store (FleetSync, fleet/sync.hpp) to Redis, as the
// sync thread and the callers share it: whether it is up, its own breaker
// (which paces reconnects), what users are shown of it (Stats: syncs,
// failures, the last error without the password) and the rule that says a
// store is alone. Independent of hiredis: the transport tells it what
// happened.
#ifndef CIRCUITBREAKER_FLEET_LINK_HPP
#define CIRCUITBREAKER_FLEET_LINK_HPP

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "../breaker.hpp"
#include "../config.hpp"
#include "../types.hpp"
#include "keys.hpp"
#include "../redis/url.hpp"

namespace circuitbreaker {

class FleetLink {
 public:
  struct Stats {
    bool linked = false;
    Nanos since_last_sync = -1;  // -1: never
    double last_sync_unix = -1;  // seconds since the epoch; -1: never
    std::uint64_t syncs = 0, failures = 0;
    std::string last_error;
    bool alone = false;  // see alone_after()
    // "off" (plain), "on" (TLS, no handshake finished yet) or the version
    // of the last handshake ("TLSv1.3").
    std::string tls;
  };

  // A store is alone when its link is down and either never came up (the
  // first breaker's registration failed: a typo in the URL, a firewall) or
  // has been down for longer than kAloneSyncs sync intervals, and at least
  // kAloneMinimum, so that one failed sync, retried by the link breaker
  // after 0.25 s, is not taken for an outage. R says so once (and again
  // when the link is back); the breakers run on their local rules meanwhile.
  static constexpr int kAloneSyncs = 5;
  static constexpr Nanos kAloneMinimum = 1000 * kNanosPerMs;

  FleetLink(const FleetSpec& spec, Nanos now)
      : endpoint_(spec.endpoint),
        sync_interval_(spec.sync_interval),
        breaker_(breaker_settings(spec), now) {}

  FleetLink(const FleetLink&) = delete;
  FleetLink& operator=(const FleetLink&) = delete;

  // Whether the last round trip succeeded (and no call found Redis gone
  // since).
  bool up() const noexcept { return linked_.load(std::memory_order_acquire); }
  void down() noexcept { linked_.store(false, std::memory_order_release); }

  // The sync thread, before a round trip: whether the link's breaker lets
  // one through (when it does not, the link is down and nothing waits on
  // Redis). Settle the permit with settle().
  Admission admit(Nanos now) noexcept {
    const Admission a = breaker_.acquire(now);
    if (!a.permitted) down();
    return a;
  }
  void settle(const Permit& p, bool ok, Nanos now) noexcept {
    breaker_.record(p, ok ? Outcome::Success : Outcome::Failure, now);
  }

  // A round trip failed (or Redis answered what it should not): `why` is
  // shown, without the password, in Stats::last_error.
  // A NOPERM names the command the user may not run; the hint says where
  // the whole list is.
  void note_failure(const std::string& why) {
    failures_.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> g(error_mutex_);
    last_error_ = why;
    if (why.find("NOPERM") != std::string::npos) {
      last_error_ += " (?breaker_store_redis lists the ACL a fleet store needs)";
    }
  }

  // The TLS version of a connection that just worked ("" for plain).
  void note_tls(const std::string& version) {
    if (version.empty()) return;
    std::lock_guard<std::mutex> g(error_mutex_);
    tls_ = version;
  }

  // A sync round trip succeeded at `now` (the store's clock).
  void note_success(Nanos now) noexcept {
    linked_.store(true, std::memory_order_release);
    last_ok_.store(now, std::memory_order_release);
    last_ok_unix_.store(
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
            .count(),
        std::memory_order_release);
    syncs_.fetch_add(1, std::memory_order_relaxed);
  }

  // What users are shown, at `now`; `linked`: whether this process may use
  // the link (a fork()ed child may not, whatever up() says).
  Stats stats(Nanos now, bool linked) const {
    Stats s;
    s.linked = linked;
    const Nanos last = last_ok_.load(std::memory_order_acquire);
    s.since_last_sync = last > 0 ? now - last : -1;
    s.last_sync_unix = last_ok_unix_.load(std::memory_order_acquire);
    s.syncs = syncs_.load(std::memory_order_relaxed);
    s.failures = failures_.load(std::memory_order_relaxed);
    s.alone =
        !s.linked && (last > 0 ? s.since_last_sync > alone_after() : s.failures > 0);
    std::lock_guard<std::mutex> g(error_mutex_);
    s.last_error = redact_password(last_error_, endpoint_);
    s.tls = tls_;
    return s;
  }

  Nanos alone_after() const noexcept {
    const Nanos n = sync_interval_ * kAloneSyncs;
    return n > kAloneMinimum ? n : kAloneMinimum;
  }

 private:
  // The link's breaker: a failed round trip opens it; retries after 0.25 s
  // (at least one sync interval), doubling to at most 5 s, with jitter.
  static Settings breaker_settings(const FleetSpec& spec) {
    Config c;
    c.failure_threshold = 1;
    const double interval = nanos_to_seconds(spec.sync_interval);
    c.recovery_timeout = interval > 0.25 ? interval : 0.25;
    c.backoff_multiplier = 2;
    c.max_recovery_timeout = 5;
    c.jitter = 0.2;
    return make_settings(c);
  }

  const RedisEndpoint endpoint_;
  const Nanos sync_interval_;
  Breaker breaker_;  // the sync thread's
  std::atomic<bool> linked_{false};
  std::atomic<Nanos> last_ok_{0};
  std::atomic<double> last_ok_unix_{-1};
  std::atomic<std::uint64_t> syncs_{0}, failures_{0};
  mutable std::mutex error_mutex_;
  std::string last_error_;
  std::string tls_ = endpoint_.tls.enabled ? "on" : "off";
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_FLEET_LINK_HPP
