// Catch2's main() for the micro-benchmarks of the C++ core, alone in its
// translation unit (slow to compile, never changes). Benchmarking must be
// enabled in every translation unit that includes catch.hpp, this one too.
// Built only by `make -C tests/cpp bench`: the test build does not see it.
#define CATCH_CONFIG_ENABLE_BENCHMARKING
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
