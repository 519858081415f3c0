/// \file block/scale_rule.hpp
/// How a block scale is derived from the block's amax: a target (the element value the block's
/// largest magnitude should map to) and a rounding direction for the scale. The field's rules:
///  - `scale_rules::nvfp4()`: target 6, nearest-even (NVFP4 / Transformer Engine; may clip the
///    block max slightly);
///  - `scale_rules::ocp_floor()`: target 4 = 2^emax(E2M1), round down (OCP MX v1.0);
///  - `scale_rules::rceil()`: target 6, round up (cuBLAS / NVIDIA MX; never clips);
///  - `scale_rules::ue5m3_nearest()`: target 6, nearest-even (the UE5M3-FP4 default);
///  - `scale_rules::ue5m3_up()`: target 6, round up (UE5M3-FP4, never clipping).
///
/// Every rule follows Transformer Engine's FP32 operation order (docs/quantization.md):
/// m = s_enc · fp32(1 / target); S_b = scale(min(amax_b · m, FLT_MAX)); f_b = min(1 / (S_b ·
/// s_dec), FLT_MAX); q = element(x · f_b). The codec (block/codec.hpp) is where it is written.
#pragma once

#include <cfloat>
#include <cstdint>

#include "../config.hpp"
#include "../numeric/convert.hpp"
#include "../numeric/rounding.hpp"
#include "block_format.hpp"

namespace blockscale {
inline namespace v0 {

/// Rounding of the block scale (a runtime choice, mapped to the rounding tags in one place).
enum class scale_rounding { nearest_even, up, down };

/// A block-scale rule: the scale is convert<Scale>(amax_b / target · s_enc, rounding). Plain data:
/// the rounding is mapped to its tag once per call (`with_rounding_tags`,
/// block/quantize_params.hpp), and the codec (block/codec.hpp) applies the rule.
struct scale_rule {
  float target;            ///< the element value a block's largest magnitude maps to
  scale_rounding rounding; ///< how amax_b · m is rounded to the scale format
};

namespace scale_rules {
/// NVFP4 as in Transformer Engine: the block max lands at 6, the scale rounds to nearest.
BLOCKSCALE_HOST_DEVICE constexpr scale_rule nvfp4() noexcept {
  return {6.0f, scale_rounding::nearest_even};
}
/// OCP MX v1.0: X = 2^(floor(log2 amax) - emax(element)); values in (6, 8)·X clip to 6.
BLOCKSCALE_HOST_DEVICE constexpr scale_rule ocp_floor(float element_emax_value = 4.0f) noexcept {
  return {element_emax_value, scale_rounding::down};
}
/// cuBLAS "rceil": X = 2^ceil(log2(amax / 6)); never clips, may waste a binade.
BLOCKSCALE_HOST_DEVICE constexpr scale_rule rceil(float element_max = 6.0f) noexcept {
  return {element_max, scale_rounding::up};
}
/// UE5M3-FP4 default: target 6, nearest-even.
BLOCKSCALE_HOST_DEVICE constexpr scale_rule ue5m3_nearest() noexcept {
  return {6.0f, scale_rounding::nearest_even};
}
/// UE5M3-FP4, scale rounded up so that no element clips.
BLOCKSCALE_HOST_DEVICE constexpr scale_rule ue5m3_up() noexcept {
  return {6.0f, scale_rounding::up};
}
} // namespace scale_rules

/// The documented default rule of each block format: nearest-even at the element max for
/// UE4M3/UE5M3 scales, OCP floor at 2^emax(element) for UE8M0 scales.
template <class BlockFormat>
BLOCKSCALE_HOST_DEVICE constexpr scale_rule default_scale_rule() noexcept {
  using scale = typename BlockFormat::scale_type;
  using element = typename BlockFormat::element_type;
  if constexpr (format_traits<typename scale::format>::mantissa_bits == 0) {
    // 2^emax of the element format: the largest power of two at or below its max.
    return scale_rules::ocp_floor(
        detail::exp2i(format_traits<typename element::format>::max_exponent));
  } else {
    return {BlockFormat::element_max(), scale_rounding::nearest_even};
  }
}

} // namespace v0
} // namespace blockscale
