// A fleet breaker's bulkhead, counted per host: its permits live in a host
// segment (host/host_breaker.hpp) that every process of the host using the
// same fleet breaker maps, while the breaker's state machine stays the
// fleet member's local copy (fleet/member.hpp), kept in step through Redis.
// Nothing here talks to Redis: a call takes and frees its permit in shared
// memory, as a host-store breaker's call does.
//
//   FleetBulkhead b;
//   HostBreaker::OpenResult r = b.open(dir + "/" + fleet_bulkhead_file_name(spec, name),
//                                      config, now);
//   FleetBulkhead::Call permits(b, now);
//   Admission a = fleet_breaker.acquire_with(now, lease, permits);
//   ... the call ...
//   b.give_back(a.permit, now);   // with the outcome (record) or release
//
// The segment is a host store segment like any other (its file, lock,
// crash safety, distrust and dead-owner rules are the host store's; the
// permits' rules are bulkhead.hpp's, applied by its
// take_bulkhead_permit()): only its bulkhead block is used. Its
// configuration is the bulkhead's alone (fleet_bulkhead_config()), so a
// change of any other rule argument, which the fleet refuses anyway, never
// makes the file refuse a process.
//
// The bulkhead cannot be fleet-wide without a round trip per call; counted
// per host it is what keeps a host's R workers free.
#ifndef CIRCUITBREAKER_FLEET_FLEET_BULKHEAD_HPP
#define CIRCUITBREAKER_FLEET_FLEET_BULKHEAD_HPP

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "../config.hpp"
#include "../config_identity.hpp"
#include "../percent.hpp"
#include "../permit.hpp"
#include "../snapshot.hpp"
#include "../host/host_breaker.hpp"
#include "../host/store_files.hpp"
#include "keys.hpp"

namespace circuitbreaker {

// What names the Redis data of a fleet breaker, for the processes of one
// host: the server (host and port; the seed nodes of a cluster, in sorted
// order; or the sentinels and the master's name), the database, the prefix
// and the name. Never a password or a user name: the file name made from it
// must not hold a secret, and the credentials do not change which keys a
// breaker has.
inline std::string fleet_bulkhead_identity(const FleetSpec& spec,
                                           const std::string& name) {
  const RedisEndpoint& e = spec.endpoint;
  std::string out = "circuitbreaker fleet bulkhead\n";
  if (e.sentinels) {
    out += "sentinel\n" + e.sentinels->master() + '\n';
    for (const RedisNodeAddress& a : e.sentinels->addresses()) out += a.text() + ',';
  } else if (!e.seeds.empty()) {
    std::vector<std::string> seeds;
    for (const RedisNodeAddress& a : e.seeds) seeds.push_back(a.text());
    std::sort(seeds.begin(), seeds.end());
    out += "seeds\n";
    for (const std::string& s : seeds) out += s + ',';
  } else {
    out += "single\n" + RedisNodeAddress{e.host, e.port}.text();
  }
  out += '\n' + std::to_string(e.db) + '\n' + fleet_key(spec.prefix, name);
  return out;
}

// The file name of a fleet breaker's permits in the host store's default
// directory: "cbf-", 16 hex digits of FNV-1a over fleet_bulkhead_identity(),
// "-", and the name percent-encoded as segment_file_name() writes it, cut
// to keep the whole within 255 bytes. The hash is the identity (two fleets
// with one prefix and name on one host do not share); the name is for
// people. "cbf-" is not "cb-": breaker_store_segments() lists the host
// store's breakers only.
inline std::string fleet_bulkhead_file_name(const FleetSpec& spec,
                                            const std::string& name) {
  const std::string id = fleet_bulkhead_identity(spec, name);
  Fnv1a h;
  h.u64(id.size());
  for (const char c : id) h.byte(static_cast<std::uint8_t>(c));
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h.value()));
  std::string out = std::string("cbf-") + hex + '-';
  append_encoded_name(out, name);
  if (out.size() > 255) out.resize(255);
  return out;
}

#if CIRCUITBREAKER_HAS_STORE_FILES
// Where that file is: this user's default host store directory.
inline std::string fleet_bulkhead_path(const FleetSpec& spec, const std::string& name) {
  return default_store_directory() + "/" + fleet_bulkhead_file_name(spec, name);
}
#endif

// The configuration of a fleet breaker's permits segment: the bulkhead's
// limit, every other argument at its default (they are the fleet's).
// Whether a fleet breaker made with `c` keeps its bulkhead's permits in a
// host segment: it has a bulkhead, and the host can share one (robust
// process-shared mutexes: Linux and the other POSIX systems that have
// them). Elsewhere its permits are counted per process, as documented.
inline bool fleet_bulkhead_shared_by_host(const Config& c) {
  return has_bulkhead(make_settings(c)) && RobustMutex::supported();
}

inline Config fleet_bulkhead_config(const Config& c) {
  Config b;
  b.max_concurrent = c.max_concurrent;
  return b;
}

class FleetBulkhead {
 public:
  FleetBulkhead() noexcept = default;
  FleetBulkhead(const FleetBulkhead&) = delete;
  FleetBulkhead& operator=(const FleetBulkhead&) = delete;

  // Opens (creating it if missing) the segment at `path` for the bulkhead
  // of `config` (fleet_bulkhead_config()), as HostBreaker::open() does,
  // with its checks and refusals.
  HostBreaker::OpenResult open(const std::string& path, const Config& config, Nanos now) {
    HostBreaker::OpenResult r = host_.open(path, fleet_bulkhead_config(config), now);
    if (r.ok()) path_ = path;
    return r;
  }

  const std::string& path() const noexcept { return path_; }
  HostBreaker& host() noexcept { return host_; }
  const HostBreaker& host() const noexcept { return host_; }
  bool healthy() const noexcept { return host_.healthy(); }

  // One call's permits, for BasicBreaker::acquire_with() (bulkhead.hpp's
  // BlockPermits contract).
  class Call {
   public:
    Call(FleetBulkhead& b, Nanos now) noexcept : b_(b), now_(now) {}
    bool limited() const noexcept { return true; }
    bool room() noexcept { return b_.take(now_, held_); }
    void take(Permit& p) const noexcept {
      p.bulk_slot = held_.bulk_slot;
      p.bulk_lease = held_.bulk_lease;
    }
    void unused() noexcept { b_.give_back(held_, now_); }

   private:
    FleetBulkhead& b_;
    Nanos now_;
    Permit held_;
  };

  // Takes a permit into `p` (false: every permit is held, counted as a full
  // rejection; or the segment failed, which take_fault() then says, and
  // nothing was taken).
  bool take(Nanos now, Permit& p) noexcept {
    const bool taken = host_.take_bulkhead_permit(now, p);
    if (note_fault()) {
      p.bulk_lease = 0;  // a scratch copy's
      return false;
    }
    return taken;
  }

  // Gives back the permit `p` holds, if any (once: a stale lease frees
  // nothing).
  void give_back(const Permit& p, Nanos now) noexcept {
    if (p.bulk_lease == 0) return;
    host_.return_bulkhead_permit(p, now);
    note_fault();
  }

  // Puts the host-wide count in `s`: permits held, the limit in effect, full
  // rejections, processes counted for a share.
  void show(Snapshot& s, Nanos now) const noexcept {
    const Snapshot h = host_.snapshot(now);
    s.in_flight = h.in_flight;
    s.max_concurrent = h.max_concurrent;
    s.full_rejections = h.full_rejections;
    s.bulkhead_members = h.bulkhead_members;
  }

  // The worst fault the operations since the last call found (Corrupt, then
  // Busy), as HostBreaker::take_fault() says, and forgets it.
  SegmentFault take_fault() noexcept {
    note_fault();
    const SegmentFault f = fault_;
    fault_ = SegmentFault::None;
    return f;
  }

 private:
  // Keeps the segment's fault for take_fault(); whether there was one.
  bool note_fault() noexcept {
    const SegmentFault f = host_.take_fault();
    if (f > fault_) fault_ = f;
    return f != SegmentFault::None;
  }

  HostBreaker host_;
  std::string path_;
  SegmentFault fault_ = SegmentFault::None;
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_FLEET_FLEET_BULKHEAD_HPP
