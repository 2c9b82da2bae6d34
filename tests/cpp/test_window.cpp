// CountWindow and TimeWindow: eviction, running totals, jumps longer than the
// window, and totals_at() reading without changing anything.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include <circuitbreaker/circuitbreaker.hpp>

namespace cb = circuitbreaker;
using cb::Nanos;
using cb::WindowTotals;

namespace {

bool equal(const WindowTotals& a, const WindowTotals& b) {
  return a.calls == b.calls && a.failures == b.failures && a.slow == b.slow;
}

WindowTotals totals(std::uint64_t calls, std::uint64_t failures, std::uint64_t slow) {
  WindowTotals t;
  t.calls = calls;
  t.failures = failures;
  t.slow = slow;
  return t;
}

}  // namespace

namespace Catch {
template <>
struct StringMaker<WindowTotals> {
  static std::string convert(const WindowTotals& t) {
    return "{calls " + std::to_string(t.calls) + ", failures " +
           std::to_string(t.failures) + ", slow " + std::to_string(t.slow) + "}";
  }
};
}  // namespace Catch

#define CHECK_TOTALS(expr, c, f, s)                   \
  do {                                                \
    const WindowTotals got_ = (expr);                 \
    const WindowTotals want_ = totals((c), (f), (s)); \
    CAPTURE(got_, want_);                             \
    CHECK(equal(got_, want_));                        \
  } while (0)

TEST_CASE("CountWindow keeps the last N calls", "[window]") {
  cb::CountWindow w;
  CHECK_TOTALS(w.totals(), 0, 0, 0);

  SECTION("fills up, then the oldest call falls out") {
    w.add(3, true, false);
    CHECK_TOTALS(w.totals(), 1, 1, 0);
    w.add(3, false, true);
    CHECK_TOTALS(w.totals(), 2, 1, 1);
    w.add(3, true, true);
    CHECK_TOTALS(w.totals(), 3, 2, 2);
    w.add(3, false, false);  // evicts (failed)
    CHECK_TOTALS(w.totals(), 3, 1, 2);
    w.add(3, false, false);  // evicts (slow)
    CHECK_TOTALS(w.totals(), 3, 1, 1);
    w.add(3, false, false);  // evicts (failed, slow)
    CHECK_TOTALS(w.totals(), 3, 0, 0);
    w.add(3, true, true);
    CHECK_TOTALS(w.totals(), 3, 1, 1);
  }
  SECTION("a window of one call") {
    w.add(1, true, true);
    CHECK_TOTALS(w.totals(), 1, 1, 1);
    w.add(1, false, false);
    CHECK_TOTALS(w.totals(), 1, 0, 0);
    w.add(1, true, false);
    CHECK_TOTALS(w.totals(), 1, 1, 0);
  }
  SECTION("clear empties it") {
    for (int i = 0; i < 5; ++i) w.add(4, true, true);
    CHECK_TOTALS(w.totals(), 4, 4, 4);
    w.clear();
    CHECK_TOTALS(w.totals(), 0, 0, 0);
    w.add(4, false, true);
    CHECK_TOTALS(w.totals(), 1, 0, 1);
  }
  SECTION("the largest window, over several wraps and across 64-bit words") {
    const std::uint32_t n = cb::kMaxCountWindow;
    std::vector<std::pair<bool, bool>> all;
    std::mt19937_64 g(7);
    for (std::uint32_t i = 0; i < 3 * n + 17; ++i) {
      const bool failed = (g() & 3) == 0;
      const bool slow = (g() % 5) == 0;
      w.add(n, failed, slow);
      all.emplace_back(failed, slow);
      if (i % 97 == 0 || i + 1 == 3 * n + 17) {
        std::uint64_t calls = 0, failures = 0, slows = 0;
        for (std::size_t j = all.size() > n ? all.size() - n : 0; j < all.size(); ++j) {
          ++calls;
          failures += all[j].first;
          slows += all[j].second;
        }
        INFO("after call " << i);
        CHECK_TOTALS(w.totals(), calls, failures, slows);
      }
    }
  }
}

TEST_CASE("CountWindow matches a brute-force count for every size", "[window]") {
  std::mt19937_64 g(11);
  for (std::uint32_t n : {1u, 2u, 3u, 5u, 63u, 64u, 65u, 100u, 128u, 1000u}) {
    cb::CountWindow w;
    std::vector<std::pair<bool, bool>> all;
    for (std::uint32_t i = 0; i < 3 * n + 5; ++i) {
      const bool failed = (g() & 1) != 0;
      const bool slow = (g() & 1) != 0;
      w.add(n, failed, slow);
      all.emplace_back(failed, slow);
      std::uint64_t calls = 0, failures = 0, slows = 0;
      for (std::size_t j = all.size() > n ? all.size() - n : 0; j < all.size(); ++j) {
        ++calls;
        failures += all[j].first;
        slows += all[j].second;
      }
      const WindowTotals t = w.totals();
      if (t.calls != calls || t.failures != failures || t.slow != slows) {
        INFO("size " << n << ", after call " << i);
        CHECK_TOTALS(t, calls, failures, slows);
        break;
      }
    }
  }
}

TEST_CASE("TimeWindow holds the last ten buckets", "[window]") {
  const Nanos width = 100;  // a window of 1000 ns
  cb::TimeWindow w;
  CHECK_TOTALS(w.totals_at(width, 0), 0, 0, 0);

  SECTION("calls stay while their bucket is one of the last ten") {
    w.add(width, 0, true, false);   // bucket 0
    w.add(width, 99, false, true);  // bucket 0
    w.add(width, 100, true, true);  // bucket 1
    CHECK_TOTALS(w.totals_at(width, 100), 3, 2, 2);
    CHECK_TOTALS(w.totals_at(width, 999), 3, 2, 2);   // bucket 9: 0 is still in
    CHECK_TOTALS(w.totals_at(width, 1000), 1, 1, 1);  // bucket 10: 0 fell out
    CHECK_TOTALS(w.totals_at(width, 1099), 1, 1, 1);
    CHECK_TOTALS(w.totals_at(width, 1100), 0, 0, 0);  // bucket 11: 1 fell out
  }
  SECTION("totals_at does not change the window") {
    w.add(width, 50, true, false);
    w.add(width, 250, false, false);
    CHECK_TOTALS(w.totals_at(width, 5000), 0, 0, 0);  // far later: empty
    CHECK_TOTALS(w.totals_at(width, 1100), 1, 0, 0);
    CHECK_TOTALS(w.totals_at(width, 250), 2, 1, 0);  // still all there
    w.add(width, 300, true, true);
    CHECK_TOTALS(w.totals_at(width, 300), 3, 2, 1);
  }
  SECTION("adding moves the window: old buckets are emptied") {
    w.add(width, 0, true, true);
    w.add(width, 500, true, false);
    w.add(width, 1000, false, false);  // bucket 10: bucket 0 leaves
    CHECK_TOTALS(w.totals_at(width, 1000), 2, 1, 0);
    w.add(width, 1550, false, true);  // bucket 15: bucket 5 leaves
    CHECK_TOTALS(w.totals_at(width, 1550), 2, 0, 1);
  }
  SECTION("a jump of exactly the window length empties it") {
    for (Nanos t = 0; t < 1000; t += 50) w.add(width, t, true, false);
    CHECK_TOTALS(w.totals_at(width, 999), 20, 20, 0);
    w.add(width, 1900, false, true);  // bucket 19: buckets 0..9 all left
    CHECK_TOTALS(w.totals_at(width, 1900), 1, 0, 1);
  }
  SECTION("a jump longer than the window leaves only the new call") {
    for (Nanos t = 0; t < 1000; t += 10) w.add(width, t, t % 20 == 0, t % 30 == 0);
    w.add(width, 123456789, true, true);
    CHECK_TOTALS(w.totals_at(width, 123456789), 1, 1, 1);
    w.add(width, 123456789 + 50, false, false);
    CHECK_TOTALS(w.totals_at(width, 123456789 + 50), 2, 1, 1);
    CHECK_TOTALS(w.totals_at(width, 123456789 + 1000), 1, 0, 0);  // bucket +1 is in
    CHECK_TOTALS(w.totals_at(width, 123456789 + 1100), 0, 0, 0);
  }
  SECTION("clear empties it, even at a later time") {
    w.add(width, 10, true, true);
    w.clear();
    CHECK_TOTALS(w.totals_at(width, 10), 0, 0, 0);
    w.add(width, 20, false, false);
    CHECK_TOTALS(w.totals_at(width, 20), 1, 0, 0);
    w.clear();
    w.add(width, 1000000, true, false);
    CHECK_TOTALS(w.totals_at(width, 1000000), 1, 1, 0);
  }
  SECTION("buckets of one nanosecond") {
    w.add(1, 5, true, false);
    w.add(1, 14, false, false);
    CHECK_TOTALS(w.totals_at(1, 14), 2, 1, 0);
    CHECK_TOTALS(w.totals_at(1, 15), 1, 0, 0);
  }
}

TEST_CASE("TimeWindow matches a brute-force count over random times", "[window]") {
  std::mt19937_64 g(3);
  for (Nanos width : {Nanos{1}, Nanos{7}, Nanos{100}, Nanos{6000000000}}) {
    cb::TimeWindow w;
    struct Call {
      Nanos at;
      bool failed, slow;
    };
    std::vector<Call> calls;
    Nanos now = static_cast<Nanos>(g() % 1000);
    bool ok = true;
    for (int i = 0; i < 3000 && ok; ++i) {
      // Steps from nothing to a few windows, often within one bucket.
      const std::uint64_t r = g() % 10;
      const std::uint64_t span = static_cast<std::uint64_t>(width) * (r < 5   ? 1
                                                                      : r < 9 ? 10
                                                                              : 40);
      now += static_cast<Nanos>(g() % (span + 1));
      if (g() % 3 != 0) {
        const bool failed = (g() & 1) != 0, slow = (g() % 3) == 0;
        w.add(width, now, failed, slow);
        calls.push_back({now, failed, slow});
      }
      const Nanos later =
          now + static_cast<Nanos>(g() % (static_cast<std::uint64_t>(width) * 12));
      for (Nanos at : {now, later}) {
        std::uint64_t n = 0, f = 0, s = 0;
        const std::int64_t k = at / width;
        for (const Call& c : calls) {
          const std::int64_t kc = c.at / width;
          if (kc > k - 10 && kc <= k) {
            ++n;
            f += c.failed;
            s += c.slow;
          }
        }
        const WindowTotals t = w.totals_at(width, at);
        if (t.calls != n || t.failures != f || t.slow != s) {
          INFO("width " << width << ", step " << i << ", at " << at);
          CHECK_TOTALS(t, n, f, s);
          ok = false;
          break;
        }
      }
    }
    CHECK(ok);
  }
}
