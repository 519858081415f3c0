/// \file cuda/warp.hpp
/// How blockscale's kernels are written: a kernel is a *CTA program* (cuda/kernels/), a struct
/// whose phases are `__host__ __device__` functions of one warp, separated by CTA barriers. Each
/// phase is written once, over a `Warp` type, in warp-synchronous style:
///
///     lanes<Warp, float> amax;                       // one value per lane
///     warp.each([&](int lane) { amax[lane] = ...; }); // the code of one thread
///     warp.max_over(amax, 16);                       // a collective over groups of 16 lanes
///
/// On the device `Warp` is `device_warp` (below): `lanes<T>` is the thread's own T, `each` runs the
/// body once for the calling thread, collectives are shuffles and atomics are atomics. On the host
/// it is `emulation::host_warp` (emulation/host_warp.hpp): `lanes<T>` holds 32 values, `each` loops
/// over the lanes, collectives loop over lane groups. The host driver (emulation/host_cta.hpp) runs
/// a program's CTAs phase by phase, so the very code a kernel runs is tested on every CI machine,
/// GPU or not.
///
/// The Warp interface (both types):
/// - `lanes<T>`: per-lane storage; `x[lane]` is the lane's T.
/// - `index()`: this warp's index in its CTA.
/// - `each(f)`: f(lane) for each lane of the warp (on the device: this thread's).
/// - `max_over(v, width)`: v[lane] = the max of v over the aligned group of `width` lanes holding
///   it (width a power of two, at most 32; unsigned integers). `sum_over(v, width)`: the same with
///   the sum.
/// - `atomic_add(p, v)` and `atomic_max(p, v)` on global memory (returning the old value),
///   `fence()` (a `__threadfence`) and `load_volatile(p)`: what lane code calls for memory that
///   other CTAs touch.
/// - `mma(atom, d, a, b, c[, sfa, sfb])`: one tensor-core instruction of the warp
///   (cuda/warp/mma.hpp).
/// - `mul_bf16x2(a, b)` (static): `mul.rn.bf16x2`, the dequantizer's multiply (an
///   `fma.rn.bf16x2` with -0 below sm_90).
/// - `copy_async(to, from, bytes, valid)`: a `cp.async` of `bytes` (4, 8 or 16) bytes from global
///   to shared memory, of which the first `valid` are read and the rest zero-filled.
///   `commit_async()` closes a group of them, `wait_async<N>()` waits until at most N groups are
///   in flight (`cp.async.commit_group`, `cp.async.wait_group`).
/// - In warp-specialised programs (cuda/runner.cuh `run_specialized`, emulation/host_async.hpp):
///   `sync_cta`, the mbarrier operations, TMA loads and stores, `fence_proxy_async` and
///   `setmaxnreg_inc` / `_dec` of cuda/warp/async.hpp; `shared_address(p)`; and the warpgroup
///   MMA: `wgmma(atom, d, a, b, accumulate)` (A a descriptor or a fragment), `wgmma_fence()`,
///   `wgmma_commit()`, `wgmma_wait<N>()` (cuda/warp/wgmma.hpp).
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "warp/async.hpp"
#include "warp/wgmma.hpp"

namespace blockscale {
inline namespace v0 {
namespace cuda {

/// Threads per warp.
inline constexpr int warp_size = 32;

/// The per-lane storage type of `Warp` for T.
template <class Warp, class T>
using lanes = typename Warp::template lanes<T>;

/// The position of one CTA in its grid (a 1-D grid: programs map it to their tiles).
struct cta_coord {
  std::uint32_t index = 0; ///< blockIdx.x
  std::uint32_t count = 1; ///< gridDim.x
};

#if defined(__CUDACC__)
/// The Warp of device code: each thread is one lane.
class device_warp {
public:
  /// One value per thread; the lane index is ignored (it is always the calling thread's).
  template <class T>
  struct lanes {
    T value;
    __device__ __forceinline__ T& operator[](int) noexcept { return value; }
    __device__ __forceinline__ const T& operator[](int) const noexcept { return value; }
  };

  __device__ __forceinline__ int index() const noexcept {
    return static_cast<int>(threadIdx.x) / warp_size;
  }
  __device__ __forceinline__ static int lane() noexcept {
    return static_cast<int>(threadIdx.x) % warp_size;
  }

  /// Runs the lane body for this thread.
  template <class F>
  __device__ __forceinline__ void each(F&& f) const {
    f(lane());
  }

  /// Butterfly max over aligned groups of `width` lanes (xor shuffles stay inside the group).
  template <class T>
  __device__ __forceinline__ void max_over(lanes<T>& v, int width) const {
    for (int step = width / 2; step > 0; step /= 2) {
      const T other = __shfl_xor_sync(0xFFFFFFFFu, v.value, step);
      v.value = other > v.value ? other : v.value;
    }
  }
  /// Butterfly sum over aligned groups of `width` lanes.
  template <class T>
  __device__ __forceinline__ void sum_over(lanes<T>& v, int width) const {
    for (int step = width / 2; step > 0; step /= 2)
      v.value += __shfl_xor_sync(0xFFFFFFFFu, v.value, step);
  }

  __device__ __forceinline__ static unsigned long long atomic_add(unsigned long long* p,
                                                                  unsigned long long v) noexcept {
    return atomicAdd(p, v);
  }
  __device__ __forceinline__ static unsigned atomic_add(unsigned* p, unsigned v) noexcept {
    return atomicAdd(p, v);
  }
  __device__ __forceinline__ static unsigned atomic_max(unsigned* p, unsigned v) noexcept {
    return atomicMax(p, v);
  }
  __device__ __forceinline__ static void fence() noexcept { __threadfence(); }
  template <class T>
  __device__ __forceinline__ static T load_volatile(const T* p) noexcept {
    return *static_cast<const volatile T*>(p);
  }

  /// One MMA of the warp: each thread passes its own registers.
  template <class Atom, class D, class A, class B>
  __device__ __forceinline__ void mma(Atom, lanes<D>& d, const lanes<A>& a, const lanes<B>& b,
                                      const lanes<D>& c) const {
    Atom::fma(d.value, a.value, b.value, c.value);
  }
  template <class Atom, class D, class A, class B>
  __device__ __forceinline__ void mma(Atom, lanes<D>& d, const lanes<A>& a, const lanes<B>& b,
                                      const lanes<D>& c, const lanes<std::uint32_t>& sfa,
                                      const lanes<std::uint32_t>& sfb) const {
    Atom::fma(d.value, a.value, b.value, c.value, sfa.value, sfb.value);
  }

  __device__ __forceinline__ static void copy_async(void* to, const void* from, int bytes,
                                                    int valid) noexcept {
    const auto shared = static_cast<unsigned>(__cvta_generic_to_shared(to));
    if (bytes == 16)
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared), "l"(from),
                   "r"(valid)
                   : "memory");
    else if (bytes == 8)
      asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(shared), "l"(from),
                   "r"(valid)
                   : "memory");
    else
      asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared), "l"(from),
                   "r"(valid)
                   : "memory");
  }
  __device__ __forceinline__ void commit_async() const noexcept {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  }
  template <int N>
  __device__ __forceinline__ void wait_async() const noexcept {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
  }

  /// Two bf16 products, each rounded to nearest even, subnormals kept (sm_80: an fma with -0).
  __device__ __forceinline__ static std::uint32_t mul_bf16x2(std::uint32_t a,
                                                             std::uint32_t b) noexcept {
    std::uint32_t d;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm("mul.rn.bf16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
#else
    asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
#endif
    return d;
  }

  // The asynchronous units of sm_90 (cuda/warp/async.hpp). Every lane of the warp calls each
  // function; where the instruction is one thread's, lane 0 issues it. Below sm_90 they trap.

  /// `__syncthreads()`: every warp of the CTA.
  __device__ __forceinline__ static void sync_cta() noexcept {
    __syncthreads();
  }

  /// Initialises `b` to expect `arrivals` arrivals per phase (warps calling mbarrier_arrive).
  __device__ __forceinline__ static void mbarrier_init(warp::mbarrier& b, int arrivals) noexcept {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (lane() == 0) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(&b)),
                   "r"(arrivals)
                   : "memory");
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncwarp();
#else
    (void)b, (void)arrivals;
    __trap();
#endif
  }
  /// One arrival of the warp on `b`, after every lane's earlier accesses (`__syncwarp`).
  __device__ __forceinline__ static void mbarrier_arrive(warp::mbarrier& b) noexcept {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    __syncwarp();
    if (lane() == 0)
      asm volatile("{\n .reg .b64 state;\n mbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(
                       shared_address(&b))
                   : "memory");
#else
    (void)b;
    __trap();
#endif
  }
  /// One arrival that also expects `bytes` of transactions (a TMA load's box) in this phase.
  __device__ __forceinline__ static void mbarrier_arrive_expect_tx(warp::mbarrier& b,
                                                                   std::uint32_t bytes) noexcept {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    __syncwarp();
    if (lane() == 0)
      asm volatile(
          "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(&b)),
          "r"(bytes)
          : "memory");
#else
    (void)b, (void)bytes;
    __trap();
#endif
  }
  /// Waits, in every lane, until the phase of `b` with parity `parity` has completed.
  __device__ __forceinline__ static void mbarrier_wait(warp::mbarrier& b,
                                                       std::uint32_t parity) noexcept {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    std::uint32_t done = 0;
    do {
      asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                   " selp.u32 %0, 1, 0, p;\n}\n"
                   : "=r"(done)
                   : "r"(shared_address(&b)), "r"(parity)
                   : "memory");
    } while (done == 0);
#else
    (void)b, (void)parity;
    __trap();
#endif
  }
  /// The TMA load of the box at element (x, y) of `map` into shared memory at `to`, completing
  /// its bytes on `b` (whose phase must expect them).
  __device__ __forceinline__ static void tma_load_2d(void* to, const warp::tensor_map& map, int x,
                                                     int y, warp::mbarrier& b) noexcept {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (lane() == 0)
      asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                   " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(shared_address(to)),
                   "l"(reinterpret_cast<std::uint64_t>(&map)), "r"(x), "r"(y),
                   "r"(shared_address(&b))
                   : "memory");
#else
    (void)to, (void)map, (void)x, (void)y, (void)b;
    __trap();
#endif
  }
  /// The TMA store of the box at `from` in shared memory to element (x, y) of `map` (the part
  /// inside the tensor). Shared memory written by ordinary stores needs `fence_proxy_async` first
  /// in every lane that wrote; lane 0 issues the store after them all (`__syncwarp`). Writes by
  /// other warps need a barrier with this one as well.
  __device__ __forceinline__ static void tma_store_2d(const warp::tensor_map& map, int x, int y,
                                                      const void* from) noexcept {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    __syncwarp();
    if (lane() == 0)
      asm volatile(
          "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
              reinterpret_cast<std::uint64_t>(&map)),
          "r"(x), "r"(y), "r"(shared_address(from))
          : "memory");
#else
    (void)map, (void)x, (void)y, (void)from;
    __trap();
#endif
  }
  /// Closes the group of this warp's TMA stores issued since the last commit.
  __device__ __forceinline__ static void tma_store_commit() noexcept {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (lane() == 0)
      asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#else
    __trap();
#endif
  }
  /// Waits until at most `N` of this warp's store groups still read their shared memory.
  template <int N>
  __device__ __forceinline__ static void tma_store_wait() noexcept {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (lane() == 0)
      asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
    __syncwarp();
#else
    __trap();
#endif
  }
  /// `fence.proxy.async.shared::cta`: this thread's shared-memory writes become visible to the
  /// async proxy (TMA stores, wgmma's shared operands) that a barrier orders after it.
  __device__ __forceinline__ static void fence_proxy_async() noexcept {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#else
    __trap();
#endif
  }
  /// `setmaxnreg.inc` / `.dec` to `Registers` per thread, warpgroup-wide (sm_90a; elsewhere and
  /// on the host nothing). Honoured only when the kernel's register count is capped at launch.
  template <int Registers>
  __device__ __forceinline__ static void setmaxnreg_inc() noexcept {
    static_assert(Registers >= 24 && Registers <= 256 && Registers % 8 == 0,
                  "setmaxnreg takes 24 to 256 registers, a multiple of 8");
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Registers));
#endif
  }
  template <int Registers>
  __device__ __forceinline__ static void setmaxnreg_dec() noexcept {
    static_assert(Registers >= 24 && Registers <= 256 && Registers % 8 == 0,
                  "setmaxnreg takes 24 to 256 registers, a multiple of 8");
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Registers));
#endif
  }

  /// The shared-memory address of `p` (what descriptors and the asynchronous units take).
  __device__ __forceinline__ static std::uint32_t shared_address(const void* p) noexcept {
    return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
  }

  // Hopper's warpgroup MMA (cuda/warp/wgmma.hpp), issued by the four warps of a warpgroup.

  /// One wgmma of this thread's warpgroup: `d = a · bᵀ + (accumulate ? d : 0)`, A by descriptor
  /// (SS) or from this thread's fragment (RS), B by descriptor.
  template <class Atom, int N>
  __device__ __forceinline__ static void wgmma(Atom, lanes<warp::wgmma_accumulator<N>>& d,
                                               warp::smem_descriptor a, warp::smem_descriptor b,
                                               bool accumulate) noexcept {
    Atom::fma(d.value, a, b, accumulate);
  }
  template <class Atom, int N>
  __device__ __forceinline__ static void wgmma(Atom, lanes<warp::wgmma_accumulator<N>>& d,
                                               const lanes<warp::a_fragment>& a,
                                               warp::smem_descriptor b, bool accumulate) noexcept {
    Atom::fma(d.value, a.value, b, accumulate);
  }
  __device__ __forceinline__ static void wgmma_fence() noexcept {
    warp::wgmma_fence();
  }
  __device__ __forceinline__ static void wgmma_commit() noexcept {
    warp::wgmma_commit_group();
  }
  template <int N>
  __device__ __forceinline__ static void wgmma_wait() noexcept {
    warp::wgmma_wait_group<N>();
  }
};
#endif

} // namespace cuda
} // namespace v0
} // namespace blockscale
