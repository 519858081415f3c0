// What the CUDA extension's kernels file (device_ops.cu, compiled by nvcc) gives its bindings
// (cuda.cpp, compiled by the host compiler): the preset formats' device tables, the amax pass, and
// the tensor-scale policies' device states. Nothing here synchronises except where it says so.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "blockscale/cuda/format_ops.hpp"

namespace blockscale_python {

namespace bs = blockscale;

/// The device table of the preset named `name`, or null.
const bs::cuda::device_format_ops* device_ops(std::string_view name);

/// The device table of preset `Preset` (its index in preset_names: 1 for nvfp4, ...), defined in
/// device_preset.cuh and explicitly instantiated for one preset by each device_preset_<i>.cu, so
/// that a parallel build compiles the formats side by side.
template <int Preset>
const bs::cuda::device_format_ops& preset_table();

/// cuda::measure_amax over an erased matrix.
bs::cuda::status device_measure_amax(const bs::any_const_matrix& x, std::uint32_t* amax_bits,
                                     const bs::quantize_options& options, cudaStream_t stream);

/// A tensor-scale policy whose state lives in device memory: a cuda::device_tensor_scale<P> for
/// the P its kind names.
class device_policy_state {
public:
  virtual ~device_policy_state() = default;
  /// The tensor_scale_state<P> in device memory.
  virtual void* state() const noexcept = 0;
  /// Its measured amax's pattern (device memory), for an all-reduce.
  virtual std::uint32_t* amax_bits() const noexcept = 0;
  /// Copies the policy into `policy` (a P) and the last step's counters into `last`, and waits for
  /// `stream`: a host synchronisation, on request.
  virtual bs::cuda::status read(void* policy, bs::quantize_stats& last,
                                cudaStream_t stream) const = 0;
};

/// The device state of `policy` (a P of `kind`), copied on `stream` (complete on return).
/// Throws std::runtime_error when CUDA fails.
std::unique_ptr<device_policy_state> make_device_policy(bs::any_policy::kind kind,
                                                        const void* policy, cudaStream_t stream);

} // namespace blockscale_python
