/// \file detail/bits.hpp
/// Bit-level helpers shared by the conversion code: bit casts and leading-zero counts.
#pragma once

#include <cstdint>
#include <cstring>

#include "../config.hpp"

namespace blockscale {
inline namespace v0 {
namespace detail {

#if defined(__has_builtin)
#if __has_builtin(__builtin_bit_cast)
#define BLOCKSCALE_HAS_BUILTIN_BIT_CAST 1
#endif
#endif
#if !defined(BLOCKSCALE_HAS_BUILTIN_BIT_CAST)
#define BLOCKSCALE_HAS_BUILTIN_BIT_CAST 0
#endif

/// `constexpr` where the compiler has `__builtin_bit_cast`, plain `inline` elsewhere.
#if BLOCKSCALE_HAS_BUILTIN_BIT_CAST
#define BLOCKSCALE_BIT_CAST_CONSTEXPR constexpr
#else
#define BLOCKSCALE_BIT_CAST_CONSTEXPR inline
#endif

/// Reinterprets the bytes of `from` as a `To` (C++20 std::bit_cast for C++17).
template <class To, class From>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR To bit_cast(const From& from) noexcept {
  static_assert(sizeof(To) == sizeof(From), "bit_cast needs types of the same size");
#if BLOCKSCALE_HAS_BUILTIN_BIT_CAST
  return __builtin_bit_cast(To, from);
#else
  To to;
  std::memcpy(&to, &from, sizeof(To));
  return to;
#endif
}

/// Number of leading zero bits of a 32-bit value (32 for zero).
BLOCKSCALE_HOST_DEVICE constexpr int countl_zero(std::uint32_t x) noexcept {
#if (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDA_ARCH__)
  return x == 0 ? 32 : __builtin_clz(x); // constexpr in GCC and Clang
#endif
  int n = 0;
  for (std::uint32_t probe = 0x80000000u; probe != 0 && (x & probe) == 0; probe >>= 1)
    ++n;
  return n;
}

/// Number of leading zero bits of a 64-bit value (64 for zero).
BLOCKSCALE_HOST_DEVICE constexpr int countl_zero(std::uint64_t x) noexcept {
  const auto high = static_cast<std::uint32_t>(x >> 32);
  return high != 0 ? countl_zero(high) : 32 + countl_zero(static_cast<std::uint32_t>(x));
}

/// 2^exponent as a float, exactly, for exponents in [-149, 127] (float's subnormals included).
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR float exp2i(int exponent) noexcept {
  // A normal power of two is a bare biased exponent; a subnormal one is a lone mantissa bit.
  const std::uint32_t bits = exponent >= -126 ? static_cast<std::uint32_t>(exponent + 127) << 23
                                              : std::uint32_t{1} << (exponent + 149);
  return bit_cast<float>(bits);
}

/// 2^exponent as a double for any int exponent: exact, 0 or Inf beyond double's range.
BLOCKSCALE_HOST_DEVICE constexpr double exp2_double(int exponent) noexcept {
  double result = 1.0, factor = exponent < 0 ? 0.5 : 2.0;
  unsigned n =
      exponent < 0 ? 0u - static_cast<unsigned>(exponent) : static_cast<unsigned>(exponent);
  for (; n != 0; n >>= 1, factor *= factor) // products of powers of two: exact until they leave
    result = (n & 1u) != 0 ? result * factor : result;
  return result;
}

} // namespace detail
} // namespace v0
} // namespace blockscale
