/// \file cuda/warp/tile.hpp
/// Fragment loaders and the warp tile: what a kernel calls, per k-step, to multiply a warp's
/// share of two block-scaled operands staged in shared memory.
///
/// Shared memory holds each operand as rows of packed E2M1 (K-major, element 2i in the low nibble
/// of byte i, as in global memory) and its scale codes row-major, one byte per block
/// (`shared_operand`). The caller chooses the strides; `cuda::kernels::gemm_operand_layout`
/// (cuda/kernels/gemm.hpp) gives ones free of bank conflicts for these loaders, which the tests
/// check from `load_offsets`.
///
/// Paths (tags), each a specialisation of `path_tile` naming the tile that runs it (`bf16_tile`
/// over a rows loader, or `block_scaled_tile`); `warp_tile<Path, ...>` derives from that tile:
/// - `bf16_path`: the loaders dequantize in registers (cuda/warp/dequant.hpp) and feed
///   `mma_bf16_m16n8k16`; any scale formats, A's and B's may differ (NVFP4 × MXFP4,
///   UE5M3 × UE4M3 ...). k-step 64. Inside a dot product any bijection of k applied to A and B
///   alike leaves the result unchanged, so thread t of a group takes k in [16t, 16t + 16) of each
///   k64 chunk: one 8-byte load per row (exactly one NVFP4 block, half an MXFP4 block), one scale
///   per row per k64, and no shuffle of the nibbles. Its eight bf16 pairs (k, k + 4), k = 16t + j
///   and 16t + 8 + j, j < 4, feed the four k16 MMAs: MMA s takes pairs 2s and 2s + 1.
/// - `block_scaled_path`: `mma_e2m1_m16n8k64` on sm_120a, NVFP4 × NVFP4 or MXFP4 × MXFP4. k-step
///   128 (two MMAs, whose selectors pick the scale lanes or bytes of the step). Each register is
///   eight consecutive k of one row: four-byte loads, no shuffle; each lane loads one 32-bit scale
///   word per 16 rows: four consecutive scale codes of a row (four UE4M3 for a k64 step, four
///   UE8M0 for a k128 step), which is one word of the 128×4 tensor-core scale layout.
///
/// - `bf16_staged_path`: the same MMAs and k order as `bf16_path`, but the warp loads the eight
///   bf16 pairs of a row and chunk ready-made, two 16-byte loads, from a copy of the operand that
///   the whole CTA dequantized once (`staged_bf16`): for large M, where warps sharing a tile
///   would otherwise each dequantize it again.
///
/// The accumulators hold the dot products times 2^-accumulator_exponent (the bf16 path's scale
/// fold); multiply by 2^accumulator_exponent and the tensor scales in the epilogue.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../../block/block_format.hpp"
#include "../../config.hpp"
#include "../warp.hpp"
#include "dequant.hpp"
#include "mma.hpp"

namespace blockscale {
inline namespace v0 {
namespace cuda {
namespace warp {

/// One operand's tile in shared memory (see the file comment). Row r's packed elements start at
/// `elements + r · stride`, its scale codes at `scales + r · scale_stride`.
struct shared_operand {
  const std::uint8_t* elements = nullptr;
  int stride = 0;
  const std::uint8_t* scales = nullptr;
  int scale_stride = 0;

  /// The same tile from row `r` on.
  BLOCKSCALE_HOST_DEVICE constexpr shared_operand from_row(int r) const noexcept {
    return {elements + r * stride, stride, scales + r * scale_stride, scale_stride};
  }
};

struct bf16_path {};
struct block_scaled_path {};
/// The bf16 path fed from operands the CTA dequantized once into shared memory (`staged_bf16`).
struct bf16_staged_path {};

namespace detail {
template <class T>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE T load_shared(const std::uint8_t* p) noexcept {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const T*>(p);
#else
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
#endif
}
struct alignas(8) word_pair {
  std::uint32_t lo, hi;
};
struct alignas(16) word_quad {
  std::uint32_t w[4];
};
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE void store_shared16(std::uint8_t* p,
                                                                  const std::uint32_t* w) noexcept {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
#else
  std::memcpy(p, w, 16);
#endif
}
} // namespace detail

/// The dequantized copy of an operand's k-tile for `bf16_staged_path`: row r, chunk c (k in
/// [16c, 16c + 16)) holds the chunk's eight bf16 pairs in the order of `bf16_path`, 32 bytes at
/// r · row_stride + 32c. The row stride is 16 bytes more than a row's chunks, which makes both the
/// CTA's stores and the warp tile's 16-byte loads free of bank conflicts.
template <int BlockK>
struct staged_bf16 {
  static constexpr int chunks = BlockK / 16;
  static constexpr int row_stride = 32 * chunks + 16;

  /// Dequantizes chunk `c` of row `row` of the packed tile `s` (elements and scales) into `to`
  /// (the staged copy). The two halves are stored first-half-first for chunks 0..3 of a group of
  /// eight and second-half-first for 4..7, so eight lanes storing one row hit all 32 banks.
  template <class Warp, class Scale, int Block>
  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE static void
  dequantize_chunk(const shared_operand& s, int row, int c, std::uint8_t* to) {
    const auto words = detail::load_shared<detail::word_pair>(s.elements + row * s.stride + 8 * c);
    const bf16_multiplier m =
        dequant_scale<Scale>::multiplier(s.scales[row * s.scale_stride + 16 * c / Block]);
    std::uint32_t pairs[8];
    dequantize8<Warp, Scale>(words.lo, m, pairs);
    dequantize8<Warp, Scale>(words.hi, m, pairs + 4);
    std::uint8_t* at = to + row * row_stride + 32 * c;
    if ((c & 4) == 0) { // constant indices keep `pairs` in registers
      detail::store_shared16(at, pairs);
      detail::store_shared16(at + 16, pairs + 4);
    } else {
      detail::store_shared16(at + 16, pairs + 4);
      detail::store_shared16(at, pairs);
    }
  }
};

/// Byte offsets of what lane `lane` loads, for the bank-conflict check and the loaders alike.
struct load_offsets {
  /// bf16 path: the 8 bytes of row `row` (< rows of the operand) for the k64 chunk at `k0`.
  BLOCKSCALE_HOST_DEVICE static constexpr int bf16_elements(int lane, int row, int k0,
                                                            int stride) noexcept {
    return (void)lane, row * stride + (k0 + 16 * (lane % 4)) / 2;
  }
  /// bf16 path: the scale code of that row and chunk, for blocks of `block` elements.
  BLOCKSCALE_HOST_DEVICE static constexpr int bf16_scale(int lane, int row, int k0, int block,
                                                         int scale_stride) noexcept {
    return (void)lane, row * scale_stride + (k0 + 16 * (lane % 4)) / block;
  }
  /// staged path: the 16 bytes of half `q` of row `row`'s chunk for the k64 window at `k0`.
  BLOCKSCALE_HOST_DEVICE static constexpr int staged_pairs(int lane, int row, int k0, int q,
                                                           int row_stride) noexcept {
    return row * row_stride + 32 * ((k0 + 16 * (lane % 4)) / 16) + 16 * q;
  }
  /// block-scaled path: the 4 bytes of register `reg` (A: 0..3, B: 0..1 with `b` true) for the
  /// k64 step at `k0`.
  BLOCKSCALE_HOST_DEVICE static constexpr int native_elements(int lane, int reg, bool b, int k0,
                                                              int stride) noexcept {
    return (lane / 4 + (b ? 0 : 8 * (reg & 1))) * stride +
           (k0 + 8 * (lane % 4) + 32 * (b ? reg : reg >> 1)) / 2;
  }
};

/// What every warp tile has: WarpM × WarpN of m16n8 atoms' accumulators, where each register sits,
/// and how to clear them.
template <int WarpM, int WarpN>
struct tile_shape {
  static_assert(WarpM % 16 == 0 && WarpN % 8 == 0, "warp tiles are made of m16n8 atoms");
  static constexpr int warp_m = WarpM, warp_n = WarpN;
  static constexpr int tiles_m = WarpM / 16, tiles_n = WarpN / 8;

  template <class Warp>
  struct accumulators {
    lanes<Warp, accumulator_fragment> tile[tiles_m][tiles_n];
  };

  /// (m, n) in the warp tile of register `reg` of atom (i, j) of lane `lane`.
  BLOCKSCALE_HOST_DEVICE static constexpr coord coord_of(int lane, int i, int j, int reg) noexcept {
    return {16 * i + detail::accumulator_coord(lane, reg).row,
            8 * j + detail::accumulator_coord(lane, reg).col};
  }

  template <class Warp>
  BLOCKSCALE_HOST_DEVICE static void clear(const Warp& warp, accumulators<Warp>& acc) {
    warp.each([&](int lane) {
      BLOCKSCALE_UNROLL
      for (int i = 0; i < tiles_m; ++i) {
        BLOCKSCALE_UNROLL
        for (int j = 0; j < tiles_n; ++j) {
          BLOCKSCALE_UNROLL
          for (float& x : acc.tile[i][j][lane].r)
            x = 0.0f;
        }
      }
    });
  }
};

/// bf16_path's rows: the eight bf16 pairs of lane `lane` for `row` of `s` at the k64 window
/// `k0`, dequantized in registers from the packed tile.
struct dequantized_rows {
  template <class Warp, class Scale, int Block>
  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE static void
  pairs(const shared_operand& s, int lane, int row, int k0, std::uint32_t (&pairs)[8]) {
    const auto words = detail::load_shared<detail::word_pair>(
        s.elements + load_offsets::bf16_elements(lane, row, k0, s.stride));
    const bf16_multiplier m = dequant_scale<Scale>::multiplier(
        s.scales[load_offsets::bf16_scale(lane, row, k0, Block, s.scale_stride)]);
    dequantize8<Warp, Scale>(words.lo, m, pairs);
    dequantize8<Warp, Scale>(words.hi, m, pairs + 4);
  }
};

/// bf16_staged_path's rows: the same pairs loaded ready-made from the CTA's `staged_bf16` copy.
struct staged_rows {
  template <class Warp, class Scale, int Block>
  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE static void
  pairs(const shared_operand& s, int lane, int row, int k0, std::uint32_t (&pairs)[8]) {
    BLOCKSCALE_UNROLL
    for (int q = 0; q < 2; ++q) {
      const auto w = detail::load_shared<detail::word_quad>(
          s.elements + load_offsets::staged_pairs(lane, row, k0, q, s.stride));
      BLOCKSCALE_UNROLL
      for (int i = 0; i < 4; ++i)
        pairs[4 * q + i] = w.w[i];
    }
  }
};

/// The bf16 paths' step on `mma_bf16_m16n8k16`, with the rows' pairs from `Rows`.
template <class Rows, int WarpM, int WarpN, class FormatA, class FormatB>
struct bf16_tile : tile_shape<WarpM, WarpN> {
  using shape = tile_shape<WarpM, WarpN>;
  using shape::tiles_m;
  using shape::tiles_n;
  template <class Warp>
  using accumulators = typename shape::template accumulators<Warp>;
  using scale_a = typename FormatA::scale_type;
  using scale_b = typename FormatB::scale_type;

  /// k consumed by one `step`.
  static constexpr int k_step = 64;
  /// The accumulators are the exact products times 2^-accumulator_exponent.
  static constexpr int accumulator_exponent =
      dequant_scale<scale_a>::offset + dequant_scale<scale_b>::offset;

  /// The eight bf16 pairs of lane `lane` for `row` of `s` at the k64 window `k0`.
  template <class Warp, class Scale, int Block>
  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE static void
  row_pairs(const shared_operand& s, int lane, int row, int k0, std::uint32_t (&pairs)[8]) {
    Rows::template pairs<Warp, Scale, Block>(s, lane, row, k0, pairs);
  }

  /// acc += A[WarpM rows of `a`][k0, k0 + 64) · B[WarpN rows of `b`][same k]ᵀ.
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE static void step(const Warp& warp, accumulators<Warp>& acc,
                                          shared_operand a, shared_operand b, int k0) {
    step_with_a(
        warp, acc,
        [&](int lane, int row, std::uint32_t(&p)[8]) {
          row_pairs<Warp, scale_a, FormatA::block_size>(a, lane, row, k0, p);
        },
        b, k0);
  }

  /// The step with A's eight pairs per lane and row supplied by `a_rows(lane, row, pairs)` (in
  /// `row_pairs`' order) and B's from `b`: how the W4A16 tile reuses this one.
  template <class Warp, class ARows>
  BLOCKSCALE_HOST_DEVICE static void step_with_a(const Warp& warp, accumulators<Warp>& acc,
                                                 const ARows& a_rows, const shared_operand& b,
                                                 int k0) {
    // A for the whole warp tile (tiles_m × 4 k16 steps), then B one n8 column at a time.
    lanes<Warp, a_fragment> fa[tiles_m][4];
    warp.each([&](int lane) {
      BLOCKSCALE_UNROLL
      for (int i = 0; i < tiles_m; ++i) {
        BLOCKSCALE_UNROLL
        for (int h = 0; h < 2; ++h) {
          std::uint32_t p[8];
          a_rows(lane, 16 * i + lane / 4 + 8 * h, p);
          BLOCKSCALE_UNROLL
          for (int s = 0; s < 4; ++s) {
            fa[i][s][lane].r[h] = p[2 * s];
            fa[i][s][lane].r[h + 2] = p[2 * s + 1];
          }
        }
      }
    });
    BLOCKSCALE_UNROLL
    for (int j = 0; j < tiles_n; ++j) {
      lanes<Warp, b_fragment> fb[4];
      warp.each([&](int lane) {
        std::uint32_t p[8];
        row_pairs<Warp, scale_b, FormatB::block_size>(b, lane, 8 * j + lane / 4, k0, p);
        BLOCKSCALE_UNROLL
        for (int s = 0; s < 4; ++s) {
          fb[s][lane].r[0] = p[2 * s];
          fb[s][lane].r[1] = p[2 * s + 1];
        }
      });
      BLOCKSCALE_UNROLL
      for (int s = 0; s < 4; ++s) {
        BLOCKSCALE_UNROLL
        for (int i = 0; i < tiles_m; ++i)
          warp.mma(mma_bf16_m16n8k16{}, acc.tile[i][j], fa[i][s], fb[s], acc.tile[i][j]);
      }
    }
  }
};

/// The block-scaled path's step on `mma_e2m1_m16n8k64`: two k64 MMAs per step, whose selectors
/// pick the scale lanes (NVFP4) or bytes (MXFP4) of the step.
template <int WarpM, int WarpN, class FormatA, class FormatB>
struct block_scaled_tile : tile_shape<WarpM, WarpN> {
  static_assert(std::is_same<FormatA, FormatB>::value &&
                    (std::is_same<FormatA, nvfp4>::value || std::is_same<FormatA, mxfp4>::value),
                "the block-scaled MMA takes NVFP4 × NVFP4 or MXFP4 × MXFP4; use bf16_path for "
                "UE5M3 and mixed formats");
  using shape = tile_shape<WarpM, WarpN>;
  using shape::tiles_m;
  using shape::tiles_n;
  template <class Warp>
  using accumulators = typename shape::template accumulators<Warp>;
  using scale_a = typename FormatA::scale_type;
  using scale_b = typename FormatB::scale_type;

  static constexpr int k_step = 128;
  static constexpr int accumulator_exponent = 0;

  /// acc += A[WarpM rows of `a`][k0, k0 + 128) · B[WarpN rows of `b`][same k]ᵀ.
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE static void step(const Warp& warp, accumulators<Warp>& acc,
                                          shared_operand a, shared_operand b, int k0) {
    constexpr bool nv = std::is_same<FormatA, nvfp4>::value;
    lanes<Warp, std::uint32_t> sfa[tiles_m], sfb[tiles_n];
    warp.each([&](int lane) {
      const int g = lane / 4, t = lane % 4;
      // NVFP4: lane (g, t) holds row g + 8·(t % 2) of step t / 2. MXFP4: row g + 8·(t % 2).
      const int kb = nv ? (k0 + 64 * (t / 2)) / 16 : k0 / 32;
      BLOCKSCALE_UNROLL
      for (int i = 0; i < tiles_m; ++i)
        sfa[i][lane] = detail::load_shared<std::uint32_t>(
            a.scales + (16 * i + g + 8 * (t % 2)) * a.scale_stride + kb);
      // NVFP4: lane (g, t) holds column g of step t % 2 (ThreadB = step); MXFP4: column g.
      const int kbb = nv ? (k0 + 64 * (t % 2)) / 16 : k0 / 32;
      BLOCKSCALE_UNROLL
      for (int j = 0; j < tiles_n; ++j)
        sfb[j][lane] =
            detail::load_shared<std::uint32_t>(b.scales + (8 * j + g) * b.scale_stride + kbb);
    });
    run_step<0>(warp, acc, a, b, k0, sfa, sfb);
    run_step<1>(warp, acc, a, b, k0 + 64, sfa, sfb);
  }

private:
  // NVFP4: the k64 step s uses ThreadA = ThreadB = s (lanes with t / 2 == s hold its A scales);
  // MXFP4: one word covers both steps, ByteA = ByteB = 2s.
  template <int S>
  using atom = std::conditional_t<std::is_same<FormatA, nvfp4>::value,
                                  mma_e2m1_m16n8k64<ue4m3, scale_vector::x4, 0, S, 0, S>,
                                  mma_e2m1_m16n8k64<ue8m0, scale_vector::x2, 2 * S, 0, 2 * S, 0>>;

  template <int S, class Warp>
  BLOCKSCALE_HOST_DEVICE static void
  run_step(const Warp& warp, accumulators<Warp>& acc, const shared_operand& a,
           const shared_operand& b, int k0, const lanes<Warp, std::uint32_t> (&sfa)[tiles_m],
           const lanes<Warp, std::uint32_t> (&sfb)[tiles_n]) {
    lanes<Warp, a_fragment> fa[tiles_m];
    warp.each([&](int lane) {
      BLOCKSCALE_UNROLL
      for (int i = 0; i < tiles_m; ++i) {
        BLOCKSCALE_UNROLL
        for (int r = 0; r < 4; ++r)
          fa[i][lane].r[r] = detail::load_shared<std::uint32_t>(
              a.elements + 16 * i * a.stride +
              load_offsets::native_elements(lane, r, false, k0, a.stride));
      }
    });
    BLOCKSCALE_UNROLL
    for (int j = 0; j < tiles_n; ++j) {
      lanes<Warp, b_fragment> fb;
      warp.each([&](int lane) {
        BLOCKSCALE_UNROLL
        for (int r = 0; r < 2; ++r)
          fb[lane].r[r] = detail::load_shared<std::uint32_t>(
              b.elements + 8 * j * b.stride +
              load_offsets::native_elements(lane, r, true, k0, b.stride));
      });
      BLOCKSCALE_UNROLL
      for (int i = 0; i < tiles_m; ++i)
        warp.mma(atom<S>{}, acc.tile[i][j], fa[i], fb, acc.tile[i][j], sfa[i], sfb[j]);
    }
  }
};

namespace detail {
template <class Path>
struct always_false : std::false_type {};

} // namespace detail

/// Which tile runs a path: one specialisation per path tag. A new path (another MMA atom, another
/// way to feed it) is a tile type and a specialisation here, not a branch inside `warp_tile`.
template <class Path, int WarpM, int WarpN, class FormatA, class FormatB>
struct path_tile {
  static_assert(detail::always_false<Path>::value,
                "Path is bf16_path, bf16_staged_path or block_scaled_path");
};
template <int WarpM, int WarpN, class FormatA, class FormatB>
struct path_tile<bf16_path, WarpM, WarpN, FormatA, FormatB> {
  using type = bf16_tile<dequantized_rows, WarpM, WarpN, FormatA, FormatB>;
};
template <int WarpM, int WarpN, class FormatA, class FormatB>
struct path_tile<bf16_staged_path, WarpM, WarpN, FormatA, FormatB> {
  using type = bf16_tile<staged_rows, WarpM, WarpN, FormatA, FormatB>;
};
template <int WarpM, int WarpN, class FormatA, class FormatB>
struct path_tile<block_scaled_path, WarpM, WarpN, FormatA, FormatB> {
  using type = block_scaled_tile<WarpM, WarpN, FormatA, FormatB>;
};

/// The warp tile: a WarpM × WarpN block of C = A · Bᵀ, accumulated in registers over k-steps.
/// A downstream kernel keeps an `accumulators<Warp>` per warp, calls `step` for each k-step of
/// the staged tiles (A's rows and B's rows of this warp, `k_step` columns from `k0`), and reads
/// the result through `coord_of`. For `bf16_staged_path` the operands are `staged_bf16` copies
/// (elements = the copy, stride = its row stride; scales unused). What a step does is the path's
/// tile (`path_tile`): its `k_step`, `accumulator_exponent` and `step`.
template <class Path, int WarpM, int WarpN, class FormatA, class FormatB>
struct warp_tile : path_tile<Path, WarpM, WarpN, FormatA, FormatB>::type {
  static_assert(std::is_same<typename FormatA::element_type, e2m1>::value &&
                    std::is_same<typename FormatB::element_type, e2m1>::value,
                "the warp GEMM takes E2M1 operands");
  /// Whether the tile takes the block-scaled MMA path (scale codes read by the tensor core).
  static constexpr bool block_scaled = std::is_same<Path, block_scaled_path>::value;
  /// The former name of `block_scaled`.
  [[deprecated("renamed block_scaled")]] static constexpr bool native = block_scaled;
  static constexpr bool staged = std::is_same<Path, bf16_staged_path>::value;
};

/// `__byte_perm(x, y, selector)`: byte i of the result is byte (selector >> 4i) & 7 of the eight
/// bytes of (y:x), x's first. The one PRMT the W4A16 tile needs per register.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE std::uint32_t
byte_perm(std::uint32_t x, std::uint32_t y, std::uint32_t selector) noexcept {
#if defined(__CUDA_ARCH__)
  return __byte_perm(x, y, selector);
#else
  const std::uint64_t bytes = (static_cast<std::uint64_t>(y) << 32) | x;
  std::uint32_t out = 0;
  for (int i = 0; i < 4; ++i)
    out |= static_cast<std::uint32_t>((bytes >> (8 * ((selector >> (4 * i)) & 7))) & 0xFF)
           << (8 * i);
  return out;
#endif
}

/// W4A16: A in BF16 (activations, row-major in shared memory, `a_stride` bytes per row), B packed
/// E2M1 with block scales (weights, as `warp_tile`'s operands), on `mma_bf16_m16n8k16`. The
/// weights keep their standard layout (no offline nibble shuffle): B is dequantized exactly as on
/// `bf16_path`, which pairs k with k + 4, and A follows that order instead. A thread reads A's 16
/// values k in [16t, 16t + 16) of a row with two 16-byte loads and forms each register (k, k + 4)
/// with one byte permute. Accumulators hold the products times 2^-accumulator_exponent.
template <int WarpM, int WarpN, class FormatB>
struct warp_tile_w4a16 {
  static_assert(WarpM % 16 == 0 && WarpN % 8 == 0, "warp tiles are made of m16n8 atoms");
  static_assert(std::is_same<typename FormatB::element_type, e2m1>::value, "the weights are E2M1");
  static constexpr int warp_m = WarpM, warp_n = WarpN;
  static constexpr int tiles_m = WarpM / 16, tiles_n = WarpN / 8;
  static constexpr int k_step = 64;
  using scale_b = typename FormatB::scale_type;
  static constexpr int accumulator_exponent = dequant_scale<scale_b>::offset;
  /// The bf16 warp tile whose step this one runs, with A's pairs read from BF16 memory.
  using weights_tile = warp_tile<bf16_path, WarpM, WarpN, FormatB, FormatB>;

  template <class Warp>
  using accumulators = typename weights_tile::template accumulators<Warp>;

  BLOCKSCALE_HOST_DEVICE static constexpr coord coord_of(int lane, int i, int j, int reg) noexcept {
    return weights_tile::coord_of(lane, i, j, reg);
  }
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE static void clear(const Warp& warp, accumulators<Warp>& acc) {
    weights_tile::clear(warp, acc);
  }

  /// The eight registers of lane `lane` for A's row `row` at the k64 window `k0`, in the order of
  /// `warp_tile::row_pairs`: pair p = (16t + e(p), 16t + e(p) + 4), e = p for p < 4, else p + 4.
  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE static void
  a_pairs(const std::uint8_t* a, int a_stride, int lane, int row, int k0, std::uint32_t (&p)[8]) {
    const std::uint8_t* at = a + row * a_stride + 2 * (k0 + 16 * (lane % 4));
    const auto lo = detail::load_shared<detail::word_quad>(at);      // k 16t + 0 .. 7
    const auto hi = detail::load_shared<detail::word_quad>(at + 16); // k 16t + 8 .. 15
    BLOCKSCALE_UNROLL
    for (int j = 0; j < 4; ++j) {
      // Element e sits in word e / 2, half e % 2; the pair takes the same half of two words.
      const std::uint32_t selector = (j & 1) != 0 ? 0x7632u : 0x5410u;
      p[j] = byte_perm(lo.w[j / 2], lo.w[j / 2 + 2], selector);
      p[4 + j] = byte_perm(hi.w[j / 2], hi.w[j / 2 + 2], selector);
    }
  }

  /// acc += A[WarpM rows of `a`][k0, k0 + 64) · B[WarpN rows of `b`][same k]ᵀ.
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE static void step(const Warp& warp, accumulators<Warp>& acc,
                                          const std::uint8_t* a, int a_stride,
                                          const shared_operand& b, int k0) {
    weights_tile::step_with_a(
        warp, acc,
        [&](int lane, int row, std::uint32_t(&p)[8]) { a_pairs(a, a_stride, lane, row, k0, p); }, b,
        k0);
  }
};

} // namespace warp
} // namespace cuda
} // namespace v0
} // namespace blockscale
