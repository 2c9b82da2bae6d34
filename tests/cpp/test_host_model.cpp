// Differential test of the host store across processes: forked processes run
// random operations on one HostBreaker (one segment file, each process its
// own mapping), and the parent replays what they did through the reference
// model (reference_model.hpp), comparing every answer and every snapshot.
//
// The order. Each operation runs inside a test-owned process-shared mutex
// that also appends the operation, its answer and the snapshot taken right
// after it to a journal in shared memory: the journal's order is the order
// the breaker saw. Time is one fake clock in that shared memory, moved on
// under the same mutex, so timestamps grow along the journal. (The mutex
// serialises the operations; the concurrency itself is what the [host] and
// [segment] tests hammer. This one checks that the rules come out the same
// when the state lives in a segment that several processes map at different
// addresses, with lock-free admission and rejections counted later.)
//
// Lock-free rejections. A rejection decided without the lock (CLOSED,
// OPEN before its period ends, FORCED_OPEN, DISABLED) is counted in the
// totals at once (a snapshot adds the pending ones) but enters the activity
// history only when the next locked operation folds it in, at that
// operation's time. The replay predicts which acquires are lock-free from the
// model's state before the call, checks that they committed nothing, and
// builds the history the breaker must show: the model's calls, failures and
// slow calls per bucket, and rejections in the bucket of the operation that
// folded them.
//
//   CB_HOST_MODEL_OPS  operations per process (default 5000)
//   CB_HOST_MODEL_SEED seed of the run (default 20240611)
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <circuitbreaker/circuitbreaker.hpp>
#include <circuitbreaker/host/host_breaker.hpp>

#include "model_compare.hpp"
#include "process_test_support.hpp"
#include "reference_model.hpp"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

namespace cb = circuitbreaker;
using cb::Nanos;
using cb::Outcome;
using cb::State;
using cbproc::ChildReaper;
using cbproc::exited_ok;
using cbproc::SharedAnon;
using cbproc::SharedArray;
using cbproc::spawn;
using cbproc::TempDir;

namespace {

constexpr int kProcs = 4;
constexpr std::size_t kMaxHeld = 12;  // permits a process holds at most
constexpr std::size_t kMaxHistories = 256;
constexpr Nanos kStart = 1000 * cb::kNanosPerSecond;
constexpr Nanos kBucket = cb::kHistoryBucketWidth;

std::uint64_t env_u64(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const unsigned long long x = std::strtoull(v, &end, 0);
  return (end == v || *end != '\0') ? fallback : static_cast<std::uint64_t>(x);
}

enum class Op : std::uint8_t {
  Acquire,
  Record,
  Release,
  Note,
  Reset,
  ForceOpen,
  Disable,
  History
};

const char* op_name(Op op) {
  switch (op) {
    case Op::Acquire: return "acquire";
    case Op::Record: return "record";
    case Op::Release: return "release";
    case Op::Note: return "note";
    case Op::Reset: return "reset";
    case Op::ForceOpen: return "force_open";
    case Op::Disable: return "disable";
    case Op::History: return "history";
  }
  return "?";
}

// One operation as the breaker saw it. Trivially copyable: it lives in an
// anonymous shared mapping.
struct Entry {
  Op op;
  std::uint8_t proc;
  Outcome outcome;  // Record, Note
  bool returned;    // Record, Note: what the breaker returned
  Nanos now;
  Nanos arg;               // Acquire: probe_lease; Record: open_for
  std::int64_t permit_of;  // Record, Release: the entry of the acquire that issued it
  std::uint64_t commits_before, commits_after;
  cb::Admission admission;  // Acquire: the answer; Record, Release: admission.permit
  std::int32_t history;     // History: the index of its record; else -1
  cb::Snapshot snapshot;    // right after the operation, at `now`
};

struct HistoryRecord {
  std::uint64_t n;
  cb::ActivityBucket buckets[cb::kHistoryBuckets];
};

// The journal's head: the mutex that orders everything, the clock, the
// start barrier.
struct Board {
  pthread_mutex_t mutex;
  std::atomic<int> ready, go;
  std::uint64_t count;      // entries written (under the mutex)
  std::uint64_t histories;  // history records written (under the mutex)
  Nanos clock;              // under the mutex
};

struct Scenario {
  const char* name;
  cb::Config config;
};

std::vector<Scenario> scenarios() {
  std::vector<Scenario> out;
  {
    // Consecutive failures, backoff with jitter, three probes, caller leases.
    cb::Config c;
    c.failure_threshold = 3;
    c.recovery_timeout = 0.002;
    c.half_open_max_calls = 3;
    c.backoff_multiplier = 2;
    c.max_recovery_timeout = 0.02;
    c.jitter = 0.3;
    c.rng_seed = 101;
    out.push_back({"consecutive + backoff + jitter", c});
  }
  {
    // Rate rules on a count window, slow calls, a probe deadline, ramp-up.
    cb::Config c;
    c.failure_threshold = std::numeric_limits<double>::infinity();
    c.recovery_timeout = 0.002;
    c.failure_rate_threshold = 0.5;
    c.window_size = 20;
    c.minimum_calls = 5;
    c.slow_call_duration = 0.0005;
    c.slow_call_rate_threshold = 0.8;
    c.half_open_max_calls = 2;
    c.half_open_max_wait = 0.003;
    c.ramp_up = 0.004;
    c.rng_seed = 202;
    out.push_back({"count window rates + slow + probe deadline + ramp-up", c});
  }
  {
    // A time window, one probe, jitter, a short ramp.
    cb::Config c;
    c.failure_threshold = 5;
    c.recovery_timeout = 0.005;
    c.failure_rate_threshold = 0.3;
    c.window_type = cb::WindowType::Time;
    c.window_size = 0.05;
    c.minimum_calls = 4;
    c.jitter = 0.5;
    c.ramp_up = 0.001;
    c.rng_seed = 303;
    out.push_back({"time window + jitter + ramp-up", c});
  }
  return out;
}

// ---------------------------------------------------------------------------
// The processes

class Child {
 public:
  Child(int proc, std::uint64_t seed, std::uint64_t ops, const std::string& path,
        const cb::Config& config, Board& board, SharedArray<Entry>& entries,
        SharedArray<HistoryRecord>& histories)
      : proc_(proc),
        rng_(seed * 7919 + static_cast<std::uint64_t>(proc)),
        ops_(ops),
        path_(path),
        config_(config),
        board_(board),
        entries_(entries),
        histories_(histories) {}

  // An exit code: 0, or what went wrong (the parent reports it).
  int run() {
    const cb::HostBreaker::OpenResult r = hb_.open(path_, config_, kStart);
    if (!r.ok() || r.status != cb::SegmentStatus::Attached) return 2;
    if (!hb_.tracks_owners()) return 3;
    rt_ = hb_.settings().recovery_timeout;
    board_.ready.fetch_add(1);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (board_.go.load() == 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    // Then every permit still held is settled (a process that exits holding
    // a probe is a dead owner, whose probe the host store frees: a rule the
    // model does not have).
    const std::uint64_t bound = ops_ + kMaxHeld + 1;
    for (std::uint64_t k = 0; k < ops_ || !held_.empty(); ++k) {
      if (k >= bound) return 4;
      if (const int err = step(k >= ops_)) return err;
      if (rng_() % 4 == 0) sched_yield();  // let the others in
    }
    return 0;
  }

 private:
  struct Held {
    std::int64_t from;
    cb::Permit permit;
  };

  double unit() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }
  Nanos below(Nanos n) {
    return n <= 0 ? 0 : static_cast<Nanos>(rng_() % static_cast<std::uint64_t>(n));
  }

  Op choose(bool settling) {
    if (settling) return unit() < 0.7 ? Op::Record : Op::Release;
    const double u = unit();
    // FORCED_OPEN and DISABLED last until a reset: leave them soon (as this
    // process last saw the state), so that most operations meet the
    // automatic states.
    if ((last_ == State::ForcedOpen || last_ == State::Disabled) && u < 0.15) {
      return Op::Reset;
    }
    if (held_.empty()) {
      if (u < 0.85) return Op::Acquire;
      if (u < 0.94) return Op::Note;
      if (u < 0.96) return Op::Reset;
      return Op::History;
    }
    if (u < 0.38) return held_.size() >= kMaxHeld ? Op::Record : Op::Acquire;
    if (u < 0.78) return Op::Record;
    if (u < 0.86) return Op::Release;
    if (u < 0.92) return Op::Note;
    if (u < 0.94) return Op::Reset;
    if (u < 0.95) return Op::ForceOpen;
    if (u < 0.96) return Op::Disable;
    return Op::History;
  }

  // How far the shared clock moves before this operation: often not at all,
  // mostly by a fraction of the recovery timeout, sometimes past it, rarely
  // by seconds (across history buckets; far enough, over a run, that old
  // buckets leave the five-minute history).
  Nanos advance() {
    const std::uint64_t r = rng_() % 1000;
    if (r < 300) return 0;
    if (r < 600) return below(rt_ / 50 + 2);
    if (r < 900) return below(rt_ / 4 + 2);
    if (r < 996) return below(2 * rt_ + 2);
    return below(6 * cb::kNanosPerSecond);
  }

  Nanos probe_lease() {
    if (unit() < 0.6) return cb::kNever;
    switch (rng_() % 5) {
      case 0: return 0;
      case 1: return 1;
      case 2: return -1;
      case 3: return rt_;
      default: return below(2 * rt_ + 2);
    }
  }

  Nanos open_for() {
    if (unit() < 0.85) return -1;
    switch (rng_() % 4) {
      case 0: return 0;
      case 1: return rt_;
      case 2: return rt_ + 1;
      default: return below(2 * rt_ + 2);
    }
  }

  Outcome outcome() {
    const double u = unit();
    return u < 0.45 ? Outcome::Success : (u < 0.9 ? Outcome::Failure : Outcome::Ignored);
  }

  int step(bool settling) {
    Op op = choose(settling);
    const Outcome out = outcome();
    const Nanos lease = probe_lease();
    const Nanos hint = open_for();
    const Nanos dt = advance();
    std::size_t pick = 0;
    if (!held_.empty()) {
      // Mostly the oldest first, like calls finishing; sometimes any.
      pick = unit() < 0.5 ? 0 : static_cast<std::size_t>(rng_() % held_.size());
    }

    if (const int rc = ::pthread_mutex_lock(&board_.mutex); rc != 0) {
      if (rc == EOWNERDEAD) {  // a sibling died in it: the run is void, say so
        ::pthread_mutex_consistent(&board_.mutex);
        ::pthread_mutex_unlock(&board_.mutex);
      }
      return 5;
    }
    if (board_.count >= entries_.size()) {
      ::pthread_mutex_unlock(&board_.mutex);
      return 6;
    }
    if (op == Op::History && board_.histories >= histories_.size()) op = Op::Note;
    const std::uint64_t index = board_.count++;
    Entry& e = entries_[index];
    board_.clock += dt;
    const Nanos now = board_.clock;
    e.op = op;
    e.proc = static_cast<std::uint8_t>(proc_);
    e.now = now;
    e.arg = 0;
    e.permit_of = -1;
    e.history = -1;
    e.commits_before = hb_.commits();
    switch (op) {
      case Op::Acquire:
        e.arg = lease;
        e.admission = hb_.acquire(now, lease);
        if (e.admission.permitted) {
          held_.push_back(Held{static_cast<std::int64_t>(index), e.admission.permit});
        }
        break;
      case Op::Record:
      case Op::Release: {
        const Held h = held_[pick];
        held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(pick));
        e.permit_of = h.from;
        e.admission.permit = h.permit;
        if (op == Op::Record) {
          e.outcome = settling ? Outcome::Success : out;
          e.arg = hint;
          e.returned = hb_.record(h.permit, e.outcome, now, hint);
        } else {
          hb_.release(h.permit, now);
        }
        break;
      }
      case Op::Note:
        e.outcome = out;
        e.returned = hb_.note(out, now);
        break;
      case Op::Reset: hb_.reset(now); break;
      case Op::ForceOpen: hb_.force_open(now); break;
      case Op::Disable: hb_.disable(now); break;
      case Op::History: {
        e.history = static_cast<std::int32_t>(board_.histories++);
        HistoryRecord& rec = histories_[static_cast<std::size_t>(e.history)];
        rec.n = hb_.history(now, rec.buckets);
        break;
      }
    }
    e.commits_after = hb_.commits();
    e.snapshot = hb_.snapshot(now);
    last_ = e.snapshot.state;
    ::pthread_mutex_unlock(&board_.mutex);
    return 0;
  }

  int proc_;
  std::mt19937_64 rng_;
  std::uint64_t ops_;
  std::string path_;
  cb::Config config_;
  Board& board_;
  SharedArray<Entry>& entries_;
  SharedArray<HistoryRecord>& histories_;
  cb::HostBreaker hb_;
  Nanos rt_ = 1;
  State last_ = State::Closed;
  std::vector<Held> held_;
};

// ---------------------------------------------------------------------------
// The replay

// Whether HostBreaker::acquire() decides without the lock, from the state
// before the call (admission.hpp's admit_without_writing() cases). With every
// operation serialised the seqlock read never fails, so this is exact.
bool lock_free(const cbmodel::Model& m, Nanos now) {
  switch (m.state()) {
    case State::Closed: return !m.ramping();
    case State::Open: return now <= m.open_deadline();
    case State::ForcedOpen:
    case State::Disabled: return true;
    case State::HalfOpen: return false;
  }
  return false;
}

class Replay {
 public:
  Replay(const cb::Config& config, const SharedArray<Entry>& entries, std::size_t n,
         const SharedArray<HistoryRecord>& histories)
      : model_(config, kStart),
        entries_(entries),
        n_(n),
        histories_(histories),
        permits_(n) {}

  // Replays every entry; the first divergence as text, "" when none.
  std::string run() {
    for (std::size_t i = 0; i < n_; ++i) {
      const std::string diff = step(i);
      if (!diff.empty()) return report(i, diff);
    }
    return std::string();
  }

  // After run(): the final state, read by the parent's own HostBreaker (the
  // history folds what is pending, at `now`).
  std::string final_check(cb::HostBreaker& hb, Nanos now) {
    cbcompare::Diff d;
    cbcompare::compare(d, hb.snapshot(now), model_.snapshot(now));
    cb::Transition log[cb::TransitionLog::kCapacity];
    const std::size_t k = hb.transitions_since(0, log, cb::TransitionLog::kCapacity);
    cbcompare::compare_log(d, log, k,
                           model_.transitions_since(0, cb::TransitionLog::kCapacity));
    fold(now);
    cb::ActivityBucket buf[cb::kHistoryBuckets];
    const std::size_t h = hb.history(now, buf);
    cbcompare::compare_history(d, buf, h, expected_history(now));
    return d.text();
  }

  std::uint64_t lock_free_acquires = 0, locked_acquires = 0, folds = 0;
  std::uint64_t rejections_pending = 0;
  std::uint64_t in_state[cb::kStateCount] = {};  // operations that left it there
  std::uint64_t changes[cb::kStateCount][cb::kStateCount] = {};  // by one operation

 private:
  std::string step(std::size_t i) {
    const Entry& e = entries_[i];
    cbcompare::Diff d;
    switch (e.op) {
      case Op::Acquire: {
        const bool free = lock_free(model_, e.now);
        if (!free) fold(e.now);
        const cbmodel::Admission m = model_.acquire(e.now, e.arg);
        cbcompare::compare(d, e.admission, m);
        if (m.permitted) permits_[i] = m.permit;
        if (free) {
          ++lock_free_acquires;
          if (e.commits_after != e.commits_before) {
            d.note("a lock-free acquire committed " +
                   std::to_string(e.commits_after - e.commits_before) + " time(s)");
          }
          if (!m.permitted) {
            ++pending_;
            ++rejections_pending;
          }
        } else {
          ++locked_acquires;
          if (!m.permitted) ++rejected_at_[e.now / kBucket];
        }
        break;
      }
      case Op::Record: {
        fold(e.now);
        const bool m = model_.record(permit(e), e.outcome, e.now, e.arg);
        d.check("record() returned", e.returned, m);
        break;
      }
      case Op::Release:
        fold(e.now);
        model_.release(permit(e), e.now);
        break;
      case Op::Note: {
        fold(e.now);
        const bool m = model_.note(e.outcome, e.now);
        d.check("note() returned", e.returned, m);
        break;
      }
      case Op::Reset:
        fold(e.now);
        model_.reset(e.now);
        break;
      case Op::ForceOpen:
        fold(e.now);
        model_.force_open(e.now);
        break;
      case Op::Disable:
        fold(e.now);
        model_.disable(e.now);
        break;
      case Op::History: {
        fold(e.now);
        const HistoryRecord& rec = histories_[static_cast<std::size_t>(e.history)];
        cbcompare::compare_history(d, rec.buckets, static_cast<std::size_t>(rec.n),
                                   expected_history(e.now));
        break;
      }
    }
    cbcompare::compare(d, e.snapshot, model_.snapshot(e.now));
    const State after = model_.state();
    ++in_state[static_cast<int>(after)];
    if (i > 0 && entries_[i - 1].snapshot.state != after) {
      ++changes[static_cast<int>(entries_[i - 1].snapshot.state)]
               [static_cast<int>(after)];
    }
    return d.text();
  }

  const cbmodel::Permit& permit(const Entry& e) const {
    return permits_[static_cast<std::size_t>(e.permit_of)];
  }

  // A locked operation at `now` folds the pending lock-free rejections into
  // the history bucket of `now`.
  void fold(Nanos now) {
    if (pending_ == 0) return;
    rejected_at_[now / kBucket] += pending_;
    pending_ = 0;
    ++folds;
  }

  // The history the breaker must show at `now`: the model's calls, failures
  // and slow calls; rejections where they were folded.
  std::vector<cbmodel::ActivityBucket> expected_history(Nanos now) const {
    const std::int64_t k = now / kBucket;
    const std::int64_t first =
        std::max<std::int64_t>(0, k - static_cast<std::int64_t>(cb::kHistoryBuckets) + 1);
    std::map<std::int64_t, cbmodel::ActivityBucket> by_index;
    for (cbmodel::ActivityBucket b : model_.history(now)) {
      b.rejected = 0;
      by_index[b.index] = b;
    }
    for (auto it = rejected_at_.lower_bound(first);
         it != rejected_at_.end() && it->first <= k; ++it) {
      cbmodel::ActivityBucket& b = by_index[it->first];
      b.index = it->first;
      b.rejected = it->second;
    }
    std::vector<cbmodel::ActivityBucket> out;
    for (const auto& kv : by_index) {
      const cbmodel::ActivityBucket& b = kv.second;
      if (b.calls != 0 || b.failures != 0 || b.slow != 0 || b.rejected != 0) {
        out.push_back(b);
      }
    }
    return out;
  }

  std::string describe(std::size_t i) const {
    const Entry& e = entries_[i];
    std::ostringstream o;
    o << "[" << i << "] p" << int{e.proc} << " t=" << e.now << " " << op_name(e.op);
    switch (e.op) {
      case Op::Acquire:
        if (e.arg != cb::kNever) o << "(probe_lease=" << e.arg << ")";
        if (e.admission.permitted) {
          o << " -> permit gen " << e.admission.permit.generation << " kind "
            << static_cast<int>(e.admission.permit.kind) << " lease "
            << e.admission.permit.lease;
        } else {
          o << " -> rejected " << cb::rejection_name(e.admission.rejection);
        }
        break;
      case Op::Record:
        o << "(permit of [" << e.permit_of << "], " << cbcompare::outcome_name(e.outcome);
        if (e.arg != -1) o << ", open_for=" << e.arg;
        o << ") -> " << (e.returned ? "recorded" : "not recorded");
        break;
      case Op::Release: o << "(permit of [" << e.permit_of << "])"; break;
      case Op::Note:
        o << "(" << cbcompare::outcome_name(e.outcome) << ") -> "
          << (e.returned ? "recorded" : "not recorded");
        break;
      default: break;
    }
    o << "  | state after " << cb::state_name(e.snapshot.state) << ", commits "
      << e.commits_before << "->" << e.commits_after;
    return o.str();
  }

  std::string report(std::size_t i, const std::string& diff) const {
    std::ostringstream o;
    o << "divergence at journal entry " << i << " of " << n_ << "; the entries before:\n";
    const std::size_t from = i > 40 ? i - 40 : 0;
    for (std::size_t k = from; k <= i; ++k) o << "  " << describe(k) << "\n";
    o << "differences after entry " << i << ":\n" << diff;
    return o.str();
  }

  cbmodel::Model model_;
  const SharedArray<Entry>& entries_;
  std::size_t n_;
  const SharedArray<HistoryRecord>& histories_;
  std::vector<cbmodel::Permit> permits_;  // by the entry of the acquire
  std::uint64_t pending_ = 0;             // lock-free rejections not folded yet
  std::map<std::int64_t, std::uint64_t> rejected_at_;  // bucket -> rejections
};

}  // namespace

TEST_CASE("processes sharing a HostBreaker agree with the reference model",
          "[host][host-model]") {
  const std::uint64_t seed = env_u64("CB_HOST_MODEL_SEED", 20240611);
  const std::uint64_t ops = env_u64("CB_HOST_MODEL_OPS", 5000);
  const std::vector<Scenario> all = scenarios();
  const std::size_t which = static_cast<std::size_t>(GENERATE(0, 1, 2));
  const Scenario& sc = all[which];
  INFO("scenario: " << sc.name << "; " << cbcompare::describe(sc.config)
                    << "; CB_HOST_MODEL_SEED=" << seed << " CB_HOST_MODEL_OPS=" << ops);
  REQUIRE_FALSE(cb::validate(sc.config));

  TempDir dir;
  REQUIRE(dir.ok());
  const std::string path = dir.file("model");
  cb::HostBreaker hb;
  REQUIRE(hb.open(path, sc.config, kStart).status == cb::SegmentStatus::Created);

  SharedAnon<Board> board;
  REQUIRE(board.get() != nullptr);
  {
    pthread_mutexattr_t attr;
    REQUIRE(::pthread_mutexattr_init(&attr) == 0);
    REQUIRE(::pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED) == 0);
    // Robust: a child that dies in it fails the test instead of hanging it.
    REQUIRE(::pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST) == 0);
    REQUIRE(::pthread_mutex_init(&board->mutex, &attr) == 0);
    ::pthread_mutexattr_destroy(&attr);
  }
  board->clock = kStart;
  const std::size_t capacity = static_cast<std::size_t>(kProcs * (ops + kMaxHeld + 1));
  SharedArray<Entry> entries(capacity);
  SharedArray<HistoryRecord> histories(kMaxHistories);
  REQUIRE(entries.size() == capacity);
  REQUIRE(histories.size() == kMaxHistories);

  ChildReaper children;
  for (int p = 0; p < kProcs; ++p) {
    children.add(spawn([&, p]() {
      Child child(p, seed + which, ops, path, sc.config, *board.get(), entries,
                  histories);
      return child.run();
    }));
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (board->ready.load() < kProcs && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  REQUIRE(board->ready.load() == kProcs);
  board->go.store(1);
  for (int status : children.wait_all(std::chrono::seconds(120))) {
    INFO("child exit status " << status);
    CHECK(exited_ok(status));
  }
  ::pthread_mutex_destroy(&board->mutex);

  const std::size_t n = static_cast<std::size_t>(board->count);
  REQUIRE(n >= static_cast<std::size_t>(kProcs) * ops);
  std::size_t switches = 0;
  for (std::size_t i = 1; i < n; ++i) switches += entries[i].proc != entries[i - 1].proc;

  Replay replay(sc.config, entries, n, histories);
  const std::string diff = replay.run();
  if (!diff.empty()) std::fprintf(stderr, "%s\n", diff.c_str());
  CHECK(diff.empty());
  if (diff.empty()) {
    const std::string end = replay.final_check(hb, board->clock + 1);
    if (!end.empty()) std::fprintf(stderr, "final state:\n%s\n", end.c_str());
    CHECK(end.empty());
  }
  const cb::Snapshot s = hb.snapshot(board->clock + 1);
  std::printf(
      "host model [%s]: %zu operations by %d processes (%zu switches), "
      "%" PRIu64 " lock-free acquires (%" PRIu64 " rejections folded later, in %" PRIu64
      " folds), %" PRIu64 " locked; opened %" PRIu64 " times, %" PRIu64
      " rejected, %" PRIu64 " late, %" PRIu64 " expired, last transition %" PRIu64 "\n",
      sc.name, n, kProcs, switches, replay.lock_free_acquires, replay.rejections_pending,
      replay.folds, replay.locked_acquires, s.totals.times_opened, s.totals.rejected,
      s.totals.late, s.totals.expired, s.last_transition);
  std::printf("  operations leaving the breaker");
  for (int k = 0; k < cb::kStateCount; ++k) {
    std::printf(" %s %" PRIu64, cb::state_name(static_cast<State>(k)),
                replay.in_state[k]);
  }
  std::printf("\n  state changes:");
  for (int from = 0; from < cb::kStateCount; ++from) {
    for (int to = 0; to < cb::kStateCount; ++to) {
      if (replay.changes[from][to] != 0) {
        std::printf(" %s->%s %" PRIu64, cb::state_name(static_cast<State>(from)),
                    cb::state_name(static_cast<State>(to)), replay.changes[from][to]);
      }
    }
  }
  std::printf("\n");
  std::fflush(stdout);
  // The run reached what it is meant to test.
  CHECK(switches >= 100);
  CHECK(replay.lock_free_acquires > 0);
  CHECK(replay.locked_acquires > 0);
  CHECK(replay.rejections_pending > 0);
  CHECK(s.totals.times_opened > 10);
  CHECK(s.last_transition > 50);
  CHECK(hb.healthy());
}
