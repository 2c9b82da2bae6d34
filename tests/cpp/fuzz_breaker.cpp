// libFuzzer target: circuitbreaker::Breaker against the reference model.
//
// The input decodes (fuzz_decode.hpp) into a valid configuration, a start
// time and a sequence of operations: acquire, with or without a probe_lease;
// record success / failure /
// ignored of an outstanding permit or of one settled before or issued in an
// older generation, with or without an open_for hint; release; note; advance
// the clock (exact deadlines of the current state, bucket boundaries, or
// arbitrary amounts); reset; force_open; disable; reconfigure (one or two
// fields changed, or a new configuration); snapshot at a later time;
// transitions_since(after, max). Each operation runs on both, and after each
// one the admission, the snapshot, the transition log and the activity
// history are compared exactly as the [model] test compares them
// (model_compare.hpp). On any difference the configuration and operations are
// printed and the process aborts, which libFuzzer reports as a crash; the
// sanitizers (ASan, UBSan: signed overflow, shifts, out-of-range casts) abort
// on undefined behaviour in the core or the model.
//
//   make -C tests/cpp fuzz FUZZ_SECONDS=60
//   build/fuzz/fuzz_breaker CRASH_FILE      replay one input (prints the ops)
//   CB_FUZZ_VERBOSE=1 build/fuzz/fuzz_breaker FILE   print the ops even when
//                                                    nothing diverges
#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <circuitbreaker/circuitbreaker.hpp>

#include "fuzz_decode.hpp"
#include "model_compare.hpp"
#include "reference_model.hpp"

namespace {

namespace cb = circuitbreaker;
using cb::Config;
using cb::Nanos;
using cb::Outcome;
using cb::State;
using cbfuzz::Op;

// The core promises exact arithmetic for clock readings below
// kMaxClockSeconds: the fuzzer goes right up to it.
constexpr Nanos kClockLimit = static_cast<Nanos>(cb::kMaxClockSeconds * 1e9);
constexpr std::size_t kMaxPermits = 256;  // permits kept to settle later
constexpr std::size_t kMaxOps = 4096;

struct Held {
  cb::Permit real;
  cbmodel::Permit model;
};

struct Logged {
  Op type = Op::Acquire;
  Nanos now = 0;
  std::size_t permit = 0;
  bool permitted = false, model_permitted = false, kept = false;
  bool recorded = false;  // Record, Note: what the breaker returned
  Outcome outcome = Outcome::Success;
  Nanos value = -1;  // Advance / Snapshot: delta; Record: open_for
  std::size_t config = 0;
  bool skipped = false;  // Reconfigure: the decoded configuration was invalid
  std::uint64_t after = 0;
  std::size_t max = 0;
};

const char* op_name(Op op) {
  switch (op) {
    case Op::Acquire: return "acquire";
    case Op::AcquireLease: return "acquire";
    case Op::Record: return "record";
    case Op::Release: return "release";
    case Op::Note: return "note";
    case Op::Advance: return "advance";
    case Op::Reset: return "reset";
    case Op::ForceOpen: return "force_open";
    case Op::Disable: return "disable";
    case Op::Reconfigure: return "reconfigure";
    case Op::Snapshot: return "snapshot";
    case Op::Transitions: return "transitions_since";
    case Op::HealthClaim: return "claim_health_check";
    case Op::HealthResult: return "health_result";
    default: return "?";
  }
}

class Run {
 public:
  Run(const std::uint8_t* data, std::size_t size) : r_(data, size), dec_(r_) {}

  void go() {
    const std::optional<Config> c = dec_.fresh();
    if (!c) return;  // not a valid configuration: nothing to run
    configs_.push_back(*c);
    now_ = start_time();
    start_ = now_;
    cb::Breaker breaker(cb::make_settings(*c), now_);
    cbmodel::Model model(*c, now_);
    b_ = &breaker;
    m_ = &model;
    check(now_, nullptr, nullptr, 0, 64);
    while (!r_.done() && ops_.size() < kMaxOps) step();
    if (std::getenv("CB_FUZZ_VERBOSE") != nullptr) report("");
  }

 private:
  Nanos start_time() {
    const std::uint8_t s = r_.u8();
    switch (s % 4) {
      case 0: return 0;
      case 1: return static_cast<Nanos>(r_.u16()) * 1000;
      case 2:
        return static_cast<Nanos>(r_.u64() % static_cast<std::uint64_t>(kClockLimit));
      default: return 1000000000000;  // 1000 s
    }
  }

  void step() {
    Logged op;
    op.type = cbfuzz::kOpTable[r_.u8() % cbfuzz::kOpCodes];
    cb::Admission real_adm;
    cbmodel::Admission model_adm;
    bool admitted = false;
    bool returned = false, model_recorded = false;
    std::uint64_t after = 0;
    std::size_t max = 64;
    Nanos at = now_;
    std::string health_diff;
    switch (op.type) {
      case Op::Acquire:
      case Op::AcquireLease: {
        op.value = op.type == Op::AcquireLease ? probe_lease(r_.u8()) : cb::kNever;
        real_adm = b_->acquire(now_, op.value);
        model_adm = m_->acquire(now_, op.value);
        admitted = true;
        op.permitted = real_adm.permitted;
        op.model_permitted = model_adm.permitted;
        if (real_adm.permitted && model_adm.permitted && permits_.size() < kMaxPermits) {
          op.permit = permits_.size();
          op.kept = true;
          permits_.push_back(Held{real_adm.permit, model_adm.permit});
          outstanding_.push_back(op.permit);
        }
        break;
      }
      case Op::Record: {
        op.permit = take_permit(r_.u8());
        op.outcome = cbfuzz::decode_outcome(r_.u8());
        op.value = open_for(r_.u8());
        const Held& h = permits_[op.permit];
        op.recorded = b_->record(h.real, op.outcome, now_, op.value);
        model_recorded = m_->record(h.model, op.outcome, now_, op.value);
        returned = true;
        break;
      }
      case Op::Release: {
        op.permit = take_permit(r_.u8());
        const Held& h = permits_[op.permit];
        b_->release(h.real, now_);
        m_->release(h.model, now_);
        break;
      }
      case Op::Note:
        op.outcome = cbfuzz::decode_outcome(r_.u8());
        op.recorded = b_->note(op.outcome, now_);
        model_recorded = m_->note(op.outcome, now_);
        returned = true;
        break;
      case Op::Advance:
        op.value = delta();
        now_ += op.value;
        at = now_;
        break;
      case Op::Reset:
        b_->reset(now_);
        m_->reset(now_);
        break;
      case Op::ForceOpen:
        b_->force_open(now_);
        m_->force_open(now_);
        break;
      case Op::Disable:
        b_->disable(now_);
        m_->disable(now_);
        break;
      case Op::Reconfigure: {
        const std::optional<Config> next = dec_.mutate(configs_.back());
        if (!next) {
          op.skipped = true;
          break;
        }
        configs_.push_back(*next);
        op.config = configs_.size() - 1;
        b_->reconfigure(cb::make_settings(*next), now_);
        m_->reconfigure(*next, now_);
        break;
      }
      case Op::Snapshot:
        op.value = delta();
        at = now_ + op.value;
        break;
      case Op::Transitions: {
        const std::uint8_t s = r_.u8();
        const std::uint64_t last = m_->snapshot(now_).last_transition;
        if (s < 128) {
          after = last >= s % 8u ? last - s % 8u : 0;
        } else if (s < 250) {
          after = s - 128u;
        } else {
          after = r_.u64();
        }
        max = r_.u8() % 70u;
        break;
      }
      case Op::HealthClaim: {
        HeldClaim h{b_->claim_health_check(now_), m_->claim_health(now_)};
        op.permitted = h.real.granted;
        op.model_permitted = h.model.granted;
        if (h.real.granted != h.model.granted ||
            (h.real.granted && h.real.generation != h.model.generation) ||
            (!h.real.granted && h.real.retry_after != h.model.retry_after)) {
          health_diff = "  health claim: breaker " + cbcompare::show(h.real.granted) +
                        " wait " + cbcompare::show(h.real.retry_after) + ", model " +
                        cbcompare::show(h.model.granted) + " wait " +
                        cbcompare::show(h.model.retry_after) + "\n";
        }
        if (claims_.size() < kMaxPermits) claims_.push_back(h);
        break;
      }
      case Op::HealthResult: {
        const std::uint8_t which = r_.u8();
        const bool passed = (r_.u8() & 1) != 0;
        op.outcome = passed ? Outcome::Success : Outcome::Failure;
        if (claims_.empty()) {
          op.skipped = true;
          break;
        }
        const std::size_t i = which % claims_.size();
        const HeldClaim h = claims_[i];
        claims_.erase(claims_.begin() + static_cast<std::ptrdiff_t>(i));
        const int real = static_cast<int>(b_->health_result(h.real, passed, now_));
        const int model = static_cast<int>(m_->health_result(h.model, passed, now_));
        if (real != model) {
          health_diff = "  health result: breaker " + cbcompare::show(real) + ", model " +
                        cbcompare::show(model) + "\n";
        }
        break;
      }
      default: break;
    }
    op.now = now_;
    op.after = after;
    op.max = max;
    ops_.push_back(op);
    std::string extra = health_diff;
    if (returned && op.recorded != model_recorded) {
      extra += std::string("  recorded: breaker ") + cbcompare::show(op.recorded) +
               ", model " + cbcompare::show(model_recorded) + "\n";
    }
    check(at, admitted ? &real_adm : nullptr, admitted ? &model_adm : nullptr, after, max,
          extra);
  }

  // The probe_lease of an AcquireLease.
  Nanos probe_lease(std::uint8_t s) {
    const Nanos rt = m_->settings().recovery_timeout;
    switch (s % 8) {
      case 0: return 0;
      case 1: return 1;
      case 2: return rt;
      case 3: return rt + 1;
      case 4: return cb::kNever;
      case 5: return -1;
      case 6: return static_cast<Nanos>(r_.u64());  // anything, negative and huge too
      default: return static_cast<Nanos>(r_.u16()) * 1000;
    }
  }

  // A permit to settle: usually an outstanding one, sometimes any permit ever
  // issued (settled before, or of an older generation).
  std::size_t take_permit(std::uint8_t s) {
    if (permits_.empty()) {  // nothing admitted yet: a made-up permit
      permits_.push_back(Held{});
      return 0;
    }
    if (s < 200 && !outstanding_.empty()) {
      const std::size_t i = s % outstanding_.size();
      const std::size_t id = outstanding_[i];
      outstanding_.erase(outstanding_.begin() + static_cast<std::ptrdiff_t>(i));
      return id;
    }
    return s % permits_.size();
  }

  Nanos open_for(std::uint8_t s) {
    const Nanos rt = m_->settings().recovery_timeout;
    switch (s % 10) {
      case 6: return 0;
      case 7: return (s & 0x10) ? rt : rt + 1;
      case 8: return (s & 0x10) ? cb::kNever : -5;
      case 9: return static_cast<Nanos>(r_.u64());  // anything, negative too
      default: return -1;
    }
  }

  static Nanos scaled(Nanos scale, std::uint8_t fraction) {
    if (scale <= 0 || scale == cb::kNever) return fraction;
    return static_cast<Nanos>(static_cast<double>(scale) * 2 * fraction / 255);
  }

  // How far to move the clock (Advance), or how far ahead to look (Snapshot).
  Nanos delta() {
    const std::uint8_t s = r_.u8();
    const bool plus_one = (s & 0x10) != 0;
    const cb::Settings& st = m_->settings();
    const State state = m_->state();
    Nanos dt = 0;
    switch (s % 16) {
      case 0: dt = 0; break;
      case 1: dt = 1; break;
      case 2: dt = 2; break;
      case 3: dt = st.recovery_timeout + plus_one; break;
      case 4:
      case 5:  // exactly at / just past the open deadline
        if (state == State::Open) {
          dt = m_->open_deadline() - now_ + plus_one;
        } else {
          dt = m_->snapshot(now_).open_duration + plus_one;
        }
        break;
      case 6:
      case 7: {  // exactly at / just past a probe's expiry, or long after
        const Nanos expiry = m_->earliest_probe_deadline();
        if (state == State::HalfOpen && expiry != cb::kNever && expiry >= now_) {
          dt = expiry - now_ + plus_one;
          if (s % 16 == 7) {  // noticed after the re-opening it causes has ended
            const Nanos reopen =
                m_->duration(m_->snapshot(now_).consecutive_opens + 1, 1, -1);
            dt += reopen < kClockLimit / 4 ? reopen + 1 : 0;
          }
        } else if (st.half_open_max_wait == cb::kNever) {
          dt = 0;
        } else {
          dt = st.half_open_max_wait + plus_one;
        }
        break;
      }
      case 8: dt = st.slow_tracking ? st.slow_call_duration + plus_one : 0; break;
      case 9:  // the next bucket boundary of a time window, or just before it
        if (st.window_type == cb::WindowType::Time) {
          const Nanos w = st.window_bucket;
          dt = (now_ / w + 1) * w - now_ - (plus_one ? 1 : 0);
        }
        break;
      case 10:  // the end of a ramp-up
        if (m_->ramping()) {
          dt = m_->ramp_started() + st.ramp_up - now_ - (plus_one ? 1 : 0);
        } else {
          dt = st.ramp_up;
        }
        break;
      case 11: {  // the next 5-second bucket of the activity history
        const Nanos w = 5 * cb::kNanosPerSecond;
        dt = (now_ / w + 1) * w - now_ - (plus_one ? 1 : 0);
        break;
      }
      case 12: dt = static_cast<Nanos>(r_.u64() >> 2); break;
      case 13: dt = static_cast<Nanos>(r_.u16()) * (plus_one ? 1000000 : 1); break;
      default: {
        const Nanos scales[] = {st.recovery_timeout,   m_->snapshot(now_).open_duration,
                                st.half_open_max_wait, st.slow_call_duration,
                                st.window_bucket * 10, st.ramp_up};
        const Nanos scale = scales[r_.u8() % 6];
        dt = scaled(scale, r_.u8());
        break;
      }
    }
    if (dt < 0) dt = 0;
    if (dt > kClockLimit - now_) dt = kClockLimit - now_;  // stay below the limit
    return dt;
  }

  void check(Nanos at, const cb::Admission* real_adm, const cbmodel::Admission* model_adm,
             std::uint64_t after, std::size_t max,
             const std::string& extra = std::string()) {
    const std::string diff =
        extra + cbcompare::compare_all(*b_, *m_, at, real_adm, model_adm, after, max);
    if (diff.empty()) return;
    report(diff);
    std::abort();
  }

  void report(const std::string& diff) const {
    std::ostringstream o;
    o << "\n===== fuzz_breaker: "
      << (diff.empty() ? "replay" : "reference model divergence") << " =====\n";
    for (std::size_t i = 0; i < configs_.size(); ++i) {
      o << "configuration #" << i << ": " << cbcompare::describe(configs_[i]) << "\n";
    }
    o << "breaker created at t=" << start_ << " with configuration #0\n"
      << "operations (" << ops_.size() << "):\n";
    for (std::size_t i = 0; i < ops_.size(); ++i) {
      const Logged& op = ops_[i];
      o << "  [" << i << "] t=" << op.now << "  " << op_name(op.type);
      switch (op.type) {
        case Op::Acquire:
        case Op::AcquireLease:
          if (op.type == Op::AcquireLease) o << "(probe_lease=" << op.value << ")";
          if (op.permitted != op.model_permitted) {
            o << (op.permitted ? " -> permitted by the breaker, rejected by the model"
                               : " -> rejected by the breaker, permitted by the model");
          } else if (op.permitted) {
            o << " -> permitted";
            if (op.kept) {
              const cbmodel::Permit& p = permits_[op.permit].model;
              o << " P" << op.permit << " (" << cbcompare::kind_name(p.kind)
                << ", generation " << p.generation;
              if (p.kind == cbmodel::Kind::Probe)
                o << ", lease " << p.lease << ", slot " << p.slot;
              o << ")";
            }
          } else {
            o << " -> rejected";
          }
          break;
        case Op::Record:
          o << "(P" << op.permit << ", " << cbcompare::outcome_name(op.outcome);
          if (op.value != -1) o << ", open_for=" << op.value;
          o << ") -> " << (op.recorded ? "recorded" : "not recorded");
          break;
        case Op::Release: o << "(P" << op.permit << ")"; break;
        case Op::Note:
          o << "(" << cbcompare::outcome_name(op.outcome) << ") -> "
            << (op.recorded ? "recorded" : "not recorded");
          break;
        case Op::Advance: o << " clock by " << op.value; break;
        case Op::Reconfigure:
          if (op.skipped)
            o << "(invalid configuration: skipped)";
          else
            o << "(configuration #" << op.config << ")";
          break;
        case Op::Snapshot: o << " at t+" << op.value; break;
        case Op::Transitions: o << "(" << op.after << ", " << op.max << ")"; break;
        default: break;
      }
      o << "\n";
    }
    if (!diff.empty()) o << "differences after the last operation:\n" << diff;
    std::fprintf(stderr, "%s", o.str().c_str());
    std::fflush(stderr);
  }

  cbfuzz::Reader r_;
  cbfuzz::ConfigDecoder dec_;
  std::vector<Config> configs_;
  std::vector<Logged> ops_;
  std::vector<Held> permits_;
  std::vector<std::size_t> outstanding_;
  struct HeldClaim {
    cb::HealthClaim real;
    cbmodel::HealthClaim model;
  };
  std::vector<HeldClaim> claims_;  // health-check claims not yet reported
  Nanos now_ = 0;
  Nanos start_ = 0;
  cb::Breaker* b_ = nullptr;
  cbmodel::Model* m_ = nullptr;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Run(data, size).go();
  return 0;
}
