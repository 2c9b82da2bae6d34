// The host store's core (host/segment_*.hpp, host/robust_mutex.hpp): one breaker state in
// a shared file mapping, used by several breakers, several processes, and processes
// SIGKILLed while they hold the lock.
//
// Every test is bounded: child processes are waited for with a deadline (and
// SIGKILLed when they overrun it), loops have fixed counts, files live in a
// fresh temporary directory removed at the end. Children leave with _exit()
// (no Catch, no atexit handlers, no leak check in the child).
#include "counting_new.hpp"
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <circuitbreaker/circuitbreaker.hpp>
#include <circuitbreaker/host/segment_attach.hpp>
#include <circuitbreaker/host/segment_mapping.hpp>

#include "process_test_support.hpp"

#include <csignal>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace cb = circuitbreaker;

namespace {

using cbproc::exited_ok;
using cbproc::SharedAnon;
using cbproc::spawn;
using cbproc::TempDir;
using cbproc::wait_child;
using cbproc::was_killed;

cb::Config test_config() {
  cb::Config c;
  c.failure_threshold = 3;
  c.recovery_timeout = 30;
  c.rng_seed = 7;
  return c;
}

constexpr std::size_t kSegBytes = sizeof(cb::Segment);

// Maps `path` and attaches (or creates); the status is returned.
cb::SegmentStatus open_segment(cb::SegmentMapping& map, const std::string& path,
                               const cb::Config& c, cb::Nanos now) {
  if (map.open_file(path.c_str(), kSegBytes) != 0) return cb::SegmentStatus::TooSmall;
  return cb::init_or_attach(map.data(), map.size(), c, cb::make_settings(c), now,
                            ::getpid());
}

// acquire + record(outcome); whether it was permitted.
bool call(cb::SharedBreaker& b, cb::Outcome o, cb::Nanos now) {
  const cb::Admission a = b.acquire(now);
  if (a.permitted) b.record(a.permit, o, now);
  return a.permitted;
}

}  // namespace

TEST_CASE("two breakers on one segment share one state", "[segment]") {
  REQUIRE(cb::RobustMutex::supported());
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string path = dir.file("two");
  const cb::Config c = test_config();
  const cb::Settings s = cb::make_settings(c);

  cb::SegmentMapping m1, m2;  // two mappings of one file, at two addresses
  REQUIRE(open_segment(m1, path, c, 1000) == cb::SegmentStatus::Created);
  REQUIRE(open_segment(m2, path, c, 2000) == cb::SegmentStatus::Attached);
  REQUIRE(m1.data() != m2.data());
  CHECK(m1.segment()->header.creator_pid == ::getpid());

  cb::SharedBreaker b1(cb::SharedBreaker::Attach{}, cb::SegmentStore(*m1.segment(), s),
                       s);
  cb::SharedBreaker b2(cb::SharedBreaker::Attach{}, cb::SegmentStore(*m2.segment(), s),
                       s);
  CHECK(b2.snapshot(3000).state == cb::State::Closed);
  CHECK(b2.snapshot(3000).state_since == 1000);  // initialised by the creator

  for (int i = 0; i < 3; ++i) REQUIRE(call(b1, cb::Outcome::Failure, 10000 + i));
  CHECK(b1.snapshot(20000).state == cb::State::Open);
  const cb::Snapshot seen = b2.snapshot(20000);
  CHECK(seen.state == cb::State::Open);
  CHECK(seen.totals.failures == 3);
  CHECK(seen.totals.times_opened == 1);
  const cb::Admission a = b2.acquire(20000);
  CHECK_FALSE(a.permitted);
  CHECK(a.rejection == cb::Rejection::Open);

  b2.reset(30000);
  CHECK(b1.snapshot(30000).state == cb::State::Closed);
  CHECK(m1.segment()->control.recoveries == 0);
}

TEST_CASE("a segment commits writes and only writes", "[segment]") {
  TempDir dir;
  REQUIRE(dir.ok());
  const cb::Config c = test_config();
  cb::SegmentMapping m;
  REQUIRE(open_segment(m, dir.file("commit"), c, 0) == cb::SegmentStatus::Created);
  cb::Segment& seg = *m.segment();
  cb::SharedBreaker b(cb::SharedBreaker::Attach{},
                      cb::SegmentStore(seg, cb::make_settings(c)), cb::make_settings(c));

  const std::uint64_t seq0 = seg.control.seq.load();
  CHECK(seq0 % 2 == 0);
  CHECK(seq0 == 2);  // the creator's initialisation: one commit
  const std::uint32_t idx0 = seg.control.committed.load();

  // Reads commit nothing.
  (void)b.snapshot(10);
  cb::ActivityBucket hist[cb::kHistoryBuckets];
  (void)b.history(10, hist);
  CHECK(seg.control.seq.load() == seq0);
  CHECK(seg.control.committed.load() == idx0);

  // Each write is one commit to the other slot; admission in CLOSED writes
  // nothing, so a call is one commit (its record).
  REQUIRE(call(b, cb::Outcome::Success, 20));
  CHECK(seg.control.seq.load() == seq0 + 2);
  CHECK(seg.control.committed.load() == 1 - idx0);
  CHECK(seg.committed_state().totals.calls == 1);
  CHECK(seg.control.dirty == 0);

  // The hot path allocates nothing.
  const std::uint64_t before = cbtest::allocations();
  for (int i = 0; i < 100; ++i) call(b, cb::Outcome::Success, 30 + i);
  CHECK(cbtest::allocations() == before);
  CHECK(b.snapshot(200).totals.calls == 101);
}

TEST_CASE("forked processes update one shared breaker exactly", "[segment]") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string path = dir.file("fork");
  const cb::Config c = test_config();
  cb::SegmentMapping m;
  REQUIRE(open_segment(m, path, c, cb::SteadyClock::now()) == cb::SegmentStatus::Created);

  constexpr int kChildren = 4;
  constexpr int kCalls = 10000;
  std::vector<pid_t> pids;
  for (int i = 0; i < kChildren; ++i) {
    pids.push_back(spawn([&]() {
      cb::SegmentMapping cm;  // each child maps and attaches on its own
      if (open_segment(cm, path, c, cb::SteadyClock::now()) !=
          cb::SegmentStatus::Attached) {
        return 2;
      }
      cb::SharedBreaker b(cb::SharedBreaker::Attach{},
                          cb::SegmentStore(*cm.segment(), cb::make_settings(c)),
                          cb::make_settings(c));
      for (int k = 0; k < kCalls; ++k) {
        if (!call(b, cb::Outcome::Success, cb::SteadyClock::now())) return 3;
      }
      return 0;
    }));
  }
  for (pid_t pid : pids) {
    REQUIRE(pid > 0);
    CHECK(exited_ok(wait_child(pid, std::chrono::seconds(120))));
  }
  cb::SharedBreaker b(cb::SharedBreaker::Attach{},
                      cb::SegmentStore(*m.segment(), cb::make_settings(c)),
                      cb::make_settings(c));
  const cb::Snapshot snap = b.snapshot(cb::SteadyClock::now());
  CHECK(snap.totals.calls == kChildren * kCalls);
  CHECK(snap.totals.successes == kChildren * kCalls);
  CHECK(snap.state == cb::State::Closed);
  CHECK(m.segment()->control.recoveries == 0);
}

TEST_CASE("a process killed holding the lock leaves the last committed state",
          "[segment]") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string path = dir.file("crash");
  const cb::Config c = test_config();
  const cb::Settings s = cb::make_settings(c);
  cb::SegmentMapping m;
  REQUIRE(open_segment(m, path, c, 0) == cb::SegmentStatus::Created);
  cb::Segment& seg = *m.segment();
  cb::SharedBreaker b(cb::SharedBreaker::Attach{}, cb::SegmentStore(seg, s), s);
  REQUIRE(call(b, cb::Outcome::Success, 10));
  REQUIRE(call(b, cb::Outcome::Failure, 20));

  // Where the child dies: 0 while writing its copy (garbage in the working
  // slot), 1 with seq odd, before the flip, 2 after the flip, before
  // unlocking. 0 and 1 roll back, 2 keeps the new state.
  const int stage = GENERATE(0, 1, 2);
  CAPTURE(stage);
  cb::BreakerState last;
  std::memcpy(static_cast<void*>(&last), &seg.committed_state(), sizeof last);
  const std::uint64_t recoveries = seg.control.recoveries;

  const pid_t pid = spawn([&]() {
    cb::SegmentMapping cm;
    if (open_segment(cm, path, c, 0) != cb::SegmentStatus::Attached) return 2;
    cb::SegmentStore store(*cm.segment(), cb::make_settings(c));
    store.lock().lock();
    cb::BreakerState& w = store.state();
    if (stage == 0) {
      std::memset(static_cast<void*>(&w), 0xAB, sizeof w);
    } else {
      w.totals.calls += 1000;
      cb::SegmentControl& ctl = cm.segment()->control;
      ctl.seq.fetch_add(1);
      if (stage == 2) ctl.committed.store(1 - ctl.committed.load());
    }
    std::raise(SIGKILL);
    return 4;  // not reached
  });
  REQUIRE(pid > 0);
  REQUIRE(was_killed(wait_child(pid, std::chrono::seconds(30))));

  // The next lock finds the owner dead and recovers.
  const cb::Snapshot after = b.snapshot(30);
  CHECK(seg.control.recoveries == recoveries + 1);
  CHECK(seg.control.seq.load() % 2 == 0);
  CHECK(seg.control.dirty == 0);
  if (stage < 2) {
    CHECK(std::memcmp(&seg.committed_state(), &last, sizeof last) == 0);
    CHECK(after.totals.calls == 2);
  } else {
    CHECK(after.totals.calls == 1002);
  }
  CHECK(after.totals.failures == 1);
  CHECK(after.consecutive_failures == 1);
  CHECK(after.state == cb::State::Closed);

  // And it keeps working (no second recovery).
  for (int i = 0; i < 2; ++i) REQUIRE(call(b, cb::Outcome::Failure, 40 + i));
  CHECK(b.snapshot(50).state == cb::State::Open);
  CHECK(seg.control.recoveries == recoveries + 1);
}

TEST_CASE("processes killed at random points keep the totals consistent", "[segment]") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string path = dir.file("random");
  cb::Config c = test_config();
  const cb::Settings s = cb::make_settings(c);
  cb::SegmentMapping m;
  REQUIRE(open_segment(m, path, c, cb::SteadyClock::now()) == cb::SegmentStatus::Created);
  cb::Segment& seg = *m.segment();
  cb::SharedBreaker b(cb::SharedBreaker::Attach{}, cb::SegmentStore(seg, s), s);

  struct Progress {
    std::atomic<std::uint64_t> attempted;  // record() calls started
    std::atomic<std::uint64_t> done;       // record() calls returned
  };
  SharedAnon<Progress> progress;
  REQUIRE(progress.get() != nullptr);

  constexpr int kKills = 30;
  constexpr std::uint64_t kMaxCallsPerChild =
      2000000;  // bounds a child that is not killed
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> pause_us(0, 3000);
  std::uint64_t calls = 0;
  int killed = 0;
  for (int round = 0; round < kKills; ++round) {
    progress->attempted.store(0);
    progress->done.store(0);
    const pid_t pid = spawn([&]() {
      cb::SegmentMapping cm;
      if (open_segment(cm, path, c, cb::SteadyClock::now()) !=
          cb::SegmentStatus::Attached) {
        return 2;
      }
      cb::SharedBreaker cbk(cb::SharedBreaker::Attach{},
                            cb::SegmentStore(*cm.segment(), s), s);
      for (std::uint64_t k = 0; k < kMaxCallsPerChild; ++k) {
        const cb::Nanos now = cb::SteadyClock::now();
        const cb::Admission a = cbk.acquire(now);
        if (!a.permitted) return 3;
        progress->attempted.fetch_add(1);
        cbk.record(a.permit, cb::Outcome::Success, now);
        progress->done.fetch_add(1);
      }
      return 0;
    });
    REQUIRE(pid > 0);
    // Let it start calling, then kill it at a random moment.
    const auto started_by = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (progress->attempted.load() == 0 &&
           std::chrono::steady_clock::now() < started_by) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(pause_us(rng)));
    ::kill(pid, SIGKILL);
    const int status = wait_child(pid, std::chrono::seconds(30));
    if (was_killed(status)) ++killed;

    const cb::Snapshot snap = b.snapshot(cb::SteadyClock::now());
    const std::uint64_t attempted = progress->attempted.load();
    const std::uint64_t done = progress->done.load();
    CAPTURE(round, calls, attempted, done, snap.totals.calls);
    CHECK(snap.totals.calls >= calls + done);       // never lost, never decreases
    CHECK(snap.totals.calls <= calls + attempted);  // never more than attempted
    CHECK(snap.totals.successes == snap.totals.calls);
    CHECK(snap.state == cb::State::Closed);
    CHECK(seg.control.seq.load() % 2 == 0);
    calls = snap.totals.calls;

    // The breaker still works from here.
    REQUIRE(call(b, cb::Outcome::Success, cb::SteadyClock::now()));
    ++calls;
  }
  CHECK(killed == kKills);
  // How many kills landed inside a critical section (EOWNERDEAD) varies.
  INFO("recoveries: " << seg.control.recoveries);
  CHECK(seg.control.recoveries <= static_cast<std::uint64_t>(kKills));
}

TEST_CASE("bad segments are refused with their status", "[segment]") {
  TempDir dir;
  REQUIRE(dir.ok());
  const cb::Config c = test_config();
  const cb::Settings s = cb::make_settings(c);

  // A good segment, then a private copy of it to damage.
  cb::SegmentMapping good;
  REQUIRE(open_segment(good, dir.file("good"), c, 0) == cb::SegmentStatus::Created);
  void* p = ::mmap(nullptr, kSegBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  auto* copy = static_cast<cb::Segment*>(p);
  auto attach = [&](std::size_t size = kSegBytes,
                    const cb::Config& with = test_config()) -> cb::SegmentStatus {
    return cb::init_or_attach(p, size, with, cb::make_settings(with), 0, ::getpid(),
                              std::chrono::milliseconds(50));
  };
  auto restore = [&]() { std::memcpy(p, good.data(), kSegBytes); };

  restore();
  CHECK(attach() == cb::SegmentStatus::Attached);

  SECTION("wrong magic") {
    reinterpret_cast<unsigned char*>(p)[0] = 'X';
    CHECK(attach() == cb::SegmentStatus::Corrupt);
  }
  SECTION("wrong layout version") {
    copy->header.layout_version = cb::kSegmentLayoutVersion + 1;
    CHECK(attach() == cb::SegmentStatus::WrongLayout);
  }
  SECTION("wrong layout check (another BreakerState, Settings or API version)") {
    copy->header.layout_check ^= 1;
    CHECK(attach() == cb::SegmentStatus::WrongLayout);
  }
  SECTION("wrong total size") {
    copy->header.total_size += 64;
    CHECK(attach() == cb::SegmentStatus::WrongLayout);
  }
  SECTION("another configuration") {
    cb::Config other = c;
    other.failure_threshold = 4;
    CHECK(attach(kSegBytes, other) == cb::SegmentStatus::WrongConfig);
    const cb::FieldInfo* f = cb::find_config_field("failure_threshold");
    REQUIRE(f != nullptr);
    const cb::StoredConfigValues stored = cb::stored_config_values(copy->header);
    CHECK(cb::first_config_difference(cb::config_values(other), stored) ==
          f - cb::kConfigFields);
    CHECK(cb::first_config_difference(cb::config_values(c), stored) == -1);
  }
  SECTION("truncated") {
    CHECK(attach(kSegBytes - 1) == cb::SegmentStatus::TooSmall);
    CHECK(attach(0) == cb::SegmentStatus::TooSmall);
    CHECK(cb::init_or_attach(nullptr, kSegBytes, c, s, 0, ::getpid()) ==
          cb::SegmentStatus::TooSmall);
    // A segment file cut short: mapped at its own size.
    const std::string cut = dir.file("cut");
    {
      cb::SegmentMapping mm;
      REQUIRE(open_segment(mm, cut, c, 0) == cb::SegmentStatus::Created);
    }
    REQUIRE(::truncate(cut.c_str(), 100) == 0);
    cb::SegmentMapping mm;
    CHECK(open_segment(mm, cut, c, 0) == cb::SegmentStatus::TooSmall);
    CHECK(mm.size() == 100);
  }
  SECTION("a bad init word or slot index") {
    copy->header.init_state.store(7);
    CHECK(attach() == cb::SegmentStatus::Corrupt);
    restore();
    copy->control.committed.store(2);
    CHECK(attach() == cb::SegmentStatus::Corrupt);
  }
  SECTION("not fresh but uninitialised: never overwritten") {
    copy->header.init_state.store(0);
    CHECK(attach() == cb::SegmentStatus::Corrupt);
    CHECK(copy->header.init_state.load() == 0);
  }
  SECTION("an initialisation that never finishes, by a live creator") {
    std::memset(p, 0, kSegBytes);
    copy->header.init_state.store(1);
    copy->header.creator_pid = ::getpid();
    copy->header.creator_pid_namespace = cb::pid_namespace_id();
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(attach() == cb::SegmentStatus::InitTimeout);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
  }
  SECTION("an initialisation whose creator died is taken over") {
    std::memset(p, 0, kSegBytes);
    copy->header.init_state.store(1);
    // Died before writing its pid ...
    CHECK(attach() == cb::SegmentStatus::Created);
    CHECK(copy->header.init_state.load() == 2);
    // ... or after (a child that has exited and been reaped).
    std::memset(p, 0, kSegBytes);
    copy->header.init_state.store(1);
    const pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    REQUIRE(child > 0);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    copy->header.creator_pid = child;
    copy->header.creator_pid_namespace = cb::pid_namespace_id();
    CHECK(attach() == cb::SegmentStatus::Created);
  }
  SECTION("a segment of another boot is initialised again") {
    cb::SharedBreaker b(cb::SharedBreaker::Attach{}, cb::SegmentStore(*copy, s), s);
    REQUIRE(call(b, cb::Outcome::Failure, 10));
    REQUIRE(copy->committed_state().totals.calls == 1);
    copy->header.boot ^= 1;
    CHECK(attach() == cb::SegmentStatus::Created);
    CHECK(copy->committed_state().totals.calls == 0);
    CHECK(copy->header.boot == cb::boot_id());
    CHECK(attach() == cb::SegmentStatus::Attached);
  }
  SECTION("garbage") {
    std::mt19937 rng(99);
    for (int i = 0; i < 200; ++i) {
      auto* bytes = static_cast<unsigned char*>(p);
      for (std::size_t k = 0; k < 64; ++k) bytes[k] = static_cast<unsigned char>(rng());
      if (i % 2 == 0) copy->header.init_state.store(2);
      const cb::SegmentStatus st = attach();
      CHECK(st != cb::SegmentStatus::Attached);
      CHECK(st != cb::SegmentStatus::Created);
    }
  }
  ::munmap(p, kSegBytes);

  // Every status has its own message.
  std::vector<std::string> seen;
  for (int i = 0; i <= static_cast<int>(cb::SegmentStatus::Unsupported); ++i) {
    const char* msg = cb::segment_status_message(static_cast<cb::SegmentStatus>(i));
    REQUIRE(msg != nullptr);
    for (const std::string& other : seen) CHECK(other != msg);
    seen.emplace_back(msg);
  }
}

TEST_CASE("config_hash: stable, +0 is -0, unset is not 0", "[segment]") {
  const cb::Config base = test_config();
  const std::uint64_t h = cb::config_hash(base);
  CHECK(cb::config_hash(base) == h);

  cb::Config neg = base;
  neg.ramp_up = -0.0;
  neg.jitter = -0.0;
  cb::Config pos = base;
  pos.ramp_up = 0.0;
  pos.jitter = 0.0;
  CHECK(cb::config_hash(neg) == cb::config_hash(pos));

  cb::Config unset = base;
  cb::Config zero = base;
  zero.half_open_max_wait = 0.0;
  CHECK(cb::config_hash(unset) != cb::config_hash(zero));
  cb::Config other_field = base;
  other_field.max_recovery_timeout = 0.0;
  CHECK(cb::config_hash(other_field) != cb::config_hash(zero));

  cb::Config seeded = base;
  seeded.rng_seed = 12345;  // not a rule
  CHECK(cb::config_hash(seeded) == h);
  cb::Config timed = base;
  timed.window_type = cb::WindowType::Time;
  CHECK(cb::config_hash(timed) != h);

  // The same in another process (no address or per-process state in it).
  SharedAnon<std::uint64_t> out;
  REQUIRE(out.get() != nullptr);
  const pid_t pid = spawn([&]() {
    *out.get() = cb::config_hash(test_config());
    return 0;
  });
  REQUIRE(pid > 0);
  REQUIRE(exited_ok(wait_child(pid, std::chrono::seconds(30))));
  CHECK(*out.get() == h);
}

TEST_CASE("concurrent init_or_attach on a fresh file: one creator", "[segment]") {
  TempDir dir;
  REQUIRE(dir.ok());
  const cb::Config c = test_config();
  constexpr int kProcs = 6;
  constexpr int kRounds = 5;
  struct Board {
    std::atomic<int> ready;
    std::atomic<int> go;
    std::atomic<int> status[kProcs];
  };
  SharedAnon<Board> board;
  REQUIRE(board.get() != nullptr);

  for (int round = 0; round < kRounds; ++round) {
    const std::string path = dir.file("race" + std::to_string(round));
    board->ready.store(0);
    board->go.store(0);
    for (auto& st : board->status) st.store(-1);
    std::vector<pid_t> pids;
    for (int i = 0; i < kProcs; ++i) {
      pids.push_back(spawn([&, i]() {
        board->ready.fetch_add(1);
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (board->go.load() == 0 && std::chrono::steady_clock::now() < until) {
        }
        cb::SegmentMapping cm;
        const cb::SegmentStatus st = open_segment(cm, path, c, cb::SteadyClock::now());
        board->status[i].store(static_cast<int>(st));
        return 0;
      }));
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (board->ready.load() < kProcs && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    board->go.store(1);
    for (pid_t pid : pids) {
      REQUIRE(pid > 0);
      CHECK(exited_ok(wait_child(pid, std::chrono::seconds(30))));
    }
    int created = 0, attached = 0;
    for (auto& st : board->status) {
      const int v = st.load();
      if (v == static_cast<int>(cb::SegmentStatus::Created)) ++created;
      if (v == static_cast<int>(cb::SegmentStatus::Attached)) ++attached;
    }
    CAPTURE(round);
    CHECK(created == 1);
    CHECK(attached == kProcs - 1);

    // And the segment they made works.
    cb::SegmentMapping m;
    REQUIRE(open_segment(m, path, c, 0) == cb::SegmentStatus::Attached);
    cb::SharedBreaker b(cb::SharedBreaker::Attach{},
                        cb::SegmentStore(*m.segment(), cb::make_settings(c)),
                        cb::make_settings(c));
    CHECK(call(b, cb::Outcome::Success, cb::SteadyClock::now()));
  }
}

TEST_CASE("the POSIX shm mapping opens, attaches and is removed", "[segment]") {
  const std::string name = "/cbseg-test-" + std::to_string(::getpid());
  const cb::Config c = test_config();
  {
    cb::SegmentMapping m1, m2;
    REQUIRE(m1.open_shm(name.c_str(), kSegBytes) == 0);
    REQUIRE(m2.open_shm(name.c_str(), kSegBytes) == 0);
    const cb::Settings s = cb::make_settings(c);
    CHECK(cb::init_or_attach(m1.data(), m1.size(), c, s, 0, ::getpid()) ==
          cb::SegmentStatus::Created);
    CHECK(cb::init_or_attach(m2.data(), m2.size(), c, s, 0, ::getpid()) ==
          cb::SegmentStatus::Attached);
    cb::SharedBreaker b1(cb::SharedBreaker::Attach{}, cb::SegmentStore(*m1.segment(), s),
                         s);
    cb::SharedBreaker b2(cb::SharedBreaker::Attach{}, cb::SegmentStore(*m2.segment(), s),
                         s);
    CHECK(call(b1, cb::Outcome::Success, 10));
    CHECK(b2.snapshot(20).totals.calls == 1);
  }
  CHECK(::shm_unlink(name.c_str()) == 0);
}
