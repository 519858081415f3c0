/// \file detail/encode.hpp
/// The one rounding routine behind every conversion from float or double to a small format.
///
/// The value |x| = sig * 2^(e - source_mantissa_bits) is expressed in units of the target's
/// quantum at the exponent it lands in, te = max(floor(log2 |x|), min_exponent); the quantum is
/// 2^(te - mantissa_bits). The integer part of |x| / quantum is the kept magnitude, below
/// 2^(mantissa_bits + 1); the rest is the discarded fraction that the rounding tag judges. With
/// the magnitude rounded, the code is ((te - min_exponent) << mantissa_bits) + magnitude: a carry
/// out of the mantissa walks into the next binade, and a subnormal result (te = min_exponent,
/// magnitude < 2^mantissa_bits) lands on exponent field 0, with no special case for either.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../config.hpp"
#include "../format.hpp"
#include "../rounding.hpp"
#include "bits.hpp"

namespace blockscale {
inline namespace v0 {
namespace detail {

/// Bit layout of the IEEE binary formats we convert from.
template <class Float>
struct source_traits;
template <>
struct source_traits<float> {
  using bits_type = std::uint32_t;
  static constexpr int mantissa_bits = 23;
  static constexpr int bias = 127;
};
template <>
struct source_traits<double> {
  using bits_type = std::uint64_t;
  static constexpr int mantissa_bits = 52;
  static constexpr int bias = 1023;
};

/// The code for a value beyond the largest finite one (or infinite input) under `Overflow`.
template <class Format, class Rounding>
BLOCKSCALE_HOST_DEVICE constexpr std::uint8_t overflow_code(bool negative, bool infinite_input,
                                                            saturate_finite) noexcept {
  using traits = format_traits<Format>;
  (void)infinite_input;
  return static_cast<std::uint8_t>(traits::max_code | (negative ? traits::sign_mask : 0));
}
template <class Format, class Rounding>
BLOCKSCALE_HOST_DEVICE constexpr std::uint8_t overflow_code(bool negative, bool infinite_input,
                                                            to_nonfinite) noexcept {
  using traits = format_traits<Format>;
  static_assert(traits::has_nan, "to_nonfinite needs a format with Inf or NaN");
  const std::uint8_t sign = negative ? traits::sign_mask : std::uint8_t{0};
  if (!infinite_input && !Rounding::overflows_to_nonfinite(negative))
    return static_cast<std::uint8_t>(traits::max_code | sign);
  return static_cast<std::uint8_t>((traits::has_infinity ? traits::infinity_code : traits::nan_code) |
                                   sign);
}

/// Encodes `x` in `Format` under `rounding` and `overflow`. Every input has a defined result:
/// NaN gives the NaN code (+max where the format has no NaN), negative input to an unsigned
/// format gives its smallest code (0, or 2^-127 for UE8M0), and a format without zero gives its
/// smallest value for anything that would round below it.
template <class Format, class Float, class Rounding, class Overflow>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR std::uint8_t
encode(Float x, Rounding rounding, Overflow overflow) noexcept {
  using traits = format_traits<Format>;
  using source = source_traits<Float>;
  using bits_type = typename source::bits_type;
  constexpr int source_width = static_cast<int>(sizeof(bits_type) * 8);
  constexpr bits_type magnitude_mask = ~bits_type{0} >> 1;
  constexpr bits_type infinity_bits = (magnitude_mask >> source::mantissa_bits)
                                      << source::mantissa_bits;
  constexpr bits_type hidden_bit = bits_type{1} << source::mantissa_bits;
  constexpr int mantissa_bits = traits::mantissa_bits;

  const bits_type u = bit_cast<bits_type>(x);
  const bool negative = (u >> (source_width - 1)) != 0;
  const bits_type a = u & magnitude_mask;

  if (a > infinity_bits) return traits::has_nan ? traits::nan_code : traits::max_code;
  if (!traits::is_signed && negative) return 0;
  if (a == infinity_bits) return overflow_code<Format, Rounding>(negative, true, overflow);

  // |x| = sig * 2^(e - source::mantissa_bits), with the hidden bit of normal numbers in sig.
  const int biased = static_cast<int>(a >> source::mantissa_bits);
  bits_type sig = a & (hidden_bit - 1);
  int e = 1 - source::bias;
  if (biased != 0) {
    sig |= hidden_bit;
    e = biased - source::bias;
  }
  if constexpr (traits::min_exponent - mantissa_bits < 1 - source::bias) {
    // The target reaches below this source's normal range (UE8M0 from float): give subnormal
    // input its true exponent, so te below is exact.
    if (biased == 0 && sig != 0) {
      const int shift = countl_zero(sig) - (source_width - 1 - source::mantissa_bits);
      sig <<= shift;
      e -= shift;
    }
  }
  const int te = e > traits::min_exponent ? e : traits::min_exponent;

  // |x| / quantum = sig / 2^shift; shift >= source::mantissa_bits - mantissa_bits > 0.
  const int shift = te - e + source::mantissa_bits - mantissa_bits;
  const bits_type kept = shift < source_width ? sig >> shift : bits_type{0};
  const bits_type rest = shift < source_width ? sig & ((bits_type{1} << shift) - 1) : sig;
  // The first 32 bits of `rest` below the binary point, and whether anything lies below them.
  std::uint32_t fraction = 0;
  bool sticky = false;
  if (shift <= 32) {
    fraction = static_cast<std::uint32_t>(rest << (32 - shift));
  } else {
    const int below = shift - 32;
    fraction = below < source_width ? static_cast<std::uint32_t>(rest >> below) : 0u;
    sticky = (below < source_width ? rest & ((bits_type{1} << below) - 1) : rest) != 0;
  }

  auto magnitude = static_cast<std::int32_t>(kept);
  if (rounding.rounds_away(discarded_bits{fraction, sticky, (kept & 1) != 0, negative}))
    ++magnitude;

  std::int32_t code = ((te - traits::min_exponent) << mantissa_bits) + magnitude;
  if constexpr (!traits::has_subnormals) {
    // Exponent field 0 is a normal binade; below it there is nothing, not even zero.
    code -= std::int32_t{1} << mantissa_bits;
    if (code < 0) code = 0;
  }
  if (code > traits::max_code) return overflow_code<Format, Rounding>(negative, false, overflow);
  return static_cast<std::uint8_t>(code | (negative ? traits::sign_mask : 0));
}

} // namespace detail
} // namespace v0
} // namespace blockscale
