// A breaker shared by every process on a host: the host store.
//
// Every process that opens the same segment file (host/segment_layout.hpp) with the same
// configuration runs the one state machine (breaker.hpp) on one state block:
//
//   // dir: a checked store directory (host/store_files.hpp), by default
//   // /dev/shm/circuitbreaker-<euid>
//   HostBreaker hb;
//   HostBreaker::OpenResult r = hb.open(dir + "/cb-inventory", config, now);
//   if (!r.ok()) ...;   // r.status, r.error (errno), r.differing_field,
//                       // r.untrusted (a file or directory not ours)
//   Admission a = hb.acquire(now);
//   ... the call ...
//   hb.record(a.permit, outcome, now);
//
// What this adds to a SharedBreaker:
//   - Admission without the lock. In CLOSED (not ramping), in OPEN before the
//     open period ends, FORCED_OPEN and DISABLED, acquire() copies five
//     fields of the committed state under the segment's seqlock and lets the
//     core decide (admission.hpp's admit_without_writing()): no system call, no
//     lock, no write to shared memory but, for a rejection, one atomic
//     increment that the next locked operation folds into the totals.
//     Everything else (HALF_OPEN, the end of an open period, ramp-up) takes
//     the lock, as does every record().
//   - Bulkhead permits (bulkhead.hpp) are taken under the lock, owned by this
//     process's id like probes, and freed the same way when their owner dies
//     (by the next admission that finds the bulkhead full). A share counts
//     the processes that acquired through the segment and have not closed
//     it or died.
//   - Probes of dead processes. A probe's slot records its owner's process
//     id; when half-open is full, slots whose owner has died (SIGKILL while it
//     held the probe) are freed at once, so the breaker probes again without
//     waiting. A process in another pid namespace than the segment's creator
//     cannot judge the creator's pids: its probes are untracked, and a
//     synchronous one gets recovery_timeout as its lease instead, so that it
//     still cannot hold HALF_OPEN forever.
//   - Distrust. The segment is input that any process mapping it can write:
//     the lock-free path checks the fields it copies, every locked operation
//     checks the mutex, the control words and the state it is about to use
//     (host/segment_layout.hpp's SegmentLock), and no wait for the lock lasts longer
//     than lock_wait(). take_fault() then says Busy or Corrupt, and the
//     caller reports that instead of the operation's result.
//   - The clock. Every process reads the host's monotonic clock
//     (SteadyClock: CLOCK_MONOTONIC on Linux, one clock for the whole host).
//
// The configuration is the segment's identity: open() refuses a segment made
// with other rule arguments and names the first that differs. reconfigure()
// is therefore not offered: every process would have to agree on the change.
//
// This header is not part of circuitbreaker.hpp (see host/segment_layout.hpp).
#ifndef CIRCUITBREAKER_HOST_BREAKER_HPP
#define CIRCUITBREAKER_HOST_BREAKER_HPP

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "../admission.hpp"
#include "../config_identity.hpp"
#include "../percent.hpp"
#include "segment_attach.hpp"
#include "segment_mapping.hpp"

namespace circuitbreaker {

// The file name of a breaker's segment in a store directory: "cb-" and the
// name, with every byte but [A-Za-z0-9_.-] written %XX (so any name maps to
// one flat file name, and back). Empty when the result would be longer than
// file systems allow (255 bytes).
inline std::string segment_file_name(std::string_view name) {
  std::string out = "cb-";
  append_encoded_name(out, name);
  if (out.size() > 255) out.clear();
  return out;
}

// The breaker name a segment file name stands for, or nullopt when `file`
// is not such a name (not exactly as segment_file_name() writes it).
inline std::optional<std::string> segment_breaker_name(std::string_view file) {
  if (file.size() < 3 || file.substr(0, 3) != "cb-") return std::nullopt;
  std::string out;
  if (!percent_decode(file.substr(3), out)) return std::nullopt;
  // Only the one spelling segment_file_name() writes: "cb-%61", "cb-%2f" or
  // "cb-a b" would otherwise stand for a breaker ("a", "/", "a b") whose
  // segment is another file.
  if (segment_file_name(out) != file) return std::nullopt;
  return out;
}

class HostBreaker {
 public:
  struct OpenResult {
    SegmentStatus status = SegmentStatus::Corrupt;
    int error = 0;             // an errno from opening or mapping the file; 0: none
    int differing_field = -1;  // WrongConfig: the kConfigFields index that differs
    // WrongConfig: that field's value as this process gave it and as the
    // segment's creator did (config_value_text()), for the message.
    std::string given_value, stored_value;
    // The file or directory refused as not ours, and why (host/store_files.hpp);
    // then `error` is 0 and `status` means nothing.
    StoreRefusal untrusted;
    bool ok() const noexcept {
      return error == 0 && !untrusted.refused() && segment_ok(status);
    }
  };

  HostBreaker() noexcept = default;
  ~HostBreaker() { close(); }
  HostBreaker(const HostBreaker&) = delete;
  HostBreaker& operator=(const HostBreaker&) = delete;

  // Opens the segment file at `path`, creating (exclusively) and
  // initialising it if it is missing or empty, and attaches to it. A file or
  // directory that is not ours is refused (r.untrusted says which and why).
  // On failure nothing stays open.
  OpenResult open(const std::string& path, const Config& config, Nanos now) {
    OpenResult r;
    close();
    const Settings settings = make_settings(config);
    const int err = mapping_.open_file(path.c_str(), sizeof(Segment), true, &r.untrusted);
    if (err == kStoreUntrusted) return r;
    r.error = err;
    if (r.error != 0) return r;
    r.status = init_or_attach(mapping_.data(), mapping_.size(), config, settings, now,
                              current_process());
    if (r.status == SegmentStatus::WrongConfig) {
      ConfigDifference d = config_difference(
          config_values(config), stored_config_values(mapping_.segment()->header));
      r.differing_field = d.field;
      r.given_value = std::move(d.given);
      r.stored_value = std::move(d.stored);
    }
    if (!r.ok()) {
      mapping_.close();
      return r;
    }
    const std::uint64_t ns = pid_namespace_id();
    tracks_owners_ = ns != 0 && ns == mapping_.segment()->header.creator_pid_namespace;
    breaker_.emplace(typename SharedBreaker::Attach{},
                     SegmentStore(*mapping_.segment(), settings), settings);
    breaker_->store().lock().set_wait(lock_wait_);
    return r;
  }

  // Leaves the bulkhead's members first (a share counts the processes that
  // use the breaker), when this process was counted.
  void close() noexcept {
    if (breaker_ && tracks_owners_ && has_bulkhead(settings()) && healthy()) {
      leave_bulkhead(*breaker_, current_process_id());
      (void)take_fault();
    }
    breaker_.reset();
    mapping_.close();
  }

  bool is_open() const noexcept { return breaker_.has_value(); }

  // Whether the segment still looks like one (nobody overwrote its header)
  // and its lock has never been found unrecoverable. A broken breaker must
  // not be used: its results are a private scratch copy's.
  bool healthy() const noexcept {
    if (!breaker_) return false;
    const Segment& seg = *mapping_.segment();
    return seg.header.magic.load(std::memory_order_relaxed) == segment_magic_word() &&
           seg.header.init_state.load(std::memory_order_relaxed) ==
               static_cast<std::uint32_t>(InitState::Ready) &&
           lock_failures() == 0;
  }

  const Settings& settings() const noexcept { return breaker_->settings(); }

  // What the operations since the last call found wrong with the segment
  // (the worst: Corrupt, then Busy), and forgets it. The results of an
  // operation that found a fault are a private scratch copy's: the caller
  // reports the fault instead of using them. Corrupt also makes healthy()
  // false for good; Busy does not (the next operation tries the lock again).
  SegmentFault take_fault() noexcept {
    return breaker_ ? breaker_->store().lock().take_fault() : SegmentFault::None;
  }

  // The bound of every wait for the segment's lock (RobustMutex::kDefaultWait
  // unless set; kept across open()).
  void set_lock_wait(std::chrono::nanoseconds w) noexcept {
    lock_wait_ = w;
    if (breaker_) breaker_->store().lock().set_wait(w);
  }
  std::chrono::nanoseconds lock_wait() const noexcept { return lock_wait_; }

  Admission acquire(Nanos now, Nanos probe_lease = kNever) noexcept {
    Segment& seg = *mapping_.segment();
    AdmissionView v;
    if (seg.read_admission(v)) {
      if (std::optional<Admission> a = admit_without_writing(v, now)) {
        if (!a->permitted) {
          seg.fast_rejected.fetch_add(1, std::memory_order_relaxed);
          return *a;
        }
        // A bulkhead's permit is taken under the lock (below).
        if (!has_bulkhead(settings())) return *a;
      }
    }
    if (!tracks_owners_) {
      // Nobody could free this process's probe if it died: a synchronous
      // call (kNever or any negative lease) gives no bound (probe_hold()).
      const bool unbounded = probe_lease == kNever || probe_lease < 0;
      return breaker_->acquire(
          now,
          probe_hold(settings(),
                     unbounded ? std::nullopt : std::optional<Nanos>(probe_lease)),
          0);
    }
    // Dead owners' slots are freed inside this one decision (when half-open
    // is full), so the call counts as rejected only if it is.
    return breaker_->acquire(now, probe_lease, current_process_id(), process_gone);
  }

  // The bulkhead alone (bulkhead.hpp's take_bulkhead_permit()), for calls
  // that another breaker decides (a fleet breaker's, fleet/fleet_bulkhead.hpp):
  // a permit owned by this process, as acquire() takes one, and freed the
  // same way when its owner dies.
  bool take_bulkhead_permit(Nanos now, Permit& p) noexcept {
    if (!tracks_owners_) {
      return circuitbreaker::take_bulkhead_permit(*breaker_, now, p, 0);
    }
    return circuitbreaker::take_bulkhead_permit(*breaker_, now, p, current_process_id(),
                                                process_gone);
  }
  void return_bulkhead_permit(const Permit& p, Nanos now) noexcept {
    circuitbreaker::return_bulkhead_permit(*breaker_, p, now);
  }

  bool record(const Permit& p, Outcome o, Nanos now, Nanos open_for = -1) noexcept {
    return breaker_->record(p, o, now, open_for);
  }
  void release(const Permit& p, Nanos now) noexcept { breaker_->release(p, now); }
  bool note(Outcome o, Nanos now) noexcept { return breaker_->note(o, now); }
  void reset(Nanos now) noexcept { breaker_->reset(now); }
  void force_open(Nanos now) noexcept { breaker_->force_open(now); }
  void disable(Nanos now) noexcept { breaker_->disable(now); }

  // The host-wide health-check lease (health.hpp), taken under the segment's
  // lock and held in this process's name: one process of the host runs each
  // check; a holder that dies holds it for one interval at most.
  HealthClaim claim_health_check(Nanos now) noexcept {
    return breaker_->claim_health_check(now, current_process_id());
  }
  HealthResult health_result(const HealthClaim& c, bool passed, Nanos now) noexcept {
    return breaker_->health_result(c, passed, now);
  }

  Snapshot snapshot(Nanos now) const noexcept { return breaker_->snapshot(now); }
  std::size_t transitions_since(std::uint64_t after, Transition* out,
                                std::size_t max) const noexcept {
    return breaker_->transitions_since(after, out, max);
  }
  // The pending lock-free rejections are folded in first, so that they show.
  std::size_t history(Nanos now, ActivityBucket* out) noexcept {
    return breaker_->history(now, out);
  }

  // About the segment.
  const SegmentHeader& header() const noexcept { return mapping_.segment()->header; }
  std::uint64_t commits() const noexcept {
    return mapping_.segment()->control.seq.load(std::memory_order_relaxed) / 2;
  }
  std::uint64_t recoveries() const noexcept {
    SegmentLock& l = breaker_->store().lock();
    LockGuard<SegmentLock> guard(l);  // written under the lock, read under it
    return l.failing() ? 0 : mapping_.segment()->control.recoveries;
  }
  std::uint64_t lock_failures() const noexcept {
    return breaker_->store().lock().failures();
  }
  bool tracks_owners() const noexcept { return tracks_owners_; }

  static ProcessId current_process() noexcept {
#if CIRCUITBREAKER_HAS_POSIX_MAP
    return ::getpid();
#else
    return 0;
#endif
  }

 private:
  static std::uint32_t current_process_id() noexcept {
    return static_cast<std::uint32_t>(current_process());
  }
  SegmentMapping mapping_;
  std::optional<SharedBreaker> breaker_;
  bool tracks_owners_ = false;
  std::chrono::nanoseconds lock_wait_ = RobustMutex::kDefaultWait;
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HOST_BREAKER_HPP
