// Where the Redis store connects: a redis:// URL, parsed.
//
//   redis://[[username]:password@]host[:port][/db]
//
// host is a name, an IPv4 address or a bracketed IPv6 address; port defaults
// to 6379 and db to 0. The username and password are percent-decoded.
// rediss:// (TLS) is recognised and refused for now: the Redis store does not
// speak TLS yet. Pure and independent of hiredis, so it is tested (and its
// messages are shared) wherever the package builds.
#ifndef CIRCUITBREAKER_REDIS_URL_HPP
#define CIRCUITBREAKER_REDIS_URL_HPP

#include <cstdint>
#include <string>
#include <string_view>

namespace circuitbreaker {

struct RedisEndpoint {
  std::string host;
  int port = 6379;
  std::string username;  // empty: the default user
  std::string password;  // empty: no AUTH
  bool has_password = false;
  int db = 0;
};

namespace redis_url_detail {

inline int hex_digit(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decodes `in` into `out`; false on a malformed escape.
inline bool decode(std::string_view in, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) return false;  // "%" or "%X" at the end
    const int hi = hex_digit(in[i + 1]);
    const int lo = hex_digit(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

// A whole decimal number in [lo, hi]; false otherwise.
inline bool number(std::string_view s, long lo, long hi, long& out) noexcept {
  if (s.empty() || s.size() > 9) return false;
  long v = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v < lo || v > hi) return false;
  out = v;
  return true;
}

}  // namespace redis_url_detail

// Parses `url`. Returns nullptr and fills `out`, or returns what the URL must
// be (a message fragment: "a redis:// URL ...").
inline const char* parse_redis_url(std::string_view url, RedisEndpoint& out) {
  using namespace redis_url_detail;
  out = RedisEndpoint{};
  constexpr std::string_view scheme = "redis://";
  constexpr std::string_view tls_scheme = "rediss://";
  if (url.substr(0, tls_scheme.size()) == tls_scheme) {
    return "a redis:// URL (rediss://, Redis over TLS, is not supported yet)";
  }
  if (url.substr(0, scheme.size()) != scheme) {
    return "a redis:// URL such as \"redis://127.0.0.1:6379/0\"";
  }
  std::string_view rest = url.substr(scheme.size());

  // The path: "/db", or nothing.
  std::string_view path;
  const std::size_t slash = rest.find('/');
  if (slash != std::string_view::npos) {
    path = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }
  if (rest.find_first_of("?#") != std::string_view::npos ||
      path.find_first_of("?#/") != std::string_view::npos) {
    return "a redis:// URL without a query or fragment: "
           "redis://[[user]:password@]host[:port][/db]";
  }

  // Credentials: everything before the last '@'.
  const std::size_t at = rest.rfind('@');
  if (at != std::string_view::npos) {
    const std::string_view cred = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const std::size_t colon = cred.find(':');
    const std::string_view user =
        colon == std::string_view::npos ? cred : cred.substr(0, colon);
    if (!decode(user, out.username)) {
      return "a redis:// URL whose user name is percent-encoded correctly";
    }
    if (colon != std::string_view::npos) {
      if (!decode(cred.substr(colon + 1), out.password)) {
        return "a redis:// URL whose password is percent-encoded correctly";
      }
      out.has_password = true;
    }
  }

  // Host and port.
  std::string_view host = rest, port;
  if (!rest.empty() && rest.front() == '[') {
    const std::size_t close = rest.find(']');
    if (close == std::string_view::npos) return "a redis:// URL with a closing ']'";
    host = rest.substr(1, close - 1);
    const std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':')
        return "a redis:// URL with ':port' after the IPv6 address";
      port = after.substr(1);
      if (port.empty()) return "a redis:// URL with a port number after ':'";
    }
  } else {
    const std::size_t colon = rest.rfind(':');
    if (colon != std::string_view::npos) {
      host = rest.substr(0, colon);
      port = rest.substr(colon + 1);
      if (port.empty()) return "a redis:// URL with a port number after ':'";
    }
  }
  if (host.empty())
    return "a redis:// URL with a host, such as \"redis://127.0.0.1:6379/0\"";
  for (const char c : host) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_' ||
                    c == ':';
    if (!ok) return "a redis:// URL whose host is a name or an IP address";
  }
  out.host = std::string(host);
  long v = 0;
  if (!port.empty()) {
    if (!number(port, 1, 65535, v)) return "a redis:// URL whose port is from 1 to 65535";
    out.port = static_cast<int>(v);
  }
  if (!path.empty()) {
    if (!number(path, 0, 1000000, v))
      return "a redis:// URL whose database (the path) is a whole number";
    out.db = static_cast<int>(v);
  }
  return nullptr;
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_REDIS_URL_HPP
