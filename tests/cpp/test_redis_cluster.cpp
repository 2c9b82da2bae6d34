// Redis Cluster routing (redis/key_slot.hpp, node_address.hpp, redirect.hpp,
// cluster_reply.hpp, cluster.hpp, reply_value_hiredis.hpp): the key-slot rule
// against Redis's own answers, redirect parsing, the slot map built from real
// CLUSTER SLOTS / CLUSTER SHARDS replies of Redis 7.0, routing of keys, and
// bounded random inputs for every parser (replies are untrusted).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "circuitbreaker/config.hpp"
#include "circuitbreaker/redis/cluster.hpp"
#include "circuitbreaker/redis/cluster_reply.hpp"
#include "circuitbreaker/redis/key_slot.hpp"
#include "circuitbreaker/fleet/keys.hpp"
#include "circuitbreaker/redis/node_address.hpp"
#include "circuitbreaker/redis/redirect.hpp"
#include "circuitbreaker/redis/reply_value.hpp"
#include "circuitbreaker/redis/reply_value_hiredis.hpp"

namespace cb = circuitbreaker;
using V = cb::RedisValue;

namespace {

// Replies of a 3-master cluster with a replica each (redis-server 7.0.15,
// `redis-cli --cluster create ... --cluster-replicas 1`, replicas in sync),
// as the bytes came off the socket.
const char* const kClusterSlotsReply =
    "*3\r\n*4\r\n:0\r\n:5460\r\n*4\r\n$9\r\n127.0.0.1\r\n:23101\r\n$40\r\n"
    "63a3b3a3fb762243d82ee44cf701004d3fea7d40\r\n*0\r\n*4\r\n$9\r\n127.0.0.1\r\n"
    ":23106\r\n$40\r\nf8b2aae497028367946e27bd0b1d92ed1181f8d1\r\n*0\r\n*4\r\n"
    ":5461\r\n:10922\r\n*4\r\n$9\r\n127.0.0.1\r\n:23102\r\n$40\r\n"
    "e86eff3de10fd48b9db320e11d845c42057e711f\r\n*0\r\n*4\r\n$9\r\n127.0.0.1\r\n"
    ":23104\r\n$40\r\n42f70a0735461db89b70bf4704e346ef081b1ba1\r\n*0\r\n*4\r\n"
    ":10923\r\n:16383\r\n*4\r\n$9\r\n127.0.0.1\r\n:23103\r\n$40\r\n"
    "42809eaa29fe7c6dab42ba2f75421035cfc91182\r\n*0\r\n*4\r\n$9\r\n127.0.0.1\r\n"
    ":23105\r\n$40\r\ncfcdf1e0731f3a6b96636e03f4b3d8c3a5c0a0d5\r\n*0\r\n";

const char* const kClusterShardsReply =
    "*3\r\n*4\r\n$5\r\nslots\r\n*2\r\n:5461\r\n:10922\r\n$5\r\nnodes\r\n*2\r\n*14\r\n"
    "$2\r\nid\r\n$40\r\ne86eff3de10fd48b9db320e11d845c42057e711f\r\n$4\r\nport\r\n"
    ":23102\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n"
    "$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:14\r\n$6\r\n"
    "health\r\n$6\r\nonline\r\n*14\r\n$2\r\nid\r\n$40\r\n"
    "42f70a0735461db89b70bf4704e346ef081b1ba1\r\n$4\r\nport\r\n:23104\r\n$2\r\nip\r\n"
    "$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\n"
    "replica\r\n$18\r\nreplication-offset\r\n:14\r\n$6\r\nhealth\r\n$6\r\nonline\r\n"
    "*4\r\n$5\r\nslots\r\n*2\r\n:10923\r\n:16383\r\n$5\r\nnodes\r\n*2\r\n*14\r\n"
    "$2\r\nid\r\n$40\r\n42809eaa29fe7c6dab42ba2f75421035cfc91182\r\n$4\r\nport\r\n"
    ":23103\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n"
    "$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:14\r\n$6\r\n"
    "health\r\n$6\r\nonline\r\n*14\r\n$2\r\nid\r\n$40\r\n"
    "cfcdf1e0731f3a6b96636e03f4b3d8c3a5c0a0d5\r\n$4\r\nport\r\n:23105\r\n$2\r\nip\r\n"
    "$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\n"
    "replica\r\n$18\r\nreplication-offset\r\n:14\r\n$6\r\nhealth\r\n$6\r\nonline\r\n"
    "*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:5460\r\n$5\r\nnodes\r\n*2\r\n*14\r\n$2\r\n"
    "id\r\n$40\r\n63a3b3a3fb762243d82ee44cf701004d3fea7d40\r\n$4\r\nport\r\n"
    ":23101\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n"
    "$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:14\r\n$6\r\n"
    "health\r\n$6\r\nonline\r\n*14\r\n$2\r\nid\r\n$40\r\n"
    "f8b2aae497028367946e27bd0b1d92ed1181f8d1\r\n$4\r\nport\r\n:23106\r\n$2\r\nip\r\n"
    "$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\n"
    "replica\r\n$18\r\nreplication-offset\r\n:14\r\n$6\r\nhealth\r\n$6\r\nonline\r\n";

// CLUSTER SHARDS of another such cluster, from a live node 3 s after the
// master of slots 10923..16383 (port 26074) was killed and its replica
// (21761) promoted: Redis 7.0.15 lists the dead master as a shard of its
// own, without slots, with health "fail" (the documentation says
// "failed"); replicas whose offset the node has not yet heard of are
// "loading".
const char* const kClusterShardsAfterFailover =
    "*4\r\n*4\r\n$5\r\nslots\r\n*2\r\n:5461\r\n:10922\r\n$5\r\nnodes\r\n*2\r\n*14\r\n"
    "$2\r\nid\r\n$40\r\n446f63383f4afe700f6a48a076f3f4a432b5aa19\r\n$4\r\nport\r\n"
    ":20120\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n"
    "$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:0\r\n$6\r\n"
    "health\r\n$6\r\nonline\r\n*14\r\n$2\r\nid\r\n$40\r\n"
    "d5dc08f8f2f6479821bf2505ca9f7b8843261102\r\n$4\r\nport\r\n:30027\r\n$2\r\nip\r\n"
    "$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\n"
    "replica\r\n$18\r\nreplication-offset\r\n:0\r\n$6\r\nhealth\r\n$7\r\nloading\r\n"
    "*4\r\n$5\r\nslots\r\n*2\r\n:10923\r\n:16383\r\n$5\r\nnodes\r\n*1\r\n*14\r\n"
    "$2\r\nid\r\n$40\r\n963185467ef9e744886f876ab90d0584ab340907\r\n$4\r\nport\r\n"
    ":21761\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n"
    "$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:0\r\n$6\r\n"
    "health\r\n$6\r\nonline\r\n*4\r\n$5\r\nslots\r\n*0\r\n$5\r\nnodes\r\n*1\r\n"
    "*14\r\n$2\r\nid\r\n$40\r\nb717a9f0cdf26e75057354dfac14c64b551a183e\r\n$4\r\n"
    "port\r\n:26074\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n"
    "127.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:0\r\n"
    "$6\r\nhealth\r\n$4\r\nfail\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:5460\r\n$5\r\n"
    "nodes\r\n*2\r\n*14\r\n$2\r\nid\r\n$40\r\n"
    "9c7b0daa1d623044f5772e5b52a9814eaa1903b3\r\n$4\r\nport\r\n:23185\r\n$2\r\nip\r\n"
    "$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$6\r\n"
    "master\r\n$18\r\nreplication-offset\r\n:0\r\n$6\r\nhealth\r\n$6\r\nonline\r\n"
    "*14\r\n$2\r\nid\r\n$40\r\n9b1019ccb5758aafb3f55dbde07146a0378660cf\r\n$4\r\n"
    "port\r\n:32668\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n"
    "127.0.0.1\r\n$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-offset\r\n:0\r\n"
    "$6\r\nhealth\r\n$7\r\nloading\r\n";

const cb::RedisNodeAddress kAsked{"127.0.0.1", 23101};

cb::RedisNodeAddress addr(const std::string& host, int port) {
  return cb::RedisNodeAddress{host, port};
}

// A CLUSTER SLOTS node entry: [host, port, id].
V slots_node(V host, long long port, const std::string& id = "") {
  std::vector<V> items{std::move(host), V::of_integer(port)};
  if (!id.empty()) items.push_back(V::of_string(id));
  return V::of_array(std::move(items));
}

V slots_entry(long long first, long long last, std::vector<V> nodes) {
  std::vector<V> items{V::of_integer(first), V::of_integer(last)};
  for (V& n : nodes) items.push_back(std::move(n));
  return V::of_array(std::move(items));
}

// A CLUSTER SHARDS node map (RESP2: a flat array of fields and values).
V shards_node(const std::string& endpoint, long long port, const std::string& role,
              const std::string& health) {
  return V::of_array({V::of_string("id"), V::of_string(std::to_string(port) + "-id"),
                      V::of_string("port"), V::of_integer(port), V::of_string("ip"),
                      V::of_string("127.0.0.1"), V::of_string("endpoint"),
                      V::of_string(endpoint), V::of_string("role"), V::of_string(role),
                      V::of_string("health"), V::of_string(health)});
}

V shards_entry(std::vector<long long> slots, std::vector<V> nodes) {
  std::vector<V> s;
  for (long long x : slots) s.push_back(V::of_integer(x));
  return V::of_array({V::of_string("slots"), V::of_array(std::move(s)),
                      V::of_string("nodes"), V::of_array(std::move(nodes))});
}

cb::ClusterSlotMap three_masters() {
  std::vector<cb::ClusterSlotRange> ranges{
      {0, 5460, addr("127.0.0.1", 7000), "a", {addr("127.0.0.1", 7003)}},
      {5461, 10922, addr("127.0.0.1", 7001), "b", {addr("127.0.0.1", 7004)}},
      {10923, 16383, addr("127.0.0.1", 7002), "c", {addr("127.0.0.1", 7005)}},
  };
  cb::ClusterSlotMap map;
  REQUIRE(cb::ClusterSlotMap::build(ranges, map) == nullptr);
  return map;
}

#ifdef CIRCUITBREAKER_HAVE_HIREDIS
// Bytes read by hiredis's own reader, then copied into a RedisValue. False
// when hiredis refuses the bytes, or they hold no whole reply.
bool read_reply(const std::string& bytes, V& out) {
  redisReader* reader = redisReaderCreate();
  REQUIRE(reader != nullptr);
  bool ok = false;
  if (redisReaderFeed(reader, bytes.data(), bytes.size()) == REDIS_OK) {
    void* reply = nullptr;
    if (redisReaderGetReply(reader, &reply) == REDIS_OK && reply != nullptr) {
      ok = cb::reply_value_from_hiredis(static_cast<redisReply*>(reply), out);
      freeReplyObject(reply);
    }
  }
  redisReaderFree(reader);
  return ok;
}
#endif

}  // namespace

TEST_CASE("key slots: CRC16 and the hash tag rule, as Redis computes them",
          "[redis-cluster]") {
  // Redis's own test vector (src/crc16.c).
  CHECK(cb::crc16_xmodem("123456789") == 0x31C3);
  CHECK(cb::crc16_xmodem("") == 0);

  // Every expected slot below is what redis-server 7.0.15 answered to
  // CLUSTER KEYSLOT.
  const std::vector<std::pair<std::string, int>> known{
      {"", 0},
      {"a", 15495},
      {"hello", 866},
      {"foo", 12182},
      {"bar", 5061},
      {"{user1000}.following", 3443},
      {"{user1000}.followers", 3443},
      {"foo{}{bar}", 8363},     // the first tag is empty: the whole key
      {"foo{{bar}}zap", 4015},  // the tag is "{bar"
      {"{bar", 4015},
      {"{}", 15257},
      {"}{", 12793},
      {"{a}", 15495},  // the tag "a"
      {"a{b", 13340},
      {"a}b{c}", 7365},
      {"{{}}", 4092},
      {"{{a}}", 10276},
      {std::string("\x00\xff\x80{\x01}", 6), 4129},  // binary keys hash as bytes
  };
  for (const auto& [key, slot] : known) {
    INFO("key '" << key << "'");
    CHECK(cb::cluster_key_slot(key) == slot);
  }
  CHECK(cb::cluster_hash_part("foo{{bar}}zap") == "{bar");
  CHECK(cb::cluster_hash_part("foo{}{bar}") == "foo{}{bar}");
  CHECK(cb::cluster_hash_part("x{tag}y{other}") == "tag");
}

TEST_CASE("key slots: every key of a fleet breaker lands in one slot",
          "[redis-cluster]") {
  // Redis answered 3188 for all of these (CLUSTER KEYSLOT).
  CHECK(cb::cluster_key_slot(cb::fleet_key("circuitbreaker", "api")) == 3188);
  CHECK(cb::cluster_key_slot("cb1:{circuitbreaker:api}:p:3") == 3188);

  const std::vector<std::string> prefixes{"circuitbreaker", "", "a:b", "{x}", "}{", "é"};
  const std::vector<std::string> names{
      "api", "",   "with space", "{tag}", "a}b{c}", "日本", std::string("\0\xff", 2),
      "x:w", "%41"};
  std::set<int> slots_seen;
  for (const std::string& prefix : prefixes) {
    for (const std::string& name : names) {
      INFO("prefix '" << prefix << "', name '" << name << "'");
      const std::string key = cb::fleet_key(prefix, name);
      // The hash tag is the whole identity, encoded: nothing else decides.
      std::string identity;
      cb::append_encoded_name(identity, prefix);
      identity += ':';
      cb::append_encoded_name(identity, name);
      CHECK(cb::cluster_hash_part(key) == identity);
      const std::uint16_t slot = cb::cluster_key_slot(key);
      const std::vector<std::string> keys = cb::fleet_breaker_keys(prefix, name);
      CHECK(keys.size() == 2 + cb::kMaxHalfOpenCalls);
      for (const std::string& k : keys) CHECK(cb::cluster_key_slot(k) == slot);
      for (const char* suffix : {":b", ":p:0", ":p:15", ":h"}) {
        CHECK(cb::cluster_key_slot(key + suffix) == slot);
      }
      slots_seen.insert(slot);
    }
    // A store's channel hashes by its prefix alone; an empty prefix (which
    // breaker_store_redis() refuses) leaves an empty tag, so the whole name.
    std::string encoded;
    cb::append_encoded_name(encoded, prefix);
    const std::string channel = cb::fleet_channel(prefix);
    CHECK(cb::cluster_hash_part(channel) == (prefix.empty() ? channel : encoded));
  }
  // Different breakers spread over slots (not all in one).
  CHECK(slots_seen.size() > prefixes.size() * names.size() / 2);
}

TEST_CASE("node addresses: host:port, IPv6, and what is refused", "[redis-cluster]") {
  cb::RedisNodeAddress a;
  REQUIRE(cb::parse_node_address("127.0.0.1:6379", a) == nullptr);
  CHECK(a == addr("127.0.0.1", 6379));
  CHECK(a.text() == "127.0.0.1:6379");
  REQUIRE(cb::parse_node_address("[::1]:7000", a) == nullptr);
  CHECK(a == addr("::1", 7000));
  CHECK(a.text() == "[::1]:7000");
  REQUIRE(cb::parse_node_address("fe80::1%eth0:7000", a) == nullptr);
  CHECK(a == addr("fe80::1%eth0", 7000));
  REQUIRE(cb::parse_node_address("redis-0.redis.svc_x:65535", a) == nullptr);
  CHECK(a.port == 65535);
  REQUIRE(cb::parse_node_address(":7000", a, true) == nullptr);
  CHECK(a.host.empty());
  CHECK(a.port == 7000);

  for (const char* bad : {"",
                          ":",
                          "host",
                          "host:",
                          ":7000",
                          "host:0",
                          "host:65536",
                          "host:07000",
                          "host:+1",
                          "host:-1",
                          "host:1 ",
                          " host:1",
                          "ho st:1",
                          "host\n:1",
                          "[::1:7000",
                          "[]:7000",
                          "[name]:7000",
                          "::1]:7000",
                          "[::1]x:7000",
                          "?:7000",
                          "host:123456",
                          "h/x:1",
                          "h{x}:1"}) {
    INFO("'" << bad << "'");
    CHECK(cb::parse_node_address(bad, a) != nullptr);
    CHECK(a.host.empty());
    CHECK(a.port == 0);
  }
  CHECK(cb::parse_node_address(std::string("h\0x:1", 5), a) != nullptr);
  CHECK(cb::parse_node_address(std::string(256, 'h') + ":1", a) != nullptr);
  CHECK(cb::parse_node_address(std::string(255, 'h') + ":1", a) == nullptr);
}

TEST_CASE("redirects: MOVED and ASK, good and malformed", "[redis-cluster]") {
  cb::ClusterRedirect r;
  REQUIRE(cb::parse_cluster_redirect("MOVED 3999 127.0.0.1:6381", r) == nullptr);
  CHECK_FALSE(r.ask);
  CHECK(r.slot == 3999);
  CHECK(r.node == addr("127.0.0.1", 6381));
  CHECK(r.target(kAsked) == addr("127.0.0.1", 6381));

  // The wire form keeps the '-' that hiredis strips.
  REQUIRE(cb::parse_cluster_redirect("-ASK 0 10.0.0.2:7000", r) == nullptr);
  CHECK(r.ask);
  CHECK(r.slot == 0);
  CHECK(r.node == addr("10.0.0.2", 7000));

  REQUIRE(cb::parse_cluster_redirect("MOVED 16383 [::1]:7001", r) == nullptr);
  CHECK(r.slot == 16383);
  CHECK(r.node == addr("::1", 7001));
  // How Redis writes an IPv6 target: without brackets.
  REQUIRE(cb::parse_cluster_redirect("MOVED 1 2001:db8::7:7002", r) == nullptr);
  CHECK(r.node == addr("2001:db8::7", 7002));
  REQUIRE(cb::parse_cluster_redirect("ASK 77 node-3.cache.internal:6379", r) == nullptr);
  CHECK(r.node.host == "node-3.cache.internal");

  // An empty host: the host that was asked, with the port given.
  REQUIRE(cb::parse_cluster_redirect("MOVED 12182 :6390", r) == nullptr);
  CHECK(r.node.host.empty());
  CHECK(r.target(kAsked) == addr("127.0.0.1", 6390));
  CHECK(r.target(addr("::1", 1)) == addr("::1", 6390));

  // The replies Redis gave: GET foo on a node that did not serve it, and
  // on the node that was migrating its slot after the key had moved.
  REQUIRE(cb::parse_cluster_redirect("MOVED 12182 127.0.0.1:23103", r) == nullptr);
  CHECK(r.slot == cb::cluster_key_slot("foo"));
  REQUIRE(cb::parse_cluster_redirect("-ASK 12182 127.0.0.1:23185", r) == nullptr);
  CHECK(r.ask);
  CHECK(r.slot == cb::cluster_key_slot("foo"));
  CHECK(r.node == addr("127.0.0.1", 23185));

  for (const char* bad : {"",
                          "-",
                          "MOVED",
                          "MOVED ",
                          "MOVED 1",
                          "MOVED 1 ",
                          "MOVED  1 a:1",
                          "MOVED 1  a:1",
                          "MOVED 16384 a:1",
                          "MOVED 99999 a:1",
                          "MOVED 123456 a:1",
                          "MOVED -1 a:1",
                          "MOVED +1 a:1",
                          "MOVED 01 a:1",
                          "MOVED 1 a:0",
                          "MOVED 1 a:65536",
                          "MOVED 1 a",
                          "MOVED 1 a:1 ",
                          "MOVED 1 a:1\r\n",
                          "MOVED 1 a b:1",
                          "moved 1 a:1",
                          "MOVED\t1 a:1",
                          "MOVED 1 [::1:7000",
                          "MOVED 1 []:7000",
                          "MOVED 1 ?:7000",
                          "ASK 1 a:+1",
                          "ASK 1 a:01",
                          "ASK x a:1",
                          "ASKING 1 a:1",
                          "MOVEDX 1 a:1",
                          "ERR unknown command",
                          "CROSSSLOT Keys in request don't hash to the same slot",
                          "MOVED 1 :",
                          "MOVED 1.5 a:1",
                          "--MOVED 1 a:1",
                          " MOVED 1 a:1"}) {
    INFO("'" << bad << "'");
    CHECK(cb::parse_cluster_redirect(bad, r) != nullptr);
    CHECK(r.slot == 0);
    CHECK(r.node.host.empty());
  }
  CHECK(cb::parse_cluster_redirect(std::string("MOVED 1 a\0b:1", 13), r) != nullptr);

  CHECK(cb::cluster_error_kind("MOVED 1 a:1") == cb::ClusterError::kMoved);
  CHECK(cb::cluster_error_kind("-ASK 1 a:1") == cb::ClusterError::kAsk);
  CHECK(
      cb::cluster_error_kind("TRYAGAIN Multiple keys request during rehashing of slot") ==
      cb::ClusterError::kTryAgain);
  CHECK(cb::cluster_error_kind("CLUSTERDOWN The cluster is down") ==
        cb::ClusterError::kClusterDown);
  CHECK(cb::cluster_error_kind("READONLY You can't write against a read only replica.") ==
        cb::ClusterError::kReadOnly);
  CHECK(cb::cluster_error_kind("NOSCRIPT No matching script") ==
        cb::ClusterError::kOther);
  CHECK(cb::cluster_error_kind("") == cb::ClusterError::kOther);
}

TEST_CASE("slot map: lookups at range edges, gaps, overlaps", "[redis-cluster]") {
  const cb::ClusterSlotMap map = three_masters();
  CHECK(map.complete());
  CHECK(map.masters() == 3);
  const std::vector<std::pair<int, int>> edges{
      {0, 7000}, {5460, 7000}, {5461, 7001}, {10922, 7001}, {10923, 7002}, {16383, 7002}};
  for (const auto& [slot, port] : edges) {
    INFO("slot " << slot);
    const cb::RedisNodeAddress* m = map.master_of_slot(static_cast<std::uint16_t>(slot));
    REQUIRE(m != nullptr);
    CHECK(m->port == port);
  }
  CHECK(map.master_of_slot(16384) == nullptr);
  CHECK(map.master_of_key("foo")->port == 7002);  // slot 12182
  CHECK(map.shards()[map.shard_index(0)].replicas.front().port == 7003);
  CHECK(map.shards()[map.shard_index(0)].master_id == "a");

  // Round trip through ranges().
  const auto ranges = map.ranges();
  REQUIRE(ranges.size() == 3);
  CHECK(ranges[1].first == 5461);
  CHECK(ranges[1].last == 10922);
  CHECK(ranges[1].master.port == 7001);

  // One master with two ranges is one shard; a gap is served by nobody.
  cb::ClusterSlotMap gaps;
  REQUIRE(cb::ClusterSlotMap::build({{100, 199, addr("h", 1), "", {}},
                                     {0, 9, addr("h", 1), "", {}},
                                     {16383, 16383, addr("h", 2), "", {}}},
                                    gaps) == nullptr);
  CHECK(gaps.shards().size() == 2);
  CHECK(gaps.masters() == 2);
  CHECK(gaps.covered_slots() == 111);
  CHECK_FALSE(gaps.complete());
  CHECK(gaps.master_of_slot(10) == nullptr);
  CHECK(gaps.master_of_slot(99) == nullptr);
  CHECK(gaps.master_of_slot(9)->port == 1);
  CHECK(gaps.master_of_slot(199)->port == 1);
  CHECK(gaps.master_of_slot(16383)->port == 2);
  CHECK(gaps.ranges().size() == 3);

  // Refused, and the map given is left as it was.
  cb::ClusterSlotMap kept = three_masters();
  using R = std::vector<cb::ClusterSlotRange>;
  for (const R& bad :
       {R{{0, 10, addr("h", 1), "", {}}, {10, 20, addr("h", 2), "", {}}},
        R{{5, 4, addr("h", 1), "", {}}}, R{{0, 16384, addr("h", 1), "", {}}},
        R{{0, 1, addr("", 1), "", {}}}, R{{0, 1, addr("h", 0), "", {}}},
        R{{0, 1, addr("h", 1), "", {addr("bad host", 2)}}}}) {
    CHECK(cb::ClusterSlotMap::build(bad, kept) != nullptr);
    CHECK(kept.complete());
    CHECK(kept.master_of_slot(0)->port == 7000);
  }
}

TEST_CASE("slot map: a CLUSTER SLOTS reply", "[redis-cluster]") {
  std::vector<cb::ClusterSlotRange> ranges;
  const V reply = V::of_array({
      slots_entry(0, 8000,
                  {slots_node(V::of_string("10.0.0.1"), 7000, "id-a"),
                   slots_node(V::of_string("10.0.0.4"), 7003),
                   slots_node(V::of_string("?"), 7006)}),      // unreachable: left out
      slots_entry(8001, 16383, {slots_node(V::nil(), 7001)}),  // unknown endpoint
  });
  REQUIRE(cb::parse_cluster_slots(reply, kAsked, ranges) == nullptr);
  REQUIRE(ranges.size() == 2);
  CHECK(ranges[0].master == addr("10.0.0.1", 7000));
  CHECK(ranges[0].master_id == "id-a");
  REQUIRE(ranges[0].replicas.size() == 1);
  CHECK(ranges[0].replicas[0] == addr("10.0.0.4", 7003));
  CHECK(ranges[1].master == addr("127.0.0.1", 7001));  // the asked host
  cb::ClusterSlotMap map;
  REQUIRE(cb::ClusterSlotMap::build(ranges, map) == nullptr);
  CHECK(map.complete());

  // Extra elements (Redis 7's metadata map) are ignored.
  const V with_meta = V::of_array({slots_entry(
      0, 16383,
      {V::of_array(
          {V::of_string("h"), V::of_integer(1), V::of_string("id"),
           V::of_array({V::of_string("hostname"), V::of_string("h.example")})})})});
  CHECK(cb::parse_cluster_slots(with_meta, kAsked, ranges) == nullptr);

  const std::vector<V> bad{
      V::of_error("ERR This instance has cluster support disabled"),
      V::of_string("x"),
      V::of_array({V::of_integer(0)}),
      V::of_array({slots_entry(0, 16383, {})}),  // no master
      V::of_array({slots_entry(0, 16384, {slots_node(V::of_string("h"), 1)})}),
      V::of_array({slots_entry(-1, 5, {slots_node(V::of_string("h"), 1)})}),
      V::of_array({slots_entry(9, 5, {slots_node(V::of_string("h"), 1)})}),
      V::of_array({slots_entry(0, 5, {slots_node(V::of_string("h"), 0)})}),
      V::of_array({slots_entry(0, 5, {slots_node(V::of_string("h"), 70000)})}),
      V::of_array({slots_entry(0, 5, {slots_node(V::of_string("?"), 1)})}),
      V::of_array({slots_entry(0, 5, {slots_node(V::of_string("a b"), 1)})}),
      V::of_array({slots_entry(0, 5, {slots_node(V::of_integer(3), 1)})}),
      V::of_array({slots_entry(0, 5, {V::of_array({V::of_string("h")})})}),
      V::of_array(
          {slots_entry(0, 5, {V::of_array({V::of_string("h"), V::of_string("1")})})}),
      V::of_array({slots_entry(
          0, 5,
          {slots_node(V::of_string("h"), 1), slots_node(V::of_string("bad\nhost"), 2)})}),
      V::of_array({slots_entry(0, 5,
                               {V::of_array({V::of_string("h"), V::of_integer(1),
                                             V::of_integer(5)})})}),  // id not a string
  };
  for (std::size_t i = 0; i < bad.size(); ++i) {
    INFO("bad reply " << i);
    CHECK(cb::parse_cluster_slots(bad[i], kAsked, ranges) != nullptr);
    CHECK(ranges.empty());
  }
  // An empty cluster (no slot assigned yet) is a valid, empty map.
  REQUIRE(cb::parse_cluster_slots(V::of_array({}), kAsked, ranges) == nullptr);
  CHECK(ranges.empty());
}

TEST_CASE("slot map: a CLUSTER SHARDS reply, also after a failover", "[redis-cluster]") {
  std::vector<cb::ClusterSlotRange> ranges;
  // After a failover: the old master is still listed, failed, until it
  // rejoins; the promoted replica is the live master.
  const V reply = V::of_array({
      shards_entry({0, 100, 200, 16383},
                   {shards_node("10.0.0.1", 7000, "master", "failed"),
                    shards_node("10.0.0.4", 7003, "master", "online"),
                    shards_node("10.0.0.5", 7004, "replica", "loading"),
                    shards_node("10.0.0.6", 7005, "replica", "online")}),
      shards_entry({101, 199}, {shards_node("", 7001, "master", "online")}),
      shards_entry({}, {shards_node("10.0.0.9", 7009, "master", "online")}),  // no slots
  });
  REQUIRE(cb::parse_cluster_shards(reply, kAsked, ranges) == nullptr);
  cb::ClusterSlotMap map;
  REQUIRE(cb::ClusterSlotMap::build(ranges, map) == nullptr);
  CHECK(map.complete());
  CHECK(map.masters() == 2);
  CHECK(*map.master_of_slot(0) == addr("10.0.0.4", 7003));
  CHECK(*map.master_of_slot(16383) == addr("10.0.0.4", 7003));
  CHECK(*map.master_of_slot(150) == addr("127.0.0.1", 7001));  // "": the asked host
  const cb::ClusterShard& shard = map.shards()[map.shard_index(0)];
  CHECK(shard.master_id == "7003-id");
  REQUIRE(shard.replicas.size() == 1);
  CHECK(shard.replicas[0] == addr("10.0.0.6", 7005));

  // A RESP3 map reads as the RESP2 flat array does.
  V as_map = reply;
  as_map.elements[1].kind = V::Kind::kMap;
  as_map.elements[1].elements[3].elements[0].kind = V::Kind::kMap;
  REQUIRE(cb::parse_cluster_shards(as_map, kAsked, ranges) == nullptr);
  CHECK(ranges.size() == 3);

  const std::vector<V> bad{
      V::of_error("ERR unknown subcommand 'shards'"),
      V::of_array({V::of_string("slots")}),
      V::of_array({shards_entry({0}, {shards_node("h", 1, "master", "online")})}),
      V::of_array({shards_entry({0, 16384}, {shards_node("h", 1, "master", "online")})}),
      V::of_array({shards_entry({5, 4}, {shards_node("h", 1, "master", "online")})}),
      V::of_array({shards_entry({0, 5}, {})}),  // no master
      V::of_array({shards_entry({0, 5}, {shards_node("h", 1, "replica", "online")})}),
      V::of_array({shards_entry({0, 5}, {shards_node("h", 1, "master", "online"),
                                         shards_node("g", 2, "master", "online")})}),
      V::of_array({shards_entry({0, 5}, {shards_node("h", 1, "master", "failed"),
                                         shards_node("g", 2, "master", "failed")})}),
      V::of_array({shards_entry({0, 5}, {shards_node("?", 1, "master", "online")})}),
      V::of_array({shards_entry({0, 5}, {shards_node("a b", 1, "master", "online")})}),
      V::of_array({shards_entry({0, 5}, {shards_node("h", 0, "master", "online")})}),
      V::of_array({shards_entry(
          {0, 5}, {V::of_array({V::of_string("role"), V::of_string("master")})})}),
  };
  for (std::size_t i = 0; i < bad.size(); ++i) {
    INFO("bad reply " << i);
    CHECK(cb::parse_cluster_shards(bad[i], kAsked, ranges) != nullptr);
    CHECK(ranges.empty());
  }
}

#ifdef CIRCUITBREAKER_HAVE_HIREDIS
TEST_CASE("slot map: the replies of a real Redis 7.0 cluster, read by hiredis",
          "[redis-cluster]") {
  V slots;
  REQUIRE(read_reply(kClusterSlotsReply, slots));
  std::vector<cb::ClusterSlotRange> ranges;
  REQUIRE(cb::parse_cluster_slots(slots, kAsked, ranges) == nullptr);
  cb::ClusterSlotMap from_slots;
  REQUIRE(cb::ClusterSlotMap::build(ranges, from_slots) == nullptr);

  V shards;
  REQUIRE(read_reply(kClusterShardsReply, shards));
  REQUIRE(cb::parse_cluster_shards(shards, kAsked, ranges) == nullptr);
  cb::ClusterSlotMap from_shards;
  REQUIRE(cb::ClusterSlotMap::build(ranges, from_shards) == nullptr);

  // Both say the same: three masters, a replica each.
  for (const cb::ClusterSlotMap* map : {&from_slots, &from_shards}) {
    CHECK(map->complete());
    CHECK(map->masters() == 3);
    CHECK(*map->master_of_slot(0) == addr("127.0.0.1", 23101));
    CHECK(*map->master_of_slot(5460) == addr("127.0.0.1", 23101));
    CHECK(*map->master_of_slot(5461) == addr("127.0.0.1", 23102));
    CHECK(*map->master_of_slot(16383) == addr("127.0.0.1", 23103));
    CHECK(*map->master_of_key("foo") == addr("127.0.0.1", 23103));  // as MOVED said
    const cb::ClusterShard& s = map->shards()[map->shard_index(0)];
    CHECK(s.master_id == "63a3b3a3fb762243d82ee44cf701004d3fea7d40");
    REQUIRE(s.replicas.size() == 1);
    CHECK(s.replicas[0] == addr("127.0.0.1", 23106));
  }
  CHECK(from_slots.ranges().size() == from_shards.ranges().size());

  // After a failover: the promoted replica serves the dead master's slots.
  V after;
  REQUIRE(read_reply(kClusterShardsAfterFailover, after));
  REQUIRE(cb::parse_cluster_shards(after, kAsked, ranges) == nullptr);
  cb::ClusterSlotMap failed_over;
  REQUIRE(cb::ClusterSlotMap::build(ranges, failed_over) == nullptr);
  CHECK(failed_over.complete());
  CHECK(failed_over.masters() == 3);
  CHECK(*failed_over.master_of_slot(10923) == addr("127.0.0.1", 21761));
  CHECK(*failed_over.master_of_slot(0) == addr("127.0.0.1", 23185));
  CHECK(failed_over.find_shard(addr("127.0.0.1", 26074)) == cb::ClusterSlotMap::kNoShard);
  // Its replicas are "loading" in this node's view: not listed.
  CHECK(failed_over.shards()[failed_over.shard_index(0)].replicas.empty());

  // An error reply becomes a kError value that the parsers refuse.
  V error;
  REQUIRE(read_reply("-ERR This instance has cluster support disabled\r\n", error));
  CHECK(error.kind == V::Kind::kError);
  CHECK(cb::parse_cluster_slots(error, kAsked, ranges) != nullptr);
  CHECK_FALSE(cb::reply_value_from_hiredis(nullptr, error));
}
#endif

TEST_CASE("routing: keys grouped by slot and by node", "[redis-cluster]") {
  const cb::ClusterSlotMap map = three_masters();
  std::vector<std::string> keys;
  for (int i = 0; i < 300; ++i)
    keys.push_back(cb::fleet_key("app", "dep-" + std::to_string(i)));
  keys.push_back(cb::fleet_key("app", "dep-7") + ":w");  // same breaker, same slot

  const cb::ClusterRoute route = cb::route_keys(map, keys);
  CHECK(route.unserved.empty());
  REQUIRE(route.batches.size() == 3);  // 300 breakers reach every master
  std::vector<bool> seen(keys.size(), false);
  for (std::size_t b = 0; b < route.batches.size(); ++b) {
    const cb::ShardBatch& batch = route.batches[b];
    if (b > 0) CHECK(route.batches[b - 1].shard < batch.shard);
    for (std::size_t k = 0; k < batch.items.size(); ++k) {
      const std::size_t item = batch.items[k];
      if (k > 0) CHECK(batch.items[k - 1] < item);  // input order
      CHECK(map.shard_index(cb::cluster_key_slot(keys[item])) == batch.shard);
      CHECK_FALSE(seen[item]);
      seen[item] = true;
    }
  }
  CHECK(std::count(seen.begin(), seen.end(), true) == static_cast<long>(keys.size()));

  const std::vector<cb::SlotGroup> by_slot = cb::group_keys_by_slot(keys);
  std::size_t total = 0;
  for (std::size_t g = 0; g < by_slot.size(); ++g) {
    if (g > 0) CHECK(by_slot[g - 1].slot < by_slot[g].slot);
    for (const std::size_t item : by_slot[g].items) {
      CHECK(cb::cluster_key_slot(keys[item]) == by_slot[g].slot);
    }
    total += by_slot[g].items.size();
  }
  CHECK(total == keys.size());
  // dep-7 and its window share a group.
  const std::uint16_t slot7 = cb::cluster_key_slot(keys[7]);
  for (const cb::SlotGroup& g : by_slot) {
    if (g.slot == slot7) {
      CHECK(std::find(g.items.begin(), g.items.end(), 300u) != g.items.end());
    }
  }

  // A partial map: what no shard serves is set apart, not dropped.
  cb::ClusterSlotMap half;
  REQUIRE(cb::ClusterSlotMap::build({{0, 8191, addr("h", 1), "", {}}}, half) == nullptr);
  const cb::ClusterRoute partial = cb::route_slots(half, {0, 8191, 8192, 16383, 5});
  REQUIRE(partial.batches.size() == 1);
  CHECK(partial.batches[0].items == std::vector<std::size_t>{0, 1, 4});
  CHECK(partial.unserved == std::vector<std::size_t>{2, 3});

  const cb::ClusterRoute none = cb::route_keys(cb::ClusterSlotMap{}, keys);
  CHECK(none.batches.empty());
  CHECK(none.unserved.size() == keys.size());
}

TEST_CASE("topology: generations, MOVED and when to refresh", "[redis-cluster]") {
  cb::ClusterTopology topology;
  CHECK(topology.generation() == 0);
  CHECK(topology.refresh_due());  // no map yet
  topology.install(three_masters());
  CHECK(topology.generation() == 1);
  CHECK_FALSE(topology.refresh_due());
  const std::uint64_t routed = topology.generation();

  // A batch routed with generation 1 meets a MOVED: the slot moves at once,
  // the generation grows and a full refresh is due.
  cb::ClusterRedirect moved;
  REQUIRE(cb::parse_cluster_redirect("MOVED 12182 127.0.0.1:7000", moved) == nullptr);
  const cb::RedisNodeAddress asked = addr("127.0.0.1", 7002);
  CHECK(topology.on_moved(moved, asked, routed) == addr("127.0.0.1", 7000));
  CHECK(topology.generation() == 2);
  CHECK(topology.refresh_due());
  CHECK(topology.map().master_of_slot(12182)->port == 7000);
  CHECK(topology.map().master_of_slot(12181)->port == 7002);
  CHECK(topology.map().shards()[0].slots == 5462);

  // A second MOVED of the same batch, to a node the map did not know: a new
  // shard.
  REQUIRE(cb::parse_cluster_redirect("MOVED 1 :7010", moved) == nullptr);
  CHECK(topology.on_moved(moved, asked, routed) == addr("127.0.0.1", 7010));
  CHECK(topology.generation() == 3);
  CHECK(topology.map().master_of_slot(1)->port == 7010);
  CHECK(topology.map().shards().size() == 4);

  // The refresh: a full map. A MOVED from a batch routed before it is old
  // news: followed, but the map stays and no refresh is asked for.
  topology.install(three_masters());
  CHECK(topology.generation() == 4);
  CHECK_FALSE(topology.refresh_due());
  REQUIRE(cb::parse_cluster_redirect("MOVED 12182 127.0.0.1:7000", moved) == nullptr);
  CHECK(topology.on_moved(moved, asked, routed) == addr("127.0.0.1", 7000));
  CHECK(topology.generation() == 4);
  CHECK_FALSE(topology.refresh_due());
  CHECK(topology.map().master_of_slot(12182)->port == 7002);

  // A MOVED that agrees with the map changes nothing but asks for a refresh.
  REQUIRE(cb::parse_cluster_redirect("MOVED 0 127.0.0.1:7000", moved) == nullptr);
  topology.on_moved(moved, asked, topology.generation());
  CHECK(topology.generation() == 4);
  CHECK(topology.refresh_due());

  // A partial map keeps asking for a refresh.
  cb::ClusterSlotMap half;
  REQUIRE(cb::ClusterSlotMap::build({{0, 8191, addr("h", 1), "", {}}}, half) == nullptr);
  topology.install(half);
  CHECK(topology.refresh_due());
  topology.install(three_masters());
  topology.request_refresh();
  CHECK(topology.refresh_due());
}

TEST_CASE("slot map: moving every slot away and back never grows the shards",
          "[redis-cluster]") {
  cb::ClusterSlotMap map = three_masters();
  for (int round = 0; round < 3; ++round) {
    for (int slot = 0; slot < cb::kClusterSlots; ++slot) {
      REQUIRE(
          map.assign(static_cast<std::uint16_t>(slot), addr("10.1.0.1", 7000 + round)));
    }
    CHECK(map.masters() == 1);
    CHECK(map.complete());
    CHECK(map.shards().size() <= 4);
  }
  CHECK_FALSE(map.assign(1, addr("bad host", 1)));
  CHECK_FALSE(map.assign(1, addr("h", 0)));
  CHECK_FALSE(map.assign(16384, addr("h", 1)));
  CHECK(map.master_of_slot(1)->port == 7002);
}

// Bounded random inputs: every parser answers (a value or a refusal) and
// what it accepts holds its invariants. A fixed seed, so a failure replays.
TEST_CASE("parsers: random and mutated inputs never crash", "[redis-cluster]") {
  std::mt19937 rng(20261202u);
  const auto byte = [&] { return static_cast<char>(rng() & 0xFFu); };
  const std::string alphabet = "MOVEDASK 0123456789:[]{}.-?abc\r\n\t%";
  const std::vector<std::string> seeds{"MOVED 3999 127.0.0.1:6381", "ASK 1 [::1]:7000",
                                       "MOVED 16383 2001:db8::7:7002", "MOVED 5 :7000"};
  for (int i = 0; i < 20000; ++i) {
    std::string text;
    if (i % 2 == 0) {
      const std::size_t n = rng() % 40;
      for (std::size_t k = 0; k < n; ++k) {
        text += (i % 4 == 0) ? byte() : alphabet[rng() % alphabet.size()];
      }
    } else {
      text = seeds[rng() % seeds.size()];
      for (int m = 0, n = 1 + static_cast<int>(rng() % 3); m < n; ++m) {
        const std::size_t at = rng() % (text.size() + 1);
        switch (rng() % 3) {
          case 0: text.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
          case 1:
            if (at < text.size()) text.erase(at, 1);
            break;
          default:
            if (at < text.size()) text[at] = byte();
        }
      }
    }
    cb::ClusterRedirect r;
    if (cb::parse_cluster_redirect(text, r) == nullptr) {
      INFO("'" << text << "'");
      CHECK(r.slot < cb::kClusterSlots);
      CHECK(r.node.port >= 1);
      CHECK(r.node.port <= 65535);
      CHECK((r.node.host.empty() || cb::valid_node_host(r.node.host)));
    }
    cb::RedisNodeAddress a;
    if (cb::parse_node_address(text, a) == nullptr) CHECK(cb::valid_node_host(a.host));
    CHECK(cb::cluster_key_slot(text) < cb::kClusterSlots);
  }

  // Random reply trees for both reply parsers, then the map.
  std::function<V(int)> tree = [&](int depth) -> V {
    switch (rng() % (depth > 3 ? 4 : 7)) {
      case 0: return V::nil();
      case 1: return V::of_integer(static_cast<long long>(rng() % 20000) - 100);
      case 2: {
        static const std::vector<std::string> words{
            "slots",  "nodes",   "port",      "ip",     "endpoint", "role",
            "master", "replica", "health",    "online", "failed",   "id",
            "",       "?",       "127.0.0.1", "::1",    "a b"};
        return V::of_string(words[rng() % words.size()]);
      }
      case 3: return V::of_error("ERR x");
      default: {
        std::vector<V> items;
        for (std::size_t k = 0, n = rng() % 8; k < n; ++k)
          items.push_back(tree(depth + 1));
        return (rng() % 4 == 0) ? V::of_map(std::move(items))
                                : V::of_array(std::move(items));
      }
    }
  };
  int accepted = 0;
  for (int i = 0; i < 5000; ++i) {
    const V reply = tree(0);
    std::vector<cb::ClusterSlotRange> ranges;
    for (int which = 0; which < 2; ++which) {
      const char* err = which == 0 ? cb::parse_cluster_slots(reply, kAsked, ranges)
                                   : cb::parse_cluster_shards(reply, kAsked, ranges);
      if (err != nullptr) {
        CHECK(ranges.empty());
        continue;
      }
      for (const cb::ClusterSlotRange& range : ranges) {
        CHECK(range.first <= range.last);
        CHECK(range.last < cb::kClusterSlots);
        CHECK(cb::valid_node_host(range.master.host));
      }
      cb::ClusterSlotMap map;
      if (cb::ClusterSlotMap::build(ranges, map) == nullptr) ++accepted;
      CHECK(map.covered_slots() <= cb::kClusterSlots);
    }
  }
  CHECK(accepted > 0);  // empty arrays at least

#ifdef CIRCUITBREAKER_HAVE_HIREDIS
  // Real reply bytes, mutated, through hiredis's reader and the copy.
  const std::vector<std::string> replies{kClusterSlotsReply, kClusterShardsReply,
                                         kClusterShardsAfterFailover};
  for (int i = 0; i < 3000; ++i) {
    std::string bytes = replies[static_cast<std::size_t>(i) % replies.size()];
    for (int m = 0, n = 1 + static_cast<int>(rng() % 4); m < n; ++m) {
      bytes[rng() % bytes.size()] =
          (rng() % 2) ? byte() : alphabet[rng() % alphabet.size()];
    }
    V reply;
    if (!read_reply(bytes, reply)) continue;
    std::vector<cb::ClusterSlotRange> ranges;
    cb::ClusterSlotMap map;
    if (cb::parse_cluster_slots(reply, kAsked, ranges) == nullptr) {
      cb::ClusterSlotMap::build(ranges, map);
    }
    if (cb::parse_cluster_shards(reply, kAsked, ranges) == nullptr) {
      cb::ClusterSlotMap::build(ranges, map);
    }
    CHECK(map.covered_slots() <= cb::kClusterSlots);
  }
#endif
}
