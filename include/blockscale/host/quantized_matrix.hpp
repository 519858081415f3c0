/// \file matrix.hpp
/// Non-owning row-major matrix views for float, bfloat16 and float16 data, and
/// `quantized_matrix<BlockFormat>`: the owning result of quantization (packed elements, block
/// scales, the tensor scale), with element and scale accessors for tests and tools and raw byte
/// arrays for kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "../block/block_format.hpp"
#include "../block/scale_layout.hpp"
#include "../config.hpp"
#include "../numeric/half.hpp"

namespace blockscale {
inline namespace v0 {

/// A row-major matrix that someone else owns: element (r, c) is data[r · ld + c]. `T` is float,
/// bfloat16 or float16 (const for inputs); CUDA's `__nv_bfloat16` and `__half` work through
/// their bit-compatible blockscale types.
template <class T>
class matrix_view {
public:
  using value_type = T;

  matrix_view() = default;
  /// Checks the arguments: null `data` with a nonzero size, or `ld` < `cols`, or a size that
  /// overflows, throws std::invalid_argument naming the argument.
  matrix_view(T* data, std::size_t rows, std::size_t cols, std::size_t ld)
      : data_(data), rows_(rows), cols_(cols), ld_(ld) {
    if (ld < cols)
      throw std::invalid_argument("matrix_view: ld (" + std::to_string(ld) +
                                  ") is smaller than cols (" + std::to_string(cols) + ")");
    if (data == nullptr && rows != 0 && cols != 0)
      throw std::invalid_argument("matrix_view: data is null but the matrix has " +
                                  std::to_string(rows) + " x " + std::to_string(cols) +
                                  " elements");
    if (rows != 0 && ld > std::numeric_limits<std::size_t>::max() / sizeof(T) / rows)
      throw std::invalid_argument("matrix_view: rows * ld overflows the address space");
  }
  matrix_view(T* data, std::size_t rows, std::size_t cols) : matrix_view(data, rows, cols, cols) {}
  /// A view of mutable data converts to a view of const data.
  template <class U, std::enable_if_t<std::is_same<const U, T>::value, int> = 0>
  matrix_view(matrix_view<U> other) noexcept
      : data_(other.data()), rows_(other.rows()), cols_(other.cols()), ld_(other.ld()) {}

  T* data() const noexcept { return data_; }
  std::size_t rows() const noexcept { return rows_; }
  std::size_t cols() const noexcept { return cols_; }
  std::size_t ld() const noexcept { return ld_; }
  T& operator()(std::size_t r, std::size_t c) const noexcept { return data_[r * ld_ + c]; }

private:
  T* data_ = nullptr;
  std::size_t rows_ = 0, cols_ = 0, ld_ = 0;
};

/// How a block spans the matrix.
enum class block_shape {
  rowwise, ///< 1×B along each row (the reduction dimension)
  tile,    ///< B×B tiles with one scale (transposition-invariant weights)
};

/// What quantization saw, for metrics and tensor-scale policies.
struct quantize_stats {
  std::uint64_t blocks = 0;           ///< logical blocks (a tile counts once)
  std::uint64_t saturated_scales = 0; ///< blocks whose ideal scale exceeded the scale format's max
  std::uint64_t zero_scales = 0;      ///< blocks with a zero scale (all their elements are zero)
  std::uint64_t nan_scales = 0;       ///< blocks holding a NaN (NaN scale where the format has one)
  float amax = 0.0f;                  ///< max |x| over the data as quantized (NaN if any NaN)
};

/// A block-scaled matrix: rows × cols elements of `BlockFormat`, quantized along the rows in
/// blocks of B. Element storage is row-major with each row padded to a multiple of B; FP4
/// elements are packed two per byte, element 2i in the low nibble. Scales are stored per row
/// (a B×B tile repeats its scale on each of its rows) in `layout`. The decoded value is
/// (element · block scale) · tensor_scale(), with tensor_scale() = s_dec = 1 / s_enc, the decode
/// multiplier.
template <class BlockFormat>
class quantized_matrix {
  static_assert(detail::is_block_format<BlockFormat>::value,
                "quantized_matrix takes a block_format");

public:
  using format = BlockFormat;
  using element_type = typename BlockFormat::element_type;
  using scale_type = typename BlockFormat::scale_type;
  static constexpr int block_size = BlockFormat::block_size;

  quantized_matrix() = default;
  quantized_matrix(std::size_t rows, std::size_t cols, block_shape shape, scale_layout layout,
                   bool columnwise)
      : rows_(rows), cols_(cols), shape_(shape), layout_(layout), columnwise_(columnwise),
        elements_(rows * row_bytes()), scales_(scale_storage_size(layout, rows, blocks_per_row())) {
  }

  std::size_t rows() const noexcept { return rows_; }
  std::size_t cols() const noexcept { return cols_; }
  /// Columns including the zero padding up to a multiple of B.
  std::size_t padded_cols() const noexcept {
    return (cols_ + block_size - 1) / block_size * block_size;
  }
  std::size_t blocks_per_row() const noexcept { return padded_cols() / block_size; }
  /// Bytes per row of element storage.
  std::size_t row_bytes() const noexcept {
    return padded_cols() * static_cast<std::size_t>(BlockFormat::element_bits) / 8;
  }
  block_shape shape() const noexcept { return shape_; }
  scale_layout layout() const noexcept { return layout_; }
  /// Whether this holds the transpose of the matrix it was quantized from.
  bool columnwise() const noexcept { return columnwise_; }
  /// Whether the Hadamard transform was applied before quantizing, and its sign mask (a GEMM's
  /// two operands must agree on both for the transform to cancel).
  bool hadamard() const noexcept { return hadamard_; }
  std::uint16_t hadamard_signs() const noexcept { return hadamard_signs_; }
  void set_hadamard(bool applied, std::uint16_t signs) noexcept {
    hadamard_ = applied;
    hadamard_signs_ = applied ? signs : 0;
  }

  /// Element (r, c); throws std::out_of_range outside rows × padded_cols.
  element_type element(std::size_t r, std::size_t c) const {
    check(r, c, padded_cols());
    return element_unchecked(r, c);
  }
  /// The block scale that applies to element (r, c).
  scale_type block_scale(std::size_t r, std::size_t c) const {
    check(r, c, padded_cols());
    return scale_type::from_bits(
        scales_[scale_offset(layout_, r, c / block_size, blocks_per_row())]);
  }
  /// s_dec: multiply (element · block scale) by this to decode.
  float tensor_scale() const noexcept { return tensor_scale_; }
  /// The decoded value of element (r, c), in the order (element · scale) · s_dec.
  float value(std::size_t r, std::size_t c) const {
    return static_cast<float>(element(r, c)) * static_cast<float>(block_scale(r, c)) *
           tensor_scale_;
  }
  const quantize_stats& stats() const noexcept { return stats_; }

  /// Raw storage for kernels: packed elements (rows × row_bytes()) and scale codes.
  const std::vector<std::uint8_t>& element_bytes() const noexcept { return elements_; }
  const std::vector<std::uint8_t>& scale_bytes() const noexcept { return scales_; }
  std::vector<std::uint8_t>& element_bytes() noexcept { return elements_; }
  std::vector<std::uint8_t>& scale_bytes() noexcept { return scales_; }
  void set_tensor_scale(float s_dec) noexcept { tensor_scale_ = s_dec; }
  void set_stats(const quantize_stats& stats) noexcept { stats_ = stats; }

  /// Element (r, c) without bounds checks.
  element_type element_unchecked(std::size_t r, std::size_t c) const noexcept {
    const std::uint8_t* row = elements_.data() + r * row_bytes();
    if constexpr (BlockFormat::element_bits == 4)
      return element_type::from_bits(static_cast<std::uint8_t>(row[c / 2] >> (4 * (c % 2))));
    else
      return element_type::from_bits(row[c]);
  }

  friend bool operator==(const quantized_matrix& a, const quantized_matrix& b) noexcept {
    return a.rows_ == b.rows_ && a.cols_ == b.cols_ && a.shape_ == b.shape_ &&
           a.layout_ == b.layout_ && a.columnwise_ == b.columnwise_ && a.hadamard_ == b.hadamard_ &&
           a.hadamard_signs_ == b.hadamard_signs_ &&
           detail::bit_cast<std::uint32_t>(a.tensor_scale_) ==
               detail::bit_cast<std::uint32_t>(b.tensor_scale_) &&
           a.elements_ == b.elements_ && a.scales_ == b.scales_;
  }
  friend bool operator!=(const quantized_matrix& a, const quantized_matrix& b) noexcept {
    return !(a == b);
  }

private:
  void check(std::size_t r, std::size_t c, std::size_t col_limit) const {
    if (r >= rows_ || c >= col_limit)
      throw std::out_of_range("quantized_matrix: element (" + std::to_string(r) + ", " +
                              std::to_string(c) + ") is outside " + std::to_string(rows_) + " x " +
                              std::to_string(col_limit));
  }

  std::size_t rows_ = 0, cols_ = 0;
  block_shape shape_ = block_shape::rowwise;
  scale_layout layout_ = scale_layout::row_major;
  bool columnwise_ = false;
  bool hadamard_ = false;
  std::uint16_t hadamard_signs_ = 0;
  float tensor_scale_ = 1.0f;
  quantize_stats stats_{};
  std::vector<std::uint8_t> elements_;
  std::vector<std::uint8_t> scales_;
};

} // namespace v0
} // namespace blockscale
