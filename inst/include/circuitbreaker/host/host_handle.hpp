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

class HostHandle final : public AnyBreaker {
 public:
  // `host` is open (HostBreaker::open() succeeded); `path` is its segment.
  HostHandle(std::unique_ptr<HostBreaker> host, std::string path) noexcept
      : AnyBreaker(true), host_(std::move(host)), path_(std::move(path)) {}

  HostBreaker& host() noexcept { return *host_; }
  const HostBreaker& host() const noexcept { return *host_; }

  const char* store_kind() const noexcept override { return "host"; }
  const std::string& location() const noexcept override { return path_; }
  const Settings& settings() const noexcept override { return host_->settings(); }
  Admission acquire(Nanos now, Nanos probe_lease) override {
    return host_->acquire(now, probe_lease);
  }
  bool record(const Permit& p, Outcome o, Nanos now, Nanos open_for) override {
    return host_->record(p, o, now, open_for);
  }
  void release(const Permit& p, Nanos now) override { host_->release(p, now); }
  bool note(Outcome o, Nanos now) override { return host_->note(o, now); }
  void reset(Nanos now) override { host_->reset(now); }
  void force_open(Nanos now) override { host_->force_open(now); }
  void disable(Nanos now) override { host_->disable(now); }
  // The configuration is the segment's identity (host_breaker.hpp).
  bool reconfigure(const Settings&, Nanos) override { return false; }
  Snapshot snapshot(Nanos now) const override { return host_->snapshot(now); }
  std::size_t transitions_since(std::uint64_t after, Transition* out,
                                std::size_t max) const override {
    return host_->transitions_since(after, out, max);
  }
  std::size_t history(Nanos now, ActivityBucket* out) override {
    return host_->history(now, out);
  }
  HealthClaim claim_health_check(Nanos now) override {
    return host_->claim_health_check(now);
  }
  HealthResult health_result(const HealthClaim& c, bool passed, Nanos now) override {
    return host_->health_result(c, passed, now);
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
