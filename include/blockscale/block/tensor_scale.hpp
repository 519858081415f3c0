/// \file block/tensor_scale.hpp
/// Tensor-scale policies: how the FP32 tensor scale s_enc (the encode multiplier; s_dec = 1/s_enc
/// decodes) is chosen on each call. Every policy is a small object whose state is plain data, so
/// device code can hold the same state. One call goes (host/quantize.hpp does it for you):
///
///     if (policy.needs_amax()) policy.observe_amax(amax);   // measured first; may be all-reduced
///     float s_enc = policy.encode_scale();
///     ... quantize with s_enc; the quantizer reports the amax it saw ...
///     if (policy.records_amax()) policy.observe_amax(amax); // the same pass's amax, no extra read
///     policy.finish(saturated_block_scales);
///
/// For every policy that measures amax_t, s_enc = (E_max · S_max · 2^-headroom) / amax_t with
/// E_max the element max and S_max the scale format's max : NVFP4 (UE4M3, headroom 0)
/// gives Transformer Engine's 6·448/amax_t, UE5M3 with 8 binades the same number, with 2^8 of
/// growth left before a block scale saturates.
#pragma once

#include <cfloat>
#include <cstdint>

#include "../config.hpp"
#include "../detail/bits.hpp"
#include "block_format.hpp"

namespace blockscale {
inline namespace v0 {

/// s_enc from a measured amax, as Transformer Engine computes it: min(numerator / amax, FLT_MAX),
/// and 1 when that is 0 (amax = Inf). A NaN amax gives 1 as well (NaN blocks still get NaN scales).
/// The quotient is formed in double and rounded to float once, which gives the correctly rounded
/// float quotient — TE's FP32 division, bit for bit, wherever the numerator is a float (rounding
/// a double quotient of float operands to float is innocuous: 53 >= 2 · 24 + 2, Figueroa 1995) —
/// and stays exact for numerators beyond float's range (6 · 2^127 for UE8M0 scales).
BLOCKSCALE_HOST_DEVICE inline float encode_scale_from_amax(double numerator, float amax) noexcept {
  const double s = numerator / static_cast<double>(amax);
  if (!(s == s))
    return 1.0f;
  const float capped = s < static_cast<double>(FLT_MAX) ? static_cast<float>(s) : FLT_MAX;
  return capped == 0.0f ? 1.0f : capped;
}

/// E_max · S_max · 2^-headroom for a block format: the numerator of s_enc, exact (in double: for
/// UE8M0 scales the product exceeds float's range before the headroom brings it back).
template <class BlockFormat>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR double
tensor_scale_numerator(int headroom_binades) noexcept {
  return static_cast<double>(BlockFormat::element_max()) *
         static_cast<double>(BlockFormat::scale_max()) * detail::exp2_double(-headroom_binades);
}

/// The most binades of headroom a block format's tensor scale can keep: the span from the largest
/// scale to the smallest nonzero one (17 for UE4M3, 33 for UE5M3, 254 for UE8M0). With more, the
/// largest block's scale would round to zero; with a negative headroom every block of the tensor
/// amax would saturate its scale (contract/registry.hpp checks a run-time value against it).
template <class BlockFormat>
constexpr int max_headroom_binades() noexcept {
  using scale = format_traits<typename BlockFormat::scale_type::format>;
  return scale::max_exponent - (scale::min_exponent - scale::mantissa_bits);
}

/// No tensor scale: s_enc = 1 (MXFP4).
struct no_tensor_scale {
  std::uint64_t calls = 0;

  /// Whether this call needs amax_t measured before it quantizes.
  BLOCKSCALE_HOST_DEVICE constexpr bool needs_amax() const noexcept { return false; }
  /// Whether this call wants the amax its own quantization saw, after it.
  BLOCKSCALE_HOST_DEVICE constexpr bool records_amax() const noexcept { return false; }
  BLOCKSCALE_HOST_DEVICE constexpr void observe_amax(float) noexcept {}
  BLOCKSCALE_HOST_DEVICE constexpr float encode_scale() const noexcept { return 1.0f; }
  BLOCKSCALE_HOST_DEVICE constexpr void finish(std::uint64_t) noexcept { ++calls; }
  /// How many calls measured amax_t (never, here).
  BLOCKSCALE_HOST_DEVICE constexpr std::uint64_t amax_measurements() const noexcept { return 0; }
};

/// Measure amax_t on every call (the NVFP4 way: an extra pass over the data).
struct current_tensor_scale {
  double numerator = 6.0 * 448.0; ///< E_max · S_max · 2^-headroom; use make<BlockFormat>()
  float scale = 1.0f;
  std::uint64_t calls = 0;

  template <class BlockFormat>
  static current_tensor_scale make(int headroom_binades = 0) noexcept {
    return {tensor_scale_numerator<BlockFormat>(headroom_binades)};
  }
  BLOCKSCALE_HOST_DEVICE constexpr bool needs_amax() const noexcept { return true; }
  BLOCKSCALE_HOST_DEVICE constexpr bool records_amax() const noexcept { return false; }
  BLOCKSCALE_HOST_DEVICE void observe_amax(float amax) noexcept {
    scale = encode_scale_from_amax(numerator, amax);
  }
  BLOCKSCALE_HOST_DEVICE constexpr float encode_scale() const noexcept { return scale; }
  BLOCKSCALE_HOST_DEVICE constexpr void finish(std::uint64_t) noexcept { ++calls; }
  BLOCKSCALE_HOST_DEVICE constexpr std::uint64_t amax_measurements() const noexcept {
    return calls;
  }
};

/// Measure amax_t only every `interval` calls and reuse the scale in between; refresh early on
/// the call after one that saturated a block scale. `headroom_binades` keeps the largest block
/// that far below the scale format's max, room for growth between refreshes (UE5M3: 8 binades
/// puts the largest block at 448).
struct periodic_tensor_scale {
  std::uint32_t interval = 100;
  double numerator = 6.0 * 448.0; ///< E_max · S_max · 2^-headroom; use make<BlockFormat>()
  float scale = 1.0f;
  std::uint64_t calls = 0;
  std::uint64_t measurements = 0;
  std::uint32_t calls_since_refresh = 0;
  bool refresh_requested = true; ///< the first call always measures

  template <class BlockFormat>
  static periodic_tensor_scale make(std::uint32_t interval, int headroom_binades) noexcept {
    periodic_tensor_scale policy;
    policy.interval = interval == 0 ? 1 : interval;
    policy.numerator = tensor_scale_numerator<BlockFormat>(headroom_binades);
    return policy;
  }
  BLOCKSCALE_HOST_DEVICE constexpr bool needs_amax() const noexcept {
    return refresh_requested || calls_since_refresh >= interval;
  }
  BLOCKSCALE_HOST_DEVICE constexpr bool records_amax() const noexcept { return false; }
  BLOCKSCALE_HOST_DEVICE void observe_amax(float amax) noexcept {
    scale = encode_scale_from_amax(numerator, amax);
    refresh_requested = false;
    calls_since_refresh = 0;
    ++measurements;
  }
  BLOCKSCALE_HOST_DEVICE constexpr float encode_scale() const noexcept { return scale; }
  /// Counts the call; a saturated block scale asks the next call to measure.
  BLOCKSCALE_HOST_DEVICE constexpr void finish(std::uint64_t saturated_block_scales) noexcept {
    ++calls;
    ++calls_since_refresh;
    if (saturated_block_scales != 0)
      refresh_requested = true;
  }
  BLOCKSCALE_HOST_DEVICE constexpr std::uint64_t amax_measurements() const noexcept {
    return measurements;
  }
};

/// Transformer Engine's FP8 DelayedScaling: the scale comes from the max over the last `history`
/// observed amaxes, with `margin` binades of headroom. The current call's amax is the one its own
/// quantization saw (no separate pass over the data), recorded after it. Before any amax is
/// recorded the scale is 1.
struct delayed_tensor_scale {
  static constexpr int capacity = 1024; ///< longest history (TE's default amax_history_len)
  std::uint32_t history = 16;
  double numerator = 6.0 * 448.0; ///< E_max · S_max · 2^-margin; use make<BlockFormat>()
  float scale = 1.0f;
  float pending_amax = 0.0f;
  std::uint64_t calls = 0;
  std::uint32_t recorded = 0; ///< amaxes in the ring, at most `history`
  std::uint32_t next = 0;     ///< ring position of the next record
  float amaxes[capacity] = {};

  template <class BlockFormat>
  static delayed_tensor_scale make(std::uint32_t history, int margin_binades) noexcept {
    delayed_tensor_scale policy;
    policy.history = history == 0 ? 1 : (history > capacity ? capacity : history);
    policy.numerator = tensor_scale_numerator<BlockFormat>(margin_binades);
    return policy;
  }
  BLOCKSCALE_HOST_DEVICE constexpr bool needs_amax() const noexcept { return false; }
  BLOCKSCALE_HOST_DEVICE constexpr bool records_amax() const noexcept { return true; }
  BLOCKSCALE_HOST_DEVICE constexpr void observe_amax(float amax) noexcept { pending_amax = amax; }
  BLOCKSCALE_HOST_DEVICE constexpr float encode_scale() const noexcept { return scale; }
  /// Records this call's amax and derives the next call's scale from the history.
  BLOCKSCALE_HOST_DEVICE void finish(std::uint64_t) noexcept {
    ++calls;
    amaxes[next] = pending_amax;
    next = next + 1 == history ? 0 : next + 1;
    recorded = recorded < history ? recorded + 1 : history;
    float history_max = 0.0f;
    bool nan = false;
    for (std::uint32_t i = 0; i < recorded; ++i) {
      nan = nan || amaxes[i] != amaxes[i];
      history_max = amaxes[i] > history_max ? amaxes[i] : history_max;
    }
    scale = nan ? 1.0f : encode_scale_from_amax(numerator, history_max);
  }
  BLOCKSCALE_HOST_DEVICE constexpr std::uint64_t amax_measurements() const noexcept {
    return calls;
  }
};

} // namespace v0
} // namespace blockscale
