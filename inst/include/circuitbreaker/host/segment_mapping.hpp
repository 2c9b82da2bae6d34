// Mapping a segment file (or a POSIX shm object) into this process, after
// host/store_files.hpp has checked that the file is ours.
#ifndef CIRCUITBREAKER_HOST_SEGMENT_MAPPING_HPP
#define CIRCUITBREAKER_HOST_SEGMENT_MAPPING_HPP

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>

#include "os_probes.hpp"
#include "segment_layout.hpp"
#include "store_files.hpp"

namespace circuitbreaker {

// A shared mapping of a whole file, unmapped on destruction (move-only). The
// file descriptor is closed once mapped.
class SegmentMapping {
 public:
  SegmentMapping() noexcept = default;
  SegmentMapping(const SegmentMapping&) = delete;
  SegmentMapping& operator=(const SegmentMapping&) = delete;
  SegmentMapping(SegmentMapping&& o) noexcept : data_(o.data_), size_(o.size_) {
    o.data_ = nullptr;
    o.size_ = 0;
  }
  SegmentMapping& operator=(SegmentMapping&& o) noexcept {
    if (this != &o) {
      close();
      data_ = o.data_;
      size_ = o.size_;
      o.data_ = nullptr;
      o.size_ = 0;
    }
    return *this;
  }
  ~SegmentMapping() { close(); }

  // Opens `path` (created exclusively, mode 0600, if missing, unless
  // `create` is false) and maps it read-write. An existing file is used only
  // when it is ours (host/store_files.hpp: a regular file of this effective user
  // with no group/other permission bits, not reached through a link, in a
  // directory nobody else can change); else kStoreUntrusted is returned and
  // `refused` (when given) names the file or directory and says why. A file
  // created here is grown to `size` (zero-filled); a file that has a size is
  // mapped at that size, whatever `size` says, for init_or_attach() to judge.
  // Returns 0, an errno value or kStoreUntrusted.
  int open_file(const char* path, std::size_t size, bool create = true,
                StoreRefusal* refused = nullptr) noexcept {
#if CIRCUITBREAKER_HAS_POSIX_MAP
    close();
    int fd = -1;
    try {
      if (const int err = open_segment_file(path, create, true, &fd, refused)) return err;
    } catch (...) {  // std::bad_alloc from a path or a reason
      if (fd >= 0) ::close(fd);
      return ENOMEM;
    }
    return map_fd(fd, size, true);
#else
    (void)path;
    (void)size;
    (void)create;
    (void)refused;
    return ENOTSUP;
#endif
  }

  // Maps an existing segment file read-only (PROT_READ), for looking at it
  // without changing it (listing a store): never creates, never writes, and
  // refuses what open_file() refuses. Returns 0, an errno value or
  // kStoreUntrusted.
  int open_file_readonly(const char* path, StoreRefusal* refused = nullptr) noexcept {
#if CIRCUITBREAKER_HAS_POSIX_MAP
    close();
    int fd = -1;
    try {
      if (const int err = open_segment_file(path, false, false, &fd, refused)) return err;
    } catch (...) {
      if (fd >= 0) ::close(fd);
      return ENOMEM;
    }
    return map_fd(fd, 0, false);
#else
    (void)path;
    (void)refused;
    return ENOTSUP;
#endif
  }

  // The same for a POSIX shared-memory object (`name` as shm_open wants it:
  // "/something", no other slash), with the same rules: created
  // exclusively, an existing one opened without following a link or
  // blocking and kept only when fstat() says it is ours.
  int open_shm(const char* name, std::size_t size,
               StoreRefusal* refused = nullptr) noexcept {
#if CIRCUITBREAKER_HAS_POSIX_MAP
    close();
    for (int attempt = 0; attempt < 4; ++attempt) {
      int fd = ::shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
      if (fd >= 0) {
        (void)::fchmod(fd, 0600);  // whatever the umask
        return map_fd(fd, size, true);
      }
      if (errno != EEXIST) return errno;
      fd = ::shm_open(name, O_RDWR | O_NOFOLLOW | O_NONBLOCK, 0600);
      if (fd < 0) {
        if (errno == ENOENT) continue;  // removed in between: create it
        if (errno == ELOOP) return refuse_shm(refused, name, "it is a symbolic link");
        return errno;
      }
      struct stat sb;
      if (::fstat(fd, &sb) != 0) {
        const int err = errno;
        ::close(fd);
        return err;
      }
      try {
        const std::string problem = segment_file_problem(sb, ::geteuid());
        if (!problem.empty()) {
          ::close(fd);
          return refuse_shm(refused, name, problem.c_str());
        }
      } catch (...) {
        ::close(fd);
        return ENOMEM;
      }
      return map_fd(fd, size, true);
    }
    return ENOENT;
#else
    (void)name;
    (void)size;
    (void)refused;
    return ENOTSUP;
#endif
  }

  void close() noexcept {
#if CIRCUITBREAKER_HAS_POSIX_MAP
    if (data_ != nullptr) ::munmap(data_, size_);
#endif
    data_ = nullptr;
    size_ = 0;
  }

  bool is_open() const noexcept { return data_ != nullptr; }
  void* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  // Only after init_or_attach() said Created or Attached.
  Segment* segment() const noexcept { return static_cast<Segment*>(data_); }

 private:
#if CIRCUITBREAKER_HAS_POSIX_MAP
  // Maps the whole file open as `fd` (an empty one, when `writable`, first
  // grown to `size`) and closes `fd`.
  int map_fd(int fd, std::size_t size, bool writable) noexcept {
    struct stat sb;
    int err = 0;
    if (::fstat(fd, &sb) != 0) {
      err = errno;
    } else if (sb.st_size == 0) {
      if (size == 0 || !writable) {
        err = EINVAL;
      } else if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
        err = errno;
      }
    } else {
      size = static_cast<std::size_t>(sb.st_size);
    }
    if (err == 0) {
      const int prot = writable ? PROT_READ | PROT_WRITE : PROT_READ;
      void* p = ::mmap(nullptr, size, prot, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) {
        err = errno;
      } else {
        data_ = p;
        size_ = size;
      }
    }
    ::close(fd);
    return err;
  }

  static int refuse_shm(StoreRefusal* refused, const char* name,
                        const char* reason) noexcept {
    if (refused != nullptr) {
      try {
        refused->path = name;
        refused->reason = reason;
      } catch (...) {
        return ENOMEM;
      }
    }
    return kStoreUntrusted;
  }
#endif

  void* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HOST_SEGMENT_MAPPING_HPP
