// Where the fleet store connects: a redis:// URL, parsed.
//
//   redis[s]://[[username]:password@]host[:port][/db][?name=value&...]
//
// host is a name, an IPv4 address or a bracketed IPv6 address; port defaults
// to 6379 and db to 0. The username and password are percent-decoded.
// rediss:// is Redis over TLS (tls_options.hpp). The query takes the TLS
// parameters that popular clients accept in the connection strings of
// managed services (redis_url_detail::apply_query()); the names of the
// others are kept, never their values, so that R can say once that they
// were ignored. Pure and independent of hiredis, so it is tested (and its
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
#include "tls_options.hpp"

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
  // (redis/router.hpp), seeds or not.
  std::vector<RedisNodeAddress> seeds;
  // TLS on every connection of the store (rediss://, the query, R's `tls`).
  RedisTls tls;
  // The names of query parameters the parser does not know (ignored).
  std::vector<std::string> query_unknown;

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

// A query value that means yes or no: true/false, yes/no, 1/0, on/off.
inline bool yes_no(std::string_view v, bool& out) noexcept {
  for (const char* yes : {"true", "yes", "1", "on", "TRUE", "True"}) {
    if (v == yes) return out = true, true;
  }
  for (const char* no : {"false", "no", "0", "off", "FALSE", "False"}) {
    if (v == no) return out = false, true;
  }
  return false;
}

// One query parameter `name=value` (both percent-decoded) applied to `e`:
// the TLS settings popular clients take from a URL (redis-py's ssl_*,
// node-redis's and others' sni, tls/ssl). Returns nullptr, or what the value
// must be; an unknown name is remembered and ignored.
inline const char* apply_query(const std::string& name, const std::string& value,
                               RedisEndpoint& e) {
  if (value.find('\0') != std::string::npos || name.find('\0') != std::string::npos)
    return "a URL without NUL bytes in its query";
  RedisTls& t = e.tls;
  if (name == "ssl_cert_reqs") {
    if (value == "none" || value == "CERT_NONE") {
      t.verify = false;
    } else if (value == "required" || value == "CERT_REQUIRED" || value == "optional" ||
               value == "CERT_OPTIONAL") {
      t.verify = true;  // "optional" verifies a certificate the server sends: always
    } else {
      return "a URL whose ssl_cert_reqs is none, optional or required";
    }
  } else if (name == "ssl_ca_certs") {
    t.ca_file = value;
  } else if (name == "ssl_ca_path") {
    t.ca_dir = value;
  } else if (name == "ssl_certfile") {
    t.cert_file = value;
  } else if (name == "ssl_keyfile") {
    t.key_file = value;
  } else if (name == "sni" || name == "ssl_server_hostname") {
    t.server_name = value;
  } else if (name == "ssl" || name == "tls") {
    bool on = false;
    if (!yes_no(value, on)) return "a URL whose ssl (or tls) parameter is true or false";
    if (on) t.enabled = true;
  } else {
    for (const std::string& seen : e.query_unknown) {
      if (seen == name) return nullptr;
    }
    if (e.query_unknown.size() < 20) e.query_unknown.push_back(name);
  }
  return nullptr;
}

// The query `q` (after '?'): name=value pairs separated by '&'.
inline const char* parse_query(std::string_view q, RedisEndpoint& e) {
  while (!q.empty()) {
    const std::size_t amp = q.find('&');
    const std::string_view pair = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
    if (pair.empty()) continue;
    const std::size_t eq = pair.find('=');
    std::string name, value;
    if (!percent_decode(pair.substr(0, eq), name) ||
        (eq != std::string_view::npos && !percent_decode(pair.substr(eq + 1), value))) {
      return "a URL whose query is percent-encoded correctly";
    }
    if (name.empty()) return "a URL whose query parameters have names";
    if (const char* bad = apply_query(name, value, e)) return bad;
  }
  return nullptr;
}

}  // namespace redis_url_detail

// Parses `url`. Returns nullptr and fills `out`, or returns what the URL must
// be (a message fragment: "a redis:// URL ...").
inline const char* parse_redis_url(std::string_view url, RedisEndpoint& out) {
  using namespace redis_url_detail;
  out = RedisEndpoint{};
  constexpr std::string_view scheme = "redis://";
  constexpr std::string_view tls_scheme = "rediss://";
  std::string_view rest;
  if (url.substr(0, tls_scheme.size()) == tls_scheme) {
    out.tls.enabled = true;
    rest = url.substr(tls_scheme.size());
  } else if (url.substr(0, scheme.size()) == scheme) {
    rest = url.substr(scheme.size());
  } else {
    return "a redis:// or rediss:// URL such as \"redis://127.0.0.1:6379/0\"";
  }
  if (rest.find('#') != std::string_view::npos) {
    return "a redis:// URL without a fragment ('#'): "
           "redis[s]://[[user]:password@]host[:port][/db][?query]";
  }
  // The query: after the first '?' that follows the credentials (a
  // password may hold a '?', percent-encoded or not).
  std::string_view query;
  {
    const std::size_t at = rest.rfind('@');
    const std::size_t q = rest.find('?', at == std::string_view::npos ? 0 : at);
    if (q != std::string_view::npos) {
      query = rest.substr(q + 1);
      rest = rest.substr(0, q);
    }
  }

  // The path: "/db", or nothing.
  std::string_view path;
  const std::size_t slash = rest.find('/');
  if (slash != std::string_view::npos) {
    path = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }
  if (path.find('/') != std::string_view::npos) {
    return "a redis:// URL whose path is one database number: "
           "redis[s]://[[user]:password@]host[:port][/db][?query]";
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
  return parse_query(query, out);
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

// `url` masked as above, and the value of every query parameter whose name
// speaks of a secret (password, pass, pwd, secret, token, key: a password
// given as ?password=, a key passphrase) as "***". Paths of files are not
// secrets and stay.
inline std::string mask_url(std::string_view url) {
  std::string out = mask_url_credentials(url);
  const std::size_t q =
      out.find('?', out.rfind('@') == std::string::npos ? 0 : out.rfind('@'));
  if (q == std::string::npos) return out;
  std::string masked = out.substr(0, q + 1);
  std::string_view rest = std::string_view(out).substr(q + 1);
  bool first = true;
  while (true) {
    const std::size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    const std::size_t eq = pair.find('=');
    std::string name(pair.substr(0, eq));
    for (char& c : name) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    bool secret = false;
    for (const char* word : {"pass", "pwd", "secret", "token", "auth"}) {
      secret = secret || name.find(word) != std::string::npos;
    }
    secret = secret || (name.find("key") != std::string::npos &&
                        name.find("file") == std::string::npos);
    if (!first) masked += '&';
    first = false;
    masked += (secret && eq != std::string_view::npos)
                  ? std::string(pair.substr(0, eq + 1)) + "***"
                  : std::string(pair);
    if (amp == std::string_view::npos) break;
    rest = rest.substr(amp + 1);
  }
  return masked;
}

// How a store's `url` is shown to people (print(), format(), the status
// routes): its credentials masked as mask_url_credentials() masks them,
// without its query or fragment (where TLS file paths and other settings
// go), and with the scheme rediss:// when the store speaks TLS (`tls`: by
// the scheme or by settings given apart from the URL). Textual, like the
// masking, so that any text is shown safely.
inline std::string shown_url(std::string_view url, bool tls) {
  const std::size_t at = url.rfind('@');
  const std::size_t cut = url.find_first_of("?#", at == std::string_view::npos ? 0 : at);
  std::string out = mask_url_credentials(url.substr(0, cut));
  constexpr std::string_view kPlain = "redis://";
  if (tls && std::string_view(out).substr(0, kPlain.size()) == kPlain) {
    out.replace(0, kPlain.size(), "rediss://");
  }
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
