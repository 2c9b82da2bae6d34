// Converts between R values and the core's Config, by walking the core's one
// argument table (config_fields.hpp). Checks types only: which values are
// allowed is decided by circuitbreaker::validate(), whose wording is reused
// for type errors.
#include "config_from_r.h"

#include <cstring>
#include <limits>
#include <optional>

#include "r_interface.h"

namespace cbr {

using circuitbreaker::Config;
using circuitbreaker::FieldInfo;
using circuitbreaker::FieldKind;
using circuitbreaker::kConfigFieldCount;
using circuitbreaker::kConfigFields;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The index of `name` in a named list, or -1.
R_xlen_t find_element(SEXP list, const char* name) {
  SEXP names = Rf_getAttrib(list, R_NamesSymbol);
  const R_xlen_t n = Rf_xlength(list);
  for (R_xlen_t i = 0; i < n; ++i) {
    if (std::strcmp(CHAR(STRING_ELT(names, i)), name) == 0) return i;
  }
  return -1;
}

// A single number (integer or double, NA allowed: the core rejects NaN).
bool read_number(SEXP x, double& out) {
  if (Rf_xlength(x) != 1 || OBJECT(x)) return false;
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

// The requirement the core states for a field, found by asking it to
// validate a NaN there: type errors and range errors then read the same.
const char* requirement_for(const Config& base, const FieldInfo& f) {
  Config probe = base;
  if (f.kind == FieldKind::Number) probe.*(f.number) = kNaN;
  if (f.kind == FieldKind::OptionalNumber || f.kind == FieldKind::Limit) {
    probe.*(f.optional) = kNaN;
  }
  const circuitbreaker::ConfigError e = circuitbreaker::validate(probe);
  return (e && std::strcmp(e.field, f.name) == 0) ? e.requirement : "a single number";
}

// The R class of share(p) (R/bulkhead.R): a number p kept as -p by a Limit
// field (config.hpp's max_concurrent).
constexpr const char* kShareClass = "circuit_breaker_share";

// A share(p) value as the core keeps it (-p), or false when it is no number.
bool read_share(SEXP x, double& out) {
  if (Rf_xlength(x) != 1 || (TYPEOF(x) != REALSXP && TYPEOF(x) != INTSXP)) return false;
  const double p = TYPEOF(x) == REALSXP
                       ? REAL(x)[0]
                       : (INTEGER(x)[0] == NA_INTEGER ? kNaN : INTEGER(x)[0]);
  if (ISNAN(p)) return false;
  out = -p;
  return true;
}

// Sets one field from an R value, or raises the classed error for it.
void set_field(Config& config, const FieldInfo& f, SEXP x) {
  if (f.kind == FieldKind::WindowType) {
    const char* t =
        (TYPEOF(x) == STRSXP && Rf_xlength(x) == 1 && STRING_ELT(x, 0) != NA_STRING)
            ? CHAR(STRING_ELT(x, 0))
            : "";
    const std::optional<circuitbreaker::WindowType> w =
        circuitbreaker::parse_window_type(t);
    if (!w) abort_argument(f.name, "\"count\" or \"time\"", x);
    config.window_type = *w;
    return;
  }
  if (f.kind == FieldKind::Limit && Rf_inherits(x, kShareClass)) {
    double v;
    if (!read_share(x, v)) abort_argument(f.name, requirement_for(config, f), x);
    config.*(f.optional) = v;
    return;
  }
  if ((f.kind == FieldKind::OptionalNumber || f.kind == FieldKind::Limit) &&
      x == R_NilValue) {
    (config.*(f.optional)).reset();
    return;
  }
  double v;
  if (!read_number(x, v)) abort_argument(f.name, requirement_for(config, f), x);
  // A negative Limit would read as a share: only share() writes one.
  if (f.kind == FieldKind::Limit && v < 0) {
    abort_argument(f.name, requirement_for(config, f), x);
  }
  if (f.kind == FieldKind::Number) {
    config.*(f.number) = v;
  } else {
    config.*(f.optional) = v;
  }
}

SEXP field_to_r(const Config& c, const FieldInfo& f) {
  if (f.kind == FieldKind::WindowType) {
    return Rf_mkString(circuitbreaker::window_type_name(c.window_type));
  }
  if ((f.kind == FieldKind::OptionalNumber || f.kind == FieldKind::Limit) &&
      !(c.*(f.optional))) {
    return R_NilValue;
  }
  if (f.kind == FieldKind::Limit && *(c.*(f.optional)) < 0) {
    SEXP share = PROTECT(Rf_ScalarReal(-*(c.*(f.optional))));
    Rf_setAttrib(share, R_ClassSymbol, Rf_mkString(kShareClass));
    UNPROTECT(1);
    return share;
  }
  return Rf_ScalarReal(circuitbreaker::config_get(c, f));
}

}  // namespace

Config config_merge(const Config& base, SEXP changes) {
  if (TYPEOF(changes) != VECSXP ||
      (Rf_xlength(changes) > 0 && Rf_getAttrib(changes, R_NamesSymbol) == R_NilValue)) {
    abort_invalid_object("breaker configuration (a named list)");
  }
  Config config = base;
  for (const FieldInfo& f : kConfigFields) {
    const R_xlen_t i = find_element(changes, f.name);
    if (i >= 0) set_field(config, f, VECTOR_ELT(changes, i));
  }
  if (const circuitbreaker::ConfigError e = circuitbreaker::validate(config)) {
    const R_xlen_t i = find_element(changes, e.field);
    abort_argument(e.field, e.requirement, i >= 0 ? VECTOR_ELT(changes, i) : R_NilValue);
  }
  return config;
}

SEXP config_to_vector(const Config& c) {
  SEXP out = PROTECT(Rf_allocVector(REALSXP, kConfigFieldCount));
  for (std::size_t i = 0; i < kConfigFieldCount; ++i) {
    REAL(out)[i] = circuitbreaker::config_get(c, kConfigFields[i]);
  }
  UNPROTECT(1);
  return out;
}

Config config_from_vector(SEXP x) {
  if (TYPEOF(x) != REALSXP || Rf_xlength(x) != static_cast<R_xlen_t>(kConfigFieldCount)) {
    abort_invalid_object("circuit breaker pointer (its stored configuration is damaged)");
  }
  Config c;
  for (std::size_t i = 0; i < kConfigFieldCount; ++i) {
    circuitbreaker::config_set(c, kConfigFields[i], REAL(x)[i]);
  }
  if (circuitbreaker::validate(c)) {
    abort_invalid_object("circuit breaker pointer (its stored configuration is damaged)");
  }
  return c;
}

SEXP config_to_list(const Config& c, bool effective) {
  Config shown = c;
  if (effective) {
    shown.window_size = circuitbreaker::effective_window_size(c);
    shown.minimum_calls = circuitbreaker::effective_minimum_calls(c);
  }
  SEXP out = PROTECT(Rf_allocVector(VECSXP, kConfigFieldCount));
  SEXP names = PROTECT(Rf_allocVector(STRSXP, kConfigFieldCount));
  for (std::size_t i = 0; i < kConfigFieldCount; ++i) {
    SET_VECTOR_ELT(out, i, field_to_r(shown, kConfigFields[i]));
    SET_STRING_ELT(names, i, Rf_mkChar(kConfigFields[i].name));
  }
  Rf_setAttrib(out, R_NamesSymbol, names);
  UNPROTECT(2);
  return out;
}

}  // namespace cbr
