// Where one Redis node listens: a host and a port, as a cluster or a
// sentinel names it (redirects, CLUSTER SLOTS, SENTINEL replies) or as a
// user lists seed nodes ("host:port").
//
// These names arrive from outside the process (a node's reply is untrusted
// input), so they are checked before anything connects to them: a host is
// 1 to 255 bytes of letters, digits and ".-_:%" (a DNS name, an IPv4
// address, an IPv6 address without brackets, with an optional "%zone"); a
// port is a decimal number in 1..65535 without sign, spaces or leading
// zeros. Pure and independent of hiredis.
#ifndef CIRCUITBREAKER_REDIS_NODE_ADDRESS_HPP
#define CIRCUITBREAKER_REDIS_NODE_ADDRESS_HPP

#include <string>
#include <string_view>
#include <tuple>

namespace circuitbreaker {

struct RedisNodeAddress {
  std::string host;  // an IPv6 address is held without its brackets
  int port = 0;

  // "host:port", or "[v6]:port" when the host holds a ':'.
  std::string text() const {
    const bool v6 = host.find(':') != std::string::npos;
    return (v6 ? "[" + host + "]" : host) + ':' + std::to_string(port);
  }
};

inline bool operator==(const RedisNodeAddress& a, const RedisNodeAddress& b) {
  return a.port == b.port && a.host == b.host;
}
inline bool operator!=(const RedisNodeAddress& a, const RedisNodeAddress& b) {
  return !(a == b);
}
inline bool operator<(const RedisNodeAddress& a, const RedisNodeAddress& b) {
  return std::tie(a.host, a.port) < std::tie(b.host, b.port);
}

// Whether `host` may be connected to (see above). "?", which Redis 7 gives
// for a node without an announced hostname, is not a host.
inline bool valid_node_host(std::string_view host) noexcept {
  if (host.empty() || host.size() > 255) return false;
  for (const char c : host) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_' ||
                    c == ':' || c == '%';
    if (!ok) return false;
  }
  return true;
}

// A port as Redis writes it; false otherwise.
inline bool parse_node_port(std::string_view text, int& out) noexcept {
  if (text.empty() || text.size() > 5 || text[0] == '0') return false;
  int v = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v > 65535) return false;
  out = v;
  return true;
}

// Parses "host:port", "[v6]:port" or "v6:port" (an unbracketed IPv6 host:
// the port follows the last ':', which is how Redis writes a MOVED to an
// IPv6 node). With `allow_empty_host`, ":port" is accepted too and leaves
// `out.host` empty (a redirect's "the host you asked"). Returns nullptr and
// fills `out`, or what the text must be.
inline const char* parse_node_address(std::string_view text, RedisNodeAddress& out,
                                      bool allow_empty_host = false) {
  constexpr const char* kMust =
      "host:port, [IPv6]:port or IPv6:port, with a port in 1..65535";
  out = RedisNodeAddress{};
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return kMust;
  std::string_view host = text.substr(0, colon);
  int port = 0;
  if (!parse_node_port(text.substr(colon + 1), port)) return kMust;
  if (!host.empty() && host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return kMust;
    host = host.substr(1, host.size() - 2);
    if (host.find(':') == std::string_view::npos) return kMust;  // "[name]": not IPv6
  } else if (host.find_first_of("[]") != std::string_view::npos) {
    return kMust;
  }
  if (host.empty()) {
    if (!allow_empty_host) return kMust;
  } else if (!valid_node_host(host)) {
    return kMust;
  }
  out.host = std::string(host);
  out.port = port;
  return nullptr;
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_REDIS_NODE_ADDRESS_HPP
