/// \file host/simd.hpp
/// The per-row bodies of the fast host quantizer and dequantizer. Each has a portable body — a
/// plain loop over the codec (block/codec.hpp), the reference — and may have a SIMD body, used when
/// the compiler targets the instruction set (`-march=native` on a machine that has it). A SIMD
/// body must be bit-identical to the portable one for every input; tests/unit/test_simd.cpp runs
/// both side by side (`portable::` and `simd::` are both callable), and the exhaustive tests check
/// the E2M1 bodies on all 2^32 floats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../block/codec.hpp"
#include "../config.hpp"
#include "../numeric/half.hpp"
#include "../numeric/minifloat.hpp"
#include "../numeric/random.hpp"

namespace blockscale {
inline namespace v0 {
namespace detail {

struct factor_table;

/// Asks for the cache line at `address` ahead of its use, for reading or (Write) for writing;
/// nothing where the compiler has no hint.
template <bool Write = false>
inline void prefetch(const void* address) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(address, Write ? 1 : 0, 3);
#else
  (void)address;
#endif
}

/// The portable bodies: loops over the codec.
namespace portable {

/// The amax pattern (codec::amax_bits) of `count` values.
inline std::uint32_t amax_bits(const float* values, std::size_t count) noexcept {
  std::uint32_t acc = 0;
  for (std::size_t i = 0; i < count; ++i)
    acc = codec::amax_bits(acc, values[i]);
  return acc;
}

/// The Philox words of `count` consecutive elements (numeric/random.hpp's random_bits).
inline void fill_random_bits(std::uint64_t seed, std::uint64_t offset, std::uint64_t first,
                             std::size_t count, std::uint32_t* out) noexcept {
  blockscale::fill_random_bits(seed, offset, first, count, out);
}

/// The stochastic-rounding words of `count` consecutive elements (numeric/random.hpp's
/// rounding_bits).
inline void fill_rounding_bits(std::uint64_t seed, std::uint64_t offset, std::uint64_t first,
                               std::size_t count, std::uint32_t* out) noexcept {
  blockscale::fill_rounding_bits(seed, offset, first, count, out);
}

/// amax patterns (codec::amax_bits) of `blocks` consecutive blocks of B values.
template <std::size_t B>
void row_block_amax(const float* row, std::size_t blocks, std::uint32_t* amax) noexcept {
  for (std::size_t kb = 0; kb < blocks; ++kb)
    amax[kb] = codec::block_amax_bits(row + kb * B, static_cast<int>(B));
}

/// The element loop of a row: block kb with the scale code codes[kb] (its factor and keep from
/// `table`), element j of the row rounded with the tag rounding_of(kb) gives for it, stored at
/// `out`.
template <class BlockFormat, class Table, class RoundingOf>
void encode_row(const float* row, std::size_t blocks, const std::uint8_t* codes, const Table& table,
                std::uint8_t* out, RoundingOf rounding_of) noexcept {
  constexpr std::size_t b = BlockFormat::block_size;
  std::uint8_t element_codes[b];
  for (std::size_t kb = 0; kb < blocks; ++kb) {
    codec::encode_block<BlockFormat>(row + kb * b, table.factor[codes[kb]],
                                     table.keep[codes[kb]] != 0, rounding_of(kb), element_codes);
    codec::store_block<BlockFormat>(element_codes, out + codec::element_bytes<BlockFormat>(kb * b));
  }
}

/// Encodes `blocks` blocks of a row nearest-even and stores them at `out`.
template <class BlockFormat, class Table>
void encode_row_nearest(const float* row, std::size_t blocks, const std::uint8_t* codes,
                        const Table& table, std::uint8_t* out) noexcept {
  encode_row<BlockFormat>(row, blocks, codes, table, out,
                          [](std::size_t) { return codec::same_rounding<round_nearest_even>{{}}; });
}

/// As encode_row_nearest, rounding element j of the row stochastically with random[j].
template <class BlockFormat, class Table>
void encode_row_stochastic(const float* row, std::size_t blocks, const std::uint8_t* codes,
                           const Table& table, const std::uint32_t* random,
                           std::uint8_t* out) noexcept {
  encode_row<BlockFormat>(row, blocks, codes, table, out, [random](std::size_t kb) {
    return codec::stochastic_rounding_from{random + kb * BlockFormat::block_size};
  });
}

/// Decodes `count` elements of a row starting at a block boundary: element j from the packed
/// bytes at `bytes`, with the scale value scales[j / B], as codec::decode_value, stored as T.
template <class BlockFormat, class T>
void dequantize_row(const std::uint8_t* bytes, const float* scales, std::size_t count, float s_dec,
                    T* out) noexcept {
  constexpr std::size_t b = BlockFormat::block_size;
  for (std::size_t c0 = 0; c0 < count; c0 += b) {
    const float scale = scales[c0 / b];
    const std::size_t n = count - c0 < b ? count - c0 : b;
    if constexpr (BlockFormat::element_bits == 4) {
      // One decode per code, then a lookup per element.
      float table[16];
      for (int code = 0; code < 16; ++code)
        table[code] =
            codec::decode_value<BlockFormat>(static_cast<std::uint8_t>(code), scale, s_dec);
      for (std::size_t j = 0; j < n; ++j)
        out[c0 + j] = static_cast<T>(table[codec::load_code<BlockFormat>(bytes, c0 + j)]);
    } else {
      for (std::size_t j = 0; j < n; ++j)
        out[c0 + j] = static_cast<T>(codec::decode_value<BlockFormat>(
            codec::load_code<BlockFormat>(bytes, c0 + j), scale, s_dec));
    }
  }
}

/// out[c · rows + k] = tile[k · ld + c] for c < cols, k < rows (a multiple of 16).
inline void transpose_tile(const float* tile, std::size_t ld, std::size_t rows, std::size_t cols,
                           float* out) noexcept {
  for (std::size_t c = 0; c < cols; ++c)
    for (std::size_t k = 0; k < rows; ++k)
      out[c * rows + k] = tile[k * ld + c];
}

} // namespace portable

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) &&                      \
    defined(__AVX512DQ__) && !defined(__CUDA_ARCH__)
/// 1 when the AVX-512 bodies are compiled in (the compiler targets AVX-512 F, BW, VL and DQ).
#define BLOCKSCALE_SIMD_AVX512 1
#else
#define BLOCKSCALE_SIMD_AVX512 0
#endif

#if BLOCKSCALE_SIMD_AVX512
} // namespace detail
} // namespace v0
} // namespace blockscale
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wuninitialized and
// -Wmaybe-uninitialized report once they are inlined (GCC bug 105593): false positives.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
namespace blockscale {
inline namespace v0 {
namespace detail {

/// AVX-512 bodies: each is the portable body on 16 lanes, operation for operation where floats
/// are involved (the same multiply, the same comparisons), so the results are the same bits.
namespace avx512 {

/// How far ahead of the amax pass (in floats) the input is prefetched.
constexpr std::size_t prefetch_distance = 2048;

/// The 16 amax patterns |x| of a vector, as codec::magnitude_bits.
inline __m512i magnitudes(__m512 x) noexcept {
  return _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7FFFFFFF));
}

template <std::size_t B>
void row_block_amax(const float* row, std::size_t blocks, std::uint32_t* amax) noexcept {
  if constexpr (B % 16 == 0) {
    for (std::size_t kb = 0; kb < blocks; ++kb) {
      // This pass is the first to touch the input: ask for the lines a few pages ahead, which
      // the hardware prefetcher, stopping at page boundaries, would fetch late.
      prefetch(row + kb * B + prefetch_distance);
      __m512i m = magnitudes(_mm512_loadu_ps(row + kb * B));
      for (std::size_t j = 16; j < B; j += 16)
        m = _mm512_max_epu32(m, magnitudes(_mm512_loadu_ps(row + kb * B + j)));
      amax[kb] = _mm512_reduce_max_epu32(m);
    }
  } else {
    portable::row_block_amax<B>(row, blocks, amax);
  }
}

inline std::uint32_t amax_bits(const float* values, std::size_t count) noexcept {
  __m512i m = _mm512_setzero_si512();
  std::size_t i = 0;
  for (; i + 16 <= count; i += 16)
    m = _mm512_max_epu32(m, magnitudes(_mm512_loadu_ps(values + i)));
  const std::uint32_t tail = portable::amax_bits(values + i, count - i);
  const std::uint32_t body = _mm512_reduce_max_epu32(m);
  return body > tail ? body : tail;
}

/// detail::e2m1_nearest_even's codes on 16 lanes, by seven comparisons of |y| (false for NaN;
/// AVX-512 compares into masks cheaply), the sign on top, NaN to code 0x7.
inline __m512i e2m1_nearest_even(__m512 y) noexcept {
  const __m512i u = _mm512_castps_si512(y);
  const __m512 a = _mm512_castsi512_ps(magnitudes(y));
  const __m512i one = _mm512_set1_epi32(1);
  __m512i m = _mm512_setzero_si512();
  m = _mm512_mask_add_epi32(m, _mm512_cmp_ps_mask(a, _mm512_set1_ps(0.25f), _CMP_GT_OQ), m, one);
  m = _mm512_mask_add_epi32(m, _mm512_cmp_ps_mask(a, _mm512_set1_ps(0.75f), _CMP_GE_OQ), m, one);
  m = _mm512_mask_add_epi32(m, _mm512_cmp_ps_mask(a, _mm512_set1_ps(1.25f), _CMP_GT_OQ), m, one);
  m = _mm512_mask_add_epi32(m, _mm512_cmp_ps_mask(a, _mm512_set1_ps(1.75f), _CMP_GE_OQ), m, one);
  m = _mm512_mask_add_epi32(m, _mm512_cmp_ps_mask(a, _mm512_set1_ps(2.5f), _CMP_GT_OQ), m, one);
  m = _mm512_mask_add_epi32(m, _mm512_cmp_ps_mask(a, _mm512_set1_ps(3.5f), _CMP_GE_OQ), m, one);
  m = _mm512_mask_add_epi32(m, _mm512_cmp_ps_mask(a, _mm512_set1_ps(5.0f), _CMP_GT_OQ), m, one);
  const __m512i code =
      _mm512_or_si512(m, _mm512_and_si512(_mm512_srli_epi32(u, 28), _mm512_set1_epi32(0x8)));
  const __mmask16 nan = _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
  return _mm512_mask_mov_epi32(code, nan, _mm512_set1_epi32(0x7));
}

/// convert<e2m1>(y, round_stochastic{bits}) on 16 lanes. For |y| < 8 the kept magnitude and the
/// first 32 discarded bits are computed as the general routine defines them: te = max(exponent,
/// 0), t = |y| / 2^(te - 1) (exact: a power-of-two scaling), kept = floor(t), fraction =
/// floor((t - kept) · 2^32) (t - kept and the product are exact, the truncation is the first 32
/// bits); code = 2·te + kept + (fraction + bits ≥ 2^32), saturated at 7. |y| ≥ 8, Inf: 7; NaN: 0x7.
inline __m512i e2m1_stochastic(__m512 y, __m512i bits) noexcept {
  const __m512i u = _mm512_castps_si512(y);
  const __m512i a_bits = magnitudes(y);
  const __m512 a = _mm512_castsi512_ps(a_bits);
  const __m512i exponent = _mm512_sub_epi32(_mm512_srli_epi32(a_bits, 23), _mm512_set1_epi32(127));
  const __m512i te =
      _mm512_min_epi32(_mm512_max_epi32(exponent, _mm512_setzero_si512()), _mm512_set1_epi32(2));
  // 2^(1 - te) as a float: biased exponent 128 - te.
  const __m512 step =
      _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(128), te), 23));
  const __m512 t = _mm512_mul_ps(a, step);
  const __m512 whole = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  const __m512i kept = _mm512_cvttps_epi32(whole);
  const __m512i fraction =
      _mm512_cvttps_epu32(_mm512_mul_ps(_mm512_sub_ps(t, whole), _mm512_set1_ps(4294967296.0f)));
  const __m512i sum = _mm512_add_epi32(fraction, bits);
  const __mmask16 away = _mm512_cmp_epu32_mask(sum, fraction, _MM_CMPINT_LT);
  __m512i code = _mm512_add_epi32(_mm512_slli_epi32(te, 1), kept);
  code = _mm512_mask_add_epi32(code, away, code, _mm512_set1_epi32(1));
  const __mmask16 large = _mm512_cmp_ps_mask(a, _mm512_set1_ps(8.0f), _CMP_GE_OQ);
  code = _mm512_min_epu32(_mm512_mask_mov_epi32(code, large, _mm512_set1_epi32(7)),
                          _mm512_set1_epi32(7));
  code = _mm512_or_si512(code, _mm512_and_si512(_mm512_srli_epi32(u, 28), _mm512_set1_epi32(0x8)));
  const __mmask16 nan = _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
  return _mm512_mask_mov_epi32(code, nan, _mm512_set1_epi32(0x7));
}

/// The high and low 32 bits of the 16 products a · m (Random123's mulhilo on 16 lanes): the
/// even lanes' 64-bit products from one multiply, the odd lanes' from another.
inline void multiply_high_low(__m512i a, __m512i m, __m512i& high, __m512i& low) noexcept {
  const __m512i even = _mm512_mul_epu32(a, m);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  high = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
  low = _mm512_mullo_epi32(a, m);
}

/// Philox4x32-10 on 16 consecutive blocks at once (structure of arrays), the words written in
/// stream order: the same generator as philox4x32_10::generate, block for block.
inline void philox_16_blocks(std::uint64_t first_block, std::uint64_t offset, uint2x32 key,
                             std::uint32_t* out) noexcept {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i base = _mm512_set1_epi32(static_cast<int>(detail::low_word(first_block)));
  __m512i c0 = _mm512_add_epi32(base, lane);
  // The block index's high word, plus the carry out of the low word.
  const __mmask16 carry = _mm512_cmp_epu32_mask(c0, base, _MM_CMPINT_LT);
  __m512i c1 = _mm512_mask_add_epi32(
      _mm512_set1_epi32(static_cast<int>(detail::high_word(first_block))), carry,
      _mm512_set1_epi32(static_cast<int>(detail::high_word(first_block))), _mm512_set1_epi32(1));
  __m512i c2 = _mm512_set1_epi32(static_cast<int>(detail::low_word(offset)));
  __m512i c3 = _mm512_set1_epi32(static_cast<int>(detail::high_word(offset)));
  const __m512i m0 = _mm512_set1_epi32(static_cast<int>(philox4x32_10::multiplier0));
  const __m512i m1 = _mm512_set1_epi32(static_cast<int>(philox4x32_10::multiplier1));
  std::uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < philox4x32_10::rounds; ++round) {
    __m512i high0, low0, high1, low1;
    multiply_high_low(c0, m0, high0, low0);
    multiply_high_low(c2, m1, high1, low1);
    c0 = _mm512_xor_si512(_mm512_xor_si512(high1, c1), _mm512_set1_epi32(static_cast<int>(k0)));
    c1 = low1;
    c2 = _mm512_xor_si512(_mm512_xor_si512(high0, c3), _mm512_set1_epi32(static_cast<int>(k1)));
    c3 = low0;
    k0 += philox4x32_10::weyl0;
    k1 += philox4x32_10::weyl1;
  }
  // Structure of arrays to stream order: words (w0, w1, w2, w3) of block n at out[4n..4n+3].
  const __m512i a = _mm512_unpacklo_epi32(c0, c1), b = _mm512_unpacklo_epi32(c2, c3);
  const __m512i c = _mm512_unpackhi_epi32(c0, c1), d = _mm512_unpackhi_epi32(c2, c3);
  const __m512i v0 = _mm512_unpacklo_epi64(a, b); // blocks 0, 4, 8, 12 (one per 128-bit lane)
  const __m512i v1 = _mm512_unpackhi_epi64(a, b); // blocks 1, 5, 9, 13
  const __m512i v2 = _mm512_unpacklo_epi64(c, d); // blocks 2, 6, 10, 14
  const __m512i v3 = _mm512_unpackhi_epi64(c, d); // blocks 3, 7, 11, 15
  const __m512i v01_even = _mm512_shuffle_i32x4(v0, v1, _MM_SHUFFLE(2, 0, 2, 0)); // 0 8 1 9
  const __m512i v01_odd = _mm512_shuffle_i32x4(v0, v1, _MM_SHUFFLE(3, 1, 3, 1));  // 4 12 5 13
  const __m512i v23_even = _mm512_shuffle_i32x4(v2, v3, _MM_SHUFFLE(2, 0, 2, 0)); // 2 10 3 11
  const __m512i v23_odd = _mm512_shuffle_i32x4(v2, v3, _MM_SHUFFLE(3, 1, 3, 1));  // 6 14 7 15
  _mm512_storeu_si512(out, _mm512_shuffle_i32x4(v01_even, v23_even, _MM_SHUFFLE(2, 0, 2, 0)));
  _mm512_storeu_si512(out + 16, _mm512_shuffle_i32x4(v01_odd, v23_odd, _MM_SHUFFLE(2, 0, 2, 0)));
  _mm512_storeu_si512(out + 32, _mm512_shuffle_i32x4(v01_even, v23_even, _MM_SHUFFLE(3, 1, 3, 1)));
  _mm512_storeu_si512(out + 48, _mm512_shuffle_i32x4(v01_odd, v23_odd, _MM_SHUFFLE(3, 1, 3, 1)));
}

/// fill_random_bits with whole runs of 16 blocks on 16 lanes, the rest by the portable loop.
inline void fill_random_bits(std::uint64_t seed, std::uint64_t offset, std::uint64_t first,
                             std::size_t count, std::uint32_t* out) noexcept {
  std::size_t i = 0;
  const std::size_t lead = static_cast<std::size_t>((4 - first % 4) % 4);
  if (count <= lead + 64) {
    portable::fill_random_bits(seed, offset, first, count, out);
    return;
  }
  portable::fill_random_bits(seed, offset, first, lead, out);
  i = lead;
  const uint2x32 key = detail::philox_key(seed);
  for (; i + 64 <= count; i += 64)
    philox_16_blocks((first + i) / 4, offset, key, out + i);
  portable::fill_random_bits(seed, offset, first + i, count - i, out + i);
}

/// fill_rounding_bits with whole runs of 16 Philox blocks (256 elements) on 16 lanes, the rest by
/// the portable loop.
inline void fill_rounding_bits(std::uint64_t seed, std::uint64_t offset, std::uint64_t first,
                               std::size_t count, std::uint32_t* out) noexcept {
  constexpr std::size_t per_block = rounding_elements_per_block;
  const std::size_t lead = static_cast<std::size_t>((per_block - first % per_block) % per_block);
  if (count <= lead + 16 * per_block) {
    portable::fill_rounding_bits(seed, offset, first, count, out);
    return;
  }
  portable::fill_rounding_bits(seed, offset, first, lead, out);
  std::size_t i = lead;
  const uint2x32 key = detail::philox_key(seed);
  alignas(64) std::uint32_t words[64];
  for (; i + 16 * per_block <= count; i += 16 * per_block) {
    philox_16_blocks((first + i) / per_block, offset, key, words);
    std::uint32_t* to = out + i;
    for (std::size_t w = 0; w < 64; ++w) // byte k of word w serves element 4w + k
      for (std::size_t k = 0; k < 4; ++k)
        to[4 * w + k] = (words[w] << (24 - 8 * k)) & 0xFF000000u;
  }
  portable::fill_rounding_bits(seed, offset, first + i, count - i, out + i);
}

/// Packs 16 codes (int32 lanes, each below 16) into 8 bytes, the even element in the low nibble,
/// masked by `keep` (0xFF or 0x00).
inline void store_nibbles(__m512i codes, std::uint8_t keep, std::uint8_t* out) noexcept {
  // In each 64-bit lane the odd code sits at bit 32: shifted down by 28 it lands at bit 4.
  const __m512i pairs = _mm512_or_si512(codes, _mm512_srli_epi64(codes, 28));
  const __m128i bytes =
      _mm_and_si128(_mm512_cvtepi64_epi8(pairs), _mm_set1_epi8(static_cast<char>(keep)));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out), bytes);
}

/// Whether the AVX-512 element bodies serve this format: E2M1 in blocks of a multiple of 16.
template <class BlockFormat>
constexpr bool e2m1_blocks =
    std::is_same<typename BlockFormat::element_type, e2m1>::value&& BlockFormat::block_size % 16 ==
    0;

/// The element loop of a row: f_b and keep from the block's scale code, x · f_b on 16 lanes,
/// `encode(y, j)` for the lanes starting at element j of the row, then packing.
template <class BlockFormat, class Table, class Encode>
void encode_row(const float* row, std::size_t blocks, const std::uint8_t* codes, const Table& table,
                std::uint8_t* out, Encode encode) noexcept {
  constexpr std::size_t b = BlockFormat::block_size;
  for (std::size_t kb = 0; kb < blocks; ++kb) {
    const __m512 factor = _mm512_set1_ps(table.factor[codes[kb]]);
    const std::uint8_t keep = table.keep[codes[kb]];
    for (std::size_t j = kb * b; j < (kb + 1) * b; j += 16)
      store_nibbles(encode(_mm512_mul_ps(_mm512_loadu_ps(row + j), factor), j), keep, out + j / 2);
  }
}

template <class BlockFormat, class Table>
void encode_row_nearest(const float* row, std::size_t blocks, const std::uint8_t* codes,
                        const Table& table, std::uint8_t* out) noexcept {
  if constexpr (e2m1_blocks<BlockFormat>)
    encode_row<BlockFormat>(row, blocks, codes, table, out,
                            [](__m512 y, std::size_t) { return e2m1_nearest_even(y); });
  else
    portable::encode_row_nearest<BlockFormat>(row, blocks, codes, table, out);
}

template <class BlockFormat, class Table>
void encode_row_stochastic(const float* row, std::size_t blocks, const std::uint8_t* codes,
                           const Table& table, const std::uint32_t* random,
                           std::uint8_t* out) noexcept {
  if constexpr (e2m1_blocks<BlockFormat>)
    encode_row<BlockFormat>(row, blocks, codes, table, out, [random](__m512 y, std::size_t j) {
      return e2m1_stochastic(y, _mm512_loadu_si512(random + j));
    });
  else
    portable::encode_row_stochastic<BlockFormat>(row, blocks, codes, table, random, out);
}

/// Transposes a 16 × 16 block: out[c · out_ld + k] = in[k · in_ld + c].
inline void transpose_16x16(const float* in, std::size_t in_ld, float* out,
                            std::size_t out_ld) noexcept {
  __m512 r[16], t[16];
  // Rows 2i, 2i + 1 interleaved, then 4 × 4 blocks within each 128-bit lane.
  for (int i = 0; i < 16; ++i)
    r[i] = _mm512_loadu_ps(in + static_cast<std::size_t>(i) * in_ld);
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  // r[4g + j] now holds, in each 128-bit lane L, rows 4g..4g+3 of column 4L + j. Gather, for each
  // column, lane L of r[j], r[4 + j], r[8 + j], r[12 + j] (row groups 0..3) in two steps.
  for (int j = 0; j < 4; ++j) {
    const __m512 even01 = _mm512_shuffle_f32x4(r[j], r[4 + j], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512 odd01 = _mm512_shuffle_f32x4(r[j], r[4 + j], _MM_SHUFFLE(3, 1, 3, 1));
    const __m512 even23 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512 odd23 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], _MM_SHUFFLE(3, 1, 3, 1));
    const auto store = [&](int column, __m512 value) {
      _mm512_storeu_ps(out + static_cast<std::size_t>(column) * out_ld, value);
    };
    store(j, _mm512_shuffle_f32x4(even01, even23, _MM_SHUFFLE(2, 0, 2, 0)));
    store(8 + j, _mm512_shuffle_f32x4(even01, even23, _MM_SHUFFLE(3, 1, 3, 1)));
    store(4 + j, _mm512_shuffle_f32x4(odd01, odd23, _MM_SHUFFLE(2, 0, 2, 0)));
    store(12 + j, _mm512_shuffle_f32x4(odd01, odd23, _MM_SHUFFLE(3, 1, 3, 1)));
  }
}

inline void transpose_tile(const float* tile, std::size_t ld, std::size_t rows, std::size_t cols,
                           float* out) noexcept {
  std::size_t c = 0;
  for (; c + 16 <= cols; c += 16)
    for (std::size_t k = 0; k < rows; k += 16)
      transpose_16x16(tile + k * ld + c, ld, out + c * rows + k, rows);
  for (; c < cols; ++c)
    for (std::size_t k = 0; k < rows; ++k)
      out[c * rows + k] = tile[k * ld + c];
}

/// bfloat16 bits of 16 floats, as detail::float_to_bfloat16_bits.
inline __m256i bfloat16_bits(__m512 x) noexcept {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), lsb)), 16);
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x0040));
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rounded, nan, quiet));
}

template <class BlockFormat, class T>
void dequantize_row(const std::uint8_t* bytes, const float* scales, std::size_t count, float s_dec,
                    T* out) noexcept {
  constexpr bool fits = e2m1_blocks<BlockFormat> &&
                        (std::is_same<T, float>::value || std::is_same<T, bfloat16>::value);
  if constexpr (fits) {
    constexpr std::size_t b = BlockFormat::block_size;
    // The 16 E2M1 values by code, and the decode of every code at once: (q · S) · s_dec.
    alignas(64) float values[16];
    for (int code = 0; code < 16; ++code)
      values[code] = static_cast<float>(e2m1::from_bits(static_cast<std::uint8_t>(code)));
    const __m512 element = _mm512_load_ps(values);
    const __m512 decode = _mm512_set1_ps(s_dec);
    std::size_t c0 = 0;
    for (; c0 + b <= count; c0 += b) {
      const __m512 table =
          _mm512_mul_ps(_mm512_mul_ps(element, _mm512_set1_ps(scales[c0 / b])), decode);
      for (std::size_t j = 0; j < b; j += 16) {
        const __m128i packed =
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes + (c0 + j) / 2));
        const __m128i low = _mm_and_si128(packed, _mm_set1_epi8(0x0F));
        const __m128i high = _mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0x0F));
        const __m512i index = _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(low, high));
        // The output is written, not read: ask for its lines ahead, for writing, so the
        // read-for-ownership of each line overlaps the work instead of stalling the store.
        prefetch<true>(out + c0 + j + prefetch_distance);
        const __m512 value = _mm512_permutexvar_ps(index, table);
        if constexpr (std::is_same<T, float>::value)
          _mm512_storeu_ps(out + c0 + j, value);
        else
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + c0 + j), bfloat16_bits(value));
      }
    }
    if (c0 < count)
      portable::dequantize_row<BlockFormat>(bytes + c0 / 2, scales + c0 / b, count - c0, s_dec,
                                            out + c0);
  } else {
    portable::dequantize_row<BlockFormat>(bytes, scales, count, s_dec, out);
  }
}

} // namespace avx512
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

/// The bodies the fast paths call: SIMD where compiled in, portable otherwise.
namespace simd {
#if BLOCKSCALE_SIMD_AVX512
using avx512::amax_bits;
using avx512::dequantize_row;
using avx512::encode_row_nearest;
using avx512::encode_row_stochastic;
using avx512::fill_random_bits;
using avx512::fill_rounding_bits;
using avx512::row_block_amax;
using avx512::transpose_tile;
#else
using portable::amax_bits;
using portable::dequantize_row;
using portable::encode_row_nearest;
using portable::encode_row_stochastic;
using portable::fill_random_bits;
using portable::fill_rounding_bits;
using portable::row_block_amax;
using portable::transpose_tile;
#endif
} // namespace simd

} // namespace detail
} // namespace v0
} // namespace blockscale
