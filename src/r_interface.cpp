// External-pointer lifecycle and error signalling shared by the bindings.
#include "r_interface.h"

#include <memory>

#include "config_from_r.h"

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

void abort_invalid_object(const char* what) {
  SEXP call = PROTECT(Rf_lang2(Rf_install("abort_invalid_object"), Rf_mkString(what)));
  call_abort(call);
}

SEXP make_breaker_pointer(const circuitbreaker::Config& c, SEXP clock) {
  const circuitbreaker::ManualClock* manual =
      clock == R_NilValue ? nullptr : &clock_from(clock);
  auto handle = std::make_unique<BreakerHandle>(circuitbreaker::make_settings(c), manual);

  SEXP prot = PROTECT(Rf_allocVector(VECSXP, 2));
  SET_VECTOR_ELT(prot, 0, config_to_vector(c));
  SET_VECTOR_ELT(prot, 1, clock);
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
  if (void* addr = R_ExternalPtrAddr(ptr)) return *static_cast<BreakerHandle*>(addr);

  // Restored by readRDS() or load(): rebuild from the stored configuration.
  SEXP prot = R_ExternalPtrProtected(ptr);
  if (TYPEOF(prot) != VECSXP || Rf_xlength(prot) != 2) {
    abort_invalid_object("circuit breaker pointer (its configuration is missing)");
  }
  const circuitbreaker::Config c = config_from_vector(VECTOR_ELT(prot, 0));
  SEXP clock = VECTOR_ELT(prot, 1);
  const circuitbreaker::ManualClock* manual =
      clock == R_NilValue ? nullptr : &clock_from(clock);
  auto handle = std::make_unique<BreakerHandle>(circuitbreaker::make_settings(c), manual);
  R_SetExternalPtrAddr(ptr, handle.get());
  R_RegisterCFinalizerEx(ptr, finalize_breaker, TRUE);
  return *handle.release();
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
