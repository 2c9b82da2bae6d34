// The Redis store's URL parser (redis_url.hpp).
#include <catch2/catch.hpp>

#include <string>

#include "circuitbreaker/redis_url.hpp"

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
