// A real redis-server for the Catch2 tests of the Redis store
// (test_fleet_script.cpp, test_fleet_sync_stress.cpp): on 127.0.0.1, a free
// port, no persistence; it can be killed and started again on the same port
// (empty, as a restarted Redis without persistence is), and is killed and
// reaped when the object goes. Where redis-server is missing, connect()
// says so and the test case warns and passes.
#ifndef CIRCUITBREAKER_REDIS_TEST_SUPPORT_HPP
#define CIRCUITBREAKER_REDIS_TEST_SUPPORT_HPP

#ifdef CIRCUITBREAKER_HAVE_HIREDIS

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "circuitbreaker/fleet/sync.hpp"

namespace cbredis {

inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

class RedisServer {
 public:
  circuitbreaker::RedisEndpoint endpoint;

  RedisServer() {
    endpoint.host = "127.0.0.1";
    endpoint.port = free_port();
    start();
  }
  // A Redis Cluster node (cluster-enabled, cluster-node-timeout 1000 ms),
  // alone until it meets others; its nodes.conf lives in a directory of its
  // own, removed with the object. Its port leaves room for the cluster bus
  // (port + 10000).
  struct ClusterNode {};
  explicit RedisServer(ClusterNode) {
    endpoint.host = "127.0.0.1";
    endpoint.port = 0;
    for (int i = 0; i < 50 && (endpoint.port == 0 || endpoint.port > 55000); ++i) {
      endpoint.port = free_port();
    }
    char dir[] = "/tmp/cb-cluster-node-XXXXXX";
    if (::mkdtemp(dir) != nullptr) dir_ = dir;
    extra_ = {"--cluster-enabled",      "yes",
              "--cluster-node-timeout", "1000",
              "--cluster-config-file",  dir_ + "/nodes.conf"};
    start();
  }
  // A server that speaks TLS only (--port 0, --tls-port), with the
  // certificate and key given, trusting `ca` for client certificates
  // (`auth_clients`: "no", "yes" or "optional"). `endpoint` then has TLS on,
  // with `ca` as its CA file.
  struct Tls {
    std::string cert, key, ca, auth_clients = "no";
  };
  explicit RedisServer(const Tls& t) {
    endpoint.host = "127.0.0.1";
    endpoint.port = free_port();
    endpoint.tls.enabled = true;
    endpoint.tls.ca_file = t.ca;
    extra_ = {"--tls-port",
              std::to_string(endpoint.port),
              "--port",
              "0",
              "--tls-cert-file",
              t.cert,
              "--tls-key-file",
              t.key,
              "--tls-ca-cert-file",
              t.ca,
              "--tls-auth-clients",
              t.auth_clients};
    tls_ = true;
    start();
  }
  ~RedisServer() {
    kill();
    if (!dir_.empty()) {
      ::unlink((dir_ + "/nodes.conf").c_str());
      ::rmdir(dir_.c_str());
    }
  }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  void start() {
    const std::string port = std::to_string(endpoint.port);
    // Built before fork(): the child only calls async-signal-safe functions.
    std::vector<const char*> argv{
        "redis-server", "--bind",     "127.0.0.1", "--save", "",    "--appendonly",
        "no",           "--loglevel", "warning",   "--dir",  "/tmp"};
    if (!tls_) {
      argv.push_back("--port");
      argv.push_back(port.c_str());
    }
    for (const std::string& a : extra_) argv.push_back(a.c_str());
    argv.push_back(nullptr);
    std::fflush(stdout);  // the child must not print Catch's buffered output again
    pid_ = ::fork();
    if (pid_ == 0) {
      // Only async-signal-safe calls here: other threads (a FleetSync) may
      // hold stdio's locks at the fork. The server dies with the test binary
      // even when that is killed or crashes (no redis-server is left behind).
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int null = ::open("/dev/null", O_WRONLY);
      if (null >= 0) {
        ::dup2(null, STDOUT_FILENO);
        ::dup2(null, STDERR_FILENO);
      }
      ::execvp("redis-server", const_cast<char* const*>(argv.data()));
      ::_exit(127);
    }
  }
  // SIGKILL, and reaped.
  void kill() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    pid_ = -1;
  }
  // Killed and started again on the same port; true when it answers within 5 s.
  bool restart() {
    kill();
    start();
    circuitbreaker::RedisConnection c;
    return connect(c);
  }
  // Connected within 5 s, or false (redis-server missing or not starting).
  bool connect(circuitbreaker::RedisConnection& c) const {
    for (int i = 0; i < 100; ++i) {
      if (c.connect(endpoint, circuitbreaker::kNanosPerSecond)) return true;
      int status = 0;
      if (pid_ <= 0 || ::waitpid(pid_, &status, WNOHANG) == pid_) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

 private:
  pid_t pid_ = -1;
  std::string dir_;
  std::vector<std::string> extra_;
  bool tls_ = false;
};

// Where redis-server is missing, a test case says so and passes (Catch2 v2
// has no SKIP).
inline void skipped() { WARN("redis-server is not available: skipped"); }

// A reply's text ("" for none): a string, status or error, or an integer.
inline std::string reply_text(const circuitbreaker::RedisReply& r) {
  return r ? r->text() : std::string();
}
inline std::string reply_text(const circuitbreaker::RedisValue& v) { return v.text(); }

}  // namespace cbredis

#endif  // CIRCUITBREAKER_HAVE_HIREDIS
#endif  // CIRCUITBREAKER_REDIS_TEST_SUPPORT_HPP
