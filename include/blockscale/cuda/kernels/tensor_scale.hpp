/// \file cuda/kernels/tensor_scale.hpp
/// A tensor-scale policy (block/tensor_scale.hpp) living in device memory, and the three pieces of
/// device code that drive it, so that a training step never waits for the host:
///
///   amax kernel     gated by `policy_needs_amax`: measures amax_t only when the policy wants it
///                   (a periodic policy's refresh is decided here, on the device); its last CTA
///                   runs `policy_apply` — or the caller all-reduces `amax_bits` first and applies
///                   after
///   policy_apply    observes the amax if measured, then writes s_enc, s_dec and m to `scales`
///   quantize kernel reads `scales`, adds its counters to `stats` (saturated scales by atomics);
///   its
///                   last CTA runs `policy_finish`: records the amax for a policy that wants it,
///                   tells the policy how many block scales saturated, and resets the counters
///
/// Each step is the host's `quantize_into(x, out, policy, options)` step for step, with the same
/// policy code, so the scales, the codes and the policy's state stay bit-identical to the host's.
#pragma once

#include <cstdint>

#include "../../block/codec.hpp"
#include "../../block/tensor_scale.hpp"
#include "../../config.hpp"
#include "quantize.hpp"

namespace blockscale {
inline namespace v0 {
namespace cuda {

/// The device-resident state of one tensor's policy.
template <class Policy>
struct tensor_scale_state {
  Policy policy;
  tensor_scales scales;            ///< what the next quantization uses
  std::uint32_t amax_bits = 0;     ///< the measured amax_t's pattern: all-reduce it with a max
  std::uint32_t amax_done = 0;     ///< completion counter of the amax kernel
  std::uint32_t quantize_done = 0; ///< completion counter of the quantize kernel
  device_quantize_stats stats;     ///< the running quantization's counters
  quantize_stats last;             ///< the counters of the last finished step
};

/// The amax gate: whether this step measures.
template <class Policy>
struct policy_needs_amax {
  const tensor_scale_state<Policy>* state;
  BLOCKSCALE_HOST_DEVICE bool operator()() const noexcept { return state->policy.needs_amax(); }
};

/// Observes the measured amax when the policy asked for one, then publishes the scales for a
/// rule whose fp32(1 / target) is `inverse_target`.
template <class Policy>
struct policy_apply {
  tensor_scale_state<Policy>* state;
  float inverse_target;
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE void operator()(const Warp& warp) const noexcept {
    Policy& policy = state->policy;
    if (policy.needs_amax())
      policy.observe_amax(codec::amax_value(warp.load_volatile(&state->amax_bits)));
    state->amax_bits = 0;
    state->scales = tensor_scales::make(policy.encode_scale(), inverse_target);
  }
};

/// Ends a step: the recorded amax (policies that record one), the saturation count, the counters.
template <class Policy>
struct policy_finish {
  tensor_scale_state<Policy>* state;
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE void operator()(const Warp& warp) const noexcept {
    device_quantize_stats counted;
    counted.blocks = warp.load_volatile(&state->stats.blocks);
    counted.saturated_scales = warp.load_volatile(&state->stats.saturated_scales);
    counted.zero_scales = warp.load_volatile(&state->stats.zero_scales);
    counted.nan_scales = warp.load_volatile(&state->stats.nan_scales);
    counted.amax_bits = warp.load_volatile(&state->stats.amax_bits);
    const quantize_stats stats = counted.value();
    Policy& policy = state->policy;
    if (policy.records_amax())
      policy.observe_amax(stats.amax);
    policy.finish(stats.saturated_scales);
    state->last = stats;
    state->stats = device_quantize_stats{};
  }
};

/// The completion of a pair of outputs: both policies finish.
template <class RowPolicy, class ColumnPolicy>
struct pair_finish {
  policy_finish<RowPolicy> rowwise;
  policy_finish<ColumnPolicy> columnwise;
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE void operator()(const Warp& warp) const noexcept {
    rowwise(warp);
    columnwise(warp);
  }
};

} // namespace cuda
} // namespace v0
} // namespace blockscale
