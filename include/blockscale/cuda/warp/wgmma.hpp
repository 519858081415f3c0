/// \file cuda/warp/wgmma.hpp
/// Hopper's warpgroup MMA (`wgmma.mma_async`, HGMMA in the SASS; sm_90a): the shared-memory
/// matrix descriptor and its swizzles as `__host__ __device__ constexpr` functions, and the BF16
/// ops `m64nNk16` with FP32 accumulation, A from registers (RS) or from shared memory (SS), B from
/// shared memory, each with its traits (cuda/warp/mma.hpp's split: the op is the guarded PTX, the
/// traits the shape and the coordinate maps).
///
/// A warpgroup is four consecutive warps, the first with a warp index divisible by four; thread T
/// of it (0 … 127) is lane T % 32 of warp w = T / 32, and warp w holds rows [16w, 16w + 16) of A
/// and of D. Within them the maps are those of `mma.m16n8k16` (g = lane / 4, t = lane % 4): A's
/// register r, half h is (16w + g + 8·(r % 2), 2t + h + 8·(r / 2)); D's register i is
/// (16w + g + 8·((i % 4) / 2), 8·(i / 4) + 2t + i % 2), N / 2 floats per thread.
///
/// Shared memory holds an operand K-major (rows of K, `imm-trans` 0) in the canonical layouts of
/// the PTX ISA ("Shared Memory Matrix Layout"): rows grouped by eight, the byte offset between
/// groups the descriptor's stride-dimension byte offset (SBO). Without swizzle a group is made of
/// 8 × 16-byte core matrices, K-adjacent ones the leading-dimension byte offset (LBO) apart, and
/// row r of a core matrix at 16·r. With a W-byte swizzle (W = 32, 64, 128) a group is one swizzle
/// atom, 8 rows of W bytes (row r at W·r), LBO unused, and the 16-byte chunk index, address bits
/// [4, 4 + log2(W / 16)), is XORed with bits [7, 7 + log2(W / 16)) of the same address — the
/// address in shared memory, so an atom starts on a multiple of 8·W bytes (base offset 0).
/// `kmajor_address` is that map; the host emulation (emulation/ptx.hpp) decodes descriptors on its
/// own, from the same definitions, and the tests hold the two together. The GPU has not yet
/// confirmed them (docs/cuda.md).
#pragma once

#include <cstdint>

#include "../../config.hpp"
#include "mma.hpp"
#include "wgmma_ptx.hpp"

/// 1 in a device pass with the warpgroup MMA (sm_90a), else 0. It is an `a` feature: the generic
/// compute_90 pass of `-arch=sm_90a`, and sm_100a or later, have no wgmma.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define BLOCKSCALE_CUDA_HAS_WGMMA 1
#else
#define BLOCKSCALE_CUDA_HAS_WGMMA 0
#endif

namespace blockscale {
inline namespace v0 {
namespace cuda {
namespace warp {

/// The swizzle of a shared-memory operand, as the descriptor's bits 62–63 encode it.
enum class smem_swizzle : std::uint8_t { none = 0, bytes128 = 1, bytes64 = 2, bytes32 = 3 };

/// The bytes of one swizzled row (16 without swizzle: a core matrix's row).
BLOCKSCALE_HOST_DEVICE constexpr int swizzle_bytes(smem_swizzle s) noexcept {
  return s == smem_swizzle::bytes128  ? 128
         : s == smem_swizzle::bytes64 ? 64
         : s == smem_swizzle::bytes32 ? 32
                                      : 16;
}

/// The shared-memory address at which a W-byte swizzle stores logical address `address`: its
/// 16-byte chunk bits [4, 4 + b) XOR bits [7, 7 + b), b = log2(W / 16). An involution.
BLOCKSCALE_HOST_DEVICE constexpr std::uint32_t swizzle_address(smem_swizzle s,
                                                               std::uint32_t address) noexcept {
  const std::uint32_t mask = static_cast<std::uint32_t>(swizzle_bytes(s) / 16 - 1);
  return address ^ (((address >> 7) & mask) << 4);
}

/// The 64-bit shared-memory matrix descriptor of `wgmma.mma_async`: start address >> 4 in bits
/// 0–13, LBO >> 4 in 16–29, SBO >> 4 in 32–45, the base offset in 49–51, the swizzle in 62–63.
struct smem_descriptor {
  std::uint64_t bits = 0;

  /// A descriptor of the operand at shared-memory byte address `address` (a multiple of 16 below
  /// 2^18), with LBO `leading_bytes` and SBO `stride_bytes` (multiples of 16 below 2^18).
  BLOCKSCALE_HOST_DEVICE static constexpr smem_descriptor make(std::uint32_t address,
                                                               std::uint32_t leading_bytes,
                                                               std::uint32_t stride_bytes,
                                                               smem_swizzle swizzle) noexcept {
    return {(static_cast<std::uint64_t>((address >> 4) & 0x3FFFu)) |
            (static_cast<std::uint64_t>((leading_bytes >> 4) & 0x3FFFu) << 16) |
            (static_cast<std::uint64_t>((stride_bytes >> 4) & 0x3FFFu) << 32) |
            (static_cast<std::uint64_t>(swizzle) << 62)};
  }

  BLOCKSCALE_HOST_DEVICE constexpr std::uint32_t start_address() const noexcept {
    return static_cast<std::uint32_t>(bits & 0x3FFFu) << 4;
  }
  BLOCKSCALE_HOST_DEVICE constexpr std::uint32_t leading_bytes() const noexcept {
    return static_cast<std::uint32_t>((bits >> 16) & 0x3FFFu) << 4;
  }
  BLOCKSCALE_HOST_DEVICE constexpr std::uint32_t stride_bytes() const noexcept {
    return static_cast<std::uint32_t>((bits >> 32) & 0x3FFFu) << 4;
  }
  BLOCKSCALE_HOST_DEVICE constexpr int base_offset() const noexcept {
    return static_cast<int>((bits >> 49) & 0x7u);
  }
  BLOCKSCALE_HOST_DEVICE constexpr smem_swizzle swizzle() const noexcept {
    return static_cast<smem_swizzle>((bits >> 62) & 0x3u);
  }

  /// The same operand `bytes` further along K (a multiple of 16): how a k-loop steps inside a
  /// swizzle atom, the swizzle being applied to the address the instruction forms.
  BLOCKSCALE_HOST_DEVICE constexpr smem_descriptor advanced(std::uint32_t bytes) const noexcept {
    return {bits + ((bytes >> 4) & 0x3FFFu)};
  }
};

/// The shared-memory byte address holding byte `k_byte` of row `row` of a K-major operand that
/// `d` describes (file comment). With a swizzle, `k_byte` < its width.
BLOCKSCALE_HOST_DEVICE constexpr std::uint32_t kmajor_address(const smem_descriptor& d, int row,
                                                              int k_byte) noexcept {
  const smem_swizzle s = d.swizzle();
  const auto group = static_cast<std::uint32_t>(row / 8), r = static_cast<std::uint32_t>(row % 8);
  const auto k = static_cast<std::uint32_t>(k_byte);
  if (s == smem_swizzle::none)
    return d.start_address() + group * d.stride_bytes() + (k / 16) * d.leading_bytes() + 16 * r +
           k % 16;
  const auto width = static_cast<std::uint32_t>(swizzle_bytes(s));
  return swizzle_address(s, d.start_address() + group * d.stride_bytes() + width * r + k);
}

/// The accumulator of an m64nNk16 warpgroup MMA in one thread: N / 2 floats.
template <int N>
struct wgmma_accumulator {
  float r[N / 2];
};

namespace detail {
/// What the two BF16 m64nNk16 ops share: the shape, the fragments and the maps.
template <int N>
struct wgmma_bf16_traits {
  static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma m64nNk16: N is a multiple of 8 to 256");
  static constexpr int m = 64, n = N, k = 16;
  static constexpr int threads = 128; ///< a warpgroup
  using a_fragment = warp::a_fragment;
  using c_fragment = wgmma_accumulator<N>;

  /// (m, k) of register `reg`, half `half` of thread `thread`'s A fragment (RS).
  BLOCKSCALE_HOST_DEVICE static constexpr coord a_coord(int thread, int reg, int half) noexcept {
    return {16 * (thread / 32) + (thread % 32) / 4 + 8 * (reg & 1),
            2 * (thread % 4) + half + 8 * (reg >> 1)};
  }
  /// (m, n) of register `reg` of thread `thread`'s accumulator.
  BLOCKSCALE_HOST_DEVICE static constexpr coord c_coord(int thread, int reg) noexcept {
    return {16 * (thread / 32) + (thread % 32) / 4 + 8 * ((reg % 4) >> 1),
            8 * (reg / 4) + 2 * (thread % 4) + (reg & 1)};
  }
};
} // namespace detail

/// D[64×N] = A[64×16] · B[N×16]ᵀ (+ D), BF16 in, FP32 accumulation, A and B in shared memory
/// (K-major, described by descriptors): `wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16`.
template <int N>
struct sm90_wgmma_m64nNk16_f32_bf16_ss {
#if defined(__CUDACC__)
  /// d = a · bᵀ + (accumulate ? d : 0), in each thread of a converged warpgroup; asynchronous:
  /// see wgmma_fence, wgmma_commit_group and wgmma_wait_group.
  __device__ BLOCKSCALE_FORCEINLINE static void fma(wgmma_accumulator<N>& d, smem_descriptor a,
                                                    smem_descriptor b, bool accumulate) {
#if BLOCKSCALE_CUDA_HAS_WGMMA
    detail::wgmma_bf16_ptx<N>::ss(d.r, a.bits, b.bits, accumulate ? 1 : 0);
#elif defined(__CUDA_ARCH__)
    (void)d, (void)a, (void)b, (void)accumulate;
    __trap(); // this pass has no wgmma (sm_90a only): check BLOCKSCALE_CUDA_HAS_WGMMA
#endif
  }
#endif
};

/// The same with A from registers (four b32 per thread, as `a_coord` maps them).
template <int N>
struct sm90_wgmma_m64nNk16_f32_bf16_rs {
#if defined(__CUDACC__)
  __device__ BLOCKSCALE_FORCEINLINE static void fma(wgmma_accumulator<N>& d, const a_fragment& a,
                                                    smem_descriptor b, bool accumulate) {
#if BLOCKSCALE_CUDA_HAS_WGMMA
    detail::wgmma_bf16_ptx<N>::rs(d.r, a.r, b.bits, accumulate ? 1 : 0);
#elif defined(__CUDA_ARCH__)
    (void)d, (void)a, (void)b, (void)accumulate;
    __trap(); // this pass has no wgmma (sm_90a only): check BLOCKSCALE_CUDA_HAS_WGMMA
#endif
  }
#endif
};

template <int N>
struct mma_traits<sm90_wgmma_m64nNk16_f32_bf16_ss<N>> : detail::wgmma_bf16_traits<N> {
  static constexpr mma_kind kind = mma_kind::wgmma_bf16_ss;
};
template <int N>
struct mma_traits<sm90_wgmma_m64nNk16_f32_bf16_rs<N>> : detail::wgmma_bf16_traits<N> {
  static constexpr mma_kind kind = mma_kind::wgmma_bf16_rs;
};

/// The warpgroup atoms.
template <int N>
using wgmma_bf16_ss = mma_atom<sm90_wgmma_m64nNk16_f32_bf16_ss<N>>;
template <int N>
using wgmma_bf16_rs = mma_atom<sm90_wgmma_m64nNk16_f32_bf16_rs<N>>;

#if defined(__CUDACC__)
/// `wgmma.fence`: orders the warpgroup's register accesses before the wgmma that follow (the
/// accumulators and an RS A fragment written since the last wgmma).
__device__ BLOCKSCALE_FORCEINLINE void wgmma_fence() {
#if BLOCKSCALE_CUDA_HAS_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
/// `wgmma.commit_group`: the wgmma issued since the last commit become one group.
__device__ BLOCKSCALE_FORCEINLINE void wgmma_commit_group() {
#if BLOCKSCALE_CUDA_HAS_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
/// `wgmma.wait_group Pending`: waits until at most `Pending` groups are in flight.
template <int Pending>
__device__ BLOCKSCALE_FORCEINLINE void wgmma_wait_group() {
  static_assert(Pending >= 0 && Pending <= 7, "wgmma.wait_group takes 0 to 7");
#if BLOCKSCALE_CUDA_HAS_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(Pending) : "memory");
#endif
}
#endif

} // namespace warp
} // namespace cuda
} // namespace v0
} // namespace blockscale
