// A counting replacement of the global allocator, for the tests and the
// benchmarks that show the hot paths allocate nothing. Link counting_new.cpp
// into the binary (it replaces operator new/delete for all of it).
#ifndef CIRCUITBREAKER_TESTS_COUNTING_NEW_HPP
#define CIRCUITBREAKER_TESTS_COUNTING_NEW_HPP

#include <cstdint>

namespace cbtest {

// Heap allocations through operator new (any form) since the program started.
std::uint64_t allocations() noexcept;

}  // namespace cbtest

#endif  // CIRCUITBREAKER_TESTS_COUNTING_NEW_HPP
