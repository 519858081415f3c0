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
#pragma once

#include <cstdint>

#include "../config.hpp"

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
};
#endif

} // namespace cuda
} // namespace v0
} // namespace blockscale
