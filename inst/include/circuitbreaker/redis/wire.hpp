// The one place where the Redis client's bytes go on the wire: a TCP
// socket of its own (non-blocking, every wait a poll() bounded by a
// deadline), TLS over it through OpenSSL when the store asks for it
// (tls_session.hpp), and hiredis as the RESP writer (redisFormatCommandArgv)
// and reader (redisReader), nothing else of it: no redisContext, so that
// TLS works with the hiredis that distributions ship (Debian's 0.14 has no
// TLS). Replies leave as owned values (reply_value.hpp); a redisReply never
// leaves this file.
//
// `ready()` answers "is a reply or data waiting" for the subscription:
// replies already parsed, and decrypted bytes that OpenSSL holds, which a
// poll() of the socket does not see (the sync thread asks before it
// polls: no lost wake-up).
#ifndef CIRCUITBREAKER_REDIS_WIRE_HPP
#define CIRCUITBREAKER_REDIS_WIRE_HPP

#ifdef CIRCUITBREAKER_HAVE_HIREDIS

#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../clock.hpp"
#include "reply_value.hpp"
#include "reply_value_hiredis.hpp"
#include "tls_options.hpp"
#include "tls_session.hpp"

namespace circuitbreaker {

// Whether this build speaks TLS (configure found OpenSSL).
inline constexpr bool kRedisTlsBuilt =
#ifdef CIRCUITBREAKER_HAVE_OPENSSL
    true;
#else
    false;
#endif

// SIGPIPE blocked in this thread for the guard's life; one raised meanwhile
// (a write on a socket the peer closed) is taken, not delivered: R's
// handler must never run, least of all on the sync thread.
class SigpipeGuard {
 public:
  SigpipeGuard() noexcept {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    blocked_ = pthread_sigmask(SIG_BLOCK, &pipe_, &old_) == 0;
  }
  ~SigpipeGuard() {
    if (!blocked_) return;
    if (!was_pending_) {
      const timespec zero{0, 0};
      while (sigtimedwait(&pipe_, nullptr, &zero) > 0) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t pipe_, old_;
  bool was_pending_ = false, blocked_ = false;
};

class RedisWire {
 public:
  RedisWire() = default;
  RedisWire(const RedisWire&) = delete;
  RedisWire& operator=(const RedisWire&) = delete;
  ~RedisWire() { close(); }

  bool connected() const noexcept { return fd_ >= 0; }
  int fd() const noexcept { return fd_; }
  const std::string& error() const noexcept { return error_; }
  void set_error(std::string why) { error_ = std::move(why); }
  // "" on a plain connection, else the protocol of the session ("TLSv1.3").
  const std::string& tls_version() const noexcept { return tls_version_; }

  void close() noexcept {
#ifdef CIRCUITBREAKER_HAVE_OPENSSL
    tls_.reset();
#endif
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    if (reader_) redisReaderFree(reader_);
    reader_ = nullptr;
    out_.clear();
    ready_.clear();
    tls_version_.clear();
    tls_on_ = false;
  }

  // Connects to host:port (every address it resolves to, in turn), then
  // the TLS handshake when `tls` is enabled, verifying `peer_name`; all by
  // `deadline`. False, with error() saying why, otherwise.
  bool connect(const std::string& host, int port, const RedisTls& tls,
               const std::string& peer_name, Nanos deadline) {
    close();
    if (!open_socket(host, port, deadline)) return false;
    reader_ = redisReaderCreate();
    if (reader_ == nullptr) return fail("cannot allocate a reply reader");
    if (!tls.enabled) return true;
#ifdef CIRCUITBREAKER_HAVE_OPENSSL
    std::string why;
    std::shared_ptr<TlsContext> ctx = TlsContext::for_options(tls, why);
    if (!ctx || !tls_.start(std::move(ctx), fd_, peer_name, why)) return fail(why);
    tls_on_ = true;
    for (;;) {
      TlsSession::Io io;
      {
        SigpipeGuard g;
        io = tls_.handshake(why);
      }
      if (io == TlsSession::Io::kDone) break;
      if (io == TlsSession::Io::kClosed) {
        return fail(
            "TLS: not a TLS server: it closed the connection during the "
            "handshake (a plain Redis port? use redis://)");
      }
      if (io == TlsSession::Io::kFailed) return fail(why);
      if (!wait(io == TlsSession::Io::kWantWrite, deadline))
        return fail(
            "TLS: not a TLS server, or no answer to the handshake in time "
            "(a plain Redis port? use redis://)");
    }
    tls_version_ = tls_.version();
    return true;
#else
    (void)peer_name;
    return fail("this build of circuitbreaker has no TLS (OpenSSL was not found)");
#endif
  }

  // Queues a command (binary safe); flush() sends what is queued.
  void append(const std::vector<std::string>& args) {
    std::vector<const char*> v;
    std::vector<size_t> len;
    v.reserve(args.size());
    len.reserve(args.size());
    for (const std::string& a : args) {
      v.push_back(a.data());
      len.push_back(a.size());
    }
    char* cmd = nullptr;
    const int n =
        redisFormatCommandArgv(&cmd, static_cast<int>(v.size()), v.data(), len.data());
    if (n > 0 && cmd != nullptr) out_.append(cmd, static_cast<std::size_t>(n));
    if (cmd != nullptr) redisFreeCommand(cmd);
  }

  // Writes every queued byte by `deadline`; false (and closed) otherwise.
  bool flush(Nanos deadline) {
    std::size_t done = 0;
    while (done < out_.size()) {
      if (!connected()) return false;
      std::size_t put = 0;
      const Io io = write_some(out_.data() + done, out_.size() - done, put);
      done += put;
      if (io == Io::kDone) continue;
      if (io == Io::kFailed) return false;
      if (!wait(io == Io::kWantWrite, deadline))
        return fail("timed out: the write did not finish in time");
    }
    out_.clear();
    return true;
  }

  // The next reply by `deadline`; nullopt (and closed) when none came.
  std::optional<RedisValue> read(Nanos deadline) {
    for (;;) {
      if (!ready_.empty()) return take();
      if (!connected()) return std::nullopt;
      if (!parse()) return std::nullopt;
      if (!ready_.empty()) continue;
      std::size_t got = 0;
      const Io io = read_some(got);
      if (io == Io::kDone) continue;
      if (io == Io::kFailed) return std::nullopt;
      if (!wait(io == Io::kWantWrite, deadline)) {
        fail("timed out: no reply in time");
        return std::nullopt;
      }
    }
  }

  // Whether a reply is parsed and waiting, or TLS holds decrypted bytes.
  bool ready() const noexcept {
#ifdef CIRCUITBREAKER_HAVE_OPENSSL
    if (tls_on_ && tls_.pending()) return true;
#endif
    return !ready_.empty();
  }

  // Reads, without waiting, whatever has arrived, and parses it. False when
  // the connection ended or erred (then closed).
  bool drain() {
    for (int i = 0; i < 1024 && connected(); ++i) {
      std::size_t got = 0;
      const Io io = read_some(got);
      if (io == Io::kFailed) return false;
      if (io != Io::kDone) break;
    }
    return connected() && parse();
  }
  // The next parsed reply, if any (after drain()).
  std::optional<RedisValue> next() {
    if (ready_.empty()) return std::nullopt;
    return take();
  }

 private:
  enum class Io { kDone, kWantRead, kWantWrite, kFailed };

  bool fail(std::string why) {
    close();
    error_ = std::move(why);
    return false;
  }

  RedisValue take() {
    RedisValue v = std::move(ready_.front());
    ready_.pop_front();
    return v;
  }

  // Moves every complete reply from the reader to ready_.
  bool parse() {
    for (;;) {
      void* reply = nullptr;
      if (redisReaderGetReply(reader_, &reply) != REDIS_OK) {
        const std::string why = std::string("protocol error: ") + reader_->errstr;
        return fail(why);
      }
      if (reply == nullptr) return true;
      RedisValue v;
      const bool ok = reply_value_from_hiredis(static_cast<const redisReply*>(reply), v);
      freeReplyObject(reply);
      if (!ok) return fail("a reply beyond the reader's bounds");
      ready_.push_back(std::move(v));
    }
  }

  Io read_some(std::size_t& got) {
    char buf[16384];
    got = 0;
#ifdef CIRCUITBREAKER_HAVE_OPENSSL
    if (tls_on_) {
      std::string why;
      TlsSession::Io io;
      {
        SigpipeGuard g;
        io = tls_.read(buf, sizeof buf, got, why);
      }
      return io == TlsSession::Io::kDone ? feed(buf, got) : from_tls(io, why);
    }
#endif
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n > 0) {
      got = static_cast<std::size_t>(n);
      return feed(buf, got);
    }
    if (n == 0) return closed_by_peer();
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Io::kWantRead;
    fail(std::string("read failed: ") + std::strerror(errno));
    return Io::kFailed;
  }

  Io feed(const char* buf, std::size_t n) {
    if (redisReaderFeed(reader_, buf, n) != REDIS_OK) {
      fail("cannot buffer a reply");
      return Io::kFailed;
    }
    return Io::kDone;
  }

  Io closed_by_peer() {
    fail("the server closed the connection");
    return Io::kFailed;
  }

#ifdef CIRCUITBREAKER_HAVE_OPENSSL
  // A TLS step's outcome as the wire's (`why`: a failure's words).
  Io from_tls(TlsSession::Io io, const std::string& why) {
    switch (io) {
      case TlsSession::Io::kDone: return Io::kDone;
      case TlsSession::Io::kWantRead: return Io::kWantRead;
      case TlsSession::Io::kWantWrite: return Io::kWantWrite;
      case TlsSession::Io::kClosed: return closed_by_peer();
      default: fail(why); return Io::kFailed;
    }
  }
#endif

  Io write_some(const char* buf, std::size_t n, std::size_t& put) {
    put = 0;
#ifdef CIRCUITBREAKER_HAVE_OPENSSL
    if (tls_on_) {
      std::string why;
      TlsSession::Io io;
      {
        SigpipeGuard g;
        io = tls_.write(buf, n, put, why);
      }
      return from_tls(io, why);
    }
#endif
    const ssize_t w = ::send(fd_, buf, n, MSG_NOSIGNAL);
    if (w >= 0) {
      put = static_cast<std::size_t>(w);
      return Io::kDone;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Io::kWantWrite;
    fail(std::string("write failed: ") + std::strerror(errno));
    return Io::kFailed;
  }

  // Waits until the socket is writable (or readable) or `deadline`.
  bool wait(bool for_write, Nanos deadline) {
    for (;;) {
      const Nanos left = deadline - SteadyClock::now();
      if (left <= 0) return false;
      pollfd p{fd_, static_cast<short>(for_write ? POLLOUT : POLLIN), 0};
      const int ms = static_cast<int>((left + kNanosPerMs - 1) / kNanosPerMs);
      const int r = ::poll(&p, 1, ms);
      if (r > 0) return true;
      if (r < 0 && errno != EINTR) return false;
    }
  }

  bool open_socket(const std::string& host, int port, Nanos deadline) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const std::string service = std::to_string(port);
    const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
    if (rc != 0) return fail("cannot resolve " + host + ": " + ::gai_strerror(rc));
    std::string why = "no address of " + host;
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      const int fd =
          ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
      fd_ = fd;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        ::freeaddrinfo(found);
        return true;
      }
      if (errno != EINPROGRESS) {
        why = errno == ECONNREFUSED ? "Connection refused" : std::strerror(errno);
      } else if (!wait(true, deadline)) {
        why = "Connection timed out";
      } else if (socket_ok(why)) {
        ::freeaddrinfo(found);
        return true;
      }
      ::close(fd);
      fd_ = -1;
      if (SteadyClock::now() >= deadline) break;
    }
    ::freeaddrinfo(found);
    return fail(why);
  }

  bool socket_ok(std::string& why) {
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err == 0) return true;
    why = err == ECONNREFUSED ? "Connection refused" : std::strerror(err);
    return false;
  }

  int fd_ = -1;
  redisReader* reader_ = nullptr;
  std::string out_;
  std::deque<RedisValue> ready_;
  std::string error_;
  std::string tls_version_;
  bool tls_on_ = false;
#ifdef CIRCUITBREAKER_HAVE_OPENSSL
  TlsSession tls_;
#endif
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HAVE_HIREDIS
#endif  // CIRCUITBREAKER_REDIS_WIRE_HPP
