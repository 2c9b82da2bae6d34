// The Redis transport of fleet-wide breakers (fleet/member.hpp), on hiredis.
//
// One FleetSync per store (server, prefix, intervals) per process. It owns
// a background thread that never calls R: every sync_interval (or at once
// when woken by a caller, or by a transition published by another process)
// it sends one EVALSHA of the SYNC script for all of the process's breakers
// of that store, and applies the replies. The same thread holds a pub/sub
// subscription to the store's events channel; polling every tick is the
// safety net, since pub/sub drops messages across a reconnect.
//
// The caller's thread uses its own connection, for one thing only: the
// fleet-wide lease of a half-open probe (and the first registration of a
// breaker), each bounded by `timeout` in all (connect included).
//
// A connection the server closed while it was idle (Redis restarted,
// CLIENT KILL, Redis's own idle `timeout`, a proxy's) is found dead only by
// the next command, which fails at once. So both the sync thread and a
// lease try once more on a new connection before they call Redis
// unreachable: a probe goes out without a fleet-wide lease only when Redis
// really cannot be reached, and the mode then says "local".
//
// The link has its own breaker (a core Breaker): a failed round trip opens
// it, and until it lets a retry through, nothing waits on Redis; every
// breaker runs on its local rules (mode "local") and its counts wait in its
// pending report, to be merged on reconnect.
#ifndef CIRCUITBREAKER_REDIS_SYNC_HPP
#define CIRCUITBREAKER_REDIS_SYNC_HPP

#ifdef CIRCUITBREAKER_HAVE_HIREDIS

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "../clock.hpp"
#include "../fleet/member.hpp"
#include "../fleet/script.hpp"
#include "../random.hpp"
#include "connection.hpp"
#include "keys.hpp"

namespace circuitbreaker {

class FleetSync : public std::enable_shared_from_this<FleetSync> {
 public:
  struct Stats {
    bool linked = false;
    Nanos since_last_sync = -1;  // -1: never
    double last_sync_unix = -1;  // seconds since the epoch; -1: never
    std::uint64_t syncs = 0, failures = 0;
    std::string last_error;
    bool alone = false;  // see alone()
  };

  // A store is alone when its link is down and either never came up (the
  // first breaker's registration failed: a typo in the URL, a firewall) or
  // has been down for longer than kAloneSyncs sync intervals, and at least
  // kAloneMinimum, so that one failed sync, retried by the link breaker
  // after 0.25 s, is not taken for an outage. R says so once (and again
  // when the link is back); the breakers run on their local rules meanwhile.
  static constexpr int kAloneSyncs = 5;
  static constexpr Nanos kAloneMinimum = 1000 * kNanosPerMs;

  explicit FleetSync(const FleetSpec& spec)
      : spec_(spec), link_(link_settings(spec), now()) {
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

  // The process's FleetSync for `spec`, made on first use.
  static std::shared_ptr<FleetSync> for_spec(const FleetSpec& spec) {
    Registry& r = registry();
    std::lock_guard<std::mutex> g(r.mutex);
    std::weak_ptr<FleetSync>& slot = r.syncs[spec.identity()];
    std::shared_ptr<FleetSync> s = slot.lock();
    if (!s) {
      s = std::make_shared<FleetSync>(spec);
      slot = s;
    }
    return s;
  }

  // The process's FleetSync for `spec` if one exists (nullptr otherwise):
  // for showing a store's link without starting one.
  static std::shared_ptr<FleetSync> find(const FleetSpec& spec) {
    Registry& r = registry();
    std::lock_guard<std::mutex> g(r.mutex);
    const auto it = r.syncs.find(spec.identity());
    return it == r.syncs.end() ? nullptr : it->second.lock();
  }

  // Stops every sync thread of the process (the package is being unloaded)
  // and waits for them, at most `wait`.
  static void shutdown_all(Nanos wait) {
    Registry& r = registry();
    std::vector<std::shared_ptr<FleetSync>> all;
    {
      std::lock_guard<std::mutex> g(r.mutex);
      for (auto& kv : r.syncs) {
        if (auto s = kv.second.lock()) all.push_back(s);
      }
    }
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
  Nanos now() const noexcept { return SteadyClock::now() + spec_.clock_offset; }
  // In a fork()ed child there is no sync thread, and the connections are
  // the parent's: the child's breakers run on local rules and never write
  // to those sockets.
  bool linked() const noexcept {
    return linked_.load(std::memory_order_acquire) && ::getpid() == pid_;
  }

  // A new member for breaker `name` of this store, registered (add()): its
  // key, and a random report-id prefix of its own (report ids must be
  // unique across the fleet's processes).
  std::shared_ptr<FleetMember> join(const std::string& name, const Config& config) {
    std::uint64_t seed = entropy_seed();
    char id[40];
    std::snprintf(id, sizeof id, "%016llx%08llx",
                  static_cast<unsigned long long>(splitmix64(seed)),
                  static_cast<unsigned long long>(splitmix64(seed) >> 32));
    auto m = std::make_shared<FleetMember>(name, fleet_key(spec_.prefix, name), config,
                                           now(), id);
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
    {
      std::lock_guard<std::mutex> g(caller_mutex_);
      std::vector<FleetMember*> one{m.get()};
      if (!sync_twice(caller_, one)) note_failure(caller_.error());
    }
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
    std::lock_guard<std::mutex> g(caller_mutex_);
    std::vector<FleetMember*> one{m.get()};
    if (!sync_twice(caller_, one)) note_failure(caller_.error());
  }

  // A fleet-wide probe lease for `key` (fleet/script.hpp, LEASE), within
  // `timeout` in all (the wait for the caller's connection included). The
  // first attempt goes out on the caller's connection as it is; when that
  // fails without an answer (the server closed it: that costs no wait), the
  // connection is made again and the lease asked once more, in what is left
  // of the timeout. Returns the script's reply; {"busy"} when another call
  // held the connection for the whole timeout (the probe is declined, not
  // sent: Redis is reachable, so a probe without a lease could be one too
  // many); nullopt when Redis cannot be reached, and at once while the link
  // is down: then the link is marked down (mode "local") and the probe goes
  // out on local rules.
  std::optional<std::vector<std::string>> lease(const std::string& key,
                                                const std::string& token,
                                                std::int64_t lease_ms) {
    if (!linked()) return std::nullopt;
    const Nanos deadline = SteadyClock::now() + spec_.timeout;
    if (!lock_until(caller_mutex_, deadline)) return std::vector<std::string>{"busy"};
    std::lock_guard<std::mutex> g(caller_mutex_, std::adopt_lock);
    const std::vector<std::string> args{token, std::to_string(lease_ms), spec_.channel()};
    for (int attempt = 0; attempt < 2; ++attempt) {
      const Nanos left = deadline - SteadyClock::now();
      if (left <= 0) break;
      if (!caller_.connected() && !caller_.connect(spec_.endpoint, left)) break;
      caller_.set_timeout(deadline - SteadyClock::now());
      RedisConnection::ReplyPtr r = caller_.eval(true, {key}, args);
      caller_.set_timeout(spec_.timeout);
      if (r && r->type == REDIS_REPLY_ARRAY) {
        std::vector<std::string> out;
        for (std::size_t i = 0; i < r->elements; ++i) {
          out.push_back(RedisConnection::reply_text(r->element[i]));
        }
        // No fleet state (Redis restarted empty): the sync thread rebuilds it.
        if (!out.empty() && out[0] == "absent") wake();
        return out;
      }
      if (r) break;  // Redis answered with an error: not a dead connection
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

  Stats stats() const {
    Stats s;
    s.linked = linked();
    const Nanos last = last_ok_.load(std::memory_order_acquire);
    s.since_last_sync = last > 0 ? now() - last : -1;
    s.last_sync_unix = last_ok_unix_.load(std::memory_order_acquire);
    s.syncs = syncs_.load(std::memory_order_relaxed);
    s.failures = failures_.load(std::memory_order_relaxed);
    s.alone =
        !s.linked && (last > 0 ? s.since_last_sync > alone_after() : s.failures > 0);
    std::lock_guard<std::mutex> g(error_mutex_);
    s.last_error = redact_password(last_error_, spec_.endpoint);
    return s;
  }

  Nanos alone_after() const noexcept {
    const Nanos n = spec_.sync_interval * kAloneSyncs;
    return n > kAloneMinimum ? n : kAloneMinimum;
  }

 private:
  struct Registry {
    std::mutex mutex;
    std::map<std::string, std::weak_ptr<FleetSync>> syncs;
  };
  static Registry& registry() {
    static Registry* r = new Registry;  // never destroyed: threads may outlive exit()
    return *r;
  }

  // Link breaker: a failed round trip opens it; retries after 0.25 s (at
  // least one sync interval), doubling to at most 5 s, with jitter.
  static Settings link_settings(const FleetSpec& spec) {
    Config c;
    c.failure_threshold = 1;
    const double interval = nanos_to_seconds(spec.sync_interval);
    c.recovery_timeout = interval > 0.25 ? interval : 0.25;
    c.backoff_multiplier = 2;
    c.max_recovery_timeout = 5;
    c.jitter = 0.2;
    return make_settings(c);
  }

  void stop() {
    stop_ = true;
    wake();
  }

  std::nullopt_t lost(const std::string& why) {
    note_failure(why);
    caller_wanted_.store(true, std::memory_order_release);
    linked_.store(false, std::memory_order_release);
    wake();  // the thread reconnects, paced by the link breaker
    return std::nullopt;
  }

  void note_failure(const std::string& why) {
    failures_.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> g(error_mutex_);
    last_error_ = why;
  }

  void note_success() {
    linked_.store(true, std::memory_order_release);
    last_ok_.store(now(), std::memory_order_release);
    last_ok_unix_.store(
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
            .count(),
        std::memory_order_release);
    syncs_.fetch_add(1, std::memory_order_relaxed);
  }

  // Locks `m` by `deadline`, or false. It polls: the caller's connection is
  // held for a few round trips at most, and rarely (a timed mutex would
  // do, but GCC 12's ThreadSanitizer does not see pthread_mutex_clocklock()
  // and reports every unlock after it).
  static bool lock_until(std::mutex& m, Nanos deadline) {
    while (!m.try_lock()) {
      if (SteadyClock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return true;
  }

  // `conn`, connected and with its scripts loaded (each round trip bounded
  // by `timeout`).
  bool ready(RedisConnection& conn) {
    return conn.connected() ||
           (conn.connect(spec_.endpoint, spec_.timeout) && conn.load_scripts());
  }

  // One SYNC on `conn`, made first if needed; once more on a new connection
  // when `conn` was open but failed at once (the server closed it while it
  // was idle: only a second failure says that Redis cannot be reached; a
  // round trip that timed out is not tried again, so that a hung Redis
  // costs one timeout). A retried report is applied once (reports carry
  // ids).
  bool sync_twice(RedisConnection& conn, const std::vector<FleetMember*>& members) {
    const bool was_open = conn.connected();
    const Nanos started = SteadyClock::now();
    if (ready(conn) && sync(conn, members)) return true;
    return was_open && SteadyClock::now() - started < spec_.timeout / 2 && ready(conn) &&
           sync(conn, members);
  }

  // One SYNC for `members` on `conn` (one round trip, bounded by `timeout`);
  // applies the replies. False when the round trip failed (the reports stay
  // pending).
  bool sync(RedisConnection& conn, const std::vector<FleetMember*>& members) {
    std::vector<std::string> keys, args;
    keys.reserve(members.size());
    args.reserve(3 + members.size() * FleetReport::kArgs);
    args.push_back(std::to_string(spec_.key_ttl_ms));
    args.push_back(spec_.channel());
    args.push_back(std::to_string(FleetReport::kArgs));
    const Nanos t = now();
    std::vector<FleetReport> sent;
    sent.reserve(members.size());
    for (FleetMember* m : members) {
      keys.push_back(m->key());
      sent.push_back(m->build(t));
      sent.back().append_args(args, m->fingerprint(), m->rules());
    }
    RedisConnection::ReplyPtr r = conn.eval(false, keys, args);
    if (!r || r->type != REDIS_REPLY_ARRAY ||
        r->elements != members.size() * FleetReply::kFields) {
      if (r && r->type != REDIS_REPLY_ERROR)
        note_failure("unexpected reply to the sync script");
      conn.close();
      return false;
    }
    const Nanos at = now();
    std::string fields[FleetReply::kFields];
    for (std::size_t i = 0; i < members.size(); ++i) {
      for (int j = 0; j < FleetReply::kFields; ++j) {
        fields[j] = RedisConnection::reply_text(r->element[i * FleetReply::kFields + j]);
      }
      FleetReply reply;
      if (reply.parse(fields)) members[i]->apply(reply, at, sent[i]);
    }
    note_success();
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

  void tick() {
    std::vector<std::shared_ptr<FleetMember>> live = live_members();
    if (live.empty()) return;
    const Nanos t = now();
    const Admission a = link_.acquire(t);
    if (!a.permitted) {
      linked_.store(false, std::memory_order_release);
      return;
    }
    std::vector<FleetMember*> raw;
    for (auto& m : live) raw.push_back(m.get());
    const bool ok = sync_twice(conn_, raw);
    if (!ok) {
      note_failure(conn_.error());
      linked_.store(false, std::memory_order_release);
      sub_.close();
    }
    link_.record(a.permit, ok ? Outcome::Success : Outcome::Failure, now());
    if (ok && !sub_.connected()) subscribe();
    // A call found the caller's connection broken: make it here, where
    // waiting costs no call anything.
    if (ok && caller_wanted_.exchange(false, std::memory_order_acq_rel)) {
      std::lock_guard<std::mutex> g(caller_mutex_);
      if (!ready(caller_)) note_failure(caller_.error());
    }
  }

  void subscribe() {
    if (!sub_.connect(spec_.endpoint, spec_.timeout)) return;
    RedisConnection::ReplyPtr r = sub_.command({"SUBSCRIBE", spec_.channel()});
    if (!r || r->type != REDIS_REPLY_ARRAY) sub_.close();
  }

  // Reads what the subscription has; true when a transition was published.
  bool read_events() {
    redisContext* c = sub_.context();
    if (c == nullptr) return false;
    void* reply = nullptr;
    if (redisBufferRead(c) != REDIS_OK) {
      sub_.close();
      return true;  // lost: sync now, as if told
    }
    bool any = false;
    while (redisGetReplyFromReader(c, &reply) == REDIS_OK && reply != nullptr) {
      any = true;
      freeReplyObject(reply);
      reply = nullptr;
    }
    return any;
  }

  // The next regular sync: one interval on, give or take 10%, so that the
  // processes of a fleet do not sync in step.
  Nanos next_tick(Nanos from) noexcept {
    const double f = 0.9 + 0.2 * uniform01(rng_);
    return from + static_cast<Nanos>(static_cast<double>(spec_.sync_interval) * f);
  }

  void run() {
    Nanos next = 0;  // the regular schedule, which a wake-up does not move
    bool urgent = false;
    while (!finished()) {
      const Nanos t = now();
      if (t >= next || urgent) {
        tick();
        urgent = false;
        if (t >= next) next = next_tick(now());
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
        now_please = read_events() || now_please;
      }
      if (now_please) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));  // coalesce a burst
        urgent = true;
      }
    }
  }

  const FleetSpec spec_;
  const pid_t pid_ = ::getpid();
  Breaker link_;                // the sync thread's
  RedisConnection conn_, sub_;  // the sync thread's
  RedisConnection caller_;      // the caller's thread, under caller_mutex_
  std::mutex caller_mutex_;
  std::atomic<bool> caller_wanted_{false};  // a call found caller_ unconnected
  std::atomic<Nanos> last_nudge_{0};
  std::uint64_t rng_ = entropy_seed();  // the sync thread's
  int wake_[2] = {-1, -1};

  std::mutex members_mutex_;
  std::condition_variable stopped_;
  std::vector<std::weak_ptr<FleetMember>> members_;
  bool running_ = false;
  std::atomic<bool> stop_{false};

  std::atomic<bool> linked_{false};
  std::atomic<Nanos> last_ok_{0};
  std::atomic<double> last_ok_unix_{-1};
  std::atomic<std::uint64_t> syncs_{0}, failures_{0};
  mutable std::mutex error_mutex_;
  std::string last_error_;
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HAVE_HIREDIS
#endif  // CIRCUITBREAKER_REDIS_SYNC_HPP
