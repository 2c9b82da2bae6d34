// Regression tests for defects the fuzzer (fuzz_breaker.cpp) found in the
// core, now fixed.
#include <catch2/catch.hpp>

#include <cstdint>

#include <circuitbreaker/circuitbreaker.hpp>

namespace cb = circuitbreaker;

TEST_CASE("transitions_since(UINT64_MAX) returns no transition",
          "[breaker][regression]") {
  // TransitionLog::since() computed first = after + 1, which wrapped to 0
  // for after == UINT64_MAX: the whole retained log came back instead of
  // nothing. Not reachable from R, only through the C++ API (LinkingTo).
  cb::Breaker b(cb::make_settings(cb::Config{}), 0);
  b.force_open(1);
  b.reset(2);
  cb::Transition out[cb::TransitionLog::kCapacity];
  CHECK(b.transitions_since(UINT64_MAX - 1, out, cb::TransitionLog::kCapacity) == 0);
  CHECK(b.transitions_since(UINT64_MAX, out, cb::TransitionLog::kCapacity) == 0);
}
