// External-pointer lifecycle and error signalling shared by the bindings.
#include "r_interface.h"

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "config_from_r.h"
#include "circuitbreaker/fleet/spec_limits.hpp"

namespace cbr {

namespace {

SEXP package_namespace() {
  static SEXP ns = R_NilValue;
  if (ns == R_NilValue) {
    SEXP name = PROTECT(Rf_mkString("circuitbreaker"));
    ns = R_FindNamespace(name);  // namespaces are never collected
    UNPROTECT(1);
  }
  return ns;
}

SEXP breaker_tag() {
  static SEXP tag = Rf_install("circuitbreaker_breaker");
  return tag;
}
SEXP clock_tag() {
  static SEXP tag = Rf_install("circuitbreaker_manual_clock");
  return tag;
}

void finalize_breaker(SEXP ptr) {
  delete static_cast<BreakerHandle*>(R_ExternalPtrAddr(ptr));
  R_ClearExternalPtr(ptr);
}
void finalize_clock(SEXP ptr) {
  delete static_cast<circuitbreaker::ManualClock*>(R_ExternalPtrAddr(ptr));
  R_ClearExternalPtr(ptr);
}

// Calls the package's R function `fun` with the given arguments; it raises a
// classed condition, so this never returns.
[[noreturn]] void call_abort(SEXP call) {
  Rcpp::Rcpp_fast_eval(call, package_namespace());
  // The R functions always signal an error; if one ever returned, say so.
  Rcpp::stop("circuitbreaker: internal error reporting function returned");
}

}  // namespace

void abort_argument(const char* arg, const char* must, SEXP value) {
  SEXP call = PROTECT(Rf_lang4(Rf_install("abort_bad_argument"), Rf_mkString(arg),
                               Rf_mkString(must), value));
  call_abort(call);
}

void abort_by(const char* fun, SEXP arg) {
  SEXP call = PROTECT(Rf_lang2(Rf_install(fun), arg));
  call_abort(call);
}

void abort_name(SEXP name, const char* must, std::size_t limit) {
  SEXP call = PROTECT(Rf_lang4(Rf_install("abort_name_too_long"), name, Rf_mkString(must),
                               Rf_ScalarInteger(static_cast<int>(limit))));
  call_abort(call);
}

void abort_fleet_unreachable(const std::string& name, const std::string& reason) {
  SEXP who = PROTECT(Rf_mkString(name.c_str()));
  SEXP why = PROTECT(Rf_mkString(reason.c_str()));
  call_abort(PROTECT(Rf_lang3(Rf_install("abort_fleet_unreachable"), who, why)));
}

void abort_invalid_object(const char* what) {
  SEXP call = PROTECT(Rf_lang2(Rf_install("abort_invalid_object"), Rf_mkString(what)));
  call_abort(call);
}

void abort_host_store(const std::string& path,
                      const circuitbreaker::HostBreaker::OpenResult& r) {
  if (r.untrusted.refused()) {
    // The core's verdict: the file or directory it refused, and why.
    SEXP refused = PROTECT(Rf_mkString(r.untrusted.path.c_str()));
    SEXP reason = PROTECT(Rf_mkString(r.untrusted.reason.c_str()));
    SEXP segment = PROTECT(Rf_mkString(path.c_str()));
    call_abort(
        PROTECT(Rf_lang4(Rf_install("abort_host_untrusted"), refused, reason, segment)));
  }
  const bool os = r.error != 0;
  SEXP args = PROTECT(Rf_allocVector(VECSXP, 4));
  SET_VECTOR_ELT(args, 0, Rf_mkString(path.c_str()));
  SET_VECTOR_ELT(
      args, 1,
      Rf_mkString(os ? "os_error" : circuitbreaker::segment_status_name(r.status)));
  SET_VECTOR_ELT(args, 2,
                 Rf_mkString(os ? std::strerror(r.error)
                                : circuitbreaker::segment_status_message(r.status)));
  SET_VECTOR_ELT(args, 3,
                 r.differing_field >= 0
                     ? Rf_mkString(circuitbreaker::kConfigFields[r.differing_field].name)
                     : R_NilValue);
  // The differing argument's two values (this process's, the segment's).
  const bool differs = r.differing_field >= 0;
  SEXP given = PROTECT(differs ? Rf_mkString(r.given_value.c_str()) : R_NilValue);
  SEXP stored = PROTECT(differs ? Rf_mkString(r.stored_value.c_str()) : R_NilValue);
  SEXP rest = PROTECT(Rf_list6(VECTOR_ELT(args, 0), VECTOR_ELT(args, 1),
                               VECTOR_ELT(args, 2), VECTOR_ELT(args, 3), given, stored));
  SEXP call = PROTECT(Rf_lcons(Rf_install("abort_host_store"), rest));
  call_abort(call);
}

void abort_store_fault(const std::string& location, circuitbreaker::StoreFault fault) {
  SEXP p = PROTECT(Rf_mkString(location.c_str()));
  if (fault.kind == circuitbreaker::StoreFaultKind::Busy) {
    SEXP seconds = PROTECT(Rf_ScalarReal(circuitbreaker::nanos_to_seconds(fault.waited)));
    call_abort(PROTECT(Rf_lang3(Rf_install("abort_host_busy"), p, seconds)));
  }
  call_abort(PROTECT(Rf_lang2(Rf_install("abort_host_broken"), p)));
}

void abort_host_broken(const std::string& location) {
  SEXP p = PROTECT(Rf_mkString(location.c_str()));
  abort_by("abort_host_broken", p);
}

namespace {

std::unique_ptr<BreakerHandle> new_fleet_handle(const circuitbreaker::Config& c,
                                                SEXP clock, SEXP spec);

// A new handle of the store of kind `kind` (R's store$kind): in this
// process ("process": `segment` is NULL), attached to the host segment at
// `segment` ("host": a path), or a member of a fleet ("redis": `segment` is
// the list that R's store_location() makes for a fleet store).
std::unique_ptr<BreakerHandle> new_handle(const circuitbreaker::Config& c, SEXP clock,
                                          SEXP kind, SEXP segment) {
  if (TYPEOF(kind) != STRSXP || Rf_xlength(kind) != 1 ||
      STRING_ELT(kind, 0) == NA_STRING) {
    abort_invalid_object("store kind");
  }
  const std::string k = CHAR(STRING_ELT(kind, 0));
  if (k == "redis") {
    if (TYPEOF(segment) != VECSXP) abort_invalid_object("fleet store spec");
    return new_fleet_handle(c, clock, segment);
  }
  if (k == "process") {
    if (segment != R_NilValue) abort_invalid_object("process store location");
    const circuitbreaker::ManualClock* manual =
        clock == R_NilValue ? nullptr : &clock_from(clock);
    return std::make_unique<BreakerHandle>(
        std::make_unique<circuitbreaker::ProcessHandle>(circuitbreaker::make_settings(c),
                                                        BreakerHandle::now_of(manual)),
        manual);
  }
  if (k != "host") abort_invalid_object("store kind");
  if (TYPEOF(segment) != STRSXP || Rf_xlength(segment) != 1 ||
      STRING_ELT(segment, 0) == NA_STRING) {
    abort_invalid_object("host segment path");
  }
  if (clock != R_NilValue) {
    abort_argument("clock",
                   "NULL for a host-shared breaker (its processes share the host's "
                   "monotonic clock)",
                   clock);
  }
  const std::string path = CHAR(STRING_ELT(segment, 0));
  auto host = std::make_unique<circuitbreaker::HostBreaker>();
  // The store's lock_timeout (seconds, checked by breaker_store_host()) rides
  // on the path as an attribute; without one, the core's default bound.
  SEXP wait = Rf_getAttrib(segment, Rf_install("lock_timeout"));
  if (TYPEOF(wait) == REALSXP && Rf_xlength(wait) == 1 && REAL(wait)[0] > 0) {
    host->set_lock_wait(
        std::chrono::nanoseconds(circuitbreaker::seconds_to_nanos(REAL(wait)[0])));
  }
  const circuitbreaker::HostBreaker::OpenResult r =
      host->open(path, c, circuitbreaker::SteadyClock::now());
  if (!r.ok()) abort_host_store(path, r);
  return std::make_unique<BreakerHandle>(
      std::make_unique<circuitbreaker::HostHandle>(std::move(host), path), nullptr);
}

#ifdef CIRCUITBREAKER_HAVE_HIREDIS
// The host segment of fleet breaker `name`'s bulkhead (fleet/fleet_bulkhead.hpp),
// in this user's default host store directory (made if missing, checked as
// the host store checks it), opened as a host breaker's segment is; what
// fails raises the host store's errors, naming the segment.
std::unique_ptr<circuitbreaker::FleetBulkhead> open_fleet_bulkhead(
    const circuitbreaker::Config& c, const circuitbreaker::FleetSpec& fs,
    const std::string& name) {
  const std::string dir = circuitbreaker::default_store_directory();
  const std::string path = circuitbreaker::fleet_bulkhead_path(fs, name);
  circuitbreaker::HostBreaker::OpenResult r;
  const int err = circuitbreaker::ensure_private_directory(dir, &r.untrusted);
  if (err != 0) {
    if (err != circuitbreaker::kStoreUntrusted) r.error = err;
    abort_host_store(path, r);
  }
  auto bulkhead = std::make_unique<circuitbreaker::FleetBulkhead>();
  r = bulkhead->open(path, c, circuitbreaker::SteadyClock::now());
  if (!r.ok()) abort_host_store(path, r);
  return bulkhead;
}
#endif

// The fleet store: spec is list(url, prefix, sync_interval, timeout, name,
// clock_offset), checked by R's breaker_store_redis().
std::unique_ptr<BreakerHandle> new_fleet_handle(const circuitbreaker::Config& c,
                                                SEXP clock, SEXP spec) {
#ifdef CIRCUITBREAKER_HAVE_HIREDIS
  if (clock != R_NilValue) {
    abort_argument("clock",
                   "NULL for a fleet-shared breaker (each process reads its own "
                   "monotonic clock, and the fleet's times come from Redis)",
                   clock);
  }
  Rcpp::List l(spec);
  const circuitbreaker::FleetSpec fs = fleet_spec_from(spec);
  SEXP name = l["name"];
  if (TYPEOF(name) != STRSXP || Rf_xlength(name) != 1 ||
      STRING_ELT(name, 0) == NA_STRING) {
    abort_invalid_object("fleet breaker name");
  }
  if (const char* must =
          circuitbreaker::name_problem(Rf_translateCharUTF8(STRING_ELT(name, 0)), true)) {
    abort_name(name, must, circuitbreaker::kMaxSharedNameBytes);
  }
  std::shared_ptr<circuitbreaker::FleetSync> sync =
      circuitbreaker::FleetSync::for_spec(fs);
  std::shared_ptr<circuitbreaker::FleetMember> member =
      sync->join(Rcpp::as<std::string>(name), c);
  int field = -1;
  std::string given, stored;
  if (member->config_conflict(&field, &given, &stored)) {
    const bool named = field >= 0;
    SEXP who = PROTECT(Rf_mkString(member->name().c_str()));
    SEXP arg = PROTECT(named ? Rf_mkString(circuitbreaker::kConfigFields[field].name)
                             : R_NilValue);
    SEXP mine = PROTECT(named ? Rf_mkString(given.c_str()) : R_NilValue);
    SEXP theirs = PROTECT(named ? Rf_mkString(stored.c_str()) : R_NilValue);
    call_abort(PROTECT(
        Rf_lang5(Rf_install("abort_fleet_wrong_config"), who, arg, mine, theirs)));
  }
  // A bulkhead's permits are the host's, where the host can share them
  // (the core decides: fleet_bulkhead_shared_by_host()).
  std::unique_ptr<circuitbreaker::FleetBulkhead> bulkhead;
  if (circuitbreaker::fleet_bulkhead_shared_by_host(c)) {
    bulkhead = open_fleet_bulkhead(c, fs, member->name());
  }
  // On the sync's clock: the system's, skewed in tests.
  return std::make_unique<BreakerHandle>(
      std::make_unique<circuitbreaker::FleetHandle>(std::move(member), std::move(sync),
                                                    std::move(bulkhead)),
      nullptr, fs.clock_offset);
#else
  (void)c;
  (void)clock;
  (void)spec;
  abort_by("abort_redis_unavailable", R_NilValue);
#endif
}

}  // namespace

#ifdef CIRCUITBREAKER_HAVE_HIREDIS
namespace {
// A string field of the `tls` list ("" when absent or NULL).
std::string tls_string(const Rcpp::List& l, const char* name) {
  if (!l.containsElementNamed(name)) return "";
  SEXP x = l[name];
  if (x == R_NilValue) return "";
  if (TYPEOF(x) != STRSXP || Rf_xlength(x) != 1 || STRING_ELT(x, 0) == NA_STRING)
    abort_invalid_object("fleet store TLS settings");
  return Rf_translateCharUTF8(STRING_ELT(x, 0));
}
}  // namespace

circuitbreaker::RedisTls tls_from(SEXP tls) {
  if (TYPEOF(tls) != VECSXP) abort_invalid_object("fleet store TLS settings");
  Rcpp::List l(tls);
  circuitbreaker::RedisTls t;
  t.enabled = true;
  t.ca_file = tls_string(l, "ca_file");
  t.ca_dir = tls_string(l, "ca_dir");
  t.cert_file = tls_string(l, "cert_file");
  t.key_file = tls_string(l, "key_file");
  t.server_name = tls_string(l, "server_name");
  if (l.containsElementNamed("verify")) {
    SEXP v = l["verify"];
    if (TYPEOF(v) != LGLSXP || Rf_xlength(v) != 1 || LOGICAL(v)[0] == NA_LOGICAL)
      abort_invalid_object("fleet store TLS settings");
    t.verify = LOGICAL(v)[0] == TRUE;
  }
  return t;
}

circuitbreaker::FleetSpec fleet_spec_from(SEXP spec) {
  Rcpp::List l(spec);
  circuitbreaker::FleetSpec fs;
  // One URL, or the seed nodes of a cluster (checked by R's
  // breaker_store_redis(): one user, password and database for all).
  SEXP urls = l["url"];
  if (TYPEOF(urls) != STRSXP || Rf_xlength(urls) < 1)
    abort_invalid_object("fleet store URL");
  for (R_xlen_t i = 0; i < Rf_xlength(urls); ++i) {
    circuitbreaker::RedisEndpoint e;
    if (STRING_ELT(urls, i) == NA_STRING ||
        circuitbreaker::parse_redis_url(CHAR(STRING_ELT(urls, i)), e) != nullptr) {
      abort_invalid_object("fleet store URL");
    }
    if (i == 0) {
      fs.endpoint = e;
    } else if (e.username != fs.endpoint.username || e.password != fs.endpoint.password ||
               e.has_password != fs.endpoint.has_password || e.db != fs.endpoint.db ||
               e.tls != fs.endpoint.tls) {
      abort_invalid_object("fleet store URL");
    }
    if (Rf_xlength(urls) > 1) fs.endpoint.seeds.push_back({e.host, e.port});
  }
  // TLS: the settings R merged and checked (the URL's, then the `tls`
  // argument's), or NULL for what the URL says.
  SEXP tls = l.containsElementNamed("tls") ? SEXP(l["tls"]) : R_NilValue;
  if (tls != R_NilValue) fs.endpoint.tls = tls_from(tls);
  fs.prefix = Rcpp::as<std::string>(l["prefix"]);
  const double sync_interval = Rcpp::as<double>(l["sync_interval"]);
  const double timeout = Rcpp::as<double>(l["timeout"]);
  // The limits R checked the user's arguments against, again: the list is
  // an R object, and anything may have changed it.
  if (circuitbreaker::fleet_spec_problem(static_cast<std::size_t>(Rf_xlength(urls)),
                                         fs.prefix, sync_interval, timeout) != nullptr) {
    abort_invalid_object("fleet store settings");
  }
  fs.sync_interval = circuitbreaker::seconds_to_nanos(sync_interval);
  fs.timeout = circuitbreaker::seconds_to_nanos(timeout);
  fs.clock_offset = circuitbreaker::seconds_to_nanos(Rcpp::as<double>(l["clock_offset"]));
  // Through Sentinel: the addresses (checked by R's breaker_store_redis(),
  // checked again here), the master's name and the sentinels' credentials.
  SEXP sentinels =
      l.containsElementNamed("sentinels") ? SEXP(l["sentinels"]) : R_NilValue;
  if (TYPEOF(sentinels) == STRSXP && Rf_xlength(sentinels) > 0) {
    std::vector<circuitbreaker::RedisNodeAddress> addresses;
    for (R_xlen_t i = 0; i < Rf_xlength(sentinels); ++i) {
      circuitbreaker::RedisNodeAddress a;
      if (STRING_ELT(sentinels, i) == NA_STRING ||
          circuitbreaker::parse_sentinel_address(CHAR(STRING_ELT(sentinels, i)), a)) {
        abort_invalid_object("fleet store sentinel address");
      }
      addresses.push_back(a);
    }
    const std::string master = Rcpp::as<std::string>(l["master"]);
    if (!circuitbreaker::valid_master_name(master)) {
      abort_invalid_object("fleet store master name");
    }
    auto s =
        std::make_shared<circuitbreaker::RedisSentinels>(std::move(addresses), master);
    SEXP password = l.containsElementNamed("sentinel_password")
                        ? SEXP(l["sentinel_password"])
                        : R_NilValue;
    if (TYPEOF(password) == STRSXP && Rf_xlength(password) == 1 &&
        STRING_ELT(password, 0) != NA_STRING) {
      SEXP user = l.containsElementNamed("sentinel_username")
                      ? SEXP(l["sentinel_username"])
                      : R_NilValue;
      const bool named = TYPEOF(user) == STRSXP && Rf_xlength(user) == 1 &&
                         STRING_ELT(user, 0) != NA_STRING;
      s->set_credentials(named ? CHAR(STRING_ELT(user, 0)) : "",
                         CHAR(STRING_ELT(password, 0)));
    }
    fs.endpoint.sentinels = std::move(s);
  }
  return fs;
}
#endif

SEXP make_breaker_pointer(const circuitbreaker::Config& c, SEXP clock, SEXP kind,
                          SEXP segment) {
  auto handle = new_handle(c, clock, kind, segment);

  SEXP prot = PROTECT(Rf_allocVector(VECSXP, 4));
  SET_VECTOR_ELT(prot, 0, config_to_vector(c));
  SET_VECTOR_ELT(prot, 1, clock);
  SET_VECTOR_ELT(prot, 2, segment);
  SET_VECTOR_ELT(prot, 3, kind);
  SEXP ptr = PROTECT(R_MakeExternalPtr(handle.get(), breaker_tag(), prot));
  R_RegisterCFinalizerEx(ptr, finalize_breaker, TRUE);
  handle.release();  // owned by the pointer's finalizer from here on
  UNPROTECT(2);
  return ptr;
}

BreakerHandle& breaker_from(SEXP ptr) {
  if (TYPEOF(ptr) != EXTPTRSXP || R_ExternalPtrTag(ptr) != breaker_tag()) {
    abort_invalid_object("circuit breaker pointer");
  }
  if (void* addr = R_ExternalPtrAddr(ptr)) {
    BreakerHandle& h = *static_cast<BreakerHandle*>(addr);
    // A store found broken (a host segment someone overwrote, or whose
    // lock was found unrecoverable) is not used again.
    if (!h.breaker->usable()) abort_host_broken(h.breaker->fault_location());
    return h;
  }

  // Restored by readRDS() or load(): rebuild from the stored configuration
  // (a process breaker with fresh state; a host breaker re-attaches).
  SEXP prot = R_ExternalPtrProtected(ptr);
  if (TYPEOF(prot) != VECSXP || Rf_xlength(prot) != 4) {
    abort_invalid_object("circuit breaker pointer (its configuration is missing)");
  }
  const circuitbreaker::Config c = config_from_vector(VECTOR_ELT(prot, 0));
  auto handle =
      new_handle(c, VECTOR_ELT(prot, 1), VECTOR_ELT(prot, 3), VECTOR_ELT(prot, 2));
  R_SetExternalPtrAddr(ptr, handle.get());
  R_RegisterCFinalizerEx(ptr, finalize_breaker, TRUE);
  return *handle.release();
}

SEXP store_info_to_r(const circuitbreaker::StoreInfo& info) {
  using Kind = circuitbreaker::StoreInfo::Field::Kind;
  if (info.empty()) return R_NilValue;
  const auto& fields = info.fields();
  const R_xlen_t n = static_cast<R_xlen_t>(fields.size());
  SEXP out = PROTECT(Rf_allocVector(VECSXP, n));
  SEXP names = PROTECT(Rf_allocVector(STRSXP, n));
  for (R_xlen_t i = 0; i < n; ++i) {
    const auto& f = fields[static_cast<std::size_t>(i)];
    SET_STRING_ELT(names, i, Rf_mkCharCE(f.name.c_str(), CE_UTF8));
    switch (f.kind) {
      case Kind::kNumber:
        SET_VECTOR_ELT(out, i, Rf_ScalarReal(f.number ? *f.number : NA_REAL));
        break;
      case Kind::kText: {
        // The string vector first: a CHARSXP is not protected while another
        // allocation runs.
        SEXP text = PROTECT(Rf_allocVector(STRSXP, 1));
        SET_STRING_ELT(text, 0, Rf_mkCharCE(f.text.c_str(), CE_UTF8));
        SET_VECTOR_ELT(out, i, text);
        UNPROTECT(1);
        break;
      }
      case Kind::kFlag: SET_VECTOR_ELT(out, i, Rf_ScalarLogical(f.flag)); break;
    }
  }
  Rf_setAttrib(out, R_NamesSymbol, names);
  UNPROTECT(2);
  return out;
}

SEXP make_clock_pointer(Nanos start) {
  auto clock = std::make_unique<circuitbreaker::ManualClock>(start);
  SEXP ptr = PROTECT(R_MakeExternalPtr(clock.get(), clock_tag(), R_NilValue));
  R_RegisterCFinalizerEx(ptr, finalize_clock, TRUE);
  clock.release();
  UNPROTECT(1);
  return ptr;
}

circuitbreaker::Config stored_config(SEXP ptr) {
  breaker_from(ptr);
  return config_from_vector(VECTOR_ELT(R_ExternalPtrProtected(ptr), 0));
}

void store_config(SEXP ptr, const circuitbreaker::Config& c) {
  SET_VECTOR_ELT(R_ExternalPtrProtected(ptr), 0, config_to_vector(c));
}

circuitbreaker::ManualClock& clock_from(SEXP ptr) {
  if (TYPEOF(ptr) != EXTPTRSXP || R_ExternalPtrTag(ptr) != clock_tag()) {
    abort_invalid_object("manual clock pointer");
  }
  if (void* addr = R_ExternalPtrAddr(ptr)) {
    return *static_cast<circuitbreaker::ManualClock*>(addr);
  }
  // Restored: a manual clock starts again at 0.
  auto clock = std::make_unique<circuitbreaker::ManualClock>(0);
  R_SetExternalPtrAddr(ptr, clock.get());
  R_RegisterCFinalizerEx(ptr, finalize_clock, TRUE);
  return *clock.release();
}

}  // namespace cbr
