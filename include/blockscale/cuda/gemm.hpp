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
///
/// On sm_90a's warpgroup MMA (cuda/kernels/gemm_w4a16.hpp), over a runner with `run_specialized`
/// and `tensor_map_2d`: `launch_gemm_w4a16<Shape>(runner, x, w, c, alpha, beta)`, C = alpha · X ·
/// Wᵀ + beta · C with X in BF16 and W block-scaled E2M1, and `launch_gemm_wgmma<Shape>(runner, a,
/// b, c, alpha, beta)`, the same GEMM as launch_gemm on two block-scaled E2M1 operands. Shapes
/// (rows of the register operand W or B × rows of X or A):
/// - `gemm_wgmma_small`: 64 × 16, six buffers, for M ≤ 16 (decode);
/// - `gemm_wgmma_medium`: 128 × 64, five buffers, for M ≤ 64;
/// - `gemm_wgmma_large`: 128 × 128, four buffers.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../block/matrix_view.hpp"
#include "../block/quantized_view.hpp"
#include "../block/scale_shift.hpp"
#include "kernels/gemm.hpp"
#include "kernels/gemm_w4a16.hpp"
#include "kernels/scale_shift.hpp"
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

using gemm_wgmma_small = wgmma_shape<1, 16, 6>;
using gemm_wgmma_medium = wgmma_shape<2, 64, 5>;
using gemm_wgmma_large = wgmma_shape<2, 128, 4>;

namespace detail {
inline std::string gemm_shape_text(std::size_t rows, std::size_t cols) {
  return std::to_string(rows) + " x " + std::to_string(cols);
}
} // namespace detail

namespace detail {
/// Checks launch_gemm's arguments and fills `program` for them; `ctas` gets the grid (0: C is
/// empty, nothing to run).
template <class Shape, class Program, class FormatA, class FormatB, class Out>
[[nodiscard]] status prepare_gemm(const_quantized_view<FormatA> a, const_quantized_view<FormatB> b,
                                  matrix_view<Out> c, float alpha, float beta, Program& program,
                                  std::size_t& ctas) {
  ctas = 0;
  const auto fail = [](const std::string& what) {
    return status{errc::invalid_argument, "gemm: " + what};
  };
  if (b.cols() != a.cols())
    return fail("a is " + gemm_shape_text(a.rows(), a.cols()) + " but b is " +
                gemm_shape_text(b.rows(), b.cols()) + ": both need the same K");
  if (c.rows() != a.rows() || c.cols() != b.rows())
    return fail("c is " + gemm_shape_text(c.rows(), c.cols()) + ", a · bᵀ is " +
                gemm_shape_text(a.rows(), b.rows()));
  if (a.cols() % FormatA::block_size != 0 || a.cols() % FormatB::block_size != 0)
    return fail("K = " + std::to_string(a.cols()) + " is not a multiple of the block sizes (" +
                std::to_string(FormatA::block_size) + ", " + std::to_string(FormatB::block_size) +
                ")");
  if (a.hadamard() != b.hadamard() || a.hadamard_signs() != b.hadamard_signs())
    return fail("a and b disagree on the Hadamard transform");
  if (status s = check_view("gemm", "a", a); !s)
    return s;
  if (status s = check_view("gemm", "b", b); !s)
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
    return is_aligned(v.scales(), 4) &&
           (v.layout() == scale_layout::tensor_core || v.blocks_per_row() % 4 == 0);
  };
  if (a.cols() != 0 && (!is_aligned(a.scales(), 4) || !is_aligned(b.scales(), 4)))
    return {errc::misaligned, "gemm: scales must be aligned to 4 bytes"};

  program.a = a;
  program.b = b;
  program.c = c;
  program.alpha = alpha;
  program.beta = beta;
  program.tiles_n = static_cast<std::uint32_t>(tiles_n);
  program.k_tiles = static_cast<std::uint32_t>((a.cols() + Shape::block_k - 1) / Shape::block_k);
  program.wide_copies =
      a.row_bytes() % 16 == 0 && is_aligned(a.elements(), 16) && is_aligned(b.elements(), 16);
  program.scale_words_a = words(a);
  program.scale_words_b = words(b);
  ctas = tiles_m * tiles_n;
  return {};
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
  kernels::gemm_program<FormatA, FormatB, Out, Shape> program;
  std::size_t ctas = 0;
  if (status s = detail::prepare_gemm<Shape>(a, b, c, alpha, beta, program, ctas); !s || ctas == 0)
    return s;
  return runner.run_looped(program, ctas);
}

/// What the shifted GEMM needs of a block-scaled MMA path: the block format its tensor core
/// takes, onto which the operands' scales are shifted. One specialisation per path; a new
/// block-scaled MMA (another architecture's) is a path, its warp tile and a specialisation here.
template <class Path>
struct shifted_mma {
  static_assert(warp::detail::always_false<Path>::value,
                "shifted_mma: no block-scaled MMA for this path");
};
template <>
struct shifted_mma<warp::block_scaled_path> {
  using format = nvfp4; ///< kind::mxf4nvf4 with UE4M3 scales per 16 elements
};

/// Whether an operand of `Format` can take the shifted GEMM on `Path`'s MMA (shifts_onto).
template <class Format, class Path = warp::block_scaled_path>
inline constexpr bool shifted_gemm_format = shifts_onto<Format, typename shifted_mma<Path>::format>;

/// Shifts q's block scales onto the scale format of `Path`'s MMA (block/scale_shift.hpp's rule,
/// the host's `shift_scales` bit for bit): every row's codes and shift and every 128-row tile's
/// flag into `out`, whose arrays have `shifted_storage_for<Format>(q.shape())` bytes. Reads the
/// scales only. Errors, before anything runs: a null array (for a matrix with rows) or a
/// view check_view refuses, a grid beyond 2^31 - 1 CTAs.
template <class Path = warp::block_scaled_path, class Runner, class Format>
[[nodiscard]] status launch_shift_scales(Runner& runner, const_quantized_view<Format> q,
                                         shifted_scales out,
                                         shift_target target = shift_target::normals) {
  using native = typename shifted_mma<Path>::format;
  static_assert(shifted_gemm_format<Format, Path>,
                "launch_shift_scales: the operand's scales do not shift onto the MMA's "
                "(same elements and block size, unsigned scales with the same mantissa)");
  if (q.rows() == 0)
    return {};
  if (out.codes == nullptr || out.shifts == nullptr || out.tiles == nullptr)
    return {errc::invalid_argument,
            "shift_scales: out.codes, out.shifts and out.tiles must not be null"};
  if (status s = detail::check_view("shift_scales", "q", q); !s)
    return s;
  const std::size_t ctas = (q.rows() + shift_tile_rows - 1) / shift_tile_rows;
  if (ctas > 0x7FFFFFFFu)
    return {errc::too_large,
            "shift_scales: " + std::to_string(ctas) + " tiles of 128 rows, more than a grid holds"};
  kernels::shift_scales_program<Format, native> program;
  program.q = q;
  program.out = out;
  program.target = target;
  return runner.run(program, ctas);
}

/// The shifted GEMM: C = alpha · A · Bᵀ + beta · C for operands whose scales do not fit the
/// block-scaled MMA as they are (UE5M3-FP4, and NVFP4 beside it), with their shifted scales `sa`
/// and `sb` (launch_shift_scales). Two launches over the same 128 × 128 tiles of C:
/// - `NativeShape` (a block-scaled path) computes every tile whose rows of A and of B all fit,
///   on the MMA with the shifted codes, and multiplies each C[m, n] back by
///   2^(shift_a[m] + shift_b[n]) in the epilogue: the bits of the same MMA on the original scales
///   (docs/scale_shift.md);
/// - `FallbackShape` (a BF16 path) computes every other tile from the original operands.
/// Each tile of C is written once. Errors, before anything runs: launch_gemm's, for either
/// launch, and null shifted arrays where there is something to compute.
template <class NativeShape, class FallbackShape, class Runner, class FormatA, class FormatB,
          class Out>
[[nodiscard]] status launch_gemm_shifted(Runner& runner, const_quantized_view<FormatA> a,
                                         const_shifted_scales sa, const_quantized_view<FormatB> b,
                                         const_shifted_scales sb, matrix_view<Out> c,
                                         float alpha = 1.0f, float beta = 0.0f) {
  using native = typename shifted_mma<typename NativeShape::path>::format;
  static_assert(shifted_gemm_format<FormatA, typename NativeShape::path> &&
                    shifted_gemm_format<FormatB, typename NativeShape::path>,
                "launch_gemm_shifted: an operand's scales do not shift onto the MMA's");
  static_assert(
      NativeShape::block_m == shift_tile_rows && NativeShape::block_n == shift_tile_rows &&
          FallbackShape::block_m == shift_tile_rows && FallbackShape::block_n == shift_tile_rows,
      "launch_gemm_shifted: both shapes have the shifted scales' 128 × 128 tiles");
  kernels::gemm_program<FormatA, FormatB, Out, FallbackShape> fallback;
  std::size_t ctas = 0;
  if (status s = detail::prepare_gemm<FallbackShape>(a, b, c, alpha, beta, fallback, ctas);
      !s || ctas == 0)
    return s;
  const auto null = [](const const_shifted_scales& s) {
    return s.codes == nullptr || s.shifts == nullptr || s.tiles == nullptr;
  };
  if (null(sa) || null(sb))
    return {errc::invalid_argument, "gemm: sa and sb need codes, shifts and tiles "
                                    "(launch_shift_scales fills them)"};
  kernels::gemm_program<native, native, Out, NativeShape> shifted;
  if (status s = detail::prepare_gemm<NativeShape>(shifted_operand<native>(a, sa),
                                                   shifted_operand<native>(b, sb), c, alpha, beta,
                                                   shifted, ctas);
      !s)
    return s;
  shifted.shift_a = sa.shifts;
  shifted.shift_b = sb.shifts;
  shifted.tiles_a = fallback.tiles_a = sa.tiles;
  shifted.tiles_b = fallback.tiles_b = sb.tiles;
  shifted.fitting_tiles = true;
  fallback.fitting_tiles = false;
  if (status s = runner.run_looped(shifted, ctas); !s)
    return s;
  return runner.run_looped(fallback, ctas);
}

/// Split-K for the warpgroup-MMA GEMMs: `splits` CTAs share each tile of C along K (a decode's
/// few tiles then fill the GPU); each writes its FP32 partial sums to `workspace` (splits · M · N
/// floats, in the runner's memory: device memory for `device_runner`), and a second program adds
/// them in a fixed order in double and applies the epilogue. `splits` is capped so that every
/// split has a k-tile (64 columns of K); 1 runs the one-pass GEMM and needs no workspace.
struct wgmma_split_k {
  std::uint32_t splits = 1;
  float* workspace = nullptr;
  std::size_t workspace_size = 0; ///< in floats
};

namespace detail {
/// K's 64-column k-tiles per split for `requested` splits of `k_tiles` (at least one).
constexpr std::size_t wgmma_split_tiles(std::uint32_t requested, std::size_t k_tiles) noexcept {
  return requested <= 1 || k_tiles <= 1 ? (k_tiles > 0 ? k_tiles : 1)
                                        : (k_tiles + requested - 1) / requested;
}
} // namespace detail

/// The splits launch_gemm_w4a16 and launch_gemm_wgmma run for `requested` splits of K: at most
/// one per k-tile, none empty (1 for 0 or 1).
constexpr std::uint32_t wgmma_splits(std::uint32_t requested, std::size_t k) noexcept {
  const std::size_t k_tiles = (k + 63) / 64;
  const std::size_t per = detail::wgmma_split_tiles(requested, k_tiles);
  return k_tiles == 0 ? 1u : static_cast<std::uint32_t>((k_tiles + per - 1) / per);
}

/// The splits `gemm_w4a16` and `gemm` request on a device of `sms` multiprocessors for `tiles`
/// CTA tiles of C and K = `k`: none while the tiles fill at least half the multiprocessors, else
/// about one CTA per multiprocessor, each split at least four k-tiles (so the ring fills), at
/// most 16 (the reduction reads every split's partial sums once).
constexpr std::uint32_t wgmma_automatic_splits(std::size_t tiles, std::size_t k,
                                               std::size_t sms) noexcept {
  const std::size_t k_tiles = (k + 63) / 64;
  if (tiles == 0 || 2 * tiles > sms)
    return 1;
  std::size_t splits = sms / tiles;
  splits = splits < k_tiles / 4 ? splits : k_tiles / 4;
  splits = splits < 16 ? splits : 16;
  return splits < 2 ? 1u : static_cast<std::uint32_t>(splits);
}

namespace detail {

/// The producer warps of the warpgroup-MMA GEMMs index the scales in 32 bits.
template <class Format>
bool scales_fit_32_bits(const_quantized_view<Format> q) noexcept {
  return scale_storage_size(q.layout(), q.rows(), q.blocks_per_row()) <= 0xFFFFFFFFu;
}

/// What both warpgroup-MMA launchers do once X is checked: check C, W (named `w_name`) and the
/// grid, make the tensor maps (X's box `xs`, with only its base, sizes and stride filled in),
/// run. `k` is K.
template <class Shape, class Runner, class Program, class Format, class Out>
status run_wgmma(Runner& runner, Program& program, const char* name, const char* w_name,
                 std::size_t x_rows, std::size_t k, warp::tensor_map_2d_shape xs,
                 const_quantized_view<Format> w, matrix_view<Out> c, float alpha, float beta,
                 wgmma_split_k split) {
  const auto fail = [name](errc code, const std::string& what) {
    return status{code, std::string(name) + ": " + what};
  };
  if (c.rows() != x_rows || c.cols() != w.rows())
    return fail(errc::invalid_argument, "c is " + gemm_shape_text(c.rows(), c.cols()) +
                                            ", the product is " +
                                            gemm_shape_text(x_rows, w.rows()));
  if (c.data() == nullptr && !c.empty())
    return fail(errc::invalid_argument, "c is null");
  if (c.ld() < c.cols())
    return fail(errc::invalid_argument, "c.ld() is smaller than c.cols()");
  if (c.empty())
    return {};
  // Tile coordinates and TMA coordinates are 32-bit signed.
  if (x_rows > 0x7FFFFFFFu - 256 || w.rows() > 0x7FFFFFFFu - 256 || k > 0x7FFFFFFFu - 256)
    return fail(errc::too_large, "M, N and K must each be below 2^31 - 256, not " +
                                     gemm_shape_text(x_rows, w.rows()) +
                                     " by K = " + std::to_string(k));
  const std::string wn(w_name);
  if (!scales_fit_32_bits(w))
    return fail(errc::too_large, wn + "'s scales take more than 2^32 - 1 bytes");
  if (k != 0 && (!is_aligned(w.elements(), 16) || w.row_bytes() % 16 != 0))
    return fail(errc::misaligned,
                wn +
                    "'s elements must be 16-byte aligned with rows a multiple of 16 bytes "
                    "apart (TMA reads them): K padded to a multiple of 32 (padded K here " +
                    std::to_string(w.padded_cols()) + ")");
  static_assert(Shape::tile_k == 64, "wgmma_splits counts k-tiles of 64 columns");
  const std::size_t tiles_x = (x_rows + Shape::tile_x - 1) / Shape::tile_x;
  const std::size_t tiles_w = (w.rows() + Shape::tile_w - 1) / Shape::tile_w;
  const std::size_t k_tiles = (k + Shape::tile_k - 1) / Shape::tile_k;
  const std::uint32_t splits = wgmma_splits(split.splits, k);
  if (tiles_x > 0x7FFFFFFFu / tiles_w / splits)
    return fail(errc::too_large, std::to_string(tiles_x * tiles_w) + " CTA tiles times " +
                                     std::to_string(splits) + " splits, more than a grid holds");
  const std::size_t elements = c.rows() * c.cols();
  if (splits > 1) {
    if (elements > SIZE_MAX / splits)
      return fail(errc::too_large, "the split-K workspace would not fit in std::size_t");
    if (split.workspace == nullptr || split.workspace_size < splits * elements)
      return fail(
          errc::invalid_argument,
          "split.workspace must hold splits · M · N = " + std::to_string(splits * elements) +
              " floats for " + std::to_string(splits) + " splits, not " +
              std::to_string(split.workspace == nullptr ? 0 : split.workspace_size));
  }
  program.w = w;
  program.c = c;
  program.alpha = alpha;
  program.beta = beta;
  program.tiles_x = static_cast<std::uint32_t>(tiles_x);
  program.tiles_w = static_cast<std::uint32_t>(tiles_w);
  program.k_tiles = static_cast<std::uint32_t>(k_tiles);
  program.splits = splits;
  program.split_tiles = static_cast<std::uint32_t>(wgmma_split_tiles(split.splits, k_tiles));
  program.partials = splits > 1 ? split.workspace : nullptr;
  if (k != 0) {
    xs.box_rows = Shape::tile_x;
    if (status st = runner.tensor_map_2d(xs, program.x_map); !st)
      return st;
    warp::tensor_map_2d_shape ws;
    ws.base = w.elements();
    ws.element_bytes = 1;
    ws.rows = w.rows();
    ws.cols = w.row_bytes();
    ws.row_stride = w.row_bytes();
    ws.box_rows = Shape::tile_w;
    ws.box_cols = Shape::tile_k / 2;
    if (status st = runner.tensor_map_2d(ws, program.w_map); !st)
      return st;
  }
  // Persistent CTAs: as many as the runner keeps resident, each taking units of work in turn.
  const std::size_t units = tiles_x * tiles_w * splits;
  const std::size_t resident = runner.persistent_ctas();
  if (status st = runner.run_specialized(program, resident < units ? resident : units);
      !st || splits == 1)
    return st;
  kernels::wgmma_split_reduce_program<Out> reduce;
  reduce.partials = split.workspace;
  reduce.splits = splits;
  reduce.w_scale = w.decode_scale_data();
  reduce.x_scale = program.x_decode_scale();
  reduce.offset = Program::product_offset;
  reduce.c = c;
  reduce.alpha = alpha;
  reduce.beta = beta;
  using reduce_type = decltype(reduce);
  const std::size_t ctas = (elements + reduce_type::threads - 1) / reduce_type::threads;
  return runner.run(reduce, std::min(ctas, runner.persistent_ctas()));
}

} // namespace detail

/// C[M×N] = alpha · X[M×K] · W[N×K]ᵀ + beta · C (beta == 0: C is not read), X in BF16 (row-major,
/// rows `x.ld()` elements apart) and W quantized along K in an E2M1 block format. Errors, before
/// anything runs: shapes that disagree, W quantized with the Hadamard transform (X would need it
/// too), a null or misaligned buffer (TMA reads X and W: 16-byte aligned, rows a multiple of 16
/// bytes apart, so x.ld() a multiple of 8 and W's padded K a multiple of 32), a grid beyond
/// 2^31 - 1 CTAs, a split-K workspace too small, and what the runner's tensor-map encoder
/// refuses. `split` (wgmma_split_k): K shared by that many CTAs per tile of C.
template <class Shape, class Runner, class Format, class Out>
[[nodiscard]] status launch_gemm_w4a16(Runner& runner, matrix_view<const bfloat16> x,
                                       const_quantized_view<Format> w, matrix_view<Out> c,
                                       float alpha = 1.0f, float beta = 0.0f,
                                       wgmma_split_k split = {}) {
  const auto fail = [](errc code, const std::string& what) {
    return status{code, "gemm_w4a16: " + what};
  };
  if (w.cols() != x.cols())
    return fail(errc::invalid_argument,
                "x is " + detail::gemm_shape_text(x.rows(), x.cols()) + " but w is " +
                    detail::gemm_shape_text(w.rows(), w.cols()) + ": both need the same K");
  if (w.hadamard())
    return fail(errc::invalid_argument,
                "w was quantized with the Hadamard transform, which x would need as well");
  if (status s = detail::check_view("gemm_w4a16", "w", w); !s)
    return s;
  if (x.data() == nullptr && !x.empty())
    return fail(errc::invalid_argument, "x is null");
  if (!x.empty() && (!detail::is_aligned(x.data(), 16) || x.ld() % 8 != 0))
    return fail(errc::misaligned, "x must be 16-byte aligned with x.ld() a multiple of 8 "
                                  "(TMA reads it), not ld " +
                                      std::to_string(x.ld()));
  warp::tensor_map_2d_shape xs;
  xs.base = x.data();
  xs.element_bytes = 2;
  xs.rows = x.rows();
  xs.cols = x.cols();
  xs.row_stride = x.ld() * 2;
  xs.box_cols = Shape::tile_k;
  xs.swizzle = warp::smem_swizzle::bytes128;
  kernels::gemm_w4a16_program<Format, Out, Shape> program;
  return detail::run_wgmma<Shape>(runner, program, "gemm_w4a16", "w", x.rows(), x.cols(), xs, w, c,
                                  alpha, beta, split);
}

/// C[M×N] = alpha · A[M×K] · B[N×K]ᵀ + beta · C for two E2M1 block-scaled operands on sm_90a's
/// warpgroup MMA (cuda/kernels/gemm_w4a16.hpp): B is the register operand, dequantized by the
/// consumer warps; A the shared one, dequantized once per k-tile by the producer warps into the
/// swizzled buffer. The formats may differ (NVFP4 × MXFP4 ...). Errors: those of launch_gemm,
/// both operands' padded K a multiple of 32 with elements 16-byte aligned (TMA reads them), and
/// a split-K workspace too small. `split` as for launch_gemm_w4a16.
template <class Shape, class Runner, class FormatA, class FormatB, class Out>
[[nodiscard]] status launch_gemm_wgmma(Runner& runner, const_quantized_view<FormatA> a,
                                       const_quantized_view<FormatB> b, matrix_view<Out> c,
                                       float alpha = 1.0f, float beta = 0.0f,
                                       wgmma_split_k split = {}) {
  const auto fail = [](errc code, const std::string& what) {
    return status{code, "gemm: " + what};
  };
  if (b.cols() != a.cols())
    return fail(errc::invalid_argument,
                "a is " + detail::gemm_shape_text(a.rows(), a.cols()) + " but b is " +
                    detail::gemm_shape_text(b.rows(), b.cols()) + ": both need the same K");
  if (a.cols() % FormatA::block_size != 0 || a.cols() % FormatB::block_size != 0)
    return fail(errc::invalid_argument, "K = " + std::to_string(a.cols()) +
                                            " is not a multiple of the block sizes (" +
                                            std::to_string(FormatA::block_size) + ", " +
                                            std::to_string(FormatB::block_size) + ")");
  if (a.hadamard() != b.hadamard() || a.hadamard_signs() != b.hadamard_signs())
    return fail(errc::invalid_argument, "a and b disagree on the Hadamard transform");
  if (status s = detail::check_view("gemm", "a", a); !s)
    return s;
  if (status s = detail::check_view("gemm", "b", b); !s)
    return s;
  if (a.cols() != 0 && a.rows() != 0 &&
      (!detail::is_aligned(a.elements(), 16) || a.row_bytes() % 16 != 0))
    return fail(errc::misaligned,
                "a's elements must be 16-byte aligned with rows a multiple of 16 bytes apart "
                "(TMA reads them): K padded to a multiple of 32, not " +
                    std::to_string(a.padded_cols()));
  if (!detail::scales_fit_32_bits(a))
    return fail(errc::too_large, "a's scales take more than 2^32 - 1 bytes");
  warp::tensor_map_2d_shape xs;
  xs.base = a.elements();
  xs.element_bytes = 1;
  xs.rows = a.rows();
  xs.cols = a.row_bytes();
  xs.row_stride = a.row_bytes();
  xs.box_cols = Shape::tile_k / 2;
  kernels::gemm_wgmma_program<FormatA, FormatB, Out, Shape> program;
  program.x = a;
  return detail::run_wgmma<Shape>(runner, program, "gemm", "b", a.rows(), a.cols(), xs, b, c, alpha,
                                  beta, split);
}

/// Whether `launch_gemm` and `cuda::gemm` take `Format` for an operand: E2M1 elements (NVFP4,
/// UE5M3-FP4, MXFP4 and other E2M1 block formats), the elements the warp tiles multiply.
template <class Format>
inline constexpr bool gemm_format = std::is_same<typename Format::element_type, e2m1>::value;

/// Whether launch_gemm_wgmma takes these operands (TMA's alignment; both operands' scales indexed
/// in 32 bits), so that `gemm` may choose it.
template <class FormatA, class FormatB>
bool wgmma_takes(const_quantized_view<FormatA> a, const_quantized_view<FormatB> b) noexcept {
  return detail::is_aligned(a.elements(), 16) && a.row_bytes() % 16 == 0 &&
         detail::is_aligned(b.elements(), 16) && b.row_bytes() % 16 == 0 &&
         detail::scales_fit_32_bits(a) && detail::scales_fit_32_bits(b);
}

} // namespace cuda
} // namespace v0
} // namespace blockscale
