/// \file block/quantized_shape.hpp
/// `quantized_shape`: everything about a quantized matrix but its bytes and its decode scale —
/// size, block shape, scale layout, direction and transform — and `block_shape`.
#pragma once

#include <cstddef>

#include "../config.hpp"
#include "hadamard.hpp"
#include "scale_layout.hpp"

namespace blockscale {
inline namespace v0 {

/// How a block spans the matrix.
enum class block_shape {
  rowwise, ///< 1×B along each row (the reduction dimension)
  tile,    ///< B×B tiles with one scale (transposition-invariant weights)
};

/// Everything about a quantized matrix but its bytes and its decode scale.
struct quantized_shape {
  std::size_t rows = 0; ///< rows of the quantized matrix (the input's columns when columnwise)
  std::size_t cols = 0; ///< columns, the reduction dimension K (the input's rows when columnwise)
  block_shape blocks = block_shape::rowwise;
  scale_layout layout = scale_layout::row_major;
  bool columnwise = false; ///< holds the transpose of the matrix it was quantized from
  bool hadamard = false;   ///< the values were Hadamard-transformed along K before quantizing
  hadamard16 transform = hadamard16::te_default(); ///< the transform's signs (when `hadamard`)

  /// Equal fields; the transform's signs count only when the transform is on.
  friend BLOCKSCALE_HOST_DEVICE constexpr bool operator==(const quantized_shape& a,
                                                          const quantized_shape& b) noexcept {
    return a.rows == b.rows && a.cols == b.cols && a.blocks == b.blocks && a.layout == b.layout &&
           a.columnwise == b.columnwise && a.hadamard == b.hadamard &&
           (!a.hadamard || a.transform.sign_mask() == b.transform.sign_mask());
  }
  friend BLOCKSCALE_HOST_DEVICE constexpr bool operator!=(const quantized_shape& a,
                                                          const quantized_shape& b) noexcept {
    return !(a == b);
  }
};

} // namespace v0
} // namespace blockscale
