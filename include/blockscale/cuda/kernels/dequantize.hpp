/// \file cuda/kernels/dequantize.hpp
/// The dequantize kernel as a CTA program (cuda/warp.hpp): every value is the codec's
/// (q · S_b) · s_dec in float (codec::decode_value), rounded to the output type — what the host's
/// `dequantize` writes, bit for bit. A lane owns 32 values of a row (two blocks of 16 or one of
/// 32): one 16-byte load of their codes, the short body, 16-byte stores; a warp covers 1024
/// consecutive values of a row, and units of a warp's width are taken grid-stride. Ragged ends,
/// misaligned rows, tensor-core scale layouts and blocks the short body cannot take go block by
/// block (value by value where needed).
#pragma once

#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

#include "../../block/codec.hpp"
#include "../../block/matrix_view.hpp"
#include "../../block/quantized_view.hpp"
#include "../../config.hpp"
#include "../../numeric/format.hpp"
#include "../../numeric/half.hpp"
#include "../memory.hpp"
#include "../warp.hpp"
#include "../warp/dequant.hpp"

namespace blockscale {
inline namespace v0 {
namespace cuda {

/// Decodes the first `cols` columns of `q` (q.cols(), or q.padded_cols() to include the padding)
/// into `out` (float, bfloat16 or float16).
///
/// E2M1 blocks whose scale is finite take a short body with the same bits, the GEMM's
/// dequantizer (cuda/warp/dequant.hpp) followed by one float multiply: `warp::dequantize8` turns
/// eight codes into bf16 pairs of v · S · 2^-d exactly (v has two significant bits and S at most
/// four; d = dequant_scale<Scale>::offset, the multiplier from the code's bits without a branch),
/// and one multiply by s_dec · 2^d rounds v · S · s_dec once — what (v · S) · s_dec does, v · S
/// being exact. That needs s_dec · 2^d exact (below 2^128, tested once per launch) and IEEE
/// subnormals (no -ftz). NaN and Inf scales, other element formats and huge s_dec take
/// codec::decode_value value by value.
///
/// A lane owns `blocks_per_lane` consecutive blocks of a row (a unit: 32 lanes of them), which
/// spreads the unit's index arithmetic over more values.
template <class BlockFormat, class T>
struct dequantize_program {
  static constexpr int warps = 8;
  static constexpr int threads = warps * warp_size;
  static constexpr int phases = 1;
  static constexpr int b = BlockFormat::block_size;
  static constexpr int blocks_per_lane = b >= 32 ? 1 : 2;
  static constexpr int element_bytes = static_cast<int>(codec::element_bytes<BlockFormat>(b));
  using scale_type = typename BlockFormat::scale_type;
  /// Whether the short body applies: E2M1 elements in whole words, a scale format with a
  /// dequantizer multiplier.
  static constexpr bool e2m1 =
      std::is_same<typename BlockFormat::element_type::format, e2m1_format>::value && b % 8 == 0 &&
      warp::has_dequant_scale<scale_type>;

  struct shared_storage {
    int unused;
  };

  const_quantized_view<BlockFormat> q;
  matrix_view<T> out;
  std::size_t cols = 0;

  BLOCKSCALE_HOST_DEVICE std::size_t blocks() const noexcept { return (cols + b - 1) / b; }
  BLOCKSCALE_HOST_DEVICE std::size_t units_across() const noexcept {
    constexpr std::size_t per_unit = static_cast<std::size_t>(warp_size) * blocks_per_lane;
    return (blocks() + per_unit - 1) / per_unit;
  }
  BLOCKSCALE_HOST_DEVICE std::size_t units() const noexcept { return q.rows() * units_across(); }

  template <int Phase, class Warp>
  BLOCKSCALE_HOST_DEVICE void run(Warp& warp, cta_coord cta, shared_storage&) const {
    const std::size_t total = units(), across = units_across();
    const float s_dec = total == 0 ? 0.0f : q.decode_scale();
    float wide_s_dec = 0.0f; // s_dec · 2^d, exact unless it overflows (NaN fails the test too)
    if constexpr (e2m1)
      wide_s_dec = s_dec * blockscale::detail::exp2i(warp::dequant_scale<scale_type>::offset);
    const bool split = e2m1 && wide_s_dec <= FLT_MAX;
    const bool row_major = q.layout() == scale_layout::row_major;
    for (std::size_t unit = static_cast<std::size_t>(cta.index) * warps + warp.index();
         unit < total; unit += static_cast<std::size_t>(cta.count) * warps) {
      // 32-bit division: the launcher keeps the unit count below 2^32.
      const auto u = static_cast<std::uint32_t>(unit), a = static_cast<std::uint32_t>(across);
      const std::size_t r = u / a;
      warp.each([&](int lane) {
        const std::size_t first =
            (static_cast<std::size_t>(u % a) * warp_size + static_cast<std::size_t>(lane)) *
            blocks_per_lane;
        lane_blocks<Warp>(r, first, split && row_major, s_dec, wide_s_dec);
      });
    }
  }

private:
  static constexpr int span = b * blocks_per_lane;                        ///< the values of a lane
  static constexpr int block_words = b * static_cast<int>(sizeof(T)) / 4; ///< output words
  /// Whether the lane's blocks may go through 16-byte loads and stores together.
  static constexpr bool vector_lane =
      e2m1 && element_bytes * blocks_per_lane % 16 == 0 && block_words * blocks_per_lane % 4 == 0;

  /// The lane's blocks [first, first + blocks_per_lane) of row r. `fast`: E2M1 with a usable
  /// s_dec and row-major scales. When they lie inside the row, both ends are 16-byte aligned and
  /// their scales are finite, one pass: vector loads of the codes, the short body, vector stores.
  /// Otherwise block by block.
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE void lane_blocks(std::size_t r, std::size_t first,
                                                                 bool fast, float s_dec,
                                                                 float wide_s_dec) const noexcept {
    const std::size_t c0 = first * b;
    if constexpr (vector_lane) {
      const std::uint8_t* from = q.row(r) + codec::element_bytes<BlockFormat>(c0);
      T* to = out.row(r) + c0;
      if (fast && c0 + span <= cols && detail::is_aligned(from, 16) && detail::is_aligned(to, 16)) {
        std::uint8_t codes[blocks_per_lane];
        bool finite = true;
        BLOCKSCALE_UNROLL
        for (int k = 0; k < blocks_per_lane; ++k) {
          codes[k] = q.scales()[r * q.blocks_per_row() + first + static_cast<std::size_t>(k)];
          finite = finite && short_body(codes[k]);
        }
        if (finite) {
          constexpr int in_words = element_bytes * blocks_per_lane / 4;
          alignas(16) std::uint32_t in[in_words];
          alignas(16) std::uint32_t words[block_words * blocks_per_lane];
          BLOCKSCALE_UNROLL
          for (int i = 0; i < in_words; i += 4)
            detail::copy16(in + i, from + 4 * i);
          BLOCKSCALE_UNROLL
          for (int k = 0; k < blocks_per_lane; ++k)
            decode_e2m1<Warp>(in + k * (element_bytes / 4), codes[k], wide_s_dec,
                              words + k * block_words);
          BLOCKSCALE_UNROLL
          for (int i = 0; i < block_words * blocks_per_lane; i += 4)
            detail::copy16(reinterpret_cast<unsigned char*>(to) + 4 * i, words + i);
          return;
        }
      }
    }
    BLOCKSCALE_UNROLL
    for (int k = 0; k < blocks_per_lane; ++k)
      block<Warp>(r, first + static_cast<std::size_t>(k), fast, s_dec, wide_s_dec);
  }

  /// Block kb of row r on its own: the short body when `fast` and its scale is finite, else value
  /// by value; stores value by value at a ragged end or a misaligned address.
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE void
  block(std::size_t r, std::size_t kb, bool fast, float s_dec, float wide_s_dec) const noexcept {
    const std::size_t c0 = kb * b;
    if (c0 >= cols)
      return;
    const std::uint8_t code = q.scales()[q.scale_index(r, kb)];
    alignas(16) std::uint8_t bytes[element_bytes];
    detail::store_bytes<element_bytes>(bytes, q.row(r) + codec::element_bytes<BlockFormat>(c0));
    alignas(16) T values[b];
    if (fast && short_body(code)) {
      std::uint32_t in[element_bytes / 4 > 0 ? element_bytes / 4 : 1];
      std::uint32_t words[block_words > 0 ? block_words : 1];
      std::memcpy(in, bytes, sizeof in);
      decode_e2m1<Warp>(in, code, wide_s_dec, words);
      std::memcpy(values, words, sizeof values);
    } else {
      const float scale = static_cast<float>(scale_type::from_bits(code));
      BLOCKSCALE_UNROLL
      for (int j = 0; j < b; ++j)
        values[j] = static_cast<T>(codec::decode_value<BlockFormat>(
            codec::load_code<BlockFormat>(bytes, static_cast<std::size_t>(j)), scale, s_dec));
    }
    const int valid = cols - c0 < static_cast<std::size_t>(b) ? static_cast<int>(cols - c0) : b;
    T* to = out.row(r) + c0;
    constexpr int bytes_out = b * static_cast<int>(sizeof(T));
    if (bytes_out % 16 == 0 && valid == b && detail::is_aligned(to, 16)) {
      for (int i = 0; i < bytes_out; i += 16)
        detail::copy16(reinterpret_cast<unsigned char*>(to) + i,
                       reinterpret_cast<const unsigned char*>(values) + i);
    } else {
      BLOCKSCALE_UNROLL
      for (int j = 0; j < b; ++j) // unrolled and predicated: values[] stays in registers
        if (j < valid)
          to[j] = values[j];
    }
  }

  /// Whether the short body gives a block of scale `code` the reference's bits: a finite scale
  /// whose products with every E2M1 value stay finite in float. (With UE8M0 the reference's
  /// v · S overflows to Inf from S = 2^126 up — 6 · 2^126 >= 2^128 — where the short body's
  /// v · S · 2^-d would not; the single-multiplier formats stay below 2^28.)
  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE static bool short_body(std::uint8_t code) noexcept {
    if constexpr (e2m1) {
      using traits = format_traits<typename scale_type::format>;
      if constexpr (warp::dequant_scale<scale_type>::power_of_two)
        return scale_type::from_bits(code).is_finite() &&
               (code & traits::magnitude_mask) < traits::bias + 126;
      else
        return scale_type::from_bits(code).is_finite();
    } else {
      return false;
    }
  }

  /// The short body (see the struct comment) of one block: in[] holds its B codes, words[] gets
  /// its B outputs as T, two per word for 16-bit T. Element j is the bf16 v_j · S · 2^-d widened,
  /// times s_dec · 2^d (rounded once), converted to T.
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE static void
  decode_e2m1(const std::uint32_t* in, std::uint8_t code, float wide_s_dec,
              std::uint32_t* words) noexcept {
    if constexpr (e2m1) {
      const warp::bf16_multiplier multiplier = warp::dequant_scale<scale_type>::multiplier(code);
      BLOCKSCALE_UNROLL
      for (int w = 0; w < b / 8; ++w) {
        std::uint32_t pairs[4]; // pairs[j]: elements j (low half) and j + 4 (high half)
        warp::dequantize8<Warp, scale_type>(in[w], multiplier, pairs);
        float decoded[8];
        BLOCKSCALE_UNROLL
        for (int j = 0; j < 4; ++j) {
          decoded[j] = blockscale::detail::bit_cast<float>(pairs[j] << 16) * wide_s_dec;
          decoded[j + 4] = blockscale::detail::bit_cast<float>(pairs[j] & 0xFFFF0000u) * wide_s_dec;
        }
        if constexpr (sizeof(T) == 4) {
          BLOCKSCALE_UNROLL
          for (int j = 0; j < 8; ++j)
            words[8 * w + j] = blockscale::detail::bit_cast<std::uint32_t>(decoded[j]);
        } else {
          BLOCKSCALE_UNROLL
          for (int j = 0; j < 4; ++j)
            words[4 * w + j] = narrow_pair(decoded[2 * j], decoded[2 * j + 1]);
        }
      }
    }
  }

  /// Two decoded floats as T (16-bit), rounded to nearest even, `low` in the low half: one
  /// conversion instruction on the device (the same bits as the host's conversion for every
  /// non-NaN float; no NaN reaches it).
  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE static std::uint32_t
  narrow_pair(float low, float high) noexcept {
#if defined(__CUDA_ARCH__)
    std::uint32_t bits = 0;
    if constexpr (std::is_same<T, bfloat16>::value) {
      const __nv_bfloat162 v = __floats2bfloat162_rn(low, high);
      std::memcpy(&bits, &v, sizeof bits);
    } else {
      const __half2 v = __floats2half2_rn(low, high);
      std::memcpy(&bits, &v, sizeof bits);
    }
    return bits;
#else
    return static_cast<std::uint32_t>(static_cast<T>(low).bits()) |
           static_cast<std::uint32_t>(static_cast<T>(high).bits()) << 16;
#endif
  }
};

} // namespace cuda
} // namespace v0
} // namespace blockscale
