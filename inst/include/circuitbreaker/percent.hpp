// Strict percent-decoding (RFC 3986 %XX escapes), for text that arrives from
// outside the process: the user name and password of a redis:// URL, and the
// breaker name in a web route's path. Strict means that a malformed escape
// ("%", "%4", "%G1") is an error rather than being passed through, so that
// one input never has two readings.
#ifndef CIRCUITBREAKER_PERCENT_HPP
#define CIRCUITBREAKER_PERCENT_HPP

#include <string>
#include <string_view>

namespace circuitbreaker {

namespace percent_detail {

inline int hex_digit(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace percent_detail

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
    const int hi = percent_detail::hex_digit(in[i + 1]);
    const int lo = percent_detail::hex_digit(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_PERCENT_HPP
