/// \file contract/quantize_options.hpp
/// The quantize contract, host side of every quantizer: `quantize_options`, everything a
/// quantization call can choose besides the format, and `make_quantize_params`, which checks the
/// options once and turns them into the plain parameters the codec and the kernels use
/// (block/quantize_params.hpp). Host-only and small: the host quantizers (host/) and the device
/// launchers (cuda/) both include it, and neither includes the other.
#pragma once

#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>

#include "../block/block_format.hpp"
#include "../block/hadamard.hpp"
#include "../block/quantize_params.hpp"
#include "../block/quantized_view.hpp"
#include "../block/scale_rule.hpp"
#include "../config.hpp"

namespace blockscale {
inline namespace v0 {

/// Everything a quantization call can choose besides the format. The defaults quantize rowwise in
/// 1×B blocks with the format's default scale rule, nearest-even, s_enc = 1, row-major scales.
struct quantize_options {
  block_shape shape = block_shape::rowwise;
  /// Quantize the transpose (blocks run down the input's columns), read straight from the input.
  bool columnwise = false;
  /// The block-scale rule; empty means default_scale_rule<BlockFormat>().
  std::optional<scale_rule> rule;
  element_rounding rounding = element_rounding::nearest_even;
  std::uint64_t seed = 0;   ///< stochastic rounding: Philox key
  std::uint64_t offset = 0; ///< stochastic rounding: Philox stream (e.g. the training step)
  /// s_enc, the tensor encode scale: x is multiplied by it before the block scale is chosen, and
  /// the result's decode scale is s_dec = 1 / s_enc. Finite, positive, with a finite reciprocal.
  float encode_scale = 1.0f;
  scale_layout layout = scale_layout::row_major;
  /// Apply the 16-point randomized Hadamard transform along the blocks before quantizing.
  bool hadamard = false;
  hadamard16 transform = hadamard16::te_default();
  /// Threads when no thread_pool is given; 0 means std::thread::hardware_concurrency(). More than
  /// one without a pool starts threads for the call. Host quantizers only.
  unsigned threads = 1;

  /// The most threads a call may ask for (thread_pool::max_threads, the same number).
  static constexpr unsigned max_threads = 1024;
};

/// The quantized matrix that quantizing an x_rows × x_cols input with `options` produces: the
/// input's shape, transposed when columnwise, with the options' blocks, layout and transform.
inline quantized_shape quantized_shape_for(std::size_t x_rows, std::size_t x_cols,
                                           const quantize_options& options) noexcept {
  quantized_shape shape;
  shape.rows = options.columnwise ? x_cols : x_rows;
  shape.cols = options.columnwise ? x_rows : x_cols;
  shape.blocks = options.shape;
  shape.layout = options.layout;
  shape.columnwise = options.columnwise;
  shape.hadamard = options.hadamard;
  shape.transform = options.transform;
  return shape;
}

namespace detail {
/// A float as an error message shows it: nine significant digits, enough to type it back exactly
/// (a subnormal 1e-40 shows as 9.9999461e-41, not as 0.000000).
inline std::string float_text(float value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", static_cast<double>(value));
  return text;
}
} // namespace detail

/// The checked parameters of quantizing an x_rows × x_cols input into `BlockFormat` with
/// `options`. Throws std::invalid_argument naming the option that is wrong: an encode scale that
/// is not finite and positive or whose reciprocal is not finite (s_dec would be Inf, and every
/// decoded value NaN), a rule target that is not finite and positive or that s_enc / target
/// overflows, the Hadamard transform with a block size that is not a multiple of 16, a thread count
/// above thread_pool::max_threads, or an enumeration value outside its range.
template <class BlockFormat>
quantize_params make_quantize_params(std::size_t x_rows, std::size_t x_cols,
                                     const quantize_options& options) {
  constexpr int b = BlockFormat::block_size;
  const auto fail = [](const std::string& what) {
    return std::invalid_argument("quantize: options." + what);
  };
  const float s_enc = options.encode_scale;
  if (!(s_enc > 0.0f) || !(s_enc <= FLT_MAX) || !(1.0f / s_enc <= FLT_MAX))
    throw fail("encode_scale (" + detail::float_text(s_enc) +
               ") must be finite and positive, with a finite reciprocal (at least about 2.9e-39)");
  if (options.hadamard && b % hadamard16::size != 0)
    throw fail("hadamard needs a block size that is a multiple of 16, not " + std::to_string(b));
  const scale_rule rule = options.rule ? *options.rule : default_scale_rule<BlockFormat>();
  if (!(rule.target > 0.0f) || !(rule.target <= FLT_MAX))
    throw fail("rule->target (" + detail::float_text(rule.target) +
               ") must be finite and positive");
  if (rule.rounding != scale_rounding::nearest_even && rule.rounding != scale_rounding::up &&
      rule.rounding != scale_rounding::down)
    throw fail("rule->rounding is not a scale_rounding value");
  if (options.rounding != element_rounding::nearest_even &&
      options.rounding != element_rounding::stochastic)
    throw fail("rounding is not an element_rounding value");
  if (options.shape != block_shape::rowwise && options.shape != block_shape::tile)
    throw fail("shape is not a block_shape value");
  if (options.layout != scale_layout::row_major && options.layout != scale_layout::tensor_core)
    throw fail("layout is not a scale_layout value");
  if (options.threads > quantize_options::max_threads)
    throw fail("threads (" + std::to_string(options.threads) + ") is above the limit of " +
               std::to_string(quantize_options::max_threads));
  quantize_params params;
  params.shape = quantized_shape_for(x_rows, x_cols, options);
  params.encode_scale = s_enc;
  params.decode_scale = 1.0f / s_enc;
  params.scale_multiplier = s_enc * (1.0f / rule.target);
  params.rule = rule;
  if (!(params.scale_multiplier <= FLT_MAX))
    throw fail("encode_scale (" + detail::float_text(s_enc) + ") / rule->target (" +
               detail::float_text(rule.target) + ") overflows float");
  params.rounding = options.rounding;
  params.seed = options.seed;
  params.offset = options.offset;
  return params;
}

} // namespace v0
} // namespace blockscale
