// Helpers the multi-process Catch2 tests share (test_segment.cpp,
// test_host_breaker.cpp, test_host_model.cpp): a temporary directory removed
// with its files, an anonymous shared mapping that children write and the
// parent reads, and child processes that are always reaped, within a
// deadline.
//
// Children leave with _exit() (no Catch, no atexit handlers, no leak check in
// the child): a test body never returns in a child.
#ifndef CIRCUITBREAKER_PROCESS_TEST_SUPPORT_HPP
#define CIRCUITBREAKER_PROCESS_TEST_SUPPORT_HPP

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <csignal>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace cbproc {

// A fresh directory under `base` (by default $TMPDIR, or /tmp), removed with
// the files and subdirectories made through it.
class TempDir {
 public:
  explicit TempDir(const char* base = nullptr) {
    if (base == nullptr || *base == '\0') base = std::getenv("TMPDIR");
    std::string tmpl =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/cbseg.XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) != nullptr) dir_ = buf.data();
  }
  ~TempDir() {
    for (const std::string& f : files_) ::unlink(f.c_str());
    for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) ::rmdir(it->c_str());
    if (!dir_.empty()) ::rmdir(dir_.c_str());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  bool ok() const { return !dir_.empty(); }
  const std::string& path() const { return dir_; }
  // The path of a file in the directory (not created), removed at the end.
  std::string file(const std::string& name) {
    files_.push_back(dir_ + "/" + name);
    return files_.back();
  }
  // Makes a subdirectory (mode `mode`), removed at the end; its path, or ""
  // when mkdir failed.
  std::string subdir(const std::string& name, mode_t mode = 0700) {
    const std::string p = dir_ + "/" + name;
    if (::mkdir(p.c_str(), mode) != 0) return std::string();
    dirs_.push_back(p);
    return p;
  }

 private:
  std::string dir_;
  std::vector<std::string> files_;
  std::vector<std::string> dirs_;
};

// An anonymous shared mapping (survives fork) holding a zero-filled T, for
// children to report to the parent. T may be large (a journal): it is never
// on a stack.
template <typename T>
class SharedAnon {
 public:
  SharedAnon() {
    void* p = ::mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    p_ = p == MAP_FAILED ? nullptr : static_cast<T*>(p);
    if (p_ != nullptr) std::memset(static_cast<void*>(p_), 0, sizeof(T));
  }
  ~SharedAnon() {
    if (p_ != nullptr) ::munmap(p_, sizeof(T));
  }
  SharedAnon(const SharedAnon&) = delete;
  SharedAnon& operator=(const SharedAnon&) = delete;
  T* get() const { return p_; }
  T* operator->() const { return p_; }

 private:
  T* p_ = nullptr;
};

// The same for an array of `n` T, `n` known at run time.
template <typename T>
class SharedArray {
 public:
  explicit SharedArray(std::size_t n) : bytes_(n * sizeof(T)) {
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                     -1, 0);
    p_ = p == MAP_FAILED ? nullptr : static_cast<T*>(p);
    n_ = p_ != nullptr ? n : 0;
    if (p_ != nullptr) std::memset(static_cast<void*>(p_), 0, bytes_);
  }
  ~SharedArray() {
    if (p_ != nullptr) ::munmap(p_, bytes_);
  }
  SharedArray(const SharedArray&) = delete;
  SharedArray& operator=(const SharedArray&) = delete;
  T* get() const { return p_; }
  std::size_t size() const { return n_; }
  T& operator[](std::size_t i) const { return p_[i]; }

 private:
  std::size_t bytes_;
  std::size_t n_ = 0;
  T* p_ = nullptr;
};

// Waits for `pid` at most `timeout`; SIGKILLs and reaps it if it overran.
// Returns the wait status, or -1 when it had to be killed.
inline int wait_child(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0) return -1;
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

inline bool exited_ok(int status) {
  return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}
inline bool was_killed(int status) {
  return status >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

// Runs `body` (returning an exit code) in a child process; the child's pid
// (-1 when fork failed).
template <typename F>
pid_t spawn(F&& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::_exit(body());
  }
  return pid;
}

// Reaps every child in `pids` still running at the end of a test (a REQUIRE
// that failed half-way leaves some): SIGKILL, then waitpid. Idempotent.
class ChildReaper {
 public:
  ChildReaper() = default;
  ChildReaper(const ChildReaper&) = delete;
  ChildReaper& operator=(const ChildReaper&) = delete;
  ~ChildReaper() { kill_all(); }
  void add(pid_t pid) {
    if (pid > 0) pids_.push_back(pid);
  }
  // Waits for each child (the deadline each); the statuses in add() order.
  std::vector<int> wait_all(std::chrono::milliseconds timeout) {
    std::vector<int> out;
    for (pid_t pid : pids_) out.push_back(wait_child(pid, timeout));
    pids_.clear();
    return out;
  }
  void kill_all() {
    for (pid_t pid : pids_) {
      ::kill(pid, SIGKILL);
      int status = 0;
      ::waitpid(pid, &status, 0);
    }
    pids_.clear();
  }

 private:
  std::vector<pid_t> pids_;
};

}  // namespace cbproc

#endif  // CIRCUITBREAKER_PROCESS_TEST_SUPPORT_HPP
