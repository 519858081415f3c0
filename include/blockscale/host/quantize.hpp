/// \file quantize.hpp
/// Host quantization of float, bfloat16 and float16 matrices into block-scaled formats, and
/// dequantization back to float. Two implementations that agree bit for bit: a plain reference
/// path (`quantize_reference`, the oracle, one element at a time) and a fast path (`quantize`:
/// vectorizable inner loops, std::thread over row panels).
///
/// For each block: amax_b = max |x| over the block (NaN if any element is NaN),
/// m = s_enc · fp32(1 / target), S_b = scale(min(amax_b · m, FLT_MAX)) with the rule's rounding,
/// f_b = min(1 / (float(S_b) · s_dec), FLT_MAX), q = element(x · f_b) saturating, with s_dec =
/// 1 / s_enc (Transformer Engine's FP32 order, DESIGN.md §4). A block with a zero or NaN scale
/// stores zero elements. Stochastic rounding draws element (r, c) of the quantized matrix from
/// `random_bits(seed, offset, r · padded_cols + c)`.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../block/block_format.hpp"
#include "../block/hadamard.hpp"
#include "../block/scale_layout.hpp"
#include "../block/scale_rule.hpp"
#include "../config.hpp"
#include "../numeric/convert.hpp"
#include "../numeric/random.hpp"
#include "quantized_matrix.hpp"
#include "thread_pool.hpp"

namespace blockscale {
inline namespace v0 {

/// How elements are rounded (a runtime option, mapped to the rounding tags in one place).
enum class element_rounding { nearest_even, stochastic };

/// Everything a quantization call can choose besides the format.
struct quantize_options {
  block_shape shape = block_shape::rowwise;
  /// Quantize the transpose (blocks run down the input's columns), read straight from the input.
  bool columnwise = false;
  /// The block-scale rule; empty means default_scale_rule<BlockFormat>().
  std::optional<scale_rule> rule;
  element_rounding rounding = element_rounding::nearest_even;
  std::uint64_t seed = 0;   ///< stochastic rounding: Philox key
  std::uint64_t offset = 0; ///< stochastic rounding: Philox stream (e.g. the training step)
  /// s_enc, the tensor encode scale (from a tensor-scale policy); the result stores 1 / s_enc.
  float tensor_scale = 1.0f;
  scale_layout layout = scale_layout::row_major;
  /// Apply the 16-point randomized Hadamard transform along the blocks before quantizing.
  bool hadamard = false;
  hadamard16 transform = hadamard16::te_default();
  /// Threads for the fast path; 0 means std::thread::hardware_concurrency().
  unsigned threads = 1;
};

namespace detail {

template <class T>
float to_float(const T& value) noexcept {
  return static_cast<float>(value);
}

/// max(acc, |v|) that sticks at NaN once a NaN is seen.
inline float amax_update(float acc, float v) noexcept {
  const float a = std::fabs(v);
  return (a > acc || a != a) ? a : acc;
}

/// The geometry of one quantization: the quantized matrix is rows × cols (the input's transpose
/// when columnwise), padded to padded_cols; blocks are grouped in runs of group_rows rows.
struct quantize_plan {
  std::size_t rows, cols, padded_cols, blocks;
  std::size_t group_rows;
  float s_enc, s_dec, m;
  scale_rule rule;
};

template <class BlockFormat, class T>
quantize_plan make_plan(matrix_view<const T> x, const quantize_options& options) {
  constexpr std::size_t b = BlockFormat::block_size;
  const float s_enc = options.tensor_scale;
  if (!(s_enc > 0.0f) || !(s_enc <= FLT_MAX))
    throw std::invalid_argument("quantize: options.tensor_scale must be finite and positive, not " +
                                std::to_string(s_enc));
  if (options.hadamard && b % hadamard16::size != 0)
    throw std::invalid_argument("quantize: options.hadamard needs a block size that is a "
                                "multiple of 16, not " +
                                std::to_string(b));
  const scale_rule rule = options.rule ? *options.rule : default_scale_rule<BlockFormat>();
  if (!(rule.target > 0.0f) || !(rule.target <= FLT_MAX))
    throw std::invalid_argument("quantize: options.rule.target must be finite and positive");
  quantize_plan plan{};
  plan.rows = options.columnwise ? x.cols() : x.rows();
  plan.cols = options.columnwise ? x.rows() : x.cols();
  plan.padded_cols = (plan.cols + b - 1) / b * b;
  plan.blocks = plan.padded_cols / b;
  plan.group_rows = options.shape == block_shape::tile ? b : 1;
  plan.s_enc = s_enc;
  plan.s_dec = 1.0f / s_enc;
  plan.m = s_enc * (1.0f / rule.target);
  plan.rule = rule;
  return plan;
}

/// Row `r`, block `kb` of the matrix as quantized: the input (or its transpose) with zeros past
/// the last column, Hadamard-transformed when asked.
template <int B, class T>
void gather_block(matrix_view<const T> x, const quantize_options& options,
                  const quantize_plan& plan, std::size_t r, std::size_t kb, float* out) {
  const std::size_t c0 = kb * B;
  const std::size_t valid = plan.cols - c0 < static_cast<std::size_t>(B) ? plan.cols - c0 : B;
  if (options.columnwise) {
    for (std::size_t j = 0; j < valid; ++j)
      out[j] = to_float(x(c0 + j, r));
  } else {
    const T* row = &x(r, c0);
    for (std::size_t j = 0; j < valid; ++j)
      out[j] = to_float(row[j]);
  }
  for (std::size_t j = valid; j < static_cast<std::size_t>(B); ++j)
    out[j] = 0.0f;
  if (options.hadamard)
    for (int g = 0; g < B; g += hadamard16::size)
      options.transform.forward(out + g, out + g);
}

/// What a block's amax makes of its scale, and the statistics it adds.
template <class BlockFormat>
struct block_decision {
  typename BlockFormat::scale_type scale;
  float factor; ///< f_b
  bool store;   ///< false for zero and NaN scales: the elements are stored as zero
};

template <class BlockFormat>
block_decision<BlockFormat> decide_block(float amax, const quantize_plan& plan,
                                         quantize_stats& stats) noexcept {
  using scale_type = typename BlockFormat::scale_type;
  const auto scale = plan.rule.template block_scale<scale_type>(amax, plan.m);
  const float scale_value = static_cast<float>(scale);
  ++stats.blocks;
  stats.saturated_scales += plan.rule.template saturates<scale_type>(amax * plan.m) ? 1 : 0;
  stats.nan_scales += amax != amax ? 1 : 0;
  stats.zero_scales += scale_value == 0.0f ? 1 : 0;
  stats.amax = amax_update(stats.amax, amax);
  const float inverse = 1.0f / (scale_value * plan.s_dec);
  const float factor = inverse < FLT_MAX ? inverse : FLT_MAX;
  return {scale, factor, scale_value == 0.0f || scale_value != scale_value ? false : true};
}

/// Writes code `code` as element `c` of a packed row.
template <class BlockFormat>
void put_element(std::uint8_t* row, std::size_t c, std::uint8_t code) noexcept {
  if constexpr (BlockFormat::element_bits == 4)
    row[c / 2] = static_cast<std::uint8_t>(c % 2 == 0 ? (row[c / 2] & 0xF0) | code
                                                      : (row[c / 2] & 0x0F) | (code << 4));
  else
    row[c] = code;
}

/// E2M1 round-to-nearest-even by comparisons against the decision points (REFERENCE.md §1), for
/// the fast path: bit-identical to convert<e2m1>(y) for every float y, NaN (+6, code 0x7)
/// included (the exhaustive tests check all 2^32), and free of shifts by variable amounts, so
/// it vectorizes on any SIMD level.
inline std::uint32_t e2m1_nearest_even(float y) noexcept {
  const float a = std::fabs(y);
  const std::uint32_t magnitude = std::uint32_t{a > 0.25f} + std::uint32_t{a >= 0.75f} +
                                  std::uint32_t{a > 1.25f} + std::uint32_t{a >= 1.75f} +
                                  std::uint32_t{a > 2.5f} + std::uint32_t{a >= 3.5f} +
                                  std::uint32_t{a > 5.0f};
  const std::uint32_t code = magnitude | ((bit_cast<std::uint32_t>(y) >> 28) & 0x8u);
  // NaN -> 0x7 by masks rather than a select, which GCC turns into control flow.
  const std::uint32_t nan = 0u - std::uint32_t{y != y};
  return (code & ~nan) | (0x7u & nan);
}

/// Packs 2·n 4-bit codes held in 32-bit lanes into n bytes, code 2i in the low nibble, masked
/// by `mask`. A pair read as one 64-bit word (code 2i in the low half on a little-endian host)
/// folds with one shift and one or, so the loop vectorizes without shuffles.
inline void pack_nibbles(const std::uint32_t* codes, std::size_t n, std::uint8_t mask,
                         std::uint8_t* out) noexcept {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t pair;
    std::memcpy(&pair, codes + 2 * i, sizeof pair);
    out[i] = static_cast<std::uint8_t>((pair | (pair >> 28)) & mask);
  }
#else
  for (std::size_t i = 0; i < n; ++i)
    out[i] = static_cast<std::uint8_t>((codes[2 * i] | (codes[2 * i + 1] << 4)) & mask);
#endif
}

/// Fills `out[i]` with random_bits(seed, offset, first + i) for i < count (first % 4 == 0 and
/// count % 4 == 0): one Philox block per four words, in a loop without dependencies.
inline void fill_random_bits(std::uint64_t seed, std::uint64_t offset, std::uint64_t first,
                             std::size_t count, std::uint32_t* out) noexcept {
  const auto key = philox_key(seed);
  for (std::size_t n = 0; n < count / 4; ++n) {
    const auto block = philox4x32_10::generate(philox_counter(first / 4 + n, offset), key);
    for (int w = 0; w < 4; ++w)
      out[4 * n + static_cast<std::size_t>(w)] = block[w];
  }
}

/// Block scale codes for `count` amaxes under `rule`, one tag per loop so each loop vectorizes.
template <class Scale>
void block_scales(const scale_rule& rule, float m, const float* amax, std::size_t count,
                  std::uint8_t* codes) noexcept {
  auto run = [&](auto rounding) {
    for (std::size_t i = 0; i < count; ++i) {
      const float scaled = amax[i] * m;
      const float capped = scaled < FLT_MAX ? scaled : (scaled == scaled ? FLT_MAX : scaled);
      codes[i] = convert<Scale>(capped, rounding).bits();
    }
  };
  switch (rule.rounding) {
  case scale_rounding::up:
    run(round_up{});
    break;
  case scale_rounding::down:
    run(round_down{});
    break;
  case scale_rounding::nearest_even:
    run(round_nearest_even{});
    break;
  }
}

/// The fast path's worker: quantizes rows [row_begin, row_end) (whole groups) in phases that
/// each run over a whole row: block amaxes, then all block scales, then all elements.
template <class BlockFormat, class T>
quantize_stats quantize_rows(matrix_view<const T> x, const quantize_options& options,
                             const quantize_plan& plan, std::size_t row_begin, std::size_t row_end,
                             quantized_matrix<BlockFormat>& q) {
  using element_type = typename BlockFormat::element_type;
  using scale_type = typename BlockFormat::scale_type;
  constexpr int b = BlockFormat::block_size;
  constexpr bool fast_e2m1 = std::is_same<element_type, e2m1>::value;
  const std::size_t blocks = plan.blocks, padded = plan.padded_cols;
  // Rows are read in place when they already are what gets quantized: float, rowwise, no
  // transform, no padding.
  const bool in_place = std::is_same<T, float>::value && !options.columnwise && !options.hadamard &&
                        plan.cols == padded;
  const bool stochastic = options.rounding == element_rounding::stochastic;

  std::vector<float> buffer(in_place ? 0 : plan.group_rows * padded);
  std::vector<const float*> row_values(plan.group_rows);
  std::vector<float> amax(blocks), factor(blocks);
  std::vector<std::uint32_t> amax_bits(blocks);
  std::vector<std::uint8_t> nan(blocks), scale_codes(blocks), keep(blocks);
  std::vector<std::uint32_t> random(stochastic ? padded : 0);
  // Per scale code: its value and f_b = min(1 / (S_b · s_dec), FLT_MAX), 0 for zero and NaN
  // scales (not stored), so the element phase needs no division.
  float scale_values[256], factors[256];
  for (int code = 0; code < 256; ++code) {
    const float scale = static_cast<float>(scale_type::from_bits(static_cast<std::uint8_t>(code)));
    const float inverse = 1.0f / (scale * plan.s_dec);
    scale_values[code] = scale;
    factors[code] = scale > 0.0f ? (inverse < FLT_MAX ? inverse : FLT_MAX) : 0.0f;
  }
  quantize_stats stats{};

  for (std::size_t r0 = row_begin; r0 < row_end; r0 += plan.group_rows) {
    const std::size_t rows_here = std::min(plan.group_rows, plan.rows - r0);
    // Phase 1: the values of each row and the (group's) block amaxes. The max runs on the bit
    // patterns with the sign cleared: for floats those order as the magnitudes do, and every
    // NaN lies above Inf, so one integer max gives the amax and whether the block holds a NaN.
    std::fill(amax_bits.begin(), amax_bits.end(), 0u);
    for (std::size_t i = 0; i < rows_here; ++i) {
      const float* v = nullptr;
      if constexpr (std::is_same<T, float>::value)
        v = in_place ? &x(r0 + i, 0) : nullptr;
      if (v == nullptr) {
        float* row = buffer.data() + i * padded;
        for (std::size_t kb = 0; kb < blocks; ++kb)
          gather_block<b>(x, options, plan, r0 + i, kb, row + kb * b);
        v = row;
      }
      row_values[i] = v;
      for (std::size_t kb = 0; kb < blocks; ++kb) {
        std::uint32_t block_max = amax_bits[kb];
        for (int j = 0; j < b; ++j) {
          std::uint32_t bits;
          std::memcpy(&bits, v + kb * b + static_cast<std::size_t>(j), sizeof bits);
          bits &= 0x7FFFFFFFu;
          block_max = bits > block_max ? bits : block_max;
        }
        amax_bits[kb] = block_max;
      }
    }
    for (std::size_t kb = 0; kb < blocks; ++kb) {
      nan[kb] = amax_bits[kb] > 0x7F800000u ? 1 : 0;
      amax[kb] = nan[kb] ? std::numeric_limits<float>::quiet_NaN() : bit_cast<float>(amax_bits[kb]);
    }

    // Phase 2: scales, decode factors and statistics for the whole row of blocks.
    block_scales<scale_type>(plan.rule, plan.m, amax.data(), blocks, scale_codes.data());
    for (std::size_t kb = 0; kb < blocks; ++kb) {
      const float scale = scale_values[scale_codes[kb]];
      factor[kb] = factors[scale_codes[kb]];
      keep[kb] = scale > 0.0f ? 0xFF : 0x00; // zero and NaN scales store zero elements
      stats.saturated_scales += plan.rule.saturates<scale_type>(amax[kb] * plan.m) ? 1 : 0;
      stats.nan_scales += nan[kb];
      stats.zero_scales += scale == 0.0f ? 1 : 0;
      stats.amax = amax_update(stats.amax, amax[kb]);
    }
    stats.blocks += blocks;

    // Phase 3: elements, row by row; a block that is not stored is masked to zero codes.
    for (std::size_t i = 0; i < rows_here; ++i) {
      const std::size_t r = r0 + i;
      for (std::size_t kb = 0; kb < blocks; ++kb)
        q.scale_bytes()[scale_offset(q.layout(), r, kb, blocks)] = scale_codes[kb];
      if (stochastic)
        fill_random_bits(options.seed, options.offset, r * padded, padded, random.data());
      const float* v = row_values[i];
      std::uint8_t* out = q.element_bytes().data() + r * q.row_bytes();
      for (std::size_t kb = 0; kb < blocks; ++kb) {
        const float f = factor[kb];
        const std::uint8_t mask = keep[kb];
        std::uint32_t codes[b];
        if (stochastic) {
          const std::uint32_t* bits = random.data() + kb * b;
          for (int j = 0; j < b; ++j)
            codes[j] = convert<element_type>(v[kb * b + j] * f, round_stochastic{bits[j]}).bits();
        } else if constexpr (fast_e2m1) {
          for (int j = 0; j < b; ++j)
            codes[j] = e2m1_nearest_even(v[kb * b + j] * f);
        } else {
          for (int j = 0; j < b; ++j)
            codes[j] = convert<element_type>(v[kb * b + j] * f).bits();
        }
        std::uint8_t* dst = out + kb * b * BlockFormat::element_bits / 8;
        if constexpr (BlockFormat::element_bits == 4) {
          pack_nibbles(codes, b / 2, mask, dst);
        } else {
          for (int j = 0; j < b; ++j)
            dst[j] = static_cast<std::uint8_t>(codes[j] & mask);
        }
      }
    }
  }
  return stats;
}

inline void merge_stats(quantize_stats& into, const quantize_stats& from) noexcept {
  into.blocks += from.blocks;
  into.saturated_scales += from.saturated_scales;
  into.zero_scales += from.zero_scales;
  into.nan_scales += from.nan_scales;
  into.amax = amax_update(into.amax, from.amax);
}

} // namespace detail

/// The fast path: quantizes `x` into `BlockFormat` with `options`. Bit-identical to
/// `quantize_reference`. Throws std::invalid_argument for options the format cannot do.
template <class BlockFormat, class T>
quantized_matrix<BlockFormat> quantize(matrix_view<T> input, const quantize_options& options = {}) {
  const matrix_view<const T> x = input;
  const detail::quantize_plan plan = detail::make_plan<BlockFormat>(x, options);
  quantized_matrix<BlockFormat> q(plan.rows, plan.cols, options.shape, options.layout,
                                  options.columnwise);
  q.set_tensor_scale(plan.s_dec);
  q.set_hadamard(options.hadamard, options.transform.sign_mask());
  if (plan.rows == 0 || plan.cols == 0)
    return q; // nothing to read: x.data() may be null
  // Panels of whole row groups, one per worker.
  const std::size_t groups = (plan.rows + plan.group_rows - 1) / plan.group_rows;
  const unsigned workers = detail::worker_count(options.threads, groups);
  std::vector<quantize_stats> partial(workers);
  detail::run_in_ranges(groups, workers, [&](unsigned w, std::size_t begin, std::size_t end) {
    partial[w] =
        detail::quantize_rows(x, options, plan, std::min(plan.rows, begin * plan.group_rows),
                              std::min(plan.rows, end * plan.group_rows), q);
  });
  quantize_stats stats{};
  for (const auto& p : partial)
    detail::merge_stats(stats, p);
  q.set_stats(stats);
  return q;
}

/// The reference path: one element at a time through `convert`, no threads. The oracle for the
/// fast path (and for device kernels).
template <class BlockFormat, class T>
quantized_matrix<BlockFormat> quantize_reference(matrix_view<T> input,
                                                 const quantize_options& options = {}) {
  using element_type = typename BlockFormat::element_type;
  constexpr int b = BlockFormat::block_size;
  const matrix_view<const T> x = input;
  const detail::quantize_plan plan = detail::make_plan<BlockFormat>(x, options);
  quantized_matrix<BlockFormat> q(plan.rows, plan.cols, options.shape, options.layout,
                                  options.columnwise);
  q.set_tensor_scale(plan.s_dec);
  q.set_hadamard(options.hadamard, options.transform.sign_mask());
  quantize_stats stats{};
  std::vector<float> group(plan.group_rows * b);
  for (std::size_t r0 = 0; r0 < plan.rows; r0 += plan.group_rows) {
    const std::size_t rows_here = std::min(plan.group_rows, plan.rows - r0);
    for (std::size_t kb = 0; kb < plan.blocks; ++kb) {
      float amax = 0.0f;
      for (std::size_t i = 0; i < rows_here; ++i) {
        detail::gather_block<b>(x, options, plan, r0 + i, kb, group.data() + i * b);
        for (int j = 0; j < b; ++j)
          amax = detail::amax_update(amax, group[i * b + j]);
      }
      const auto decision = detail::decide_block<BlockFormat>(amax, plan, stats);
      for (std::size_t i = 0; i < rows_here; ++i) {
        const std::size_t r = r0 + i;
        q.scale_bytes()[scale_offset(options.layout, r, kb, plan.blocks)] = decision.scale.bits();
        std::uint8_t* row = q.element_bytes().data() + r * q.row_bytes();
        for (int j = 0; j < b; ++j) {
          const std::size_t c = kb * b + static_cast<std::size_t>(j);
          const float y = group[i * b + j] * decision.factor;
          std::uint8_t code = 0;
          if (decision.store && options.rounding == element_rounding::stochastic)
            code =
                convert<element_type>(y, round_stochastic{random_bits(options.seed, options.offset,
                                                                      r * plan.padded_cols + c)})
                    .bits();
          else if (decision.store)
            code = convert<element_type>(y).bits();
          detail::put_element<BlockFormat>(row, c, code);
        }
      }
    }
  }
  q.set_stats(stats);
  return q;
}

/// The tensor amax of `x` as quantization with `options` would see it (after the Hadamard
/// transform when enabled); NaN if any element is NaN.
template <class BlockFormat, class T>
float measure_amax(matrix_view<T> input, const quantize_options& options = {}) {
  const matrix_view<const T> x = input;
  float amax = 0.0f;
  if (!options.hadamard) {
    for (std::size_t r = 0; r < x.rows(); ++r)
      for (std::size_t c = 0; c < x.cols(); ++c)
        amax = detail::amax_update(amax, detail::to_float(x(r, c)));
    return amax;
  }
  constexpr int b = BlockFormat::block_size;
  quantize_options plain = options;
  plain.tensor_scale = 1.0f;
  const detail::quantize_plan plan = detail::make_plan<BlockFormat>(x, plain);
  float block[b];
  for (std::size_t r = 0; r < plan.rows; ++r)
    for (std::size_t kb = 0; kb < plan.blocks; ++kb) {
      detail::gather_block<b>(x, options, plan, r, kb, block);
      for (int j = 0; j < b; ++j)
        amax = detail::amax_update(amax, block[j]);
    }
  return amax;
}

/// Passes the measured amax through unchanged (the default amax hook).
struct identity_amax {
  float operator()(float amax) const noexcept { return amax; }
};

/// One quantization step under a tensor-scale policy: measures amax_t when the policy asks,
/// passes it through `amax_hook` (an all-reduce across ranks, say) before the policy sees it,
/// quantizes with the policy's s_enc, and tells the policy how many block scales saturated.
template <class BlockFormat, class T, class Policy, class AmaxHook = identity_amax>
quantized_matrix<BlockFormat> quantize(matrix_view<T> x, Policy& policy, quantize_options options,
                                       AmaxHook&& amax_hook = {}) {
  if (policy.needs_amax())
    policy.observe_amax(amax_hook(measure_amax<BlockFormat>(x, options)));
  options.tensor_scale = policy.encode_scale();
  quantized_matrix<BlockFormat> q = quantize<BlockFormat>(x, options);
  policy.finish(q.stats().saturated_scales);
  return q;
}

namespace detail {
/// Decodes the first `cols` columns of every row of `q` into `out` (cols <= padded_cols).
template <class BlockFormat>
void dequantize_columns(const quantized_matrix<BlockFormat>& q, matrix_view<float> out,
                        std::size_t cols, unsigned threads) {
  using element_type = typename BlockFormat::element_type;
  using scale_type = typename BlockFormat::scale_type;
  constexpr int b = BlockFormat::block_size;
  if (q.rows() == 0 || cols == 0)
    return; // nothing to write: out.data() may be null
  const float s_dec = q.tensor_scale();
  const std::size_t blocks = q.blocks_per_row();
  auto work = [&](std::size_t row_begin, std::size_t row_end) {
    for (std::size_t r = row_begin; r < row_end; ++r) {
      const std::uint8_t* row = q.element_bytes().data() + r * q.row_bytes();
      float* dst = &out(r, 0);
      for (std::size_t kb = 0; kb * b < cols; ++kb) {
        const float scale = static_cast<float>(
            scale_type::from_bits(q.scale_bytes()[scale_offset(q.layout(), r, kb, blocks)]));
        const std::size_t c0 = kb * b;
        const std::size_t count = std::min<std::size_t>(b, cols - c0);
        if constexpr (BlockFormat::element_bits == 4) {
          // One product per code, in the order (element · scale) · s_dec.
          float table[16];
          for (int code = 0; code < 16; ++code)
            table[code] =
                static_cast<float>(element_type::from_bits(static_cast<std::uint8_t>(code))) *
                scale * s_dec;
          const std::uint8_t* bytes = row + c0 / 2;
          for (std::size_t j = 0; j < count; ++j)
            dst[c0 + j] = table[(bytes[j / 2] >> (4 * (j % 2))) & 0xF];
        } else {
          for (std::size_t j = 0; j < count; ++j)
            dst[c0 + j] = static_cast<float>(element_type::from_bits(row[c0 + j])) * scale * s_dec;
        }
      }
    }
  };
  detail::run_in_ranges(q.rows(), worker_count(threads, q.rows()),
                        [&](unsigned, std::size_t begin, std::size_t end) { work(begin, end); });
}
} // namespace detail

/// Decodes `q` into `out` (q.rows() × q.cols()): (element · block scale) · s_dec, exactly as
/// quantized_matrix::value. Throws std::invalid_argument if `out` has another shape.
template <class BlockFormat>
void dequantize(const quantized_matrix<BlockFormat>& q, matrix_view<float> out,
                unsigned threads = 1) {
  if (out.rows() != q.rows() || out.cols() != q.cols())
    throw std::invalid_argument("dequantize: out is " + std::to_string(out.rows()) + " x " +
                                std::to_string(out.cols()) + ", the quantized matrix is " +
                                std::to_string(q.rows()) + " x " + std::to_string(q.cols()));
  detail::dequantize_columns(q, out, q.cols(), threads);
}

/// Decodes `q` including its padding columns into `out` (q.rows() × q.padded_cols()): what a
/// GEMM over the padded K sees (nonzero padding only after the Hadamard transform).
template <class BlockFormat>
void dequantize_padded(const quantized_matrix<BlockFormat>& q, matrix_view<float> out,
                       unsigned threads = 1) {
  if (out.rows() != q.rows() || out.cols() != q.padded_cols())
    throw std::invalid_argument("dequantize_padded: out is " + std::to_string(out.rows()) + " x " +
                                std::to_string(out.cols()) + ", expected " +
                                std::to_string(q.rows()) + " x " + std::to_string(q.padded_cols()));
  detail::dequantize_columns(q, out, q.padded_cols(), threads);
}

} // namespace v0
} // namespace blockscale
