// How a breaker's name (or a store's prefix) is written where only a few
// bytes are safe: a segment's file name (host_breaker.hpp) and a fleet
// breaker's Redis keys (redis_fleet.hpp). Every byte but [A-Za-z0-9_.-] is
// written %XX (upper-case hex). The encoding is injective, and its output
// never holds '/', ':', '{', '}', '%' (except as an escape), a space or a
// control byte, so it can sit between separators made of those.
#ifndef CIRCUITBREAKER_NAME_ENCODING_HPP
#define CIRCUITBREAKER_NAME_ENCODING_HPP

#include <string>
#include <string_view>

namespace circuitbreaker {

// Appends `in`, percent-encoded as above, to `out`.
inline void append_encoded_name(std::string& out, std::string_view in) {
  static const char hex[] = "0123456789ABCDEF";
  for (const char ch : in) {
    const auto c = static_cast<unsigned char>(ch);
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
    if (plain) {
      out += ch;
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_NAME_ENCODING_HPP
