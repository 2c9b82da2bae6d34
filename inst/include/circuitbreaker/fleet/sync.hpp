// The sync thread of fleet-wide breakers (fleet/member.hpp).
//
// One FleetSync per store (server, prefix, intervals) per process. It owns
// a background thread that never calls R: every sync_interval (or at once
// when woken by a caller, or by a transition published by another process)
// it sends one EVALSHA of the SYNC script for the process's breakers of that
// store that have something to say or to learn, and applies the replies.
//
// Cost follows activity (fleet/sync_choice.hpp says which breakers a sync
// carries): breakers with news, breakers another process moved (the
// scripts publish each breaker whose state they change on the store's
// events channel, which this thread subscribes to), every breaker once
// after each (re)subscription (pub/sub drops what is published while the
// subscription is down; below: when it is kept, when dropped), and one
// breaker a second in turn. A sync with
// none of these is a PING, which keeps the link's state (mode, sync_lag)
// true. So an idle store costs Redis a PING per sync (on a Cluster, one per
// master) and one EVALSHA of one breaker a second, however many breakers.
//
// The subscription, and when it is kept or dropped: fleet/subscription.hpp.
//
// The store is on a single server, a master behind Sentinel or a Redis
// Cluster alike (fleet/transport.hpp, fleet/round_trip.hpp, redis/router.hpp).
//
// The caller's thread uses its own connection, for leases only: the
// fleet-wide lease of a half-open probe or of a health check (and the first
// registration of a breaker), each bounded by `timeout` in all (connect
// included). A connection the server closed while it was idle is found dead
// only by the next command, so both threads try once more on a new
// connection before they call Redis unreachable (the mode says "local").
//
// The link has its own breaker (fleet/link.hpp): after a failed round trip
// nothing waits on Redis until it lets a retry through; breakers run on
// local rules (mode "local"), their counts pending until the reconnect.
//
// Here: the thread, its members and wake-ups. The link's state is in
// link.hpp, the round trips in round_trip.hpp, the routing in router.hpp.
#ifndef CIRCUITBREAKER_FLEET_SYNC_HPP
#define CIRCUITBREAKER_FLEET_SYNC_HPP

#ifdef CIRCUITBREAKER_HAVE_HIREDIS

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "../clock.hpp"
#include "member.hpp"
#include "sync_choice.hpp"
#include "../random.hpp"
#include "../redis/connection.hpp"
#include "keys.hpp"
#include "link.hpp"
#include "registry.hpp"
#include "round_trip.hpp"
#include "subscription.hpp"
#include "sync_schedule.hpp"
#include "transport.hpp"

namespace circuitbreaker {

class FleetSync : public std::enable_shared_from_this<FleetSync> {
 public:
  using Stats = FleetLink::Stats;

  explicit FleetSync(const FleetSpec& spec) : spec_(spec), link_(spec, now()) {
    if (::pipe(wake_) != 0) wake_[0] = wake_[1] = -1;
    for (int fd : wake_) {
      if (fd >= 0) {
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
        ::fcntl(fd, F_SETFD, FD_CLOEXEC);
      }
    }
  }
  ~FleetSync() {
    for (int fd : wake_) {
      if (fd >= 0) ::close(fd);
    }
  }

  // The process's FleetSync for `spec`, made on first use; the one that
  // exists, or nullptr (for showing a store's link without starting one).
  static std::shared_ptr<FleetSync> for_spec(const FleetSpec& spec) {
    return SyncRegistry<FleetSync>::for_spec(spec);
  }
  static std::shared_ptr<FleetSync> find(const FleetSpec& spec) {
    return SyncRegistry<FleetSync>::find(spec);
  }

  // Stops every sync thread of the process (the package is being unloaded)
  // and waits for them, at most `wait`.
  static void shutdown_all(Nanos wait) {
    const std::vector<std::shared_ptr<FleetSync>> all = SyncRegistry<FleetSync>::all();
    for (auto& s : all) s->stop();
    const Nanos deadline = SteadyClock::now() + wait;
    for (auto& s : all) {
      std::unique_lock<std::mutex> g(s->members_mutex_);
      while (s->running_ && SteadyClock::now() < deadline) {
        s->stopped_.wait_for(g, std::chrono::milliseconds(10));
      }
    }
  }

  const FleetSpec& spec() const noexcept { return spec_; }
  Nanos now() const noexcept { return fleet_clock(spec_); }
  // In a fork()ed child there is no sync thread, and the connections are
  // the parent's: the child's breakers run on local rules and never write
  // to those sockets.
  bool linked() const noexcept { return link_.up() && ::getpid() == pid_; }

  // A new member for breaker `name` of this store, registered (add()): its
  // key, and a random report-id prefix of its own (report ids must be
  // unique across the fleet's processes).
  std::shared_ptr<FleetMember> join(const std::string& name, const Config& config) {
    std::uint64_t seed = entropy_seed();
    auto m = std::make_shared<FleetMember>(name, fleet_key(spec_.prefix, name), config,
                                           now(), random_hex(seed, 24));
    add(m);
    return m;
  }

  // Registers a breaker: one SYNC for it alone on the caller's connection,
  // so that a configuration the fleet does not share is reported at once;
  // then the thread takes it over. This is the one place a caller waits for
  // more than one round trip (each bounded by `timeout`): connecting, AUTH,
  // SELECT and loading the scripts, when the connection is new.
  void add(const std::shared_ptr<FleetMember>& m) {
    if (::getpid() != pid_) return;  // a fork()ed child: local rules only
    sync_on_caller(m);
    std::lock_guard<std::mutex> g(members_mutex_);
    members_.push_back(m);
    if (!running_) {
      running_ = true;
      stop_ = false;
      std::thread([self = shared_from_this()] { self->run(); }).detach();
    }
  }

  // Sends `m`'s last counts now, on the caller's connection, within
  // `timeout` (a breaker being freed, or the process exiting): what was
  // counted since the last sync is not lost. Nothing when the link is down.
  void flush(const std::shared_ptr<FleetMember>& m) {
    if (!linked()) return;
    sync_on_caller(m);
  }

  // A fleet-wide probe lease for the breaker whose LEASE keys are `keys`
  // (fleet/script.hpp, LEASE; keys.hpp's fleet_lease_keys()), within
  // `timeout` in all, on the caller's connection (transport.hpp). Returns
  // the script's reply; {"busy"} when another call held the connection for
  // the whole timeout (the probe is declined: Redis is reachable); nullopt
  // when Redis (on a cluster: the breaker's master) cannot be reached, and
  // at once while the link is down: the probe goes out on local rules.
  std::optional<std::vector<std::string>> lease(const std::vector<std::string>& keys,
                                                const std::string& token,
                                                std::int64_t lease_ms) {
    if (!linked()) return std::nullopt;
    const Nanos deadline = SteadyClock::now() + spec_.timeout;
    if (!lock_until(caller_mutex_, deadline)) return std::vector<std::string>{"busy"};
    std::lock_guard<std::mutex> g(caller_mutex_, std::adopt_lock);
    std::optional<std::vector<std::string>> out =
        caller_.lease(spec_, keys, token, lease_ms, deadline);
    // On a cluster, one master is out of reach: not the others.
    if (!out && caller_.cluster()) link_.note_failure(caller_.error());
    if (!out) return caller_.cluster() ? std::nullopt : lost(caller_.error());
    // No fleet state (Redis restarted empty): the sync thread rebuilds it.
    if (!out->empty() && (*out)[0] == "absent") wake();
    return out;
  }

  // The fleet-wide lease of a health check (keys.hpp's fleet_health_key()),
  // as lease() takes a probe's: within `timeout` in all, on the caller's
  // connection. True when this process took it (it runs this interval's
  // check); false when another process holds it, or another call held the
  // connection for the whole timeout (Redis is reachable: the check is left
  // to another process or interval); nullopt when Redis (on a cluster: the
  // breaker's master) cannot be reached, and at once while the link is
  // down: the check runs on local rules.
  std::optional<bool> health_lease(const std::string& key, const std::string& token,
                                   std::int64_t lease_ms) {
    if (!linked()) return std::nullopt;
    const Nanos deadline = SteadyClock::now() + spec_.timeout;
    if (!lock_until(caller_mutex_, deadline)) return false;
    std::lock_guard<std::mutex> g(caller_mutex_, std::adopt_lock);
    const std::optional<bool> out =
        caller_.health_lease(spec_, key, token, lease_ms, deadline);
    if (out) return out;
    if (caller_.cluster()) {
      link_.note_failure(caller_.error());
      return std::nullopt;
    }
    return lost(caller_.error());
  }

  // A failure was recorded: sync soon, so that failures spread over the
  // fleet reach its count without waiting for the next tick. At most one
  // such early sync per tenth of sync_interval, so that a failing downstream
  // costs Redis at most ten extra syncs per interval per process.
  void nudge() noexcept {
    const Nanos t = SteadyClock::now();
    Nanos last = last_nudge_.load(std::memory_order_relaxed);
    if (t - last < spec_.sync_interval / 10) return;
    if (last_nudge_.compare_exchange_strong(last, t, std::memory_order_relaxed)) wake();
  }

  // Something to send now (a settled probe, a manual command).
  void wake() noexcept {
    if (wake_[1] >= 0) {
      const char c = 1;
      [[maybe_unused]] ssize_t n = ::write(wake_[1], &c, 1);
    }
  }

  Stats stats() const { return link_.stats(now(), linked()); }

  // How many times the sync thread subscribed to the events channel (each
  // time, it asked for a read of every breaker): for tests.
  std::uint64_t subscriptions() const noexcept {
    return subscriptions_.load(std::memory_order_relaxed);
  }

  // One breaker's link (on a cluster, its master's), the topology, the
  // masters, the master of `key` (transport.hpp).
  Stats stats_for(const std::string& key) const {
    return breaker_link_stats(stats(), *view_, key, now());
  }
  const char* topology() const noexcept { return store_topology(*view_, spec_.endpoint); }
  std::size_t masters() const { return view_->cluster() ? view_->master_count() : 1; }
  std::string master_for(const std::string& key) const {
    return master_of_key(*view_, spec_.endpoint, key);
  }

 private:
  // One SYNC of `m` alone on the caller's connection.
  void sync_on_caller(const std::shared_ptr<FleetMember>& m) {
    std::lock_guard<std::mutex> g(caller_mutex_);
    const std::vector<FleetMember*> one{m.get()};
    if (!caller_.sync(spec_, one, link_, false)) link_.note_failure(caller_.error());
  }

  void stop() {
    stop_ = true;
    wake();
  }

  std::nullopt_t lost(const std::string& why) {
    link_.note_failure(why);
    caller_wanted_.store(true, std::memory_order_release);
    link_.down();
    wake();  // the thread reconnects, paced by the link breaker
    return std::nullopt;
  }

  // Locks `m` by `deadline`, or false. It polls (GCC 12's ThreadSanitizer
  // does not see pthread_mutex_clocklock(), so no timed mutex).
  static bool lock_until(std::mutex& m, Nanos deadline) {
    while (!m.try_lock()) {
      if (SteadyClock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return true;
  }

  std::vector<std::shared_ptr<FleetMember>> live_members() {
    std::vector<std::shared_ptr<FleetMember>> out;
    std::lock_guard<std::mutex> g(members_mutex_);
    std::vector<std::weak_ptr<FleetMember>> kept;
    for (auto& w : members_) {
      if (auto m = w.lock()) {
        out.push_back(m);
        kept.push_back(w);
      }
    }
    members_.swap(kept);
    return out;
  }

  // Whether the thread should end: stopped, or no breaker left.
  bool finished() {
    std::lock_guard<std::mutex> g(members_mutex_);
    bool any = false;
    for (auto& w : members_) any = any || !w.expired();
    if (stop_ || !any) {
      running_ = false;
      stopped_.notify_all();
      return true;
    }
    return false;
  }

  // One sync of the breakers that have something to say or to learn (the
  // header says which). Returns whether wanted reads were left for the next
  // one.
  bool tick() {
    std::vector<std::shared_ptr<FleetMember>> live = live_members();
    if (live.empty()) return false;
    const Admission a = link_.admit(now());
    if (!a.permitted) return false;  // the link is down: nothing waits on Redis
    bool left = false;
    std::vector<FleetMember*> raw = choice_.choose(live, now(), left);
    const bool ok = conn_.sync(spec_, raw, link_, true);
    if (!ok) {
      link_.note_failure(conn_.error());
      link_.down();
      check_subscription_ = true;  // kept: checked when the link is back
    }
    link_.settle(a.permit, ok, now());
    bool named = false;
    if (ok && check_subscription_) {
      check_subscription_ = false;
      if (sub_.connected() &&
          (!on_sync_server() || !sub_.answers(spec_, choice_, named))) {
        sub_.close();
      }
    }
    const bool subscribed = ok && !sub_.connected() && subscribe();
    // A call found the caller's connection broken: make it here, where
    // waiting costs no call anything.
    if (ok && caller_wanted_.exchange(false, std::memory_order_acq_rel)) {
      std::lock_guard<std::mutex> g(caller_mutex_);
      if (!caller_.ready(spec_)) link_.note_failure(caller_.error());
    }
    return ok && (left || subscribed || named);
  }

  // Subscribes to the store's events channel, then asks for a read of every
  // breaker: what was published while there was no subscription is lost.
  bool subscribe() {
    std::string refused;
    if (!sub_.subscribe(conn_, spec_, refused)) {
      if (!refused.empty()) link_.note_failure(refused);
      return false;
    }
    for (auto& m : live_members()) m->want();
    subscriptions_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  // Whether the subscription is on the server that the syncs go to: behind
  // Sentinel, a failover moves them to the new master, whose messages a
  // subscription on the old one does not see (a demoted master that Sentinel
  // reconfigures also drops its subscribers). On a Cluster, any node's
  // subscription sees every message.
  bool on_sync_server() const {
    return conn_.cluster() || conn_.server_address() == sub_.address();
  }

  // Keeps idle connections alive through the proxies of managed services,
  // which drop a connection idle for a few minutes: the subscription's, and
  // the caller's when no call used it for as long (never waiting for one).
  void keep_alive() {
    const Nanos t = SteadyClock::now();
    sub_.keep_alive(t, spec_.keep_alive);
    if (t - caller_pinged_ >= spec_.keep_alive && caller_mutex_.try_lock()) {
      std::lock_guard<std::mutex> g(caller_mutex_, std::adopt_lock);
      caller_pinged_ = t;
      caller_.keep_alive(spec_);
    }
  }

  void run() {
    Nanos next = 0;  // the regular schedule, which a wake-up does not move
    bool urgent = false;
    while (!finished()) {
      const Nanos t = now();
      if (t >= next || urgent) {
        // Wanted reads left over (a resubscription's): the next sync at once.
        urgent = tick();
        if (t >= next) next = schedule_.after(next, now());
        continue;
      }
      keep_alive();
      // Replies already read, or decrypted bytes that TLS holds: no poll()
      // of the socket would see them.
      if (sub_.connected() && sub_.ready()) {
        if (sub_.read(choice_)) urgent = true;
        continue;
      }
      pollfd fds[2];
      int n = 0;
      fds[n++] = {wake_[0], POLLIN, 0};
      if (sub_.connected()) fds[n++] = {sub_.fd(), POLLIN, 0};
      const Nanos wait = next - t;
      const int ms = static_cast<int>(wait / kNanosPerMs) + 1;
      const int ready = ::poll(fds, static_cast<nfds_t>(n), ms);
      if (ready <= 0) continue;
      bool now_please = false;
      if (fds[0].revents & POLLIN) {
        char buf[64];
        while (::read(wake_[0], buf, sizeof buf) > 0) {
        }
        now_please = true;
      }
      if (n > 1 && (fds[1].revents & (POLLIN | POLLERR | POLLHUP))) {
        now_please = sub_.read(choice_) || now_please;
      }
      if (now_please) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));  // coalesce a burst
        urgent = true;
      }
    }
  }

  const FleetSpec spec_;
  const pid_t pid_ = ::getpid();
  FleetLink link_;
  // Single server or Cluster (transport.hpp): what both threads know.
  const std::shared_ptr<ClusterView> view_ = std::make_shared<ClusterView>();
  // The sync thread's: it gives a TLS handshake up to a second (a fleet
  // reconnecting at once on a busy machine misses 0.1 s; no call waits).
  FleetTransport conn_{view_, spec_.endpoint.tls.enabled
                                  ? std::max(spec_.timeout, kNanosPerSecond)
                                  : spec_.timeout};
  FleetSubscription sub_;         // the sync thread's
  FleetTransport caller_{view_};  // the caller's thread, under caller_mutex_
  std::mutex caller_mutex_;
  std::atomic<bool> caller_wanted_{false};  // a call found caller_ unconnected
  std::atomic<Nanos> last_nudge_{0};
  SyncSchedule schedule_{spec_.sync_interval};  // the sync thread's
  SyncChoice choice_;  // the sync thread's: which breakers a sync carries
  // The sync thread's: a sync failed since the subscription's last check.
  bool check_subscription_ = false;
  std::atomic<std::uint64_t> subscriptions_{0};
  int wake_[2] = {-1, -1};
  Nanos caller_pinged_ = SteadyClock::now();  // keep_alive(): the sync thread's

  std::mutex members_mutex_;
  std::condition_variable stopped_;
  std::vector<std::weak_ptr<FleetMember>> members_;
  bool running_ = false;
  std::atomic<bool> stop_{false};
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HAVE_HIREDIS
#endif  // CIRCUITBREAKER_FLEET_SYNC_HPP
