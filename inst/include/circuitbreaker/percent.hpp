// Percent escapes (RFC 3986 %XX), the one home of both directions.
//
// Encoding: how a breaker's name (or a store's prefix) is written where only
// a few bytes are safe: a segment's file name (host/host_breaker.hpp) and a fleet
// breaker's Redis keys (fleet/keys.hpp). Every byte but [A-Za-z0-9_.-] is
// written %XX (upper-case hex). The encoding is injective, and its output
// never holds '/', ':', '{', '}', '%' (except as an escape), a space or a
// control byte, so it can sit between separators made of those.
//
// Decoding, strictly, for text that arrives from outside the process: the
// user name and password of a redis:// URL, the breaker name in a web
// route's path, and a segment file's name (host/host_breaker.hpp). Strict
// means that a malformed escape ("%", "%4", "%G1") is an error rather than
// being passed through, so that one input never has two readings.
#ifndef CIRCUITBREAKER_PERCENT_HPP
#define CIRCUITBREAKER_PERCENT_HPP

#include <string>
#include <string_view>

namespace circuitbreaker {

// The value of hexadecimal digit `c` (either case), or -1 when it is none.
inline int hex_digit_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

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

// Percent-decodes `in` into `out`; false on a malformed escape (then `out`
// holds no meaning). '+' stays '+': it is a space only in query strings.
inline bool percent_decode(std::string_view in, std::string& out) {
  out.clear();
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) return false;  // "%" or "%X" at the end
    const int hi = hex_digit_value(in[i + 1]);
    const int lo = hex_digit_value(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_PERCENT_HPP
