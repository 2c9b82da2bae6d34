// R entry points of the fleet store: the URL, whether hiredis is here, a
// checked round trip, what a fleet breaker's link says, and a plain
// connection for tests and benchmarks.
// hiredis is optional: without it (configure did not find it) everything but
// cb_redis_parse_url() reports that the store is unavailable.
#include <Rcpp.h>

#include <cstring>
#include <string>

#include "circuitbreaker/fleet/script.hpp"
#include "circuitbreaker/fleet/spec_limits.hpp"
#include "circuitbreaker/redis/sentinel.hpp"
#include "circuitbreaker/redis/url.hpp"
#include "r_interface.h"

#ifdef CIRCUITBREAKER_HAVE_HIREDIS
#include <memory>
#include <vector>
#endif

namespace {

// A refused URL is shown masked (mask_url()): its password never
// reaches the message, nor the condition's fields.
circuitbreaker::RedisEndpoint endpoint_from(SEXP url) {
  if (TYPEOF(url) != STRSXP || Rf_xlength(url) != 1 || STRING_ELT(url, 0) == NA_STRING) {
    cbr::abort_argument(
        "url", "a single redis:// URL such as \"redis://127.0.0.1:6379/0\"", url);
  }
  circuitbreaker::RedisEndpoint e;
  const char* text = CHAR(STRING_ELT(url, 0));
  if (const char* must = circuitbreaker::parse_redis_url(text, e)) {
    const std::string masked = circuitbreaker::mask_url(text);
    cbr::abort_argument("url", must, Rf_mkString(masked.c_str()));
  }
  return e;
}

// The TLS settings of an endpoint as R sees them ("" for an unset string).
SEXP tls_to_r(const circuitbreaker::RedisTls& t) {
  return Rcpp::List::create(
      Rcpp::Named("enabled") = t.enabled, Rcpp::Named("ca_file") = t.ca_file,
      Rcpp::Named("ca_dir") = t.ca_dir, Rcpp::Named("cert_file") = t.cert_file,
      Rcpp::Named("key_file") = t.key_file, Rcpp::Named("server_name") = t.server_name,
      Rcpp::Named("verify") = t.verify);
}

// The parts of a parsed URL that R may see: never the user name or the
// password, only whether there are any; of the query's unknown
// parameters, only their names.
SEXP endpoint_to_r(const circuitbreaker::RedisEndpoint& e, int seeds) {
  return Rcpp::List::create(
      Rcpp::Named("host") = e.host, Rcpp::Named("port") = e.port,
      Rcpp::Named("db") = e.db, Rcpp::Named("has_username") = !e.username.empty(),
      Rcpp::Named("has_password") = e.has_password, Rcpp::Named("seeds") = seeds,
      Rcpp::Named("tls") = tls_to_r(e.tls),
      Rcpp::Named("query_unknown") = e.query_unknown);
}

}  // namespace

// Whether this build has hiredis (the fleet store).
// [[Rcpp::export(rng = false)]]
bool cb_redis_available() {
#ifdef CIRCUITBREAKER_HAVE_HIREDIS
  return true;
#else
  return false;
#endif
}

// Whether this build speaks TLS to Redis (configure found OpenSSL).
// [[Rcpp::export(rng = false)]]
bool cb_redis_tls_available() {
#if defined(CIRCUITBREAKER_HAVE_HIREDIS) && defined(CIRCUITBREAKER_HAVE_OPENSSL)
  return true;
#else
  return false;
#endif
}

// `url` (a redis:// URL, or any other) with its user name and password
// masked as "***", for anything shown to people (see
// circuitbreaker/redis/url.hpp).
// [[Rcpp::export(rng = false)]]
SEXP cb_mask_url(SEXP url) {
  if (TYPEOF(url) != STRSXP || Rf_xlength(url) != 1 || STRING_ELT(url, 0) == NA_STRING) {
    return Rf_ScalarString(NA_STRING);
  }
  return Rf_mkString(circuitbreaker::mask_url(CHAR(STRING_ELT(url, 0))).c_str());
}

// What each of a fleet store's settings must be, named by argument (the
// core's limits, fleet/spec_limits.hpp), for R's type checks' messages.
// [[Rcpp::export(rng = false)]]
Rcpp::CharacterVector cb_fleet_spec_limits() {
  Rcpp::CharacterVector out(circuitbreaker::kFleetSpecFieldCount);
  Rcpp::CharacterVector names(circuitbreaker::kFleetSpecFieldCount);
  for (int i = 0; i < circuitbreaker::kFleetSpecFieldCount; ++i) {
    out[i] = circuitbreaker::kFleetSpecLimits[i].must;
    names[i] = circuitbreaker::kFleetSpecLimits[i].field;
  }
  out.names() = names;
  return out;
}

// The argument among a fleet store's settings (R has checked their types)
// that breaks the core's limits first, or NULL.
// [[Rcpp::export(rng = false)]]
SEXP cb_fleet_spec_problem(double urls, std::string prefix, double sync_interval,
                           double timeout) {
  const circuitbreaker::FleetSpecLimit* l = circuitbreaker::fleet_spec_problem(
      urls >= 0 && urls < 1e6 ? static_cast<std::size_t>(urls) : 0, prefix, sync_interval,
      timeout);
  return l == nullptr ? R_NilValue : Rf_mkString(l->field);
}

// How each of a store's URLs is shown (circuitbreaker/redis/url.hpp's
// shown_url()): masked, without its query, rediss:// when `tls`.
// [[Rcpp::export(rng = false)]]
Rcpp::CharacterVector cb_redis_shown_url(Rcpp::CharacterVector url, bool tls) {
  Rcpp::CharacterVector out(url.size());
  for (R_xlen_t i = 0; i < url.size(); ++i) {
    if (Rcpp::CharacterVector::is_na(url[i])) {
      out[i] = NA_STRING;
    } else {
      out[i] = circuitbreaker::shown_url(std::string(url[i]), tls);
    }
  }
  return out;
}

// The parts of a redis:// URL (the user name and password are not
// returned, only whether there are any). Several URLs are the seed nodes of
// one Redis Cluster: the parts of the first, and `seeds`, their number;
// they must share the user name, the password and the database, which
// must be 0 (a cluster has no other).
// [[Rcpp::export(rng = false)]]
SEXP cb_redis_parse_url(SEXP url) {
  const R_xlen_t n = TYPEOF(url) == STRSXP ? Rf_xlength(url) : 0;
  if (n <= 1) return endpoint_to_r(endpoint_from(url), 1);
  circuitbreaker::RedisEndpoint first;
  for (R_xlen_t i = 0; i < n; ++i) {
    SEXP one = PROTECT(Rf_ScalarString(STRING_ELT(url, i)));
    const circuitbreaker::RedisEndpoint e = endpoint_from(one);
    UNPROTECT(1);
    if (i == 0) first = e;
    const bool same = e.username == first.username && e.password == first.password &&
                      e.has_password == first.has_password;
    if (same && e.db == 0 && e.tls != first.tls) {
      SEXP text = PROTECT(
          Rf_mkString(circuitbreaker::mask_url(CHAR(STRING_ELT(url, i))).c_str()));
      cbr::abort_argument("url",
                          "the seed nodes of one Redis Cluster, each with the same "
                          "scheme (redis:// or rediss://) and TLS parameters",
                          text);
    }
    if (!same || e.db != 0) {
      SEXP text = PROTECT(
          Rf_mkString(circuitbreaker::mask_url(CHAR(STRING_ELT(url, i))).c_str()));
      cbr::abort_argument(
          "url",
          same ? "the seed nodes of one Redis Cluster, each with database 0 "
                 "(a cluster has no other): \"redis://host:port/0\""
               : "the seed nodes of one Redis Cluster, each with the same "
                 "user name and password",
          text);
    }
  }
  return endpoint_to_r(first, static_cast<int>(n));
}

// Connects (through the sentinels, when the store has some), authenticates,
// selects the database and sends PING, each round trip bounded by the
// store's timeout (the store's own connection class). `spec` is the list
// that R's fleet_store_spec() makes. Returns list(ok, message): the PING
// reply, or what failed.
// [[Rcpp::export(rng = false)]]
SEXP cb_redis_ping(SEXP spec) {
#ifdef CIRCUITBREAKER_HAVE_HIREDIS
  const circuitbreaker::FleetSpec fs = cbr::fleet_spec_from(spec);
  circuitbreaker::RedisConnection c;
  std::string message;
  bool ok = circuitbreaker::connect_first_seed(c, fs.endpoint, fs.timeout);
  if (ok) {
    const circuitbreaker::RedisReply r = c.command({"PING"});
    ok = r && !r->is_error();
    message = r ? circuitbreaker::redact_password(r->text(), fs.endpoint) : c.error();
  } else {
    message = c.error();
  }
  return Rcpp::List::create(Rcpp::Named("ok") = ok, Rcpp::Named("message") = message);
#else
  (void)spec;
  cbr::abort_by("abort_redis_unavailable", R_NilValue);
#endif
}

// The sentinels' addresses as the core reads them ("host:port" each, an
// IPv6 host in brackets), or a classed error naming `sentinel` and what
// each must be.
// [[Rcpp::export(rng = false)]]
SEXP cb_redis_parse_sentinels(SEXP x) {
  const R_xlen_t n = TYPEOF(x) == STRSXP ? Rf_xlength(x) : 0;
  constexpr const char* kMust =
      "a character vector of sentinel addresses such as \"127.0.0.1:26379\"";
  if (n == 0) cbr::abort_argument("sentinel", kMust, x);
  SEXP out = PROTECT(Rf_allocVector(STRSXP, n));
  for (R_xlen_t i = 0; i < n; ++i) {
    circuitbreaker::RedisNodeAddress a;
    const char* must =
        STRING_ELT(x, i) == NA_STRING
            ? kMust
            : circuitbreaker::parse_sentinel_address(CHAR(STRING_ELT(x, i)), a);
    if (must) {
      // Shown masked: a sentinel given as a URL may hold a password.
      SEXP text = PROTECT(
          STRING_ELT(x, i) == NA_STRING
              ? Rf_ScalarString(NA_STRING)
              : Rf_mkString(circuitbreaker::mask_url(CHAR(STRING_ELT(x, i))).c_str()));
      cbr::abort_argument("sentinel", (std::string("each ") + must).c_str(), text);
    }
    SET_STRING_ELT(out, i, Rf_mkChar(a.text().c_str()));
  }
  UNPROTECT(1);
  return out;
}

// Whether `x` is a master name that sentinels may be asked about.
// [[Rcpp::export(rng = false)]]
bool cb_redis_valid_master_name(std::string x) {
  return circuitbreaker::valid_master_name(x);
}

// What a fleet breaker's link says (fleet/fleet_info.hpp's
// fleet_breaker_info(): mode, sync counts and lag, the last error, the
// topology, TLS, the fleet's counts). NULL for other breakers.
// [[Rcpp::export(rng = false)]]
SEXP cb_fleet_info(SEXP ptr) {
  cbr::BreakerHandle& h = cbr::breaker_from(ptr);
  if (std::strcmp(h.breaker->store_kind(), "redis") != 0) return R_NilValue;
  return cbr::store_info_to_r(h.breaker->store_info());
}

// What the link of a store says, if this process has one for `spec` (the
// list that R's fleet_store_spec() makes; fleet/fleet_info.hpp's
// fleet_store_info()). NULL when no breaker of the store has started its
// sync.
// [[Rcpp::export(rng = false)]]
SEXP cb_fleet_store_info(SEXP spec) {
#ifdef CIRCUITBREAKER_HAVE_HIREDIS
  const std::shared_ptr<circuitbreaker::FleetSync> sync =
      circuitbreaker::FleetSync::find(cbr::fleet_spec_from(spec));
  if (!sync) return R_NilValue;
  return cbr::store_info_to_r(circuitbreaker::fleet_store_info(*sync));
#else
  (void)spec;
  return R_NilValue;
#endif
}

// The script that reads a fleet breaker's packed state (fleet/script.hpp's
// READ), for tests and people: EVAL it with the breaker's key.
// [[Rcpp::export(rng = false)]]
std::string cb_fleet_read_script() { return circuitbreaker::kFleetReadScript; }

// Every key of fleet breaker `name` under `prefix` (the core's list).
// [[Rcpp::export(rng = false)]]
std::vector<std::string> cb_fleet_breaker_keys(std::string prefix, std::string name) {
#ifdef CIRCUITBREAKER_HAVE_HIREDIS
  return circuitbreaker::fleet_breaker_keys(prefix, name);
#else
  (void)prefix;
  (void)name;
  cbr::abort_by("abort_redis_unavailable", R_NilValue);
#endif
}

// The file that holds fleet breaker `spec`'s bulkhead permits on this host
// (a list from R's store_location(); fleet/fleet_bulkhead.hpp), in
// this user's default host store directory, whether or not it exists.
// [[Rcpp::export(rng = false)]]
std::string cb_fleet_bulkhead_path(SEXP spec) {
#ifdef CIRCUITBREAKER_HAVE_HIREDIS
  const circuitbreaker::FleetSpec fs = cbr::fleet_spec_from(spec);
  Rcpp::List l(spec);
  return circuitbreaker::fleet_bulkhead_path(fs, Rcpp::as<std::string>(l["name"]));
#else
  (void)spec;
  cbr::abort_by("abort_redis_unavailable", R_NilValue);
#endif
}

// Deletes every key of the fleet breaker `spec` names (a list from R's
// store_location()), on a connection of its own, each round trip
// bounded by the store's timeout. Returns how many keys existed; when Redis
// cannot be reached (or refuses), R's abort_fleet_unreachable() says why.
// [[Rcpp::export(rng = false)]]
double cb_fleet_unlink(SEXP spec) {
#ifdef CIRCUITBREAKER_HAVE_HIREDIS
  const circuitbreaker::FleetSpec fs = cbr::fleet_spec_from(spec);
  Rcpp::List l(spec);
  const std::string name = Rcpp::as<std::string>(l["name"]);
  circuitbreaker::RedisConnection c, redirected;
  std::string error;
  if (circuitbreaker::connect_first_seed(c, fs.endpoint, fs.timeout)) {
    std::vector<std::string> del{"DEL"};
    for (std::string& k : circuitbreaker::fleet_breaker_keys(fs.prefix, name)) {
      del.push_back(std::move(k));
    }
    // On a cluster, the node that serves the breaker's slot.
    const circuitbreaker::RedisReply r = circuitbreaker::command_following_redirect(
        c, fs.endpoint, del, fs.timeout, redirected);
    if (r && r->is_integer()) return static_cast<double>(r->integer);
    error = r ? circuitbreaker::redact_password(r->text(), fs.endpoint)
              : (redirected.error().empty() ? c.error() : redirected.error());
  } else {
    error = c.error();
  }
  cbr::abort_fleet_unreachable(name, error);
#else
  (void)spec;
  cbr::abort_by("abort_redis_unavailable", R_NilValue);
#endif
}

// Stops the sync threads (the package is being unloaded), waiting at most
// `wait` seconds.
// [[Rcpp::export(rng = false)]]
void cb_fleet_shutdown(double wait) {
#ifdef CIRCUITBREAKER_HAVE_HIREDIS
  circuitbreaker::FleetSync::shutdown_all(circuitbreaker::seconds_to_nanos(wait));
#else
  (void)wait;
#endif
}

#ifdef CIRCUITBREAKER_HAVE_HIREDIS
namespace {
SEXP connection_tag() {
  static SEXP tag = Rf_install("circuitbreaker_redis_connection");
  return tag;
}
void finalize_connection(SEXP ptr) {
  delete static_cast<circuitbreaker::RedisConnection*>(R_ExternalPtrAddr(ptr));
  R_ClearExternalPtr(ptr);
}
SEXP reply_to_r(const circuitbreaker::RedisValue& r) {
  using Kind = circuitbreaker::RedisValue::Kind;
  switch (r.kind) {
    case Kind::kInteger: return Rf_ScalarReal(static_cast<double>(r.integer));
    case Kind::kNil: return R_NilValue;
    case Kind::kArray:
    case Kind::kMap: {
      SEXP out =
          PROTECT(Rf_allocVector(VECSXP, static_cast<R_xlen_t>(r.elements.size())));
      for (std::size_t i = 0; i < r.elements.size(); ++i) {
        SET_VECTOR_ELT(out, static_cast<R_xlen_t>(i), reply_to_r(r.elements[i]));
      }
      UNPROTECT(1);
      return out;
    }
    case Kind::kError: {
      SEXP out = PROTECT(Rf_mkString(r.str.c_str()));
      Rf_setAttrib(out, Rf_install("redis_error"), Rf_ScalarLogical(TRUE));
      UNPROTECT(1);
      return out;
    }
    default: return Rf_mkString(r.str.c_str());
  }
}
}  // namespace
#endif

// A Redis connection of the store's client, for tests and benchmarks (the
// store never uses it): connect within `timeout` seconds (with `tls`, a
// list as the store's spec has it, or NULL for what the URL says), then
// run commands.
// [[Rcpp::export(rng = false)]]
SEXP cb_redis_connect(SEXP url, double timeout, SEXP tls = R_NilValue) {
  circuitbreaker::RedisEndpoint e = endpoint_from(url);
#ifdef CIRCUITBREAKER_HAVE_HIREDIS
  if (tls != R_NilValue) e.tls = cbr::tls_from(tls);
  auto conn = std::make_unique<circuitbreaker::RedisConnection>();
  if (!conn->connect(e, circuitbreaker::seconds_to_nanos(timeout))) {
    Rcpp::stop("cannot connect to Redis: " + conn->error());
  }
  SEXP ptr = PROTECT(R_MakeExternalPtr(conn.get(), connection_tag(), R_NilValue));
  R_RegisterCFinalizerEx(ptr, finalize_connection, TRUE);
  conn.release();
  UNPROTECT(1);
  return ptr;
#else
  (void)e;
  (void)timeout;
  (void)tls;
  cbr::abort_by("abort_redis_unavailable", R_NilValue);
#endif
}

// One command on a connection from cb_redis_connect(): the reply (an error
// reply is a string with attribute redis_error), or an R error when the
// round trip failed.
// [[Rcpp::export(rng = false)]]
SEXP cb_redis_call(SEXP conn, Rcpp::CharacterVector args) {
#ifdef CIRCUITBREAKER_HAVE_HIREDIS
  if (TYPEOF(conn) != EXTPTRSXP || R_ExternalPtrTag(conn) != connection_tag() ||
      R_ExternalPtrAddr(conn) == nullptr) {
    cbr::abort_invalid_object("Redis connection");
  }
  auto* c = static_cast<circuitbreaker::RedisConnection*>(R_ExternalPtrAddr(conn));
  std::vector<std::string> argv(args.begin(), args.end());
  const circuitbreaker::RedisReply r = c->command(argv);
  if (!r) Rcpp::stop("Redis round trip failed: " + c->error());
  return reply_to_r(*r);
#else
  (void)conn;
  (void)args;
  cbr::abort_by("abort_redis_unavailable", R_NilValue);
#endif
}
