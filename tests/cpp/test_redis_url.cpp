// The Redis store's URL parser (redis/url.hpp).
#include <catch2/catch.hpp>

#include <string>

#include "circuitbreaker/breaker_name.hpp"
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
                          "redis://127.0.0.1?db=1",
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
  cb::RedisEndpoint e;
  const char* tls = cb::parse_redis_url("rediss://127.0.0.1", e);
  REQUIRE(tls != nullptr);
  CHECK(std::string(tls).find("TLS") != std::string::npos);
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
