/// \file cuda/warp/dequant.hpp
/// In-register dequantization of packed E2M1 to BF16, exact for every scale format: the path of
/// every architecture without a block-scaled MMA for the operands' scales (sm_80, sm_90, and
/// UE5M3 or mixed scale formats everywhere).
///
/// One 32-bit word holds eight E2M1 codes, element i in bits [4i, 4i + 4). `e2m1_pair(q, j)`
/// turns nibbles j (low half) and j + 4 (high half) into a bf16x2 of value v · 2^-126 with two
/// shifts and a mask: the code's sign lands on the bf16 sign bit and its three magnitude bits on
/// the two low exponent bits and the top mantissa bit, which is exactly E2M1 rebased (exponent
/// field 0 is the subnormal 0.5·m, as in E2M1). One `mul.rn.bf16x2` by the block scale's
/// *multiplier* then gives v · S · 2^-d, with d = `dequant_scale<Scale>::offset`, exactly: v has at
/// most two significant bits and S at most four, so the product fits bf16's eight, and the
/// multiplier 2^(126 - d) · S is chosen so that neither it nor the product leaves bf16's range or
/// falls below its smallest subnormal. The GEMM's FP32 epilogue multiplies by 2^(d_a + d_b).
///
/// - UE4M3 and UE5M3: d = 26 (one multiply; exact for 2^(126-d) anywhere in [2^3, 2^111], checked
///   for all 16 × 256 code pairs in the tests). A wider user format takes a larger d, derived from
///   its largest exponent (`detail::dequant_offset`; a UE6M2 gets 31).
/// - UE8M0 spans 255 binades, more than one bf16 multiplier can carry: two multiplies, by 2^x1
///   and 2^x2 with x1 + x2 = code - 5 (so d = 4), each product exact and in range.
///
/// `dequant_scale<Scale>::multiplier(code)` has no branch: it assembles the finite multiplier from
/// the code's bits for every code (UE8M0: an integer multiply-add and a mask per word; UE4M3 and
/// UE5M3: the code's fields placed in a float's with the exponent rebased, one FFMA and an integer
/// min for the subnormal codes) and selects the word of a NaN code over it. A NaN scale code gives
/// a NaN multiplier (0x7FC0 in both halves of both words), so the block's products are NaN, as in
/// the reference; an Inf code (IEEE-style user formats only) gives +Inf. As compiled by nvcc 13.0
/// that is 6 instructions per UE5M3 code and 7 per UE4M3 or UE8M0 code on sm_80 to sm_120a.
#pragma once

#include <cstdint>

#include "../../config.hpp"
#include "../../detail/bits.hpp"
#include "../../numeric/format.hpp"
#include "../../numeric/minifloat.hpp"

namespace blockscale {
inline namespace v0 {
namespace cuda {
namespace warp {

/// bf16x2 of E2M1 nibbles j (low half) and j + 4 (high half) of `q`, each of value v · 2^-126.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE constexpr std::uint32_t e2m1_pair(std::uint32_t q,
                                                                                int j) noexcept {
  const std::uint32_t t = q << (4 * (3 - j));
  return (t & 0x80008000u) | ((t >> 6) & 0x01C001C0u);
}

/// bf16x2 of the two E2M1 codes of byte `b` (< 256): the low nibble in the low half, the high
/// nibble in the high half, each of value v · 2^-126 as `e2m1_pair` makes them. The wgmma A
/// fragment wants two K-adjacent elements per register, which share a byte: one multiply places
/// the byte at bits 6 and 18, where the low code's magnitude lands on the low half's bits 6–8 and
/// the high code's on bits 22–24, and their signs (bits 9 and 25) one shift of 6 below 15 and 31.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE constexpr std::uint32_t
e2m1_byte_pair(std::uint32_t b) noexcept {
  const std::uint32_t y = b * 0x00040040u;
  return (y & 0x01C001C0u) | ((y << 6) & 0x80008000u);
}

/// Byte `i` (0 … 3) of `w`, zero-extended: one PRMT on the device.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE std::uint32_t byte_of(std::uint32_t w,
                                                                    int i) noexcept {
#if defined(__CUDA_ARCH__)
  return __byte_perm(w, 0u, 0x4440u | static_cast<unsigned>(i));
#else
  return (w >> (8 * i)) & 0xFFu;
#endif
}

/// The bf16 multipliers of one block scale, each a bf16 in both halves of a word (not to be
/// confused with `quantize_params::scale_multiplier`, the float m of the quantizer).
struct bf16_multiplier {
  std::uint32_t first = 0;
  std::uint32_t second = 0; ///< used only when `dequant_scale<Scale>::multiplies == 2`
};
/// The former name of `bf16_multiplier`.
using scale_multiplier [[deprecated("renamed bf16_multiplier")]] = bf16_multiplier;

namespace detail {
/// A bf16 in both halves of a word: the high half of `bits`, whose low half must be zero (a float
/// that is exactly a bf16), copied down by one add (LEA.HI).
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE constexpr std::uint32_t
high_half_in_both_halves(std::uint32_t bits) noexcept {
  return bits + (bits >> 16);
}
/// `top >> n` (0 < n < 32). On the device it is written as the high word of top · 2^(32 - n), the
/// same value: with a plain shift of a code shifted left, nvcc folds the two shifts into a shift
/// and a mask, and the add that follows costs one more instruction than the one LEA.HI it
/// becomes this way.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE constexpr std::uint32_t shift_down(std::uint32_t top,
                                                                                 int n) noexcept {
#if defined(__CUDA_ARCH__)
  return __umulhi(top, 1u << (32 - n));
#else
  return top >> n;
#endif
}
inline constexpr std::uint32_t bf16x2_nan = 0x7FC07FC0u;      ///< quiet NaN in both halves
inline constexpr std::uint32_t bf16x2_infinity = 0x7F807F80u; ///< +Inf in both halves
/// The dequantized value is element · scale · 2^-offset. Power-of-two scales (two multiplies): 4.
/// Otherwise (one multiply) the multiplier S · 2^fold, fold = 126 - offset, must stay below 2^128:
/// fold = min(100, 127 - max exponent), so 26 for UE4M3 and UE5M3 and more for a wider format
/// (31 for a UE6M2); `single_multiplier_exact` checks that the smallest product stays exact.
template <class Traits>
inline constexpr int dequant_offset = Traits::mantissa_bits == 0
                                          ? 4
                                          : 126 - (127 - Traits::max_exponent < 100
                                                       ? 127 - Traits::max_exponent
                                                       : 100);
/// One multiply by S · 2^fold (fold = 126 - offset) is exact when S has at most six significant
/// bits (v · S fits bf16's eight), the smallest product stays on bf16's subnormal grid
/// (fold >= -6 - lsb exponent) and the multiplier below 2^128 (fold <= 127 - max exponent).
template <class Traits>
constexpr bool single_multiplier_exact() noexcept {
  constexpr int fold = 126 - dequant_offset<Traits>;
  return Traits::mantissa_bits <= 5 &&
         fold >= -6 - (Traits::min_exponent - Traits::mantissa_bits) &&
         fold <= 127 - Traits::max_exponent;
}
/// The two-multiply rule is derived for UE8M0's layout.
template <class Traits>
constexpr bool two_multipliers_exact() noexcept {
  return Traits::bias == 127 && Traits::exponent_bits == 8;
}
} // namespace detail

/// Whether dequant_scale<Scale> exists: an unsigned scale format that one bf16 multiplier (or,
/// for UE8M0, two) turns into exact products.
template <class Scale>
inline constexpr bool has_dequant_scale =
    !format_traits<typename Scale::format>::is_signed &&
    (format_traits<typename Scale::format>::mantissa_bits == 0
         ? detail::two_multipliers_exact<format_traits<typename Scale::format>>()
         : detail::single_multiplier_exact<format_traits<typename Scale::format>>());

/// How `Scale` codes become bf16 multipliers (see the file comment).
template <class Scale>
struct dequant_scale {
  using traits = format_traits<typename Scale::format>;
  static_assert(!traits::is_signed, "block scales are unsigned formats");
  static constexpr bool power_of_two = traits::mantissa_bits == 0;
  /// bf16 multiplies per pair of elements.
  static constexpr int multiplies = power_of_two ? 2 : 1;
  /// The dequantized value is element · scale · 2^-offset.
  static constexpr int offset = detail::dequant_offset<traits>;
  static constexpr int fold = 126 - offset; ///< the multiplier is S · 2^fold
  static_assert(power_of_two || detail::single_multiplier_exact<traits>(),
                "no single bf16 multiplier is exact for this scale format");
  static_assert(!power_of_two || detail::two_multipliers_exact<traits>(),
                "the two-multiply rule is derived for UE8M0");

  /// The multipliers of `code` (bits above the format's are ignored), without a branch: the
  /// finite multiplier is assembled from the code's bits for every code, and the word of a NaN
  /// (or Inf) code replaces it by a select on a predicate of the same bits.
  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR static bf16_multiplier
  multiplier(std::uint8_t code) noexcept {
    constexpr int e = traits::exponent_bits, m = traits::mantissa_bits;
    // The magnitude at the top of a word: the bits above the format's fall off.
    const std::uint32_t top = std::uint32_t{code} << (32 - e - m);
    if constexpr (power_of_two) {
      // 2^(code - 127) · 2^122 = 2^x1 · 2^x2, x = code - 5 in [-5, 249]: x2 = floor(x / 2) in
      // [-3, 124] and x1 = x - x2 in [-2, 125]; element · 2^-126 · 2^x1 >= 2^-129 and the result
      // >= 2^-132 stay on bf16's subnormal grid (2^-133), and 6 · 2^(x - 126) < 2^128. Their bf16
      // exponent fields are x1 + 127 = (code + 250) >> 1 and x2 + 127 = (code + 249) >> 1: times
      // 0x00400040 puts (code + 250) << 6 in each half (at most 505 · 64 < 2^15, no carry between
      // them), and the mask keeps bits 7..14 of each, the field shifted right by one. Code 255
      // gives field 252 (0x7E00), whose bits lie inside the NaN and the Inf word: OR-ing the
      // special word in (one LOP3 with the mask) replaces it.
      constexpr std::uint32_t in_both_halves = 0x00400040u, exponent_fields = 0x7F807F80u;
      const std::uint32_t special = special_word(top);
      return {((code + 250u) * in_both_halves & exponent_fields) | special,
              ((code + 249u) * in_both_halves & exponent_fields) | special};
    } else {
      // The code's exponent and mantissa fields placed in a float's (from the top of the word:
      // see shift_down), the exponent rebased by fold - bias: a code of exponent field E >= 1
      // (every code, without subnormals) reads (1 + f) · 2^(E - bias + fold) = S · 2^fold
      // exactly, a float of at most 1 + m <= 8 significant bits, so its low 16 bits are zero and
      // its high half is the bf16.
      constexpr std::uint32_t rebase = static_cast<std::uint32_t>(127 - traits::bias + fold) << 23;
      std::uint32_t value =
          rebase + (e + m < 8 ? detail::shift_down(top, 9 - e) : std::uint32_t{code} << (23 - m));
      if constexpr (traits::has_subnormals) {
        // Exponent field 0 is subnormal, f · 2^(c + 1) with c = fold - bias, but reads
        // (1 + f) · 2^c: the value is 2 · read - 2^(c + 1), exact (2 · read lies in
        // [2^(c + 1), 2^(c + 2))). Every other code reads at least 2^(c + 1), so there
        // 2 · read - 2^(c + 1) >= read: the value is the smaller of the two for every code, and
        // positive floats order as their bits (one integer min). No float is subnormal (the
        // smallest nonzero value is 2^(c + 1 - m) >= 2^-6 by the static_assert above), so
        // flush-to-zero builds give the same bits.
        const float as_subnormal = 2.0f * blockscale::detail::bit_cast<float>(value) -
                                   blockscale::detail::exp2i(fold - traits::bias + 1);
        const auto as_subnormal_bits = blockscale::detail::bit_cast<std::uint32_t>(as_subnormal);
        value = as_subnormal_bits < value ? as_subnormal_bits : value;
      }
      const std::uint32_t special = special_word(top);
      const bool finite = special == 0;
      return {finite ? detail::high_half_in_both_halves(value) : special, special};
    }
  }

private:
  /// The word of a NaN code (NaN in both halves) or an Inf code (IEEE-style formats: Inf), else 0;
  /// `top` is the code's magnitude at the top of a word. Compares and selects, no branch.
  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE static constexpr std::uint32_t
  special_word(std::uint32_t top) noexcept {
    constexpr int shift = 32 - traits::magnitude_bits;
    if constexpr (traits::nonfinite == nonfinite_encoding::nan_only) {
      return top == std::uint32_t{traits::nan_code} << shift ? detail::bf16x2_nan : 0u;
    } else if constexpr (traits::nonfinite == nonfinite_encoding::ieee) {
      constexpr std::uint32_t infinity = std::uint32_t{traits::infinity_code} << shift;
      return top < infinity ? 0u : top == infinity ? detail::bf16x2_infinity : detail::bf16x2_nan;
    } else {
      return 0u;
    }
  }
};

/// Eight E2M1 codes of `q` times one block scale: out[j], j < 4, = bf16x2 of elements (j, j + 4),
/// each element · S · 2^-offset. `Warp` supplies the bf16x2 multiply (cuda/warp.hpp).
template <class Warp, class Scale>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE void dequantize8(std::uint32_t q, bf16_multiplier s,
                                                               std::uint32_t* out) {
  BLOCKSCALE_UNROLL
  for (int j = 0; j < 4; ++j) {
    out[j] = Warp::mul_bf16x2(e2m1_pair(q, j), s.first);
    if constexpr (dequant_scale<Scale>::multiplies == 2)
      out[j] = Warp::mul_bf16x2(out[j], s.second);
  }
}

} // namespace warp
} // namespace cuda
} // namespace v0
} // namespace blockscale
