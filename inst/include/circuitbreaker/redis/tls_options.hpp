// How a fleet store speaks TLS: the settings of every connection of one
// store (the server, each Cluster node, the sentinels and the master behind
// them). Pure data, independent of OpenSSL and hiredis: the URL parser
// (url.hpp) fills it from rediss:// and the query, R's `tls` argument
// completes it, and redis/tls_session.hpp applies it. An empty string is an
// unset field.
#ifndef CIRCUITBREAKER_REDIS_TLS_OPTIONS_HPP
#define CIRCUITBREAKER_REDIS_TLS_OPTIONS_HPP

#include <string>
#include <string_view>

namespace circuitbreaker {

struct RedisTls {
  bool enabled = false;
  std::string ca_file;      // PEM bundle of trusted roots (all of them are loaded)
  std::string ca_dir;       // a c_rehash'ed directory of roots
  std::string cert_file;    // the client's certificate chain (mutual TLS)
  std::string key_file;     // its private key
  std::string server_name;  // the name verified and sent as SNI ("": the host)
  bool verify = true;       // the peer's chain and name

  // What makes two endpoints' TLS the same (part of a store's identity).
  std::string identity() const {
    if (!enabled) return "plain";
    return std::string("tls\n") + ca_file + '\n' + ca_dir + '\n' + cert_file + '\n' +
           key_file + '\n' + server_name + '\n' + (verify ? "1" : "0");
  }
  bool operator==(const RedisTls& o) const { return identity() == o.identity(); }
  bool operator!=(const RedisTls& o) const { return !(*this == o); }
};

// Whether `host` is an IP address (IPv4 dotted quad, or IPv6: it has a
// ':'): such a host is verified against the certificate's IP SANs and never
// sent as SNI.
inline bool host_is_ip_address(std::string_view host) noexcept {
  if (host.find(':') != std::string_view::npos) return true;
  int dots = 0, digits = 0;
  for (const char c : host) {
    if (c == '.') {
      if (digits == 0) return false;
      ++dots;
      digits = 0;
    } else if (c >= '0' && c <= '9') {
      if (++digits > 3) return false;
    } else {
      return false;
    }
  }
  return dots == 3 && digits > 0;
}

// The name a connection to `host` verifies (and sends as SNI unless it is
// an address). A node the user gave (the URL's host, a seed, a sentinel):
// `server_name` when set, else that host. A node the store learned (a
// Cluster map, a master named by the sentinels): its announced host name
// when it has one, else `server_name`, else its address.
inline std::string tls_peer_name(const RedisTls& tls, const std::string& host,
                                 bool given_by_user) {
  if (given_by_user) return tls.server_name.empty() ? host : tls.server_name;
  if (!host_is_ip_address(host)) return host;
  return tls.server_name.empty() ? host : tls.server_name;
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_REDIS_TLS_OPTIONS_HPP
