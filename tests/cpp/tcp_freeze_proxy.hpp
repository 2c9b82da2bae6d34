// A TCP proxy on 127.0.0.1 in front of a real redis-server, for the Catch2
// tests of the fleet store's subscription (test_fleet_sync_stress.cpp): it
// passes bytes both ways, and on freeze_subscribers() stops passing anything
// on the connections that sent SUBSCRIBE so far, without closing them. So a
// subscription that stops answering, while its socket stays open (a hung
// node, a network that drops packets), can be made on a real server. One
// thread; every connection is closed, and the thread joined, when the object
// goes.
#ifndef CIRCUITBREAKER_TCP_FREEZE_PROXY_HPP
#define CIRCUITBREAKER_TCP_FREEZE_PROXY_HPP

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace cbredis {

class FreezeProxy {
 public:
  explicit FreezeProxy(int target_port) : target_(target_port) {
    listen_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = loopback(0);
    socklen_t len = sizeof a;
    if (listen_ < 0 || ::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listen_, 16) != 0 ||
        ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~FreezeProxy() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (const Pair& p : pairs_) {
      ::close(p.client);
      ::close(p.server);
    }
    if (listen_ >= 0) ::close(listen_);
  }
  FreezeProxy(const FreezeProxy&) = delete;
  FreezeProxy& operator=(const FreezeProxy&) = delete;

  // The port to connect to (0: the proxy could not listen).
  int port() const noexcept { return port_; }
  // From now on, the connections that subscribed so far pass nothing.
  // Returns once the proxy's thread has frozen them (false: not within 2 s).
  bool freeze_subscribers() {
    freeze_.store(true);
    for (int i = 0; i < 400 && freeze_.load(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return !freeze_.load();
  }

 private:
  struct Pair {
    int client = -1, server = -1;
    bool subscriber = false, frozen = false;
  };

  static sockaddr_in loopback(int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    return a;
  }

  // Reads what `from` has and writes it all to `to`; false when either end
  // closed or failed.
  static bool pass(int from, int to, bool& subscriber) {
    char buf[16384];
    const ssize_t n = ::recv(from, buf, sizeof buf, 0);
    if (n <= 0) return false;
    if (std::string(buf, static_cast<std::size_t>(n)).find("SUBSCRIBE") !=
        std::string::npos) {
      subscriber = true;
    }
    for (ssize_t done = 0; done < n;) {
      const ssize_t w =
          ::send(to, buf + done, static_cast<std::size_t>(n - done), MSG_NOSIGNAL);
      if (w <= 0) return false;
      done += w;
    }
    return true;
  }

  void accept_one() {
    const int c = ::accept(listen_, nullptr, nullptr);
    if (c < 0) return;
    const int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = loopback(target_);
    if (s < 0 || ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(c);
      if (s >= 0) ::close(s);
      return;
    }
    pairs_.push_back({c, s, false, false});
  }

  void run() {
    while (!stop_) {
      if (freeze_.load()) {
        for (Pair& p : pairs_) p.frozen = p.frozen || p.subscriber;
        freeze_.store(false);
      }
      std::vector<pollfd> fds{{listen_, POLLIN, 0}};
      std::vector<std::size_t> of;  // the pair of fds[1 + 2k]
      for (std::size_t i = 0; i < pairs_.size(); ++i) {
        if (pairs_[i].frozen) continue;
        fds.push_back({pairs_[i].client, POLLIN, 0});
        fds.push_back({pairs_[i].server, POLLIN, 0});
        of.push_back(i);
      }
      if (::poll(fds.data(), fds.size(), 10) <= 0) continue;
      std::vector<std::size_t> dead;
      for (std::size_t k = 0; k < of.size(); ++k) {
        Pair& p = pairs_[of[k]];
        bool ok = true;
        bool ignored = false;
        if (fds[1 + 2 * k].revents) ok = pass(p.client, p.server, p.subscriber);
        if (ok && fds[2 + 2 * k].revents) ok = pass(p.server, p.client, ignored);
        if (!ok) dead.push_back(of[k]);
      }
      for (auto it = dead.rbegin(); it != dead.rend(); ++it) {
        ::close(pairs_[*it].client);
        ::close(pairs_[*it].server);
        pairs_.erase(pairs_.begin() + static_cast<std::ptrdiff_t>(*it));
      }
      if (fds[0].revents & POLLIN) accept_one();
    }
  }

  int target_;
  int listen_ = -1;
  int port_ = 0;
  std::vector<Pair> pairs_;  // the thread's
  std::atomic<bool> stop_{false}, freeze_{false};
  std::thread thread_;
};

}  // namespace cbredis

#endif  // CIRCUITBREAKER_TCP_FREEZE_PROXY_HPP
