// Writes the fuzzer's seed corpus (tests/cpp/fuzz_corpus/) deterministically:
//
//   make -C tests/cpp fuzz-corpus
//
// Each seed is one configuration family (written field by field in the byte
// format of fuzz_decode.hpp) followed by either a scripted operation pattern
// (trip and recover, expiring probes, late results, manual states,
// reconfigure while half-open, walking time across window and history
// buckets, ramp-up) or random bytes from a fixed-seed generator (any bytes
// decode to operations). Same bytes on every run and every platform.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fuzz_decode.hpp"

namespace {

using cbfuzz::Op;
using Bytes = std::vector<std::uint8_t>;

void put64(Bytes& b, std::uint64_t v) {
  for (int k = 0; k < 8; ++k) b.push_back(static_cast<std::uint8_t>(v >> (8 * k)));
}
void put_f64(Bytes& b, double d) {
  std::uint64_t v;
  std::memcpy(&v, &d, sizeof v);
  put64(b, v);
}

struct Family {
  const char* name;
  Bytes config;  // the config bytes, then the start-time byte(s)
};

// Field bytes, in the order ConfigDecoder::field reads them (see there).
Bytes family_bytes(std::uint8_t scale, std::initializer_list<std::uint8_t> fields,
                   std::uint64_t seed, std::initializer_list<std::uint8_t> start,
                   std::uint8_t bulkhead = 0) {
  Bytes b{scale};
  b.insert(b.end(), fields);
  put64(b, seed);         // field 14
  b.push_back(bulkhead);  // field 15: 0 none, 1 to 4 permits, a multiple of 5 share(0.5)
  b.insert(b.end(), start);
  return b;
}

std::vector<Family> families() {
  std::vector<Family> f;
  // The defaults (5 consecutive failures, 30 s: the article's R6 class).
  f.push_back({"defaults", {0xFF, 0}});
  // 1 s scale: threshold 5, recovery 1 s, rate 0.5 over a count window of
  // 10 with minimum_calls 4.
  f.push_back({"count_rate",
               family_bytes(5, {3, 1, 0, 1, 0, 0, 5, 0, 3, 200, 200, 0, 200, 0, 0, 0, 0},
                            11, {3})});
  // 1 ms scale: threshold Inf, recovery 0.5 ms, time window of 10 ms (min
  // 5), slow calls above 1 ms with rate 0.5, 3 probes expiring after 2 ms,
  // backoff 2 capped at 10x, jitter 0.5, ramp-up 1 ms.
  f.push_back({"time_slow", family_bytes(3, {6, 2, 200, 1, 0, 4, 0, 4, 0, 1,
                                             0, 1, 3,   0, 3, 4, 5, 4, 1, 1},
                                         22, {1, 0x34, 0x12})});
  // 1 ns scale: threshold 1, recovery 1 ns, rate 1e-9 over 1024 calls (min
  // 1), slow above 4.9e-10 s (0 ns) at rate 1, 32 probes expiring after 1 ns,
  // backoff 1e6 up to 1e9 s, jitter 1, ramp-up 0.
  f.push_back({"nanoseconds", family_bytes(0, {0, 5, 0, 5, 0, 0, 8, 0, 0, 0, 7,
                                               0, 0, 5, 0, 5, 7, 7, 5, 1, 0},
                                           33, {0})});
  // 1e9 s scale: everything at the limits (1e9 s timeouts, time window of
  // 1e9 s), start near the clock limit.
  f.push_back({"huge", family_bytes(9, {1, 8, 0, 0, 1, 0, 8, 0, 39, 0, 8,
                                        0, 0, 2, 0, 8, 5, 3, 3, 1,  8},
                                    44, {2, 0, 0, 0, 0, 0, 0, 0x40, 0x37})});
  // 30 s, threshold 5, backoff 2 capped at 60 s (the defaults plus backoff).
  f.push_back(
      {"backoff",
       family_bytes(6, {3, 1, 200, 0, 250, 250, 200, 200, 0, 200, 4, 4, 0, 0}, 55, {3})});
  // 0.1 s scale: recovery 0, count window 1, slow rule 0.3, backoff 10,
  // jitter 128/255, ramp-up.
  f.push_back(
      {"zero_recovery", family_bytes(4, {0, 0, 200, 0, 0, 0, 0,   0,   0, 1,  0,
                                         2, 1, 0,   0, 6, 0, 200, 128, 1, 11, 128},
                                     66, {1, 0xff, 0xff})});
  // The backoff family with a bulkhead of 2 permits.
  f.push_back(
      {"bulkhead", family_bytes(6, {3, 1, 200, 0, 250, 250, 200, 200, 0, 200, 4, 4, 0, 0},
                                77, {3}, 2)});
  // An invalid configuration (failure_threshold 2.5): the input ends there.
  {
    Bytes b{5, 8};
    put_f64(b, 2.5);
    f.push_back({"invalid", b});
  }
  return f;
}

// Scripted operation patterns.
struct Script {
  Bytes b;
  void op(Op o) { b.push_back(cbfuzz::op_byte(o)); }
  void acquire() { op(Op::Acquire); }
  // lease (Run::probe_lease): 0 zero, 1 one ns, 2 rt, 3 rt + 1, 4 kNever,
  // 5 negative, 7 u16 us.
  void acquire_lease(std::uint8_t lease, std::initializer_list<std::uint8_t> args = {}) {
    op(Op::AcquireLease);
    b.push_back(lease);
    b.insert(b.end(), args);
  }
  // permit: < 200 picks an outstanding permit; outcome: 0 success, 9
  // failure, 18 ignored; open_for: 0 none (see Run::open_for).
  void record(std::uint8_t permit, std::uint8_t outcome, std::uint8_t open_for = 0) {
    op(Op::Record);
    b.push_back(permit);
    b.push_back(outcome);
    b.push_back(open_for);
  }
  void call(std::uint8_t outcome) {
    acquire();
    record(0, outcome);
  }
  void release(std::uint8_t permit) {
    op(Op::Release);
    b.push_back(permit);
  }
  void note(std::uint8_t outcome) {
    op(Op::Note);
    b.push_back(outcome);
  }
  // advance selectors (Run::delta): 4 open deadline, 4|16 just past it,
  // 6 / 6|16 probe expiry, 7 long after it (past the re-opening), 8 slow, 9 window
  // bucket, 10 ramp end, 11 history bucket, 13 u16 ns (|16: ms).
  void advance(std::uint8_t sel, std::initializer_list<std::uint8_t> args = {}) {
    op(Op::Advance);
    b.push_back(sel);
    b.insert(b.end(), args);
  }
  void snapshot(std::uint8_t sel) {
    op(Op::Snapshot);
    b.push_back(sel);
  }
  void transitions(std::uint8_t after, std::uint8_t max) {
    op(Op::Transitions);
    b.push_back(after);
    b.push_back(max);
  }
};

Bytes trip_and_recover() {
  Script s;
  for (int i = 0; i < 6; ++i) s.call(9);
  s.transitions(0, 64);
  s.advance(4);  // exactly at the deadline: still open
  s.acquire();
  s.advance(1);
  s.acquire();  // probe
  s.acquire();
  s.record(0, 0);
  s.record(0, 0);
  s.snapshot(11);
  for (int i = 0; i < 6; ++i) s.call(9);
  s.advance(4 | 16);
  s.acquire();
  s.record(0, 9, 7);  // failed probe with a hint of rt
  s.advance(4 | 16);
  s.acquire();
  s.record(0, 0);
  s.transitions(3, 10);
  return s.b;
}

Bytes expiring_probes() {
  Script s;
  for (int i = 0; i < 6; ++i) s.call(9);
  s.advance(4 | 16);
  for (int i = 0; i < 4; ++i) s.acquire();
  s.advance(6);
  s.acquire();
  s.advance(6 | 16);  // the oldest probe expires
  s.acquire();
  s.record(0, 0);  // a probe of an older generation: late
  s.release(1);
  s.advance(4 | 16);
  s.acquire();
  s.release(0);
  s.acquire();
  s.record(0, 0);
  return s.b;
}

// Probes leased by the caller (async calls), lost, their expiry noticed at
// once, at the deadline, and long after the re-opening it caused.
Bytes leased_probes() {
  Script s;
  for (int i = 0; i < 6; ++i) s.call(9);
  s.advance(4 | 16);
  s.acquire_lease(2);  // lease of rt
  s.acquire_lease(7, {0x10, 0});
  s.acquire();  // no deadline
  s.snapshot(0);
  s.advance(6);  // exactly at the earliest deadline: not yet
  s.acquire();
  s.advance(7);  // long after: re-opened as of the deadline, and over
  s.acquire_lease(3);
  s.record(0, 0);
  s.record(0, 9);
  s.advance(4 | 16);
  s.acquire_lease(4);  // kNever: the breaker cannot say when a slot frees
  s.acquire();
  s.acquire_lease(5);
  s.record(0, 0);
  s.transitions(0, 64);
  return s.b;
}

Bytes late_results() {
  Script s;
  for (int i = 0; i < 8; ++i) s.acquire();
  for (int i = 0; i < 6; ++i) s.record(0, 9);
  s.record(0, 0);
  s.record(0, 9, 8);
  s.record(250, 0);   // a permit settled before
  s.advance(8 | 16);  // slow
  s.advance(4 | 16);
  s.acquire();
  s.advance(8 | 16);
  s.record(0, 0);  // a slow probe
  s.note(0);
  s.note(9);
  s.note(18);
  return s.b;
}

Bytes manual_states() {
  Script s;
  s.call(0);
  s.acquire();
  s.op(Op::ForceOpen);
  s.acquire();
  s.note(9);
  s.note(0);
  s.record(0, 9);
  s.op(Op::Disable);
  s.call(9);
  s.call(9);
  s.op(Op::Reset);
  s.op(Op::Reset);
  for (int i = 0; i < 6; ++i) s.call(9);
  s.op(Op::Disable);
  s.op(Op::ForceOpen);
  s.op(Op::Reset);
  s.transitions(130, 2);
  s.transitions(0, 0);
  return s.b;
}

Bytes reconfigure_half_open() {
  Script s;
  for (int i = 0; i < 6; ++i) s.call(9);
  s.advance(4 | 16);
  s.acquire();
  s.acquire();
  s.record(0, 0);
  s.op(Op::Reconfigure);  // half_open_max_calls = 1: closes
  s.b.insert(s.b.end(), {0, 8, 0});
  s.call(9);
  s.op(Op::Reconfigure);  // a new window (count of 3)
  s.b.insert(s.b.end(), {0, 4, 0, 2});
  s.op(Op::Reconfigure);  // recovery_timeout and backoff
  s.b.insert(s.b.end(), {128, 1, 3, 10, 4});
  for (int i = 0; i < 6; ++i) s.call(9);
  s.op(Op::Reconfigure);  // a whole new configuration
  s.b.insert(s.b.end(), {200, 0xFF});
  s.acquire();
  return s.b;
}

Bytes walk_buckets() {
  Script s;
  for (int i = 0; i < 70; ++i) {
    s.call(i % 3 == 0 ? 9 : 0);
    s.advance(i % 2 ? 9 : 11);
    if (i % 10 == 0) s.snapshot(11);
  }
  return s.b;
}

Bytes ramp_up() {
  Script s;
  for (int i = 0; i < 6; ++i) s.call(9);
  s.advance(4 | 16);
  for (int i = 0; i < 4; ++i) s.call(0);
  for (int i = 0; i < 40; ++i) {
    s.advance(13, {static_cast<std::uint8_t>(i * 7), 0});
    s.call(0);
  }
  s.advance(10);
  s.call(0);
  return s.b;
}

bool write_file(const std::string& path, const Bytes& b) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(b.data(), 1, b.size(), f) == b.size();
  return std::fclose(f) == 0 && ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIRECTORY\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  struct Pattern {
    const char* name;
    Bytes (*make)();
  };
  const Pattern patterns[] = {{"trip", trip_and_recover},
                              {"expire", expiring_probes},
                              {"late", late_results},
                              {"manual", manual_states},
                              {"reconfigure", reconfigure_half_open},
                              {"buckets", walk_buckets},
                              {"ramp", ramp_up},
                              {"lease", leased_probes}};
  std::mt19937_64 rng(20240601);
  std::size_t files = 0, bytes = 0;
  for (const Family& fam : families()) {
    std::vector<std::pair<std::string, Bytes>> seeds;
    if (std::string(fam.name) == "invalid") {
      seeds.push_back({"", fam.config});
    } else {
      for (const Pattern& p : patterns) {
        Bytes b = fam.config;
        const Bytes ops = p.make();
        b.insert(b.end(), ops.begin(), ops.end());
        seeds.push_back({p.name, b});
      }
      for (int k = 0; k < 2; ++k) {  // random operations
        Bytes b = fam.config;
        const std::size_t n = 200 + rng() % 400;
        for (std::size_t i = 0; i < n; ++i) b.push_back(static_cast<std::uint8_t>(rng()));
        seeds.push_back({"random" + std::to_string(k + 1), b});
      }
    }
    for (const auto& s : seeds) {
      const std::string path =
          dir + "/" + fam.name + (s.first.empty() ? "" : "-" + s.first);
      if (!write_file(path, s.second)) {
        std::fprintf(stderr, "cannot write %s\n", path.c_str());
        return 1;
      }
      ++files;
      bytes += s.second.size();
    }
  }
  std::printf("wrote %zu seeds, %zu bytes, to %s\n", files, bytes, dir.c_str());
  return 0;
}
