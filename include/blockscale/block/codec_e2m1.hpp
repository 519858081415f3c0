/// \file block/codec_e2m1.hpp
/// The codec's E2M1 element encoding as the device quantizers run it: branch-free bodies for eight
/// elements in registers, with the same codes as `codec::encode_block` (block/codec.hpp) for every
/// float (an exhaustive test checks all 2^32, tests/exhaustive/exhaustive_codec.cpp).
///
///  - `e2m1_nearest_biased(y)`: the nearest-even magnitude code of y as the low bits of a float
///    near 1.5 · 2^23. E2M1 rounds |y| (clamped to 6) to a quantum of 0.5 below 2, 1 below 4 and 2
///    up to 6, so the code is R(2|y|) below 2, R(|y|) + 2 below 4 and R(|y| / 2) + 4 above, R
///    rounding to an integer, ties to even. Each piece is a line that lies above the others outside
///    its binade (the code is their minimum, a concave function of |y|), and adding 1.5 · 2^23 to
///    a value below 2^22 rounds it to an integer, ties to even, in the sum's low bits: three
///    additions (two of them fused with the scaling) and two minima. Ties stay ties because the
///    offsets 0, 2 and 4 are even.
///  - `e2m1_magnitude_stochastic(y, r)`: the magnitude rounded stochastically with 8 random bits r,
///    as `round_stochastic{r << 24}` rounds (and as PTX's `cvt.rs` spends 8 bits per element): with
///    t = floor(|y| · 2^(9 - e)), e = max(exponent, 0), the first 8 discarded bits are t mod 256,
///    and the magnitude rounds away iff (t mod 256) + r >= 256: it is (t + r) / 256 + 2e. Integer
///    operations on the float's bits only.
///  - `e2m1_pack_biased` / `e2m1_pack`: eight magnitudes into a 32-bit word, element j in nibble j
///    (the even element low, as numeric/packed.hpp stores them); the bias 0x4B400000 of each
///    nearest-even sum is subtracted once per word.
///  - `e2m1_signs_16bit` / `e2m1_signs_32bit`: the sign bits (bit 3 of each nibble) of eight
///    elements, gathered from the input words with byte permutes. A block's factor f_b is positive,
///    so x · f_b has the sign of x; a NaN x gives a NaN block, which stores zeros.
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "../detail/bits.hpp"

#if defined(__CUDA_ARCH__)
#include <cuda_runtime_api.h>
#endif

namespace blockscale {
inline namespace v0 {
namespace codec {

/// The bits of 1.5 · 2^23, a float whose ulp is 1: `e2m1_nearest_biased` returns this plus the
/// magnitude code.
inline constexpr std::uint32_t e2m1_nearest_bias = 0x4B400000u;

} // namespace codec

namespace detail {
/// x >> s, and 0 for s >= 32 (PTX `shr.u32`, which clamps the shift: one instruction).
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE std::uint32_t
shift_right_clamped(std::uint32_t x, std::uint32_t s) noexcept {
#if defined(__CUDA_ARCH__)
  std::uint32_t d;
  asm("shr.b32 %0, %1, %2;" : "=r"(d) : "r"(x), "r"(s));
  return d;
#else
  return s < 32 ? x >> s : 0u;
#endif
}
} // namespace detail

namespace codec {

/// min(|y|, 6), and 6 for NaN.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE float e2m1_clamped_magnitude(float y) noexcept {
#if defined(__CUDA_ARCH__)
  return fminf(fabsf(y), 6.0f); // one FMNMX with |y|; fminf(NaN, 6) = 6
#else
  const float a = detail::bit_cast<float>(detail::bit_cast<std::uint32_t>(y) & 0x7FFFFFFFu);
  return a <= 6.0f ? a : 6.0f; // NaN fails the comparison: 6
#endif
}

/// e2m1_nearest_bias + the nearest-even E2M1 magnitude code of y (0..7; NaN gives 7).
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE std::uint32_t e2m1_nearest_biased(float y) noexcept {
  const float m = e2m1_clamped_magnitude(y);
  constexpr float magic = 12582912.0f; // 1.5 · 2^23
  // The products are exact (powers of two; m / 2 underflows only below 2^-148, where every piece
  // rounds to its offset anyway), so a fused multiply-add gives the same sums.
  const float below_2 = m * 2.0f + magic;          // R(2m)
  const float below_4 = m + (magic + 2.0f);        // R(m) + 2
  const float up_to_6 = m * 0.5f + (magic + 4.0f); // R(m / 2) + 4
  // The sums are positive floats of one binade: their bit patterns order as their values, and
  // the minimum of three patterns is one instruction on sm_90 (VIMNMX3).
  const std::uint32_t a = detail::bit_cast<std::uint32_t>(below_2);
  const std::uint32_t b = detail::bit_cast<std::uint32_t>(below_4);
  const std::uint32_t c = detail::bit_cast<std::uint32_t>(up_to_6);
  const std::uint32_t low = a < b ? a : b;
  return low < c ? low : c;
}

/// The nearest-even E2M1 magnitude code of y (0..7), without its sign.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE std::uint32_t
e2m1_magnitude_nearest(float y) noexcept {
  return e2m1_nearest_biased(y) - e2m1_nearest_bias;
}

/// The E2M1 magnitude code of y (0..7; NaN gives 7) rounded stochastically with the 8 random bits
/// r (< 256): the code of round_stochastic{r << 24}.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE std::uint32_t
e2m1_magnitude_stochastic(float y, std::uint32_t r) noexcept {
  const std::uint32_t bits = detail::bit_cast<std::uint32_t>(e2m1_clamped_magnitude(y));
  const int biased = static_cast<int>(bits >> 23); // 0 .. 129
  const std::uint32_t significand = (bits & 0x007FFFFFu) | 0x00800000u;
  // t = floor(|y| · 2^(9 - e)) = significand >> (14 + e - exponent): 14 from 1 up (e = exponent),
  // 141 - biased below 1 (e = 0), which is 32 or more (nothing left) for zero and tiny values.
  const int shift = 141 - biased > 14 ? 141 - biased : 14;
  const std::uint32_t t =
      detail::shift_right_clamped(significand, static_cast<std::uint32_t>(shift));
  const int e = biased > 127 ? biased - 127 : 0;
  return ((t + r) >> 8) + 2u * static_cast<std::uint32_t>(e);
}

/// Eight nearest-even biased magnitudes (e2m1_nearest_biased) packed into a word, element j in
/// bits [4j, 4j + 4): the shifted sums less the shifted biases, which cancel modulo 2^32.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE std::uint32_t
e2m1_pack_biased(const std::uint32_t* biased) noexcept {
  std::uint32_t word = biased[0];
  BLOCKSCALE_UNROLL
  for (int j = 1; j < 8; ++j)
    word += biased[j] << (4 * j);
  return word - e2m1_nearest_bias * 0x11111111u;
}

/// Eight magnitudes (below 8) packed into a word, element j in bits [4j, 4j + 4).
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE std::uint32_t
e2m1_pack(const std::uint32_t* magnitude) noexcept {
  std::uint32_t word = magnitude[0];
  BLOCKSCALE_UNROLL
  for (int j = 1; j < 8; ++j)
    word += magnitude[j] << (4 * j);
  return word;
}

} // namespace codec

namespace detail {

/// PTX `prmt.b32 d, a, b, selector` (default mode): byte k of d is byte (selector nibble k & 7) of
/// the eight bytes {b, a} (a's bytes 0-3, b's 4-7), or, when the nibble's bit 3 is set, that
/// byte's top bit repeated over the byte.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE std::uint32_t
byte_permute(std::uint32_t a, std::uint32_t b, std::uint32_t selector) noexcept {
#if defined(__CUDA_ARCH__)
  std::uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(selector));
  return d;
#else
  const std::uint64_t bytes = (std::uint64_t{b} << 32) | a;
  std::uint32_t d = 0;
  for (int k = 0; k < 4; ++k) {
    const std::uint32_t nibble = (selector >> (4 * k)) & 0xFu;
    std::uint32_t byte = static_cast<std::uint32_t>(bytes >> (8 * (nibble & 7u))) & 0xFFu;
    if ((nibble & 8u) != 0)
      byte = (byte & 0x80u) != 0 ? 0xFFu : 0x00u;
    d |= byte << (8 * k);
  }
  return d;
#endif
}

/// The sign nibble bits of eight elements from two words E and O whose byte i is 0xFF or 0x00 for
/// element 2i (E) and 2i + 1 (O): bit 3 of byte i from E, bit 7 from O.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE std::uint32_t
interleave_signs(std::uint32_t even, std::uint32_t odd) noexcept {
  return (even & 0x08080808u) | (odd & 0x80808080u);
}

} // namespace detail

namespace codec {

/// The sign bits, at bit 3 of each nibble, of the eight 16-bit values (bfloat16 or float16) held in
/// four words, element 2i in the low half of w[i].
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE std::uint32_t
e2m1_signs_16bit(const std::uint32_t* w) noexcept {
  // [sign 2i, sign 2i + 2, sign 2i + 1, sign 2i + 3] of a pair of words, each byte repeated.
  const std::uint32_t low = detail::byte_permute(w[0], w[1], 0xFBD9u);
  const std::uint32_t high = detail::byte_permute(w[2], w[3], 0xFBD9u);
  return detail::interleave_signs(detail::byte_permute(low, high, 0x5410u),
                                  detail::byte_permute(low, high, 0x7632u));
}

/// The sign bits, at bit 3 of each nibble, of eight floats (their bit patterns x[0..7]).
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE std::uint32_t
e2m1_signs_32bit(const std::uint32_t* x) noexcept {
  // [sign j, sign j + 2, -, -] of a pair of floats j, j + 2, each byte repeated.
  const std::uint32_t even =
      detail::byte_permute(detail::byte_permute(x[0], x[2], 0x00FBu),
                           detail::byte_permute(x[4], x[6], 0x00FBu), 0x5410u);
  const std::uint32_t odd =
      detail::byte_permute(detail::byte_permute(x[1], x[3], 0x00FBu),
                           detail::byte_permute(x[5], x[7], 0x00FBu), 0x5410u);
  return detail::interleave_signs(even, odd);
}

} // namespace codec
} // namespace v0
} // namespace blockscale
