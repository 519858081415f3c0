/// \file cuda/kernels/gemm.hpp
/// The tiled GEMM as a looped CTA program (cuda/runner.cuh): C = alpha · A · Bᵀ + beta · C for
/// block-scaled E2M1 operands quantized along K (TN), FP32 or BF16 out.
///
/// A CTA computes a BM × BN tile of C from its rows of A and B, BK = 128 columns of K at a time.
/// The k-tiles pass through `Stages` buffers of shared memory filled by `cp.async`: the prologue
/// issues tiles 0 .. Stages-2; step s waits until tile s has landed (`wait_async<Stages-2>`),
/// passes the CTA barrier (after which every warp is done with tile s-1, whose buffer is the one
/// to refill), issues tile s + Stages - 1 and multiplies tile s with the warp tiles
/// (cuda/warp/tile.hpp). Rows past M or N and columns past K are zero-filled by the copies, so
/// any M and N work; K must be a multiple of the block sizes (the launcher checks).
///
/// Shared memory per stage and operand: the packed rows `element_stride` bytes apart (64 bytes of
/// a k-tile plus padding that makes the loads free of bank conflicts: 96 for the bf16 path's
/// 8-byte loads, 80 for the block-scaled path's 4-byte loads, none for the dequantize-once path,
/// whose CTA-wide dequantizer reads two whole rows per 16 lanes), then the scale codes,
/// BK / block bytes per row. Scales are copied four codes at a time (one 32-bit word of either
/// scale layout); a row-major layout whose blocks per row are not a multiple of four is read
/// byte by byte instead.
///
/// Epilogue, per element, in double as the reference GEMM (host/gemm_reference.hpp):
/// t = s_dec_a · s_dec_b · 2^accumulator_exponent (times 2^(shift_a[m] + shift_b[n]) for the
/// shifted GEMM), p = t · acc, r = alpha · p (beta == 0, C not read) or fma(alpha, p, beta · C);
/// C = r rounded once to the output type.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../../block/matrix_view.hpp"
#include "../../block/quantized_view.hpp"
#include "../../detail/bits.hpp"
#include "../../numeric/half.hpp"
#include "../warp.hpp"
#include "../warp/tile.hpp"
#include "epilogue.hpp"

namespace blockscale {
inline namespace v0 {
namespace cuda {

/// The CTA and warp tile shapes of a GEMM kernel. `Path` is `warp::bf16_path` (in-register
/// dequantization), `warp::bf16_staged_path` (the CTA dequantizes each k-tile once into shared
/// memory; a third phase per step) or `warp::block_scaled_path` (sm_120a).
template <class Path, int BM, int BN, int WM, int WN, int Stages>
struct gemm_shape {
  using path = Path;
  static constexpr int block_m = BM, block_n = BN, block_k = 128;
  static constexpr int warp_m = WM, warp_n = WN, stages = Stages;
  static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles divide the CTA tile");
  static_assert(Stages >= 2, "a pipeline has at least two stages");
};

namespace kernels {

/// Shared-memory geometry of one operand's k-tile (`Rows` rows). HD, for the program and the
/// bank-conflict test alike.
template <class Path, class Format, int Rows>
struct gemm_operand_layout {
  static constexpr int block_k = 128;
  static constexpr int element_stride =
      std::is_same<Path, warp::block_scaled_path>::value ? block_k / 2 + 16
      : std::is_same<Path, warp::bf16_staged_path>::value
          ? block_k / 2 // read by the CTA's dequantizer: two rows per 16 lanes, 128 bytes
          : block_k / 2 + 32;
  static constexpr int scale_stride = block_k / Format::block_size; ///< a multiple of 4
  static constexpr int element_bytes = Rows * element_stride;
  static constexpr int scale_bytes = Rows * scale_stride;
  static constexpr int bytes = element_bytes + scale_bytes; ///< a multiple of 16
  static_assert(bytes % 16 == 0 && scale_stride % 4 == 0, "stage buffers stay 16-byte aligned");
};

namespace detail {
/// Whether this compilation pass is a device pass without the MMA of `Path`: the block-scaled
/// path outside sm_120a (and sm_121a). There the program is a trap and nothing else, which keeps
/// such passes small and free of dead code.
template <class Path>
BLOCKSCALE_HOST_DEVICE constexpr bool pass_lacks_mma() noexcept {
#if defined(__CUDA_ARCH__) && !BLOCKSCALE_CUDA_HAS_BLOCK_SCALED_MMA
  return std::is_same<Path, warp::block_scaled_path>::value;
#else
  return false;
#endif
}
} // namespace detail

template <class FormatA, class FormatB, class Out, class Shape>
struct gemm_program {
  using path = typename Shape::path;
  using tile = warp::warp_tile<path, Shape::warp_m, Shape::warp_n, FormatA, FormatB>;
  using layout_a = gemm_operand_layout<path, FormatA, Shape::block_m>;
  using layout_b = gemm_operand_layout<path, FormatB, Shape::block_n>;
  static constexpr int bm = Shape::block_m, bn = Shape::block_n, bk = Shape::block_k;
  static constexpr int stages = Shape::stages;
  static constexpr int warps_m = bm / Shape::warp_m, warps_n = bn / Shape::warp_n;
  static constexpr int warps = warps_m * warps_n;
  static constexpr int threads = warps * warp_size;
  static constexpr bool staged = std::is_same<path, warp::bf16_staged_path>::value;
  /// wait | refill and multiply, or wait | refill and dequantize the tile | multiply.
  static constexpr int loop_phases = staged ? 3 : 2;
  using staged_layout = warp::staged_bf16<128>;
  static constexpr int staged_bytes =
      staged ? (Shape::block_m + Shape::block_n) * staged_layout::row_stride : 16;
  static_assert(bk % tile::k_step == 0, "the warp tile's k-step divides the k-tile");
  static_assert(std::is_same<Out, float>::value || std::is_same<Out, bfloat16>::value,
                "C is float or bfloat16");

  struct shared_storage {
    alignas(16) std::uint8_t stage[stages][layout_a::bytes + layout_b::bytes];
    alignas(16) std::uint8_t dequantized[staged_bytes]; ///< bf16_staged_path: A's rows, then B's
  };
  template <class Warp>
  struct warp_state {
    typename tile::template accumulators<Warp> acc;
  };

  const_quantized_view<FormatA> a;
  const_quantized_view<FormatB> b;
  matrix_view<Out> c;
  float alpha = 1.0f;
  float beta = 0.0f;
  std::uint32_t tiles_n = 1; ///< CTA tiles along N
  std::uint32_t k_tiles = 0; ///< ceil(K / 128)
  bool wide_copies = true;   ///< 16-byte element copies (rows a multiple of 16 bytes)
  bool scale_words_a = true; ///< four scale codes per copy (else byte loads)
  bool scale_words_b = true;
  /// The shifted GEMM (launch_gemm_shifted): C[m, n] times 2^(shift_a[m] + shift_b[n]) in the
  /// epilogue (null: no shifts).
  const std::int8_t* shift_a = nullptr;
  const std::int8_t* shift_b = nullptr;
  /// The shifted GEMM's two launches: with `tiles_a` set, only the CTA tiles whose 128-row tiles
  /// of A and of B both fit (`fitting_tiles`) or not (else), by the flags of
  /// `basic_shifted_scales::tiles`; the other CTAs do nothing.
  const std::uint8_t* tiles_a = nullptr;
  const std::uint8_t* tiles_b = nullptr;
  bool fitting_tiles = true;

  /// Whether this launch computes the tile of `cta`.
  BLOCKSCALE_HOST_DEVICE bool computes(cta_coord cta) const noexcept {
    if (tiles_a == nullptr)
      return true;
    const bool fits = tiles_a[cta.index / tiles_n] != 0 && tiles_b[cta.index % tiles_n] != 0;
    return fits == fitting_tiles;
  }

  BLOCKSCALE_HOST_DEVICE int steps(cta_coord cta) const noexcept {
    if constexpr (detail::pass_lacks_mma<path>())
      return 0;
    else
      return computes(cta) ? static_cast<int>(k_tiles) : 0;
  }

  template <class Warp>
  BLOCKSCALE_HOST_DEVICE void begin(const Warp& warp, cta_coord cta, shared_storage& shared,
                                    warp_state<Warp>& state) const {
#if defined(__CUDA_ARCH__)
    if constexpr (detail::pass_lacks_mma<path>()) {
      __trap(); // this pass has no block-scaled MMA: check BLOCKSCALE_CUDA_HAS_BLOCK_SCALED_MMA
      return;
    }
#endif
    tile::clear(warp, state.acc);
    const bool computed = computes(cta);
    BLOCKSCALE_UNROLL
    for (int s = 0; s < stages - 1; ++s) {
      if (computed && static_cast<std::uint32_t>(s) < k_tiles)
        load_tile(warp, cta, shared, s);
      warp.commit_async();
    }
  }

  template <int Phase, class Warp>
  BLOCKSCALE_HOST_DEVICE void step(const Warp& warp, cta_coord cta, shared_storage& shared,
                                   warp_state<Warp>& state, int s) const {
    if constexpr (detail::pass_lacks_mma<path>()) {
      (void)warp, (void)cta, (void)shared, (void)state, (void)s;
    } else if constexpr (Phase == 0) {
      warp.template wait_async<stages - 2>(); // tile s has landed (for this thread's copies)
    } else if constexpr (Phase == 1) {
      const int next = s + stages - 1; // refills the buffer every warp finished with
      if (static_cast<std::uint32_t>(next) < k_tiles)
        load_tile(warp, cta, shared, next);
      warp.commit_async();
      if constexpr (staged)
        dequantize_tile(warp, shared, s);
      else
        multiply(warp, stage_a(shared, s), stage_b(shared, s), state);
    } else {
      multiply(warp,
               warp::shared_operand{shared.dequantized, staged_layout::row_stride, nullptr, 0},
               warp::shared_operand{shared.dequantized + bm * staged_layout::row_stride,
                                    staged_layout::row_stride, nullptr, 0},
               state);
    }
  }

  template <class Warp>
  BLOCKSCALE_HOST_DEVICE void end(const Warp& warp, cta_coord cta, shared_storage&,
                                  warp_state<Warp>& state) const {
    if constexpr (detail::pass_lacks_mma<path>())
      return;
    warp.template wait_async<0>();
    if (!computes(cta))
      return;
    const std::size_t m0 = static_cast<std::size_t>(cta.index / tiles_n) * bm +
                           static_cast<std::size_t>(warp.index() / warps_n) * Shape::warp_m;
    const std::size_t n0 = static_cast<std::size_t>(cta.index % tiles_n) * bn +
                           static_cast<std::size_t>(warp.index() % warps_n) * Shape::warp_n;
    const double t = static_cast<double>(a.decode_scale()) * static_cast<double>(b.decode_scale()) *
                     std::ldexp(1.0, tile::accumulator_exponent);
    warp.each([&](int lane) {
      BLOCKSCALE_UNROLL
      for (int i = 0; i < tile::tiles_m; ++i)
        BLOCKSCALE_UNROLL
      for (int j = 0; j < tile::tiles_n; ++j)
        BLOCKSCALE_UNROLL
      for (int r = 0; r < 4; ++r) {
        const warp::coord at = tile::coord_of(lane, i, j, r);
        const std::size_t row = m0 + static_cast<std::size_t>(at.row);
        const std::size_t col = n0 + static_cast<std::size_t>(at.col);
        if (row >= c.rows() || col >= c.cols())
          continue;
        // A shifted row pair's power of two, exact: the shifts of two 8-bit scale formats' rows
        // stay far inside float's exponents.
        const double f =
            shift_a == nullptr ? t : t * ::blockscale::detail::exp2i(shift_a[row] + shift_b[col]);
        c(row, col) = epilogue_value(f * static_cast<double>(state.acc.tile[i][j][lane].r[r]),
                                     alpha, beta, c(row, col));
      }
    });
  }

private:
  BLOCKSCALE_HOST_DEVICE static warp::shared_operand stage_a(shared_storage& shared,
                                                             int s) noexcept {
    const std::uint8_t* stage = shared.stage[s % stages];
    return {stage, layout_a::element_stride, stage + layout_a::element_bytes,
            layout_a::scale_stride};
  }
  BLOCKSCALE_HOST_DEVICE static warp::shared_operand stage_b(shared_storage& shared,
                                                             int s) noexcept {
    const std::uint8_t* stage = shared.stage[s % stages] + layout_a::bytes;
    return {stage, layout_b::element_stride, stage + layout_b::element_bytes,
            layout_b::scale_stride};
  }

  /// This warp's share of C += A · Bᵀ over the k-tile in `a` and `b` (whole CTA tiles).
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE void multiply(const Warp& warp, const warp::shared_operand& a,
                                       const warp::shared_operand& b,
                                       warp_state<Warp>& state) const {
    const int wm = warp.index() / warps_n, wn = warp.index() % warps_n;
    BLOCKSCALE_UNROLL
    for (int k0 = 0; k0 < bk; k0 += tile::k_step)
      tile::step(warp, state.acc, a.from_row(wm * Shape::warp_m), b.from_row(wn * Shape::warp_n),
                 k0);
  }

  /// bf16_staged_path: the CTA dequantizes k-tile `s` once, each (row, 16-element chunk) by one
  /// thread; consecutive threads take consecutive chunks of a row.
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE void dequantize_tile(const Warp& warp, shared_storage& shared,
                                              int s) const {
    const warp::shared_operand a = stage_a(shared, s), b = stage_b(shared, s);
    warp.each([&](int lane) {
      const int thread = warp.index() * warp_size + lane;
      for (int i = thread; i < bm * staged_layout::chunks; i += threads)
        staged_layout::template dequantize_chunk<Warp, typename FormatA::scale_type,
                                                 FormatA::block_size>(
            a, i / staged_layout::chunks, i % staged_layout::chunks, shared.dequantized);
      for (int i = thread; i < bn * staged_layout::chunks; i += threads)
        staged_layout::template dequantize_chunk<Warp, typename FormatB::scale_type,
                                                 FormatB::block_size>(
            b, i / staged_layout::chunks, i % staged_layout::chunks,
            shared.dequantized + bm * staged_layout::row_stride);
    });
  }

  // Tile `kt` of both operands into stage kt % stages: each thread copies its share.
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE void load_tile(const Warp& warp, cta_coord cta, shared_storage& shared,
                                        int kt) const {
    std::uint8_t* stage = shared.stage[kt % stages];
    const std::size_t m0 = static_cast<std::size_t>(cta.index / tiles_n) * bm;
    const std::size_t n0 = static_cast<std::size_t>(cta.index % tiles_n) * bn;
    warp.each([&](int lane) {
      const int thread = warp.index() * warp_size + lane;
      load_operand<layout_a>(warp, a, m0, kt, thread, stage, scale_words_a);
      load_operand<layout_b>(warp, b, n0, kt, thread, stage + layout_a::bytes, scale_words_b);
    });
  }

  template <class Layout, class Warp, class View>
  BLOCKSCALE_HOST_DEVICE void load_operand(const Warp& warp, const View& v, std::size_t row0,
                                           int kt, int thread, std::uint8_t* to,
                                           bool scale_words) const {
    constexpr int rows = Layout::element_bytes / Layout::element_stride;
    const int chunk = wide_copies ? 16 : 8;
    const int chunks = bk / 2 / chunk; // per row
    const std::size_t row_bytes = v.row_bytes();
    const std::size_t k_byte = static_cast<std::size_t>(kt) * (bk / 2);
    for (int i = thread; i < rows * chunks; i += threads) {
      const int r = i / chunks, q = i % chunks;
      const std::size_t row = row0 + static_cast<std::size_t>(r);
      const std::size_t at = k_byte + static_cast<std::size_t>(q * chunk);
      const bool inside = row < v.rows() && at < row_bytes;
      const int valid = inside ? static_cast<int>(row_bytes - at < static_cast<std::size_t>(chunk)
                                                      ? row_bytes - at
                                                      : static_cast<std::size_t>(chunk))
                               : 0;
      warp.copy_async(to + r * Layout::element_stride + q * chunk,
                      inside ? v.row(row) + at : v.elements(), chunk, valid);
    }
    // Scales: groups of four codes of one row.
    constexpr int groups = Layout::scale_stride / 4;
    const std::size_t blocks = v.blocks_per_row();
    const std::size_t kb0 = static_cast<std::size_t>(kt) * Layout::scale_stride;
    std::uint8_t* scales = to + Layout::element_bytes;
    for (int i = thread; i < rows * groups; i += threads) {
      const int r = i / groups, q = i % groups;
      const std::size_t row = row0 + static_cast<std::size_t>(r);
      const std::size_t kb = kb0 + static_cast<std::size_t>(4 * q);
      std::uint8_t* dst = scales + r * Layout::scale_stride + 4 * q;
      const bool inside = row < v.rows() && kb < blocks;
      if (scale_words) {
        // The tensor-core layout pads each row's blocks to a multiple of four with zeros.
        const std::size_t left = v.layout() == scale_layout::row_major ? blocks - kb : 4;
        const int valid = inside ? static_cast<int>(left < 4 ? left : 4) : 0;
        warp.copy_async(dst, inside ? v.scales() + v.scale_index(row, kb) : v.scales(), 4, valid);
      } else {
        for (int j = 0; j < 4; ++j)
          dst[j] = inside && kb + j < blocks ? v.scales()[v.scale_index(row, kb + j)] : 0;
      }
    }
  }
};

} // namespace kernels
} // namespace cuda
} // namespace v0
} // namespace blockscale
