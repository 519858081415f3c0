/// \file emulation/host_warp.hpp
/// `host_warp`: the Warp of cuda/warp.hpp on the host. A warp's 32 lanes run one after another
/// inside `each`; per-lane values are arrays of 32; collectives combine the lanes of each group
/// exactly as the device's xor-shuffle butterflies do (max and sum are associative and commutative
/// on the unsigned integers they take, so every order gives the device's result). Atomics are plain
/// read-modify-writes: the host driver runs one lane at a time.
///
/// The MMAs follow the tensor-core arithmetic of `model` (emulation/ptx.hpp: by default the
/// architecture BLOCKSCALE_EMULATION_ARCH names, sm_90 unless defined; `ptx::mma_model::exact` for
/// the exact sum rounded once).
///
/// Asynchronous copies (`copy_async`) take effect at the adversarial ends of what `cp.async`
/// allows: `async_copies::eager` writes shared memory when the copy is issued (so a stage
/// overwritten while another warp still reads it shows), `async_copies::deferred` only when a
/// `wait_async` retires its group (so a stage read before its wait shows). The sources are read
/// at issue in both modes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "../cuda/warp.hpp"
#include "../cuda/warp/mma.hpp"
#include "ptx.hpp"

namespace blockscale {
inline namespace v0 {
namespace emulation {

/// When the emulated `cp.async` writes shared memory (see the file comment).
enum class async_copies { eager, deferred };

/// One warp of a CTA, executed lane by lane on the host.
class host_warp {
public:
  /// 32 values, one per lane.
  template <class T>
  struct lanes {
    T values[cuda::warp_size];
    // __host__ __device__ under nvcc only so that a program's lane lambdas, which nvcc makes
    // __host__ __device__, may index them (see BLOCKSCALE_HD_TEMPLATE).
    BLOCKSCALE_HOST_DEVICE T& operator[](int lane) noexcept { return values[lane]; }
    BLOCKSCALE_HOST_DEVICE const T& operator[](int lane) const noexcept { return values[lane]; }
  };

  explicit host_warp(int index, async_copies copies = async_copies::eager,
                     ptx::mma_model model = ptx::default_mma_model) noexcept
      : index_(index), copies_(copies), model_(model) {}

  int index() const noexcept { return index_; }
  /// The tensor-core arithmetic the MMAs follow.
  ptx::mma_model model() const noexcept { return model_; }

  /// Runs the lane body for lanes 0..31 in order.
  template <class F>
  void each(F&& f) const {
    for (int lane = 0; lane < cuda::warp_size; ++lane)
      f(lane);
  }

  template <class T>
  void max_over(lanes<T>& v, int width) const {
    reduce(v, width, [](T a, T b) { return b > a ? b : a; });
  }
  template <class T>
  void sum_over(lanes<T>& v, int width) const {
    reduce(v, width, [](T a, T b) { return static_cast<T>(a + b); });
  }

  static unsigned long long atomic_add(unsigned long long* p, unsigned long long v) noexcept {
    const unsigned long long old = *p;
    *p = old + v;
    return old;
  }
  static unsigned atomic_add(unsigned* p, unsigned v) noexcept {
    const unsigned old = *p;
    *p = old + v;
    return old;
  }
  static unsigned atomic_max(unsigned* p, unsigned v) noexcept {
    const unsigned old = *p;
    *p = v > old ? v : old;
    return old;
  }
  static void fence() noexcept {}
  template <class T>
  static T load_volatile(const T* p) noexcept {
    return *p;
  }

  /// One MMA of the warp, emulated over the 32 lanes' registers (emulation/ptx.hpp).
  template <class Atom, class D, class A, class B>
  void mma(Atom, lanes<D>& d, const lanes<A>& a, const lanes<B>& b, const lanes<D>& c) const {
    static_assert(Atom::kind == cuda::warp::mma_kind::bf16_m16n8k16,
                  "a block-scaled atom takes its scale registers");
    registers<A, D, B> r(a, b, c);
    ptx::mma_m16n8k16_bf16(r.d, r.a, r.b, r.c, model_);
    r.store(d);
  }
  template <class Atom, class D, class A, class B>
  void mma(Atom, lanes<D>& d, const lanes<A>& a, const lanes<B>& b, const lanes<D>& c,
           const lanes<std::uint32_t>& sfa, const lanes<std::uint32_t>& sfb) const {
    static_assert(Atom::kind == cuda::warp::mma_kind::e2m1_m16n8k64, "not a block-scaled atom");
    registers<A, D, B> r(a, b, c);
    ptx::mma_m16n8k64_mxf4nvf4(Atom::vector,
                               std::is_same<typename Atom::scale_type, ue4m3>::value
                                   ? ptx::scale_kind::ue4m3
                                   : ptx::scale_kind::ue8m0,
                               r.d, r.a, r.b, r.c, sfa.values, Atom::byte_a, Atom::thread_a,
                               sfb.values, Atom::byte_b, Atom::thread_b, model_);
    r.store(d);
  }

  void copy_async(void* to, const void* from, int bytes, int valid) const {
    pending copy{static_cast<unsigned char*>(to), bytes, {}};
    std::memcpy(copy.data, from, static_cast<std::size_t>(valid));
    if (copies_ == async_copies::eager)
      std::memcpy(copy.to, copy.data, static_cast<std::size_t>(bytes));
    else
      pending_.push_back(copy);
  }
  void commit_async() const { groups_.push_back(pending_.size()); }
  template <int N>
  void wait_async() const {
    // Groups older than the newest N retire: their copies land, in issue order.
    if (groups_.size() <= static_cast<std::size_t>(N))
      return;
    const std::size_t retire = groups_[groups_.size() - 1 - N];
    for (std::size_t i = 0; i < retire; ++i)
      std::memcpy(pending_[i].to, pending_[i].data, static_cast<std::size_t>(pending_[i].bytes));
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(retire));
    groups_.erase(groups_.begin(), groups_.end() - N);
    for (std::size_t& end : groups_)
      end -= retire;
  }

  /// `mul.rn.bf16x2`.
  static std::uint32_t mul_bf16x2(std::uint32_t a, std::uint32_t b) noexcept {
    return ptx::mul_bf16x2(a, b);
  }

private:
  // The warp's fragments as the emulation's per-lane register arrays.
  template <class A, class D, class B>
  struct registers {
    std::uint32_t a[cuda::warp_size][4];
    std::uint32_t b[cuda::warp_size][2];
    float c[cuda::warp_size][4];
    float d[cuda::warp_size][4];
    registers(const lanes<A>& fa, const lanes<B>& fb, const lanes<D>& fc) noexcept {
      for (int lane = 0; lane < cuda::warp_size; ++lane)
        for (int r = 0; r < 4; ++r) {
          a[lane][r] = fa[lane].r[r];
          c[lane][r] = fc[lane].r[r];
          if (r < 2)
            b[lane][r] = fb[lane].r[r];
        }
    }
    void store(lanes<D>& fd) const noexcept {
      for (int lane = 0; lane < cuda::warp_size; ++lane)
        for (int r = 0; r < 4; ++r)
          fd[lane].r[r] = d[lane][r];
    }
  };

  template <class T, class Op>
  static void reduce(lanes<T>& v, int width, Op op) {
    for (int group = 0; group < cuda::warp_size; group += width) {
      T total = v[group];
      for (int lane = group + 1; lane < group + width; ++lane)
        total = op(total, v[lane]);
      for (int lane = group; lane < group + width; ++lane)
        v[lane] = total;
    }
  }

  struct pending {
    unsigned char* to;
    int bytes;
    unsigned char data[16]; ///< the source bytes, zero past `valid`
  };
  int index_;
  async_copies copies_;
  ptx::mma_model model_;
  mutable std::vector<pending> pending_;
  mutable std::vector<std::size_t> groups_; ///< per open group: pending_.size() at its commit
};

} // namespace emulation
} // namespace v0
} // namespace blockscale
