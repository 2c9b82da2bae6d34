// The Redis store's URL parser (redis/url.hpp).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>

#include "circuitbreaker/breaker_name.hpp"
#include "circuitbreaker/fleet/spec_limits.hpp"
#include "circuitbreaker/host/host_breaker.hpp"
#include "circuitbreaker/percent.hpp"
#include "circuitbreaker/redis/url.hpp"

namespace cb = circuitbreaker;

namespace {

cb::RedisEndpoint parsed(const std::string& url) {
  cb::RedisEndpoint e;
  const char* err = cb::parse_redis_url(url, e);
  INFO(url << ": " << (err ? err : "ok"));
  REQUIRE(err == nullptr);
  return e;
}

bool refused(const std::string& url) {
  cb::RedisEndpoint e;
  return cb::parse_redis_url(url, e) != nullptr;
}

}  // namespace

TEST_CASE("redis URLs: host, port, database, credentials", "[redis-url]") {
  cb::RedisEndpoint e = parsed("redis://127.0.0.1:6379/0");
  CHECK(e.host == "127.0.0.1");
  CHECK(e.port == 6379);
  CHECK(e.db == 0);
  CHECK_FALSE(e.has_password);

  e = parsed("redis://localhost");
  CHECK(e.host == "localhost");
  CHECK(e.port == 6379);
  CHECK(e.db == 0);

  e = parsed("redis://:s%40cret@127.0.0.1:7000/3");
  CHECK(e.username.empty());
  CHECK(e.has_password);
  CHECK(e.password == "s@cret");
  CHECK(e.port == 7000);
  CHECK(e.db == 3);

  e = parsed("redis://app:p:w@host-1.internal/12");
  CHECK(e.username == "app");
  CHECK(e.password == "p:w");
  CHECK(e.host == "host-1.internal");
  CHECK(e.db == 12);

  e = parsed("redis://[::1]:6380/1");
  CHECK(e.host == "::1");
  CHECK(e.port == 6380);
  CHECK(e.db == 1);

  e = parsed("redis://a%2Fb@[::1]");
  CHECK(e.username == "a/b");
  CHECK_FALSE(e.has_password);
  CHECK(e.port == 6379);
}

TEST_CASE("redis URLs: what is refused, with a reason", "[redis-url]") {
  for (const char* url : {"",
                          "http://127.0.0.1",
                          "redis:/127.0.0.1",
                          "redis://",
                          "redis://:6379",
                          "redis://127.0.0.1:",
                          "redis://127.0.0.1:0",
                          "redis://127.0.0.1:65536",
                          "redis://127.0.0.1:port",
                          "redis://127.0.0.1/x",
                          "redis://127.0.0.1/1/2",
                          "redis://127.0.0.1/-1",
                          "redis://127.0.0.1?ssl_cert_reqs=maybe",
                          "redis://127.0.0.1?tls=perhaps",
                          "redis://127.0.0.1?=x",
                          "redis://127.0.0.1?ssl_ca_certs=%zz",
                          "redis://127.0.0.1?a=%00",
                          "redis://h#f",
                          "redis://[::1",
                          "redis://[::1]x",
                          "redis://[::1]:",
                          "redis://%zz@h",
                          "redis://u:%4@h",
                          "redis://h o st",
                          "redis://127.0.0.1:99999999999999"}) {
    INFO(url);
    CHECK(refused(url));
  }
}

TEST_CASE("redis URLs: rediss:// is TLS, and the query sets TLS as clients do",
          "[redis-url]") {
  cb::RedisEndpoint e = parsed("rediss://default:p%40ss@my-cache.example.com:6380/0");
  CHECK(e.tls.enabled);
  CHECK(e.tls.verify);
  CHECK(e.tls.server_name.empty());  // the host, when connecting
  CHECK(e.host == "my-cache.example.com");
  CHECK(e.port == 6380);
  CHECK(e.username == "default");
  CHECK(e.password == "p@ss");
  CHECK_FALSE(parsed("redis://127.0.0.1").tls.enabled);

  e = parsed(
      "rediss://:pw@127.0.0.1:6380/2?ssl_cert_reqs=required&ssl_ca_certs=%2Ftmp%2Fca.pem"
      "&ssl_ca_path=/etc/ssl/certs&ssl_certfile=/c.pem&ssl_keyfile=/"
      "k.pem&sni=cache.test");
  CHECK(e.db == 2);
  CHECK(e.tls.verify);
  CHECK(e.tls.ca_file == "/tmp/ca.pem");
  CHECK(e.tls.ca_dir == "/etc/ssl/certs");
  CHECK(e.tls.cert_file == "/c.pem");
  CHECK(e.tls.key_file == "/k.pem");
  CHECK(e.tls.server_name == "cache.test");
  CHECK(e.query_unknown.empty());

  CHECK_FALSE(parsed("rediss://h?ssl_cert_reqs=none").tls.verify);
  CHECK_FALSE(parsed("rediss://h?ssl_cert_reqs=CERT_NONE").tls.verify);
  CHECK(parsed("redis://h?ssl=true").tls.enabled);
  CHECK(parsed("redis://h?tls=1").tls.enabled);
  CHECK(parsed("rediss://h?ssl_server_hostname=x.test").tls.server_name == "x.test");

  // Unknown parameters: their names are kept (once each), never the values.
  e = parsed("redis://h/0?protocol=3&decode_responses=true&protocol=2&password=hunter2");
  REQUIRE(e.query_unknown.size() == 3);
  CHECK(e.query_unknown[0] == "protocol");
  CHECK(e.query_unknown[1] == "decode_responses");
  CHECK(e.query_unknown[2] == "password");
  // A '?' in the password is not the query.
  e = parsed("redis://:a?b@h:1/0");
  CHECK(e.password == "a?b");
  CHECK(e.query_unknown.empty());
  // A different TLS setting is a different store.
  cb::RedisEndpoint a = parsed("rediss://h?sni=one.test"),
                    b = parsed("rediss://h?sni=two.test");
  CHECK(a.tls != b.tls);
  CHECK(a.tls == parsed("rediss://h?sni=one.test").tls);
}

TEST_CASE("redis URLs: secrets in the query are masked, paths are not", "[redis-url]") {
  CHECK(cb::mask_url("rediss://:PW@h/0?ssl_ca_certs=/ca.pem&password=PW2&auth_token=T") ==
        "rediss://:***@h/0?ssl_ca_certs=/ca.pem&password=***&auth_token=***");
  CHECK(cb::mask_url("redis://h?ssl_keyfile=/k.pem&key=K") ==
        "redis://h?ssl_keyfile=/k.pem&key=***");
  CHECK(cb::mask_url("redis://h/0") == "redis://h/0");
}

TEST_CASE("TLS names: what a connection verifies and sends as SNI", "[redis-url]") {
  cb::RedisTls t;
  t.enabled = true;
  CHECK(cb::host_is_ip_address("127.0.0.1"));
  CHECK(cb::host_is_ip_address("::1"));
  CHECK_FALSE(cb::host_is_ip_address("localhost"));
  CHECK_FALSE(cb::host_is_ip_address("1.2.3"));
  CHECK_FALSE(cb::host_is_ip_address("1.2.3.4.example"));
  // A host the user gave: itself, or server_name (a tunnel dials localhost).
  CHECK(cb::tls_peer_name(t, "localhost", true) == "localhost");
  t.server_name = "cache.example.com";
  CHECK(cb::tls_peer_name(t, "localhost", true) == "cache.example.com");
  // A node learned from a map: its announced name, else server_name, else
  // its address.
  CHECK(cb::tls_peer_name(t, "node-1.cache.example.com", false) ==
        "node-1.cache.example.com");
  CHECK(cb::tls_peer_name(t, "10.0.0.5", false) == "cache.example.com");
  t.server_name.clear();
  CHECK(cb::tls_peer_name(t, "10.0.0.5", false) == "10.0.0.5");
}

TEST_CASE("redis URLs: credentials are masked in every URL, parsed or not",
          "[redis-url]") {
  struct Case {
    const char* url;
    const char* masked;
  };
  for (const Case& c : {
           Case{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
           Case{"redis://:PW@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"},
           Case{"redis://app:PW@127.0.0.1:6379/0", "redis://***:***@127.0.0.1:6379/0"},
           Case{"redis://app@127.0.0.1", "redis://***@127.0.0.1"},
           // URLs that do not parse: a bad port, a bad escape, an '@' or a '/'
           // in the password, a query, no scheme at all.
           Case{"redis://:PW@host:bad/0", "redis://:***@host:bad/0"},
           Case{"redis://:P%ZZW@host", "redis://:***@host"},
           Case{"redis://:P@W@host", "redis://:***@host"},
           Case{"redis://:P/W@host/0", "redis://:***@host/0"},
           Case{"redis://:PW@host?db=1", "redis://:***@host?db=1"},
           Case{"rediss://u:PW@host", "rediss://***:***@host"},
           Case{"u:PW@host", "***:***@host"},
           Case{"https://u:PW@bad host/x", "https://***:***@bad host/x"},
           Case{"PW@", "***@"},
       }) {
    INFO(c.url);
    const std::string masked = cb::mask_url_credentials(c.url);
    CHECK(masked == c.masked);
    CHECK(masked.find("PW") == std::string::npos);
    CHECK(masked.find('W') == std::string::npos);
  }
}

TEST_CASE("redis URLs: as a store shows them, masked, without the query, TLS by scheme",
          "[redis-url]") {
  struct Case {
    const char* url;
    bool tls;
    const char* shown;
  };
  for (const Case& c : {
           Case{"redis://127.0.0.1:6379/0", false, "redis://127.0.0.1:6379/0"},
           Case{"redis://127.0.0.1:6379/0", true, "rediss://127.0.0.1:6379/0"},
           Case{"rediss://127.0.0.1:6380/0", true, "rediss://127.0.0.1:6380/0"},
           Case{"redis://:PW@127.0.0.1/0?ssl=true&ssl_keyfile=/k#frag", true,
                "rediss://:***@127.0.0.1/0"},
           Case{"redis://u:P?W@host/2", false, "redis://***:***@host/2"},
           Case{"redis://host/0?password=PW", false, "redis://host/0"},
           Case{"redis://host#PW", false, "redis://host"},
           Case{"u:PW@host?x", true, "***:***@host"},
       }) {
    INFO(c.url);
    const std::string shown = cb::shown_url(c.url, c.tls);
    CHECK(shown == c.shown);
    CHECK(shown.find("PW") == std::string::npos);
  }
}

TEST_CASE("redis URLs: the password is redacted from error texts", "[redis-url]") {
  const cb::RedisEndpoint e = parsed("redis://app:s%40cret@127.0.0.1");
  CHECK(cb::redact_password("WRONGPASS invalid username-password pair", e) ==
        "WRONGPASS invalid username-password pair");
  CHECK(cb::redact_password("ERR s@cret is wrong for app; s@cret!", e) ==
        "ERR *** is wrong for app; ***!");
  cb::RedisEndpoint star;
  star.password = "*";
  CHECK(cb::redact_password("a*b", star) == "a***b");
  CHECK(cb::redact_password("", e).empty());
}

TEST_CASE("percent decoding is strict", "[redis-url]") {
  std::string out;
  CHECK(cb::percent_decode("a%20b%2Fc+d", out));
  CHECK(out == "a b/c+d");
  CHECK(cb::percent_decode("plain%00", out));
  CHECK(out == std::string("plain\0", 6));
  for (const char* bad : {"%", "a%", "%4", "%G1", "%1G", "ab%zz"}) {
    INFO(bad);
    CHECK_FALSE(cb::percent_decode(bad, out));
  }
}

TEST_CASE("breaker names: one limit in bytes for the shared stores", "[redis-url]") {
  CHECK(cb::name_problem("payments", true) == nullptr);
  CHECK(cb::name_problem(std::string(cb::kMaxSharedNameBytes, 'n'), true) == nullptr);
  CHECK(cb::name_problem(std::string(cb::kMaxSharedNameBytes + 1, 'n'), true) != nullptr);
  CHECK(cb::name_problem(std::string(cb::kMaxSharedNameBytes + 1, 'n'), false) ==
        nullptr);
  CHECK(cb::name_problem(std::string(cb::kMaxNameBytes, 'n'), false) == nullptr);
  CHECK(cb::name_problem(std::string(cb::kMaxNameBytes + 1, 'n'), false) != nullptr);
  for (bool shared : {true, false}) {
    CHECK(cb::name_problem("", shared) != nullptr);
    CHECK(cb::name_problem(std::string("a\0b", 3), shared) != nullptr);
  }
  // Every name within the limit has a segment file name, even one whose
  // every byte is escaped.
  const std::string worst(cb::kMaxSharedNameBytes, '\xff');
  CHECK_FALSE(cb::segment_file_name(worst).empty());
}

TEST_CASE("fleet store settings: the core's limits, named, checked in order",
          "[redis-url]") {
  auto problem = [](std::size_t urls, const char* prefix, double sync, double timeout) {
    const cb::FleetSpecLimit* l = cb::fleet_spec_problem(urls, prefix, sync, timeout);
    return std::string(l == nullptr ? "" : l->field);
  };
  CHECK(problem(1, "circuitbreaker", 0.1, 0.1).empty());
  CHECK(problem(100, "a.b:c-d_E9", 0.01, 0.001).empty());
  CHECK(problem(1, std::string(100, 'p').c_str(), 60, 60).empty());
  CHECK(problem(0, "p", 0.1, 0.1) == "url");
  CHECK(problem(101, "p", 0.1, 0.1) == "url");
  CHECK(problem(1, "", 0.1, 0.1) == "prefix");
  CHECK(problem(1, std::string(101, 'p').c_str(), 0.1, 0.1) == "prefix");
  for (const char* bad : {"a b", "{tag}", "a*", "caf\xc3\xa9", "a/b"}) {
    INFO(bad);
    CHECK(problem(1, bad, 0.1, 0.1) == "prefix");
  }
  CHECK(problem(1, "p", 0.009, 0.1) == "sync_interval");
  CHECK(problem(1, "p", 61, 0.1) == "sync_interval");
  CHECK(problem(1, "p", std::nan(""), 0.1) == "sync_interval");
  CHECK(problem(1, "p", 0.1, 0.0009) == "timeout");
  CHECK(problem(1, "p", 0.1, std::numeric_limits<double>::infinity()) == "timeout");
  // The first broken limit is named: the URL count before the prefix.
  CHECK(problem(0, "", -1, -1) == "url");
  CHECK(std::string(cb::fleet_spec_limit(cb::FleetSpecField::Timeout).must) ==
        "a number of seconds from 0.001 to 60");
}
