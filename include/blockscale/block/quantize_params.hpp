/// \file block/quantize_params.hpp
/// `quantize_params`: the validated, trivially copyable parameters of one quantization — what a
/// quantizer needs on the host or the device — and `with_rounding_tags`, the one place where the
/// run-time rounding choices become the tag types the codec is templated on. The host makes
/// params from `quantize_options` (host/quantize_options.hpp), checking every field once.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../config.hpp"
#include "../numeric/rounding.hpp"
#include "quantized_shape.hpp"
#include "scale_rule.hpp"

namespace blockscale {
inline namespace v0 {

/// How elements are rounded (a run-time option; mapped to round_nearest_even or round_stochastic
/// by `with_rounding_tags`).
enum class element_rounding { nearest_even, stochastic };

/// One quantization's parameters, checked (see make_quantize_params). The decoded value of a code
/// q in a block with scale S is (q · S) · decode_scale.
struct quantize_params {
  quantized_shape shape;     ///< the quantized matrix: size, blocks, layout, direction, transform
  float encode_scale = 1.0f; ///< s_enc: multiplies x before the block scale is chosen
  float decode_scale = 1.0f; ///< s_dec = 1 / s_enc, rounded once
  float scale_multiplier = 1.0f; ///< m = s_enc · fp32(1 / rule.target)
  scale_rule rule{6.0f, scale_rounding::nearest_even};
  element_rounding rounding = element_rounding::nearest_even;
  std::uint64_t seed = 0;   ///< stochastic rounding: the Philox key
  std::uint64_t offset = 0; ///< stochastic rounding: the Philox stream (a training step, say)
};

static_assert(std::is_trivially_copyable<quantize_params>::value,
              "quantize_params is passed to kernels by value");

/// Calls f(scale_tag, element_tag) with the rounding tags `params` selects: scale_tag is
/// round_nearest_even, round_up or round_down (the rule's rounding), element_tag is
/// round_nearest_even or round_stochastic (whose bits the quantizer fills per element). The one
/// mapping from the run-time enumerations to types, made where a call enters the library (a host
/// driver, a kernel launcher): everything below it is templated on tags. Host code.
template <class F>
decltype(auto) with_rounding_tags(const quantize_params& params, F&& f) {
  const auto with_element = [&](auto scale_tag) -> decltype(auto) {
    if (params.rounding == element_rounding::stochastic)
      return f(scale_tag, round_stochastic{0});
    return f(scale_tag, round_nearest_even{});
  };
  switch (params.rule.rounding) {
  case scale_rounding::up:
    return with_element(round_up{});
  case scale_rounding::down:
    return with_element(round_down{});
  case scale_rounding::nearest_even:
    break;
  }
  return with_element(round_nearest_even{});
}

} // namespace v0
} // namespace blockscale
