/// \file cuda/warp/mma.hpp
/// MMA atoms, split as CuTe splits them: an *op* is one tensor-core instruction's register types
/// and its guarded inline PTX (`fma`), nothing else; its *traits* (`mma_traits<Op>`) are the
/// `__host__ __device__ constexpr` facts about it: the tile shape, the fragment types, the maps
/// from (lane, register, element) to the coordinates they hold, and for block-scaled instructions
/// which lanes and bytes hold the scales. An *atom* (`mma_atom<Op>`) is the two together, what a
/// warp calls. The maps are the instruction's contract (PTX ISA, "Matrix fragments for
/// mma.m16n8k16" and "... m16n8k64 with block scaling"); the fragment loaders (cuda/warp/tile.hpp)
/// are written from them, and the tests prove each map a bijection onto its tile and run the atoms
/// through the host emulation (emulation/ptx.hpp), which reads only the traits. A new instruction
/// is an op and a specialisation of `mma_traits`; nothing else changes.
///
/// Lane names: g = lane / 4 (the "group"), t = lane % 4 (the thread in the group).
///
/// Ops (and their atoms):
/// - `sm80_mma_m16n8k16_f32_bf16` (`mma_bf16_m16n8k16`): D[16×8] += A[16×16] · B[8×16]ᵀ in BF16
///   with FP32 accumulation, sm_80+ (HMMA). Fed by in-register E2M1 dequantization
///   (cuda/warp/dequant.hpp), it serves every scale format.
/// - `sm120_mma_m16n8k64_f32_e2m1<Scale, ScaleVector, ByteA, ThreadA, ByteB, ThreadB>`
///   (`mma_e2m1_m16n8k64<...>`): the block-scaled `kind::mxf4nvf4` MMA of sm_120a / sm_121a (and
///   their 'f' families; OMMA): packed E2M1 operands with a UE4M3 scale per 16 elements
///   (`scale_vector` 4, NVFP4) or a UE8M0 scale per 32 (2, MXFP4). The selectors say which lanes
///   and which bytes of the scale registers the instruction reads; they are immediates of the
///   instruction, hence template parameters, checked by static_assert.
///
/// A warp calls an atom through `warp.mma(atom, d, a, b, c[, sfa, sfb])` (cuda/warp.hpp): on the
/// device that is the op's `fma` in each thread, on the host the emulation of the instruction
/// over all 32 lanes.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../../config.hpp"
#include "../../numeric/minifloat.hpp"

/// 1 in a device pass that has the block-scaled `kind::mxf4nvf4` MMA (sm_120a, sm_121a and their
/// families), else 0. The generic compute_120 pass of `-arch=sm_120a` has no such instruction, so
/// the guard is on the family-specific macros, never on __CUDA_ARCH__ alone.
#if defined(__CUDA_ARCH__) &&                                                                      \
    ((defined(__CUDA_ARCH_FAMILY_SPECIFIC__) &&                                                    \
      (__CUDA_ARCH_FAMILY_SPECIFIC__ == 1200 || __CUDA_ARCH_FAMILY_SPECIFIC__ == 1210)) ||         \
     (defined(__CUDA_ARCH_SPECIFIC__) &&                                                           \
      (__CUDA_ARCH_SPECIFIC__ == 1200 || __CUDA_ARCH_SPECIFIC__ == 1210)))
#define BLOCKSCALE_CUDA_HAS_BLOCK_SCALED_MMA 1
#else
#define BLOCKSCALE_CUDA_HAS_BLOCK_SCALED_MMA 0
#endif

namespace blockscale {
inline namespace v0 {
namespace cuda {
namespace warp {

/// A position in a tile: (row, col) is (m, k) for A, (n, k) for B, (m, n) for C and D.
struct coord {
  int row = 0;
  int col = 0;
  friend constexpr bool operator==(coord a, coord b) noexcept {
    return a.row == b.row && a.col == b.col;
  }
};

/// Which instruction an atom is (the host emulation dispatches on it).
enum class mma_kind { bf16_m16n8k16, e2m1_m16n8k64, wgmma_bf16_ss, wgmma_bf16_rs };

/// The registers of every m16n8 atom of this file. A: four b32, B: two b32 (two bf16 each, low
/// half first, or eight E2M1 each, element i in bits [4i, 4i + 4)). The accumulator: four floats,
/// register r holding (g + 8·(r/2), 2t + r%2).
struct a_fragment {
  std::uint32_t r[4];
};
struct b_fragment {
  std::uint32_t r[2];
};
struct accumulator_fragment {
  float r[4];
};

namespace detail {
BLOCKSCALE_HOST_DEVICE constexpr coord accumulator_coord(int lane, int reg) noexcept {
  return {lane / 4 + 8 * (reg >> 1), 2 * (lane % 4) + (reg & 1)};
}

/// What the traits of every m16n8 op share: the fragments and the accumulator's map.
struct m16n8_traits {
  static constexpr int m = 16, n = 8;
  using a_fragment = warp::a_fragment;
  using b_fragment = warp::b_fragment;
  using c_fragment = accumulator_fragment;

  /// (m, n) of C and D.
  BLOCKSCALE_HOST_DEVICE static constexpr coord c_coord(int lane, int reg) noexcept {
    return accumulator_coord(lane, reg);
  }
};
} // namespace detail

/// The traits of an MMA op (specialised for each op below): kind, m, n, k, the fragment types,
/// a_coord, b_coord, c_coord, and for block-scaled ops the scale selectors and maps.
template <class Op>
struct mma_traits;

/// An MMA atom: an op (its `fma`) with its traits, what `warp.mma` takes.
template <class Op>
struct mma_atom : Op, mma_traits<Op> {
  using op = Op;
  using traits = mma_traits<Op>;
};

/// BF16 × BF16 → FP32, m16n8k16 (sm_80 and later): `mma.sync ... .f32.bf16.bf16.f32`.
struct sm80_mma_m16n8k16_f32_bf16 {
#if defined(__CUDACC__)
  /// d = a · bᵀ + c, in each thread of a converged warp.
  __device__ BLOCKSCALE_FORCEINLINE static void fma(accumulator_fragment& d, const a_fragment& a,
                                                    const b_fragment& b,
                                                    const accumulator_fragment& c) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
                 : "=f"(d.r[0]), "=f"(d.r[1]), "=f"(d.r[2]), "=f"(d.r[3])
                 : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]), "r"(b.r[1]),
                   "f"(c.r[0]), "f"(c.r[1]), "f"(c.r[2]), "f"(c.r[3]));
#elif defined(__CUDA_ARCH__)
    (void)d, (void)a, (void)b, (void)c;
    __trap(); // no BF16 MMA before sm_80
#endif
  }
#endif
};

template <>
struct mma_traits<sm80_mma_m16n8k16_f32_bf16> : detail::m16n8_traits {
  static constexpr mma_kind kind = mma_kind::bf16_m16n8k16;
  static constexpr int k = 16;

  /// (m, k) of register `reg`, half `half` of lane `lane`'s A fragment.
  BLOCKSCALE_HOST_DEVICE static constexpr coord a_coord(int lane, int reg, int half) noexcept {
    return {lane / 4 + 8 * (reg & 1), 2 * (lane % 4) + half + 8 * (reg >> 1)};
  }
  /// (n, k) of B.
  BLOCKSCALE_HOST_DEVICE static constexpr coord b_coord(int lane, int reg, int half) noexcept {
    return {lane / 4, 2 * (lane % 4) + half + 8 * reg};
  }
};

/// The BF16 m16n8k16 atom.
using mma_bf16_m16n8k16 = mma_atom<sm80_mma_m16n8k16_f32_bf16>;

/// The scale vector of a block-scaled MMA: scales per 64-element row of a k64 step.
enum class scale_vector : int { x2 = 2, x4 = 4 };

/// Packed E2M1 × packed E2M1 with block scales → FP32, m16n8k64, `kind::mxf4nvf4` (sm_120a).
/// `Scale` is `ue4m3` with `scale_vector::x4` (one scale per 16 k: NVFP4) or `ue8m0` with
/// `scale_vector::x2` (one per 32 k: MXFP4). Selectors: the scales of row m come from lane
/// 4·(m % 8) + m / 8 + 2·ThreadA, those of column n from lane 4·n + ThreadB; within the 32-bit
/// scale register, byte ByteX + j scales k in [j·64/V, (j+1)·64/V) (V the vector size).
template <class Scale, scale_vector Vector, int ByteA = 0, int ThreadA = 0, int ByteB = 0,
          int ThreadB = 0>
struct sm120_mma_m16n8k64_f32_e2m1 {
  static_assert((std::is_same<Scale, ue4m3>::value && Vector == scale_vector::x4) ||
                    (std::is_same<Scale, ue8m0>::value && Vector == scale_vector::x2),
                "kind::mxf4nvf4 takes UE4M3 with scale_vector::x4 or UE8M0 with scale_vector::x2 "
                "(UE5M3 has no MMA: use the dequantizing atom)");
  static_assert(Vector == scale_vector::x4
                    ? (ByteA == 0 && ByteB == 0)
                    : ((ByteA == 0 || ByteA == 2) && (ByteB == 0 || ByteB == 2)),
                "byte selectors: 0 for scale_vector::x4, 0 or 2 for scale_vector::x2");
  static_assert(ThreadA >= 0 && ThreadA <= 1, "ThreadA is 0 or 1");
  static_assert(ThreadB >= 0 && ThreadB <= 3, "ThreadB is 0, 1, 2 or 3");

#if defined(__CUDACC__)
  /// d = (a · scales) · (b · scales)ᵀ + c, in each thread of a converged warp.
  __device__ BLOCKSCALE_FORCEINLINE static void fma(accumulator_fragment& d, const a_fragment& a,
                                                    const b_fragment& b,
                                                    const accumulator_fragment& c,
                                                    std::uint32_t sfa, std::uint32_t sfb) {
#if BLOCKSCALE_CUDA_HAS_BLOCK_SCALED_MMA
    if constexpr (Vector == scale_vector::x4) {
      asm volatile("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X."
                   "f32.e2m1.e2m1.f32.ue4m3 "
                   "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13}, "
                   "%14, {%15, %16}, %17, {%18, %19};\n"
                   : "=f"(d.r[0]), "=f"(d.r[1]), "=f"(d.r[2]), "=f"(d.r[3])
                   : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]), "r"(b.r[1]),
                     "f"(c.r[0]), "f"(c.r[1]), "f"(c.r[2]), "f"(c.r[3]), "r"(sfa), "n"(ByteA),
                     "n"(ThreadA), "r"(sfb), "n"(ByteB), "n"(ThreadB));
    } else {
      asm volatile("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::2X."
                   "f32.e2m1.e2m1.f32.ue8m0 "
                   "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13}, "
                   "%14, {%15, %16}, %17, {%18, %19};\n"
                   : "=f"(d.r[0]), "=f"(d.r[1]), "=f"(d.r[2]), "=f"(d.r[3])
                   : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]), "r"(b.r[1]),
                     "f"(c.r[0]), "f"(c.r[1]), "f"(c.r[2]), "f"(c.r[3]), "r"(sfa), "n"(ByteA),
                     "n"(ThreadA), "r"(sfb), "n"(ByteB), "n"(ThreadB));
    }
#elif defined(__CUDA_ARCH__)
    (void)d, (void)a, (void)b, (void)c, (void)sfa, (void)sfb;
    __trap(); // this pass has no block-scaled MMA: check BLOCKSCALE_CUDA_HAS_BLOCK_SCALED_MMA
#endif
  }
#endif
};

template <class Scale, scale_vector Vector, int ByteA, int ThreadA, int ByteB, int ThreadB>
struct mma_traits<sm120_mma_m16n8k64_f32_e2m1<Scale, Vector, ByteA, ThreadA, ByteB, ThreadB>>
    : detail::m16n8_traits {
  static constexpr mma_kind kind = mma_kind::e2m1_m16n8k64;
  static constexpr int k = 64;
  static constexpr int vector = static_cast<int>(Vector);
  static constexpr int scale_block = k / vector; ///< elements per scale
  static constexpr int byte_a = ByteA, thread_a = ThreadA, byte_b = ByteB, thread_b = ThreadB;
  using scale_type = Scale;

  /// (m, k) of nibble `nibble` of register `reg` of lane `lane`.
  BLOCKSCALE_HOST_DEVICE static constexpr coord a_coord(int lane, int reg, int nibble) noexcept {
    return {lane / 4 + 8 * (reg & 1), 8 * (lane % 4) + nibble + 32 * (reg >> 1)};
  }
  /// (n, k) of B.
  BLOCKSCALE_HOST_DEVICE static constexpr coord b_coord(int lane, int reg, int nibble) noexcept {
    return {lane / 4, 8 * (lane % 4) + nibble + 32 * reg};
  }
  /// The lane whose scale register holds row m's scales (m < 16).
  BLOCKSCALE_HOST_DEVICE static constexpr int scale_a_lane(int row) noexcept {
    return 4 * (row % 8) + row / 8 + 2 * ThreadA;
  }
  /// The lane whose scale register holds column n's scales (n < 8).
  BLOCKSCALE_HOST_DEVICE static constexpr int scale_b_lane(int col) noexcept {
    return 4 * col + ThreadB;
  }
  /// The byte of A's scale register that scales k (k < 64).
  BLOCKSCALE_HOST_DEVICE static constexpr int scale_a_byte(int k) noexcept {
    return ByteA + k / scale_block;
  }
  BLOCKSCALE_HOST_DEVICE static constexpr int scale_b_byte(int k) noexcept {
    return ByteB + k / scale_block;
  }
};

/// The block-scaled m16n8k64 atom.
template <class Scale, scale_vector Vector, int ByteA = 0, int ThreadA = 0, int ByteB = 0,
          int ThreadB = 0>
using mma_e2m1_m16n8k64 =
    mma_atom<sm120_mma_m16n8k64_f32_e2m1<Scale, Vector, ByteA, ThreadA, ByteB, ThreadB>>;

} // namespace warp
} // namespace cuda
} // namespace v0
} // namespace blockscale
