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
/// and the formats allow (NVFP4 × NVFP4, MXFP4 × MXFP4) and M > 64; there too, for UE5M3-FP4
/// with UE5M3-FP4 or NVFP4 and M > 64, the shifted GEMM (`gemm_shifted`, after `shift_scales` on
/// both operands into a stream-ordered workspace: docs/scale_shift.md); where it has sm_90a's
/// warpgroup MMA and TMA can read the operands (16-byte aligned, padded K a multiple of 32),
/// launch_gemm_wgmma (cuda/gemm.hpp) with gemm_wgmma_small, _medium or _large by M, split-K as
/// for gemm_w4a16; else the BF16 MMA on dequantized operands: in registers with 16-row CTA tiles
/// up to M = 64 (gemm_small_m), once per 128 × 128 CTA tile into shared memory beyond
/// (gemm_large_m), or in registers where the device gives a block too little shared memory for
/// that (gemm_large_m_in_register).
/// `gemm_with_shape<Shape>` takes the one you name.
///
/// `gemm_w4a16(x, w, c, alpha, beta, stream)`: BF16 activations times E2M1 weights on sm_90a's
/// warpgroup MMA (cuda/kernels/gemm_w4a16.hpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <mutex>
#include <type_traits>

#include "../block/matrix_view.hpp"
#include "../block/quantized_view.hpp"
#include "buffer.cuh"
#include "gemm.hpp"
#include "runner.cuh"
#include "status.hpp"

namespace blockscale {
inline namespace v0 {
namespace cuda {
namespace detail {

// Templates, so that every translation unit including this header may define them.
template <int = 0>
__global__ void block_scaled_mma_probe(int* has) {
  *has = BLOCKSCALE_CUDA_HAS_BLOCK_SCALED_MMA;
}
template <int = 0>
__global__ void wgmma_probe(int* has) {
  *has = BLOCKSCALE_CUDA_HAS_WGMMA;
}

/// Whether the code this program runs on the current device writes a nonzero flag from `probe`
/// (the pass that was loaded for it decides, not the device alone). Probed once per device and
/// probe with a tiny kernel and a synchronous copy; while `stream` is being captured into a graph
/// the probe would break the capture, so an unprobed device answers false then (uncached), and a
/// probe whose calls fail is not cached either.
template <void (*Probe)(int*)>
bool device_code_has(cudaStream_t stream) {
  static std::mutex lock;
  static int known[64] = {}; // 0 unknown, 1 no, 2 yes
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 64) {
    (void)cudaGetLastError();
    return false;
  }
  std::lock_guard<std::mutex> hold(lock);
  if (known[device] != 0)
    return known[device] == 2;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess ||
      capture != cudaStreamCaptureStatusNone) {
    (void)cudaGetLastError();
    return false;
  }
  int* flag = nullptr;
  int has = 0;
  bool probed = false;
  if (cudaMalloc(&flag, sizeof(int)) == cudaSuccess) {
    Probe<<<1, 1>>>(flag);
    probed = cudaMemcpy(&has, flag, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess;
    cudaFree(flag);
  }
  (void)cudaGetLastError();
  if (probed)
    known[device] = has ? 2 : 1;
  return probed && has != 0;
}

/// Whether the code this program runs on the current device has the block-scaled MMA (sm_120a).
inline bool device_has_block_scaled_mma(cudaStream_t stream = nullptr) {
  return device_code_has<block_scaled_mma_probe<>>(stream);
}
/// Whether the code this program runs on the current device has the warpgroup MMA (sm_90a).
inline bool device_has_wgmma(cudaStream_t stream = nullptr) {
  return device_code_has<wgmma_probe<>>(stream);
}

/// Whether `Program`'s shared storage fits the current device's opt-in limit per block.
template <class Program>
bool fits_shared_memory() {
  int device = 0, limit = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
          cudaSuccess) {
    (void)cudaGetLastError();
    return true; // the launch reports the device's trouble
  }
  return sizeof(typename Program::shared_storage) <= static_cast<std::size_t>(limit);
}

/// A runner that checks and encodes what a launcher asks of it but runs nothing: a launcher called
/// with it first says whether it would refuse its arguments, before anything is queued.
struct checking_runner {
  std::size_t resident = 1;
  template <class Program>
  status run(const Program&, std::size_t) const noexcept {
    return {};
  }
  template <class Program>
  status run_looped(const Program&, std::size_t) const noexcept {
    return {};
  }
  template <class Program>
  status run_specialized(const Program&, std::size_t) const noexcept {
    return {};
  }
  status tensor_map_2d(const warp::tensor_map_2d_shape& shape, warp::tensor_map& map) const {
    return make_tensor_map_2d(shape, map);
  }
  std::size_t persistent_ctas() const noexcept { return resident; }
};

/// Runs `launch(Shape{}, runner, split)` for a warpgroup-MMA GEMM of shape `Shape` on C[m×n]
/// with K = k: the split-K of wgmma_automatic_splits for this device, its workspace allocated
/// and freed in the order of `stream` — after `launch` has checked its arguments on a
/// checking_runner, so that a refused call queues nothing.
template <class Shape, class Launch>
status run_wgmma_on_device(cudaStream_t stream, std::size_t m, std::size_t n, std::size_t k,
                           Launch launch) {
  device_runner runner{stream};
  runner.ctas_per_sm = 1; // persistent_ctas(): the multiprocessors
  const std::size_t tiles =
      ((m + Shape::tile_x - 1) / Shape::tile_x) * ((n + Shape::tile_w - 1) / Shape::tile_w);
  wgmma_split_k split;
  split.splits = wgmma_splits(wgmma_automatic_splits(tiles, k, runner.persistent_ctas()), k);
  {
    // The checks see a workspace of the right size that nothing will touch.
    static float unused;
    wgmma_split_k planned = split;
    planned.workspace = &unused;
    planned.workspace_size = split.splits * m * n;
    checking_runner checker;
    if (status st = launch(Shape{}, checker, planned); !st)
      return st;
  }
  device_allocation workspace;
  if (split.splits > 1) {
    split.workspace_size = split.splits * m * n;
    try {
      workspace = device_allocation(split.workspace_size * sizeof(float), stream);
    } catch (const error& e) {
      return e.why();
    }
    split.workspace = reinterpret_cast<float*>(workspace.data());
  }
  return launch(Shape{}, runner, split);
}

/// The same with the shape chosen by M: gemm_wgmma_small up to 16, _medium up to 64, _large.
template <class Launch>
status run_wgmma_by_rows(cudaStream_t stream, std::size_t m, std::size_t n, std::size_t k,
                         Launch launch) {
  if (m <= 16)
    return run_wgmma_on_device<gemm_wgmma_small>(stream, m, n, k, launch);
  if (m <= 64)
    return run_wgmma_on_device<gemm_wgmma_medium>(stream, m, n, k, launch);
  return run_wgmma_on_device<gemm_wgmma_large>(stream, m, n, k, launch);
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

/// Shifts q's block scales onto the block-scaled MMA's UE4M3 (launch_shift_scales): the codes,
/// shifts and tile flags into `out` (device arrays of `shifted_storage_for<Format>(q.shape())`
/// bytes), on `stream`.
template <class Format>
[[nodiscard]] status shift_scales(const_quantized_view<Format> q, shifted_scales out,
                                  cudaStream_t stream = nullptr,
                                  shift_target target = shift_target::normals) {
  device_runner runner{stream};
  return launch_shift_scales(runner, q, out, target);
}

/// The shifted GEMM (launch_gemm_shifted) on the sm_120a block-scaled MMA, its fallback tiles on
/// gemm_large_m where the device gives a block its shared memory, else gemm_large_m_in_register.
/// errc::unsupported where the code this program runs on the device has no block-scaled MMA.
template <class FormatA, class FormatB, class Out>
[[nodiscard]] status gemm_shifted(const_quantized_view<FormatA> a, const_shifted_scales sa,
                                  const_quantized_view<FormatB> b, const_shifted_scales sb,
                                  matrix_view<Out> c, float alpha = 1.0f, float beta = 0.0f,
                                  cudaStream_t stream = nullptr) {
  {
    detail::checking_runner checker; // bad arguments are named as such on every device
    if (status st = launch_gemm_shifted<gemm_block_scaled, gemm_large_m_in_register>(
            checker, a, sa, b, sb, c, alpha, beta);
        !st)
      return st;
  }
  if (!detail::device_has_block_scaled_mma(stream))
    return {errc::unsupported, "gemm_shifted: the code running on this device has no "
                               "block-scaled MMA (compile for sm_120a and run on a compute "
                               "capability 12.0 GPU); cuda::gemm runs these operands anywhere"};
  device_runner runner{stream};
  if (detail::fits_shared_memory<kernels::gemm_program<FormatA, FormatB, Out, gemm_large_m>>())
    return launch_gemm_shifted<gemm_block_scaled, gemm_large_m>(runner, a, sa, b, sb, c, alpha,
                                                                beta);
  return launch_gemm_shifted<gemm_block_scaled, gemm_large_m_in_register>(runner, a, sa, b, sb, c,
                                                                          alpha, beta);
}

namespace detail {
/// cuda::gemm's shifted route: the shifted scales of both operands in one stream-ordered
/// workspace, the shift passes, then gemm_shifted — after the arguments are checked, so that a
/// refused call queues nothing.
template <class FormatA, class FormatB, class Out>
status gemm_through_shift(const_quantized_view<FormatA> a, const_quantized_view<FormatB> b,
                          matrix_view<Out> c, float alpha, float beta, cudaStream_t stream) {
  {
    checking_runner checker;
    if (status st = launch_gemm<gemm_large_m_in_register>(checker, a, b, c, alpha, beta); !st)
      return st;
  }
  if (c.empty())
    return {};
  const shifted_storage na = shifted_storage_for<FormatA>(a.shape());
  const shifted_storage nb = shifted_storage_for<FormatB>(b.shape());
  const auto up4 = [](std::size_t n) { return (n + 3) / 4 * 4; }; // codes stay word-aligned
  const std::size_t sizes[6] = {up4(na.code_bytes), up4(nb.code_bytes), na.shift_bytes,
                                nb.shift_bytes,     na.tile_bytes,      nb.tile_bytes};
  std::size_t total = 0;
  for (std::size_t n : sizes)
    total += n;
  device_allocation workspace;
  try {
    workspace = device_allocation(total, stream);
  } catch (const error& e) {
    return e.why();
  }
  std::uint8_t* at[6];
  at[0] = static_cast<std::uint8_t*>(workspace.data());
  for (int i = 1; i < 6; ++i)
    at[i] = at[i - 1] + sizes[i - 1];
  const shifted_scales sa{at[0], reinterpret_cast<std::int8_t*>(at[2]), at[4]};
  const shifted_scales sb{at[1], reinterpret_cast<std::int8_t*>(at[3]), at[5]};
  if (status st = shift_scales(a, sa, stream); !st)
    return st;
  if (status st = shift_scales(b, sb, stream); !st)
    return st;
  return gemm_shifted(a, const_shifted_scales(sa), b, const_shifted_scales(sb), c, alpha, beta,
                      stream);
}
} // namespace detail

/// The kernels `gemm` chooses among (docs/cuda.md, "Shapes, and which one `gemm` chooses").
enum class gemm_route {
  block_scaled,       ///< gemm_block_scaled (sm_120a; NVFP4 × NVFP4, MXFP4 × MXFP4)
  shifted,            ///< shift_scales on both operands, then gemm_shifted (sm_120a; UE5M3-FP4)
  wgmma,              ///< launch_gemm_wgmma with gemm_wgmma_small, _medium or _large by M
  small_m,            ///< gemm_small_m
  large_m,            ///< gemm_large_m
  large_m_in_register ///< gemm_large_m_in_register
};

/// The route's name, as docs/cuda.md spells it.
constexpr const char* gemm_route_name(gemm_route route) noexcept {
  switch (route) {
  case gemm_route::block_scaled:
    return "gemm_block_scaled";
  case gemm_route::shifted:
    return "gemm_shifted";
  case gemm_route::wgmma:
    return "gemm_wgmma";
  case gemm_route::small_m:
    return "gemm_small_m";
  case gemm_route::large_m:
    return "gemm_large_m";
  case gemm_route::large_m_in_register:
    return "gemm_large_m_in_register";
  }
  return "?";
}

/// What `gemm` runs for A = `a`, B = `b` and output type `Out` on the current device. The first
/// call on a device asks it which MMAs its code has (a synchronisation, remembered).
template <class Out, class FormatA, class FormatB>
gemm_route choose_gemm(const_quantized_view<FormatA> a, const_quantized_view<FormatB> b,
                       cudaStream_t stream = nullptr) {
  constexpr bool native_formats =
      std::is_same<FormatA, FormatB>::value &&
      (std::is_same<FormatA, nvfp4>::value || std::is_same<FormatA, mxfp4>::value);
  constexpr bool shifted_formats =
      !native_formats && shifted_gemm_format<FormatA> && shifted_gemm_format<FormatB>;
  if ((native_formats || shifted_formats) && a.rows() > 64 &&
      detail::device_has_block_scaled_mma(stream))
    return native_formats ? gemm_route::block_scaled : gemm_route::shifted;
  if (kernels::wgmma_format<FormatA> && kernels::wgmma_format<FormatB> && wgmma_takes(a, b) &&
      detail::device_has_wgmma(stream))
    return gemm_route::wgmma;
  if (a.rows() <= 64)
    return gemm_route::small_m;
  // The dequantize-once tiles need 122 KiB of shared memory: more than sm_86/89/120 give a block.
  if (detail::fits_shared_memory<kernels::gemm_program<FormatA, FormatB, Out, gemm_large_m>>())
    return gemm_route::large_m;
  return gemm_route::large_m_in_register;
}

/// The GEMM with the shape chosen for the device, the formats and M (choose_gemm).
template <class FormatA, class FormatB, class Out>
[[nodiscard]] status gemm(const_quantized_view<FormatA> a, const_quantized_view<FormatB> b,
                          matrix_view<Out> c, float alpha = 1.0f, float beta = 0.0f,
                          cudaStream_t stream = nullptr) {
  switch (choose_gemm<Out>(a, b, stream)) {
  case gemm_route::block_scaled:
    if constexpr (std::is_same<FormatA, FormatB>::value &&
                  (std::is_same<FormatA, nvfp4>::value || std::is_same<FormatA, mxfp4>::value))
      return gemm_with_shape<gemm_block_scaled>(a, b, c, alpha, beta, stream);
    break;
  case gemm_route::shifted:
    if constexpr (shifted_gemm_format<FormatA> && shifted_gemm_format<FormatB>)
      return detail::gemm_through_shift(a, b, c, alpha, beta, stream);
    break;
  case gemm_route::wgmma:
    if constexpr (kernels::wgmma_format<FormatA> && kernels::wgmma_format<FormatB>)
      return detail::run_wgmma_by_rows(
          stream, c.rows(), c.cols(), a.cols(), [&](auto shape, auto& runner, wgmma_split_k split) {
            return launch_gemm_wgmma<decltype(shape)>(runner, a, b, c, alpha, beta, split);
          });
    break;
  case gemm_route::small_m:
    return gemm_with_shape<gemm_small_m>(a, b, c, alpha, beta, stream);
  case gemm_route::large_m:
    return gemm_with_shape<gemm_large_m>(a, b, c, alpha, beta, stream);
  case gemm_route::large_m_in_register:
    return gemm_with_shape<gemm_large_m_in_register>(a, b, c, alpha, beta, stream);
  }
  return {errc::unsupported, "gemm: choose_gemm chose a route these formats do not have"};
}

/// Writable views convert: the same with quantized_view operands.
template <class FormatA, class FormatB, class Out>
[[nodiscard]] status gemm(quantized_view<FormatA> a, quantized_view<FormatB> b, matrix_view<Out> c,
                          float alpha = 1.0f, float beta = 0.0f, cudaStream_t stream = nullptr) {
  return gemm(const_quantized_view<FormatA>(a), const_quantized_view<FormatB>(b), c, alpha, beta,
              stream);
}

/// C[M×N] = alpha · X[M×K] · W[N×K]ᵀ + beta · C with X in BF16 (a device matrix, rows x.ld()
/// elements apart) and W quantized along K in an E2M1 block format (NVFP4, UE5M3-FP4, MXFP4 ...):
/// the W4A16 GEMM of sm_90a (cuda/kernels/gemm_w4a16.hpp), its shape chosen by M —
/// gemm_wgmma_small up to M = 16, gemm_wgmma_medium up to 64, gemm_wgmma_large beyond; where the
/// tiles of C fill less than half the multiprocessors, K split among CTAs (wgmma_automatic_splits)
/// with a stream-ordered workspace.
/// errc::unsupported where the code this program runs on the device has no warpgroup MMA (built
/// without sm_90a, or another architecture); the other errors are launch_gemm_w4a16's.
template <class Format, class Out>
[[nodiscard]] status gemm_w4a16(matrix_view<const bfloat16> x, const_quantized_view<Format> w,
                                matrix_view<Out> c, float alpha = 1.0f, float beta = 0.0f,
                                cudaStream_t stream = nullptr) {
  if (!detail::device_has_wgmma(stream))
    return {errc::unsupported, "gemm_w4a16: the code running on this device has no warpgroup MMA "
                               "(compile for sm_90a and run on a compute capability 9.0 GPU)"};
  return detail::run_wgmma_by_rows(
      stream, c.rows(), c.cols(), x.cols(), [&](auto shape, auto& runner, wgmma_split_k split) {
        return launch_gemm_w4a16<decltype(shape)>(runner, x, w, c, alpha, beta, split);
      });
}

/// The same with a writable view of W.
template <class Format, class Out>
[[nodiscard]] status gemm_w4a16(matrix_view<const bfloat16> x, quantized_view<Format> w,
                                matrix_view<Out> c, float alpha = 1.0f, float beta = 0.0f,
                                cudaStream_t stream = nullptr) {
  return gemm_w4a16(x, const_quantized_view<Format>(w), c, alpha, beta, stream);
}

} // namespace cuda
} // namespace v0
} // namespace blockscale
