// The host store behind the handle a binding holds (any_breaker.hpp): a
// HostBreaker that is open on its segment, and the segment's path for
// messages. The segment's faults (host/segment_lock.hpp: a lock still held
// after its bound, a segment someone overwrote) become StoreFaults, which
// the binding asks for after every operation: a result computed on the
// lock's scratch copy is never used.
//
// This header is not part of circuitbreaker.hpp (see host/segment_layout.hpp).
#ifndef CIRCUITBREAKER_HOST_HOST_HANDLE_HPP
#define CIRCUITBREAKER_HOST_HOST_HANDLE_HPP

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "../any_breaker.hpp"
#include "../clock.hpp"
#include "../store_info.hpp"
#include "host_breaker.hpp"

namespace circuitbreaker {

// A segment's fault as a store reports it (any_breaker.hpp): Busy after a
// wait of `waited` for its lock, or Corrupt.
inline StoreFault store_fault_of(SegmentFault f,
                                 std::chrono::nanoseconds waited) noexcept {
  StoreFault out;
  switch (f) {
    case SegmentFault::None: break;
    case SegmentFault::Busy:
      out.kind = StoreFaultKind::Busy;
      out.waited = static_cast<Nanos>(waited.count());
      break;
    case SegmentFault::Corrupt: out.kind = StoreFaultKind::Corrupt; break;
  }
  return out;
}

class HostHandle final : public ForwardingHandle<HostHandle, HostBreaker> {
 public:
  // `host` is open (HostBreaker::open() succeeded); `path` is its segment.
  HostHandle(std::unique_ptr<HostBreaker> host, std::string path) noexcept
      : ForwardingHandle(true), host_(std::move(host)), path_(std::move(path)) {}

  HostBreaker& host() noexcept { return *host_; }
  const HostBreaker& host() const noexcept { return *host_; }
  HostBreaker& inner() noexcept { return *host_; }
  const HostBreaker& inner() const noexcept { return *host_; }

  const char* store_kind() const noexcept override { return "host"; }
  const std::string& location() const noexcept override { return path_; }
  // The configuration is the segment's identity (host_breaker.hpp).
  bool reconfigure(const Settings&, Nanos) override { return false; }

  // The segment: its file, who made it and when, its commits, the owners
  // whose dead probes or permits were freed, and whether owners are tracked
  // (host_breaker.hpp).
  StoreInfo store_info() override {
    const Nanos age = SteadyClock::now() - host_->header().created_at;
    StoreInfo info;
    info.text("path", path_)
        .number("creator_pid", static_cast<double>(host_->header().creator_pid))
        .number("seconds_since_created", nanos_to_seconds(age))
        .number("commits", static_cast<double>(host_->commits()))
        .number("recovered_owners", static_cast<double>(host_->recoveries()))
        .flag("tracks_probe_owners", host_->tracks_owners());
    return info;
  }

  bool store_usable() const noexcept override { return host_->healthy(); }
  StoreFault store_fault() noexcept override {
    return store_fault_of(host_->take_fault(), host_->lock_wait());
  }

 private:
  std::unique_ptr<HostBreaker> host_;
  std::string path_;
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HOST_HOST_HANDLE_HPP
