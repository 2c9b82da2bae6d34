// The sync thread's subscription to its store's events channel
// (FleetSync, fleet/sync.hpp): the scripts publish the key of every breaker
// whose state they change there, so that another process's trip reaches
// this one at once rather than at the next sweep.
//
// The subscription is kept while its own connection lives: a failed sync
// (a timeout when Redis or the machine is slow) does not drop it, because a
// subscribed connection loses nothing (Redis buffers its messages, and
// disconnects it if that buffer overflows). It is dropped, and every
// breaker read again after the next subscription, only when its connection
// ends or errs (a restarted Redis, a CLIENT KILL, an overflow: read()) or
// when it fails the check that follows failed syncs (answers()): the first
// good sync after one or more failed ones sends PING on the subscription
// and waits at most `timeout` for its pong (behind Sentinel, the
// subscription must also be on the master that the sync reached). Else one
// slow moment would make every store of a Redis re-read all its breakers
// at once, which slows Redis further (a metastable failure).
//
// Reads never wait: ready() says whether replies, or decrypted bytes that
// TLS holds, are there before the thread polls the socket (no lost
// wake-up). An idle subscription is kept alive (keep_alive()) through the
// proxies of managed services that drop idle connections.
#ifndef CIRCUITBREAKER_FLEET_SUBSCRIPTION_HPP
#define CIRCUITBREAKER_FLEET_SUBSCRIPTION_HPP

#ifdef CIRCUITBREAKER_HAVE_HIREDIS

#include <string>

#include "../clock.hpp"
#include "../redis/connection.hpp"
#include "keys.hpp"
#include "sync_choice.hpp"
#include "transport.hpp"

namespace circuitbreaker {

class FleetSubscription {
 public:
  bool connected() const noexcept { return conn_.connected(); }
  int fd() const noexcept { return conn_.fd(); }
  bool ready() const noexcept { return conn_.ready(); }
  const std::string& address() const noexcept { return conn_.address(); }
  void close() noexcept { conn_.close(); }

  // Connects (through `transport`: the server, or any node of a cluster)
  // and subscribes. False when that failed; `refused` then holds Redis's
  // refusal, if it refused (a user without channel rights: Redis 7's new
  // ACL users have none; the breakers still sync every interval, without
  // the early news).
  bool subscribe(FleetTransport& transport, const FleetSpec& spec, std::string& refused) {
    if (!transport.connect_subscriber(spec, conn_)) return false;
    const RedisReply r = conn_.command({"SUBSCRIBE", spec.channel()});
    if (!r || !r->is_array()) {
      if (r && r->is_error()) refused = "SUBSCRIBE: " + r->str;
      conn_.close();
      return false;
    }
    active_ = SteadyClock::now();
    return true;
  }

  // The liveness check (see the header): PING, and the replies read until
  // its pong, within `timeout` in all; messages that come first are events
  // (`named` says whether one named a breaker). False when no pong came.
  bool answers(const FleetSpec& spec, SyncChoice& choice, bool& named) {
    const Nanos deadline = SteadyClock::now() + spec.timeout;
    conn_.set_timeout(spec.timeout);
    if (!conn_.append({"PING"}) || !conn_.flush()) return false;
    while (conn_.connected()) {
      const Nanos left = deadline - SteadyClock::now();
      if (left <= 0) return false;
      conn_.set_timeout(left);
      const RedisReply r = conn_.read();
      if (!r) return false;
      if (is_pong(*r)) {
        conn_.set_timeout(spec.timeout);
        return true;
      }
      named = note(*r, choice) || named;
    }
    return false;
  }

  // Reads what has arrived and notes the breakers named (`choice`); true
  // when one was, or the subscription was lost (then every breaker is read
  // after the next subscription).
  bool read(SyncChoice& choice) {
    if (!conn_.connected()) return false;
    if (!conn_.drain()) return true;  // lost: sync now, as if told
    active_ = SteadyClock::now();
    bool any = false;
    for (RedisReply r = conn_.next(); r; r = conn_.next()) any = note(*r, choice) || any;
    return any;
  }

  // A PING when nothing came for `every` (FleetSpec::keep_alive; its pong
  // is read as an event, and ignored); a failed write drops the
  // subscription.
  void keep_alive(Nanos now, Nanos every) {
    if (!conn_.connected() || now - active_ < every) return;
    active_ = now;
    if (!conn_.append({"PING"}) || !conn_.flush()) conn_.close();
  }

 private:
  // A message is {"message", channel, key}; the key is checked only against
  // the keys of this process's breakers. True when it named one.
  static bool note(const RedisValue& r, SyncChoice& choice) {
    return r.is_array() && r.elements.size() == 3 && r.elements[0].text() == "message" &&
           choice.named(r.elements[2].text());
  }
  // A subscribed RESP2 connection's answer to PING: {"pong", ""}.
  static bool is_pong(const RedisValue& r) {
    return r.is_array() && r.elements.size() == 2 && r.elements[0].text() == "pong";
  }

  RedisConnection conn_;
  Nanos active_ = 0;
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HAVE_HIREDIS
#endif  // CIRCUITBREAKER_FLEET_SUBSCRIPTION_HPP
