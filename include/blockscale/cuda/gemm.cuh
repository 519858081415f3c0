/// \file cuda/gemm.cuh
/// The block-scaled GEMM on the device: C = alpha · A · Bᵀ + beta · C on a caller's stream, for
/// operands quantized along K (device views, e.g. from `device_quantized_matrix::view()`), FP32
/// or BF16 out. Arguments are checked first (cuda/gemm.hpp); a bad one is a status and nothing is
/// queued.
///
///     cuda::gemm(a.view(), b.view(), matrix_view<float>::unchecked(c, m, n, n), 1.0f, 0.0f,
///                stream).throw_if_error();
///
/// `gemm` chooses the shape: the sm_120a block-scaled MMA where the running device's code has it
/// and the formats allow (NVFP4 × NVFP4, MXFP4 × MXFP4) and M > 64; else the BF16 MMA on
/// dequantized operands: in registers with 16-row CTA tiles up to M = 64 (gemm_small_m), once per
/// 128 × 128 CTA tile into shared memory beyond (gemm_large_m). `gemm_with_shape<Shape>` takes
/// the one you name.
#pragma once

#include <cuda_runtime_api.h>

#include <mutex>
#include <type_traits>

#include "../block/matrix_view.hpp"
#include "../block/quantized_view.hpp"
#include "gemm.hpp"
#include "runner.cuh"
#include "status.hpp"

namespace blockscale {
inline namespace v0 {
namespace cuda {
namespace detail {

// A template, so that every translation unit including this header may define it.
template <int = 0>
__global__ void block_scaled_mma_probe(int* has) {
  *has = BLOCKSCALE_CUDA_HAS_BLOCK_SCALED_MMA;
}

/// Whether the code this program runs on the current device has the block-scaled MMA (the pass
/// that was loaded for it decides, not the device alone). Probed once per device; the probe
/// synchronizes the device the first time.
inline bool device_has_block_scaled_mma() {
  static std::mutex lock;
  static int known[64] = {}; // 0 unknown, 1 no, 2 yes
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 64) {
    (void)cudaGetLastError();
    return false;
  }
  std::lock_guard<std::mutex> hold(lock);
  if (known[device] == 0) {
    int* flag = nullptr;
    int has = 0;
    if (cudaMalloc(&flag, sizeof(int)) == cudaSuccess) {
      block_scaled_mma_probe<><<<1, 1>>>(flag);
      if (cudaMemcpy(&has, flag, sizeof(int), cudaMemcpyDeviceToHost) != cudaSuccess)
        has = 0;
      cudaFree(flag);
    }
    (void)cudaGetLastError();
    known[device] = has ? 2 : 1;
  }
  return known[device] == 2;
}

} // namespace detail

/// The GEMM with a given shape (gemm_small_m, gemm_large_m, gemm_block_scaled or your own
/// gemm_shape).
template <class Shape, class FormatA, class FormatB, class Out>
[[nodiscard]] status gemm_with_shape(const_quantized_view<FormatA> a,
                                     const_quantized_view<FormatB> b, matrix_view<Out> c,
                                     float alpha = 1.0f, float beta = 0.0f,
                                     cudaStream_t stream = nullptr) {
  device_runner runner{stream};
  return launch_gemm<Shape>(runner, a, b, c, alpha, beta);
}

/// The GEMM with the shape chosen for the device, the formats and M.
template <class FormatA, class FormatB, class Out>
[[nodiscard]] status gemm(const_quantized_view<FormatA> a, const_quantized_view<FormatB> b,
                          matrix_view<Out> c, float alpha = 1.0f, float beta = 0.0f,
                          cudaStream_t stream = nullptr) {
  constexpr bool native_formats =
      std::is_same<FormatA, FormatB>::value &&
      (std::is_same<FormatA, nvfp4>::value || std::is_same<FormatA, mxfp4>::value);
  if constexpr (native_formats) {
    if (a.rows() > 64 && detail::device_has_block_scaled_mma())
      return gemm_with_shape<gemm_block_scaled>(a, b, c, alpha, beta, stream);
  }
  if (a.rows() <= 64)
    return gemm_with_shape<gemm_small_m>(a, b, c, alpha, beta, stream);
  return gemm_with_shape<gemm_large_m>(a, b, c, alpha, beta, stream);
}

/// Writable views convert: the same with quantized_view operands.
template <class FormatA, class FormatB, class Out>
[[nodiscard]] status gemm(quantized_view<FormatA> a, quantized_view<FormatB> b, matrix_view<Out> c,
                          float alpha = 1.0f, float beta = 0.0f, cudaStream_t stream = nullptr) {
  return gemm(const_quantized_view<FormatA>(a), const_quantized_view<FormatB>(b), c, alpha, beta,
              stream);
}

} // namespace cuda
} // namespace v0
} // namespace blockscale
