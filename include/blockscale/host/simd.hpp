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

#include "../block/codec.hpp"
#include "../config.hpp"

namespace blockscale {
inline namespace v0 {
namespace detail {

struct factor_table;

/// The portable bodies: loops over the codec.
namespace portable {

/// The amax pattern (codec::amax_bits) of `count` values.
inline std::uint32_t amax_bits(const float* values, std::size_t count) noexcept {
  std::uint32_t acc = 0;
  for (std::size_t i = 0; i < count; ++i)
    acc = codec::amax_bits(acc, values[i]);
  return acc;
}

/// amax patterns (codec::amax_bits) of `blocks` consecutive blocks of B values.
template <std::size_t B>
void row_block_amax(const float* row, std::size_t blocks, std::uint32_t* amax) noexcept {
  for (std::size_t kb = 0; kb < blocks; ++kb)
    amax[kb] = codec::block_amax_bits(row + kb * B, static_cast<int>(B));
}

/// Encodes `blocks` blocks of a row, block kb with the scale code codes[kb] (its factor and keep
/// from `table`), nearest-even, and stores them at `out`.
template <class BlockFormat, class Table>
void encode_row_nearest(const float* row, std::size_t blocks, const std::uint8_t* codes,
                        const Table& table, std::uint8_t* out) noexcept {
  constexpr std::size_t b = BlockFormat::block_size;
  std::uint8_t element_codes[b];
  for (std::size_t kb = 0; kb < blocks; ++kb) {
    codec::encode_block<BlockFormat>(row + kb * b, table.factor[codes[kb]],
                                     table.keep[codes[kb]] != 0,
                                     codec::same_rounding<round_nearest_even>{{}}, element_codes);
    codec::store_block<BlockFormat>(element_codes, out + codec::element_bytes<BlockFormat>(kb * b));
  }
}

/// As encode_row_nearest, rounding element j of the row stochastically with random[j].
template <class BlockFormat, class Table>
void encode_row_stochastic(const float* row, std::size_t blocks, const std::uint8_t* codes,
                           const Table& table, const std::uint32_t* random,
                           std::uint8_t* out) noexcept {
  constexpr std::size_t b = BlockFormat::block_size;
  std::uint8_t element_codes[b];
  for (std::size_t kb = 0; kb < blocks; ++kb) {
    codec::encode_block<BlockFormat>(row + kb * b, table.factor[codes[kb]],
                                     table.keep[codes[kb]] != 0,
                                     codec::stochastic_rounding_from{random + kb * b},
                                     element_codes);
    codec::store_block<BlockFormat>(element_codes, out + codec::element_bytes<BlockFormat>(kb * b));
  }
}

/// Decodes `count` elements of a row starting at a block boundary: element j from the packed
/// bytes at `bytes`, with the scale value scales[j / B], as codec::decode_value, stored as T.
template <class BlockFormat, class T>
void dequantize_row(const std::uint8_t* bytes, const float* scales, std::size_t count,
                    float s_dec, T* out) noexcept {
  constexpr std::size_t b = BlockFormat::block_size;
  for (std::size_t c0 = 0; c0 < count; c0 += b) {
    const float scale = scales[c0 / b];
    const std::size_t n = count - c0 < b ? count - c0 : b;
    if constexpr (BlockFormat::element_bits == 4) {
      // One decode per code, then a lookup per element.
      float table[16];
      for (int code = 0; code < 16; ++code)
        table[code] = codec::decode_value<BlockFormat>(static_cast<std::uint8_t>(code), scale, s_dec);
      for (std::size_t j = 0; j < n; ++j)
        out[c0 + j] = static_cast<T>(table[codec::load_code<BlockFormat>(bytes, c0 + j)]);
    } else {
      for (std::size_t j = 0; j < n; ++j)
        out[c0 + j] = static_cast<T>(codec::decode_value<BlockFormat>(
            codec::load_code<BlockFormat>(bytes, c0 + j), scale, s_dec));
    }
  }
}

/// out[c · 32 + k] = tile[k · ld + c] for c < cols, k < 32: 32 input rows to `cols` rows of 32.
inline void transpose_tile(const float* tile, std::size_t ld, std::size_t cols,
                           float* out) noexcept {
  for (std::size_t c = 0; c < cols; ++c)
    for (std::size_t k = 0; k < 32; ++k)
      out[c * 32 + k] = tile[k * ld + c];
}

} // namespace portable

/// The bodies the fast paths call: SIMD where compiled in, portable otherwise.
namespace simd {
using portable::amax_bits;
using portable::encode_row_nearest;
using portable::dequantize_row;
using portable::encode_row_stochastic;
using portable::row_block_amax;
using portable::transpose_tile;
} // namespace simd

} // namespace detail
} // namespace v0
} // namespace blockscale
