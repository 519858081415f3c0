/// \file block/global_scale.hpp
/// Other libraries' per-tensor ("global") scales, as named adapters to blockscale's encode scale.
///
/// blockscale quantizes with s_enc (x is multiplied by it before block scales are chosen) and
/// decodes with s_dec = 1 / s_enc. Libraries and checkpoint formats store one of the two:
///
/// | convention          | where                                           | kind       |
/// |---------------------|-------------------------------------------------|------------|
/// | compressed_tensors  | `weight_global_scale`, `input_global_scale`     | divisor    |
/// | flashinfer          | `fp4_quantize(global_scale=...)`                | divisor    |
/// | transformer_engine  | NVFP4 s_enc                                     | divisor    |
/// | modelopt            | `weight_scale_2`, `input_scale`                 | multiplier |
/// | torchao             | `NVFP4Tensor.per_tensor_scale`                  | multiplier |
///
/// A divisor G is s_enc itself (q = x / (S_b / G)); a multiplier is s_dec. Mixing the two up gives
/// garbage output, a failure users of checkpoint tools report often.
#pragma once

#include <cfloat>
#include <cstdint>

#include "../config.hpp"
#include "../detail/bits.hpp"

namespace blockscale {
inline namespace v0 {

/// The libraries whose global-scale conventions blockscale speaks.
enum class global_scale_convention {
  compressed_tensors,
  flashinfer,
  transformer_engine,
  modelopt,
  torchao
};

/// Whether a convention stores the divisor s_enc (true) or the multiplier s_dec (false).
BLOCKSCALE_HOST_DEVICE constexpr bool stores_divisor(global_scale_convention c) noexcept {
  return c == global_scale_convention::compressed_tensors ||
         c == global_scale_convention::flashinfer ||
         c == global_scale_convention::transformer_engine;
}

namespace detail {
BLOCKSCALE_HOST_DEVICE constexpr bool finite_positive(float x) noexcept {
  return x > 0.0f && x <= FLT_MAX;
}
} // namespace detail

/// The global scale `convention` computes from a tensor amax, bit for bit as that library does in
/// float32 (`numerator` is 6 · 448 = 2688 for NVFP4):
///  - compressed_tensors, flashinfer: `2688 / amax` evaluated by torch as fp32(1 / amax) · 2688
///    (two roundings), and 1 where that is not finite or is zero;
///  - transformer_engine: the correctly rounded quotient capped at FLT_MAX, 1 where it is 0 or NaN
///    (its CurrentTensorScale, and blockscale's own encode_scale_from_amax);
///  - modelopt, torchao: fp32(amax / 2688), 1 where that is zero or not finite.
BLOCKSCALE_HOST_DEVICE inline float global_scale(float amax, global_scale_convention convention,
                                                 float numerator = 2688.0f) noexcept {
  float value = 1.0f;
  switch (convention) {
  case global_scale_convention::compressed_tensors:
  case global_scale_convention::flashinfer: {
    const float reciprocal = 1.0f / amax;
    value = reciprocal * numerator;
    break;
  }
  case global_scale_convention::transformer_engine: {
    // An amax is a magnitude: -0 counts as 0 (FLT_MAX), not as a negative number.
    const double magnitude = amax < 0.0f ? -static_cast<double>(amax) : static_cast<double>(amax);
    const double quotient = static_cast<double>(numerator) / (magnitude == 0.0 ? 0.0 : magnitude);
    if (!(quotient == quotient))
      return 1.0f;
    const float capped =
        quotient < static_cast<double>(FLT_MAX) ? static_cast<float>(quotient) : FLT_MAX;
    return capped == 0.0f ? 1.0f : capped;
  }
  case global_scale_convention::modelopt:
  case global_scale_convention::torchao:
    value = amax / numerator;
    break;
  }
  return detail::finite_positive(value) ? value : 1.0f;
}

/// The s_enc to quantize with for a stored global scale `value` (finite and positive): the value
/// for a divisor, fp32(1 / value) for a multiplier.
BLOCKSCALE_HOST_DEVICE inline float
encode_scale_from_global(float value, global_scale_convention convention) noexcept {
  return stores_divisor(convention) ? value : 1.0f / value;
}

/// The s_dec to decode with for a stored global scale `value` (finite and positive): the value
/// for a multiplier, fp32(1 / value) for a divisor.
BLOCKSCALE_HOST_DEVICE inline float
decode_scale_from_global(float value, global_scale_convention convention) noexcept {
  return stores_divisor(convention) ? 1.0f / value : value;
}

/// The value `convention` stores for a tensor quantized with s_enc = `encode`: s_enc for a
/// divisor, fp32(1 / s_enc) — blockscale's s_dec, bit for bit — for a multiplier. A reader that
/// decodes with the stored value then decodes exactly what blockscale encoded.
BLOCKSCALE_HOST_DEVICE inline float
global_scale_from_encode(float encode, global_scale_convention convention) noexcept {
  return stores_divisor(convention) ? encode : 1.0f / encode;
}

/// A decoded element as `convention`'s own dequantizer computes it from an element value `q`, a
/// block scale value `scale` and the stored global scale: q · (scale / G) for a divisor
/// (compressed-tensors' decompressor), (q · scale) · value for a multiplier. blockscale's own
/// decode, (q · scale) · s_dec, equals the multiplier form; for a divisor the two can differ in
/// the last bit.
BLOCKSCALE_HOST_DEVICE inline float
decode_with_global(float q, float scale, float value, global_scale_convention convention) noexcept {
  return stores_divisor(convention) ? q * (scale / value) : (q * scale) * value;
}

} // namespace v0
} // namespace blockscale
