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
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "../percent.hpp"
#include "sentinel.hpp"

namespace circuitbreaker {

struct RedisEndpoint {
  std::string host;
  int port = 6379;
  std::string username;  // empty: the default user
  std::string password;  // empty: no AUTH
  bool has_password = false;
  int db = 0;
  // Set when the master is found through Sentinel (redis/sentinel.hpp):
  // host and port are then unused, and the credentials and db above are
  // the master's.
  std::shared_ptr<RedisSentinels> sentinels;
  // The nodes the user gave (url as a vector: the seed nodes of a Redis
  // Cluster), host:port above being the first; empty for one URL. Whether
  // the store is on a Cluster is found on the first connection
  // (redis/cluster_sync.hpp), seeds or not.
  std::vector<RedisNodeAddress> seeds;

  // Where to look first: the seeds, or host:port.
  std::vector<RedisNodeAddress> seed_nodes() const {
    if (!seeds.empty()) return seeds;
    return {RedisNodeAddress{host, port}};
  }

  // "single" or "sentinel": the topology that $metrics() and print() show.
  const char* topology() const noexcept { return sentinels ? "sentinel" : "single"; }
  // The master's address as last known ("host:port"; "" before Sentinel
  // named one).
  std::string master_address() const {
    if (sentinels) return sentinels->current_master();
    return RedisNodeAddress{host, port}.text();
  }
};

namespace redis_url_detail {

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
    if (!percent_decode(user, out.username)) {
      return "a redis:// URL whose user name is percent-encoded correctly";
    }
    if (colon != std::string_view::npos) {
      if (!percent_decode(cred.substr(colon + 1), out.password)) {
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

// `url` with its credentials masked, for messages: the text between "://"
// (or the start, when there is none) and the last '@' is the user name and
// password, shown as "***:***" (":***" when there is no user name, "***"
// when there is no ':'). Purely textual, so that a URL that does not parse
// (a bad port, a bad escape, garbage) is masked as well, and conservative:
// with an '@' anywhere after the scheme, all before it is hidden.
inline std::string mask_url_credentials(std::string_view url) {
  const std::size_t sep = url.find("://");
  const std::size_t start = sep == std::string_view::npos ? 0 : sep + 3;
  const std::size_t at = url.rfind('@');
  if (at == std::string_view::npos || at < start) return std::string(url);
  const std::string_view cred = url.substr(start, at - start);
  const std::size_t colon = cred.find(':');
  std::string out(url.substr(0, start));
  if (colon == std::string_view::npos) {
    out += "***";
  } else {
    out += colon == 0 ? ":***" : "***:***";
  }
  out += url.substr(at);
  return out;
}

// `text` (an error from hiredis or the server) with every occurrence of the
// endpoint's password replaced by "***". Redis does not echo a password, but
// a message must never carry one whatever the server says. (User names are
// not secrets there, and a short one would garble words of the message:
// "Connection ref***sed".)
// The sentinels' password, when there is one, is removed as well.
inline std::string redact_password(std::string text, const RedisEndpoint& e) {
  for (const std::string* secret :
       {&e.password, e.sentinels ? &e.sentinels->password() : nullptr}) {
    if (secret == nullptr || secret->empty()) continue;
    for (std::size_t pos = text.find(*secret); pos != std::string::npos;
         pos = text.find(*secret, pos + 3)) {
      text.replace(pos, secret->size(), "***");
    }
  }
  return text;
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_REDIS_URL_HPP
