/// \file host/quantized_matrix.hpp
/// `quantized_matrix<BlockFormat>`: a block-scaled matrix that owns its storage on the host
/// (packed elements, block scales, the decode scale, and the statistics of its last quantization),
/// and hands out views of it (block/quantized_view.hpp) to quantize into and to read. Its storage
/// is never exposed as a resizable container: a view can only ever describe the bytes it has.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "../block/block_format.hpp"
#include "../block/codec.hpp"
#include "../block/quantized_view.hpp"
#include "../config.hpp"
#include "../detail/bits.hpp"

namespace blockscale {
inline namespace v0 {

/// rows × cols elements of `BlockFormat`, quantized along the rows in blocks of B (the storage
/// rules are block/quantized_view.hpp's). The decoded value is (element · block scale) ·
/// decode_scale(), with decode_scale() = s_dec = 1 / s_enc.
template <class BlockFormat>
class quantized_matrix {
  static_assert(detail::is_block_format<BlockFormat>::value,
                "quantized_matrix takes a block_format");

public:
  using format = BlockFormat;
  using element_type = typename BlockFormat::element_type;
  using scale_type = typename BlockFormat::scale_type;
  static constexpr int block_size = BlockFormat::block_size;

  /// An empty matrix.
  quantized_matrix() = default;

  /// Zeroed storage for `shape` (decode scale 1). Throws std::invalid_argument when the sizes
  /// overflow, std::bad_alloc when they cannot be allocated.
  explicit quantized_matrix(const quantized_shape& shape)
      : shape_(shape), storage_(storage_for<BlockFormat>(shape)),
        elements_(new std::uint8_t[storage_.element_bytes]()),
        scales_(new std::uint8_t[storage_.scale_bytes]()) {}

  quantized_matrix(const quantized_matrix& other)
      : shape_(other.shape_), storage_(other.storage_), decode_scale_(other.decode_scale_),
        stats_(other.stats_), elements_(copy(other.elements_.get(), storage_.element_bytes)),
        scales_(copy(other.scales_.get(), storage_.scale_bytes)) {}
  /// Leaves `other` empty (0 × 0).
  quantized_matrix(quantized_matrix&& other) noexcept { swap(other); }
  quantized_matrix& operator=(quantized_matrix other) noexcept {
    swap(other);
    return *this;
  }
  void swap(quantized_matrix& other) noexcept {
    std::swap(shape_, other.shape_);
    std::swap(storage_, other.storage_);
    std::swap(decode_scale_, other.decode_scale_);
    std::swap(stats_, other.stats_);
    elements_.swap(other.elements_);
    scales_.swap(other.scales_);
  }

  /// A view to quantize into (quantize_into), describing this matrix's storage.
  quantized_view<BlockFormat> view() noexcept {
    return quantized_view<BlockFormat>::unchecked(shape_, elements_.get(), scales_.get(),
                                                  &decode_scale_);
  }
  /// A view to read.
  const_quantized_view<BlockFormat> view() const noexcept {
    return const_quantized_view<BlockFormat>::unchecked(shape_, elements_.get(), scales_.get(),
                                                        &decode_scale_);
  }

  const quantized_shape& shape() const noexcept { return shape_; }
  std::size_t rows() const noexcept { return shape_.rows; }
  std::size_t cols() const noexcept { return shape_.cols; }
  /// Columns including the zero padding up to a multiple of B.
  std::size_t padded_cols() const noexcept { return view().padded_cols(); }
  std::size_t blocks_per_row() const noexcept { return view().blocks_per_row(); }
  /// Bytes per row of element storage.
  std::size_t row_bytes() const noexcept { return view().row_bytes(); }
  block_shape blocks() const noexcept { return shape_.blocks; }
  scale_layout layout() const noexcept { return shape_.layout; }
  /// Whether this holds the transpose of the matrix it was quantized from.
  bool columnwise() const noexcept { return shape_.columnwise; }
  /// Whether the Hadamard transform was applied before quantizing, and its sign mask (a GEMM's
  /// two operands must agree on both for the transform to cancel).
  bool hadamard() const noexcept { return shape_.hadamard; }
  std::uint16_t hadamard_signs() const noexcept { return view().hadamard_signs(); }

  /// Element (r, c); throws std::out_of_range outside rows × padded_cols.
  element_type element(std::size_t r, std::size_t c) const {
    check(r, c);
    return view().element(r, c);
  }
  /// The block scale that applies to element (r, c); throws std::out_of_range like element().
  scale_type block_scale(std::size_t r, std::size_t c) const {
    check(r, c);
    return view().block_scale(r, c);
  }
  /// The decoded value of element (r, c), (element · scale) · s_dec; throws like element().
  float value(std::size_t r, std::size_t c) const {
    check(r, c);
    return view().value(r, c);
  }
  /// s_dec: multiply (element · block scale) by this to decode.
  float decode_scale() const noexcept { return decode_scale_; }
  /// What the last quantization into this matrix saw.
  const quantize_stats& stats() const noexcept { return stats_; }
  /// Records the statistics of a quantization into view() (quantize_into does it).
  void set_stats(const quantize_stats& stats) noexcept { stats_ = stats; }

  /// The packed elements, storage().element_bytes bytes.
  const std::uint8_t* element_data() const noexcept { return elements_.get(); }
  /// The scale codes, storage().scale_bytes bytes.
  const std::uint8_t* scale_data() const noexcept { return scales_.get(); }
  /// The sizes of the two arrays.
  const quantized_storage& storage() const noexcept { return storage_; }

  /// Equal shape, decode scale (bit for bit) and bytes; the statistics are not compared.
  friend bool operator==(const quantized_matrix& a, const quantized_matrix& b) noexcept {
    return a.shape_ == b.shape_ &&
           detail::bit_cast<std::uint32_t>(a.decode_scale_) ==
               detail::bit_cast<std::uint32_t>(b.decode_scale_) &&
           std::equal(a.element_data(), a.element_data() + a.storage_.element_bytes,
                      b.element_data()) &&
           std::equal(a.scale_data(), a.scale_data() + a.storage_.scale_bytes, b.scale_data());
  }
  friend bool operator!=(const quantized_matrix& a, const quantized_matrix& b) noexcept {
    return !(a == b);
  }

private:
  static std::unique_ptr<std::uint8_t[]> copy(const std::uint8_t* data, std::size_t n) {
    std::unique_ptr<std::uint8_t[]> out(new std::uint8_t[n]);
    for (std::size_t i = 0; i < n; ++i)
      out[i] = data[i];
    return out;
  }
  void check(std::size_t r, std::size_t c) const {
    if (r >= rows() || c >= padded_cols())
      throw std::out_of_range("quantized_matrix: element (" + std::to_string(r) + ", " +
                              std::to_string(c) + ") is outside " + std::to_string(rows()) + " x " +
                              std::to_string(padded_cols()));
  }

  quantized_shape shape_{};
  quantized_storage storage_{};
  float decode_scale_ = 1.0f;
  quantize_stats stats_{};
  std::unique_ptr<std::uint8_t[]> elements_;
  std::unique_ptr<std::uint8_t[]> scales_;
};

} // namespace v0
} // namespace blockscale
