// One connection to Redis (redis/wire.hpp: plain TCP or TLS), every round
// trip bounded by the connection's timeout (connect and TLS handshake
// included), with AUTH and SELECT when new, and scripts cached by their
// source (EVALSHA; SCRIPT LOAD on NOSCRIPT, and EVAL where the user may not
// load scripts). Where it connects: the endpoint's host, or the master that
// the sentinels name (redis/sentinel.hpp), asked again on every new
// connection. Replies are owned values (RedisReply). It knows Redis, not
// breakers: nothing above the client is included here. Passwords never reach
// error().
#ifndef CIRCUITBREAKER_REDIS_CONNECTION_HPP
#define CIRCUITBREAKER_REDIS_CONNECTION_HPP

#ifdef CIRCUITBREAKER_HAVE_HIREDIS

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../clock.hpp"
#include "reply_value.hpp"
#include "sentinel.hpp"
#include "url.hpp"
#include "wire.hpp"

namespace circuitbreaker {

// A reply, or nullopt when the round trip failed (no answer: the
// connection is then closed). An error reply is a value (is_error()).
using RedisReply = std::optional<RedisValue>;

class RedisConnection {
 public:
  RedisConnection() = default;
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  bool connected() const noexcept { return wire_.connected(); }
  int fd() const noexcept { return wire_.fd(); }
  // What failed last (the wire's or the server's words), with the
  // password of the last endpoint connected to redacted.
  std::string error() const { return redact_password(error_, endpoint_); }
  // "" for a plain connection, else its TLS version ("TLSv1.3").
  const std::string& tls_version() const noexcept { return wire_.tls_version(); }

  // The bound of every later round trip on this connection.
  void set_timeout(Nanos timeout) noexcept { timeout_ = std::max(timeout, kNanosPerMs); }

  // The host:port connected to ("" when not connected): behind Sentinel,
  // the master of the moment.
  const std::string& address() const noexcept { return address_; }
  // The same as a node address (port 0 when not connected).
  const RedisNodeAddress& node() const noexcept { return node_; }

  void close() noexcept {
    wire_.close();
    address_.clear();
    node_ = RedisNodeAddress{};
    shas_.clear();
    fresh_ = false;
  }

  // Connects to `e` (through its sentinels, when it has some), all within
  // `timeout`; false, with error() saying why, otherwise.
  bool connect(const RedisEndpoint& e, Nanos timeout) {
    close();
    endpoint_ = e;
    if (e.sentinels) return connect_to_master(*e.sentinels, timeout);
    return connect_to(e.host, e.port, true, timeout);
  }

  // A connection to node `at` of a cluster with `e`'s credentials and TLS
  // (a cluster has database 0 only). A node that is not one of the user's
  // seeds was learned from a map: its TLS name follows tls_peer_name().
  bool connect_node(const RedisEndpoint& e, const RedisNodeAddress& at, Nanos timeout) {
    close();
    endpoint_ = e;
    const std::vector<RedisNodeAddress> seeds = e.seed_nodes();
    const bool given = std::find(seeds.begin(), seeds.end(), at) != seeds.end();
    return connect_to(at.host, at.port, given, timeout);
  }

  // Closes the connection, with `why` as error().
  void fail(std::string why) {
    close();
    error_ = std::move(why);
  }

  // Pipelining: append() queues a command, flush() writes every queued one
  // (within the connection's timeout), read() takes the next reply. A
  // failed flush() or read() closes the connection, as command() does.
  bool append(const std::vector<std::string>& args) {
    if (!connected()) return false;
    wire_.append(args);
    return true;
  }
  bool flush() {
    if (!connected()) return false;
    if (wire_.flush(SteadyClock::now() + timeout_)) return true;
    return lost();
  }
  RedisReply read() {
    if (!connected()) return std::nullopt;
    RedisReply r = wire_.read(SteadyClock::now() + timeout_);
    if (!r) {
      lost();
      return std::nullopt;
    }
    fresh_ = false;
    return r;
  }

  // The subscription's reads, which never wait: whether a reply or data is
  // waiting (parsed replies, or decrypted bytes that a poll() of the socket
  // cannot see); what has arrived, read and parsed (false: the connection
  // ended); the next parsed reply.
  bool ready() const noexcept { return wire_.ready(); }
  bool drain() {
    if (connected() && wire_.drain()) return true;
    lost();
    return false;
  }
  RedisReply next() { return wire_.next(); }

  // A command; nullopt (and a closed connection) when the round trip
  // failed. Behind Sentinel, -READONLY closes the connection too.
  RedisReply command(const std::vector<std::string>& args) {
    if (!append(args) || !flush()) return std::nullopt;
    RedisReply r = read();
    if (r && endpoint_.sentinels && r->is_error() && is_readonly_error(r->str)) {
      // The master was demoted: the next round trip asks the sentinels.
      error_ = r->str;
      close();
    }
    return r;
  }

  // The SHA1 this connection's server knows `source` by, or "" (not loaded
  // here yet). Scripts are told apart by their source's address: each is
  // one constant of the program.
  const std::string& script_sha(const char* source) const noexcept {
    static const std::string none;
    for (const auto& kv : shas_) {
      if (kv.first == source) return kv.second;
    }
    return none;
  }
  // Loads `source` (one round trip), so that a later EVALSHA costs one.
  // True when loaded, or when this user may not load scripts (then eval()
  // sends EVAL with the source).
  bool load_script(const char* source) {
    if (eval_only_ || !script_sha(source).empty()) return true;
    RedisReply l = command({"SCRIPT", "LOAD", source});
    if (l && l->is_string()) {
      shas_.emplace_back(source, l->str);
      return true;
    }
    if (l && l->is_error("NOPERM")) {
      eval_only_ = true;  // EVAL may still be allowed
      return true;
    }
    if (l) error_ = l->text();
    close();
    return false;
  }
  // Whether eval() of `source` goes out at once (loaded, or sent as EVAL).
  bool has_script(const char* source) const noexcept {
    return eval_only_ || !script_sha(source).empty();
  }
  // A NOSCRIPT answer: the node lost its scripts (SCRIPT FLUSH, a restart,
  // a promoted replica); they are loaded again when next used.
  void forget_scripts() noexcept { shas_.clear(); }

  // EVALSHA of `source`, loading it first on a new connection; after
  // NOSCRIPT (SCRIPT FLUSH, a restart, a promoted replica, a managed
  // service that evicts scripts) EVAL of the source at once, which runs it
  // in the same round trip and caches it again for the next EVALSHA. EVAL
  // throughout where the user may not SCRIPT LOAD. An error reply sets
  // error().
  RedisReply eval(const char* source, const std::vector<std::string>& keys,
                  const std::vector<std::string>& args) {
    if (!has_script(source) && !load_script(source)) return std::nullopt;
    RedisReply r = command(eval_command(source, keys, args));
    if (r && r->is_error("NOSCRIPT")) {
      std::vector<std::string> again = eval_command(source, keys, args);
      again[0] = "EVAL";
      again[1] = source;
      r = command(again);
    }
    if (r && r->is_error()) error_ = r->str;
    return r;
  }
  // The command eval() sends for `source`: EVALSHA when it is loaded here.
  std::vector<std::string> eval_command(const char* source,
                                        const std::vector<std::string>& keys,
                                        const std::vector<std::string>& args) const {
    const std::string& sha = script_sha(source);
    std::vector<std::string> argv{sha.empty() ? "EVAL" : "EVALSHA",
                                  sha.empty() ? std::string(source) : sha,
                                  std::to_string(keys.size())};
    argv.insert(argv.end(), keys.begin(), keys.end());
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }

 private:
  // A connection to host:port with the endpoint's TLS, AUTH and SELECT.
  // `given`: the host is one the user named (tls_peer_name()).
  bool connect_to(const std::string& host, int port, bool given, Nanos timeout) {
    const RedisEndpoint& e = endpoint_;
    set_timeout(timeout);
    const Nanos deadline = SteadyClock::now() + timeout_;
    if (!wire_.connect(host, port, e.tls, tls_peer_name(e.tls, host, given), deadline)) {
      error_ = wire_.error();
      return false;
    }
    address_ = host + ":" + std::to_string(port);
    node_ = RedisNodeAddress{host, port};
    fresh_ = true;
    if (e.has_password) {
      std::vector<std::string> auth{"AUTH"};
      if (!e.username.empty()) auth.push_back(e.username);
      auth.push_back(e.password);
      if (!ok(command(auth))) return false;
    }
    if (e.db != 0 && !ok(command({"SELECT", std::to_string(e.db)}))) return false;
    return true;
  }

  // The wire failed: its words, and on a new plain connection that the
  // server closed before any answer, the likely reason.
  bool lost() {
    error_ = wire_.error();
    if (fresh_ && !endpoint_.tls.enabled &&
        (error_.find("closed the connection") != std::string::npos ||
         error_.find("reset by peer") != std::string::npos)) {
      error_ += " before any answer (a TLS port? use rediss://)";
    } else if (fresh_ && endpoint_.tls.enabled && endpoint_.tls.cert_file.empty() &&
               (error_.find("closed the connection") != std::string::npos ||
                error_.find("reset by peer") != std::string::npos)) {
      // TLS 1.3: a server that wants a client certificate says so after the
      // handshake, and its alert can be lost to the connection's reset.
      error_ +=
          " after the TLS handshake (does the server ask for a client "
          "certificate? tls = list(cert_file = ..., key_file = ...))";
    }
    close();
    return false;
  }

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
      const std::string bad = ask_sentinel(s, endpoint_.tls, at, left, master);
      if (!bad.empty()) {
        why = "sentinel " + at.text() + ": " + bad;
        continue;
      }
      left = deadline - SteadyClock::now();
      if (left <= 0) break;
      if (!connect_to(master.host, master.port, false, left)) {
        why = "master " + master.text() + " (named by sentinel " + at.text() +
              "): " + error_;
        continue;
      }
      RedisReply r = command({"ROLE"});
      if (!r || !role_is_master(*r)) {
        why = "the node " + master.text() + " that sentinel " + at.text() +
              " names is not a master (yet)";
        close();
        continue;
      }
      s.found_master(master, i);
      set_timeout(timeout);
      return true;
    }
    error_ = "Sentinel: no master \"" + s.master() + "\" found: " + why;
    return false;
  }

  // One SENTINEL get-master-addr-by-name on a connection of its own, within
  // `timeout`. Returns "" and fills `out`, or why not.
  static std::string ask_sentinel(const RedisSentinels& s, const RedisTls& tls,
                                  const RedisNodeAddress& at, Nanos timeout,
                                  RedisNodeAddress& out) {
    RedisEndpoint e;
    e.host = at.host;
    e.port = at.port;
    e.username = s.username();
    e.password = s.password();
    e.has_password = s.has_password();
    e.tls = tls;  // the sentinels speak TLS when the master does
    RedisConnection c;
    if (!c.connect(e, timeout)) return c.error();
    RedisReply r = c.command({"SENTINEL", "get-master-addr-by-name", s.master()});
    if (!r) return c.error();
    const char* bad = read_master_address(*r, out);
    return bad ? bad : "";
  }

  bool ok(const RedisReply& r) {
    if (!r) return false;
    if (r->is_error()) {
      error_ = r->str;
      close();
      return false;
    }
    return true;
  }

  RedisWire wire_;
  Nanos timeout_ = 100 * kNanosPerMs;
  std::string address_;
  RedisNodeAddress node_;
  RedisEndpoint endpoint_;  // for redacting its password from error()
  std::string error_;
  std::vector<std::pair<const char*, std::string>> shas_;  // source -> SHA1
  bool eval_only_ = false;  // this user may not SCRIPT LOAD: EVAL the source
  bool fresh_ = false;      // connected, and no reply read yet
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HAVE_HIREDIS
#endif  // CIRCUITBREAKER_REDIS_CONNECTION_HPP
