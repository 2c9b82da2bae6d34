// A Redis reply as a plain value tree, owned by C++ and independent of
// hiredis: the one reply type of the Redis client. The wire (redis/wire.hpp)
// hands every reply out as one (redis/reply_value_hiredis.hpp copies it
// from hiredis's reader), and everything above reads only these: the round
// trips, and the parsers of structured replies (CLUSTER SLOTS, CLUSTER
// SHARDS, in redis/cluster.hpp), so that they are tested, and fuzzed,
// without a server or a client library.
//
// A RESP3 map and a RESP2 array of alternating keys and values read alike
// (field()); a RESP3 set reads as an array. Everything in a reply is
// untrusted: readers check the kind of every element they use.
#ifndef CIRCUITBREAKER_REDIS_REPLY_VALUE_HPP
#define CIRCUITBREAKER_REDIS_REPLY_VALUE_HPP

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace circuitbreaker {

struct RedisValue {
  enum class Kind : std::uint8_t {
    kNil,
    kInteger,
    kString,  // a bulk string, a simple status ("OK") or a verbatim string
    kError,
    kArray,  // also a RESP3 set
    kMap,    // RESP3: elements are key, value, key, value, ...
    kOther,  // a RESP3 double, boolean or big number: no parser reads them
  };

  Kind kind = Kind::kNil;
  bool status = false;  // a kString that came as a simple status (+OK, +PONG)
  long long integer = 0;
  std::string str;                   // kString, kError (and kOther's text)
  std::vector<RedisValue> elements;  // kArray, kMap

  static RedisValue nil() { return RedisValue{}; }
  static RedisValue of_integer(long long v) {
    RedisValue out;
    out.kind = Kind::kInteger;
    out.integer = v;
    return out;
  }
  static RedisValue of_string(std::string s) {
    RedisValue out;
    out.kind = Kind::kString;
    out.str = std::move(s);
    return out;
  }
  static RedisValue of_error(std::string s) {
    RedisValue out;
    out.kind = Kind::kError;
    out.str = std::move(s);
    return out;
  }
  static RedisValue of_array(std::vector<RedisValue> items) {
    RedisValue out;
    out.kind = Kind::kArray;
    out.elements = std::move(items);
    return out;
  }
  static RedisValue of_map(std::vector<RedisValue> keys_and_values) {
    RedisValue out;
    out.kind = Kind::kMap;
    out.elements = std::move(keys_and_values);
    return out;
  }

  static RedisValue of_status(std::string s) {
    RedisValue out = of_string(std::move(s));
    out.status = true;
    return out;
  }

  bool is_nil() const { return kind == Kind::kNil; }
  bool is_error() const { return kind == Kind::kError; }
  bool is_status() const { return kind == Kind::kString && status; }
  // An error reply that starts with `code` ("NOSCRIPT", "NOPERM", ...).
  bool is_error(std::string_view code) const {
    return kind == Kind::kError && std::string_view(str).substr(0, code.size()) == code;
  }
  // A string, status or error as its text, an integer in decimal; "" else.
  std::string text() const {
    if (kind == Kind::kString || kind == Kind::kError) return str;
    if (kind == Kind::kInteger) return std::to_string(integer);
    return std::string();
  }
  bool is_integer() const { return kind == Kind::kInteger; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_array() const { return kind == Kind::kArray; }

  // An array with an even number of elements, or a map: something field()
  // can read.
  bool is_map_like() const {
    return kind == Kind::kMap || (kind == Kind::kArray && elements.size() % 2 == 0);
  }

  // The value of the first string key `name` of a map-like value; nullptr
  // when it has none (or is not map-like).
  const RedisValue* field(std::string_view name) const {
    if (!is_map_like()) return nullptr;
    for (std::size_t i = 0; i + 1 < elements.size(); i += 2) {
      if (elements[i].is_string() && elements[i].str == name) return &elements[i + 1];
    }
    return nullptr;
  }
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_REDIS_REPLY_VALUE_HPP
