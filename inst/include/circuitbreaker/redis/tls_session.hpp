// TLS for one Redis connection, through OpenSSL (CIRCUITBREAKER_HAVE_OPENSSL,
// found by configure): a client context per set of settings
// (tls_options.hpp), kept and shared by every connection of the process
// that uses the same settings, and a session over a connected socket.
//
// What it enforces: TLS 1.2 at least; with `verify` (the default) the
// peer's chain against the given CA file (every root of a bundle) or
// directory, else OpenSSL's default paths (so SSL_CERT_FILE, SSL_CERT_DIR
// and the system's roots work), and the peer's name: a DNS name against the
// certificate's DNS SANs (SSL_set1_host()), an IP address against its IP
// SANs. SNI carries the name, never an address. The reasons a handshake
// fails are said in words (tls_failure_text()); they never carry key
// material or a password. A key file that needs a passphrase is refused,
// not prompted for.
//
// The session is non-blocking: read() and write() say whether they must
// wait for the socket to be readable or writable (the wire's poll(),
// redis/wire.hpp). OpenSSL may write on a socket the peer closed: the
// wire blocks SIGPIPE around every call here (SigpipeGuard).
#ifndef CIRCUITBREAKER_REDIS_TLS_SESSION_HPP
#define CIRCUITBREAKER_REDIS_TLS_SESSION_HPP

#ifdef CIRCUITBREAKER_HAVE_OPENSSL

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "tls_options.hpp"

namespace circuitbreaker {

// What a failed handshake or TLS read means, in words: the verification's
// result when there is one, else OpenSSL's first reason.
inline std::string tls_failure_text(SSL* ssl, unsigned long err,
                                    const std::string& peer_name) {
  const long v = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
  switch (v) {
    case X509_V_OK: break;
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_CERT_UNTRUSTED:
      return "TLS: unknown CA (the server's certificate chain is not signed by a "
             "trusted CA: give tls = list(ca_file = ...))";
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
      return "TLS: name mismatch (the certificate is not for \"" + peer_name +
             "\": give tls = list(server_name = ...))";
    case X509_V_ERR_CERT_HAS_EXPIRED: return "TLS: the server's certificate has expired";
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return "TLS: the server's certificate is not valid yet (check the clocks)";
    default:
      return std::string("TLS: the server's certificate was refused: ") +
             X509_verify_cert_error_string(v);
  }
  const int reason = ERR_GET_REASON(err);
  switch (reason) {
#ifdef SSL_R_WRONG_VERSION_NUMBER
    case SSL_R_WRONG_VERSION_NUMBER:
#endif
#ifdef SSL_R_PACKET_LENGTH_TOO_LONG
    case SSL_R_PACKET_LENGTH_TOO_LONG:
#endif
#ifdef SSL_R_UNKNOWN_PROTOCOL
    case SSL_R_UNKNOWN_PROTOCOL:
#endif
#ifdef SSL_R_HTTP_REQUEST
    case SSL_R_HTTP_REQUEST:
#endif
      return "TLS: not a TLS server (a plain Redis port? use redis://)";
#ifdef SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
      return "TLS: the server asks for a client certificate (give tls = "
             "list(cert_file = ..., key_file = ...))";
#endif
#ifdef SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE
    case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
      return "TLS: handshake failed: the server refused it (it may ask for a client "
             "certificate: tls = list(cert_file = ..., key_file = ...))";
#endif
#ifdef SSL_R_TLSV1_ALERT_UNKNOWN_CA
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
      return "TLS: the server does not trust the client certificate (unknown CA)";
#endif
#ifdef SSL_R_SSLV3_ALERT_BAD_CERTIFICATE
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
      return "TLS: the server refused the client certificate";
#endif
#ifdef SSL_R_UNSUPPORTED_PROTOCOL
    case SSL_R_UNSUPPORTED_PROTOCOL:
      return "TLS: handshake failed: the server offers no TLS version from 1.2 on";
#endif
    default: break;
  }
  const char* why = err ? ERR_reason_error_string(err) : nullptr;
  return std::string("TLS: handshake failed: ") + (why ? why : "the connection ended");
}

// A client context for one set of settings, shared by the connections that
// use them (loading a CA bundle costs milliseconds: not once per
// connection). Kept for ten minutes, so that renewed certificate files are
// read again.
class TlsContext {
 public:
  // The context for `o`, made on first use; nullptr, with `error` saying
  // which file or setting was refused.
  static std::shared_ptr<TlsContext> for_options(const RedisTls& o, std::string& error) {
    // Never destroyed (as the sync registry): a detached sync thread may
    // still use a context while the process exits.
    static std::mutex& mutex = *new std::mutex;
    static auto& cache = *new std::map<std::string, std::shared_ptr<TlsContext>>;
    // For the same reason, OpenSSL is asked not to free its state at exit:
    // its exit handler frees the library's locks, which a sync thread still
    // ending a connection would then take (ThreadSanitizer showed it in the
    // C++ tests). No effect when another library (curl) set it up first.
    static const bool initialised = init_openssl();
    (void)initialised;
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> g(mutex);
    std::shared_ptr<TlsContext>& slot = cache[o.identity()];
    if (slot && now - slot->made_ < std::chrono::minutes(10)) return slot;
    auto made = std::shared_ptr<TlsContext>(new TlsContext(o, error));
    if (made->ctx_ == nullptr) {
      cache.erase(o.identity());
      return nullptr;
    }
    slot = made;
    return made;
  }
  ~TlsContext() {
    if (ctx_) SSL_CTX_free(ctx_);
  }
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  SSL_CTX* get() const noexcept { return ctx_; }
  bool verify() const noexcept { return verify_; }

 private:
  static bool init_openssl() noexcept {
#ifdef OPENSSL_INIT_NO_ATEXIT
    return OPENSSL_init_ssl(OPENSSL_INIT_NO_ATEXIT | OPENSSL_INIT_LOAD_SSL_STRINGS |
                                OPENSSL_INIT_LOAD_CRYPTO_STRINGS,
                            nullptr) == 1;
#else
    return true;
#endif
  }

  explicit TlsContext(const RedisTls& o, std::string& error)
      : made_(std::chrono::steady_clock::now()), verify_(o.verify) {
    ERR_clear_error();
    SSL_CTX* c = SSL_CTX_new(TLS_client_method());
    if (c == nullptr) {
      error = "TLS: cannot make a TLS context";
      return;
    }
    const auto refuse = [&](std::string why) {
      const unsigned long e = ERR_peek_last_error();
      const char* detail = e ? ERR_reason_error_string(e) : nullptr;
      error = "TLS: " + why + (detail ? std::string(" (") + detail + ")" : std::string());
      ERR_clear_error();
      SSL_CTX_free(c);
    };
    SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
    SSL_CTX_set_mode(c,
                     SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    // An encrypted key is refused, never prompted for on a terminal.
    SSL_CTX_set_default_passwd_cb(c, [](char*, int, int, void*) { return 0; });
    SSL_CTX_set_verify(c, o.verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
    if (o.verify) {
      if (!o.ca_file.empty() || !o.ca_dir.empty()) {
        if (SSL_CTX_load_verify_locations(
                c, o.ca_file.empty() ? nullptr : o.ca_file.c_str(),
                o.ca_dir.empty() ? nullptr : o.ca_dir.c_str()) != 1) {
          refuse(o.ca_file.empty() ? "cannot read the CA directory tls$ca_dir"
                                   : "cannot read the CA file tls$ca_file");
          return;
        }
      } else if (SSL_CTX_set_default_verify_paths(c) != 1) {
        refuse("cannot read the system's CA certificates");
        return;
      }
    }
    if (!o.cert_file.empty() &&
        SSL_CTX_use_certificate_chain_file(c, o.cert_file.c_str()) != 1) {
      refuse("cannot read the client certificate tls$cert_file");
      return;
    }
    if (!o.key_file.empty()) {
      if (SSL_CTX_use_PrivateKey_file(c, o.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
        if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
          ERR_clear_error();
          refuse("the private key tls$key_file does not match tls$cert_file");
          return;
        }
        refuse("cannot read the private key tls$key_file (PEM, without a passphrase)");
        return;
      }
      if (SSL_CTX_check_private_key(c) != 1) {
        refuse("the private key tls$key_file does not match tls$cert_file");
        return;
      }
    }
    ctx_ = c;
  }

  SSL_CTX* ctx_ = nullptr;
  const std::chrono::steady_clock::time_point made_;
  const bool verify_;
};

// One TLS session over a connected, non-blocking socket.
class TlsSession {
 public:
  enum class Io { kDone, kWantRead, kWantWrite, kClosed, kFailed };

  TlsSession() = default;
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;
  ~TlsSession() { reset(); }

  // Starts a session on `fd` for `peer_name` (verified when the context
  // verifies; sent as SNI unless it is an IP address). False with `error`.
  bool start(std::shared_ptr<TlsContext> ctx, int fd, const std::string& peer_name,
             std::string& error) {
    reset();
    ctx_ = std::move(ctx);
    peer_ = peer_name;
    ERR_clear_error();
    ssl_ = SSL_new(ctx_->get());
    if (ssl_ == nullptr || SSL_set_fd(ssl_, fd) != 1) {
      error = "TLS: cannot start a session";
      reset();
      return false;
    }
    const bool ip = host_is_ip_address(peer_name);
    if (!ip && !peer_name.empty()) SSL_set_tlsext_host_name(ssl_, peer_name.c_str());
    if (ctx_->verify() && !peer_name.empty()) {
      const int ok =
          ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), peer_name.c_str())
             : SSL_set1_host(ssl_, peer_name.c_str());
      if (ok != 1) {
        error = "TLS: cannot verify the name \"" + peer_name + "\"";
        reset();
        return false;
      }
    }
    return true;
  }

  // One step of the handshake.
  Io handshake(std::string& error) {
    const int r = SSL_connect(ssl_);
    return r == 1 ? Io::kDone : step(r, error);
  }
  // Reads up to `n` bytes into `buf` (`got`: how many).
  Io read(char* buf, std::size_t n, std::size_t& got, std::string& error) {
    got = 0;
    const int r = SSL_read(ssl_, buf, static_cast<int>(n > 1u << 30 ? 1u << 30 : n));
    if (r > 0) got = static_cast<std::size_t>(r);
    return r > 0 ? Io::kDone : step(r, error);
  }
  Io write(const char* buf, std::size_t n, std::size_t& put, std::string& error) {
    put = 0;
    const int r = SSL_write(ssl_, buf, static_cast<int>(n > 1u << 30 ? 1u << 30 : n));
    if (r > 0) put = static_cast<std::size_t>(r);
    return r > 0 ? Io::kDone : step(r, error);
  }
  // Decrypted bytes OpenSSL holds that a poll() of the socket cannot see.
  bool pending() const noexcept { return ssl_ != nullptr && SSL_pending(ssl_) > 0; }
  // "TLSv1.3", "TLSv1.2".
  std::string version() const { return ssl_ ? SSL_get_version(ssl_) : ""; }

  void reset() noexcept {
    if (ssl_) SSL_free(ssl_);  // no close_notify: the socket is closed at once
    ssl_ = nullptr;
    ctx_.reset();
  }

 private:
  Io step(int r, std::string& error) {
    const int e = SSL_get_error(ssl_, r);
    if (e == SSL_ERROR_NONE) return Io::kDone;
    if (e == SSL_ERROR_WANT_READ) return Io::kWantRead;
    if (e == SSL_ERROR_WANT_WRITE) return Io::kWantWrite;
    if (e == SSL_ERROR_ZERO_RETURN) return Io::kClosed;
    const unsigned long err = ERR_get_error();
    ERR_clear_error();
    if (e == SSL_ERROR_SYSCALL && err == 0) return Io::kClosed;
    error = tls_failure_text(ssl_, err, peer_);
    return Io::kFailed;
  }

  std::shared_ptr<TlsContext> ctx_;
  SSL* ssl_ = nullptr;
  std::string peer_;
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HAVE_OPENSSL
#endif  // CIRCUITBREAKER_REDIS_TLS_SESSION_HPP
