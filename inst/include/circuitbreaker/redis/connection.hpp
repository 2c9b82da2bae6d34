// One connection to Redis on hiredis, every round trip bounded by the
// store's timeout (connect included), with AUTH, SELECT and the fleet's
// scripts loaded when new. Passwords never reach error().
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
#include "url.hpp"

namespace circuitbreaker {

// One hiredis connection: connect within the timeout, then AUTH and SELECT
// and every command, each round trip bounded by the timeout.
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

  void close() noexcept {
    if (ctx_) redisFree(ctx_);
    ctx_ = nullptr;
    sync_sha_.clear();
    lease_sha_.clear();
  }

  bool connect(const RedisEndpoint& e, Nanos timeout) {
    close();
    endpoint_ = e;
    const timeval tv = to_timeval(timeout);
    ctx_ = redisConnectWithTimeout(e.host.c_str(), e.port, tv);
    if (ctx_ == nullptr || ctx_->err) {
      error_ = ctx_ ? ctx_->errstr : "cannot allocate a Redis context";
      close();
      return false;
    }
    redisSetTimeout(ctx_, tv);
    if (e.has_password) {
      std::vector<std::string> auth{"AUTH"};
      if (!e.username.empty()) auth.push_back(e.username);
      auth.push_back(e.password);
      if (!ok(command(auth))) return false;
    }
    if (e.db != 0 && !ok(command({"SELECT", std::to_string(e.db)}))) return false;
    return true;
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

  // A command; an empty reply (and a closed connection) when the round trip
  // failed: hiredis contexts are unusable after an I/O error or timeout.
  ReplyPtr command(const std::vector<std::string>& args) {
    if (!ctx_) return ReplyPtr{};
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    argv.reserve(args.size());
    lens.reserve(args.size());
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(ctx_, static_cast<int>(args.size()), argv.data(), lens.data()));
    if (r == nullptr) {
      error_ = ctx_->errstr[0] ? ctx_->errstr : "no reply";
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
  RedisEndpoint endpoint_;  // for redacting its password from error()
  std::string error_;
  std::string sync_sha_, lease_sha_;
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HAVE_HIREDIS
#endif  // CIRCUITBREAKER_REDIS_CONNECTION_HPP
