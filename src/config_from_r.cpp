// Converts and checks types only: which values are allowed is decided by
// circuitbreaker::validate(), and its wording is reused for type errors.
#include "config_from_r.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "r_interface.h"

namespace cbr {

using circuitbreaker::Config;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct RequiredField {
  const char* name;
  double Config::*member;
};
struct OptionalField {
  const char* name;
  std::optional<double> Config::*member;
};

constexpr RequiredField kRequired[] = {
    {"failure_threshold", &Config::failure_threshold},
    {"recovery_timeout", &Config::recovery_timeout},
    {"half_open_max_calls", &Config::half_open_max_calls},
    {"backoff_multiplier", &Config::backoff_multiplier},
    {"jitter", &Config::jitter},
    {"ramp_up", &Config::ramp_up},
};
constexpr OptionalField kOptional[] = {
    {"failure_rate_threshold", &Config::failure_rate_threshold},
    {"window_size", &Config::window_size},
    {"minimum_calls", &Config::minimum_calls},
    {"slow_call_duration", &Config::slow_call_duration},
    {"slow_call_rate_threshold", &Config::slow_call_rate_threshold},
    {"half_open_max_wait", &Config::half_open_max_wait},
    {"max_recovery_timeout", &Config::max_recovery_timeout},
};

SEXP element(SEXP list, const char* name) {
  SEXP names = Rf_getAttrib(list, R_NamesSymbol);
  const R_xlen_t n = Rf_xlength(list);
  for (R_xlen_t i = 0; i < n; ++i) {
    if (std::strcmp(CHAR(STRING_ELT(names, i)), name) == 0) {
      return VECTOR_ELT(list, i);
    }
  }
  return R_NilValue;
}

// A single number (integer or double, NA allowed: the core rejects NaN).
bool read_number(SEXP x, double& out) {
  if (Rf_xlength(x) != 1 || Rf_getAttrib(x, R_ClassSymbol) != R_NilValue) {
    return false;
  }
  if (TYPEOF(x) == REALSXP) {
    out = REAL(x)[0];
    return true;
  }
  if (TYPEOF(x) == INTSXP) {
    const int v = INTEGER(x)[0];
    out = v == NA_INTEGER ? kNaN : static_cast<double>(v);
    return true;
  }
  return false;
}

// The requirement the core states for `name`, found by asking it to validate
// a NaN there: type errors and range errors then read the same.
const char* requirement_for(const Config& base, const char* name) {
  Config probe = base;
  for (const auto& f : kRequired) {
    if (std::strcmp(f.name, name) == 0) probe.*(f.member) = kNaN;
  }
  for (const auto& f : kOptional) {
    if (std::strcmp(f.name, name) == 0) probe.*(f.member) = kNaN;
  }
  const circuitbreaker::ConfigError e = circuitbreaker::validate(probe);
  return (e && std::strcmp(e.field, name) == 0) ? e.requirement : "a single number";
}

}  // namespace

Config config_from_list(SEXP list) {
  if (TYPEOF(list) != VECSXP || Rf_getAttrib(list, R_NamesSymbol) == R_NilValue) {
    abort_invalid_object("breaker configuration (a named list)");
  }
  Config config;

  SEXP type = element(list, "window_type");
  {
    const char* t = (TYPEOF(type) == STRSXP && Rf_xlength(type) == 1 &&
                     STRING_ELT(type, 0) != NA_STRING)
                        ? CHAR(STRING_ELT(type, 0))
                        : "";
    if (std::strcmp(t, "count") == 0) {
      config.window_type = circuitbreaker::WindowType::Count;
    } else if (std::strcmp(t, "time") == 0) {
      config.window_type = circuitbreaker::WindowType::Time;
    } else {
      abort_argument("window_type", "\"count\" or \"time\"", type);
    }
  }

  for (const auto& f : kRequired) {
    SEXP x = element(list, f.name);
    double v;
    if (!read_number(x, v)) abort_argument(f.name, requirement_for(config, f.name), x);
    config.*(f.member) = v;
  }
  for (const auto& f : kOptional) {
    SEXP x = element(list, f.name);
    if (x == R_NilValue) continue;  // unset
    double v;
    if (!read_number(x, v)) abort_argument(f.name, requirement_for(config, f.name), x);
    config.*(f.member) = v;
  }
  SEXP seed = element(list, "seed");
  if (seed != R_NilValue) {
    double v;
    if (!read_number(seed, v) || !std::isfinite(v) || v < 0) {
      abort_argument("seed", "a non-negative number", seed);
    }
    config.seed = static_cast<std::uint64_t>(std::fmod(v, 1.8e19));
  }

  if (const circuitbreaker::ConfigError e = circuitbreaker::validate(config)) {
    abort_argument(e.field, e.requirement, element(list, e.field));
  }
  return config;
}

Rcpp::List config_to_list(const Config& c) {
  auto opt = [](const std::optional<double>& x) -> SEXP {
    return x ? Rcpp::wrap(*x) : R_NilValue;
  };
  return Rcpp::List::create(
      Rcpp::Named("failure_threshold") = c.failure_threshold,
      Rcpp::Named("recovery_timeout") = c.recovery_timeout,
      Rcpp::Named("failure_rate_threshold") = opt(c.failure_rate_threshold),
      Rcpp::Named("window_type") =
          c.window_type == circuitbreaker::WindowType::Count ? "count" : "time",
      Rcpp::Named("window_size") = circuitbreaker::effective_window_size(c),
      Rcpp::Named("minimum_calls") = circuitbreaker::effective_minimum_calls(c),
      Rcpp::Named("slow_call_duration") = opt(c.slow_call_duration),
      Rcpp::Named("slow_call_rate_threshold") = opt(c.slow_call_rate_threshold),
      Rcpp::Named("half_open_max_calls") = c.half_open_max_calls,
      Rcpp::Named("half_open_max_wait") = opt(c.half_open_max_wait),
      Rcpp::Named("backoff_multiplier") = c.backoff_multiplier,
      Rcpp::Named("max_recovery_timeout") = opt(c.max_recovery_timeout),
      Rcpp::Named("jitter") = c.jitter,
      Rcpp::Named("ramp_up") = c.ramp_up);
}

}  // namespace cbr
