/// \file cuda/quantize.cuh
/// Quantization on the device: the stream-ordered counterparts of host/quantize.hpp and
/// host/dequantize.hpp. Each function checks its arguments first — a bad one is a status with a
/// message and nothing is queued — then queues its kernels on `stream` and returns; results are
/// bit-identical to the host's for the same options, seed and offset. Pointers are device memory.
///
///     cuda::device_quantized_matrix<nvfp4> q(shape, stream);
///     cuda::quantize_into(x, q.view(), options, stream).throw_if_error();
///
/// The launchers themselves are cuda/launch.hpp, run here by the device runner.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <type_traits>

#include "../block/matrix_view.hpp"
#include "../block/quantized_view.hpp"
#include "../contract/quantize_options.hpp"
#include "buffer.cuh"
#include "launch.hpp"
#include "runner.cuh"
#include "status.hpp"
#include "tensor_scale.cuh"

namespace blockscale {
inline namespace v0 {
namespace cuda {

/// The read-only view of x.
template <class T>
matrix_view<const std::remove_const_t<T>> as_input(matrix_view<T> x) noexcept {
  return x;
}

/// Quantizes x into `out`, as host quantize_into(x, out, options). `stats`, when set, receives the
/// counters (device memory, zeroed by the caller).
template <class BlockFormat, class T>
[[nodiscard]] status quantize_into(matrix_view<T> x, quantized_view<BlockFormat> out,
                                   const quantize_options& options = {},
                                   cudaStream_t stream = nullptr,
                                   device_quantize_stats* stats = nullptr) {
  device_runner runner{stream};
  return launch_quantize(runner, as_input(x), out, options, stats);
}

/// Both directions from one read of x, as the host's pair quantize_into.
template <class RowFormat, class ColumnFormat, class T>
[[nodiscard]] status
quantize_into(matrix_view<T> x, quantized_view<RowFormat> rowwise,
              const quantize_options& rowwise_options, quantized_view<ColumnFormat> columnwise,
              const quantize_options& columnwise_options, cudaStream_t stream = nullptr,
              device_quantize_stats* rowwise_stats = nullptr,
              device_quantize_stats* columnwise_stats = nullptr) {
  device_runner runner{stream};
  return launch_quantize(runner, as_input(x), rowwise, rowwise_options, columnwise,
                         columnwise_options, rowwise_stats, columnwise_stats);
}

/// One step under a device policy, as host quantize_into(x, out, policy, options): the amax pass
/// (skipped on the device when the policy does not need it), the scales, the quantization and the
/// policy's update, all in stream order.
template <class BlockFormat, class T, class Policy>
[[nodiscard]] status quantize_into(matrix_view<T> x, quantized_view<BlockFormat> out,
                                   device_tensor_scale<Policy>& policy,
                                   const quantize_options& options = {},
                                   cudaStream_t stream = nullptr) {
  device_runner runner{stream};
  return launch_policy_step(runner, as_input(x), out, policy.state(), options);
}

/// Both directions from one read, each under its own device policy.
template <class RowFormat, class ColumnFormat, class T, class RowPolicy, class ColumnPolicy>
[[nodiscard]] status
quantize_into(matrix_view<T> x, quantized_view<RowFormat> rowwise,
              device_tensor_scale<RowPolicy>& rowwise_policy,
              const quantize_options& rowwise_options, quantized_view<ColumnFormat> columnwise,
              device_tensor_scale<ColumnPolicy>& columnwise_policy,
              const quantize_options& columnwise_options, cudaStream_t stream = nullptr) {
  device_runner runner{stream};
  return launch_policy_step(runner, as_input(x), rowwise, rowwise_policy.state(), rowwise_options,
                            columnwise, columnwise_policy.state(), columnwise_options);
}

/// A policy step in three parts, for a caller who all-reduces the amax across ranks: measure
/// (when the policy needs it), then all-reduce policy.amax_bits() in the stream, then apply, then
/// quantize.
template <class BlockFormat, class T, class Policy>
[[nodiscard]] status measure_amax(matrix_view<T> x, device_tensor_scale<Policy>& policy,
                                  const quantize_options& options = {},
                                  cudaStream_t stream = nullptr) {
  device_runner runner{stream};
  return launch_policy_measure<BlockFormat>(runner, as_input(x), policy.state(), options, false);
}
/// See measure_amax.
template <class BlockFormat, class Policy>
[[nodiscard]] status apply_amax(device_tensor_scale<Policy>& policy,
                                const quantize_options& options = {},
                                cudaStream_t stream = nullptr) {
  device_runner runner{stream};
  return launch_policy_apply<BlockFormat>(runner, policy.state(), options);
}
/// See measure_amax.
template <class BlockFormat, class T, class Policy>
[[nodiscard]] status quantize_applied(matrix_view<T> x, quantized_view<BlockFormat> out,
                                      device_tensor_scale<Policy>& policy,
                                      const quantize_options& options = {},
                                      cudaStream_t stream = nullptr) {
  device_runner runner{stream};
  return launch_policy_quantize(runner, as_input(x), out, policy.state(), options);
}

/// amax_t of x as quantizing with `options` sees it, max-ed into *amax_bits (zeroed by the
/// caller); with `tile_amax`, the amax of each 16×16 tile too (launch_amax).
template <class T>
[[nodiscard]] status measure_amax(matrix_view<T> x, std::uint32_t* amax_bits,
                                  const quantize_options& options = {},
                                  cudaStream_t stream = nullptr, float* tile_amax = nullptr) {
  device_runner runner{stream};
  return launch_amax(runner, as_input(x), amax_bits, options, tile_amax);
}

/// Decodes q into out (float, bfloat16 or float16), as host dequantize.
template <class BlockFormat, class Byte, class T>
[[nodiscard]] status dequantize(basic_quantized_view<BlockFormat, Byte> q, matrix_view<T> out,
                                cudaStream_t stream = nullptr) {
  device_runner runner{stream};
  return launch_dequantize(runner, q, out, false);
}

/// Decodes q with its padding columns into out (q.rows() × q.padded_cols()).
template <class BlockFormat, class Byte, class T>
[[nodiscard]] status dequantize_padded(basic_quantized_view<BlockFormat, Byte> q,
                                       matrix_view<T> out, cudaStream_t stream = nullptr) {
  device_runner runner{stream};
  return launch_dequantize(runner, q, out, true);
}

} // namespace cuda
} // namespace v0
} // namespace blockscale
