// Micro-benchmarks of the header-only C++ core, with the baselines
// measured in the same run so that the figures read as ratios as well as ns.
//
//   make -C tests/cpp bench                      (-O2 -DNDEBUG, g++ by default)
//   make -C tests/cpp bench BENCH_ARGS='[threads]'   one part only
//
// Parts (Catch2 test cases, run in this order):
//   [single]  Catch2 BENCHMARKs, one thread: baselines (an empty loop, a
//             std::atomic fetch_add, a std::mutex lock+unlock pair, the core's
//             SpinLock, a SteadyClock reading), then acquire + record(Success)
//             for (a) the default configuration, (b) a count window of 100
//             with the failure-rate rule, (c) a time window with the slow-call
//             rule; acquire on an OPEN breaker (a rejection); and (a) again
//             with two real SteadyClock readings per call.
//   [threads] two std::threads hammering one breaker (Catch2's BENCHMARK is
//             single-threaded): a plain timed loop, 9 rounds of 40 ms, at
//             most 4,000,000 calls per thread per round
//             (CB_BENCH_THREAD_MAX_CALLS); the median ns per call per thread,
//             against the same loop around fetch_add, a mutex pair and the
//             core's SpinLock on one shared object, and against the same
//             loop run by one thread. Also the aggregate cost (time / all
//             calls) and the fairness (fewest calls of a thread / most).
//   [alloc]   a counting global operator new: heap allocations over 1,000,000
//             calls of each hot path (must be 0; the test fails otherwise).
//   [sizeof]  sizeof(circuitbreaker::Breaker) and its parts.
// A listener collects the median of each BENCHMARK's samples and prints one
// summary table at the end of the run.
#define CATCH_CONFIG_ENABLE_BENCHMARKING
#include "../../tests/cpp/counting_new.hpp"
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include <circuitbreaker/circuitbreaker.hpp>

namespace cb = circuitbreaker;
using cb::Config;
using cb::Nanos;
using cb::Outcome;

// ---------------------------------------------------------------------------
// Allocations are counted by counting_new.cpp, linked into this binary.

// ---------------------------------------------------------------------------
// Results, printed together at the end of the run.

namespace {

struct Row {
  std::string name;
  double ns;  // median ns per call
};

struct Results {
  std::vector<Row> single;   // BENCHMARK medians
  std::vector<Row> threads;  // 2-thread timed loops: median ns per call per thread
  std::vector<std::string> notes;
};

Results& results() {
  static Results r;
  return r;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

const Row* find(const std::vector<Row>& rows, const std::string& prefix) {
  for (const Row& r : rows) {
    if (r.name.compare(0, prefix.size(), prefix) == 0) return &r;
  }
  return nullptr;
}

void print_table(const char* title, const std::vector<Row>& rows, const Row* empty,
                 const Row* atomic, const Row* mutex) {
  if (rows.empty()) return;
  std::printf("\n%s\n", title);
  std::printf("  %-58s %9s %9s %9s %9s\n", "", "median ns", "/ empty", "/ fetch_add",
              "/ mutex");
  for (const Row& r : rows) {
    std::printf("  %-58s %9.2f", r.name.c_str(), r.ns);
    for (const Row* base : {empty, atomic, mutex}) {
      if (base != nullptr && base->ns > 0) {
        std::printf(" %9.2f", r.ns / base->ns);
      } else {
        std::printf(" %9s", "-");
      }
    }
    std::printf("\n");
  }
}

struct Summary : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;

  void benchmarkEnded(Catch::BenchmarkStats<> const& stats) override {
    std::vector<double> ns;
    ns.reserve(stats.samples.size());
    for (const auto& d : stats.samples) ns.push_back(d.count());  // ns per iteration
    results().single.push_back(Row{stats.info.name, median(ns)});
  }

  void testRunEnded(Catch::TestRunStats const& stats) override {
    const Results& r = results();
    std::printf(
        "\n==================== circuitbreaker C++ core: summary ====================\n");
    print_table("single thread (Catch2 BENCHMARK, median of the samples):", r.single,
                find(r.single, "baseline: empty loop"),
                find(r.single, "baseline: std::atomic fetch_add"),
                find(r.single, "baseline: std::mutex lock+unlock"));
    const Row* a = find(r.single, "(a)");
    if (a != nullptr) {
      double worst = 0;
      for (const char* p : {"(a)", "(b)", "(c)"}) {
        if (const Row* x = find(r.single, p)) worst = std::max(worst, x->ns);
      }
      std::printf(
          "  target: acquire+record <= 50 ns single-threaded: %s (slowest of a-c: %.2f "
          "ns)\n",
          worst <= 50 ? "met" : "NOT met", worst);
    }
    print_table(
        "two threads on one object (timed loop, median over rounds and threads "
        "of ns per call per thread):",
        r.threads, nullptr, find(r.threads, "2 threads: std::atomic fetch_add"),
        find(r.threads, "2 threads: std::mutex lock+unlock"));
    for (const std::string& n : r.notes) std::printf("%s\n", n.c_str());
    std::printf(
        "==========================================================================\n");
    std::fflush(stdout);
    TestEventListenerBase::testRunEnded(stats);
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(Summary)

// ---------------------------------------------------------------------------
// Configurations.

namespace {

cb::Settings settings_of(const Config& c) {
  const cb::ConfigError e = cb::validate(c);
  if (e) {
    std::fprintf(stderr, "invalid configuration: %s must be %s\n", e.field,
                 e.requirement);
    std::abort();
  }
  return cb::make_settings(c);
}

Config default_config() { return Config{}; }

Config count_rate_config() {  // (b)
  Config c;
  c.failure_rate_threshold = 0.5;
  c.window_type = cb::WindowType::Count;
  c.window_size = 100;
  return c;
}

Config time_slow_config() {  // (c)
  Config c;
  c.window_type = cb::WindowType::Time;
  c.window_size = 10;  // seconds, ten buckets of 1 s
  c.slow_call_duration = 1;
  c.slow_call_rate_threshold = 0.5;
  return c;
}

Config open_config() {  // trips on the first failure and stays open
  Config c;
  c.failure_threshold = 1;
  c.recovery_timeout = 1e9;
  return c;
}

void trip(cb::Breaker& b, Nanos t) {
  const cb::Admission a = b.acquire(t);
  b.record(a.permit, Outcome::Failure, t);
  if (b.snapshot(t).state != cb::State::Open) {
    std::fprintf(stderr, "the breaker did not open\n");
    std::abort();
  }
}

constexpr Nanos kStep = 1000;  // the manual clock moves 1 us per call
// A reading after every call of the timed loops (for the final snapshot).
constexpr Nanos kLateTime = static_cast<Nanos>(cb::kMaxClockSeconds * 1e9) - 1;

}  // namespace

// ---------------------------------------------------------------------------

TEST_CASE("single thread", "[single]") {
  std::uint64_t n = 0;
  BENCHMARK("baseline: empty loop") { return ++n; };

  std::atomic<std::uint64_t> counter{0};
  BENCHMARK("baseline: std::atomic fetch_add") { return counter.fetch_add(1); };

  std::mutex m;
  BENCHMARK("baseline: std::mutex lock+unlock") {
    std::lock_guard<std::mutex> g(m);
    return ++n;
  };

  cb::SpinLock spin;
  BENCHMARK("reference: core SpinLock lock+unlock") {
    cb::SpinGuard g(spin);
    return ++n;
  };

  BENCHMARK("reference: SteadyClock::now()") { return cb::SteadyClock::now(); };

  {
    cb::Breaker b(settings_of(default_config()), 0);
    Nanos t = 0;
    BENCHMARK("(a) acquire+record(success), default config") {
      t += kStep;
      const cb::Admission a = b.acquire(t);
      b.record(a.permit, Outcome::Success, t);
      return a.permit.generation;
    };
    CHECK(b.snapshot(t).state == cb::State::Closed);
  }
  {
    cb::Breaker b(settings_of(count_rate_config()), 0);
    Nanos t = 0;
    BENCHMARK("(b) acquire+record(success), count window 100 + rate rule") {
      t += kStep;
      const cb::Admission a = b.acquire(t);
      b.record(a.permit, Outcome::Success, t);
      return a.permit.generation;
    };
    CHECK(b.snapshot(t).window.calls == 100);
  }
  {
    cb::Breaker b(settings_of(time_slow_config()), 0);
    Nanos t = 0;
    BENCHMARK("(c) acquire+record(success), time window 10 s + slow rule") {
      t += kStep;
      const cb::Admission a = b.acquire(t);
      b.record(a.permit, Outcome::Success, t);
      return a.permit.generation;
    };
    CHECK(b.snapshot(t).window.calls > 0);
  }
  {
    cb::Breaker b(settings_of(open_config()), 0);
    trip(b, 0);
    Nanos t = 0;
    BENCHMARK("acquire on an OPEN breaker (rejection)") {
      t += kStep;
      const cb::Admission a = b.acquire(t);
      return a.retry_after;
    };
    CHECK(b.snapshot(t).state == cb::State::Open);
  }
  {
    cb::Breaker b(settings_of(default_config()), cb::SteadyClock::now());
    BENCHMARK("(a) with two SteadyClock::now() readings per call") {
      const cb::Admission a = b.acquire(cb::SteadyClock::now());
      b.record(a.permit, Outcome::Success, cb::SteadyClock::now());
      return a.permit.generation;
    };
  }
}

// ---------------------------------------------------------------------------
// Several threads: a plain timed loop.

namespace {

// Each round: the threads start together and call until a shared stop flag
// is raised, after kWindowMs milliseconds or when one of them reaches
// kMaxCallsPerRound (the bound on the work), whichever comes first. So both
// threads are running, and contending, for the whole measured time even
// when the lock is unfair (a thread that wins the lock back again and again
// would otherwise finish its share early and leave the other to run alone).
// Per thread: its time / its calls. Aggregate: the longest thread's time /
// all calls. Fairness: the fewest calls of a thread / the most.
constexpr int kWindowMs = 40;
constexpr std::uint64_t kMaxCallsPerRound = 4000000;  // per thread
constexpr int kRounds = 9;

std::uint64_t env_u64(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::strtoull(v, nullptr, 0);
}

std::atomic<std::uint64_t> g_sink{0};

struct Timing {
  std::vector<double> ns;         // ns per call of each thread of each round
  std::vector<double> aggregate;  // per round: longest thread's ns / all calls
  std::vector<double> fairness;   // per round: fewest calls / most calls
  std::uint64_t calls = 0;        // all calls of all rounds
};

// body(thread, i) with i growing across rounds and threads' calls (a clock
// derived from it never goes back much).
template <typename Body>
Timing timed(int threads, int rounds, std::uint64_t max_calls, Body body) {
  using Clock = std::chrono::steady_clock;
  Timing out;
  std::uint64_t base = 0;
  for (int round = 0; round < rounds; ++round) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false}, stop{false};
    const auto n = static_cast<std::size_t>(threads);
    std::vector<double> seconds(n);
    std::vector<std::uint64_t> calls(n);
    std::vector<std::thread> pool;
    for (int k = 0; k < threads; ++k) {
      pool.emplace_back([&, k] {
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) {
        }
        std::uint64_t acc = 0, i = 0;
        const auto t0 = Clock::now();
        for (; i < max_calls && !stop.load(std::memory_order_relaxed); ++i) {
          acc += body(k, base + i);
        }
        stop.store(true, std::memory_order_relaxed);
        const auto t1 = Clock::now();
        g_sink.fetch_add(acc, std::memory_order_relaxed);
        seconds[static_cast<std::size_t>(k)] =
            std::chrono::duration<double>(t1 - t0).count();
        calls[static_cast<std::size_t>(k)] = i;
      });
    }
    while (ready.load() != threads) {
    }
    go.store(true, std::memory_order_release);
    std::this_thread::sleep_for(std::chrono::milliseconds(kWindowMs));
    stop.store(true, std::memory_order_relaxed);
    for (std::thread& t : pool) t.join();
    std::uint64_t total = 0, fewest = UINT64_MAX, most = 0;
    double longest = 0;
    for (std::size_t k = 0; k < n; ++k) {
      out.ns.push_back(1e9 * seconds[k] / static_cast<double>(calls[k]));
      total += calls[k];
      fewest = std::min(fewest, calls[k]);
      most = std::max(most, calls[k]);
      longest = std::max(longest, seconds[k]);
    }
    out.aggregate.push_back(1e9 * longest / static_cast<double>(total));
    out.fairness.push_back(static_cast<double>(fewest) / static_cast<double>(most));
    out.calls += total;
    base += most;
  }
  return out;
}

template <typename Body>
std::uint64_t measure(const std::string& name, int threads, Body body) {
  const std::uint64_t cap = env_u64("CB_BENCH_THREAD_MAX_CALLS", kMaxCallsPerRound);
  const Timing t = timed(threads, kRounds, cap, body);
  const double med = median(t.ns);
  const double lo = *std::min_element(t.ns.begin(), t.ns.end());
  const double hi = *std::max_element(t.ns.begin(), t.ns.end());
  const double agg = median(t.aggregate);
  const double fair = median(t.fairness);
  results().threads.push_back(Row{name, med});
  char buf[300];
  std::snprintf(buf, sizeof buf,
                "  %-58s per thread min %.2f, max %.2f; aggregate %.2f ns per call; "
                "fairness %.2f; %.1fM calls in %d rounds",
                name.c_str(), lo, hi, agg, fair, static_cast<double>(t.calls) / 1e6,
                kRounds);
  results().notes.push_back(buf);
  std::printf(
      "%s: median %.2f ns per call per thread (min %.2f, max %.2f), aggregate %.2f ns "
      "per call, fairness %.2f\n",
      name.c_str(), med, lo, hi, agg, fair);
  std::fflush(stdout);
  return t.calls;
}

}  // namespace

TEST_CASE("two threads hammering one breaker", "[threads]") {
  std::printf("hardware threads: %u; rounds of %d ms, at most %" PRIu64
              " calls per thread per round\n",
              std::thread::hardware_concurrency(), kWindowMs,
              env_u64("CB_BENCH_THREAD_MAX_CALLS", kMaxCallsPerRound));
  {
    std::atomic<std::uint64_t> counter{0};
    measure("2 threads: std::atomic fetch_add", 2,
            [&](int, std::uint64_t) { return counter.fetch_add(1); });
  }
  {
    std::mutex m;
    std::uint64_t shared = 0;
    measure("2 threads: std::mutex lock+unlock", 2, [&](int, std::uint64_t) {
      std::lock_guard<std::mutex> g(m);
      return ++shared;
    });
  }
  {
    cb::SpinLock spin;
    std::uint64_t shared = 0;
    measure("2 threads: core SpinLock lock+unlock", 2, [&](int, std::uint64_t) {
      cb::SpinGuard g(spin);
      return ++shared;
    });
  }
  for (int threads : {1, 2}) {
    cb::Breaker b(settings_of(default_config()), 0);
    const std::uint64_t calls =
        measure(std::to_string(threads) + (threads == 1 ? " thread:  " : " threads: ") +
                    "(a) acquire+record(success), default",
                threads, [&](int, std::uint64_t i) {
                  const Nanos t = static_cast<Nanos>(i + 1) * kStep;
                  const cb::Admission a = b.acquire(t);
                  b.record(a.permit, Outcome::Success, t);
                  return a.permit.generation;
                });
    const cb::Snapshot s = b.snapshot(kLateTime);
    CHECK(s.totals.successes == calls);
    CHECK(s.state == cb::State::Closed);
  }
  for (int threads : {1, 2}) {
    cb::Breaker b(settings_of(time_slow_config()), 0);
    const std::uint64_t calls =
        measure(std::to_string(threads) + (threads == 1 ? " thread:  " : " threads: ") +
                    "(c) acquire+record(success), time + slow",
                threads, [&](int, std::uint64_t i) {
                  const Nanos t = static_cast<Nanos>(i + 1) * kStep;
                  const cb::Admission a = b.acquire(t);
                  b.record(a.permit, Outcome::Success, t);
                  return a.permit.generation;
                });
    CHECK(b.snapshot(kLateTime).totals.successes == calls);
  }
  for (int threads : {1, 2}) {
    cb::Breaker b(settings_of(open_config()), 0);
    trip(b, 0);
    const std::uint64_t calls =
        measure(std::to_string(threads) + (threads == 1 ? " thread:  " : " threads: ") +
                    "acquire on an OPEN breaker",
                threads, [&](int, std::uint64_t i) {
                  const cb::Admission a = b.acquire(static_cast<Nanos>(i + 1) * kStep);
                  return static_cast<std::uint64_t>(a.retry_after);
                });
    CHECK(b.snapshot(0).totals.rejected == calls);
  }
}

// ---------------------------------------------------------------------------
// Heap allocations.

namespace {

template <typename Body>
std::uint64_t allocations_over(std::uint64_t calls, Body body) {
  std::uint64_t acc = 0;
  const std::uint64_t before = cbtest::allocations();
  for (std::uint64_t i = 0; i < calls; ++i) acc += body(i);
  const std::uint64_t after = cbtest::allocations();
  g_sink.fetch_add(acc, std::memory_order_relaxed);
  return after - before;
}

void report_allocations(const char* what, std::uint64_t calls,
                        std::uint64_t allocations) {
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "  heap allocations: %-48s %" PRIu64 " over %" PRIu64
                " calls (%.6f per call)",
                what, allocations, calls,
                static_cast<double>(allocations) / static_cast<double>(calls));
  results().notes.push_back(buf);
  std::printf("%s\n", buf);
}

}  // namespace

TEST_CASE("no heap allocation per call", "[alloc]") {
  const std::uint64_t calls = env_u64("CB_BENCH_ALLOC_CALLS", 1000000);
  struct Case {
    const char* name;
    Config config;
  };
  const Case cases[] = {{"(a) acquire+record, default", default_config()},
                        {"(b) acquire+record, count 100 + rate", count_rate_config()},
                        {"(c) acquire+record, time + slow", time_slow_config()}};
  for (const Case& c : cases) {
    cb::Breaker b(settings_of(c.config), 0);
    const std::uint64_t n = allocations_over(calls, [&](std::uint64_t i) {
      const Nanos t = static_cast<Nanos>(i + 1) * kStep;
      const cb::Admission a = b.acquire(t);
      b.record(a.permit, Outcome::Success, t);
      return a.permit.generation;
    });
    report_allocations(c.name, calls, n);
    CHECK(n == 0);
  }
  {
    cb::Breaker b(settings_of(open_config()), 0);
    trip(b, 0);
    const std::uint64_t n = allocations_over(calls, [&](std::uint64_t i) {
      return static_cast<std::uint64_t>(
          b.acquire(static_cast<Nanos>(i + 1) * kStep).retry_after);
    });
    report_allocations("acquire on an OPEN breaker", calls, n);
    CHECK(n == 0);
  }
  {
    // Every rule on, failures in bursts: trips, probes, expiries, releases,
    // notes, snapshots and the transition log, all on the hot path.
    Config c;
    c.failure_threshold = 3;
    c.recovery_timeout = 0.002;
    c.failure_rate_threshold = 0.5;
    c.window_type = cb::WindowType::Time;
    c.window_size = 0.05;
    c.minimum_calls = 4;
    c.slow_call_duration = 0.0005;
    c.slow_call_rate_threshold = 0.8;
    c.half_open_max_calls = 2;
    c.half_open_max_wait = 0.003;
    c.backoff_multiplier = 1.5;
    c.max_recovery_timeout = 0.01;
    c.jitter = 0.3;
    c.ramp_up = 0.004;
    cb::Breaker b(settings_of(c), 0);
    cb::Permit held[16];
    cb::Transition log[cb::TransitionLog::kCapacity];
    const std::uint64_t n = allocations_over(calls, [&](std::uint64_t i) {
      const Nanos t = static_cast<Nanos>(i + 1) * 97 * kStep;
      const bool bad = (i / 500) % 2 == 0;
      const std::uint64_t r = i % 7;
      const Outcome o = (r == 0 || (bad && r < 4)) ? Outcome::Failure : Outcome::Success;
      const cb::Admission a = b.acquire(t);
      std::uint64_t x = a.permit.generation;
      if (!a.permitted) {
        if (i % 173 == 0) b.note(o, t);
      } else if (i % 3 == 0) {
        cb::Permit& slot = held[(i / 3) % 16];
        b.record(slot, o, t);  // a result that arrives late
        slot = a.permit;
      } else if (r == 6) {
        b.release(a.permit, t);
      } else {
        b.record(a.permit, o, t);
      }
      if (i % 100 == 0) {
        x += b.snapshot(t).totals.calls;
        x += b.transitions_since(0, log, cb::TransitionLog::kCapacity);
      }
      return x;
    });
    report_allocations("mixed: every rule, trips, probes, snapshots", calls, n);
    CHECK(n == 0);
    const cb::Snapshot s = b.snapshot(static_cast<Nanos>(calls + 1) * 97 * kStep);
    CHECK(s.totals.times_opened > 1000);
    CHECK(s.totals.expired > 0);
  }
  // The counting allocator does count (so the checks above can fail).
  const std::uint64_t before = cbtest::allocations();
  void* volatile p = ::operator new(16);
  ::operator delete(p);
  CHECK(cbtest::allocations() == before + 1);
}

TEST_CASE("sizes", "[sizeof]") {
  char buf[500];
  std::snprintf(
      buf, sizeof buf,
      "  sizeof(circuitbreaker::Breaker) = %zu bytes (alignof %zu): BreakerState %zu, "
      "Settings %zu, SpinLock %zu; of the state: CountWindow %zu, TimeWindow %zu, "
      "TransitionLog %zu, ActivityHistory %zu. Permit %zu, Admission %zu, Snapshot %zu",
      sizeof(cb::Breaker), alignof(cb::Breaker), sizeof(cb::BreakerState),
      sizeof(cb::Settings), sizeof(cb::SpinLock), sizeof(cb::CountWindow),
      sizeof(cb::TimeWindow), sizeof(cb::TransitionLog), sizeof(cb::ActivityHistory),
      sizeof(cb::Permit), sizeof(cb::Admission), sizeof(cb::Snapshot));
  results().notes.push_back(buf);
  std::printf("%s\n", buf);
  CHECK(sizeof(cb::Breaker) >= sizeof(cb::BreakerState));
}
