// endpoint_key(): the "host:port" key of the breaker guarding a downstream.
#include <catch2/catch.hpp>

#include <string>

#include <circuitbreaker/circuitbreaker.hpp>

namespace {

std::string key_of(const char* x) {
  std::string key = "<none>";
  return circuitbreaker::endpoint_key(x, key) ? key : "<invalid>";
}

}  // namespace

TEST_CASE("a URL's key is its lower-cased host and port", "[endpoint]") {
  CHECK(key_of("http://127.0.0.1:8001/items?x=1") == "127.0.0.1:8001");
  CHECK(key_of("https://Example.org/x") == "example.org:443");
  CHECK(key_of("HTTP://example.org") == "example.org:80");
  CHECK(key_of("http://user:pw@example.org/x") == "example.org:80");
  CHECK(key_of("http://a@b@example.org:81/") == "example.org:81");
  CHECK(key_of("http://[::1]:8080/") == "[::1]:8080");
  CHECK(key_of("http://[::1]/") == "[::1]:80");
  CHECK(key_of("wss://h#frag") == "h:443");
  CHECK(key_of("ws://h?q") == "h:80");
  CHECK(key_of("ftp://files.example.org/a") == "files.example.org:21");
  CHECK(key_of("gopher://hole") == "hole");
  CHECK(key_of("http://h%41~x/") == "h%41~x:80");
}

TEST_CASE("a host name's key is itself, lower-cased", "[endpoint]") {
  CHECK(key_of("db.internal:5432") == "db.internal:5432");
  CHECK(key_of("API.example.org") == "api.example.org");
  CHECK(key_of("[2001:db8::1]:443") == "[2001:db8::1]:443");
}

TEST_CASE("anything else has no key", "[endpoint]") {
  for (const char* bad :
       {"", "not a host!", "http://", "http:///path", "://h", "1http://h",
        "http://h:", "http://h:123456", "http://h:80x", "host:", "[::1", "[]", "h~x",
        "http://ex ample.org", "http://[zz]/"}) {
    INFO(bad);
    CHECK(key_of(bad) == "<invalid>");
  }
}
