// Which files and directories the host store trusts (store_files.hpp), on
// real files in a fresh temporary directory, as the current user: links
// (to a file with content, dangling), a FIFO, a directory, wrong modes, and
// what SegmentMapping opens and maps. (Files of another user are tested from
// R as root, test-store-host-security.R, with a throwaway user.)
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include <circuitbreaker/circuitbreaker.hpp>
#include <circuitbreaker/host/segment_attach.hpp>
#include <circuitbreaker/host/segment_mapping.hpp>
#include <circuitbreaker/host/store_files.hpp>

#include "process_test_support.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

namespace cb = circuitbreaker;

namespace {

using cbproc::TempDir;

constexpr std::size_t kSegBytes = sizeof(cb::Segment);

void write_text(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream(path) << text;
  REQUIRE(::chmod(path.c_str(), mode) == 0);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct stat lstat_of(const std::string& path) {
  struct stat sb;
  REQUIRE(::lstat(path.c_str(), &sb) == 0);
  return sb;
}

bool exists(const std::string& path) {
  struct stat sb;
  return ::lstat(path.c_str(), &sb) == 0;
}

// Opens `path` read-write through SegmentMapping; the result and the reason.
int open_rw(const std::string& path, cb::StoreRefusal& why, bool create = true) {
  cb::SegmentMapping m;
  return m.open_file(path.c_str(), kSegBytes, create, &why);
}

}  // namespace

TEST_CASE("segment_file_problem: only a regular file of ours, mode 0600",
          "[host][store-files]") {
  TempDir dir;
  REQUIRE(dir.ok());
  const uid_t me = ::geteuid();
  const std::string good = dir.file("good");
  write_text(good, "x", 0600);
  CHECK(cb::segment_file_problem(lstat_of(good), me).empty());

  const std::string loose = dir.file("loose");
  write_text(loose, "x", 0644);
  CHECK(cb::segment_file_problem(lstat_of(loose), me) ==
        "its mode 0644 has group/other permission bits (it must be 0600)");
  REQUIRE(::chmod(loose.c_str(), 0640) == 0);
  CHECK(cb::segment_file_problem(lstat_of(loose), me).find("mode 0640") !=
        std::string::npos);

  const std::string link = dir.file("link");
  REQUIRE(::symlink(good.c_str(), link.c_str()) == 0);
  CHECK(cb::segment_file_problem(lstat_of(link), me) == "it is a symbolic link");

  const std::string fifo = dir.file("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(cb::segment_file_problem(lstat_of(fifo), me) ==
        "it is a FIFO, not a regular file");

  const std::string sub = dir.subdir("sub");
  REQUIRE(!sub.empty());
  CHECK(cb::segment_file_problem(lstat_of(sub), me) ==
        "it is a directory, not a regular file");

  // A hard link: two names for one segment.
  const std::string second = dir.file("second");
  REQUIRE(::link(good.c_str(), second.c_str()) == 0);
  CHECK(cb::segment_file_problem(lstat_of(good), me) ==
        "it has 2 hard links (a segment has one)");
  REQUIRE(::unlink(second.c_str()) == 0);
  CHECK(cb::segment_file_problem(lstat_of(good), me).empty());

  // Another owner (the stat of a real file, its owner changed).
  struct stat theirs = lstat_of(good);
  theirs.st_uid = me + 1;
  CHECK(cb::segment_file_problem(theirs, me) ==
        "it is owned by uid " + std::to_string(me + 1) +
            ", not by this process's user (uid " + std::to_string(me) + ")");
}

TEST_CASE("store_directory_problem and private_directory_problem",
          "[host][store-files]") {
  TempDir dir;
  REQUIRE(dir.ok());
  const uid_t me = ::geteuid();
  const std::string d = dir.subdir("d", 0700);
  REQUIRE(!d.empty());
  CHECK(cb::store_directory_problem(lstat_of(d), me).empty());
  CHECK(cb::private_directory_problem(lstat_of(d), me).empty());
  REQUIRE(::chmod(d.c_str(), 0777) == 0);
  CHECK(cb::store_directory_problem(lstat_of(d), me) ==
        "its mode 0777 lets group or others write in it without the sticky bit");
  CHECK(cb::private_directory_problem(lstat_of(d), me) ==
        "its mode 0777 lets group or others write in it");
  REQUIRE(::chmod(d.c_str(), 01777) == 0);  // like /dev/shm: shared, but ours stay ours
  CHECK(cb::store_directory_problem(lstat_of(d), me).empty());
  CHECK(!cb::private_directory_problem(lstat_of(d), me).empty());
  REQUIRE(::chmod(d.c_str(), 0700) == 0);

  struct stat by_root = lstat_of(d);
  by_root.st_uid = 0;
  struct stat by_other = lstat_of(d);
  by_other.st_uid = me + 1;
  CHECK(cb::store_directory_problem(by_root, me).empty());
  CHECK(cb::store_directory_problem(by_other, me).find("owned by uid") !=
        std::string::npos);
  CHECK(cb::private_directory_problem(by_other, me).find("owned by uid") !=
        std::string::npos);

  const std::string link = dir.file("link");
  REQUIRE(::symlink(d.c_str(), link.c_str()) == 0);
  CHECK(cb::private_directory_problem(lstat_of(link), me) == "it is a symbolic link");
  const std::string file = dir.file("file");
  write_text(file, "", 0600);
  CHECK(cb::store_directory_problem(lstat_of(file), me) ==
        "it is a regular file, not a directory");
}

TEST_CASE("segments are created exclusively, 0600; an existing one only when ours",
          "[host][store-files]") {
  TempDir dir;
  REQUIRE(dir.ok());
  cb::StoreRefusal why;

  SECTION("a new file: created 0600, whatever the umask; then attached") {
    const std::string path = dir.file("cb-new");
    const mode_t old = ::umask(0);
    CHECK(open_rw(path, why) == 0);
    ::umask(old);
    CHECK((lstat_of(path).st_mode & 07777) == 0600);
    CHECK(lstat_of(path).st_size == static_cast<off_t>(kSegBytes));
    CHECK(open_rw(path, why) == 0);
    CHECK(!why.refused());
  }
  SECTION("a link to a file with content: refused, the file unchanged") {
    const std::string target = dir.file("precious");
    write_text(target, "precious contents", 0600);
    const std::string path = dir.file("cb-link");
    REQUIRE(::symlink(target.c_str(), path.c_str()) == 0);
    CHECK(open_rw(path, why) == cb::kStoreUntrusted);
    CHECK(why.path == path);
    CHECK(why.reason == "it is a symbolic link");
    CHECK(read_text(target) == "precious contents");
    cb::SegmentMapping m;
    CHECK(m.open_file_readonly(path.c_str(), &why) == cb::kStoreUntrusted);
    CHECK(!m.is_open());
  }
  SECTION("a dangling link: refused, its target not created") {
    const std::string target = dir.file("never");
    const std::string path = dir.file("cb-dangling");
    REQUIRE(::symlink(target.c_str(), path.c_str()) == 0);
    CHECK(open_rw(path, why) == cb::kStoreUntrusted);
    CHECK(why.reason == "it is a symbolic link");
    CHECK(!exists(target));
  }
  SECTION("a FIFO: refused, without blocking, read-write or read-only") {
    const std::string path = dir.file("cb-fifo");
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
    CHECK(open_rw(path, why) == cb::kStoreUntrusted);
    CHECK(why.reason == "it is a FIFO, not a regular file");
    cb::SegmentMapping m;
    CHECK(m.open_file_readonly(path.c_str(), &why) == cb::kStoreUntrusted);
  }
  SECTION("a directory: refused") {
    const std::string path = dir.subdir("cb-dir");
    REQUIRE(!path.empty());
    CHECK(open_rw(path, why) == cb::kStoreUntrusted);
    CHECK(why.reason == "it is a directory, not a regular file");
    cb::SegmentMapping m;
    CHECK(m.open_file_readonly(path.c_str(), &why) == cb::kStoreUntrusted);
  }
  SECTION("an empty file of ours with group/other bits: refused, not grown") {
    const std::string path = dir.file("cb-loose");
    write_text(path, "", 0666);
    REQUIRE(::chmod(path.c_str(), 0666) == 0);
    CHECK(open_rw(path, why) == cb::kStoreUntrusted);
    CHECK(why.reason ==
          "its mode 0666 has group/other permission bits (it must be 0600)");
    CHECK(lstat_of(path).st_size == 0);
  }
  SECTION("a missing file is not created when `create` is false") {
    const std::string path = dir.file("cb-missing");
    CHECK(open_rw(path, why, false) == ENOENT);
    CHECK(!exists(path));
  }
  SECTION("a store directory that others may change is refused, named") {
    const std::string sub = dir.subdir("open", 0700);
    REQUIRE(::chmod(sub.c_str(), 0777) == 0);
    const std::string path = dir.file("open/cb-x");
    CHECK(open_rw(path, why) == cb::kStoreUntrusted);
    CHECK(why.path == sub);
    CHECK(!exists(path));
    REQUIRE(::chmod(sub.c_str(), 01777) == 0);
    CHECK(open_rw(path, why) == 0);
  }
}

TEST_CASE("listing maps read-only and never writes", "[host][store-files]") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string path = dir.file("cb-seg");
  cb::StoreRefusal why;
  REQUIRE(open_rw(path, why) == 0);
  const struct stat before = lstat_of(path);
  cb::SegmentMapping m;
  REQUIRE(m.open_file_readonly(path.c_str(), &why) == 0);
  CHECK(m.size() == kSegBytes);
  // PROT_READ: this process cannot write through the mapping.
  CHECK(::mprotect(m.data(), m.size(), PROT_READ) == 0);
  CHECK(::mprotect(m.data(), m.size(), PROT_READ | PROT_WRITE) != 0);
  const struct stat after = lstat_of(path);
  CHECK(after.st_size == before.st_size);
  CHECK(after.st_mtim.tv_sec == before.st_mtim.tv_sec);
  CHECK(after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
  // An empty file is not mapped (nor grown).
  const std::string empty = dir.file("cb-empty");
  write_text(empty, "", 0600);
  CHECK(m.open_file_readonly(empty.c_str(), &why) == EINVAL);
  CHECK(lstat_of(empty).st_size == 0);
}

TEST_CASE("store directories: the walk from / and the private directory",
          "[host][store-files]") {
  TempDir dir;
  REQUIRE(dir.ok());
  cb::StoreRefusal why;
  CHECK(cb::check_store_directory(dir.path(), &why) == 0);
  CHECK(cb::check_store_directory(dir.path() + "/missing", &why) == ENOENT);
  // A link of ours on the way is fine; what it points to is checked.
  const std::string real = dir.subdir("real", 0700);
  const std::string link = dir.file("link");
  REQUIRE(::symlink(real.c_str(), link.c_str()) == 0);
  CHECK(cb::check_store_directory(link, &why) == 0);
  REQUIRE(::chmod(real.c_str(), 0777) == 0);
  CHECK(cb::check_store_directory(link, &why) == cb::kStoreUntrusted);
  REQUIRE(::chmod(real.c_str(), 0700) == 0);
  // A directory below one that others may change is refused, naming that one.
  const std::string open = dir.subdir("open", 0700);
  const std::string below = dir.subdir("open/below", 0700);
  REQUIRE(::chmod(open.c_str(), 0777) == 0);
  CHECK(cb::check_store_directory(below, &why) == cb::kStoreUntrusted);
  CHECK(why.path == open);
  REQUIRE(::chmod(open.c_str(), 0700) == 0);

  // The private directory: made 0700 when missing, else checked.
  const std::string mine =
      dir.file("mine");  // (a file path: removed as a directory below)
  CHECK(cb::ensure_private_directory(mine, &why) == 0);
  CHECK((lstat_of(mine).st_mode & 07777) == 0700);
  CHECK(cb::ensure_private_directory(mine, &why) == 0);
  REQUIRE(::chmod(mine.c_str(), 0775) == 0);
  CHECK(cb::ensure_private_directory(mine, &why) == cb::kStoreUntrusted);
  CHECK(why.reason == "its mode 0775 lets group or others write in it");
  REQUIRE(::rmdir(mine.c_str()) == 0);
  const std::string linked = dir.file("linked");
  REQUIRE(::symlink(real.c_str(), linked.c_str()) == 0);
  CHECK(cb::ensure_private_directory(linked, &why) == cb::kStoreUntrusted);
  CHECK(why.reason == "it is a symbolic link");
  const std::string plain = dir.file("plain");
  write_text(plain, "", 0600);
  CHECK(cb::ensure_private_directory(plain, &why) == cb::kStoreUntrusted);
  CHECK(why.reason == "it is a regular file, not a directory");
  CHECK(cb::default_store_directory() ==
        "/dev/shm/circuitbreaker-" + std::to_string(::geteuid()));
}

TEST_CASE("the POSIX shm path refuses what is not ours", "[host][store-files]") {
  const std::string name = "/cbseg-files-" + std::to_string(::getpid());
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(::fchmod(fd, 0644) == 0);
  ::close(fd);
  cb::SegmentMapping m;
  cb::StoreRefusal why;
  CHECK(m.open_shm(name.c_str(), kSegBytes, &why) == cb::kStoreUntrusted);
  CHECK(why.reason == "its mode 0644 has group/other permission bits (it must be 0600)");
  CHECK(::shm_unlink(name.c_str()) == 0);
  // A fresh one is created 0600.
  CHECK(m.open_shm(name.c_str(), kSegBytes, &why) == 0);
  m.close();
  CHECK(::shm_unlink(name.c_str()) == 0);
}
