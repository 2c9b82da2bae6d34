// The R entry points of a breaker. Each converts its arguments, checks them,
// and calls the core: no policy is decided here.
//
// Most entry points are Rcpp exports with rng = false. The three on the hot
// path of execute() (acquire, record, release) are registered directly as
// extern "C" routines and called through their symbols: Rcpp's generated
// wrapper costs about 90 ns per call (it preserves the result in an RObject),
// a tenth of the whole rejected-call path. They keep Rcpp's guard
// (BEGIN_RCPP/END_RCPP), so an R error raised inside unwinds C++ frames safely.
#include <Rcpp.h>

#include <cstring>
#include <iterator>
#include <utility>

#include "config_from_r.h"
#include "r_interface.h"

using circuitbreaker::Admission;
using circuitbreaker::Nanos;
using circuitbreaker::Outcome;
using circuitbreaker::Permit;
using circuitbreaker::State;
using cbr::BreakerHandle;

namespace {

SEXP shared_integer(int value) {
  SEXP x = Rf_ScalarInteger(value);
  R_PreserveObject(x);
  MARK_NOT_MUTABLE(x);
  return x;
}

bool takes_no_arguments(SEXP f) {
  return TYPEOF(f) != CLOSXP || FORMALS(f) == R_NilValue;
}

SEXP permit_to_r(const Permit& p) {
  SEXP out = Rf_allocVector(RAWSXP, sizeof(Permit));
  std::memcpy(RAW(out), &p, sizeof(Permit));
  return out;
}

Permit permit_from_r(SEXP x) {
  if (TYPEOF(x) != RAWSXP || Rf_xlength(x) != static_cast<R_xlen_t>(sizeof(Permit))) {
    cbr::abort_invalid_object("permit");
  }
  Permit p;
  std::memcpy(&p, RAW(x), sizeof(Permit));
  return p;
}

Outcome outcome_from_r(SEXP x) {
  if (TYPEOF(x) != INTSXP || Rf_xlength(x) != 1 || INTEGER(x)[0] < 0 ||
      INTEGER(x)[0] > 2) {
    cbr::abort_invalid_object("outcome code");
  }
  return static_cast<Outcome>(INTEGER(x)[0]);
}

double seconds(Nanos ns) { return circuitbreaker::nanos_to_seconds(ns); }

}  // namespace

// [[Rcpp::export(rng = false)]]
SEXP cb_create(SEXP config, SEXP clock) {
  return cbr::make_breaker_pointer(config, clock);
}

// A permit (raw vector) when the call may go ahead. When it is rejected:
// NULL if R need only call the zero-argument fallback (nobody listens), else
// an integer (R then builds the condition and tells the listeners).
extern "C" SEXP cb_acquire(SEXP ptr, SEXP request_func, SEXP fallback_func) {
  BEGIN_RCPP
  static SEXP slow_path = shared_integer(1);

  BreakerHandle& h = cbr::breaker_from(ptr);
  if (!Rf_isFunction(request_func)) {
    cbr::abort_argument("request_func", "a function", request_func);
  }
  const bool has_fallback = fallback_func != R_NilValue;
  if (has_fallback && !Rf_isFunction(fallback_func)) {
    cbr::abort_argument("fallback_func", "NULL or a function", fallback_func);
  }
  const Admission a = h.breaker.acquire(h.now());
  if (a.permitted) return permit_to_r(a.permit);
  return (has_fallback && !h.listening && takes_no_arguments(fallback_func))
             ? R_NilValue
             : slow_path;
  END_RCPP
}

// Returns whether R has listeners to tell.
extern "C" SEXP cb_record(SEXP ptr, SEXP permit, SEXP outcome, SEXP open_for) {
  BEGIN_RCPP
  BreakerHandle& h = cbr::breaker_from(ptr);
  const Permit p = permit_from_r(permit);
  const Outcome o = outcome_from_r(outcome);
  Nanos hint = -1;
  if (TYPEOF(open_for) == REALSXP && Rf_xlength(open_for) == 1 && REAL(open_for)[0] >= 0) {
    hint = circuitbreaker::seconds_to_nanos(REAL(open_for)[0]);
  }
  h.breaker.record(p, o, h.now(), hint);
  return Rf_ScalarLogical(h.listening);
  END_RCPP
}

extern "C" SEXP cb_release(SEXP ptr, SEXP permit) {
  BEGIN_RCPP
  BreakerHandle& h = cbr::breaker_from(ptr);
  h.breaker.release(permit_from_r(permit), h.now());
  return Rf_ScalarLogical(h.listening);
  END_RCPP
}

// [[Rcpp::export(rng = false)]]
SEXP cb_note(SEXP ptr, SEXP outcome) {
  BreakerHandle& h = cbr::breaker_from(ptr);
  h.breaker.note(outcome_from_r(outcome), h.now());
  return R_NilValue;
}

// [[Rcpp::export(rng = false)]]
SEXP cb_reset(SEXP ptr) {
  BreakerHandle& h = cbr::breaker_from(ptr);
  h.breaker.reset(h.now());
  return R_NilValue;
}

// [[Rcpp::export(rng = false)]]
SEXP cb_force_open(SEXP ptr) {
  BreakerHandle& h = cbr::breaker_from(ptr);
  h.breaker.force_open(h.now());
  return R_NilValue;
}

// [[Rcpp::export(rng = false)]]
SEXP cb_disable(SEXP ptr) {
  BreakerHandle& h = cbr::breaker_from(ptr);
  h.breaker.disable(h.now());
  return R_NilValue;
}

// [[Rcpp::export(rng = false)]]
SEXP cb_reconfigure(SEXP ptr, SEXP config) {
  BreakerHandle& h = cbr::breaker_from(ptr);
  const circuitbreaker::Config c = cbr::config_from_list(config);
  h.breaker.reconfigure(circuitbreaker::make_settings(c), h.now());
  SET_VECTOR_ELT(R_ExternalPtrProtected(ptr), 0, config);  // for rebuilding
  return R_NilValue;
}

// The argument list the breaker was made (or last reconfigured) with.
// [[Rcpp::export(rng = false)]]
SEXP cb_arguments(SEXP ptr) {
  cbr::breaker_from(ptr);
  return VECTOR_ELT(R_ExternalPtrProtected(ptr), 0);
}

// Every configuration value in effect, defaults filled in.
// [[Rcpp::export(rng = false)]]
SEXP cb_effective_config(SEXP ptr) {
  cbr::breaker_from(ptr);
  return cbr::config_to_list(
      cbr::config_from_list(VECTOR_ELT(R_ExternalPtrProtected(ptr), 0)));
}

// [[Rcpp::export(rng = false)]]
SEXP cb_set_listening(SEXP ptr, SEXP listening) {
  BreakerHandle& h = cbr::breaker_from(ptr);
  h.listening = Rf_asLogical(listening) == TRUE;
  return R_NilValue;
}

// [[Rcpp::export(rng = false)]]
SEXP cb_state(SEXP ptr) {
  BreakerHandle& h = cbr::breaker_from(ptr);
  return Rf_mkString(circuitbreaker::state_name(h.breaker.snapshot(h.now()).state));
}

// [[Rcpp::export(rng = false)]]
SEXP cb_snapshot(SEXP ptr) {
  BreakerHandle& h = cbr::breaker_from(ptr);
  const circuitbreaker::Snapshot s = h.breaker.snapshot(h.now());
  const auto count = [](std::uint64_t n) { return static_cast<double>(n); };
  const bool window = s.window.calls > 0;
  const std::pair<const char*, double> numbers[] = {
      {"seconds_in_state", seconds(s.now - s.state_since)},
      {"calls", count(s.totals.calls)},
      {"successes", count(s.totals.successes)},
      {"failures", count(s.totals.failures)},
      {"slow_calls", count(s.totals.slow)},
      {"ignored", count(s.totals.ignored)},
      {"rejected", count(s.totals.rejected)},
      {"released", count(s.totals.released)},
      {"late", count(s.totals.late)},
      {"expired_probes", count(s.totals.expired)},
      {"window_calls", count(s.window.calls)},
      {"window_failures", count(s.window.failures)},
      {"window_slow_calls", count(s.window.slow)},
      {"failure_rate", window ? s.failure_rate : NA_REAL},
      {"slow_call_rate", window ? s.slow_rate : NA_REAL},
      {"failure_count", count(s.consecutive_failures)},
      {"times_opened", count(s.totals.times_opened)},
      {"consecutive_opens", count(s.consecutive_opens)},
      {"open_duration", seconds(s.open_duration)},
      {"seconds_until_probe", seconds(s.retry_after)},
      {"probes_in_flight", static_cast<double>(s.probes_in_flight)},
      {"probe_successes", static_cast<double>(s.probe_successes)},
      {"ramp_share", s.ramp_share},
      {"seconds_since_failure", s.has_failure ? seconds(s.now - s.last_failure_at) : NA_REAL},
      {"transitions", count(s.last_transition)},
      {"generation", count(s.generation)},
  };
  const R_xlen_t n = static_cast<R_xlen_t>(std::size(numbers)) + 1;
  SEXP out = PROTECT(Rf_allocVector(VECSXP, n));
  SEXP names = PROTECT(Rf_allocVector(STRSXP, n));
  SET_VECTOR_ELT(out, 0, Rf_mkString(circuitbreaker::state_name(s.state)));
  SET_STRING_ELT(names, 0, Rf_mkChar("state"));
  for (R_xlen_t i = 1; i < n; ++i) {
    const auto& [name, value] = numbers[i - 1];
    SET_VECTOR_ELT(out, i, Rf_ScalarReal(value));
    SET_STRING_ELT(names, i, Rf_mkChar(name));
  }
  Rf_setAttrib(out, R_NamesSymbol, names);
  UNPROTECT(2);
  return out;
}

// The last transitions with a sequence number above `after`, as a list of
// columns; `seconds_ago` is measured on the breaker's clock.
// [[Rcpp::export(rng = false)]]
SEXP cb_transitions(SEXP ptr, SEXP after) {
  BreakerHandle& h = cbr::breaker_from(ptr);
  const double a = Rf_asReal(after);
  const std::uint64_t after_seq = (a >= 0 && a < 1.8e19) ? static_cast<std::uint64_t>(a) : 0;
  circuitbreaker::Transition buf[circuitbreaker::TransitionLog::kCapacity];
  const std::size_t n = h.breaker.transitions_since(after_seq, buf, circuitbreaker::TransitionLog::kCapacity);
  const Nanos now = h.now();
  Rcpp::NumericVector seq(n), ago(n);
  Rcpp::CharacterVector from(n), to(n);
  for (std::size_t i = 0; i < n; ++i) {
    seq[i] = static_cast<double>(buf[i].seq);
    ago[i] = seconds(now - buf[i].at);
    from[i] = circuitbreaker::state_name(buf[i].from);
    to[i] = circuitbreaker::state_name(buf[i].to);
  }
  return Rcpp::List::create(Rcpp::Named("seq") = seq, Rcpp::Named("seconds_ago") = ago,
                            Rcpp::Named("from") = from, Rcpp::Named("to") = to);
}

// Whether the pointer currently holds a live breaker (FALSE after readRDS()
// until its first use rebuilds it). For tests and diagnostics.
// [[Rcpp::export(rng = false)]]
bool cb_is_live(SEXP ptr) {
  return TYPEOF(ptr) == EXTPTRSXP && R_ExternalPtrAddr(ptr) != nullptr;
}

// Recent activity in buckets of kHistoryBucketWidth, oldest first, as a list
// of columns; `seconds_ago` is when each bucket started, on the breaker's clock.
// [[Rcpp::export(rng = false)]]
SEXP cb_history(SEXP ptr) {
  BreakerHandle& h = cbr::breaker_from(ptr);
  circuitbreaker::ActivityBucket buf[circuitbreaker::kHistoryBuckets];
  const Nanos now = h.now();
  const std::size_t n = h.breaker.history(now, buf);
  Rcpp::NumericVector ago(n), calls(n), failures(n), slow(n), rejected(n);
  for (std::size_t i = 0; i < n; ++i) {
    ago[i] = seconds(now - buf[i].index * circuitbreaker::kHistoryBucketWidth);
    calls[i] = buf[i].calls;
    failures[i] = buf[i].failures;
    slow[i] = buf[i].slow;
    rejected[i] = buf[i].rejected;
  }
  return Rcpp::List::create(
      Rcpp::Named("seconds_ago") = ago, Rcpp::Named("calls") = calls,
      Rcpp::Named("failures") = failures, Rcpp::Named("slow_calls") = slow,
      Rcpp::Named("rejected") = rejected,
      Rcpp::Named("bucket_seconds") = seconds(circuitbreaker::kHistoryBucketWidth));
}

// Bytes of C++ memory one breaker's handle takes (for bench/scale.R).
// [[Rcpp::export(rng = false)]]
int cb_handle_size() {
  return static_cast<int>(sizeof(BreakerHandle));
}

// What a rejected caller is told: the state and the seconds until the next
// probe (Inf when forced open). Cheaper than a full snapshot.
// [[Rcpp::export(rng = false)]]
SEXP cb_rejection(SEXP ptr) {
  BreakerHandle& h = cbr::breaker_from(ptr);
  const circuitbreaker::Snapshot s = h.breaker.snapshot(h.now());
  SEXP out = PROTECT(Rf_allocVector(VECSXP, 2));
  SET_VECTOR_ELT(out, 0, Rf_mkString(circuitbreaker::state_name(s.state)));
  SET_VECTOR_ELT(out, 1, Rf_ScalarReal(seconds(s.retry_after)));
  UNPROTECT(1);
  return out;
}
