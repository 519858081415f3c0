/// \file metrics.hpp
/// Error metrics of a quantized matrix against the data it came from: relative MSE, SQNR, max
/// absolute error, the fractions of elements clipped at the element max and flushed to zero, and
/// the block-scale counts quantization recorded. The comparison happens where quantization
/// happened: against the Hadamard-transformed data when the transform was on (the transform is
/// orthogonal, so the error energy is the same as after undoing it).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "quantize.hpp"
#include "quantized_matrix.hpp"

namespace blockscale {
inline namespace v0 {

/// How far a quantized matrix is from its source.
struct quantization_error {
  std::size_t elements = 0;           ///< compared elements (the padding is not counted)
  double relative_mse = 0.0;          ///< Σ (x - q)² / Σ x² (0 when both are 0)
  double sqnr_db = 0.0;               ///< -10 log10(relative_mse); +inf for an exact result
  double max_abs_error = 0.0;         ///< max |x - q|
  double clipped_fraction = 0.0;      ///< elements with |x · f_b| beyond the element max
  double flushed_fraction = 0.0;      ///< nonzero elements that decode to zero
  std::uint64_t saturated_scales = 0; ///< from quantize_stats
  std::uint64_t zero_scales = 0;
  std::uint64_t nan_scales = 0;
  std::uint64_t blocks = 0;
};

/// Compares `q` with the `x` it was quantized from using `options` (the same options: the
/// direction, the transform and the rule decide what each element was). Non-finite elements are
/// left out of the error sums. Throws std::invalid_argument if the shapes do not match.
template <class BlockFormat, class T>
quantization_error measure_error(matrix_view<T> input, const quantized_matrix<BlockFormat>& q,
                                 const quantize_options& options = {}) {
  constexpr int b = BlockFormat::block_size;
  const matrix_view<const T> x = input;
  quantize_options geometry = options; // only the shape of the plan is used here
  geometry.tensor_scale = 1.0f;
  const detail::quantize_plan plan = detail::make_plan<BlockFormat>(x, geometry);
  if (plan.rows != q.rows() || plan.cols != q.cols() || options.columnwise != q.columnwise())
    throw std::invalid_argument("measure_error: q is " + std::to_string(q.rows()) + " x " +
                                std::to_string(q.cols()) +
                                ", which is not x quantized in the direction options give");
  const float element_max = BlockFormat::element_max();
  quantization_error error;
  double error_energy = 0.0, signal_energy = 0.0;
  std::size_t clipped = 0, flushed = 0;
  float block[b];
  for (std::size_t r = 0; r < plan.rows; ++r) {
    for (std::size_t kb = 0; kb < plan.blocks; ++kb) {
      detail::gather_block<b>(x, options, plan, r, kb, block);
      const std::size_t c0 = kb * b;
      const float scale = static_cast<float>(q.block_scale(r, c0));
      const float inverse = 1.0f / (scale * q.tensor_scale());
      const float factor = inverse < FLT_MAX ? inverse : FLT_MAX;
      for (std::size_t j = 0; j < static_cast<std::size_t>(b) && c0 + j < plan.cols; ++j) {
        const float original = block[j];
        const float decoded = q.value(r, c0 + j);
        if (!std::isfinite(original) || !std::isfinite(decoded))
          continue;
        const double difference = static_cast<double>(original) - decoded;
        error_energy += difference * difference;
        signal_energy += static_cast<double>(original) * original;
        error.max_abs_error = std::fmax(error.max_abs_error, std::fabs(difference));
        clipped += scale > 0.0f && std::fabs(original * factor) > element_max ? 1 : 0;
        flushed += original != 0.0f && decoded == 0.0f ? 1 : 0;
        ++error.elements;
      }
    }
  }
  if (signal_energy > 0.0)
    error.relative_mse = error_energy / signal_energy;
  else
    error.relative_mse = error_energy > 0.0 ? HUGE_VAL : 0.0;
  error.sqnr_db = -10.0 * std::log10(error.relative_mse);
  const double n = error.elements == 0 ? 1.0 : static_cast<double>(error.elements);
  error.clipped_fraction = static_cast<double>(clipped) / n;
  error.flushed_fraction = static_cast<double>(flushed) / n;
  error.saturated_scales = q.stats().saturated_scales;
  error.zero_scales = q.stats().zero_scales;
  error.nan_scales = q.stats().nan_scales;
  error.blocks = q.stats().blocks;
  return error;
}

} // namespace v0
} // namespace blockscale
