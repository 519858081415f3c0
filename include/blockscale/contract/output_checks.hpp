/// \file contract/output_checks.hpp
/// The quantize contract's output checks: whether a caller's quantized matrix is the one that
/// quantizing x with given options produces, each difference named in the message of a
/// std::invalid_argument. Host-only; the host quantizers (host/) and the device launchers (cuda/)
/// both include it.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

#include "../block/quantize_params.hpp"
#include "../block/quantized_shape.hpp"
#include "../config.hpp"

namespace blockscale {
inline namespace v0 {
namespace detail {

/// "rows x cols", for messages.
inline std::string shape_string(std::size_t rows, std::size_t cols) {
  return std::to_string(rows) + " x " + std::to_string(cols);
}

/// Throws std::invalid_argument unless `out` is the matrix that quantizing x with `params`
/// produces: its size, blocks, layout, direction and transform, each named when it differs.
template <class BlockFormat>
void check_output(const char* function, const char* name, const quantized_shape& out,
                  const quantize_params& params) {
  const quantized_shape& want = params.shape;
  const auto fail = [&](const std::string& what) {
    return std::invalid_argument(std::string(function) + ": " + name + " " + what);
  };
  if (out.columnwise != want.columnwise)
    throw fail(std::string("is ") + (out.columnwise ? "columnwise" : "rowwise") +
               " but the options say " + (want.columnwise ? "columnwise" : "rowwise"));
  if (out.rows != want.rows || out.cols != want.cols)
    throw fail("is " + shape_string(out.rows, out.cols) + ", quantizing x gives " +
               shape_string(want.rows, want.cols));
  if (out.blocks != want.blocks)
    throw fail("has other block shapes than options.shape");
  if (out.layout != want.layout)
    throw fail("has another scale layout than options.layout");
  if (out.hadamard != want.hadamard ||
      (want.hadamard && out.transform.sign_mask() != want.transform.sign_mask()))
    throw fail("disagrees with options.hadamard / options.transform");
}

} // namespace detail
} // namespace v0
} // namespace blockscale
