// Comparison of circuitbreaker::Breaker with the reference model of
// reference_model.hpp: field-by-field checks of admissions, snapshots and the
// transition log, collected as readable text. Shared by the differential test
// (test_reference_model.cpp) and the fuzzer (fuzz_breaker.cpp), so that both
// compare exactly the same things.
#ifndef CIRCUITBREAKER_TESTS_MODEL_COMPARE_HPP
#define CIRCUITBREAKER_TESTS_MODEL_COMPARE_HPP

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <circuitbreaker/circuitbreaker.hpp>

#include "reference_model.hpp"

namespace cbcompare {

namespace cb = circuitbreaker;
using cb::Config;
using cb::Nanos;
using cb::Outcome;
using cb::State;
using cb::WindowType;

inline std::string fmt_opt(const std::optional<double>& v) {
  if (!v) return "NULL";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", *v);
  return buf;
}

inline std::string describe(const Config& c) {
  std::ostringstream o;
  o.precision(17);
  o << "failure_threshold=" << c.failure_threshold
    << " recovery_timeout=" << c.recovery_timeout
    << " failure_rate_threshold=" << fmt_opt(c.failure_rate_threshold)
    << " window_type=" << cb::window_type_name(c.window_type)
    << " window_size=" << fmt_opt(c.window_size)
    << " minimum_calls=" << fmt_opt(c.minimum_calls)
    << " slow_call_duration=" << fmt_opt(c.slow_call_duration)
    << " slow_call_rate_threshold=" << fmt_opt(c.slow_call_rate_threshold)
    << " half_open_max_calls=" << c.half_open_max_calls
    << " half_open_max_wait=" << fmt_opt(c.half_open_max_wait)
    << " backoff_multiplier=" << c.backoff_multiplier
    << " max_recovery_timeout=" << fmt_opt(c.max_recovery_timeout)
    << " jitter=" << c.jitter << " ramp_up=" << c.ramp_up
    << " health_interval=" << c.health_interval
    << " max_concurrent=" << fmt_opt(c.max_concurrent) << " max_wait=" << c.max_wait
    << " rng_seed=" << (c.rng_seed ? std::to_string(*c.rng_seed) : std::string("NULL"));
  return o.str();
}

using circuitbreaker::outcome_name;  // the core's (types.hpp)

inline const char* kind_name(cbmodel::Kind k) {
  switch (k) {
    case cbmodel::Kind::Counted: return "counted";
    case cbmodel::Kind::Probe: return "probe";
    case cbmodel::Kind::PassThrough: return "pass-through";
  }
  return "?";
}

inline bool same(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || a == b;
}
template <typename T>
inline bool same(T a, T b) {
  return a == b;
}

inline std::string show(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
inline std::string show(State s) { return cb::state_name(s); }
inline std::string show(cb::Rejection r) { return cb::rejection_name(r); }
inline std::string show(bool b) { return b ? "true" : "false"; }
template <typename T>
inline std::string show(T v) {
  return std::to_string(v);
}

// Differences as text, one line each. Nothing is formatted or allocated
// while the two sides agree (the fuzzer runs this after every operation).
class Diff {
 public:
  template <typename A, typename B>
  void check(const char* what, const A& breaker, const B& model) {
    if (!same(breaker, static_cast<A>(model))) {
      line(what, show(breaker), show(static_cast<A>(model)));
    }
  }
  // An element of a list: named "list[i].field" only when it differs.
  template <typename A, typename B>
  void check_at(const char* list, std::size_t i, const char* field, const A& breaker,
                const B& model) {
    if (!same(breaker, static_cast<A>(model))) {
      const std::string what = std::string(list) + "[" + std::to_string(i) + "]." + field;
      line(what.c_str(), show(breaker), show(static_cast<A>(model)));
    }
  }
  void note(const std::string& s) { out_ += "  " + s + "\n"; }
  std::string text() const { return out_; }
  bool empty() const { return out_.empty(); }

 private:
  void line(const char* what, const std::string& breaker, const std::string& model) {
    out_ += std::string("  ") + what + ": breaker " + breaker + ", model " + model + "\n";
  }
  std::string out_;
};

inline void compare(Diff& d, const cb::Snapshot& a, const cbmodel::Snapshot& m) {
  d.check("state", a.state, m.state);
  d.check("generation", a.generation, m.generation);
  d.check("now", a.now, m.now);
  d.check("state_since", a.state_since, m.state_since);
  d.check("consecutive_failures", a.consecutive_failures, m.consecutive_failures);
  d.check("has_failure", a.has_failure, m.has_failure);
  d.check("last_failure_at", a.last_failure_at, m.last_failure_at);
  d.check("totals.calls", a.totals.calls, m.totals.calls);
  d.check("totals.successes", a.totals.successes, m.totals.successes);
  d.check("totals.failures", a.totals.failures, m.totals.failures);
  d.check("totals.slow", a.totals.slow, m.totals.slow);
  d.check("totals.ignored", a.totals.ignored, m.totals.ignored);
  d.check("totals.rejected", a.totals.rejected, m.totals.rejected);
  d.check("totals.released", a.totals.released, m.totals.released);
  d.check("totals.late", a.totals.late, m.totals.late);
  d.check("totals.expired", a.totals.expired, m.totals.expired);
  d.check("totals.times_opened", a.totals.times_opened, m.totals.times_opened);
  d.check("window.calls", a.window.calls, m.window.calls);
  d.check("window.failures", a.window.failures, m.window.failures);
  d.check("window.slow", a.window.slow, m.window.slow);
  d.check("failure_rate", a.failure_rate, m.failure_rate);
  d.check("slow_rate", a.slow_rate, m.slow_rate);
  d.check("open_duration", a.open_duration, m.open_duration);
  d.check("retry_after", a.retry_after, m.retry_after);
  d.check("probes_in_flight", a.probes_in_flight, m.probes_in_flight);
  d.check("probe_successes", a.probe_successes, m.probe_successes);
  d.check("consecutive_opens", a.consecutive_opens, m.consecutive_opens);
  d.check("ramp_share", a.ramp_share, m.ramp_share);
  d.check("last_transition", a.last_transition, m.last_transition);
  d.check("health_passed", a.health_passed, m.health_passed);
  d.check("health_failed", a.health_failed, m.health_failed);
  d.check("health_late", a.health_late, m.health_late);
  d.check("health_last_result", static_cast<int>(a.health_last_result),
          m.health_last_result);
  d.check("health_last_at", a.health_last_at, m.health_last_at);
  d.check("in_flight", a.in_flight, m.in_flight);
  d.check("max_concurrent", a.max_concurrent, m.max_concurrent);
  d.check("full_rejections", a.full_rejections, m.full_rejections);
}

inline cbmodel::Kind kind_of(cb::PermitKind k) {
  switch (k) {
    case cb::PermitKind::Counted: return cbmodel::Kind::Counted;
    case cb::PermitKind::Probe: return cbmodel::Kind::Probe;
    case cb::PermitKind::PassThrough: return cbmodel::Kind::PassThrough;
  }
  return cbmodel::Kind::Counted;
}

inline void compare(Diff& d, const cb::Admission& a, const cbmodel::Admission& m) {
  d.check("admission.permitted", a.permitted, m.permitted);
  d.check("admission.rejection", a.rejection, m.rejection);
  d.check("admission.retry_after", a.retry_after, m.retry_after);
  if (a.permitted && m.permitted) {
    if (kind_of(a.permit.kind) != m.permit.kind) {
      d.note(std::string("permit.kind: breaker ") + kind_name(kind_of(a.permit.kind)) +
             ", model " + kind_name(m.permit.kind));
    }
    d.check("permit.generation", a.permit.generation, m.permit.generation);
    d.check("permit.started_at", a.permit.started_at, m.permit.started_at);
    d.check("permit.bulk_lease", static_cast<std::uint64_t>(a.permit.bulk_lease),
            m.permit.bulk);
    if (m.permit.kind == cbmodel::Kind::Probe) {
      d.check("permit.lease", a.permit.lease, m.permit.lease);
      d.check("permit.slot", static_cast<std::uint32_t>(a.permit.slot), m.permit.slot);
    }
  }
}

inline void compare_log(Diff& d, const cb::Transition* a, std::size_t n,
                        const std::vector<cbmodel::Transition>& m) {
  d.check("transitions_since().size", n, m.size());
  for (std::size_t i = 0; i < n && i < m.size(); ++i) {
    const char* list = "transitions_since()";
    d.check_at(list, i, "seq", a[i].seq, m[i].seq);
    d.check_at(list, i, "at", a[i].at, m[i].at);
    d.check_at(list, i, "from", a[i].from, m[i].from);
    d.check_at(list, i, "to", a[i].to, m[i].to);
    d.check_at(list, i, "by_health_check", a[i].by_health_check, m[i].by_health_check);
  }
}

inline void compare_history(Diff& d, const cb::ActivityBucket* a, std::size_t n,
                            const std::vector<cbmodel::ActivityBucket>& m) {
  d.check("history().size", n, m.size());
  for (std::size_t i = 0; i < n && i < m.size(); ++i) {
    const char* list = "history()";
    d.check_at(list, i, "index", a[i].index, m[i].index);
    d.check_at(list, i, "calls", std::uint64_t{a[i].calls}, m[i].calls);
    d.check_at(list, i, "failures", std::uint64_t{a[i].failures}, m[i].failures);
    d.check_at(list, i, "slow", std::uint64_t{a[i].slow}, m[i].slow);
    d.check_at(list, i, "rejected", std::uint64_t{a[i].rejected}, m[i].rejected);
  }
}

// Everything the differential test compares after one operation: the
// admission (when the operation was an acquire), the snapshot at `now`,
// transitions_since(after, max) and the activity history at `now`. Returns
// the differences, empty when none.
inline std::string compare_all(cb::Breaker& breaker, const cbmodel::Model& model,
                               Nanos now, const cb::Admission* real_adm,
                               const cbmodel::Admission* model_adm, std::uint64_t after,
                               std::size_t max) {
  Diff d;
  if (real_adm != nullptr && model_adm != nullptr) compare(d, *real_adm, *model_adm);
  compare(d, breaker.snapshot(now), model.snapshot(now));
  cb::Transition buf[64];
  if (max > 64) max = 64;
  const std::size_t n = breaker.transitions_since(after, buf, max);
  compare_log(d, buf, n, model.transitions_since(after, max));
  cb::ActivityBucket hist[cb::kHistoryBuckets];
  const std::size_t h = breaker.history(now, hist);
  compare_history(d, hist, h, model.history(now));
  return d.text();
}

}  // namespace cbcompare

#endif  // CIRCUITBREAKER_TESTS_MODEL_COMPARE_HPP
