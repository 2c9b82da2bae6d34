// A Redis reply as a plain value tree, owned by C++ and independent of
// hiredis: what the parsers of structured replies (CLUSTER SLOTS, CLUSTER
// SHARDS, in redis/cluster.hpp) read, so that they are tested, and fuzzed,
// without a server or a client library. redis/reply_value_hiredis.hpp
// builds one from a hiredis reply.
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

  bool is_nil() const { return kind == Kind::kNil; }
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
