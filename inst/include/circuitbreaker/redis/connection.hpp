// One connection to Redis on hiredis, every round trip bounded by the
// store's timeout (connect included), with AUTH, SELECT and the fleet's
// scripts loaded when new. Where it connects: the endpoint's host, or the
// master that the sentinels name (redis/sentinel.hpp), asked again on
// every new connection. Passwords never reach error().
#ifndef CIRCUITBREAKER_REDIS_CONNECTION_HPP
#define CIRCUITBREAKER_REDIS_CONNECTION_HPP

#ifdef CIRCUITBREAKER_HAVE_HIREDIS

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "../clock.hpp"
#include "../fleet/protocol.hpp"
#include "../fleet/script.hpp"
#include "keys.hpp"
#include "reply_value_hiredis.hpp"
#include "sentinel.hpp"
#include "url.hpp"

namespace circuitbreaker {

// One hiredis connection: connect within the timeout, then AUTH and SELECT
// and every command, each round trip bounded by the timeout.
// A command's arguments as hiredis takes them (pointers and lengths: binary
// safe), viewing `args`, which must outlive it.
class RedisArgv {
 public:
  explicit RedisArgv(const std::vector<std::string>& args) {
    values_.reserve(args.size());
    lengths_.reserve(args.size());
    for (const std::string& a : args) {
      values_.push_back(a.data());
      lengths_.push_back(a.size());
    }
  }
  int count() const noexcept { return static_cast<int>(values_.size()); }
  const char** values() const noexcept {
    return const_cast<const char**>(values_.data());
  }
  const size_t* lengths() const noexcept { return lengths_.data(); }

 private:
  std::vector<const char*> values_;
  std::vector<size_t> lengths_;
};

class RedisConnection {
 public:
  RedisConnection() = default;
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;
  ~RedisConnection() { close(); }

  bool connected() const noexcept { return ctx_ != nullptr; }
  int fd() const noexcept { return ctx_ ? ctx_->fd : -1; }
  redisContext* context() noexcept { return ctx_; }
  // What failed last (hiredis's or the server's words), with the
  // password of the last endpoint connected to redacted.
  std::string error() const { return redact_password(error_, endpoint_); }

  // The bound of every later round trip on this connection.
  void set_timeout(Nanos timeout) noexcept {
    if (ctx_) redisSetTimeout(ctx_, to_timeval(timeout));
  }

  // The host:port connected to ("" when not connected): behind Sentinel,
  // the master of the moment.
  const std::string& address() const noexcept { return address_; }

  void close() noexcept {
    if (ctx_) redisFree(ctx_);
    ctx_ = nullptr;
    address_.clear();
    sync_sha_.clear();
    lease_sha_.clear();
  }

  // Connects to `e` (through its sentinels, when it has some), all within
  // `timeout`; false, with error() saying why, otherwise.
  bool connect(const RedisEndpoint& e, Nanos timeout) {
    close();
    endpoint_ = e;
    if (e.sentinels) return connect_to_master(*e.sentinels, timeout);
    return connect_to(e.host, e.port, timeout);
  }

  // A plain connection to host:port with the endpoint's AUTH and SELECT.
  bool connect_to(const std::string& host, int port, Nanos timeout) {
    const RedisEndpoint& e = endpoint_;
    const timeval tv = to_timeval(timeout);
    ctx_ = redisConnectWithTimeout(host.c_str(), port, tv);
    if (ctx_ == nullptr || ctx_->err) {
      error_ = ctx_ ? ctx_->errstr : "cannot allocate a Redis context";
      close();
      return false;
    }
    redisSetTimeout(ctx_, tv);
    address_ = host + ":" + std::to_string(port);
    if (e.has_password) {
      std::vector<std::string> auth{"AUTH"};
      if (!e.username.empty()) auth.push_back(e.username);
      auth.push_back(e.password);
      if (!ok(command(auth))) return false;
    }
    if (e.db != 0 && !ok(command({"SELECT", std::to_string(e.db)}))) return false;
    return true;
  }

  struct ReplyPtr {
    redisReply* r = nullptr;
    ReplyPtr() = default;
    explicit ReplyPtr(redisReply* x) : r(x) {}
    ReplyPtr(ReplyPtr&& o) noexcept : r(o.r) { o.r = nullptr; }
    ReplyPtr& operator=(ReplyPtr&& o) noexcept {
      std::swap(r, o.r);
      return *this;
    }
    ~ReplyPtr() {
      if (r) freeReplyObject(r);
    }
    redisReply* operator->() const noexcept { return r; }
    explicit operator bool() const noexcept { return r != nullptr; }
  };

  // A plain connection to node `at` of a cluster with `e`'s credentials
  // (a cluster has database 0 only).
  bool connect_node(const RedisEndpoint& e, const RedisNodeAddress& at, Nanos timeout) {
    close();
    endpoint_ = e;
    return connect_to(at.host, at.port, timeout);
  }

  // Closes the connection, with `why` as error().
  void fail(std::string why) {
    close();
    error_ = std::move(why);
  }

  // Whether both scripts are loaded on this connection (load_scripts()).
  bool scripts_loaded() const noexcept {
    return !sync_sha_.empty() && !lease_sha_.empty();
  }
  // A NOSCRIPT answer: the node lost its scripts (SCRIPT FLUSH, a restart,
  // a promoted replica); load_scripts() loads them again.
  void forget_scripts() noexcept {
    sync_sha_.clear();
    lease_sha_.clear();
  }
  const std::string& sync_sha() const noexcept { return sync_sha_; }

  // Pipelining: append() queues a command, flush() writes every queued one
  // (within the connection's timeout), read() takes the next reply. A
  // failed flush() or read() closes the connection, as command() does.
  bool append(const std::vector<std::string>& args) {
    if (!ctx_) return false;
    const RedisArgv argv(args);
    if (redisAppendCommandArgv(ctx_, argv.count(), argv.values(), argv.lengths()) !=
        REDIS_OK) {
      error_ = ctx_->errstr[0] ? ctx_->errstr : "cannot queue a command";
      close();
      return false;
    }
    return true;
  }
  bool flush() {
    if (!ctx_) return false;
    int done = 0;
    while (!done) {
      if (redisBufferWrite(ctx_, &done) != REDIS_OK) {
        error_ = ctx_->errstr[0] ? ctx_->errstr : "write failed";
        close();
        return false;
      }
    }
    return true;
  }
  ReplyPtr read() {
    if (!ctx_) return ReplyPtr{};
    void* reply = nullptr;
    if (redisGetReply(ctx_, &reply) != REDIS_OK || reply == nullptr) {
      error_ = ctx_->errstr[0] ? ctx_->errstr : "no reply";
      close();
      return ReplyPtr{};
    }
    return ReplyPtr(static_cast<redisReply*>(reply));
  }

  // Loads both scripts now (one round trip each), so that a later EVALSHA
  // costs one round trip.
  bool load_scripts() {
    for (bool lease : {false, true}) {
      std::string& sha = lease ? lease_sha_ : sync_sha_;
      ReplyPtr l =
          command({"SCRIPT", "LOAD", lease ? kFleetLeaseScript : kFleetSyncScript});
      if (!l || l->type != REDIS_REPLY_STRING) {
        if (l) error_ = reply_text(l.r);
        close();
        return false;
      }
      sha.assign(l->str, l->len);
    }
    return true;
  }

  // A command; an empty reply (and a closed connection) when the round trip
  // failed: hiredis contexts are unusable after an I/O error or timeout.
  ReplyPtr command(const std::vector<std::string>& args) {
    if (!ctx_) return ReplyPtr{};
    const RedisArgv argv(args);
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(ctx_, argv.count(), argv.values(), argv.lengths()));
    if (r == nullptr) {
      error_ = ctx_->errstr[0] ? ctx_->errstr : "no reply";
      close();
    } else if (endpoint_.sentinels && r->type == REDIS_REPLY_ERROR &&
               is_readonly_error(std::string_view(r->str, r->len))) {
      // The master was demoted: the next round trip asks the sentinels.
      error_ = reply_text(r);
      close();
    }
    return ReplyPtr(r);
  }

  // EVALSHA of one of the two scripts, loading it first when needed (a new
  // connection, or NOSCRIPT after SCRIPT FLUSH or a restart).
  ReplyPtr eval(bool lease_script, const std::vector<std::string>& keys,
                const std::vector<std::string>& args) {
    std::string& sha = lease_script ? lease_sha_ : sync_sha_;
    const char* source = lease_script ? kFleetLeaseScript : kFleetSyncScript;
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (sha.empty()) {
        ReplyPtr l = command({"SCRIPT", "LOAD", source});
        if (!l || l->type != REDIS_REPLY_STRING) {
          if (l) error_ = reply_text(l.r);
          return ReplyPtr{};
        }
        sha.assign(l->str, l->len);
      }
      std::vector<std::string> argv{"EVALSHA", sha, std::to_string(keys.size())};
      argv.insert(argv.end(), keys.begin(), keys.end());
      argv.insert(argv.end(), args.begin(), args.end());
      ReplyPtr r = command(argv);
      if (r && r->type == REDIS_REPLY_ERROR && std::strncmp(r->str, "NOSCRIPT", 8) == 0) {
        sha.clear();
        continue;
      }
      if (r && r->type == REDIS_REPLY_ERROR) error_ = reply_text(r.r);
      return r;
    }
    return ReplyPtr{};
  }

  static std::string reply_text(const redisReply* r) {
    if (r == nullptr) return "";
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ||
        r->type == REDIS_REPLY_ERROR) {
      return std::string(r->str, r->len);
    }
    if (r->type == REDIS_REPLY_INTEGER) return std::to_string(r->integer);
    return "";
  }

 private:
  // The master that the sentinels name (redis/sentinel.hpp: the order, the
  // checks), connected and saying ROLE master, within `timeout` in all.
  bool connect_to_master(RedisSentinels& s, Nanos timeout) {
    const Nanos deadline = SteadyClock::now() + timeout;
    std::string why = "no sentinel answered in time";
    for (const std::size_t i : sentinel_order(s.addresses().size(), s.preferred())) {
      const RedisNodeAddress& at = s.addresses()[i];
      Nanos left = deadline - SteadyClock::now();
      if (left <= 0) break;
      RedisNodeAddress master;
      const std::string bad = ask_sentinel(s, at, left, master);
      if (!bad.empty()) {
        why = "sentinel " + at.text() + ": " + bad;
        continue;
      }
      left = deadline - SteadyClock::now();
      if (left <= 0) break;
      if (!connect_to(master.host, master.port, left)) {
        why = "master " + master.text() + " (named by sentinel " + at.text() +
              "): " + error_;
        continue;
      }
      RedisValue role;
      ReplyPtr r = command({"ROLE"});
      if (!r || !reply_value_from_hiredis(r.r, role) || !role_is_master(role)) {
        why = "the node " + master.text() + " that sentinel " + at.text() +
              " names is not a master (yet)";
        close();
        continue;
      }
      s.found_master(master, i);
      redisSetTimeout(ctx_, to_timeval(timeout));
      return true;
    }
    error_ = "Sentinel: no master \"" + s.master() + "\" found: " + why;
    return false;
  }

  // One SENTINEL get-master-addr-by-name on a connection of its own, within
  // `timeout`. Returns "" and fills `out`, or why not.
  static std::string ask_sentinel(const RedisSentinels& s, const RedisNodeAddress& at,
                                  Nanos timeout, RedisNodeAddress& out) {
    RedisEndpoint e;
    e.host = at.host;
    e.port = at.port;
    e.username = s.username();
    e.password = s.password();
    e.has_password = s.has_password();
    RedisConnection c;
    if (!c.connect(e, timeout)) return c.error();
    ReplyPtr r = c.command({"SENTINEL", "get-master-addr-by-name", s.master()});
    RedisValue v;
    if (!r) return c.error();
    if (!reply_value_from_hiredis(r.r, v)) return "an answer that is not a reply";
    const char* bad = read_master_address(v, out);
    return bad ? bad : "";
  }

  static timeval to_timeval(Nanos t) noexcept {
    if (t < kNanosPerMs) t = kNanosPerMs;
    timeval tv;
    tv.tv_sec = static_cast<time_t>(t / 1000000000);
    tv.tv_usec = static_cast<suseconds_t>((t % 1000000000) / 1000);
    return tv;
  }
  bool ok(const ReplyPtr& r) {
    if (!r) return false;
    if (r->type == REDIS_REPLY_ERROR) {
      error_ = reply_text(r.r);
      close();
      return false;
    }
    return true;
  }

  redisContext* ctx_ = nullptr;
  std::string address_;
  RedisEndpoint endpoint_;  // for redacting its password from error()
  std::string error_;
  std::string sync_sha_, lease_sha_;
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HAVE_HIREDIS
#endif  // CIRCUITBREAKER_REDIS_CONNECTION_HPP
