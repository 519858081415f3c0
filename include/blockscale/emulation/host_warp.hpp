/// \file emulation/host_warp.hpp
/// `host_warp`: the Warp of cuda/warp.hpp on the host. A warp's 32 lanes run one after another
/// inside `each`; per-lane values are arrays of 32; collectives combine the lanes of each group
/// exactly as the device's xor-shuffle butterflies do (max and sum are associative and commutative
/// on the unsigned integers they take, so every order gives the device's result). Atomics are plain
/// read-modify-writes: the host driver runs one lane at a time.
#pragma once

#include <cstdint>

#include "../cuda/warp.hpp"

namespace blockscale {
inline namespace v0 {
namespace emulation {

/// One warp of a CTA, executed lane by lane on the host.
class host_warp {
public:
  /// 32 values, one per lane.
  template <class T>
  struct lanes {
    T values[cuda::warp_size];
    T& operator[](int lane) noexcept { return values[lane]; }
    const T& operator[](int lane) const noexcept { return values[lane]; }
  };

  explicit host_warp(int index) noexcept : index_(index) {}

  int index() const noexcept { return index_; }

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

private:
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

  int index_;
};

} // namespace emulation
} // namespace v0
} // namespace blockscale
