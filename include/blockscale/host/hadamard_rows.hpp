/// \file host/hadamard_rows.hpp
/// The 16-point randomized Hadamard transform (block/hadamard.hpp) over the rows of a matrix, in
/// place, with its arguments checked: for code that transforms a high-precision operand itself so
/// that it cancels against a quantized partner.
#pragma once

#include <stdexcept>
#include <string>

#include "../block/hadamard.hpp"
#include "../block/matrix_view.hpp"

namespace blockscale {
inline namespace v0 {
namespace detail {
inline void check_hadamard_rows(const char* function, matrix_view<float> data) {
  if (data.cols() % hadamard16::size != 0)
    throw std::invalid_argument(std::string(function) + ": cols (" + std::to_string(data.cols()) +
                                ") must be a multiple of 16");
}
} // namespace detail

/// Applies transform.forward() to every consecutive 16-element group of every row of `data`
/// (cols a multiple of 16, else std::invalid_argument); columns in [cols, ld) are not touched.
inline void hadamard_forward_rows(const hadamard16& transform, matrix_view<float> data) {
  detail::check_hadamard_rows("hadamard_forward_rows", data);
  for (std::size_t r = 0; r < data.rows(); ++r)
    transform.forward_groups(data.row(r), data.cols() / hadamard16::size);
}

/// Applies transform.inverse() likewise: undoes hadamard_forward_rows.
inline void hadamard_inverse_rows(const hadamard16& transform, matrix_view<float> data) {
  detail::check_hadamard_rows("hadamard_inverse_rows", data);
  for (std::size_t r = 0; r < data.rows(); ++r)
    transform.inverse_groups(data.row(r), data.cols() / hadamard16::size);
}

} // namespace v0
} // namespace blockscale
