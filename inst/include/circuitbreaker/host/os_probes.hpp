// What the host store asks the operating system: which pid namespace and
// which boot this is, and whether a process is gone. Portable: where POSIX is
// missing, CIRCUITBREAKER_HAS_POSIX_MAP is 0 and the answers are "unknown".
#ifndef CIRCUITBREAKER_HOST_OS_PROBES_HPP
#define CIRCUITBREAKER_HOST_OS_PROBES_HPP

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <string_view>

#include "../config_identity.hpp"

#if defined(__unix__) || defined(__APPLE__)
#define CIRCUITBREAKER_HAS_POSIX_MAP 1
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#else
#define CIRCUITBREAKER_HAS_POSIX_MAP 0
#endif

namespace circuitbreaker {

#if CIRCUITBREAKER_HAS_POSIX_MAP
using ProcessId = pid_t;
#else
using ProcessId = int;
#endif

// An identity of this process's pid namespace (the inode of
// /proc/self/ns/pid), 0 where unknown. Process ids name the owners of probes
// (to free a dead process's probe); they mean something only to processes in
// the same namespace.
inline std::uint64_t pid_namespace_id() noexcept {
#if defined(__linux__)
  struct stat sb;
  if (::stat("/proc/self/ns/pid", &sb) == 0) return static_cast<std::uint64_t>(sb.st_ino);
#endif
  return 0;
}

// Whether process `pid` is gone: no such process, or a zombie (killed, not
// yet reaped by its parent). Reads /proc; only called when half-open is full.
inline bool process_gone(std::uint32_t pid) noexcept {
#if CIRCUITBREAKER_HAS_POSIX_MAP
  if (::kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
#if defined(__linux__)
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%u/stat", static_cast<unsigned>(pid));
  if (std::FILE* f = std::fopen(path, "r")) {
    char buf[512];
    const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = '\0';
    // "pid (comm) S ...": the state follows the last ')'.
    const std::string_view line(buf, n);
    const std::size_t close = line.rfind(')');
    if (close != std::string_view::npos && close + 2 < line.size()) {
      const char st = line[close + 2];
      return st == 'Z' || st == 'X';
    }
  }
#endif
  return false;
#else
  (void)pid;
  return false;
#endif
}

// An identity of the current boot of this host (a hash of Linux's
// /proc/sys/kernel/random/boot_id), 0 where unknown. A segment file kept on
// disk outlives a reboot, but the times in it (the monotonic clock) and its
// mutex (owned by a thread of the old boot, which no kernel will ever declare
// dead) do not: a segment from another boot is initialised again.
inline std::uint64_t boot_id() noexcept {
#if defined(__linux__)
  if (std::FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char buf[64];
    const std::size_t n = std::fread(buf, 1, sizeof buf, f);
    std::fclose(f);
    Fnv1a h;
    for (std::size_t i = 0; i < n; ++i) h.byte(static_cast<std::uint8_t>(buf[i]));
    return n > 0 ? h.value() : 0;
  }
#endif
  return 0;
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HOST_OS_PROBES_HPP
