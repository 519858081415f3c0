/// \file numeric/half.hpp
/// `bfloat16` and `float16`: 16-bit floating-point storage types for the host and the device, with
/// exact widening to float and round-to-nearest-even narrowing from float and double. They carry
/// no arithmetic: they exist to hold matrix inputs and outputs and .npy data (io/npy.hpp).
///
/// Encodings: float16 is IEEE 754 binary16 (1 sign, 5 exponent bits with bias 15, 10 mantissa
/// bits, subnormals, Inf/NaN); bfloat16 is the upper half of an IEEE binary32 (1 sign, 8 exponent
/// bits with bias 127, 7 mantissa bits). Both have the same bit patterns as CUDA's `__half` and
/// `__nv_bfloat16`.
///
/// NaN: narrowing keeps the sign and the upper payload bits and sets the quiet bit (as x86 F16C and
/// AArch64 do). CUDA's host converters `__float2half_rn` / `__float2bfloat16_rn` instead return
/// the canonical NaN 0x7FFF for every NaN input; that is the one deliberate difference from them
/// (tests/unit/test_half.cpp, tests/exhaustive/exhaustive_half.cpp).
#pragma once

#include <cstdint>
#include <type_traits>

#include "../config.hpp"
#include "../detail/bits.hpp"
#include "cuda_bridge.hpp"

namespace blockscale {
inline namespace v0 {

struct bfloat16_layout;
struct float16_layout;
template <class Layout>
class half_storage;
/// bfloat16 and IEEE binary16, the two instances of half_storage.
using bfloat16 = half_storage<bfloat16_layout>;
using float16 = half_storage<float16_layout>;

namespace detail {

/// float → bfloat16 code, round to nearest even, overflow to ±Inf, NaN kept quiet with its sign.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR std::uint16_t
float_to_bfloat16_bits(float x) noexcept {
  const auto u = bit_cast<std::uint32_t>(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
    // NaN: truncate the payload, set the quiet bit so a payload in the low 16 bits stays a NaN.
    return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  }
  // Adding 0x7FFF plus the lowest kept bit carries into the kept half exactly when the dropped
  // half is above 0x8000, or equal to it with an odd kept half (ties to even). A carry out of the
  // mantissa bumps the exponent, and from the largest finite value lands on Inf.
  const std::uint32_t rounded = u + 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

/// bfloat16 code → float, exact (the code is the upper half of the float).
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR float
bfloat16_bits_to_float(std::uint16_t bits) noexcept {
  return bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

/// float → float16 code, round to nearest even, overflow to ±Inf, NaN kept quiet with its sign.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR std::uint16_t
float_to_float16_bits(float x) noexcept {
  const auto u = bit_cast<std::uint32_t>(x);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t magnitude = u & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) { // NaN: quiet bit 0x0200, upper 9 payload bits kept
    return static_cast<std::uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x03FFu));
  }
  // 65520 (0x477FF000) is the midpoint between the largest finite value 65504 (odd mantissa) and
  // 2^16: it and everything above round to Inf.
  if (magnitude >= 0x477FF000u)
    return static_cast<std::uint16_t>(sign | 0x7C00u);
  // 2^-25 (0x33000000), half the smallest subnormal 2^-24, ties to the even 0.
  if (magnitude <= 0x33000000u)
    return sign;
  // Normal (>= 2^-14): rebias the exponent from 127 to 15 (subtract 112 << 23) and drop 13 bits.
  // Subnormal: value = (hidden | mantissa) * 2^(e - 150) = code * 2^-24, so the code is the 24-bit
  // significand shifted right by 126 - e (14 to 24 here).
  const bool normal = magnitude >= 0x38800000u;
  const std::uint32_t significand =
      normal ? magnitude - 0x38000000u : (magnitude & 0x007FFFFFu) | 0x00800000u;
  const int shift = normal ? 13 : 126 - static_cast<int>(magnitude >> 23); // bits dropped
  const std::uint32_t kept = significand >> shift;
  const std::uint32_t dropped = significand & ((std::uint32_t{1} << shift) - 1u);
  const std::uint32_t half = std::uint32_t{1} << (shift - 1);
  // A carry out of the mantissa moves to the next binade (or from subnormal to normal) correctly.
  const std::uint32_t code =
      kept + ((dropped > half || (dropped == half && (kept & 1u))) ? 1u : 0u);
  return static_cast<std::uint16_t>(sign | code);
}

/// float16 code → float, exact (subnormals, Inf and NaN payloads included).
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR float
float16_bits_to_float(std::uint16_t bits) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t field = (bits >> 10) & 0x1Fu;
  const std::uint32_t mantissa = bits & 0x03FFu;
  if (field == 0x1Fu)
    return bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
  if (field != 0)
    return bit_cast<float>(sign | ((field + 112u) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa * 2^-24, exact in float.
  const float value = static_cast<float>(mantissa) * exp2i(-24);
  return sign != 0 ? -value : value;
}

/// Rounds a double to float with round-to-odd, so that a second rounding to a format with at most
/// 11 significant bits (float16, bfloat16) gives the correctly rounded result of the double.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR float
double_to_float_round_odd(double x) noexcept {
  const auto nearest = static_cast<float>(x);
  if (!(x == x) || static_cast<double>(nearest) == x)
    return nearest; // NaN or exact
  auto bits = bit_cast<std::uint32_t>(nearest);
  // Rounded away from zero (Inf included): step back to the truncated value, then mark it inexact.
  const bool away = x > 0 ? static_cast<double>(nearest) > x : static_cast<double>(nearest) < x;
  if (away)
    --bits;
  return bit_cast<float>(bits | 1u);
}

} // namespace detail

/// The bfloat16 encoding: the upper half of an IEEE binary32.
struct bfloat16_layout {
  static constexpr std::uint16_t infinity_bits = 0x7F80u;
  BLOCKSCALE_HOST_DEVICE static BLOCKSCALE_BIT_CAST_CONSTEXPR std::uint16_t
  encode(float x) noexcept {
    return detail::float_to_bfloat16_bits(x);
  }
  BLOCKSCALE_HOST_DEVICE static BLOCKSCALE_BIT_CAST_CONSTEXPR float
  decode(std::uint16_t bits) noexcept {
    return detail::bfloat16_bits_to_float(bits);
  }
};

/// The IEEE 754 binary16 encoding (subnormals, Inf and NaN).
struct float16_layout {
  static constexpr std::uint16_t infinity_bits = 0x7C00u;
  BLOCKSCALE_HOST_DEVICE static BLOCKSCALE_BIT_CAST_CONSTEXPR std::uint16_t
  encode(float x) noexcept {
    return detail::float_to_float16_bits(x);
  }
  BLOCKSCALE_HOST_DEVICE static BLOCKSCALE_BIT_CAST_CONSTEXPR float
  decode(std::uint16_t bits) noexcept {
    return detail::float16_bits_to_float(bits);
  }
};

/// A 16-bit floating-point value in `Layout`'s encoding (`bfloat16`, `float16`), stored in two
/// bytes. Trivially copyable; a storage type without arithmetic or comparisons (convert to float
/// for those).
template <class Layout>
class half_storage {
public:
  half_storage() = default;

  /// Rounds to nearest, ties to even (subnormals included); overflow gives ±Inf (float16: from
  /// |x| >= 65520), NaN a quiet NaN with the same sign.
  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR explicit half_storage(float x) noexcept
      : bits_(Layout::encode(x)) {}
  /// Rounds the double itself to nearest even (no double rounding through float).
  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR explicit half_storage(double x) noexcept
      : bits_(Layout::encode(detail::double_to_float_round_odd(x))) {}

  /// Reinterprets CUDA's type of the same encoding (`__nv_bfloat16`, `__half`): available when
  /// `cuda_bf16.h` / `cuda_fp16.h` are included before blockscale. The bits are copied.
  template <class Cuda, detail::enable_if_cuda_equivalent<Layout, Cuda> = 0>
  BLOCKSCALE_HOST_DEVICE explicit half_storage(const Cuda& value) noexcept
      : bits_(detail::cuda_bridge<Layout>::bits(value)) {}
  /// The same bits as CUDA's type.
  template <class Cuda, detail::enable_if_cuda_equivalent<Layout, Cuda> = 0>
  BLOCKSCALE_HOST_DEVICE explicit operator Cuda() const noexcept {
    return detail::cuda_bridge<Layout>::from_bits(bits_);
  }

  /// The value with the given code.
  BLOCKSCALE_HOST_DEVICE static constexpr half_storage from_bits(std::uint16_t bits) noexcept {
    return half_storage(bits_tag{}, bits);
  }
  /// The code.
  BLOCKSCALE_HOST_DEVICE constexpr std::uint16_t bits() const noexcept { return bits_; }

  /// The exact value (every bfloat16 and float16 is a float).
  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR explicit operator float() const noexcept {
    return Layout::decode(bits_);
  }
  /// The exact value.
  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR explicit operator double() const noexcept {
    return static_cast<double>(Layout::decode(bits_));
  }

  /// True for every NaN code (exponent all ones, mantissa nonzero).
  BLOCKSCALE_HOST_DEVICE constexpr bool is_nan() const noexcept {
    return (bits_ & 0x7FFFu) > Layout::infinity_bits;
  }
  /// True for ±Inf.
  BLOCKSCALE_HOST_DEVICE constexpr bool is_inf() const noexcept {
    return (bits_ & 0x7FFFu) == Layout::infinity_bits;
  }
  /// True for the sign bit set (-0 and negative NaNs included).
  BLOCKSCALE_HOST_DEVICE constexpr bool signbit() const noexcept { return (bits_ & 0x8000u) != 0; }

private:
  struct bits_tag {};
  BLOCKSCALE_HOST_DEVICE constexpr half_storage(bits_tag, std::uint16_t bits) noexcept
      : bits_(bits) {}

  std::uint16_t bits_;
};

static_assert(sizeof(bfloat16) == 2 && std::is_trivially_copyable<bfloat16>::value,
              "bfloat16 is two trivially copyable bytes");
static_assert(sizeof(float16) == 2 && std::is_trivially_copyable<float16>::value,
              "float16 is two trivially copyable bytes");

} // namespace v0
} // namespace blockscale
