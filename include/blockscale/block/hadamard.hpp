/// \file block/hadamard.hpp
/// `hadamard16`: the 16-point randomized Hadamard transform (RHT) applied before NVFP4
/// quantization, y = x · diag(signs) · H16 / 4 on each 16-element group along the reduction
/// dimension. The matrix is orthogonal, so applying it to both GEMM
/// operands cancels in exact arithmetic: (A·M)(B·M)ᵀ = A·Bᵀ.
///
/// Floating-point operation order (the device code must reproduce it bit for bit):
///  forward(x):  v_i = x_i * s_i (s_i = ±1.0f, exact); then the in-place butterfly below on v;
///               then y_j = v_j * 0.25f.
///  inverse(y):  v_j = y_j; the butterfly on v; then x_i = (v_i * 0.25f) * s_i.
///  butterfly:   for h = 1, 2, 4, 8 (in that order), for every j with (j & h) == 0:
///               (v_j, v_{j+h}) <- (v_j + v_{j+h}, v_j - v_{j+h}), each one IEEE binary32 add or
///               subtract rounded to nearest-even. This is natural (Sylvester) order:
///               after the 4 stages v_j = Σ_i v_i · H16[i][j], H16[i][j] = (-1)^popcount(i & j).
/// Every output is therefore a balanced tree of depth 4 over its 16 inputs. There is no product
/// that an FMA could fuse with a rounding in between (the sign products are exact), and scaling
/// by 0.25f is exact unless the result is subnormal, so the result is the same on every IEEE
/// host and device. Surprises: an intermediate sum can reach 16 · max|x|, so inputs above about
/// FLT_MAX / 16 may give ±inf where the exact result is finite; a NaN input spreads to all 16
/// outputs (its sign and payload are unspecified); a zero may change sign (inverse(forward(+0))
/// is -0 where sign_i = -1).
#pragma once

#include <cstddef>
#include <cstdint>

#include "../config.hpp"

// Full unrolling of the fixed 16-trip loops below (undefined again at the end of this header).
// None in nvcc's host pass: its front end warns on "GCC unroll" and g++ on a bare "unroll".
#if defined(__CUDA_ARCH__) || (defined(__clang__) && !defined(__CUDACC__))
#define BLOCKSCALE_DETAIL_UNROLL_16 _Pragma("unroll")
#elif defined(__GNUC__) && !defined(__CUDACC__)
#define BLOCKSCALE_DETAIL_UNROLL_16 _Pragma("GCC unroll 16")
#else
#define BLOCKSCALE_DETAIL_UNROLL_16
#endif

namespace blockscale {
inline namespace v0 {

/// The 16-point randomized Hadamard transform: y = x · diag(signs) · H16 / 4 on each 16-element
/// group. A value type holding only the 16 signs (as a bit mask); cheap to copy to a kernel.
class hadamard16 {
public:
  /// Number of elements in one transformed group.
  static constexpr int size = 16;

  /// Transformer Engine's default sign vector
  /// [1,1,1,-1,1,-1,-1,-1,-1,-1,-1,1,-1,1,-1,-1] (Transformer Engine, nvfp4_tensor.py),
  /// i.e. sign mask 0xD7E8.
  [[nodiscard]] BLOCKSCALE_HOST_DEVICE static constexpr hadamard16 te_default() noexcept {
    return hadamard16(0xD7E8u);
  }

  /// Signs drawn from a seed: the low 16 bits of SplitMix64's output for state `seed`
  /// (z = seed + 0x9E3779B97F4A7C15; z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9;
  /// z = (z ^ z >> 27) * 0x94D049BB133111EB; z ^= z >> 31), used as a sign mask. Deterministic
  /// and identical on the host and the device.
  [[nodiscard]] BLOCKSCALE_HOST_DEVICE static constexpr hadamard16
  from_seed(std::uint64_t seed) noexcept {
    std::uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return hadamard16(static_cast<std::uint16_t>(z & 0xFFFFu));
  }

  /// From an explicit sign mask: bit i set means sign_i = -1.
  [[nodiscard]] BLOCKSCALE_HOST_DEVICE static constexpr hadamard16
  from_sign_mask(std::uint16_t mask) noexcept {
    return hadamard16(mask);
  }

  /// The sign mask: bit i set means sign_i = -1.
  [[nodiscard]] BLOCKSCALE_HOST_DEVICE constexpr std::uint16_t sign_mask() const noexcept {
    return mask_;
  }

  /// sign_i as +1.0f or -1.0f (i in [0, 16)).
  [[nodiscard]] BLOCKSCALE_HOST_DEVICE constexpr float sign(int i) const noexcept {
    // 1 - 2·bit: +1 or -1 without a branch.
    return 1.0f - 2.0f * static_cast<float>((mask_ >> i) & 1u);
  }

  /// y = x · D · H / 4 on 16 values (in and out may alias). Operation order: see the file comment.
  BLOCKSCALE_HOST_DEVICE void forward(const float* in, float* out) const noexcept {
    float signs[size];
    load_signs(signs);
    forward_group(signs, in, out);
  }

  /// x = y · H · D / 4, the inverse of forward() (M = D·H/4 is orthogonal and H symmetric, so
  /// M⁻¹ = Mᵀ = H·D/4). In and out may alias. Operation order: see the file comment.
  BLOCKSCALE_HOST_DEVICE void inverse(const float* in, float* out) const noexcept {
    float signs[size];
    load_signs(signs);
    inverse_group(signs, in, out);
  }

  /// forward() on `groups` consecutive 16-element groups, in place (the signs loaded once).
  BLOCKSCALE_HOST_DEVICE void forward_groups(float* data, std::size_t groups) const noexcept {
    float signs[size];
    load_signs(signs);
    for (std::size_t g = 0; g < groups; ++g)
      forward_group(signs, data + g * size, data + g * size);
  }

  /// inverse() on `groups` consecutive 16-element groups, in place.
  BLOCKSCALE_HOST_DEVICE void inverse_groups(float* data, std::size_t groups) const noexcept {
    float signs[size];
    load_signs(signs);
    for (std::size_t g = 0; g < groups; ++g)
      inverse_group(signs, data + g * size, data + g * size);
  }

private:
  BLOCKSCALE_HOST_DEVICE constexpr explicit hadamard16(std::uint16_t mask) noexcept : mask_(mask) {}

  BLOCKSCALE_HOST_DEVICE void load_signs(float (&signs)[size]) const noexcept {
    BLOCKSCALE_DETAIL_UNROLL_16
    for (int i = 0; i < size; ++i)
      signs[i] = sign(i);
  }

  // The signs are passed in so the row loops compute them once, not once per group.
  BLOCKSCALE_HOST_DEVICE static void forward_group(const float (&signs)[size], const float* in,
                                                   float* out) noexcept {
    float v[size];
    BLOCKSCALE_DETAIL_UNROLL_16
    for (int i = 0; i < size; ++i)
      v[i] = in[i] * signs[i];
    butterfly(v);
    BLOCKSCALE_DETAIL_UNROLL_16
    for (int j = 0; j < size; ++j)
      out[j] = v[j] * 0.25f;
  }

  BLOCKSCALE_HOST_DEVICE static void inverse_group(const float (&signs)[size], const float* in,
                                                   float* out) noexcept {
    float v[size];
    BLOCKSCALE_DETAIL_UNROLL_16
    for (int j = 0; j < size; ++j)
      v[j] = in[j];
    butterfly(v);
    BLOCKSCALE_DETAIL_UNROLL_16
    for (int i = 0; i < size; ++i)
      out[i] = (v[i] * 0.25f) * signs[i];
  }

  // The unnormalised in-place fast Walsh–Hadamard transform in natural (Sylvester) order:
  // 4 stages of 8 add/subtract pairs, stage strides 1, 2, 4, 8 in that order.
  BLOCKSCALE_HOST_DEVICE static void butterfly(float (&v)[size]) noexcept {
    BLOCKSCALE_DETAIL_UNROLL_16
    for (int h = 1; h < size; h *= 2) {
      BLOCKSCALE_DETAIL_UNROLL_16
      for (int k = 0; k < size / 2; ++k) {
        // The k-th index with bit h clear: insert a 0 bit at h's position.
        const int j = ((k & ~(h - 1)) << 1) | (k & (h - 1));
        const float a = v[j];
        const float b = v[j + h];
        v[j] = a + b;
        v[j + h] = a - b;
      }
    }
  }

  std::uint16_t mask_;
};

} // namespace v0
} // namespace blockscale

#undef BLOCKSCALE_DETAIL_UNROLL_16
