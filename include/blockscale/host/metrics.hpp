/// \file host/metrics.hpp
/// Error metrics of a quantized matrix against the data it came from: relative MSE, SQNR, max
/// absolute error, the fractions of elements clipped at the element max and flushed to zero, and
/// (from a quantized_matrix) the block-scale counts quantization recorded. The comparison happens
/// where quantization happened, which the quantized matrix records: its direction, and the
/// Hadamard-transformed data when the transform was on (the transform is orthogonal, so the error
/// energy is the same as after undoing it).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "../block/codec.hpp"
#include "../block/matrix_view.hpp"
#include "../block/quantized_view.hpp"
#include "quantized_matrix.hpp"

namespace blockscale {
inline namespace v0 {

/// How far a quantized matrix is from its source.
struct quantization_error {
  std::size_t elements = 0;      ///< compared elements: finite in x and q, padding not counted
  double relative_mse = 0.0;     ///< Σ (x - q)² / Σ x²; 0 when both are 0; NaN with no element
  double sqnr_db = 0.0;          ///< -10 log10(relative_mse); +inf when exact; NaN with no element
  double max_abs_error = 0.0;    ///< max |x - q|
  double clipped_fraction = 0.0; ///< elements with |x · f_b| beyond the element max
  double flushed_fraction = 0.0; ///< nonzero elements that decode to zero
  std::uint64_t saturated_scales = 0; ///< quantize_stats of a quantized_matrix (0 for a view)
  std::uint64_t zero_scales = 0;
  std::uint64_t nan_scales = 0;
  std::uint64_t blocks = 0;
};

/// Compares `q` with the `x` it was quantized from; q says how (its direction, transform and
/// scales). Non-finite elements are left out. Throws std::invalid_argument if q's shape is not
/// x's (transposed when q is columnwise).
template <class BlockFormat, class Byte, class T>
quantization_error measure_error(matrix_view<T> input, basic_quantized_view<BlockFormat, Byte> q) {
  constexpr int b = BlockFormat::block_size;
  const matrix_view<const T> x = input;
  const std::size_t rows = q.columnwise() ? x.cols() : x.rows();
  const std::size_t cols = q.columnwise() ? x.rows() : x.cols();
  if (rows != q.rows() || cols != q.cols())
    throw std::invalid_argument("measure_error: q is " + std::to_string(q.rows()) + " x " +
                                std::to_string(q.cols()) + ", but x " +
                                (q.columnwise() ? "transposed " : "") + "is " +
                                std::to_string(rows) + " x " + std::to_string(cols));
  using element_type = typename BlockFormat::element_type;
  const float element_max = BlockFormat::element_max();
  // Every element code's value, decoded once: a decoded element is then exactly
  // codec::decode_value's (q · S_b) · s_dec, without decoding the code each time.
  constexpr int code_count = 1 << (BlockFormat::element_bits == 4 ? 4 : 8);
  float element_values[code_count];
  for (int code = 0; code < code_count; ++code)
    element_values[code] =
        static_cast<float>(element_type::from_bits(static_cast<std::uint8_t>(code)));
  const float s_dec = q.decode_scale();
  quantization_error error;
  double error_energy = 0.0, signal_energy = 0.0, max_abs_error = 0.0;
  std::size_t clipped = 0, flushed = 0;
  float block[b];
  for (std::size_t r = 0; r < q.rows(); ++r) {
    const auto* row = q.row(r);
    for (std::size_t kb = 0; kb < q.blocks_per_row(); ++kb) {
      codec::gather_block<BlockFormat>(x, q.shape(), r, kb, block);
      const std::size_t c0 = kb * b;
      const auto scale = static_cast<float>(q.block_scale(r, c0));
      const float factor = codec::encode_factor(scale, s_dec);
      const bool keep = codec::keeps_elements(scale);
      const std::size_t count = std::min(static_cast<std::size_t>(b), q.cols() - c0);
      for (std::size_t j = 0; j < count; ++j) {
        const float original = block[j];
        const float decoded =
            element_values[codec::load_code<BlockFormat>(row, c0 + j)] * scale * s_dec;
        if (!std::isfinite(original) || !std::isfinite(decoded))
          continue;
        const double difference = static_cast<double>(original) - decoded;
        error_energy += difference * difference;
        signal_energy += static_cast<double>(original) * original;
        const double magnitude = std::fabs(difference);
        max_abs_error = magnitude > max_abs_error ? magnitude : max_abs_error;
        clipped += keep && std::fabs(original * factor) > element_max ? 1 : 0;
        flushed += original != 0.0f && decoded == 0.0f ? 1 : 0;
        ++error.elements;
      }
    }
  }
  error.max_abs_error = max_abs_error;
  if (error.elements == 0) {
    error.relative_mse = error.sqnr_db = std::numeric_limits<double>::quiet_NaN();
    return error;
  }
  if (signal_energy > 0.0)
    error.relative_mse = error_energy / signal_energy;
  else
    error.relative_mse = error_energy > 0.0 ? HUGE_VAL : 0.0;
  error.sqnr_db = -10.0 * std::log10(error.relative_mse);
  const auto n = static_cast<double>(error.elements);
  error.clipped_fraction = static_cast<double>(clipped) / n;
  error.flushed_fraction = static_cast<double>(flushed) / n;
  return error;
}

/// As above, adding the block-scale counts of q.stats().
template <class BlockFormat, class T>
quantization_error measure_error(matrix_view<T> x, const quantized_matrix<BlockFormat>& q) {
  quantization_error error = measure_error(x, q.view());
  error.saturated_scales = q.stats().saturated_scales;
  error.zero_scales = q.stats().zero_scales;
  error.nan_scales = q.stats().nan_scales;
  error.blocks = q.stats().blocks;
  return error;
}

} // namespace v0
} // namespace blockscale
