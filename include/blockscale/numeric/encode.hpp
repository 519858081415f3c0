/// \file numeric/encode.hpp
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
#include "../detail/bits.hpp"
#include "format.hpp"
#include "rounding.hpp"

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

/// The code of a finite result `code` (magnitude, may exceed the format) with `sign` applied, under
/// the overflow policy; `infinite_input` marks ±Inf, whose `code` is already beyond the max.
template <class Format, class Rounding>
BLOCKSCALE_HOST_DEVICE constexpr std::uint8_t apply_overflow(std::int32_t code, std::uint8_t sign,
                                                             bool, bool, saturate_finite) noexcept {
  using traits = format_traits<Format>;
  return static_cast<std::uint8_t>((code < traits::max_code ? code : traits::max_code) | sign);
}
template <class Format, class Rounding>
BLOCKSCALE_HOST_DEVICE constexpr std::uint8_t apply_overflow(std::int32_t code, std::uint8_t sign,
                                                             bool negative, bool infinite_input,
                                                             to_nonfinite) noexcept {
  using traits = format_traits<Format>;
  static_assert(traits::has_nan, "to_nonfinite needs a format with Inf or NaN");
  constexpr std::uint8_t nonfinite =
      traits::has_infinity ? traits::infinity_code : traits::nan_code;
  const bool to_infinity = infinite_input || Rounding::overflows_to_nonfinite(negative);
  const std::int32_t magnitude = code <= traits::max_code ? code
                                 : to_infinity            ? nonfinite
                                                          : traits::max_code;
  return static_cast<std::uint8_t>(magnitude | sign);
}

template <class Format, class Float, class Rounding, class Overflow>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR std::uint8_t
encode_general(Float x, Rounding rounding, Overflow overflow) noexcept;

/// E2M1 under nearest-even with saturation, the conversion every FP4 quantizer spends its time in:
/// |y| clamped to 6 and rounded to E2M1's grid by one float addition (the rule is explained at
/// e2m1_nearest_even_by_addition below). NaN gives +6 (code 0x7), like CUDA's
/// `__nv_cvt_float_to_fp4`. Bit-identical to the general routine below for every float (an
/// exhaustive test checks all 2^32). This is the one scalar E2M1 nearest-even encoder:
/// `convert<e2m1>`, the host quantizers' codec and scalar device code all come here, and an
/// architecture with a bit-identical conversion instruction replaces this body and nothing else.
/// (The device quantize kernels round a block at a time with block/codec_e2m1.hpp's register
/// body, whose biased sums pack into a word without extracting each code; tests/exhaustive/
/// exhaustive_codec.cpp checks it against convert<e2m1> on all 2^32 floats.) Device code runs
/// e2m1_nearest_even_by_addition as written; the host form computes the same sum for
/// vectorizers: no select that GCC could turn into a branch, no variable shift, and 32-bit values
/// up to the one narrowing to the code. (GCC 12 narrows a sum of small terms, such as the seven
/// comparisons this body used to count, to bytes term by term: a plain loop of them took 213
/// AVX2 instructions per 32 elements, this form 93.)
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE BLOCKSCALE_BIT_CAST_CONSTEXPR std::uint8_t
e2m1_nearest_even_by_addition(float y) noexcept;

BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE BLOCKSCALE_BIT_CAST_CONSTEXPR std::uint8_t
e2m1_nearest_even(float y) noexcept {
#if defined(__CUDA_ARCH__)
  return e2m1_nearest_even_by_addition(y); // half the instructions on a GPU; same codes
#else
  const std::uint32_t u = bit_cast<std::uint32_t>(y);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  // |y| clamped to 6 on its bits, which order as the magnitudes do (Inf and NaN lie above 6).
  const std::uint32_t c = a < 0x40C00000u ? a : 0x40C00000u;
  const std::int32_t exponent = static_cast<std::int32_t>(c >> 23) - 127;
  const std::uint32_t e = static_cast<std::uint32_t>(exponent > 0 ? exponent : 0);
  // The addend 1.5 · 2^(22 + e) plus 2e units of its last place, the binade's spacing 2^(e - 1):
  // an even number of units moves no tie, so the sum's low three bits are the magnitude code
  // itself, (rounded |c| / 2^(e - 1)) + 2e (the device form adds 2e after the sum).
  const float sum = bit_cast<float>(c) + bit_cast<float>((e << 23) + 0x4AC00000u + 2u * e);
  // The sign by a mask rather than a select, and dropped for NaN (+6).
  const std::uint32_t signed_bits = u & (0u - std::uint32_t{a <= 0x7F800000u});
  return static_cast<std::uint8_t>((bit_cast<std::uint32_t>(sum) & 7u) |
                                   ((signed_bits >> 28) & 8u));
#endif
}

/// The same codes as e2m1_nearest_even by one float addition, the body device code uses (an
/// exhaustive test checks this host model of it on all 2^32 floats). y is clamped to [-6, 6] (NaN
/// gives +6), then |c| + 1.5 · 2^(22 + e) — e = 0, 1, 2 for |c| below 2, below 4, up to 6 — rounds
/// |c| to a multiple of the binade's spacing 2^(e - 1) in the sum's last bits (FP32 addition rounds
/// to nearest, ties to even: exactly E2M1's rule), whose low three bits plus 2e are the code's
/// magnitude.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE BLOCKSCALE_BIT_CAST_CONSTEXPR std::uint8_t
e2m1_nearest_even_by_addition(float y) noexcept {
#if defined(__CUDA_ARCH__)
  const float c = fmaxf(fminf(y, 6.0f), -6.0f); // fminf(NaN, 6) = 6
#else
  const float below = y <= 6.0f ? y : 6.0f; // NaN fails the comparison: 6
  const float c = below >= -6.0f ? below : -6.0f;
#endif
  const std::uint32_t u = bit_cast<std::uint32_t>(c);
  const int biased = static_cast<int>((u << 1) >> 24);
  const std::uint32_t e = biased > 127 ? static_cast<std::uint32_t>(biased - 127) : 0u;
  const float magnitude = bit_cast<float>(u & 0x7FFFFFFFu);
  const float sum = magnitude + bit_cast<float>((e << 23) + 0x4AC00000u); // 1.5 · 2^(22 + e)
  return static_cast<std::uint8_t>(((bit_cast<std::uint32_t>(sum) & 7u) + 2u * e) |
                                   ((u >> 28) & 8u));
}

/// Encodes `x` in `Format` under `rounding` and `overflow`. Every input has a defined result:
/// NaN gives the NaN code (+max where the format has no NaN), negative input to an unsigned
/// format gives its smallest code (0, or 2^-127 for UE8M0), and a format without zero gives its
/// smallest value for anything that would round below it. Written without branches on the value
/// (the special cases are selected at the end), so that loops over it vectorize.
template <class Format, class Float, class Rounding, class Overflow>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR std::uint8_t
encode(Float x, Rounding rounding, Overflow overflow) noexcept {
  if constexpr (std::is_same<Format, e2m1_format>::value && std::is_same<Float, float>::value &&
                std::is_same<Rounding, round_nearest_even>::value &&
                std::is_same<Overflow, saturate_finite>::value) {
    return e2m1_nearest_even(x);
  } else {
    return encode_general<Format>(x, rounding, overflow);
  }
}

/// The general rounding routine behind `encode` (see the file comment); `encode` calls it for
/// every format and mode but the one with a dedicated body above.
template <class Format, class Float, class Rounding, class Overflow>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR std::uint8_t
encode_general(Float x, Rounding rounding, Overflow overflow) noexcept {
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

  // |x| = sig * 2^(e - source::mantissa_bits), with the hidden bit of normal numbers in sig.
  const int biased = static_cast<int>(a >> source::mantissa_bits);
  bits_type sig = (a & (hidden_bit - 1)) | (biased != 0 ? hidden_bit : bits_type{0});
  int e = (biased != 0 ? biased : 1) - source::bias;
  if constexpr (traits::min_exponent - mantissa_bits < 1 - source::bias) {
    // The target reaches below this source's normal range (UE8M0 from float): give subnormal
    // input its true exponent, so te below is exact.
    const int shift =
        biased == 0 && sig != 0 ? countl_zero(sig) - (source_width - 1 - source::mantissa_bits) : 0;
    sig <<= shift;
    e -= shift;
  }
  const int te = e > traits::min_exponent ? e : traits::min_exponent;

  // |x| / quantum = sig / 2^shift, shift >= source::mantissa_bits - mantissa_bits > 0: split it
  // into the kept integer part, the next 32 bits (fraction) and whether anything lies below.
  const int shift = te - e + source::mantissa_bits - mantissa_bits;
  std::uint32_t kept = 0, fraction = 0;
  bool sticky = false;
  if constexpr (sizeof(bits_type) == 4) {
    // float: sig < 2^24 fits a 64-bit window with 32 fraction bits; straight-line code that
    // vectorizes. A shift of 56 or more leaves nothing in the window.
    const std::uint64_t window = std::uint64_t{sig} << 32;
    const int s = shift < 63 ? shift : 63;
    const std::uint64_t scaled = window >> s;
    kept = static_cast<std::uint32_t>(scaled >> 32);
    fraction = static_cast<std::uint32_t>(scaled);
    sticky = (scaled << s) != window;
  } else {
    // double: sig < 2^53, shift >= 45.
    const bits_type rest = shift < source_width ? sig & ((bits_type{1} << shift) - 1) : sig;
    const int below = shift - 32;
    kept = static_cast<std::uint32_t>(shift < source_width ? sig >> shift : 0);
    fraction = below < source_width ? static_cast<std::uint32_t>(rest >> below) : 0u;
    sticky = (below < source_width ? rest & ((bits_type{1} << below) - 1) : rest) != 0;
  }
  // The code with the discarded part dropped; rounding away adds one. Its last bit is the parity
  // that ties-to-even and round-to-odd look at (the last mantissa bit, or for UE8M0, which has
  // none, the last exponent bit).
  std::int32_t code =
      ((te - traits::min_exponent) << mantissa_bits) + static_cast<std::int32_t>(kept);
  if constexpr (!traits::has_subnormals)
    code -= std::int32_t{1} << mantissa_bits;
  // (Parity as `bits << 31 != 0`: GCC folds `(bits & 1) != 0` into a bool truncation that its
  // vectorizer rejects.)
  const bool odd = (static_cast<std::uint32_t>(code) << 31) != 0;
  const bool away = rounding.rounds_away(discarded_bits{fraction, sticky, odd, negative});
  code += static_cast<std::int32_t>(away);
  // Without subnormals, exponent field 0 is a normal binade and below it there is nothing, not
  // even zero: anything smaller becomes the smallest value.
  if constexpr (!traits::has_subnormals)
    code = code < 0 ? 0 : code;
  // The sign by arithmetic rather than a select: random signs would defeat branch prediction.
  const auto sign = static_cast<std::uint8_t>(
      traits::is_signed
          ? static_cast<std::uint32_t>(u >> (source_width - 1)) << traits::magnitude_bits
          : 0u);
  // Inf input arrives here with a code beyond the max (its exponent field is all ones), so the
  // overflow policy handles it; NaN and negative input to unsigned formats are selected last.
  std::uint8_t result =
      apply_overflow<Format, Rounding>(code, sign, negative, a == infinity_bits, overflow);
  if constexpr (!traits::is_signed)
    result = negative ? std::uint8_t{0} : result;
  result = a > infinity_bits ? (traits::has_nan ? traits::nan_code : traits::max_code) : result;
  return result;
}

} // namespace detail
} // namespace v0
} // namespace blockscale
