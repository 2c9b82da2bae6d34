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
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "circuitbreaker/breaker_name.hpp"
#include "circuitbreaker/percent.hpp"
#include "config_from_r.h"
#include "r_interface.h"

using cbr::BreakerHandle;
using circuitbreaker::Admission;
using circuitbreaker::Nanos;
using circuitbreaker::Outcome;
using circuitbreaker::Permit;
using circuitbreaker::State;

namespace {

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
      INTEGER(x)[0] >= circuitbreaker::kOutcomeCount) {
    cbr::abort_invalid_object("outcome code");
  }
  return static_cast<Outcome>(INTEGER(x)[0]);
}

// Seconds for R: Inf for kNever, NA for a wait the core does not know.
double seconds(Nanos ns) {
  if (ns == circuitbreaker::kUnknownWait) return NA_REAL;
  return circuitbreaker::nanos_to_seconds(ns);
}

// How long a probe taken by this call may stay unsettled. NULL: a
// synchronous call, which always settles (an interrupt releases it). A
// number, or NA for none: an asynchronous call and its timeout in seconds;
// the core decides the lease from it.
Nanos probe_lease_from_r(const BreakerHandle& h, SEXP timeout) {
  if (timeout == R_NilValue) return circuitbreaker::kNever;
  if (TYPEOF(timeout) != REALSXP || Rf_xlength(timeout) != 1) {
    cbr::abort_invalid_object("probe lease (NULL or a number of seconds)");
  }
  const double t = REAL(timeout)[0];
  return circuitbreaker::probe_hold(
      h.breaker->settings(),
      ISNAN(t) ? std::optional<Nanos>()
               : std::optional<Nanos>(circuitbreaker::seconds_to_nanos(t)));
}

// The seconds a call refused by a full bulkhead may wait for a permit (R
// polls, R/bulkhead.R); 0 for every other rejection.
double wait_for(const BreakerHandle& h, const circuitbreaker::Admission& a) {
  if (a.rejection != circuitbreaker::Rejection::Full) return 0;
  return circuitbreaker::nanos_to_seconds(h.breaker->settings().max_wait);
}

// What R needs to answer a rejection, a double vector of these fields in
// this order. R reads them by name: cb_codes() gives it their positions.
enum RejectionField { kState, kRetryAfter, kReason, kListening, kMaxWait, kFieldCount };
constexpr const char* kRejectionFieldNames[kFieldCount] = {
    "state", "retry_after", "reason", "listening", "max_wait"};

SEXP rejection_to_r(const BreakerHandle& h, const circuitbreaker::Admission& a) {
  SEXP out = Rf_allocVector(REALSXP, kFieldCount);
  REAL(out)[kState] = static_cast<double>(a.state);
  REAL(out)[kRetryAfter] = seconds(a.retry_after);
  REAL(out)[kReason] = static_cast<double>(a.rejection);
  REAL(out)[kListening] = h.listening ? 1 : 0;
  REAL(out)[kMaxWait] = wait_for(h, a);
  return out;
}

// A named integer vector: `count` codes, named by `name(code)`, valued
// `code + offset`.
template <typename Name>
SEXP named_codes(int count, Name name, int offset) {
  SEXP out = PROTECT(Rf_allocVector(INTSXP, count));
  SEXP names = PROTECT(Rf_allocVector(STRSXP, count));
  for (int i = 0; i < count; ++i) {
    INTEGER(out)[i] = i + offset;
    SET_STRING_ELT(names, i, Rf_mkChar(name(i)));
  }
  Rf_setAttrib(out, R_NamesSymbol, names);
  UNPROTECT(2);
  return out;
}

}  // namespace

// `kind`: the store's kind, as R names it ("process", "host", "redis");
// `location`: what that store's store_location() gave (NULL, the path of a
// host segment, the fleet's connection details).
// [[Rcpp::export(rng = false)]]
SEXP cb_create(SEXP config, SEXP clock, SEXP kind, SEXP location) {
  return cbr::make_breaker_pointer(cbr::config_merge(circuitbreaker::Config{}, config),
                                   clock, kind, location);
}

// See R/breaker-execute.R for what each kind of result means to R.
extern "C" SEXP cb_acquire(SEXP ptr, SEXP request_func, SEXP fallback_func,
                           SEXP timeout) {
  BEGIN_RCPP
  BreakerHandle& h = cbr::breaker_from(ptr);
  if (!Rf_isFunction(request_func)) {
    cbr::abort_argument("request_func", "a function", request_func);
  }
  const bool has_fallback = fallback_func != R_NilValue;
  if (has_fallback && !Rf_isFunction(fallback_func)) {
    cbr::abort_argument("fallback_func", "NULL or a function", fallback_func);
  }
  const circuitbreaker::Admission a =
      h.checked(h.breaker->acquire(h.now(), probe_lease_from_r(h, timeout)));
  if (a.permitted) {
    if (!h.listening) return permit_to_r(a.permit);
    SEXP out = PROTECT(Rf_allocVector(VECSXP, 1));
    SET_VECTOR_ELT(out, 0, permit_to_r(a.permit));
    UNPROTECT(1);
    return out;
  }
  if (has_fallback && !h.listening && takes_no_arguments(fallback_func) &&
      wait_for(h, a) == 0) {
    return R_NilValue;
  }
  return rejection_to_r(h, a);
  END_RCPP
}

// Returns whether the outcome was recorded and R has listeners to tell.
extern "C" SEXP cb_record(SEXP ptr, SEXP permit, SEXP outcome, SEXP open_for) {
  BEGIN_RCPP
  BreakerHandle& h = cbr::breaker_from(ptr);
  const Permit p = permit_from_r(permit);
  const Outcome o = outcome_from_r(outcome);
  Nanos hint = -1;
  if (TYPEOF(open_for) == REALSXP && Rf_xlength(open_for) == 1 &&
      REAL(open_for)[0] >= 0) {
    hint = circuitbreaker::seconds_to_nanos(REAL(open_for)[0]);
  }
  const bool recorded = h.checked(h.breaker->record(p, o, h.now(), hint));
  return Rf_ScalarLogical(recorded && h.listening);
  END_RCPP
}

extern "C" SEXP cb_release(SEXP ptr, SEXP permit) {
  BEGIN_RCPP
  BreakerHandle& h = cbr::breaker_from(ptr);
  h.breaker->release(permit_from_r(permit), h.now());
  h.check();
  return Rf_ScalarLogical(h.listening);
  END_RCPP
}

// Checks the p of share(p) by the core's rule; returns it.
// [[Rcpp::export(rng = false)]]
SEXP cb_check_share(SEXP p) {
  const bool number =
      (TYPEOF(p) == REALSXP || TYPEOF(p) == INTSXP) && Rf_xlength(p) == 1 && !OBJECT(p);
  if (!number || !circuitbreaker::share_valid(Rf_asReal(p))) {
    cbr::abort_argument("p", circuitbreaker::kShareRequirement, p);
  }
  return p;
}

// Whether the bulkhead has a free permit now (R/bulkhead.R polls it while a
// call waits, max_wait): reads, writes nothing, and counts nothing.
// [[Rcpp::export(rng = false)]]
bool cb_bulkhead_room(SEXP ptr) {
  BreakerHandle& h = cbr::breaker_from(ptr);
  const circuitbreaker::Snapshot s = h.checked(h.breaker->snapshot(h.now()));
  return s.max_concurrent == 0 || s.in_flight < s.max_concurrent;
}

// Whether a fallback receives the condition (it declares an argument): the
// rule cb_acquire() applies on its fast path, for R's other paths.
// [[Rcpp::export(rng = false)]]
bool cb_takes_argument(SEXP f) { return !takes_no_arguments(f); }

// The core's argument table: names and defaults (NULL for an optional that
// is unset by default), for R's formals.
// [[Rcpp::export(rng = false)]]
SEXP cb_argument_table() {
  SEXP defaults = PROTECT(cbr::config_to_list(circuitbreaker::Config{}, false));
  SEXP out =
      Rcpp::List::create(Rcpp::Named("name") = Rf_getAttrib(defaults, R_NamesSymbol),
                         Rcpp::Named("default") = defaults);
  UNPROTECT(1);
  return out;
}

// [[Rcpp::export(rng = false)]]
Rcpp::CharacterVector cb_state_names() {
  Rcpp::CharacterVector out(circuitbreaker::kStateCount);
  for (int i = 0; i < circuitbreaker::kStateCount; ++i) {
    out[i] = circuitbreaker::state_name(static_cast<State>(i));
  }
  return out;
}

// [[Rcpp::export(rng = false)]]
Rcpp::CharacterVector cb_rejection_names() {
  Rcpp::CharacterVector out(circuitbreaker::kRejectionCount);
  for (int i = 0; i < circuitbreaker::kRejectionCount; ++i) {
    out[i] = circuitbreaker::rejection_name(static_cast<circuitbreaker::Rejection>(i));
  }
  return out;
}

// The codes R passes to and reads from the binding, by name: the core's
// outcomes (cb_record(), cb_note()) and reasons for a rejection, and the
// positions (1-based) of a rejection vector's fields.
// [[Rcpp::export(rng = false)]]
SEXP cb_codes() {
  using circuitbreaker::Rejection;
  SEXP outcome = PROTECT(named_codes(
      circuitbreaker::kOutcomeCount,
      [](int i) { return circuitbreaker::outcome_name(static_cast<Outcome>(i)); }, 0));
  SEXP rejection = PROTECT(named_codes(
      circuitbreaker::kRejectionCount,
      [](int i) { return circuitbreaker::rejection_name(static_cast<Rejection>(i)); },
      0));
  SEXP field = PROTECT(named_codes(
      kFieldCount, [](int i) { return kRejectionFieldNames[i]; }, 1));
  SEXP out = Rcpp::List::create(Rcpp::Named("outcome") = outcome,
                                Rcpp::Named("rejection") = rejection,
                                Rcpp::Named("rejection_field") = field);
  UNPROTECT(3);
  return out;
}

// [[Rcpp::export(rng = false)]]
bool cb_note(SEXP ptr, SEXP outcome) {
  BreakerHandle& h = cbr::breaker_from(ptr);
  return h.checked(h.breaker->note(outcome_from_r(outcome), h.now())) && h.listening;
}

// [[Rcpp::export(rng = false)]]
bool cb_reset(SEXP ptr) {
  BreakerHandle& h = cbr::breaker_from(ptr);
  h.breaker->reset(h.now());
  h.check();
  return h.listening;
}

// [[Rcpp::export(rng = false)]]
bool cb_force_open(SEXP ptr) {
  BreakerHandle& h = cbr::breaker_from(ptr);
  h.breaker->force_open(h.now());
  h.check();
  return h.listening;
}

// [[Rcpp::export(rng = false)]]
bool cb_disable(SEXP ptr) {
  BreakerHandle& h = cbr::breaker_from(ptr);
  h.breaker->disable(h.now());
  h.check();
  return h.listening;
}

// Applies the arguments named in `changes` on top of those in effect; the
// core validates them and reseeds jitter. A rejected change changes nothing.
// [[Rcpp::export(rng = false)]]
SEXP cb_reconfigure(SEXP ptr, SEXP changes) {
  BreakerHandle& h = cbr::breaker_from(ptr);
  const circuitbreaker::Config c = cbr::config_merge(cbr::stored_config(ptr), changes);
  if (!h.breaker->reconfigure(circuitbreaker::make_settings(c), h.now())) {
    // The configuration is a shared breaker's identity (host/host_breaker.hpp,
    // fleet/protocol.hpp): nothing changed.
    cbr::abort_by("abort_shared_configure", Rf_getAttrib(changes, R_NamesSymbol));
  }
  cbr::store_config(ptr, c);
  return R_NilValue;
}

// The arguments the breaker was made (or last reconfigured) with.
// [[Rcpp::export(rng = false)]]
SEXP cb_arguments(SEXP ptr) {
  return cbr::config_to_list(cbr::stored_config(ptr), false);
}

// Every configuration value in effect, defaults filled in.
// [[Rcpp::export(rng = false)]]
SEXP cb_effective_config(SEXP ptr) {
  return cbr::config_to_list(cbr::stored_config(ptr), true);
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
  return Rf_mkString(
      circuitbreaker::state_name(h.checked(h.breaker->snapshot(h.now())).state));
}

// [[Rcpp::export(rng = false)]]
SEXP cb_snapshot(SEXP ptr) {
  BreakerHandle& h = cbr::breaker_from(ptr);
  const circuitbreaker::Snapshot s = h.checked(h.breaker->snapshot(h.now()));
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
      {"seconds_since_failure",
       s.has_failure ? seconds(s.now - s.last_failure_at) : NA_REAL},
      {"transitions", count(s.last_transition)},
      {"generation", count(s.generation)},
      {"health_checks_passed", count(s.health_passed)},
      {"health_checks_failed", count(s.health_failed)},
      {"health_checks_late", count(s.health_late)},
      {"seconds_since_health_check",
       s.health_last_result != 0 ? seconds(s.now - s.health_last_at) : NA_REAL},
      {"in_flight", static_cast<double>(s.in_flight)},
      {"max_concurrent",
       s.max_concurrent > 0 ? static_cast<double>(s.max_concurrent) : NA_REAL},
      {"rejected_full", count(s.full_rejections)},
  };
  // The state first, the numbers, then the last health check's result.
  const R_xlen_t n = static_cast<R_xlen_t>(std::size(numbers)) + 2;
  SEXP out = PROTECT(Rf_allocVector(VECSXP, n));
  SEXP names = PROTECT(Rf_allocVector(STRSXP, n));
  SET_VECTOR_ELT(out, 0, Rf_mkString(circuitbreaker::state_name(s.state)));
  SET_STRING_ELT(names, 0, Rf_mkChar("state"));
  for (R_xlen_t i = 1; i < n - 1; ++i) {
    const auto& [name, value] = numbers[i - 1];
    SET_VECTOR_ELT(out, i, Rf_ScalarReal(value));
    SET_STRING_ELT(names, i, Rf_mkChar(name));
  }
  const auto last = static_cast<circuitbreaker::HealthResult>(s.health_last_result);
  SET_VECTOR_ELT(out, n - 1,
                 last == circuitbreaker::HealthResult::None
                     ? Rf_ScalarString(NA_STRING)
                     : Rf_mkString(circuitbreaker::health_result_name(last)));
  SET_STRING_ELT(names, n - 1, Rf_mkChar("last_health_check"));
  Rf_setAttrib(out, R_NamesSymbol, names);
  UNPROTECT(2);
  return out;
}

// A health check's lease (health.hpp): the claim as raw bytes when granted
// (run the check, then hand it to cb_health_result()); else the seconds until
// the lease is free, or NA when the breaker is not OPEN (no check is due).
// [[Rcpp::export(rng = false)]]
SEXP cb_health_claim(SEXP ptr) {
  BreakerHandle& h = cbr::breaker_from(ptr);
  const circuitbreaker::HealthClaim c = h.checked(h.breaker->claim_health_check(h.now()));
  if (!c.granted)
    return Rf_ScalarReal(c.retry_after < 0 ? NA_REAL : seconds(c.retry_after));
  SEXP out = Rf_allocVector(RAWSXP, sizeof c);
  std::memcpy(RAW(out), &c, sizeof c);
  return out;
}

// Reports a health check's result for a claim of cb_health_claim(); what the
// core recorded ("passed", "failed" or "late").
// [[Rcpp::export(rng = false)]]
SEXP cb_health_result(SEXP ptr, SEXP claim, bool passed) {
  BreakerHandle& h = cbr::breaker_from(ptr);
  if (TYPEOF(claim) != RAWSXP ||
      Rf_xlength(claim) != static_cast<R_xlen_t>(sizeof(circuitbreaker::HealthClaim))) {
    cbr::abort_invalid_object("health-check claim");
  }
  circuitbreaker::HealthClaim c;
  std::memcpy(&c, RAW(claim), sizeof c);
  c.granted = c.granted ? true : false;  // any byte to a valid bool
  const circuitbreaker::HealthResult r =
      h.checked(h.breaker->health_result(c, passed, h.now()));
  return Rf_mkString(circuitbreaker::health_result_name(r));
}

// The last transitions with a sequence number above `after`, as a list of
// columns; `seconds_ago` is measured on the breaker's clock.
// [[Rcpp::export(rng = false)]]
SEXP cb_transitions(SEXP ptr, SEXP after) {
  BreakerHandle& h = cbr::breaker_from(ptr);
  const std::uint64_t after_seq = circuitbreaker::count_from_double(Rf_asReal(after));
  circuitbreaker::Transition buf[circuitbreaker::TransitionLog::kCapacity];
  const std::size_t n = h.checked(h.breaker->transitions_since(
      after_seq, buf, circuitbreaker::TransitionLog::kCapacity));
  const Nanos now = h.now();
  Rcpp::NumericVector seq(n), ago(n);
  Rcpp::CharacterVector from(n), to(n), reason(n);
  for (std::size_t i = 0; i < n; ++i) {
    seq[i] = static_cast<double>(buf[i].seq);
    ago[i] = seconds(now - buf[i].at);
    from[i] = circuitbreaker::state_name(buf[i].from);
    to[i] = circuitbreaker::state_name(buf[i].to);
    reason[i] =
        buf[i].by_health_check ? Rcpp::String("health_check") : Rcpp::String(NA_STRING);
  }
  return Rcpp::List::create(Rcpp::Named("seq") = seq, Rcpp::Named("seconds_ago") = ago,
                            Rcpp::Named("from") = from, Rcpp::Named("to") = to,
                            Rcpp::Named("reason") = reason);
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
  const std::size_t n = h.checked(h.breaker->history(now, buf));
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

// Bytes of C++ memory one process breaker takes: the handle and the core
// breaker it owns (for bench/scale.R).
// [[Rcpp::export(rng = false)]]
int cb_handle_size() {
  return static_cast<int>(sizeof(BreakerHandle) + sizeof(circuitbreaker::ProcessHandle));
}

// The registry key of a URL or host name ("host:port"), or NULL when `x` is
// neither; see circuitbreaker/endpoint.hpp.
// [[Rcpp::export(rng = false)]]
SEXP cb_endpoint_key(SEXP x) {
  if (TYPEOF(x) != STRSXP || Rf_xlength(x) != 1 || STRING_ELT(x, 0) == NA_STRING)
    return R_NilValue;
  std::string key;
  if (!circuitbreaker::endpoint_key(CHAR(STRING_ELT(x, 0)), key)) return R_NilValue;
  return Rf_mkString(key.c_str());
}

// A breaker name from a URL path segment, strictly percent-decoded (see
// circuitbreaker/percent.hpp), or NULL when it cannot name a breaker: a
// malformed escape or a NUL byte in the decoded form (an R string cannot
// hold one, and a name cut there would be another breaker's).
// [[Rcpp::export(rng = false)]]
SEXP cb_path_name(SEXP x) {
  if (TYPEOF(x) != STRSXP || Rf_xlength(x) != 1 || STRING_ELT(x, 0) == NA_STRING)
    return R_NilValue;
  SEXP s = STRING_ELT(x, 0);
  std::string name;
  if (!circuitbreaker::percent_decode(std::string_view(CHAR(s), LENGTH(s)), name) ||
      name.find('\0') != std::string::npos) {
    return R_NilValue;
  }
  return Rf_ScalarString(
      Rf_mkCharLenCE(name.data(), static_cast<int>(name.size()), CE_UTF8));
}

// Checks a breaker name against the core's rule (circuitbreaker/
// breaker_name.hpp; `shared`: for the host or fleet store): a classed R
// error naming the limit when it is broken, else the name.
// [[Rcpp::export(rng = false)]]
SEXP cb_check_name(SEXP name, bool shared) {
  if (TYPEOF(name) != STRSXP || Rf_xlength(name) != 1 ||
      STRING_ELT(name, 0) == NA_STRING) {
    cbr::abort_argument("name", "a single string", name);
  }
  const char* utf8 = Rf_translateCharUTF8(STRING_ELT(name, 0));
  if (const char* must = circuitbreaker::name_problem(utf8, shared)) {
    cbr::abort_name(name, must, circuitbreaker::max_name_bytes(shared));
  }
  return name;
}
