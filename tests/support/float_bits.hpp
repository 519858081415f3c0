// A float's bits and back, for tests (and the benchmarks) that compare floats bit for bit or build
// them from their fields.
#pragma once

#include <cstdint>
#include <cstring>

/// The IEEE binary32 bits of `x`.
inline std::uint32_t float_bits(float x) noexcept {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

/// The float whose IEEE binary32 bits are `bits`.
inline float float_from_bits(std::uint32_t bits) noexcept {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}
