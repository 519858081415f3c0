/// \file cuda/kernels/gemm_w4a16.hpp
/// The W4A16 GEMM of Hopper (sm_90a) as a warp-specialised program (cuda/runner.cuh,
/// `run_specialized`): C[M×N] = alpha · X · Wᵀ + beta · C with X[M×K] in BF16 and W[N×K] in any
/// E2M1 block format (NVFP4, UE5M3-FP4, MXFP4 ...), FP32 or BF16 out. The same code runs on the
/// host through emulation/host_async.hpp.
///
/// The weights are the warpgroup MMA's register operand A and the activations its shared operand
/// B, so the MMA computes Cᵀ tiles: D[n, m] over 64 weight rows per consumer warpgroup and
/// `tile_x` activation rows (wgmma's N, 8 to 256). A decode batch of M = 1 … 16 is therefore
/// wgmma's small N, and no MMA is spent on rows that do not exist.
///
/// Warps. Consumers 0 … 4·C - 1 (C = 1 or 2 warpgroups, `setmaxnreg_inc`); the producer
/// warpgroup 4·C … 4·C + 3 (`setmaxnreg_dec<40>`): its first warp issues the TMA loads of each
/// k-tile (64 columns of K) into a ring of `stages` buffers — X's box of tile_x rows × 128 bytes
/// under the 128-byte swizzle, W's box of tile_w rows × 32 bytes of packed E2M1 — and the other
/// three turn the k-tile's block scale codes into bf16 multipliers (cuda/warp/dequant.hpp) in the
/// same buffer, so that the consumers never decode a scale. A buffer is full when the TMA bytes
/// have landed and those three warps have arrived (`full`, 4 arrivals); empty when every
/// consumer warp has arrived after the wgmma that read it retired (`empty`).
///
/// Consumers. Thread t of a quad holds, per k16 chunk, the bytes 8c + t and 8c + t + 4 of each of
/// its two rows' 32-byte k-tile: the wgmma A fragment's k = 2t, 2t + 1 and 2t + 8, 2t + 9 in
/// natural order, as B's descriptor reads X. A byte's two codes become a bf16x2 in four integer
/// instructions (`e2m1_byte_pair`) and one `mul.rn.bf16x2` by the block's multiplier (two for
/// UE8M0): exact, as the dequantizer of the other paths. The next k-tile is dequantized while the
/// current one's wgmma run (two fragment sets), and a buffer is released after its wgmma retired.
///
/// Epilogue, per element, in double as the reference GEMM (host/gemm_reference.hpp):
/// p = s_dec_w · 2^offset · acc, r = alpha · p (beta == 0: C is not read) or
/// fma(alpha, p, beta · C), rounded once to the output type. Rows past M or N and columns past K
/// are zeros from the TMA box (the launcher, cuda/gemm.hpp, checks the rest).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../../block/matrix_view.hpp"
#include "../../block/quantized_view.hpp"
#include "../../numeric/format.hpp"
#include "../../numeric/half.hpp"
#include "../warp.hpp"
#include "../warp/async.hpp"
#include "../warp/dequant.hpp"
#include "../warp/tile.hpp"
#include "../warp/wgmma.hpp"
#include "epilogue.hpp"

namespace blockscale {
inline namespace v0 {
namespace cuda {

/// The tile of a warpgroup-MMA GEMM (W4A16, or FP4 × FP4): `Consumers` warpgroups of 64 rows of
/// the register operand each, `TileX` rows of the shared operand (wgmma's N), `Stages` buffers in
/// the ring. K goes 64 columns at a time.
template <int Consumers, int TileX, int Stages>
struct wgmma_shape {
  static_assert(Consumers == 1 || Consumers == 2, "one or two consumer warpgroups");
  static_assert(TileX % 8 == 0 && TileX >= 8 && TileX <= 256, "wgmma's N: 8 to 256 by 8");
  static_assert(Stages >= 2 && Stages <= 8, "2 to 8 buffers");
  static constexpr int consumers = Consumers;
  static constexpr int tile_w = 64 * Consumers; ///< weight rows (N of C) per CTA
  static constexpr int tile_x = TileX;          ///< activation rows (M of C) per CTA
  static constexpr int stages = Stages;
  static constexpr int tile_k = 64;
};

namespace kernels {

/// The scale of row r, block kb of `v` in 32-bit index arithmetic (the launcher checks that the
/// operand's scales fit: detail::scales_fit_32_bits); 0 past the matrix, so that what lies beyond
/// M, N or K multiplies by zero.
template <class Format>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE warp::bf16_multiplier
multiplier_32(const const_quantized_view<Format>& v, std::uint32_t r, std::uint32_t kb) {
  const auto blocks = static_cast<std::uint32_t>(v.blocks_per_row());
  if (r >= v.rows() || kb >= blocks)
    return {0u, 0u};
  return warp::dequant_scale<typename Format::scale_type>::multiplier(
      v.scales()[v.layout() == scale_layout::row_major
                     ? r * blocks + kb
                     : tensor_core_scale_offset<std::uint32_t>(r, kb, blocks)]);
}

/// s_dec_w · s_dec_x (1 for X in BF16: `x_scale` null) · 2^offset, in double.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE double
wgmma_product_scale(const float* w_scale, const float* x_scale, int offset) {
  double t = static_cast<double>(*w_scale) * std::ldexp(1.0, offset);
  if (x_scale != nullptr)
    t *= static_cast<double>(*x_scale);
  return t;
}

namespace detail {
template <class Format, bool = warp::has_dequant_scale<typename Format::scale_type>>
struct wgmma_format : std::false_type {};
template <class Format>
struct wgmma_format<Format, true>
    : std::bool_constant<std::is_same<typename Format::element_type::format, e2m1_format>::value &&
                         (Format::block_size == 16 || Format::block_size == 32) &&
                         64 / Format::block_size *
                                 warp::dequant_scale<typename Format::scale_type>::multiplies ==
                             4> {};
} // namespace detail

/// Whether the warpgroup-MMA GEMMs take `Format` for either operand: E2M1 elements in blocks of
/// 16 or 32 whose scales have a bf16 multiplier (dequant_scale), four multiplier words per row
/// and 64-column k-tile — NVFP4, UE5M3-FP4 and MXFP4, not UE8M0 blocks of 16 or UE4M3 of 32.
template <class Format>
inline constexpr bool wgmma_format = detail::wgmma_format<Format>::value;

/// The shared operand X when it is quantized too: its view, and how its scales dequantize.
template <class XFormat>
struct quantized_x {
  static constexpr bool quantized = true;
  using view_type = const_quantized_view<XFormat>;
  using dequant = warp::dequant_scale<typename XFormat::scale_type>;
  static constexpr int block_size = XFormat::block_size;
  static constexpr int offset = dequant::offset;
  static_assert(wgmma_format<XFormat>, "X: E2M1 in blocks of 16 or 32 (wgmma_format)");
};
/// X in BF16, loaded by TMA as it is.
struct bf16_x {
  static constexpr bool quantized = false;
  struct view_type {};
  static constexpr int offset = 0;
};
template <class XOperand>
struct x_operand {
  using type = quantized_x<XOperand>;
};
template <>
struct x_operand<bfloat16> {
  using type = bf16_x;
};

/// C = alpha · X · Wᵀ + beta · C on wgmma: W, the register operand, in an E2M1 block format; X,
/// the shared operand, in BF16 (`XOperand` = bfloat16: the W4A16 GEMM) or in an E2M1 block format
/// too (the FP4 × FP4 GEMM), whose k-tiles the producer warps dequantize into the swizzled buffer.
template <class XOperand, class Format, class Out, class Shape>
struct gemm_wgmma_program {
  using scale_type = typename Format::scale_type;
  using dequant = warp::dequant_scale<scale_type>;
  using x_traits = typename x_operand<XOperand>::type;
  static constexpr bool x_quantized = x_traits::quantized;
  static_assert(wgmma_format<Format>, "W: E2M1 in blocks of 16 or 32 (wgmma_format)");

  static constexpr int consumers = Shape::consumers;
  static constexpr int warps = 4 * consumers + 4;
  static constexpr int producer = 4 * consumers; ///< the producer warpgroup's first warp
  static constexpr int tile_w = Shape::tile_w, tile_x = Shape::tile_x, stages = Shape::stages;
  static constexpr int tile_k = Shape::tile_k;
  static constexpr int x_row_bytes = 2 * tile_k; ///< 128: one 128-byte swizzle row
  static constexpr int w_row_bytes = tile_k / 2; ///< 32 bytes of packed E2M1
  static constexpr int x_bytes = tile_x * x_row_bytes, w_bytes = tile_w * w_row_bytes;
  static constexpr int blocks = tile_k / Format::block_size; ///< per row and k-tile
  static constexpr int words = blocks * dequant::multiplies; ///< multiplier words per row
  static_assert(words == 4, "one 16-byte load of multipliers per row and k-tile");

  /// X's packed k-tile, where X is quantized: tile_x rows of 32 bytes.
  static constexpr int xq_bytes = x_quantized ? tile_x * w_row_bytes : 16;

  struct shared_storage {
    alignas(1024) unsigned char x[stages][x_bytes]; // each a whole number of 1024-byte atoms
    alignas(128) unsigned char w[stages][w_bytes];
    alignas(128) unsigned char xq[stages][xq_bytes];
    alignas(16) std::uint32_t multipliers[stages][tile_w][words];
    warp::mbarrier full[stages];
    warp::mbarrier empty[stages];
    warp::mbarrier loaded[stages]; ///< quantized X: the TMA bytes have landed
  };

  warp::tensor_map x_map; ///< X: M × K bf16 (box tile_x × 64, 128-byte swizzle), or packed
  warp::tensor_map w_map; ///< W: N × row_bytes bytes, box tile_w × 32
  typename x_traits::view_type x;
  const_quantized_view<Format> w;
  matrix_view<Out> c;
  float alpha = 1.0f, beta = 0.0f;
  std::uint32_t tiles_x = 1; ///< CTAs along M
  std::uint32_t tiles_w = 1; ///< CTAs along N
  std::uint32_t k_tiles = 0;
  /// Split-K: `splits` CTAs share each tile of C, split s taking k-tiles [s · split_tiles,
  /// (s + 1) · split_tiles); with more than one, each writes its FP32 accumulator (unscaled) to
  /// `partials` + s · M · N (row-major M × N), and wgmma_split_reduce_program finishes C.
  std::uint32_t splits = 1;
  std::uint32_t split_tiles = 0;
  float* partials = nullptr;

  BLOCKSCALE_HD_TEMPLATE
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE void run(Warp& warp, cta_coord cta, shared_storage& shared) const {
#if defined(__CUDA_ARCH__) && !BLOCKSCALE_CUDA_HAS_WGMMA
    // A device pass without the warpgroup MMA: callers probe for it (device_has_wgmma) and never
    // launch this there, so the body is left out — ptxas would otherwise allocate (and spill)
    // registers for code whose every MMA is a trap.
    (void)warp, (void)cta, (void)shared;
    __trap();
#else
    if (warp.index() == producer)
      for (int s = 0; s < stages; ++s) {
        warp.mbarrier_init(shared.full[s], x_quantized ? 3 : 4);
        warp.mbarrier_init(shared.empty[s], 4 * consumers);
        warp.mbarrier_init(shared.loaded[s], 1);
      }
    warp.sync_cta();
    // Each role works its units out after setmaxnreg (a value live across it spills).
    if (warp.index() >= producer) {
      warp.template setmaxnreg_dec<40>();
      produce(warp, cta, shared);
    } else {
      warp.template setmaxnreg_inc<consumers == 1 ? 240 : 232>();
      consume(warp, cta, shared);
    }
#endif
  }

  /// Units of work: every tile of C times every split of K.
  BLOCKSCALE_HOST_DEVICE std::uint32_t units() const noexcept {
    return tiles_x * tiles_w * splits;
  }

  /// What the accumulator is multiplied by: the tensor scales (read where the kernel runs) and
  /// 2^offset of both operands.
  static constexpr int product_offset = dequant::offset + x_traits::offset;
  BLOCKSCALE_HOST_DEVICE const float* x_decode_scale() const noexcept {
    if constexpr (x_quantized)
      return x.decode_scale_data();
    else
      return nullptr;
  }
  BLOCKSCALE_HOST_DEVICE double product_scale() const {
    return wgmma_product_scale(w.decode_scale_data(), x_decode_scale(), product_offset);
  }

private:
  /// Weight tiles a raster group spans: consecutive units walk X's tiles across this many tiles
  /// of W, so that the CTAs running at once share both operands' tiles in L2.
  static constexpr std::uint32_t raster_group = 8;

  /// A unit of work: the tile of C at (x0, n0) over K's k-tiles first … first + count - 1 of
  /// split `split`.
  struct work_unit {
    int x0, n0;
    std::uint32_t split, first, count;
  };
  BLOCKSCALE_HOST_DEVICE work_unit unit_of(std::uint32_t u) const noexcept {
    const std::uint32_t tiles = tiles_x * tiles_w, t = u % tiles;
    const std::uint32_t span = raster_group * tiles_x, first_w = t / span * raster_group;
    const std::uint32_t width = tiles_w - first_w < raster_group ? tiles_w - first_w : raster_group;
    const std::uint32_t in = t % span;
    work_unit unit;
    unit.x0 = static_cast<int>(in / width) * tile_x;
    unit.n0 = static_cast<int>(first_w + in % width) * tile_w;
    unit.split = u / tiles;
    unit.first = 0;
    unit.count = k_tiles;
    if (splits > 1) {
      unit.first = unit.split * split_tiles;
      unit.count = unit.first >= k_tiles ? 0u : k_tiles - unit.first;
      unit.count = unit.count < split_tiles ? unit.count : split_tiles;
    }
    return unit;
  }

  BLOCKSCALE_HOST_DEVICE static constexpr std::uint32_t parity(std::uint32_t tile) noexcept {
    return (tile / stages) & 1u;
  }

  BLOCKSCALE_HD_TEMPLATE
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE void produce(Warp& warp, cta_coord cta, shared_storage& shared) const {
    const int role = warp.index() - producer; // 0: TMA; 1 … 3: multipliers
    std::uint32_t it = 0;                     // k-tiles this CTA has put in the ring
    for (std::uint32_t u = cta.index; u < units(); u += cta.count)
      produce_unit(warp, role, unit_of(u), it, shared);
  }

  /// One unit's k-tiles into the ring, `it` counting the CTA's k-tiles (the ring's position).
  BLOCKSCALE_HD_TEMPLATE
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE void produce_unit(Warp& warp, int role, work_unit unit, std::uint32_t& it,
                                           shared_storage& shared) const {
    const int x0 = unit.x0, n0 = unit.n0;
    for (std::uint32_t i = 0; i < unit.count; ++i, ++it) {
      const int s = static_cast<int>(it % stages);
      const std::uint32_t g = unit.first + i; // the k-tile of K
      warp.mbarrier_wait(shared.empty[s], parity(it) ^ 1u);
      if (role == 0) {
        // W4A16: the TMA completes `full` itself; FP4 × FP4: `loaded`, which the other three
        // warps wait for before they dequantize X.
        warp::mbarrier& landed = x_quantized ? shared.loaded[s] : shared.full[s];
        warp.mbarrier_arrive_expect_tx(landed, (x_quantized ? xq_bytes : x_bytes) + w_bytes);
        if constexpr (x_quantized)
          warp.tma_load_2d(shared.xq[s], x_map, static_cast<int>(g) * w_row_bytes, x0, landed);
        else
          warp.tma_load_2d(shared.x[s], x_map, static_cast<int>(g) * tile_k, x0, landed);
        warp.tma_load_2d(shared.w[s], w_map, static_cast<int>(g) * w_row_bytes, n0, landed);
      } else {
        const std::uint32_t first_block = g * blocks;
        warp.each([&](int lane) {
          for (int r = 32 * (role - 1) + lane; r < tile_w; r += 96)
            multipliers_of(static_cast<std::uint32_t>(n0 + r), first_block,
                           shared.multipliers[s][r]);
        });
        if constexpr (x_quantized) {
          warp.mbarrier_wait(shared.loaded[s], parity(it));
          warp.each([&](int lane) {
            for (int item = 32 * (role - 1) + lane; item < 4 * tile_x; item += 96)
              dequantize_x<Warp>(shared, s, item / 4, item % 4, static_cast<std::size_t>(x0), g);
          });
          warp.fence_proxy_async(); // the wgmma reads these stores through the async proxy
        }
        warp.mbarrier_arrive(shared.full[s]);
      }
    }
  }

  /// Quantized X: k16 chunk `chunk` (16 elements: 8 packed bytes, 32 bytes of bf16, within one
  /// block) of row `row` of k-tile `i`, from the packed buffer into the swizzled one, each element
  /// x · S · 2^-offset exactly. One scale per chunk; 16 elements per item keep the index
  /// arithmetic and the scale's decoding a small share of the producer's work.
  BLOCKSCALE_HD_TEMPLATE
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE void dequantize_x(shared_storage& shared, int s, int row, int chunk,
                                           std::size_t x0, std::uint32_t i) const {
    if constexpr (x_quantized) {
      using xd = typename x_traits::dequant;
      static_assert(x_traits::block_size % 16 == 0, "X: blocks of 16 or 32 along K");
      const std::uint32_t r = static_cast<std::uint32_t>(x0) + static_cast<std::uint32_t>(row);
      constexpr std::uint32_t x_blocks = tile_k / x_traits::block_size; // per k-tile
      const warp::bf16_multiplier m = multiplier_32(
          x, r, i * x_blocks + 16 * static_cast<std::uint32_t>(chunk) / x_traits::block_size);
      const auto packed = warp::detail::load_shared<warp::detail::word_pair>(
          shared.xq[s] + row * w_row_bytes + 8 * chunk);
      std::uint32_t pairs[8];
      BLOCKSCALE_UNROLL
      for (int j = 0; j < 8; ++j) {
        pairs[j] = Warp::mul_bf16x2(
            warp::e2m1_byte_pair(warp::byte_of(j < 4 ? packed.lo : packed.hi, j % 4)), m.first);
        if constexpr (xd::multiplies == 2)
          pairs[j] = Warp::mul_bf16x2(pairs[j], m.second);
      }
      BLOCKSCALE_UNROLL
      for (int half = 0; half < 2; ++half) {
        const std::uint32_t at = warp::swizzle_address(
            warp::smem_swizzle::bytes128,
            static_cast<std::uint32_t>(row * x_row_bytes + 32 * chunk + 16 * half));
        warp::detail::store_shared16(shared.x[s] + at, pairs + 4 * half);
      }
    } else {
      (void)shared, (void)s, (void)row, (void)chunk, (void)x0, (void)i;
    }
  }

  /// The multiplier words of row `row`'s blocks first_block … + blocks; zeros past W.
  BLOCKSCALE_HOST_DEVICE void multipliers_of(std::uint32_t row, std::uint32_t first_block,
                                             std::uint32_t* to) const {
    BLOCKSCALE_UNROLL
    for (int b = 0; b < blocks; ++b) {
      const warp::bf16_multiplier m =
          multiplier_32(w, row, first_block + static_cast<std::uint32_t>(b));
      to[dequant::multiplies * b] = m.first;
      if constexpr (dequant::multiplies == 2)
        to[2 * b + 1] = m.second;
    }
  }

  /// Lane `lane`'s A fragments of the k-tile in buffer `s`, one per k16 chunk (file comment).
  BLOCKSCALE_HD_TEMPLATE
  template <class Warp, class Fragments>
  BLOCKSCALE_HOST_DEVICE static void dequantize(const Warp& warp, const shared_storage& shared,
                                                int s, Fragments& f) {
    const int row0 = 16 * (warp.index() % 4) + 64 * (warp.index() / 4);
    warp.each([&](int lane) {
      const int t = lane % 4;
      BLOCKSCALE_UNROLL
      for (int half = 0; half < 2; ++half) { // rows g and g + 8
        const int row = row0 + lane / 4 + 8 * half;
        const auto lo =
            warp::detail::load_shared<warp::detail::word_quad>(shared.w[s] + row * w_row_bytes);
        const auto hi = warp::detail::load_shared<warp::detail::word_quad>(shared.w[s] +
                                                                           row * w_row_bytes + 16);
        const auto m = warp::detail::load_shared<warp::detail::word_quad>(
            reinterpret_cast<const std::uint8_t*>(shared.multipliers[s][row]));
        BLOCKSCALE_UNROLL
        for (int chunk = 0; chunk < 4; ++chunk) {
          BLOCKSCALE_UNROLL
          for (int q = 0; q < 2; ++q) { // k = 2t (+1) and 2t + 8 (+1) of the chunk
            const int word = 2 * chunk + q;
            const std::uint32_t packed = word < 4 ? lo.w[word] : hi.w[word - 4];
            const int block = (16 * chunk + 8 * q) / Format::block_size;
            std::uint32_t pair = Warp::mul_bf16x2(warp::e2m1_byte_pair(warp::byte_of(packed, t)),
                                                  m.w[dequant::multiplies * block]);
            if constexpr (dequant::multiplies == 2)
              pair = Warp::mul_bf16x2(pair, m.w[2 * block + 1]);
            f[chunk][lane].r[2 * q + half] = pair;
          }
        }
      }
    });
  }

  BLOCKSCALE_HD_TEMPLATE
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE static warp::smem_descriptor x_descriptor(Warp& warp,
                                                                   const unsigned char* stage) {
    return warp::smem_descriptor::make(warp.shared_address(stage), 16, 8 * x_row_bytes,
                                       warp::smem_swizzle::bytes128);
  }

  /// The ring's k-tile `i` (in `cur`, dequantized) times X; dequantizes k-tile i + 1 into `next`
  /// meanwhile, where it belongs to the same unit (i + 1 < end).
  BLOCKSCALE_HD_TEMPLATE
  template <class Warp, class Accumulator, class Fragments>
  BLOCKSCALE_HOST_DEVICE void step(Warp& warp, std::uint32_t i, std::uint32_t end, Accumulator& acc,
                                   const Fragments& cur, Fragments& next,
                                   shared_storage& shared) const {
    const int s = static_cast<int>(i % stages);
    const warp::smem_descriptor b = x_descriptor(warp, shared.x[s]);
    warp.wgmma_fence();
    BLOCKSCALE_UNROLL
    for (int chunk = 0; chunk < 4; ++chunk)
      warp.wgmma(warp::wgmma_bf16_rs<tile_x>{}, acc, cur[chunk],
                 b.advanced(static_cast<std::uint32_t>(2 * 16 * chunk)), true);
    warp.wgmma_commit();
    if (i + 1 < end) {
      const int n = static_cast<int>((i + 1) % stages);
      warp.mbarrier_wait(shared.full[n], parity(i + 1));
      dequantize(warp, shared, n, next);
    }
    warp.template wgmma_wait<0>();
    warp.mbarrier_arrive(shared.empty[s]);
  }

  BLOCKSCALE_HD_TEMPLATE
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE void consume(Warp& warp, cta_coord cta, shared_storage& shared) const {
    std::uint32_t it = 0; // k-tiles this CTA has taken from the ring
    for (std::uint32_t u = cta.index; u < units(); u += cta.count)
      consume_unit(warp, u, it, shared);
  }

  /// One unit: its k-tiles from the ring (`it` the ring's position), then its epilogue.
  BLOCKSCALE_HD_TEMPLATE
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE void consume_unit(Warp& warp, std::uint32_t u, std::uint32_t& it,
                                           shared_storage& shared) const {
    using traits = warp::mma_traits<warp::sm90_wgmma_m64nNk16_f32_bf16_rs<tile_x>>;
    lanes<Warp, warp::wgmma_accumulator<tile_x>> acc;
    lanes<Warp, warp::a_fragment> f0[4], f1[4];
    warp.each([&](int lane) {
      for (float& v : acc[lane].r)
        v = 0.0f;
    });
    const std::uint32_t count = unit_of(u).count, end = it + count;
    if (count > 0) {
      warp.mbarrier_wait(shared.full[it % stages], parity(it));
      dequantize(warp, shared, static_cast<int>(it % stages), f0);
    }
    for (; it < end; it += 2) {
      step(warp, it, end, acc, f0, f1, shared);
      if (it + 1 < end)
        step(warp, it + 1, end, acc, f1, f0, shared);
    }
    it = end;
    // The tile and split again, here: values kept across the loop would take registers.
    const work_unit unit = unit_of(u);
    const int x0 = unit.x0, n0 = unit.n0;
    const std::size_t split = unit.split;
    const double t = product_scale();
    const int thread = 32 * (warp.index() % 4); // the warp's first thread in its warpgroup
    const int w0 = n0 + 64 * (warp.index() / 4);
    warp.each([&](int lane) {
      BLOCKSCALE_UNROLL
      for (int r = 0; r < tile_x / 2; ++r) {
        const warp::coord nm = traits::c_coord(thread + lane, r);
        const std::size_t row = static_cast<std::size_t>(x0 + nm.col); // of C: M
        const std::size_t col = static_cast<std::size_t>(w0 + nm.row); // of C: N
        if (row >= c.rows() || col >= c.cols())
          continue;
        if (splits > 1)
          partials[(static_cast<std::size_t>(split) * c.rows() + row) * c.cols() + col] =
              acc[lane].r[r];
        else
          c(row, col) =
              epilogue_value(t * static_cast<double>(acc[lane].r[r]), alpha, beta, c(row, col));
      }
    });
  }
};

/// Split-K's second program: C = epilogue(t · Σ_s partials[s]) per element, the splits' FP32
/// partial sums added in double in the order of s (one rule, so the device and its emulation
/// agree bit for bit), then alpha, beta and the rounding of every other path
/// (kernels/epilogue.hpp). Grid-stride over M · N, 256 threads a CTA.
template <class Out>
struct wgmma_split_reduce_program {
  static constexpr int warps = 8;
  static constexpr int threads = warps * warp_size;
  static constexpr int phases = 1;
  struct shared_storage {
    int unused;
  };

  const float* partials = nullptr;
  std::uint32_t splits = 1;
  /// The product scale's parts (gemm_wgmma_program::product_scale), read on the device.
  const float* w_scale = nullptr;
  const float* x_scale = nullptr;
  int offset = 0;
  matrix_view<Out> c;
  float alpha = 1.0f, beta = 0.0f;

  BLOCKSCALE_HD_TEMPLATE
  template <int Phase, class Warp>
  BLOCKSCALE_HOST_DEVICE void run(Warp& warp, cta_coord cta, shared_storage&) const {
    const std::size_t n = c.cols(), total = c.rows() * n, plane = total;
    const std::size_t stride = static_cast<std::size_t>(cta.count) * threads;
    const double t = total == 0 ? 0.0 : wgmma_product_scale(w_scale, x_scale, offset);
    const std::size_t first =
        (static_cast<std::size_t>(cta.index) * warps + static_cast<std::size_t>(warp.index())) *
        warp_size;
    warp.each([&](int lane) {
      for (std::size_t e = first + static_cast<std::size_t>(lane); e < total; e += stride) {
        double sum = 0.0;
        for (std::uint32_t s = 0; s < splits; ++s)
          sum += static_cast<double>(partials[s * plane + e]);
        const std::size_t row = e / n, col = e % n;
        c(row, col) = epilogue_value(t * sum, alpha, beta, c(row, col));
      }
    });
  }
};

/// The W4A16 GEMM's program: X in BF16.
template <class Format, class Out, class Shape>
using gemm_w4a16_program = gemm_wgmma_program<bfloat16, Format, Out, Shape>;

} // namespace kernels
} // namespace cuda
} // namespace v0
} // namespace blockscale
