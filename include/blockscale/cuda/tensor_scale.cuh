/// \file cuda/tensor_scale.cuh
/// `device_tensor_scale<Policy>`: a tensor-scale policy (block/tensor_scale.hpp) whose state lives
/// in device memory (cuda/kernels/tensor_scale.hpp), read and updated by the kernels, so a
/// training step under it never waits for the host. The amax a step measures is exposed in device
/// memory (`amax_bits`) for the caller to all-reduce in the stream before it is applied.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../block/codec.hpp"
#include "buffer.cuh"
#include "kernels/tensor_scale.hpp"
#include "status.hpp"

namespace blockscale {
inline namespace v0 {
namespace cuda {

/// A policy in device memory, with its scales and counters.
template <class Policy>
class device_tensor_scale {
public:
  using state_type = tensor_scale_state<Policy>;

  /// The state of `policy` copied to device memory allocated on `stream` (the copy is complete
  /// when the constructor returns). Throws cuda::error when CUDA fails.
  device_tensor_scale(const Policy& policy, cudaStream_t stream)
      : memory_(sizeof(state_type), stream) {
    state_type initial{};
    initial.policy = policy;
    initial.scales = tensor_scales::make(policy.encode_scale(), 1.0f);
    if (status s = detail::cuda_status(
            cudaMemcpyAsync(state(), &initial, sizeof initial, cudaMemcpyHostToDevice, stream),
            "device_tensor_scale: cudaMemcpyAsync");
        !s)
      throw error(s);
    if (status s = detail::cuda_status(cudaStreamSynchronize(stream),
                                       "device_tensor_scale: cudaStreamSynchronize");
        !s)
      throw error(s);
  }

  /// The state in device memory, for the launchers.
  state_type* state() const noexcept { return reinterpret_cast<state_type*>(memory_.data()); }

  /// The amax the current step measured, as the bit pattern of a non-negative float (NaN patterns
  /// above Inf's): all-reduce it across ranks with a max over uint32 (NCCL: ncclUint32, ncclMax)
  /// between launch_policy_measure(..., apply = false) and launch_policy_apply.
  std::uint32_t* amax_bits() const noexcept { return &state()->amax_bits; }

  /// Copies the state to `host` in the order of `stream`; synchronise before reading it. The
  /// policy is `host.policy`, the last step's counters `host.last`.
  [[nodiscard]] status read(state_type& host, cudaStream_t stream) const {
    return detail::cuda_status(
        cudaMemcpyAsync(&host, state(), sizeof host, cudaMemcpyDeviceToHost, stream),
        "device_tensor_scale::read: cudaMemcpyAsync");
  }

private:
  device_allocation memory_;
};

} // namespace cuda
} // namespace v0
} // namespace blockscale
