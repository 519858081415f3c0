/// \file block/codec.hpp
/// The codec: the only place where the rules of block-scaled quantization are written. Every
/// quantizer is a loop over these functions — the host reference path block by block
/// (host/quantize_reference.hpp), the host fast path panel by panel with SIMD bodies where they are
/// bit-identical (host/quantize_fast.hpp), and a CUDA kernel thread by thread — so they agree by
/// construction. All functions are `__host__ __device__`, allocate nothing and throw nothing.
///
/// The rules, for a block of B values x (Transformer Engine's FP32 operation order, for every
/// format; s_enc and s_dec = 1 / s_enc come from quantize_params):
///   amax_b = max |x|                           (NaN if any x is NaN)            block_amax_bits
///   m      = s_enc · fp32(1 / target)          (once per call)                  quantize_params
///   S_b    = Scale(min(amax_b · m, FLT_MAX))   rounded by the rule's tag        scale_code
///   f_b    = min(1 / (float(S_b) · s_dec), FLT_MAX)                             encode_factor
///   q      = Element(x · f_b)                  nearest-even or stochastic       encode_element
///   a block whose S_b is zero or NaN stores zero codes                          keeps_elements
///   decoded value = (float(q) · float(S_b)) · s_dec                             decode_value
/// Stochastic rounding rounds element (r, c) of the quantized matrix with the 8 random bits of
/// rounding_bits(seed, offset, r · padded_cols + c) (random_index; numeric/random.hpp): one
/// Philox4x32-10 call per 16 elements.
#pragma once

#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../config.hpp"
#include "../detail/bits.hpp"
#include "../numeric/convert.hpp"
#include "../numeric/packed.hpp"
#include "../numeric/random.hpp"
#include "../numeric/rounding.hpp"
#include "block_format.hpp"
#include "matrix_view.hpp"
#include "quantize_params.hpp"
#include "quantized_shape.hpp"

namespace blockscale {
inline namespace v0 {

/// What quantization saw, for metrics and tensor-scale policies.
struct quantize_stats {
  std::uint64_t blocks = 0;           ///< logical blocks (a tile counts once)
  std::uint64_t saturated_scales = 0; ///< blocks whose ideal scale exceeded the scale format's max
  std::uint64_t zero_scales = 0;      ///< blocks with a zero scale (all their elements are zero)
  std::uint64_t nan_scales = 0;       ///< blocks holding a NaN (NaN scale where the format has one)
  float amax = 0.0f;                  ///< max |x| over the data as quantized (NaN if any NaN)

  /// Adds the statistics of another part of the same quantization.
  BLOCKSCALE_HOST_DEVICE void merge(const quantize_stats& other) noexcept;
};

namespace codec {

// ---- amax -------------------------------------------------------------------------------------

/// The bit pattern of |x|.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE BLOCKSCALE_BIT_CAST_CONSTEXPR std::uint32_t
magnitude_bits(float x) noexcept {
  return detail::bit_cast<std::uint32_t>(x) & 0x7FFFFFFFu;
}

/// max(acc, |x|) on bit patterns. Patterns of non-negative floats order as their values, and every
/// NaN pattern lies above Inf's, so one unsigned max tracks the amax and whether a NaN was seen.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE BLOCKSCALE_BIT_CAST_CONSTEXPR std::uint32_t
amax_bits(std::uint32_t acc, float x) noexcept {
  const std::uint32_t m = magnitude_bits(x);
  return m > acc ? m : acc;
}

/// The amax an accumulated pattern stands for: the value itself, or the quiet NaN for any NaN.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE BLOCKSCALE_BIT_CAST_CONSTEXPR float
amax_value(std::uint32_t bits) noexcept {
  return detail::bit_cast<float>(bits > 0x7F800000u ? 0x7FC00000u : bits);
}

/// The amax pattern of `count` values.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE BLOCKSCALE_BIT_CAST_CONSTEXPR std::uint32_t
block_amax_bits(const float* x, int count) noexcept {
  std::uint32_t acc = 0;
  for (int j = 0; j < count; ++j)
    acc = amax_bits(acc, x[j]);
  return acc;
}

// ---- the block scale ----------------------------------------------------------------------------

/// amax_b · m capped at FLT_MAX, NaN kept: what the scale format rounds.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE constexpr float capped(float scaled) noexcept {
  return scaled < FLT_MAX ? scaled : (scaled == scaled ? FLT_MAX : scaled);
}

} // namespace codec

namespace detail {

/// Whether a scale format's nearest-even codes can come from one float addition
/// (scale_code_nearest_by_addition): an unsigned format whose smallest normal power of two is a
/// normal float.
template <class Format>
inline constexpr bool nearest_by_addition =
    !format_traits<Format>::is_signed && format_traits<Format>::mantissa_bits >= 1 &&
    format_traits<Format>::mantissa_bits <= 20 && format_traits<Format>::min_exponent >= -126;

/// Whether a scale format is float's exponent field alone (UE8M0: 8 bits, bias 127, no mantissa,
/// no zero, NaN 0xFF), so that directed roundings are shifts of the float's bits.
template <class Format>
inline constexpr bool float_exponent_field =
    !format_traits<Format>::is_signed && format_traits<Format>::mantissa_bits == 0 &&
    format_traits<Format>::exponent_bits == 8 && format_traits<Format>::bias == 127 &&
    !format_traits<Format>::has_subnormals &&
    format_traits<Format>::nonfinite == nonfinite_encoding::nan_only;

/// min(s, bound) for a number `bound`, and a NaN when s is NaN (PTX `min.NaN.f32` on the device:
/// one instruction; which NaN does not matter to its callers).
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE float min_keeping_nan(float s, float bound) noexcept {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float d;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(s), "f"(bound));
  return d;
#else
  return s <= bound ? s : (s == s ? bound : s);
#endif
}

/// convert<Format>(min(s, FLT_MAX), round_nearest_even{}).bits() for s >= +0 or NaN, by one float
/// addition (an exhaustive test checks every such float). With c = min(s, max) (NaN kept) and
/// 2^e = the binade of max(c, 2^min_exponent), c + 1.5 · 2^(e + 23 - M) rounds c to a multiple of
/// the format's quantum 2^(e - M) there, ties to even, exactly as the format rounds; the sum's low
/// bits count those quanta k, and the code is ((e - min_exponent) << M) + k, a carry into the next
/// binade included.
template <class Format>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE std::uint8_t
scale_code_nearest_by_addition(float s) noexcept {
  using traits = format_traits<Format>;
  constexpr int m = traits::mantissa_bits;
  constexpr float max = decode<Format>(traits::max_code);
  constexpr float min_normal = exp2i(traits::min_exponent);
  constexpr float magic_factor = 1.5f * exp2i(23 - m);
  // The code is sum - 2^e + ((e - min_exponent) << M) less the magic's own bits, in integers.
  constexpr std::uint32_t offset = (static_cast<std::uint32_t>(23 - m) << 23) + 0x00400000u +
                                   (static_cast<std::uint32_t>(127 + traits::min_exponent) << m);
  const float c = min_keeping_nan(s, max);          // above max (Inf too): max; NaN stays NaN
  const float q = c >= min_normal ? c : min_normal; // NaN: min_normal (only its binade is used)
  const std::uint32_t power = bit_cast<std::uint32_t>(q) & 0x7F800000u;
  const float sum = c + bit_cast<float>(power) * magic_factor; // exact product
  std::uint32_t code = bit_cast<std::uint32_t>(sum) - power + (power >> (23 - m)) - offset;
  if constexpr (!traits::has_subnormals) { // field 0 is the smallest normal binade, no zero
    code -= 1u << m;
    code = static_cast<std::int32_t>(code) < 0 ? 0u : code;
  }
  constexpr std::uint8_t nan = traits::has_nan ? traits::nan_code : traits::max_code;
  return c == c ? static_cast<std::uint8_t>(code) : nan;
}

/// convert<Format>(min(s, FLT_MAX), round_down{}).bits() for a float_exponent_field format and
/// s >= +0 or NaN: the float's exponent field (0 below 2^-126, where 2^-127 is the only value not
/// above s; 0xFF for NaN).
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE BLOCKSCALE_BIT_CAST_CONSTEXPR std::uint8_t
exponent_field_down(float s) noexcept {
  return static_cast<std::uint8_t>(bit_cast<std::uint32_t>(codec::capped(s)) >> 23);
}

/// As exponent_field_down, rounding up: the field of the bits plus one less than a binade's
/// quantum (so any nonzero mantissa carries into the next field), 2^-127 for s <= 2^-127, the max
/// 2^127 for anything above it, 0xFF for NaN.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE BLOCKSCALE_BIT_CAST_CONSTEXPR std::uint8_t
exponent_field_up(float s) noexcept {
  const float c = codec::capped(s);
  const std::uint32_t b = bit_cast<std::uint32_t>(c);
  // Below 2^-126 the values are 2^-127 · (b / 2^22): up to 2^-127 (b <= 2^22) gives code 0.
  const std::uint32_t field = (b + (b < 0x00800000u ? 0x003FFFFFu : 0x007FFFFFu)) >> 23;
  return c == c ? static_cast<std::uint8_t>(field < 0xFEu ? field : 0xFEu) : std::uint8_t{0xFF};
}

} // namespace detail

namespace codec {

/// The block scale code S_b for amax_b · m (before capping; >= +0 or NaN, as a block's amax times
/// a positive multiplier always is), rounded with `rounding`: convert<Scale>(capped(scaled),
/// rounding).bits(). The scale formats of the presets take shorter bodies with the same codes
/// (nearest-even by one float addition; UE8M0's directed roundings on the float's bits).
template <class Scale, class Rounding>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE std::uint8_t scale_code(float scaled,
                                                                      Rounding rounding) noexcept {
  using format = typename Scale::format;
  if constexpr (std::is_same<Rounding, round_nearest_even>::value &&
                detail::nearest_by_addition<format>) {
    return detail::scale_code_nearest_by_addition<format>(scaled);
  } else if constexpr (std::is_same<Rounding, round_down>::value &&
                       detail::float_exponent_field<format>) {
    return detail::exponent_field_down(scaled);
  } else if constexpr (std::is_same<Rounding, round_up>::value &&
                       detail::float_exponent_field<format>) {
    return detail::exponent_field_up(scaled);
  } else {
    return convert<Scale>(capped(scaled), rounding).bits();
  }
}

/// Whether amax_b · m (before capping) would round, under `Rounding` and with an unbounded
/// exponent, above the scale format's max: the block's scale saturated. NaN never saturates. A
/// scale of exactly the max reached by rounding down is not saturated.
template <class Scale, class Rounding>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE BLOCKSCALE_BIT_CAST_CONSTEXPR bool
saturates(float scaled, Rounding) noexcept {
  using format = typename Scale::format;
  using traits = format_traits<format>;
  constexpr float max = detail::decode<format>(traits::max_code);
  constexpr int ulp_exponent = traits::max_exponent - traits::mantissa_bits;
  if constexpr (std::is_same<Rounding, round_up>::value) {
    return scaled > max;
  } else if constexpr (std::is_same<Rounding, round_down>::value) {
    // The next value above the max; 2^128 (UE8M0) is beyond float, and only Inf reaches it.
    constexpr double next =
        static_cast<double>(max) + static_cast<double>(detail::exp2i(ulp_exponent));
    constexpr float threshold =
        next >= 0x1p128 ? detail::bit_cast<float>(0x7F800000u) : static_cast<float>(next);
    return scaled >= threshold;
  } else {
    static_assert(std::is_same<Rounding, round_nearest_even>::value,
                  "scale rules round to nearest-even, up or down");
    // The midpoint to the next value; a tie goes up when the max's code is odd.
    constexpr float midpoint = max + detail::exp2i(ulp_exponent - 1);
    constexpr bool tie_goes_up = (traits::max_code & 1) != 0;
    return scaled > midpoint || (tie_goes_up && scaled == midpoint);
  }
}

/// f_b = min(1 / (S_b · s_dec), FLT_MAX): what a block's values are multiplied by before they are
/// encoded.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE constexpr float encode_factor(float scale,
                                                                            float s_dec) noexcept {
  const float inverse = 1.0f / (scale * s_dec);
  return inverse < FLT_MAX ? inverse : FLT_MAX;
}

/// Whether a block with this scale value stores its elements: not for a zero or NaN scale.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE constexpr bool keeps_elements(float scale) noexcept {
  return scale > 0.0f;
}

/// Everything a block's amax decides.
template <class BlockFormat>
struct scale_decision {
  typename BlockFormat::scale_type scale; ///< S_b
  float factor;                           ///< f_b
  bool keep;                              ///< false: the block stores zero codes
  bool saturated;                         ///< the ideal scale exceeded the scale format's max
};

/// The decision for a block with amax `amax` under `params`, the rule rounded by `rounding` (the
/// tag `with_rounding_tags` maps params.rule.rounding to).
template <class BlockFormat, class Rounding>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE scale_decision<BlockFormat>
decide_scale(float amax, const quantize_params& params, Rounding rounding) noexcept {
  using scale_type = typename BlockFormat::scale_type;
  const float scaled = amax * params.scale_multiplier;
  const auto scale = scale_type::from_bits(scale_code<scale_type>(scaled, rounding));
  const auto value = static_cast<float>(scale);
  return {scale, encode_factor(value, params.decode_scale), keeps_elements(value),
          saturates<scale_type>(scaled, rounding)};
}

/// Counts `count` blocks (a tile once) into `stats`: their amax patterns and the scale codes
/// decided for them with multiplier m and `rounding`. A block counts as saturated as `saturates`
/// says, as a zero scale when its code is the scale format's zero, as NaN when its amax is. One
/// loop for one block or a panel's worth (written so that it vectorizes).
template <class BlockFormat, class Rounding>
BLOCKSCALE_HOST_DEVICE void count_blocks(quantize_stats& stats, const std::uint32_t* amax,
                                         const std::uint8_t* codes, std::size_t count, float m,
                                         Rounding rounding) noexcept {
  using scale_type = typename BlockFormat::scale_type;
  constexpr bool has_zero = format_traits<typename scale_type::format>::has_zero;
  std::uint32_t most = 0, saturated = 0, zero = 0, nan = 0;
  for (std::size_t d = 0; d < count; ++d) {
    most = amax[d] > most ? amax[d] : most;
    saturated += saturates<scale_type>(amax_value(amax[d]) * m, rounding) ? 1u : 0u;
    zero += has_zero && codes[d] == 0 ? 1u : 0u; // code 0 is the only zero of an unsigned format
    nan += amax[d] > 0x7F800000u ? 1u : 0u;
  }
  stats.blocks += count;
  stats.saturated_scales += saturated;
  stats.zero_scales += zero;
  stats.nan_scales += nan;
  stats.amax = amax_value(amax_bits(magnitude_bits(stats.amax), amax_value(most)));
}

// ---- elements -----------------------------------------------------------------------------------

/// The code of x · f_b in `Element`, rounded with `rounding`, saturating.
template <class Element, class Rounding>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE BLOCKSCALE_BIT_CAST_CONSTEXPR std::uint8_t
encode_element(float x, float factor, Rounding rounding) noexcept {
  return convert<Element>(x * factor, rounding).bits();
}

/// The stochastic-rounding word of element (r, c) is rounding_bits(seed, offset, this).
BLOCKSCALE_HOST_DEVICE constexpr std::uint64_t random_index(std::size_t r, std::size_t c,
                                                            std::size_t padded_cols) noexcept {
  return static_cast<std::uint64_t>(r) * padded_cols + c;
}

/// The rounding of element j of a block: the same tag for all (nearest-even).
template <class Rounding>
struct same_rounding {
  Rounding rounding;
  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE constexpr Rounding operator()(int) const noexcept {
    return rounding;
  }
};
/// The rounding of element j of a block: stochastic with word j of `bits`.
struct stochastic_rounding_from {
  const std::uint32_t* bits;
  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE constexpr round_stochastic
  operator()(int j) const noexcept {
    return round_stochastic{bits[j]};
  }
};

/// Encodes the B values of a block with factor f_b into `codes` (zeros when !keep); element j is
/// rounded with rounding_at(j).
template <class BlockFormat, class RoundingAt>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE void encode_block(const float* x, float factor,
                                                                bool keep, RoundingAt rounding_at,
                                                                std::uint8_t* codes) noexcept {
  using element_type = typename BlockFormat::element_type;
  const std::uint8_t mask = keep ? 0xFF : 0x00;
  for (int j = 0; j < BlockFormat::block_size; ++j)
    codes[j] = static_cast<std::uint8_t>(
        encode_element<element_type>(x[j], factor, rounding_at(j)) & mask);
}

/// Bytes that `count` elements occupy (count even).
template <class BlockFormat>
BLOCKSCALE_HOST_DEVICE constexpr std::size_t element_bytes(std::size_t count) noexcept {
  return BlockFormat::element_bits == 4 ? count / 2 : count;
}

/// Stores the B codes of a block at `out` (FP4: packed, the even element in the low nibble).
template <class BlockFormat>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE void store_block(const std::uint8_t* codes,
                                                               std::uint8_t* out) noexcept {
  if constexpr (BlockFormat::element_bits == 4) {
    pack_nibbles(codes, BlockFormat::block_size, out);
  } else {
    for (int j = 0; j < BlockFormat::block_size; ++j)
      out[j] = codes[j];
  }
}

/// The code of element c of a stored row.
template <class BlockFormat>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE constexpr std::uint8_t
load_code(const std::uint8_t* row, std::size_t c) noexcept {
  if constexpr (BlockFormat::element_bits == 4)
    return nibble_at(row, c);
  else
    return row[c];
}

/// The decoded value of a code in a block with scale value S_b: (q · S_b) · s_dec, and the quiet
/// NaN 0x7FC00000 whenever that is NaN (a NaN scale or element): IEEE leaves a NaN's sign and
/// payload to the implementation, and compilers rewrite -(a · b) freely, so the one NaN makes
/// every path give the same bits.
template <class BlockFormat>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE BLOCKSCALE_BIT_CAST_CONSTEXPR float
decode_value(std::uint8_t code, float scale, float s_dec) noexcept {
  const float value =
      static_cast<float>(BlockFormat::element_type::from_bits(code)) * scale * s_dec;
  return value == value ? value : detail::bit_cast<float>(0x7FC00000u);
}

// ---- reading the input --------------------------------------------------------------------------

/// The B values of a block as they are quantized: Hadamard-transformed in 16-groups along K when
/// the shape says so, unchanged otherwise. In place.
template <class BlockFormat>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE void transform_block(const quantized_shape& shape,
                                                                   float* values) noexcept {
  if (shape.hadamard)
    for (int g = 0; g < BlockFormat::block_size; g += hadamard16::size)
      shape.transform.forward(values + g, values + g);
}

/// The values of row r, block kb of the matrix as it is quantized: the input's row r (or column r
/// when columnwise), zeros past its end, Hadamard-transformed along the row when the shape says
/// so. `out` receives B values.
template <class BlockFormat, class T>
BLOCKSCALE_HOST_DEVICE void gather_block(matrix_view<const T> x, const quantized_shape& shape,
                                         std::size_t r, std::size_t kb, float* out) noexcept {
  constexpr std::size_t b = BlockFormat::block_size;
  const std::size_t c0 = kb * b;
  const std::size_t valid = shape.cols > c0 ? (shape.cols - c0 < b ? shape.cols - c0 : b) : 0;
  for (std::size_t j = 0; j < valid; ++j)
    out[j] = static_cast<float>(shape.columnwise ? x(c0 + j, r) : x(r, c0 + j));
  for (std::size_t j = valid; j < b; ++j)
    out[j] = 0.0f;
  transform_block<BlockFormat>(shape, out);
}

} // namespace codec

BLOCKSCALE_HOST_DEVICE inline void quantize_stats::merge(const quantize_stats& other) noexcept {
  blocks += other.blocks;
  saturated_scales += other.saturated_scales;
  zero_scales += other.zero_scales;
  nan_scales += other.nan_scales;
  amax = codec::amax_value(codec::amax_bits(codec::magnitude_bits(amax), other.amax));
}

} // namespace v0
} // namespace blockscale
