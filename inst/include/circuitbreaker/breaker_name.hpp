// The one rule for the name of a shared breaker (host and fleet stores).
//
// A shared breaker's name is how processes find each other: the host store
// turns it into a file name ("cb-" and the name with every byte but
// [A-Za-z0-9_.-] written %XX, host/host_breaker.hpp's segment_file_name()), and
// the fleet store into Redis keys. File names are at most 255 bytes, so a
// name whose every byte must be escaped fits when 3 + 3 * N <= 255, that is
// N <= 84. The limit is 80 bytes for every shared store: simple to state
// ("at most 80 bytes"), the same for host and fleet, and true whatever the
// bytes are, rather than a limit that depends on how many need escaping.
// A breaker of the process store may have a longer name (kMaxNameBytes).
#ifndef CIRCUITBREAKER_BREAKER_NAME_HPP
#define CIRCUITBREAKER_BREAKER_NAME_HPP

#include <cstddef>
#include <string_view>

namespace circuitbreaker {

// The longest name (in bytes, as UTF-8) of a host- or fleet-shared breaker.
inline constexpr std::size_t kMaxSharedNameBytes = 80;
static_assert(3 + 3 * kMaxSharedNameBytes <= 255,
              "a segment file name must fit in 255 bytes for every name");

// The longest name of a breaker of the process store: room for any
// "host:port" key of breaker_for() (a host name has at most 253 bytes), far
// below what bindings can keep as a key (R: 10,000 bytes).
inline constexpr std::size_t kMaxNameBytes = 1000;

// The longest name a breaker may have: `shared` for the host and fleet
// stores.
constexpr std::size_t max_name_bytes(bool shared) noexcept {
  return shared ? kMaxSharedNameBytes : kMaxNameBytes;
}

// nullptr when `name` may name a breaker (`shared`: of the host or fleet
// store), else what it must be (a message fragment: "a non-empty name of
// ...").
inline const char* name_problem(std::string_view name, bool shared) noexcept {
  if (!name.empty() && name.size() <= max_name_bytes(shared) &&
      name.find('\0') == std::string_view::npos) {
    return nullptr;
  }
  static_assert(kMaxSharedNameBytes == 80 && kMaxNameBytes == 1000,
                "say the new limits in the messages");
  return shared ? "a non-empty name of at most 80 bytes (UTF-8) for a shared breaker"
                : "a non-empty name of at most 1000 bytes (UTF-8)";
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_BREAKER_NAME_HPP
