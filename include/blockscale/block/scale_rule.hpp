/// \file scale_rule.hpp
/// How a block scale is derived from the block's amax: a target (the element value the block's
/// largest magnitude should map to) and a rounding direction for the scale. The field's rules:
///
/// | rule | target | rounding | used by |
/// |---|---|---|---|
/// | `scale_rules::nvfp4()` | 6 | nearest-even | NVFP4 / Transformer Engine (may clip the max
/// slightly) | | `scale_rules::ocp_floor()` | 4 = 2^emax(E2M1) | down | OCP MX v1.0 | |
/// `scale_rules::rceil()` | 6 | up | cuBLAS / NVIDIA MX (never clips) | |
/// `scale_rules::ue5m3_nearest()` | 6 | nearest-even | UE5M3-FP4 default | |
/// `scale_rules::ue5m3_up()` | 6 | up | UE5M3-FP4, never clipping |
///
/// Every rule follows Transformer Engine's FP32 operation order (REFERENCE.md §2):
/// m = s_enc · fp32(1 / target); S_b = scale(min(amax_b · m, FLT_MAX)); f_b = min(1 / (S_b ·
/// s_dec), FLT_MAX); q = element(x · f_b).
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

/// A block-scale rule: the scale is convert<Scale>(amax_b / target · s_enc, rounding).
struct scale_rule {
  float target;
  scale_rounding rounding;

  /// The block scale code for a block amax, with m = s_enc · fp32(1 / target) precomputed.
  template <class Scale>
  BLOCKSCALE_HOST_DEVICE Scale block_scale(float amax, float m) const noexcept {
    const float scaled = amax * m; // NaN stays NaN; Inf is capped below
    const float capped = scaled < FLT_MAX ? scaled : (scaled == scaled ? FLT_MAX : scaled);
    switch (rounding) {
    case scale_rounding::up:
      return convert<Scale>(capped, round_up{});
    case scale_rounding::down:
      return convert<Scale>(capped, round_down{});
    case scale_rounding::nearest_even:
      break;
    }
    return convert<Scale>(capped, round_nearest_even{});
  }

  /// Whether the scale saturated: `scaled` (amax_b · m, before capping) rounds, with this rule's
  /// rounding and an unbounded exponent, to more than the scale format's max. A block scale of
  /// exactly the max that came from rounding down is not saturated.
  template <class Scale>
  BLOCKSCALE_HOST_DEVICE bool saturates(float scaled) const noexcept {
    using traits = format_traits<typename Scale::format>;
    const double max = static_cast<double>(static_cast<float>(Scale::from_bits(traits::max_code)));
    // The next value above the max if the exponent were unbounded, and the midpoint to it.
    const double next =
        max + static_cast<double>(detail::exp2i(traits::max_exponent - traits::mantissa_bits));
    const double value = static_cast<double>(scaled);
    switch (rounding) {
    case scale_rounding::up:
      return value > max;
    case scale_rounding::down:
      return value >= next;
    case scale_rounding::nearest_even:
      break;
    }
    const double midpoint = (max + next) / 2;
    return value > midpoint || (value == midpoint && (traits::max_code & 1) != 0);
  }
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
