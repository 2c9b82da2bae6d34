// The key of the breaker that guards a downstream: "host:port" of a URL, so
// that every call to one service shares one breaker and a failing service
// does not open the breaker of another. Not a rule of the state machine; a
// helper for bindings that keep a breaker per downstream (R's breaker_for()),
// written in C++ because it runs on every call that looks its breaker up, and
// a parse in R cost tens of microseconds (and a cache of parses, memory).
#ifndef CIRCUITBREAKER_ENDPOINT_HPP
#define CIRCUITBREAKER_ENDPOINT_HPP

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "percent.hpp"

namespace circuitbreaker {

namespace detail {

inline bool is_alpha(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
inline bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }
inline char lower(char c) noexcept {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

// The longest port: 65535.
inline constexpr std::size_t kMaxPortDigits = 5;

// host[:port], where host is a bracketed IPv6 literal or a name of letters,
// digits, `.`, `_` and `-`; `in_url` also allows `~` and %-escapes.
inline bool valid_authority(std::string_view a, bool in_url) noexcept {
  std::size_t i = 0;
  if (!a.empty() && a[0] == '[') {
    const std::size_t close = a.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    for (std::size_t k = 1; k < close; ++k) {
      const char c = a[k];
      if (!(hex_digit_value(c) >= 0 || c == ':' || c == '.')) return false;
    }
    i = close + 1;
  } else {
    const std::size_t colon = a.find(':');
    const std::size_t end = colon == std::string_view::npos ? a.size() : colon;
    if (end == 0) return false;
    for (std::size_t k = 0; k < end; ++k) {
      const char c = a[k];
      const bool ok = is_alpha(c) || is_digit(c) || c == '.' || c == '_' || c == '-' ||
                      (in_url && (c == '~' || c == '%'));
      if (!ok) return false;
    }
    i = end;
  }
  if (i == a.size()) return true;
  if (a[i] != ':') return false;
  const std::size_t digits = a.size() - i - 1;
  if (digits == 0 || digits > kMaxPortDigits) return false;
  for (std::size_t k = i + 1; k < a.size(); ++k) {
    if (!is_digit(a[k])) return false;
  }
  return true;
}

inline bool has_port(std::string_view a) noexcept {
  const std::size_t colon = a.rfind(':');
  return colon != std::string_view::npos && (a[0] != '[' || colon > a.rfind(']'));
}

inline const char* default_port(std::string_view scheme) noexcept {
  if (scheme == "http" || scheme == "ws") return "80";
  if (scheme == "https" || scheme == "wss") return "443";
  if (scheme == "ftp") return "21";
  return nullptr;
}

}  // namespace detail

// The key for `x`, a URL ("scheme://[userinfo@]host[:port][/path][?query]")
// or a host with an optional port: lower-cased "host:port", with the
// scheme's default port when the URL gives none (http and ws 80, https and
// wss 443, ftp 21; other schemes: "host" alone). Returns false, leaving `key`
// alone, when `x` is neither.
inline bool endpoint_key(std::string_view x, std::string& key) {
  const std::size_t sep = x.find("://");
  std::string scheme;
  std::string_view authority;
  if (sep == std::string_view::npos) {
    if (!detail::valid_authority(x, false)) return false;
    authority = x;
  } else {
    const std::string_view s = x.substr(0, sep);
    if (s.empty() || !detail::is_alpha(s[0])) return false;
    for (const char c : s) {
      if (!(detail::is_alpha(c) || detail::is_digit(c) || c == '+' || c == '.' ||
            c == '-'))
        return false;
      scheme.push_back(detail::lower(c));
    }
    std::string_view rest = x.substr(sep + 3);
    rest = rest.substr(0, rest.find_first_of("/?#"));
    const std::size_t at = rest.rfind('@');
    if (at != std::string_view::npos) rest = rest.substr(at + 1);
    if (!detail::valid_authority(rest, true)) return false;
    authority = rest;
  }
  std::string out;
  out.reserve(authority.size() + 1 + detail::kMaxPortDigits);
  for (const char c : authority) out.push_back(detail::lower(c));
  if (sep != std::string_view::npos && !detail::has_port(authority)) {
    if (const char* port = detail::default_port(scheme)) {
      out.push_back(':');
      out.append(port);
    }
  }
  key = std::move(out);
  return true;
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_ENDPOINT_HPP
