// R entry points of the host store: what R needs to name, list and describe
// host segments. The segment itself is opened by cb_create() (r_interface.cpp);
// every rule about it is in host/host_breaker.hpp and host/segment_*.hpp.
#include <Rcpp.h>

#include <cstring>
#include <optional>
#include <string>

#include "r_interface.h"

namespace {

using circuitbreaker::HostBreaker;
using circuitbreaker::Segment;
using circuitbreaker::SegmentStatus;

double seconds_since(circuitbreaker::Nanos then) {
  return circuitbreaker::nanos_to_seconds(circuitbreaker::SteadyClock::now() - then);
}

}  // namespace

// Whether this build can share breakers between processes (robust
// process-shared mutexes: Linux).
// [[Rcpp::export(rng = false)]]
bool cb_host_supported() { return circuitbreaker::RobustMutex::supported(); }

// The file name of a breaker's segment, or NULL if the name is too long.
// [[Rcpp::export(rng = false)]]
SEXP cb_segment_file_name(SEXP name) {
  if (TYPEOF(name) != STRSXP || Rf_xlength(name) != 1 ||
      STRING_ELT(name, 0) == NA_STRING) {
    cbr::abort_argument("name", "a single string", name);
  }
  const std::string file = circuitbreaker::segment_file_name(CHAR(STRING_ELT(name, 0)));
  return file.empty() ? R_NilValue : Rf_mkString(file.c_str());
}

// The breaker names of segment file names (NA for files that are not).
// [[Rcpp::export(rng = false)]]
Rcpp::CharacterVector cb_segment_breaker_names(Rcpp::CharacterVector files) {
  Rcpp::CharacterVector out(files.size());
  for (R_xlen_t i = 0; i < files.size(); ++i) {
    const auto name = files[i] == NA_STRING
                          ? std::nullopt
                          : circuitbreaker::segment_breaker_name(std::string(files[i]));
    out[i] = name ? Rcpp::String(*name) : Rcpp::String(NA_STRING);
  }
  return out;
}

// "process", "host" or "redis": the store's own name for itself.
// [[Rcpp::export(rng = false)]]
SEXP cb_store_kind(SEXP ptr) {
  return Rf_mkString(cbr::breaker_from(ptr).breaker->store_kind());
}

// What a host breaker's segment says about itself (host/host_handle.hpp's
// store_info()); NULL for a breaker of another store.
// [[Rcpp::export(rng = false)]]
SEXP cb_host_info(SEXP ptr) {
  cbr::BreakerHandle& h = cbr::breaker_from(ptr);
  if (std::strcmp(h.breaker->store_kind(), "host") != 0) return R_NilValue;
  return cbr::store_info_to_r(h.checked(h.breaker->store_info()));
}

// What the core says about a store directory, for R to raise or use:
// c(status, path, detail), status "ok" (path: the directory), "untrusted"
// (path: the directory refused, detail: why) or "os_error" (detail: the
// system's message).
Rcpp::CharacterVector directory_verdict(int err, const std::string& path,
                                        const circuitbreaker::StoreRefusal& refused) {
  if (err == circuitbreaker::kStoreUntrusted) {
    return Rcpp::CharacterVector::create("untrusted", refused.path, refused.reason);
  }
  if (err != 0)
    return Rcpp::CharacterVector::create("os_error", path, std::strerror(err));
  return Rcpp::CharacterVector::create("ok", path, "");
}

// Checks a directory given as a host store's `path` (the core's
// check_store_directory()).
// [[Rcpp::export(rng = false)]]
Rcpp::CharacterVector cb_host_check_directory(SEXP path) {
  if (TYPEOF(path) != STRSXP || Rf_xlength(path) != 1 ||
      STRING_ELT(path, 0) == NA_STRING) {
    cbr::abort_argument("path", "a single string", path);
  }
  const std::string dir = CHAR(STRING_ELT(path, 0));
  circuitbreaker::StoreRefusal refused;
  const int err = circuitbreaker::check_store_directory(dir, &refused);
  return directory_verdict(err, dir, refused);
}

// The default host store directory of this user, created if missing and
// checked (the core's default_store_directory(), ensure_private_directory()).
// [[Rcpp::export(rng = false)]]
Rcpp::CharacterVector cb_host_default_directory() {
  const std::string dir = circuitbreaker::default_store_directory();
  circuitbreaker::StoreRefusal refused;
  const int err = circuitbreaker::ensure_private_directory(dir, &refused);
  return directory_verdict(err, dir, refused);
}

// Reads a segment file without attaching to it (nothing is created or
// written; the file is opened read-only, never through a link, and mapped
// read-only, only when the core's checks find it ours): its status, and when
// it is a segment of this layout, its state and creator. For listing a
// store's directory; the judgements are the core's (host/store_files.hpp,
// inspect_segment()).
// [[Rcpp::export(rng = false)]]
SEXP cb_segment_info(SEXP path) {
  if (TYPEOF(path) != STRSXP || Rf_xlength(path) != 1 ||
      STRING_ELT(path, 0) == NA_STRING) {
    cbr::abort_argument("path", "a single string", path);
  }
  std::string status;
  double creator = NA_REAL, age = NA_REAL, size = NA_REAL;
  int alive = NA_LOGICAL;
  bool has_state = false;
  circuitbreaker::AdmissionView view;
  circuitbreaker::SegmentMapping map;
  circuitbreaker::StoreRefusal refused;
  const int err = map.open_file_readonly(CHAR(STRING_ELT(path, 0)), &refused);
  if (err == circuitbreaker::kStoreUntrusted) {
    status = "untrusted: " + refused.reason;
    if (refused.path != CHAR(STRING_ELT(path, 0))) status += " (" + refused.path + ")";
  } else if (err != 0) {
    status = std::string("unreadable: ") + std::strerror(err);
  } else {
    size = static_cast<double>(map.size());
    switch (circuitbreaker::inspect_segment(map.data(), map.size())) {
      case SegmentStatus::TooSmall: status = "truncated"; break;
      case SegmentStatus::WrongLayout: status = "other layout"; break;
      case SegmentStatus::Attached: {
        status = "ok";
        const Segment& seg = *map.segment();
        creator = static_cast<double>(seg.header.creator_pid);
        age = seconds_since(seg.header.created_at);
        if (const auto a = circuitbreaker::segment_creator_alive(seg.header)) alive = *a;
        has_state = seg.read_admission(view);
        break;
      }
      default: status = "not a segment";
    }
  }
  return Rcpp::List::create(
      Rcpp::Named("status") = status,
      Rcpp::Named("state") = has_state
                                 ? Rcpp::String(circuitbreaker::state_name(view.state))
                                 : Rcpp::String(NA_STRING),
      Rcpp::Named("creator_pid") = creator,
      Rcpp::Named("creator_alive") = Rf_ScalarLogical(alive),
      Rcpp::Named("seconds_since_created") = age, Rcpp::Named("bytes") = size);
}

// For tests (internal): where the words a test damages sit in a segment
// file, in bytes from its start, so that R tests write no magic numbers.
// [[Rcpp::export(rng = false)]]
SEXP cb_segment_layout() {
  using circuitbreaker::BreakerState;
  using circuitbreaker::SegmentSlot;
  const auto at = [](std::size_t offset) { return static_cast<double>(offset); };
  const std::size_t slots = offsetof(Segment, slots);
  const std::size_t state = offsetof(SegmentSlot, state);
  return Rcpp::List::create(
      Rcpp::Named("size") = at(sizeof(Segment)),
      Rcpp::Named("mutex") = at(offsetof(Segment, control) +
                                offsetof(circuitbreaker::SegmentControl, mutex)),
      Rcpp::Named("mutex_bytes") = at(sizeof(circuitbreaker::RobustMutex)),
      Rcpp::Named("committed") = at(offsetof(Segment, control) +
                                    offsetof(circuitbreaker::SegmentControl, committed)),
      Rcpp::Named("slots") = Rcpp::NumericVector::create(
          at(slots + state), at(slots + sizeof(SegmentSlot) + state)),
      Rcpp::Named("state") = at(offsetof(BreakerState, state)),
      Rcpp::Named("count_window_position") =
          at(offsetof(BreakerState, count_window) +
             circuitbreaker::CountWindow::position_offset()));
}

// For tests (internal): locks the robust mutex of the segment at `path` and
// returns with it held by this thread (the mapping stays open until the
// process ends), so that a test process can hold a breaker's lock, stop
// itself with SIGSTOP and let another process find the lock busy. TRUE if
// it locked.
// [[Rcpp::export(rng = false)]]
bool cb_segment_hold_lock(SEXP path) {
  if (TYPEOF(path) != STRSXP || Rf_xlength(path) != 1 ||
      STRING_ELT(path, 0) == NA_STRING) {
    cbr::abort_argument("path", "a single string", path);
  }
  static circuitbreaker::SegmentMapping held;  // one at a time: a test's process
  if (held.open_file(CHAR(STRING_ELT(path, 0)), 0, false) != 0) return false;
  if (circuitbreaker::inspect_segment(held.data(), held.size()) !=
      SegmentStatus::Attached) {
    return false;
  }
  circuitbreaker::Segment& seg = *held.segment();
  const auto r = seg.control.mutex.lock_robust([&seg]() noexcept { seg.recover(); });
  return r == circuitbreaker::RobustMutex::LockResult::Locked ||
         r == circuitbreaker::RobustMutex::LockResult::Recovered;
}
