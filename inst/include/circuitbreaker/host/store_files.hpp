// Which files and directories the host store trusts, and how it opens them.
//
// A host store lives in a directory that other users may share (/dev/shm and
// /tmp are world-writable). Anything another user can put there (a symbolic
// link to one of our files, a dangling link, an empty file of theirs, a copy
// of a segment, a FIFO) must never be followed, adopted or written. The rules
// live here, in one small POSIX header of their own, so that host/segment_layout.hpp
// (the segment's layout and protocol) and host/host_breaker.hpp (the breaker)
// only call them:
//
//   - A segment file is created exclusively (O_CREAT|O_EXCL|O_NOFOLLOW, mode
//     0600). An existing one is opened with O_NOFOLLOW|O_NONBLOCK (a link is
//     refused, a FIFO cannot block us) and accepted only when fstat() on the
//     open descriptor (the check of record, so that nothing can be swapped in
//     between) says: a regular file, owned by the effective user, with no
//     permission bit for group or others, and one name (no hard link to it;
//     segment_file_problem()).
//   - A store directory, and every directory above it, must be owned by the
//     effective user or root, and, when group or others may write in it, have
//     the sticky bit (as /dev/shm and /tmp do): then nobody else can rename,
//     remove or replace what we put there. A symbolic link on the way must be
//     owned by the effective user or root too (store_directory_problem(),
//     check_store_directory()).
//   - The default directory is per user, /dev/shm/circuitbreaker-<euid>,
//     created 0700. Another user can create that name first, so an existing
//     one is accepted only when it is a real directory (not a link) owned by
//     the effective user, without write permission for group or others
//     (private_directory_problem(), ensure_private_directory()).
//
// A refusal names the file or directory and says why, in words shown to the
// user as they are (StoreRefusal).
#ifndef CIRCUITBREAKER_HOST_STORE_FILES_HPP
#define CIRCUITBREAKER_HOST_STORE_FILES_HPP

#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#define CIRCUITBREAKER_HAS_STORE_FILES 1
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#else
#define CIRCUITBREAKER_HAS_STORE_FILES 0
#endif

namespace circuitbreaker {

// Why a store file or directory is not used: the path refused and the reason
// ("it is a symbolic link"). An empty reason: nothing was refused.
struct StoreRefusal {
  std::string path;
  std::string reason;
  bool refused() const noexcept { return !reason.empty(); }
};

// What the opening functions below (and SegmentMapping's) return when they
// refuse a file or directory, in place of an errno value (which are > 0).
inline constexpr int kStoreUntrusted = -1;

#if CIRCUITBREAKER_HAS_STORE_FILES

// "0644": the permission bits (and set-id and sticky bits) in octal.
inline std::string store_mode_text(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// What kind of file `mode` is, for a reason ("a FIFO").
inline const char* store_file_kind(mode_t mode) noexcept {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "a special file";
}

inline std::string store_owner_text(uid_t owner, uid_t euid) {
  return "it is owned by uid " + std::to_string(owner) +
         ", not by this process's user (uid " + std::to_string(euid) + ")";
}

// The verdict on a segment file (from fstat() of its open descriptor, or
// lstat()): empty when it is ours, else why not.
inline std::string segment_file_problem(const struct stat& sb, uid_t euid) {
  if (S_ISLNK(sb.st_mode)) return "it is a symbolic link";
  if (!S_ISREG(sb.st_mode)) {
    return std::string("it is ") + store_file_kind(sb.st_mode) + ", not a regular file";
  }
  if (sb.st_uid != euid) return store_owner_text(sb.st_uid, euid);
  if ((sb.st_mode & 077) != 0) {
    return "its mode " + store_mode_text(sb.st_mode) +
           " has group/other permission bits (it must be 0600)";
  }
  // A second name for one of our segments (a hard link someone made where
  // the kernel allows it) would make two breakers share one state.
  if (sb.st_nlink != 1) {
    return "it has " + std::to_string(sb.st_nlink) + " hard links (a segment has one)";
  }
  return std::string();
}

// The verdict on a store directory (or a directory above it): empty when
// nobody but this user and root can replace what is in it.
inline std::string store_directory_problem(const struct stat& sb, uid_t euid) {
  if (!S_ISDIR(sb.st_mode)) {
    return std::string("it is ") + store_file_kind(sb.st_mode) + ", not a directory";
  }
  if (sb.st_uid != euid && sb.st_uid != 0) {
    return store_owner_text(sb.st_uid, euid) + " or root";
  }
  if ((sb.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (sb.st_mode & S_ISVTX) == 0) {
    return "its mode " + store_mode_text(sb.st_mode) +
           " lets group or others write in it without the sticky bit";
  }
  return std::string();
}

// The verdict on the per-user directory (from lstat(), or fstat() of a
// descriptor opened with O_NOFOLLOW).
inline std::string private_directory_problem(const struct stat& sb, uid_t euid) {
  if (S_ISLNK(sb.st_mode)) return "it is a symbolic link";
  if (!S_ISDIR(sb.st_mode)) {
    return std::string("it is ") + store_file_kind(sb.st_mode) + ", not a directory";
  }
  if (sb.st_uid != euid) return store_owner_text(sb.st_uid, euid);
  if ((sb.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return "its mode " + store_mode_text(sb.st_mode) +
           " lets group or others write in it";
  }
  return std::string();
}

namespace store_files_detail {

inline int refuse(StoreRefusal* out, const std::string& path, std::string reason) {
  if (out != nullptr) {
    out->path = path;
    out->reason = std::move(reason);
  }
  return kStoreUntrusted;
}

// `path` made absolute (against the working directory); "" on failure.
inline std::string absolute(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  std::vector<char> buf(PATH_MAX + 1);
  if (::getcwd(buf.data(), buf.size()) == nullptr) return std::string();
  std::string out = buf.data();
  if (!path.empty()) out += "/" + path;
  return out;
}

// Walks the directories of absolute `path`, from "/" down, with lstat():
// each directory must pass store_directory_problem(); a symbolic link must
// be owned by `euid` or root (when `links_allowed`; else it is refused), and
// what it points to passes as a directory.
inline int walk(const std::string& path, uid_t euid, bool links_allowed,
                StoreRefusal* out) {
  std::vector<std::string> prefixes{"/"};
  std::string current;
  for (std::size_t i = 0; i < path.size();) {
    std::size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    const std::string part = path.substr(i, j - i);
    if (!part.empty() && part != ".") {
      current += "/" + part;
      prefixes.push_back(current);
    }
    i = j + 1;
  }
  for (const std::string& prefix : prefixes) {
    struct stat sb;
    if (::lstat(prefix.c_str(), &sb) != 0) return errno;
    if (S_ISLNK(sb.st_mode)) {
      if (!links_allowed) return refuse(out, prefix, "it is a symbolic link");
      if (sb.st_uid != euid && sb.st_uid != 0) {
        return refuse(out, prefix,
                      "it is a symbolic link owned by uid " + std::to_string(sb.st_uid) +
                          ", not by this process's user (uid " + std::to_string(euid) +
                          ") or root");
      }
      if (::stat(prefix.c_str(), &sb) != 0) return errno;
    }
    std::string problem = store_directory_problem(sb, euid);
    if (!problem.empty()) return refuse(out, prefix, std::move(problem));
  }
  return 0;
}

}  // namespace store_files_detail

// Checks a store directory: `path` (relative to the working directory when
// not absolute) and every directory above it, as written and as resolved
// (realpath), by the rules above. Returns 0, an errno value (a directory is
// missing or cannot be examined), or kStoreUntrusted with `out` saying which
// path and why. The verdict lasts: no other user can change a directory
// that passed.
inline int check_store_directory(const std::string& path, StoreRefusal* out = nullptr) {
  const uid_t euid = ::geteuid();
  const std::string abs = store_files_detail::absolute(path);
  if (abs.empty()) return errno != 0 ? errno : EINVAL;
  if (const int err = store_files_detail::walk(abs, euid, true, out)) return err;
  char* real = ::realpath(abs.c_str(), nullptr);
  if (real == nullptr) return errno;
  const std::string resolved = real;
  ::free(real);
  return store_files_detail::walk(resolved, euid, false, out);
}

// The default store directory of this process's effective user.
inline std::string default_store_directory() {
  return "/dev/shm/circuitbreaker-" + std::to_string(::geteuid());
}

// Makes sure the per-user directory `path` exists and is ours: creates it
// (mode 0700) when missing, after checking the directories above it;
// accepts an existing one only when private_directory_problem() finds
// nothing (checked on a descriptor opened with O_NOFOLLOW). Returns 0, an
// errno value, or kStoreUntrusted (with `out`).
inline int ensure_private_directory(const std::string& path,
                                    StoreRefusal* out = nullptr) {
  const std::size_t slash = path.find_last_of('/');
  if (path.empty() || path[0] != '/' || slash == std::string::npos ||
      slash + 1 == path.size()) {
    return EINVAL;
  }
  const std::string parent = slash == 0 ? std::string("/") : path.substr(0, slash);
  if (const int err = check_store_directory(parent, out)) return err;
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) return errno;
  const uid_t euid = ::geteuid();
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat sb;
  if (fd < 0) {
    const int err = errno;
    // A link (ELOOP) or not a directory (ENOTDIR): say which.
    if (::lstat(path.c_str(), &sb) == 0) {
      std::string problem = private_directory_problem(sb, euid);
      if (!problem.empty())
        return store_files_detail::refuse(out, path, std::move(problem));
    }
    return err;
  }
  const int st = ::fstat(fd, &sb);
  const int err = errno;
  ::close(fd);
  if (st != 0) return err;
  std::string problem = private_directory_problem(sb, euid);
  if (!problem.empty()) return store_files_detail::refuse(out, path, std::move(problem));
  return 0;
}

// Opens the segment file `name` in the directory open as `dirfd` (`path` is
// its full path, for a refusal). With `create`, a missing file is created
// exclusively (0600); `writable` opens it read-write, else read-only. A file
// that exists is opened without following a link and without blocking, and
// kept only when segment_file_problem() finds nothing on its descriptor.
// Returns 0 with the descriptor in `*fd_out`, an errno value, or
// kStoreUntrusted (with `out`).
inline int open_segment_at(int dirfd, const char* name, const std::string& path,
                           bool create, bool writable, int* fd_out, StoreRefusal* out) {
  const uid_t euid = ::geteuid();
  const int access = writable ? O_RDWR : O_RDONLY;
  // A few rounds: a file removed between our two opens is created again.
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (create && writable) {
      const int fd =
          ::openat(dirfd, name,
                   O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);
      if (fd >= 0) {
        (void)::fchmod(fd, 0600);  // whatever the umask
        *fd_out = fd;
        return 0;
      }
      if (errno != EEXIST) return errno;
    }
    const int fd =
        ::openat(dirfd, name, access | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0) {
      const int err = errno;
      if (err == ENOENT && create && writable) continue;
      // A link (ELOOP), a directory (EISDIR), a file we may not open
      // (EACCES): say what it is when it is not ours.
      if (::fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
        std::string problem = segment_file_problem(sb, euid);
        if (!problem.empty())
          return store_files_detail::refuse(out, path, std::move(problem));
      }
      return err;
    }
    if (::fstat(fd, &sb) != 0) {
      const int err = errno;
      ::close(fd);
      return err;
    }
    std::string problem = segment_file_problem(sb, euid);
    if (!problem.empty()) {
      ::close(fd);
      return store_files_detail::refuse(out, path, std::move(problem));
    }
    *fd_out = fd;
    return 0;
  }
  return ENOENT;
}

// Opens the segment file at `path` (a directory and a file name): checks the
// directory (check_store_directory()), opens it, and opens the file in it
// (open_segment_at()). Returns 0 with the descriptor in `*fd_out`, an errno
// value, or kStoreUntrusted (with `out`: the directory or the file, and why).
inline int open_segment_file(const std::string& path, bool create, bool writable,
                             int* fd_out, StoreRefusal* out = nullptr) {
  const std::size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? std::string(".")
                          : slash == 0               ? std::string("/")
                                                     : path.substr(0, slash);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty()) return ENOENT;  // as open("") says
  if (name == "." || name == "..") return EINVAL;
  if (const int err = check_store_directory(dir, out)) return err;
  const int dirfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) return errno;
  // The descriptor's directory is the one checked (a belt: the check above
  // lasts, since only this user or root could have changed it).
  struct stat sb;
  int err = 0;
  if (::fstat(dirfd, &sb) != 0) {
    err = errno;
  } else if (std::string problem = store_directory_problem(sb, ::geteuid());
             !problem.empty()) {
    err = store_files_detail::refuse(out, dir, std::move(problem));
  } else {
    err = open_segment_at(dirfd, name.c_str(), path, create, writable, fd_out, out);
  }
  ::close(dirfd);
  return err;
}

#endif  // CIRCUITBREAKER_HAS_STORE_FILES

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HOST_STORE_FILES_HPP
