// Benchmarks of the host store (host/host_breaker.hpp), with the in-process
// Breaker measured in the same run as the baseline.
//
//   make -C tests/cpp bench BENCH_ARGS='[host-single],[host-procs]'
//
// Parts:
//   [host-single] Catch2 BENCHMARKs, one process: the segment's robust
//                 process-shared mutex (lock+unlock, uncontended) beside the
//                 core's SpinLock; then, for the in-process Breaker and for
//                 a HostBreaker on a segment file, acquire+record(success)
//                 in CLOSED (the default configuration), acquire alone in
//                 CLOSED (a lock-free permit for the host store) and acquire
//                 in OPEN (a rejection; lock-free for the host store, one
//                 atomic add).
//   [host-procs]  1, 2 and 4 forked processes hammering one HostBreaker for a
//                 fixed time (7 rounds of 150 ms, at most 20,000,000 calls per
//                 process per round, CB_BENCH_PROC_MAX_CALLS):
//                 acquire+record(success) in CLOSED, and acquire in OPEN.
//                 Total calls per second (median over the rounds: all calls
//                 / the longest process's time) and its ratio to one process.
// The segment files live in /dev/shm when it exists (tmpfs: no write-back),
// else in $TMPDIR; they are removed at the end. A listener prints a summary
// of both parts at the end of the run.
#define CATCH_CONFIG_ENABLE_BENCHMARKING
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <circuitbreaker/circuitbreaker.hpp>
#include <circuitbreaker/host/host_breaker.hpp>
#include <circuitbreaker/host/segment_attach.hpp>
#include <circuitbreaker/host/segment_mapping.hpp>

#include "../../tests/cpp/process_test_support.hpp"

#include <sys/stat.h>

namespace cb = circuitbreaker;
using cb::Nanos;
using cb::Outcome;

namespace {

struct HostRow {
  std::string name;
  double ns;
};

struct ProcRow {
  std::string what;
  int procs;
  double calls_per_second;  // median over rounds
  double ns_per_call;       // per process: its time / its calls (median)
  double fairness;          // fewest calls of a process / most (median)
};

struct HostResults {
  std::vector<HostRow> single;
  std::vector<ProcRow> procs;
};

HostResults& host_results() {
  static HostResults r;
  return r;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

const HostRow* find_row(const std::string& name) {
  for (const HostRow& r : host_results().single) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

// Names of the [host-single] benchmarks (the summary pairs them up).
const char* const kInMutex = "reference: core SpinLock lock+unlock (host bench)";
const char* const kRobust = "reference: robust process-shared mutex lock+unlock";
const char* const kInCall = "in-process: acquire+record(success), CLOSED";
const char* const kHostCall = "host: acquire+record(success), CLOSED";
const char* const kInAdmit = "in-process: acquire, CLOSED (permit)";
const char* const kHostAdmit = "host: acquire, CLOSED (lock-free permit)";
const char* const kInReject = "in-process: acquire, OPEN (rejection)";
const char* const kHostReject = "host: acquire, OPEN (lock-free rejection)";

struct HostSummary : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;

  void benchmarkEnded(Catch::BenchmarkStats<> const& stats) override {
    const std::string& name = stats.info.name;
    if (name.rfind("host:", 0) != 0 && name.rfind("in-process:", 0) != 0 &&
        name != kRobust && name != kInMutex) {
      return;
    }
    std::vector<double> ns;
    for (const auto& d : stats.samples) ns.push_back(d.count());
    host_results().single.push_back(HostRow{name, median_of(ns)});
  }

  void testRunEnded(Catch::TestRunStats const& stats) override {
    const HostResults& r = host_results();
    if (!r.single.empty() || !r.procs.empty()) {
      std::printf(
          "\n==================== circuitbreaker host store: summary "
          "====================\n");
    }
    if (!r.single.empty()) {
      std::printf("one process (Catch2 BENCHMARK, median ns per call):\n");
      std::printf("  %-46s %10s %10s %8s\n", "", "in-process", "host", "host/in");
      const char* pairs[][3] = {
          {"lock+unlock (SpinLock vs robust mutex)", kInMutex, kRobust},
          {"acquire+record(success), CLOSED", kInCall, kHostCall},
          {"acquire, CLOSED", kInAdmit, kHostAdmit},
          {"acquire, OPEN (rejection)", kInReject, kHostReject}};
      for (const auto& p : pairs) {
        const HostRow* a = find_row(p[1]);
        const HostRow* b = find_row(p[2]);
        if (a == nullptr || b == nullptr) continue;
        std::printf("  %-46s %10.2f %10.2f %8.2f\n", p[0], a->ns, b->ns,
                    a->ns > 0 ? b->ns / a->ns : 0.0);
      }
    }
    if (!r.procs.empty()) {
      std::printf(
          "processes on one HostBreaker (timed loop; hardware threads: %u):\n"
          "  %-34s %6s %14s %10s %12s %9s\n",
          std::thread::hardware_concurrency(), "", "procs", "calls/s total", "vs 1 proc",
          "ns/call/proc", "fairness");
      for (const ProcRow& p : r.procs) {
        double one = 0;
        for (const ProcRow& q : r.procs) {
          if (q.what == p.what && q.procs == 1) one = q.calls_per_second;
        }
        std::printf("  %-34s %6d %14.3e %10.2f %12.2f %9.2f\n", p.what.c_str(), p.procs,
                    p.calls_per_second, one > 0 ? p.calls_per_second / one : 0.0,
                    p.ns_per_call, p.fairness);
      }
    }
    if (!r.single.empty() || !r.procs.empty()) {
      std::printf(
          "=============================================================================="
          "\n");
      std::fflush(stdout);
    }
    TestEventListenerBase::testRunEnded(stats);
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(HostSummary)

namespace {

constexpr Nanos kStep = 1000;  // the fake clock moves 1 us per call

// Where the segment files go: tmpfs when there is one.
const char* segment_base() {
  struct stat sb;
  if (::stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode)) return "/dev/shm";
  return nullptr;  // TempDir's default: $TMPDIR or /tmp
}

cb::Config open_config() {  // trips on the first failure and stays open
  cb::Config c;
  c.failure_threshold = 1;
  c.recovery_timeout = 1e9;
  return c;
}

void open_or_die(cb::HostBreaker& hb, const std::string& path, const cb::Config& c,
                 Nanos now) {
  const cb::HostBreaker::OpenResult r = hb.open(path, c, now);
  if (!r.ok()) {
    std::fprintf(stderr, "cannot open the segment %s: %s (errno %d)\n", path.c_str(),
                 cb::segment_status_message(r.status), r.error);
    std::abort();
  }
}

template <typename B>
void trip_or_die(B& b, Nanos t) {
  const cb::Admission a = b.acquire(t);
  b.record(a.permit, Outcome::Failure, t);
  if (b.snapshot(t).state != cb::State::Open) {
    std::fprintf(stderr, "the breaker did not open\n");
    std::abort();
  }
}

std::uint64_t env_u64(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::strtoull(v, nullptr, 0);
}

}  // namespace

TEST_CASE("host store, one process", "[host-single]") {
  cbproc::TempDir dir(segment_base());
  REQUIRE(dir.ok());
  std::uint64_t n = 0;

  cb::SpinLock spin;
  BENCHMARK(kInMutex) {
    cb::SpinGuard g(spin);
    return ++n;
  };
  {
    // The segment's own mutex, through the lock the host store takes.
    const std::string path = dir.file("mutex");
    cb::HostBreaker hb;
    open_or_die(hb, path, cb::Config{}, 0);
    cb::SegmentMapping m;
    REQUIRE(m.open_file(path.c_str(), sizeof(cb::Segment), false) == 0);
    cb::SegmentLock lock(*m.segment(), cb::make_settings(cb::Config{}));
    BENCHMARK(kRobust) {
      cb::LockGuard<cb::SegmentLock> g(lock);
      return ++n;
    };
    CHECK(lock.failures() == 0);
  }

  {
    cb::Breaker b(cb::make_settings(cb::Config{}), 0);
    Nanos t = 0;
    BENCHMARK(kInCall) {
      t += kStep;
      const cb::Admission a = b.acquire(t);
      b.record(a.permit, Outcome::Success, t);
      return a.permit.generation;
    };
    BENCHMARK(kInAdmit) {
      t += kStep;
      return b.acquire(t).permit.generation;
    };
    CHECK(b.snapshot(t).state == cb::State::Closed);
  }
  {
    cb::HostBreaker hb;
    open_or_die(hb, dir.file("closed"), cb::Config{}, 0);
    Nanos t = 0;
    BENCHMARK(kHostCall) {
      t += kStep;
      const cb::Admission a = hb.acquire(t);
      hb.record(a.permit, Outcome::Success, t);
      return a.permit.generation;
    };
    const std::uint64_t commits = hb.commits();
    BENCHMARK(kHostAdmit) {
      t += kStep;
      return hb.acquire(t).permit.generation;
    };
    CHECK(hb.commits() == commits);  // the permits were lock-free
    CHECK(hb.snapshot(t).state == cb::State::Closed);
    CHECK(hb.healthy());
  }
  {
    cb::Breaker b(cb::make_settings(open_config()), 0);
    trip_or_die(b, 0);
    Nanos t = 0;
    BENCHMARK(kInReject) {
      t += kStep;
      return b.acquire(t).retry_after;
    };
    CHECK(b.snapshot(t).state == cb::State::Open);
  }
  {
    cb::HostBreaker hb;
    open_or_die(hb, dir.file("open"), open_config(), 0);
    trip_or_die(hb, 0);
    const std::uint64_t commits = hb.commits();
    Nanos t = 0;
    BENCHMARK(kHostReject) {
      t += kStep;
      return hb.acquire(t).retry_after;
    };
    CHECK(hb.commits() == commits);
    CHECK(hb.snapshot(t).state == cb::State::Open);
  }
}

namespace {

constexpr int kMaxProcs = 4;
constexpr int kProcRounds = 7;
constexpr int kProcWindowMs = 150;
constexpr std::uint64_t kProcMaxCalls = 20000000;  // per process per round

// What the children report, in shared memory.
struct ProcBoard {
  std::atomic<int> ready, go, stop;
  std::atomic<std::uint64_t> calls[kMaxProcs];
  std::atomic<std::int64_t> nanos[kMaxProcs];  // each child's own loop time
};

// One round: `procs` children attach to `path` and call `body(hb, t)` (t a
// fake time, growing by kStep per call) until told to stop or at `max_calls`.
// Returns false when a child failed.
template <typename Body>
bool proc_round(const std::string& path, const cb::Config& c, int procs,
                std::uint64_t max_calls, ProcBoard& board, Body body) {
  board.ready.store(0);
  board.go.store(0);
  board.stop.store(0);
  for (int i = 0; i < kMaxProcs; ++i) {
    board.calls[i].store(0);
    board.nanos[i].store(0);
  }
  cbproc::ChildReaper children;
  for (int i = 0; i < procs; ++i) {
    children.add(cbproc::spawn([&, i]() {
      cb::HostBreaker hb;
      if (!hb.open(path, c, 0).ok()) return 2;
      board.ready.fetch_add(1);
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (board.go.load(std::memory_order_acquire) == 0 &&
             std::chrono::steady_clock::now() < until) {
      }
      std::uint64_t k = 0, acc = 0;
      const auto t0 = std::chrono::steady_clock::now();
      for (; k < max_calls && board.stop.load(std::memory_order_relaxed) == 0; ++k) {
        acc += body(hb, static_cast<Nanos>(k + 1) * kStep);
      }
      const auto t1 = std::chrono::steady_clock::now();
      board.stop.store(1, std::memory_order_relaxed);
      board.calls[i].store(k);
      board.nanos[i].store(
          std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
      return acc == 0xFFFFFFFFFFFFFFFFull ? 3 : 0;  // (keeps `acc` alive)
    }));
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (board.ready.load() < procs && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (board.ready.load() < procs) return false;
  board.go.store(1, std::memory_order_release);
  std::this_thread::sleep_for(std::chrono::milliseconds(kProcWindowMs));
  board.stop.store(1, std::memory_order_relaxed);
  bool ok = true;
  for (int status : children.wait_all(std::chrono::seconds(60))) {
    ok = ok && cbproc::exited_ok(status);
  }
  return ok;
}

// Runs kProcRounds rounds for 1, 2 and 4 processes; records the rows and
// returns all calls made.
template <typename Body>
std::uint64_t measure_procs(const std::string& what, const std::string& path,
                            const cb::Config& c, Body body) {
  cbproc::SharedAnon<ProcBoard> board;
  REQUIRE(board.get() != nullptr);
  const std::uint64_t cap = env_u64("CB_BENCH_PROC_MAX_CALLS", kProcMaxCalls);
  std::uint64_t all = 0;
  for (const int procs : {1, 2, 4}) {
    std::vector<double> rate, per_call, fairness;
    for (int round = 0; round < kProcRounds; ++round) {
      REQUIRE(proc_round(path, c, procs, cap, *board.get(), body));
      std::uint64_t total = 0, fewest = UINT64_MAX, most = 0;
      std::int64_t longest = 0;
      for (int i = 0; i < procs; ++i) {
        const std::uint64_t k = board->calls[i].load();
        const std::int64_t ns = board->nanos[i].load();
        total += k;
        fewest = std::min(fewest, k);
        most = std::max(most, k);
        longest = std::max(longest, ns);
        if (k > 0) per_call.push_back(static_cast<double>(ns) / static_cast<double>(k));
      }
      all += total;
      if (longest > 0) {
        rate.push_back(static_cast<double>(total) * 1e9 / static_cast<double>(longest));
      }
      if (most > 0) {
        fairness.push_back(static_cast<double>(fewest) / static_cast<double>(most));
      }
    }
    const ProcRow row{what, procs, median_of(rate), median_of(per_call),
                      median_of(fairness)};
    host_results().procs.push_back(row);
    std::printf(
        "%s, %d process%s: %.3e calls/s in all, %.2f ns per call per process, "
        "fairness %.2f\n",
        what.c_str(), procs, procs == 1 ? "" : "es", row.calls_per_second,
        row.ns_per_call, row.fairness);
    std::fflush(stdout);
  }
  return all;
}

}  // namespace

TEST_CASE("processes hammering one HostBreaker", "[host-procs]") {
  cbproc::TempDir dir(segment_base());
  REQUIRE(dir.ok());
  {
    const std::string path = dir.file("procs-closed");
    cb::HostBreaker hb;
    open_or_die(hb, path, cb::Config{}, 0);
    const std::uint64_t calls =
        measure_procs("acquire+record(success), CLOSED", path, cb::Config{},
                      [](cb::HostBreaker& b, Nanos t) {
                        const cb::Admission a = b.acquire(t);
                        b.record(a.permit, Outcome::Success, t);
                        return a.permit.generation;
                      });
    // Every call of every process was counted, exactly.
    const cb::Snapshot s = hb.snapshot(static_cast<Nanos>(kProcMaxCalls + 1) * kStep);
    CHECK(s.totals.successes == calls);
    CHECK(s.state == cb::State::Closed);
    CHECK(hb.healthy());
  }
  {
    const std::string path = dir.file("procs-open");
    cb::HostBreaker hb;
    open_or_die(hb, path, open_config(), 0);
    trip_or_die(hb, 0);
    const std::uint64_t calls =
        measure_procs("acquire, OPEN (lock-free rejection)", path, open_config(),
                      [](cb::HostBreaker& b, Nanos t) {
                        return static_cast<std::uint64_t>(b.acquire(t).retry_after);
                      });
    CHECK(hb.snapshot(0).totals.rejected == calls);
  }
}
