/// \file cuda/gemm.hpp
/// `launch_gemm<Shape>(runner, a, b, c, alpha, beta)`: the checks, the grid and the program of the
/// tiled GEMM (cuda/kernels/gemm.hpp), over a runner as the quantization launchers
/// (cuda/launch.hpp): `device_runner` queues the kernel, `emulation::host_runner` runs it on the
/// CPU. The stream API is cuda/gemm.cuh.
///
/// Shapes, for every scale format and every architecture from sm_80 unless said:
/// - `gemm_small_m`: 16 × 64 CTA tiles of four 16 × 16 warp tiles, in-register dequantization
///   (bf16_path): with few rows each B element is dequantized by one warp only.
/// - `gemm_large_m`: 128 × 128 CTA tiles of eight 64 × 32 warp tiles; the CTA dequantizes each
///   k-tile once into shared memory (bf16_staged_path), since four warps share each A row and
///   two each B row.
/// - `gemm_large_m_in_register`: the same tiles dequantized in registers by every warp that
///   uses them (for comparison).
/// - `gemm_block_scaled`: the sm_120a MMA (NVFP4 × NVFP4 or MXFP4 × MXFP4), 128 × 128.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "../block/matrix_view.hpp"
#include "../block/quantized_view.hpp"
#include "kernels/gemm.hpp"
#include "launch.hpp"
#include "memory.hpp"
#include "status.hpp"

namespace blockscale {
inline namespace v0 {
namespace cuda {

using gemm_small_m = gemm_shape<warp::bf16_path, 16, 64, 16, 16, 4>;
using gemm_large_m = gemm_shape<warp::bf16_staged_path, 128, 128, 64, 32, 3>;
using gemm_large_m_in_register = gemm_shape<warp::bf16_path, 128, 128, 64, 32, 3>;
using gemm_block_scaled = gemm_shape<warp::block_scaled_path, 128, 128, 64, 32, 3>;

namespace detail {
inline std::string gemm_shape_text(std::size_t rows, std::size_t cols) {
  return std::to_string(rows) + " x " + std::to_string(cols);
}
} // namespace detail

/// C[M×N] = alpha · A[M×K] · B[N×K]ᵀ + beta · C (beta == 0: C is not read). Errors, before
/// anything runs: shapes that disagree, K not a multiple of both block sizes, operands quantized
/// with different Hadamard transforms, null or misaligned buffers (elements aligned to 8 bytes,
/// scales to 4), a grid beyond 2^31 - 1 CTAs.
template <class Shape, class Runner, class FormatA, class FormatB, class Out>
[[nodiscard]] status launch_gemm(Runner& runner, const_quantized_view<FormatA> a,
                                 const_quantized_view<FormatB> b, matrix_view<Out> c,
                                 float alpha = 1.0f, float beta = 0.0f) {
  using program_type = kernels::gemm_program<FormatA, FormatB, Out, Shape>;
  const auto fail = [](const std::string& what) {
    return status{errc::invalid_argument, "gemm: " + what};
  };
  if (b.cols() != a.cols())
    return fail("a is " + detail::gemm_shape_text(a.rows(), a.cols()) + " but b is " +
                detail::gemm_shape_text(b.rows(), b.cols()) + ": both need the same K");
  if (c.rows() != a.rows() || c.cols() != b.rows())
    return fail("c is " + detail::gemm_shape_text(c.rows(), c.cols()) + ", a · bᵀ is " +
                detail::gemm_shape_text(a.rows(), b.rows()));
  if (a.cols() % FormatA::block_size != 0 || a.cols() % FormatB::block_size != 0)
    return fail("K = " + std::to_string(a.cols()) + " is not a multiple of the block sizes (" +
                std::to_string(FormatA::block_size) + ", " + std::to_string(FormatB::block_size) +
                ")");
  if (a.hadamard() != b.hadamard() || a.hadamard_signs() != b.hadamard_signs())
    return fail("a and b disagree on the Hadamard transform");
  if (status s = detail::check_view("gemm", "a", a); !s)
    return s;
  if (status s = detail::check_view("gemm", "b", b); !s)
    return s;
  if (c.data() == nullptr && !c.empty())
    return fail("c is null");
  if (c.ld() < c.cols())
    return fail("c.ld() is smaller than c.cols()");
  if (c.empty())
    return {};
  const std::size_t tiles_m = (a.rows() + Shape::block_m - 1) / Shape::block_m;
  const std::size_t tiles_n = (b.rows() + Shape::block_n - 1) / Shape::block_n;
  if (tiles_m > 0x7FFFFFFFu / tiles_n)
    return {errc::too_large,
            "gemm: " + std::to_string(tiles_m * tiles_n) + " CTA tiles, more than a grid holds"};
  const auto words = [](const auto& v) {
    return detail::is_aligned(v.scales(), 4) &&
           (v.layout() == scale_layout::tensor_core || v.blocks_per_row() % 4 == 0);
  };
  if (a.cols() != 0 && (!detail::is_aligned(a.scales(), 4) || !detail::is_aligned(b.scales(), 4)))
    return {errc::misaligned, "gemm: scales must be aligned to 4 bytes"};

  program_type program;
  program.a = a;
  program.b = b;
  program.c = c;
  program.alpha = alpha;
  program.beta = beta;
  program.tiles_n = static_cast<std::uint32_t>(tiles_n);
  program.k_tiles = static_cast<std::uint32_t>((a.cols() + Shape::block_k - 1) / Shape::block_k);
  program.wide_copies = a.row_bytes() % 16 == 0 && detail::is_aligned(a.elements(), 16) &&
                        detail::is_aligned(b.elements(), 16);
  program.scale_words_a = words(a);
  program.scale_words_b = words(b);
  return runner.run_looped(program, tiles_m * tiles_n);
}

} // namespace cuda
} // namespace v0
} // namespace blockscale
