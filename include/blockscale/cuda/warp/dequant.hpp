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
///   for all 16 × 256 code pairs in the tests).
/// - UE8M0 spans 255 binades, more than one bf16 multiplier can carry: two multiplies, by 2^x1
///   and 2^x2 with x1 + x2 = code - 5 (so d = 4), each product exact and in range.
/// A NaN scale code gives a NaN multiplier, so the block's products are NaN, as in the reference.
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

/// The multipliers of one block scale, each a bf16 in both halves of a word.
struct scale_multiplier {
  std::uint32_t first = 0;
  std::uint32_t second = 0; ///< used only when `dequant_scale<Scale>::multiplies == 2`
};

namespace detail {
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE constexpr std::uint32_t
bf16_in_both_halves(std::uint32_t bits16) noexcept {
  return bits16 | (bits16 << 16);
}
/// bf16 of 2^e, a normal number (e in [-126, 127]).
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE constexpr std::uint32_t bf16_power_of_two(int e) {
  return static_cast<std::uint32_t>(e + 127) << 7;
}
inline constexpr std::uint32_t bf16_nan = 0x7FC0u;
} // namespace detail

/// How `Scale` codes become bf16 multipliers (see the file comment).
template <class Scale>
struct dequant_scale {
  using traits = format_traits<typename Scale::format>;
  static_assert(!traits::is_signed, "block scales are unsigned formats");
  static constexpr bool power_of_two = traits::mantissa_bits == 0;
  /// bf16 multiplies per pair of elements.
  static constexpr int multiplies = power_of_two ? 2 : 1;
  /// The dequantized value is element · scale · 2^-offset.
  static constexpr int offset = power_of_two ? 4 : 26;
  static constexpr int fold = 126 - offset; ///< the multiplier is S · 2^fold
  // One multiply is exact when the smallest product stays on bf16's subnormal grid
  // (fold >= -6 - lsb exponent) and the multiplier below 2^128 (fold <= 127 - max exponent).
  static_assert(power_of_two || (fold >= -6 - (traits::min_exponent - traits::mantissa_bits) &&
                                 fold <= 127 - traits::max_exponent),
                "no single bf16 multiplier is exact for this scale format");
  static_assert(!power_of_two || (traits::bias == 127 && traits::exponent_bits == 8),
                "the two-multiply rule is derived for UE8M0");

  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR static scale_multiplier
  multiplier(std::uint8_t code) noexcept {
    const auto magnitude = static_cast<std::uint8_t>(code & traits::magnitude_mask);
    if (Scale::from_bits(code).is_nan())
      return {detail::bf16_in_both_halves(detail::bf16_nan),
              detail::bf16_in_both_halves(detail::bf16_nan)};
    if constexpr (power_of_two) {
      // 2^(code - 127) · 2^122 = 2^x1 · 2^x2, x = code - 5 in [-5, 249]: x1 in [-2, 125] and
      // x2 in [-3, 124]; element · 2^-126 · 2^x1 >= 2^-129 and the result >= 2^-132 stay on
      // bf16's subnormal grid (2^-133), and 6 · 2^(x - 126) < 2^128.
      const int x = static_cast<int>(magnitude) - 5;
      const int x2 = x >= 0 ? x / 2 : -((1 - x) / 2);
      return {detail::bf16_in_both_halves(detail::bf16_power_of_two(x - x2)),
              detail::bf16_in_both_halves(detail::bf16_power_of_two(x2))};
    } else {
      constexpr int m = traits::mantissa_bits;
      const int field = magnitude >> m;
      const int mantissa = magnitude & ((1 << m) - 1);
      const int significand = field != 0 ? (mantissa | (1 << m)) : mantissa;
      const int exponent = (field != 0 ? field - traits::bias : traits::min_exponent) - m + fold;
      // significand · 2^exponent with a normal power of two: the float product is exact, and
      // its top 16 bits are the bf16 (at most four significant bits). No subnormal is involved,
      // so flush-to-zero builds give the same bits.
      const float value =
          static_cast<float>(significand) *
          blockscale::detail::bit_cast<float>(static_cast<std::uint32_t>(exponent + 127) << 23);
      return {detail::bf16_in_both_halves(blockscale::detail::bit_cast<std::uint32_t>(value) >> 16),
              0u};
    }
  }
};

/// Eight E2M1 codes of `q` times one block scale: out[j], j < 4, = bf16x2 of elements (j, j + 4),
/// each element · S · 2^-offset. `Warp` supplies the bf16x2 multiply (cuda/warp.hpp).
template <class Warp, class Scale>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE void dequantize8(std::uint32_t q, scale_multiplier s,
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
