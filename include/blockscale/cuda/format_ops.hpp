/// \file cuda/format_ops.hpp
/// A block format's device operations behind plain function pointers, as host/format_ops.hpp is
/// for the host: run-time dispatch by name over the stream-ordered launchers, for callers that meet
/// formats by name (the Python package's CUDA extension). This header declares the table and
/// compiles with any C++17 compiler; cuda/format_ops.cuh (nvcc) fills it. Every entry checks its
/// arguments first and returns a status naming the bad one, with nothing queued.
///
/// The matrices and storage are the host tables' erased types (`any_const_matrix`,
/// `any_quantized`) holding device pointers; the decode scale is device memory too. A tensor-scale
/// policy on the device is `any_device_policy`: the kind and a `tensor_scale_state<Policy>*`.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "../contract/erased.hpp"
#include "../contract/quantize_options.hpp"
#include "kernels/quantize.hpp"
#include "kernels/tensor_scale.hpp"
#include "status.hpp"

struct CUstream_st; // cudaStream_t is CUstream_st*: the table needs no CUDA header

namespace blockscale {
inline namespace v0 {
namespace cuda {

/// cudaStream_t, named without CUDA's headers.
using stream_type = CUstream_st*;

/// A tensor-scale policy whose state is in device memory: `state` points to a
/// `tensor_scale_state<P>` for the policy type P that `type` names (none: no policy).
struct any_device_policy {
  any_policy::kind type = any_policy::kind::none;
  void* state = nullptr;
};

/// One block format's device operations. `stream` orders every launch; nothing synchronises.
struct device_format_ops {
  const char* name; ///< the preset's name ("nvfp4", ...), as the host table's
  /// quantize_into(x, out, options), or with `policy` one whole policy step (the amax pass when the
  /// policy needs it, then the quantization); `stats` (device memory, zeroed by the caller, may
  /// be null) receives the counters of a step without a policy.
  status (*quantize_into)(const any_const_matrix& x, const any_quantized& out,
                          const quantize_options& options, any_device_policy policy,
                          stream_type stream, device_quantize_stats* stats);
  /// The two halves of a policy step around an all-reduce of the state's amax_bits:
  /// measure (without applying), then apply, then quantize_applied.
  status (*policy_measure)(const any_const_matrix& x, any_device_policy policy,
                           const quantize_options& options, stream_type stream);
  status (*policy_apply)(any_device_policy policy, const quantize_options& options,
                         stream_type stream);
  status (*quantize_applied)(const any_const_matrix& x, const any_quantized& out,
                             const quantize_options& options, any_device_policy policy,
                             stream_type stream);
  /// dequantize (or, with `padded`, dequantize_padded) of q into out.
  status (*dequantize)(const any_const_quantized& q, const any_matrix& out, bool padded,
                       stream_type stream);
  /// cuda::gemm (cuda/gemm.cuh): c = alpha · a · bᵀ + beta · c with a and b both of this format,
  /// quantized along K, and c float32 or bfloat16. errc::unsupported for a format whose elements
  /// the device GEMM does not take, or an output type the table was not compiled for.
  status (*gemm)(const any_const_quantized& a, const any_const_quantized& b, const any_matrix& c,
                 float alpha, float beta, stream_type stream);
};

} // namespace cuda
} // namespace v0
} // namespace blockscale
