// A master behind Sentinel (redis/sentinel.hpp): the sentinels' addresses,
// the master's name, the checks of what a sentinel and a node answer (they
// are untrusted), the order in which sentinels are asked, the store's
// identity and the redaction of the sentinels' password. With hiredis: a
// connection through sentinels that are all down fails within its timeout
// and says why, without a password.
#include <catch2/catch.hpp>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "circuitbreaker/clock.hpp"
#include "circuitbreaker/redis/connection.hpp"
#include "circuitbreaker/fleet/keys.hpp"
#include "circuitbreaker/redis/reply_value.hpp"
#include "circuitbreaker/redis/sentinel.hpp"
#include "circuitbreaker/redis/url.hpp"

namespace cb = circuitbreaker;
using V = cb::RedisValue;

namespace {

V pair(const std::string& host, const std::string& port) {
  return V::of_array({V::of_string(host), V::of_string(port)});
}

std::shared_ptr<cb::RedisSentinels> sentinels(std::vector<std::string> texts,
                                              const std::string& master = "mymaster") {
  std::vector<cb::RedisNodeAddress> out;
  for (const std::string& t : texts) {
    cb::RedisNodeAddress a;
    REQUIRE(cb::parse_sentinel_address(t, a) == nullptr);
    out.push_back(a);
  }
  return std::make_shared<cb::RedisSentinels>(out, master);
}

}  // namespace

TEST_CASE("sentinel addresses are host:port with a valid port", "[sentinel]") {
  cb::RedisNodeAddress a;
  CHECK(cb::parse_sentinel_address("127.0.0.1:26379", a) == nullptr);
  CHECK(a.host == "127.0.0.1");
  CHECK(a.port == 26379);
  CHECK(cb::parse_sentinel_address("[::1]:26380", a) == nullptr);
  CHECK(a.host == "::1");
  CHECK(a.text() == "[::1]:26380");
  CHECK(cb::parse_sentinel_address("sentinel-1.internal:26379", a) == nullptr);
  for (const char* bad :
       {"", "127.0.0.1", ":26379", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536",
        "127.0.0.1:+1", "127.0.0.1:026379", "host name:26379", "redis://127.0.0.1:26379",
        "[name]:1", "a\nb:1"}) {
    INFO(bad);
    CHECK(cb::parse_sentinel_address(bad, a) != nullptr);
  }
}

TEST_CASE("master names are letters, digits, _ - .", "[sentinel]") {
  CHECK(cb::valid_master_name("mymaster"));
  CHECK(cb::valid_master_name("payments-eu.1_a"));
  CHECK_FALSE(cb::valid_master_name(""));
  CHECK_FALSE(cb::valid_master_name("my master"));
  CHECK_FALSE(cb::valid_master_name("a\r\nFLUSHALL"));
  CHECK_FALSE(cb::valid_master_name(std::string(201, 'a')));
  CHECK(cb::valid_master_name(std::string(200, 'a')));
}

TEST_CASE("a sentinel's answer is a host and a port, checked", "[sentinel]") {
  cb::RedisNodeAddress a;
  CHECK(cb::read_master_address(pair("127.0.0.1", "6380"), a) == nullptr);
  CHECK(a == cb::RedisNodeAddress{"127.0.0.1", 6380});
  CHECK(cb::read_master_address(pair("::1", "6380"), a) == nullptr);
  CHECK(a.text() == "[::1]:6380");

  CHECK(std::string(cb::read_master_address(V::nil(), a)) ==
        "the sentinel does not know this master name");
  CHECK(a.port == 0);
  CHECK(cb::read_master_address(V::of_error("NOAUTH Authentication required."), a) !=
        nullptr);
  const V bad[] = {
      V::of_string("127.0.0.1:6380"),
      V::of_array({}),
      V::of_array({V::of_string("127.0.0.1")}),
      V::of_array({V::of_string("127.0.0.1"), V::of_integer(6380)}),
      V::of_array({V::of_string("127.0.0.1"), V::of_string("6380"), V::of_string("x")}),
      pair("127.0.0.1", "0"),
      pair("127.0.0.1", "99999"),
      pair("127.0.0.1", "-1"),
      pair("", "6380"),
      pair("?", "6380"),
      pair("evil host", "6380"),
      pair("a/b", "6380"),
      pair(std::string(256, 'a'), "6380"),
  };
  for (const V& v : bad) {
    CHECK(cb::read_master_address(v, a) != nullptr);
    CHECK(a.port == 0);
  }
}

TEST_CASE("random answers never yield an invalid address", "[sentinel]") {
  std::mt19937 rng(21);
  const std::string alphabet = "0123456789abc.:-_ /%[]\n";
  auto text = [&](std::size_t max) {
    std::string s(rng() % (max + 1), ' ');
    for (char& c : s) c = alphabet[rng() % alphabet.size()];
    return s;
  };
  for (int i = 0; i < 5000; ++i) {
    cb::RedisNodeAddress a;
    if (cb::read_master_address(pair(text(12), text(6)), a) == nullptr) {
      CHECK(cb::valid_node_host(a.host));
      CHECK(a.port >= 1);
      CHECK(a.port <= 65535);
    }
  }
}

TEST_CASE("ROLE must say master", "[sentinel]") {
  CHECK(cb::role_is_master(
      V::of_array({V::of_string("master"), V::of_integer(0), V::of_array({})})));
  CHECK_FALSE(cb::role_is_master(V::of_array(
      {V::of_string("slave"), V::of_string("127.0.0.1"), V::of_integer(6379)})));
  CHECK_FALSE(cb::role_is_master(V::of_array({V::of_string("sentinel")})));
  CHECK_FALSE(cb::role_is_master(V::of_array({})));
  CHECK_FALSE(cb::role_is_master(V::of_string("master")));
  CHECK_FALSE(cb::role_is_master(V::of_error("ERR unknown command 'ROLE'")));
  CHECK_FALSE(cb::role_is_master(V::nil()));
}

TEST_CASE("READONLY errors are told apart", "[sentinel]") {
  CHECK(cb::is_readonly_error("READONLY You can't write against a read only replica."));
  CHECK_FALSE(cb::is_readonly_error("ERR READONLY"));
  CHECK_FALSE(cb::is_readonly_error("READ"));
  CHECK_FALSE(cb::is_readonly_error(""));
}

TEST_CASE("sentinels are asked from the one that answered last, then in order",
          "[sentinel]") {
  using O = std::vector<std::size_t>;
  CHECK(cb::sentinel_order(3, 0) == O{0, 1, 2});
  CHECK(cb::sentinel_order(3, 1) == O{1, 0, 2});
  CHECK(cb::sentinel_order(3, 2) == O{2, 0, 1});
  CHECK(cb::sentinel_order(3, 7) == O{0, 1, 2});
  CHECK(cb::sentinel_order(1, 0) == O{0});
  CHECK(cb::sentinel_order(0, 0).empty());

  auto s = sentinels({"127.0.0.1:26379", "127.0.0.1:26380"});
  CHECK(s->current_master().empty());
  CHECK(s->preferred() == 0);
  s->found_master(cb::RedisNodeAddress{"127.0.0.1", 6381}, 1);
  CHECK(s->current_master() == "127.0.0.1:6381");
  CHECK(s->preferred() == 1);
}

TEST_CASE("the topology and the master's address of an endpoint", "[sentinel]") {
  cb::RedisEndpoint e;
  REQUIRE(cb::parse_redis_url("redis://10.0.0.1:6390/2", e) == nullptr);
  CHECK(std::string(e.topology()) == "single");
  CHECK(e.master_address() == "10.0.0.1:6390");
  e.sentinels = sentinels({"127.0.0.1:26379"});
  CHECK(std::string(e.topology()) == "sentinel");
  CHECK(e.master_address().empty());
  e.sentinels->found_master(cb::RedisNodeAddress{"127.0.0.1", 6391}, 0);
  CHECK(e.master_address() == "127.0.0.1:6391");
}

TEST_CASE("stores through other sentinels, names or passwords are other stores",
          "[sentinel]") {
  cb::FleetSpec a, b;
  REQUIRE(cb::parse_redis_url("redis://:pw@127.0.0.1/0", a.endpoint) == nullptr);
  b = a;
  CHECK(a.identity() == b.identity());
  a.endpoint.sentinels = sentinels({"127.0.0.1:26379"});
  CHECK(a.identity() != b.identity());
  b.endpoint.sentinels = sentinels({"127.0.0.1:26379"});
  CHECK(a.identity() == b.identity());
  b.endpoint.sentinels = sentinels({"127.0.0.1:26379"}, "other");
  CHECK(a.identity() != b.identity());
  b.endpoint.sentinels = sentinels({"127.0.0.1:26380"});
  CHECK(a.identity() != b.identity());
  b.endpoint.sentinels = sentinels({"127.0.0.1:26379"});
  b.endpoint.sentinels->set_credentials("", "s3cret");
  CHECK(a.identity() != b.identity());
}

TEST_CASE("the sentinels' password is redacted as the master's is", "[sentinel]") {
  cb::RedisEndpoint e;
  REQUIRE(cb::parse_redis_url("redis://:masterpw@127.0.0.1/0", e) == nullptr);
  e.sentinels = sentinels({"127.0.0.1:26379"});
  e.sentinels->set_credentials("user", "sentinelpw");
  CHECK(cb::redact_password("a masterpw b sentinelpw c sentinelpw", e) ==
        "a *** b *** c ***");
}

#ifdef CIRCUITBREAKER_HAVE_HIREDIS
// Ports 1 and 2 of 127.0.0.1: only root may listen there, and nothing on
// a test machine does, so a connection is refused at once.
TEST_CASE("no sentinel reachable: connect fails within its timeout, without secrets",
          "[sentinel]") {
  cb::RedisEndpoint e;
  REQUIRE(cb::parse_redis_url("redis://:masterpw@127.0.0.1/0", e) == nullptr);
  e.sentinels = sentinels({"127.0.0.1:1", "127.0.0.1:2"});
  e.sentinels->set_credentials("", "sentinelpw");
  cb::RedisConnection c;
  const cb::Nanos t0 = cb::SteadyClock::now();
  CHECK_FALSE(c.connect(e, 200 * cb::kNanosPerMs));
  CHECK(cb::SteadyClock::now() - t0 < 5000 * cb::kNanosPerMs);  // a hang detector
  CHECK_FALSE(c.connected());
  const std::string why = c.error();
  CHECK_THAT(why, Catch::Contains("no master \"mymaster\" found"));
  CHECK_THAT(why, Catch::Contains("sentinel 127.0.0.1:"));
  CHECK(why.find("pw") == std::string::npos);
  CHECK(e.master_address().empty());
}
#endif
