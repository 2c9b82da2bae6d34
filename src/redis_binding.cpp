// R entry points of the Redis store's connection (work in progress for the
// Redis store: the URL, whether hiredis is here, and a checked round trip).
// hiredis is optional: without it (configure did not find it) everything but
// cb_redis_parse_url() reports that the store is unavailable.
#include <Rcpp.h>

#include <cstdarg>
#include <string>

#include "circuitbreaker/redis_url.hpp"
#include "r_interface.h"

#ifdef CIRCUITBREAKER_HAVE_HIREDIS
#include <hiredis/hiredis.h>
#include <sys/time.h>
#endif

namespace {

circuitbreaker::RedisEndpoint endpoint_from(SEXP url) {
  if (TYPEOF(url) != STRSXP || Rf_xlength(url) != 1 || STRING_ELT(url, 0) == NA_STRING) {
    cbr::abort_argument(
        "url", "a single redis:// URL such as \"redis://127.0.0.1:6379/0\"", url);
  }
  circuitbreaker::RedisEndpoint e;
  if (const char* must = circuitbreaker::parse_redis_url(CHAR(STRING_ELT(url, 0)), e)) {
    cbr::abort_argument("url", must, url);
  }
  return e;
}

#ifdef CIRCUITBREAKER_HAVE_HIREDIS
timeval to_timeval(double seconds) {
  timeval tv;
  tv.tv_sec = static_cast<time_t>(seconds);
  tv.tv_usec = static_cast<suseconds_t>((seconds - static_cast<double>(tv.tv_sec)) * 1e6);
  return tv;
}

// One command; the reply's text (status, string, integer) or the error.
bool command(redisContext* c, std::string& out, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  auto* reply = static_cast<redisReply*>(redisvCommand(c, fmt, ap));
  va_end(ap);
  if (reply == nullptr) {
    out = c->errstr[0] != '\0' ? c->errstr : "no reply";
    return false;
  }
  bool ok = true;
  switch (reply->type) {
    case REDIS_REPLY_ERROR:
      ok = false;
      out.assign(reply->str, reply->len);
      break;
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_STRING: out.assign(reply->str, reply->len); break;
    case REDIS_REPLY_INTEGER: out = std::to_string(reply->integer); break;
    default: out.clear();
  }
  freeReplyObject(reply);
  return ok;
}
#endif

}  // namespace

// Whether this build has hiredis (the Redis store).
// [[Rcpp::export(rng = false)]]
bool cb_redis_available() {
#ifdef CIRCUITBREAKER_HAVE_HIREDIS
  return true;
#else
  return false;
#endif
}

// The parts of a redis:// URL (the password is not returned, only whether
// there is one).
// [[Rcpp::export(rng = false)]]
SEXP cb_redis_parse_url(SEXP url) {
  const circuitbreaker::RedisEndpoint e = endpoint_from(url);
  return Rcpp::List::create(Rcpp::Named("host") = e.host, Rcpp::Named("port") = e.port,
                            Rcpp::Named("db") = e.db,
                            Rcpp::Named("username") = e.username,
                            Rcpp::Named("has_password") = e.has_password);
}

// Connects, authenticates, selects the database and sends PING, each step
// bounded by `timeout` seconds. Returns list(ok, message): the PING reply,
// or what failed.
// [[Rcpp::export(rng = false)]]
SEXP cb_redis_ping(SEXP url, double timeout) {
  const circuitbreaker::RedisEndpoint e = endpoint_from(url);
#ifdef CIRCUITBREAKER_HAVE_HIREDIS
  const timeval tv = to_timeval(timeout);
  redisContext* c = redisConnectWithTimeout(e.host.c_str(), e.port, tv);
  std::string message;
  bool ok = c != nullptr && c->err == 0;
  if (!ok) {
    message = c != nullptr ? c->errstr : "cannot allocate a Redis context";
  } else {
    redisSetTimeout(c, tv);
    if (e.has_password) {
      ok = e.username.empty()
               ? command(c, message, "AUTH %b", e.password.data(), e.password.size())
               : command(c, message, "AUTH %b %b", e.username.data(), e.username.size(),
                         e.password.data(), e.password.size());
    }
    if (ok && e.db != 0) ok = command(c, message, "SELECT %d", e.db);
    if (ok) ok = command(c, message, "PING");
  }
  if (c != nullptr) redisFree(c);
  return Rcpp::List::create(Rcpp::Named("ok") = ok, Rcpp::Named("message") = message);
#else
  (void)e;
  (void)timeout;
  cbr::abort_by("abort_redis_unavailable", R_NilValue);
#endif
}
