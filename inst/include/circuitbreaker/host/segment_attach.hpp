// Creating a segment or attaching to one: one creator initialises, the
// others wait (bounded) and check its layout, configuration and integrity.
#ifndef CIRCUITBREAKER_HOST_SEGMENT_ATTACH_HPP
#define CIRCUITBREAKER_HOST_SEGMENT_ATTACH_HPP

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <thread>

#include "../config.hpp"
#include "../config_fields.hpp"
#include "../config_identity.hpp"
#include "segment_lock.hpp"

namespace circuitbreaker {

enum class SegmentStatus : std::uint8_t {
  Created = 0,      // this call initialised the segment
  Attached = 1,     // someone else had (or just has) initialised it
  WrongLayout = 2,  // made by a build with another layout or API version
  WrongConfig = 3,  // made with another configuration
  TooSmall = 4,     // the mapping is smaller than a segment (or null)
  InitTimeout = 5,  // another process started initialising it and never finished
  Corrupt = 6,      // not a segment (bad magic, init word, slot index or state)
  Unsupported = 7   // no robust process-shared mutex on this platform
};

// A short name of a status, for error classes.
inline const char* segment_status_name(SegmentStatus s) noexcept {
  switch (s) {
    case SegmentStatus::Created: return "created";
    case SegmentStatus::Attached: return "attached";
    case SegmentStatus::WrongLayout: return "wrong_layout";
    case SegmentStatus::WrongConfig: return "wrong_config";
    case SegmentStatus::TooSmall: return "too_small";
    case SegmentStatus::InitTimeout: return "init_timeout";
    case SegmentStatus::Corrupt: return "corrupt";
    case SegmentStatus::Unsupported: return "unsupported";
  }
  return "unknown";
}

inline const char* segment_status_message(SegmentStatus s) noexcept {
  switch (s) {
    case SegmentStatus::Created: return "created a new shared breaker segment";
    case SegmentStatus::Attached: return "attached to an existing shared breaker segment";
    case SegmentStatus::WrongLayout:
      return "the shared segment was made by another version of circuitbreaker "
             "(different layout); remove it or use another name";
    case SegmentStatus::WrongConfig:
      return "the shared segment holds a breaker with another configuration; "
             "attach with the same configuration or use another name";
    case SegmentStatus::TooSmall:
      return "the shared mapping is too small for a breaker segment (truncated?)";
    case SegmentStatus::InitTimeout:
      return "timed out waiting for another process to initialise the shared segment "
             "(it may have died while doing so; remove the segment)";
    case SegmentStatus::Corrupt:
      return "the shared mapping is not a valid breaker segment (bad magic, or a value "
             "out of range in its state)";
    case SegmentStatus::Unsupported:
      return "shared breakers need robust process-shared mutexes, which this "
             "platform lacks";
  }
  return "unknown segment status";
}

// The configuration the segment's creator gave, as its header keeps it (for
// config_difference(): which argument an attacher differs in).
inline StoredConfigValues stored_config_values(const SegmentHeader& h) noexcept {
  StoredConfigValues v{};
  for (std::size_t i = 0; i < kConfigFieldCount; ++i) v[i] = h.config_values[i];
  return v;
}

inline bool segment_ok(SegmentStatus s) noexcept {
  return s == SegmentStatus::Created || s == SegmentStatus::Attached;
}

// A header whose init word says Ready: Corrupt (no magic), WrongLayout
// (made by a build with another layout or API version), else Attached.
inline SegmentStatus ready_header_status(const SegmentHeader& h) noexcept {
  if (h.magic.load(std::memory_order_acquire) != segment_magic_word()) {
    return SegmentStatus::Corrupt;
  }
  if (h.layout_version != kSegmentLayoutVersion ||
      h.layout_check != segment_layout_check() || h.total_size != sizeof(Segment)) {
    return SegmentStatus::WrongLayout;
  }
  return SegmentStatus::Attached;
}

// What a mapped segment file is, read without attaching, waiting or writing
// (for listing a store): TooSmall, Corrupt (not a finished segment, a bad
// slot index, or a committed state that fails valid() for any settings),
// WrongLayout, or Attached (a segment of this layout).
inline SegmentStatus inspect_segment(const void* mapping, std::size_t size) noexcept {
  if (mapping == nullptr || size < sizeof(Segment)) return SegmentStatus::TooSmall;
  const Segment& seg = *static_cast<const Segment*>(mapping);
  if (seg.header.init_state.load(std::memory_order_acquire) !=
      static_cast<std::uint32_t>(InitState::Ready)) {
    return SegmentStatus::Corrupt;
  }
  const SegmentStatus st = ready_header_status(seg.header);
  if (st != SegmentStatus::Attached) return st;
  const bool ok = seg.committed_passes(
      [](const SegmentSlot& slot) noexcept { return slot_valid(slot); });
  return ok ? st : SegmentStatus::Corrupt;
}

// Whether the process that created a segment is alive; nullopt when this
// process cannot tell (the creator is in another pid namespace).
inline std::optional<bool> segment_creator_alive(const SegmentHeader& h) noexcept {
  if (h.creator_pid <= 0 || h.creator_pid_namespace != pid_namespace_id())
    return std::nullopt;
  return !process_gone(static_cast<std::uint32_t>(h.creator_pid));
}

// Initialises the segment at `mapping` (`size` bytes, zero-filled when new,
// aligned as a page) if nobody did, else checks it: layout, configuration,
// integrity. Exactly one of several concurrent callers on a fresh mapping
// gets Created; it initialises the state as BasicBreaker(store, settings, now)
// does. The others wait (sleeping, at most `init_wait`) until it is ready.
// A mapping whose init word and magic are both 0 counts as fresh.
inline SegmentStatus init_or_attach(
    void* mapping, std::size_t size, const Config& config, const Settings& settings,
    Nanos now, ProcessId self,
    std::chrono::nanoseconds init_wait = std::chrono::seconds(2)) noexcept {
  if (!RobustMutex::supported()) return SegmentStatus::Unsupported;
  if (mapping == nullptr || size < sizeof(Segment)) return SegmentStatus::TooSmall;
  if (reinterpret_cast<std::uintptr_t>(mapping) % alignof(Segment) != 0) {
    return SegmentStatus::Corrupt;
  }
  Segment& seg = *static_cast<Segment*>(mapping);
  SegmentHeader& h = seg.header;
  const std::uint64_t magic = segment_magic_word();
  const ConfigValues values = config_values(config);
  const std::uint64_t cfg_hash = config_hash(values);
  const std::uint64_t this_boot = boot_id();

  // Initialises the segment: only ever called by the one process that moved
  // the init word to Initialising.
  const auto initialise = [&]() noexcept -> SegmentStatus {
    h.layout_version = kSegmentLayoutVersion;
    h.layout_check = segment_layout_check();
    h.total_size = sizeof(Segment);
    h.config_hash = cfg_hash;
    h.creator_pid = static_cast<std::int64_t>(self);
    h.creator_pid_namespace = pid_namespace_id();
    h.boot = this_boot;
    h.created_at = now;
    for (std::size_t i = 0; i < kConfigFieldCount; ++i) {
      h.config_values[i] = values[i];
    }
    std::memset(static_cast<void*>(&seg.control), 0,
                sizeof(Segment) - offsetof(Segment, control));
    if (seg.control.mutex.init() != 0) {
      h.init_state.store(0, std::memory_order_release);
      return SegmentStatus::Unsupported;
    }
    { SharedBreaker init(SegmentStore(seg, settings), settings, now); }
    h.magic.store(magic, std::memory_order_release);
    h.init_state.store(static_cast<std::uint32_t>(InitState::Ready),
                       std::memory_order_release);
    return SegmentStatus::Created;
  };
  constexpr auto kInitialising = static_cast<std::uint32_t>(InitState::Initialising);
  constexpr auto kReady = static_cast<std::uint32_t>(InitState::Ready);

  // A few rounds: a takeover (a dead creator, a segment of another boot)
  // starts the protocol over once.
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::uint32_t st = h.init_state.load(std::memory_order_acquire);
    if (st == 0) {
      if (h.magic.load(std::memory_order_acquire) != 0) {
        // The creator writes the magic only after taking the init word.
        st = h.init_state.load(std::memory_order_acquire);
        if (st == 0) return SegmentStatus::Corrupt;
      } else if (h.init_state.compare_exchange_strong(st, kInitialising,
                                                      std::memory_order_acq_rel)) {
        return initialise();
      }
      // Lost the race: `st` holds the winner's word.
    }

    const auto deadline = std::chrono::steady_clock::now() + init_wait;
    bool taken_over = false;
    for (int round = 0; st == kInitialising; ++round) {
      const std::uint64_t m = h.magic.load(std::memory_order_acquire);
      if (m != 0 && m != magic) return SegmentStatus::Corrupt;
      if (std::chrono::steady_clock::now() >= deadline) {
        // The creator died while initialising (its pid is written right
        // after it took the init word; 0: it died before that): start over.
        // Only a creator of this pid namespace can be judged.
        const std::int64_t pid = h.creator_pid;
        const bool judged = pid == 0 || h.creator_pid_namespace == pid_namespace_id();
        const bool dead = pid == 0 || process_gone(static_cast<std::uint32_t>(pid));
        std::uint32_t expected = kInitialising;
        if (!judged || !dead) return SegmentStatus::InitTimeout;
        h.magic.store(0, std::memory_order_release);
        h.init_state.compare_exchange_strong(expected, 0, std::memory_order_acq_rel);
        taken_over = true;
        break;
      }
      if (round < 64) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      st = h.init_state.load(std::memory_order_acquire);
    }
    if (taken_over) continue;
    if (st != kReady) return SegmentStatus::Corrupt;
    if (const SegmentStatus ready = ready_header_status(h);
        ready != SegmentStatus::Attached) {
      return ready;
    }
    if (h.boot != this_boot) {
      // Made before this boot: nobody of this boot uses it (whoever attached
      // first would have initialised it again), its times and its mutex are
      // meaningless. One process initialises it afresh.
      std::uint32_t expected = kReady;
      if (h.init_state.compare_exchange_strong(expected, kInitialising,
                                               std::memory_order_acq_rel)) {
        return initialise();
      }
      continue;  // another process does it: wait for it
    }
    if (h.config_hash != cfg_hash) return SegmentStatus::WrongConfig;
    const bool ok = seg.committed_passes([&settings](const SegmentSlot& slot) noexcept {
      return slot_valid(slot, settings);
    });
    return ok ? SegmentStatus::Attached : SegmentStatus::Corrupt;
  }
  return SegmentStatus::InitTimeout;
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HOST_SEGMENT_ATTACH_HPP
