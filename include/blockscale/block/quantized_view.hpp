/// \file block/quantized_view.hpp
/// `quantized_view<BlockFormat>` and `const_quantized_view<BlockFormat>`: a block-scaled matrix in
/// memory that someone else owns (a host `quantized_matrix`, a device buffer, a caller's arrays),
/// described completely: size, block shape, direction, scale layout, Hadamard transform and where
/// its decode scale lives. Trivially copyable with `__host__ __device__` accessors: the same value
/// is what quantizers write through, what dequantizers and GEMMs read, on the host and the device.
///
/// Storage. Elements are row-major, each row padded with zeros to a multiple of the block size B
/// (`padded_cols`), FP4 packed two per byte with the even element in the low nibble
/// (numeric/packed.hpp), `row_bytes` bytes per row. Block scales are codes of the scale format,
/// one per row and block (a B×B tile repeats its scale on each of its rows), at
/// `scale_offset(layout, r, kb, blocks_per_row)` (block/scale_layout.hpp). The decode scale s_dec
/// is one float in the same memory: decoded value = (element · block scale) · s_dec.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "../config.hpp"
#include "block_format.hpp"
#include "codec.hpp"
#include "quantized_shape.hpp"
#include "scale_layout.hpp"

namespace blockscale {
inline namespace v0 {

/// Bytes of storage a quantized matrix needs.
struct quantized_storage {
  std::size_t element_bytes = 0; ///< rows · row_bytes
  std::size_t scale_bytes = 0;   ///< scale_storage_size(layout, rows, blocks per row)
};

/// The storage `BlockFormat` needs for `shape`. Throws std::invalid_argument when a size does not
/// fit in std::size_t. Host only.
template <class BlockFormat>
quantized_storage storage_for(const quantized_shape& shape) {
  constexpr std::size_t b = BlockFormat::block_size;
  constexpr std::size_t max = std::numeric_limits<std::size_t>::max();
  const auto fail = [&](const char* what) {
    return std::invalid_argument(std::string("quantized storage: ") + what + " of a " +
                                 std::to_string(shape.rows) + " x " + std::to_string(shape.cols) +
                                 " matrix overflows std::size_t");
  };
  if (shape.cols > max - (b - 1))
    throw fail("the padded column count");
  const std::size_t padded = (shape.cols + b - 1) / b * b;
  const std::size_t row_bytes = BlockFormat::element_bits == 4 ? padded / 2 : padded;
  if (shape.rows != 0 && row_bytes > max / shape.rows)
    throw fail("the element bytes");
  const std::size_t blocks = padded / b;
  std::size_t scale_bytes = 0;
  if (shape.layout == scale_layout::row_major) {
    if (shape.rows != 0 && blocks > max / shape.rows)
      throw fail("the scale bytes");
    scale_bytes = shape.rows * blocks;
  } else {
    if (shape.rows > max - 127 || blocks > max - 3)
      throw fail("the padded scale tiles");
    const std::size_t rows = (shape.rows + 127) / 128 * 128, cols = (blocks + 3) / 4 * 4;
    if (rows != 0 && cols > max / rows)
      throw fail("the scale bytes");
    scale_bytes = rows * cols;
  }
  return {shape.rows * row_bytes, scale_bytes};
}

/// A view of a block-scaled matrix. `Byte` is `std::uint8_t` (a view to write through, as
/// quantizers do) or `const std::uint8_t` (a view to read); use the aliases `quantized_view` and
/// `const_quantized_view`. Element accessors are unchecked: a view is only as valid as the
/// checks of `make` (or of the owner that handed it out).
template <class BlockFormat, class Byte>
class basic_quantized_view {
  static_assert(detail::is_block_format<BlockFormat>::value, "quantized views take a block_format");
  static_assert(std::is_same<std::remove_const_t<Byte>, std::uint8_t>::value,
                "Byte is std::uint8_t or const std::uint8_t");

public:
  using format = BlockFormat;
  using element_type = typename BlockFormat::element_type;
  using scale_type = typename BlockFormat::scale_type;
  using byte_type = Byte;
  /// float for a writable view, const float for a read-only one.
  using decode_scale_type = std::conditional_t<std::is_const<Byte>::value, const float, float>;
  static constexpr int block_size = BlockFormat::block_size;

  /// An empty view.
  basic_quantized_view() = default;

  /// A writable view converts to a read-only one.
  template <class Other, std::enable_if_t<std::is_same<const Other, Byte>::value &&
                                              !std::is_same<Other, Byte>::value,
                                          int> = 0>
  BLOCKSCALE_HOST_DEVICE constexpr basic_quantized_view(
      basic_quantized_view<BlockFormat, Other> other) noexcept
      : elements_(other.elements()), scales_(other.scales()),
        decode_scale_(other.decode_scale_data()), shape_(other.shape()) {}

  /// A view of caller memory: `elements` (`element_bytes` bytes), `scales` (`scale_bytes`) and
  /// the decode scale. Throws std::invalid_argument naming the argument when a buffer is null or
  /// smaller than `storage_for<BlockFormat>(shape)` says, or a size overflows. Host only.
  static basic_quantized_view make(const quantized_shape& shape, Byte* elements,
                                   std::size_t element_bytes, Byte* scales, std::size_t scale_bytes,
                                   decode_scale_type* decode_scale) {
    const quantized_storage need = storage_for<BlockFormat>(shape);
    const auto check = [](const void* data, std::size_t have, std::size_t want, const char* name) {
      if (have < want)
        throw std::invalid_argument(std::string("quantized view: ") + name + " holds " +
                                    std::to_string(have) + " bytes, the matrix needs " +
                                    std::to_string(want));
      if (data == nullptr && want != 0)
        throw std::invalid_argument(std::string("quantized view: ") + name + " is null");
    };
    check(elements, element_bytes, need.element_bytes, "elements");
    check(scales, scale_bytes, need.scale_bytes, "scales");
    if (decode_scale == nullptr)
      throw std::invalid_argument("quantized view: decode_scale is null");
    return unchecked(shape, elements, scales, decode_scale);
  }

  /// A view built without checks, on the host or the device.
  [[nodiscard]] BLOCKSCALE_HOST_DEVICE static constexpr basic_quantized_view
  unchecked(const quantized_shape& shape, Byte* elements, Byte* scales,
            decode_scale_type* decode_scale) noexcept {
    basic_quantized_view view;
    view.elements_ = elements;
    view.scales_ = scales;
    view.decode_scale_ = decode_scale;
    view.shape_ = shape;
    return view;
  }

  /// Everything but the bytes.
  BLOCKSCALE_HOST_DEVICE constexpr const quantized_shape& shape() const noexcept { return shape_; }
  BLOCKSCALE_HOST_DEVICE constexpr std::size_t rows() const noexcept { return shape_.rows; }
  BLOCKSCALE_HOST_DEVICE constexpr std::size_t cols() const noexcept { return shape_.cols; }
  /// Columns including the zero padding up to a multiple of B.
  BLOCKSCALE_HOST_DEVICE constexpr std::size_t padded_cols() const noexcept {
    return (shape_.cols + block_size - 1) / block_size * block_size;
  }
  BLOCKSCALE_HOST_DEVICE constexpr std::size_t blocks_per_row() const noexcept {
    return padded_cols() / block_size;
  }
  /// Bytes per row of element storage.
  BLOCKSCALE_HOST_DEVICE constexpr std::size_t row_bytes() const noexcept {
    return BlockFormat::element_bits == 4 ? padded_cols() / 2 : padded_cols();
  }
  BLOCKSCALE_HOST_DEVICE constexpr block_shape blocks() const noexcept { return shape_.blocks; }
  BLOCKSCALE_HOST_DEVICE constexpr scale_layout layout() const noexcept { return shape_.layout; }
  BLOCKSCALE_HOST_DEVICE constexpr bool columnwise() const noexcept { return shape_.columnwise; }
  BLOCKSCALE_HOST_DEVICE constexpr bool hadamard() const noexcept { return shape_.hadamard; }
  /// The transform's sign mask, 0 when no transform was applied.
  BLOCKSCALE_HOST_DEVICE constexpr std::uint16_t hadamard_signs() const noexcept {
    return shape_.hadamard ? shape_.transform.sign_mask() : std::uint16_t{0};
  }

  /// The packed elements, rows · row_bytes bytes.
  BLOCKSCALE_HOST_DEVICE constexpr Byte* elements() const noexcept { return elements_; }
  /// The first byte of row `r`.
  BLOCKSCALE_HOST_DEVICE constexpr Byte* row(std::size_t r) const noexcept {
    return elements_ + r * row_bytes();
  }
  /// The scale codes, in `layout()`.
  BLOCKSCALE_HOST_DEVICE constexpr Byte* scales() const noexcept { return scales_; }
  /// Where the scale of row `r`, block `kb` lives in `scales()`.
  BLOCKSCALE_HOST_DEVICE constexpr std::size_t scale_index(std::size_t r,
                                                           std::size_t kb) const noexcept {
    return scale_offset(shape_.layout, r, kb, blocks_per_row());
  }
  /// s_dec: multiply (element · block scale) by this to decode.
  BLOCKSCALE_HOST_DEVICE constexpr float decode_scale() const noexcept { return *decode_scale_; }
  /// Where the decode scale lives.
  BLOCKSCALE_HOST_DEVICE constexpr decode_scale_type* decode_scale_data() const noexcept {
    return decode_scale_;
  }

  /// The code of element (r, c), c < padded_cols().
  BLOCKSCALE_HOST_DEVICE constexpr std::uint8_t element_code(std::size_t r,
                                                             std::size_t c) const noexcept {
    return codec::load_code<BlockFormat>(row(r), c);
  }
  /// Element (r, c), c < padded_cols().
  BLOCKSCALE_HOST_DEVICE constexpr element_type element(std::size_t r,
                                                        std::size_t c) const noexcept {
    return element_type::from_bits(element_code(r, c));
  }
  /// The block scale that applies to element (r, c).
  BLOCKSCALE_HOST_DEVICE constexpr scale_type block_scale(std::size_t r,
                                                          std::size_t c) const noexcept {
    return scale_type::from_bits(scales_[scale_index(r, c / block_size)]);
  }
  /// The decoded value of element (r, c): (element · block scale) · s_dec.
  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR float value(std::size_t r,
                                                                   std::size_t c) const noexcept {
    return codec::decode_value<BlockFormat>(element_code(r, c),
                                            static_cast<float>(block_scale(r, c)), decode_scale());
  }

private:
  Byte* elements_ = nullptr;
  Byte* scales_ = nullptr;
  decode_scale_type* decode_scale_ = nullptr;
  quantized_shape shape_{};
};

/// Writes zero scales into the padding of the tensor-core layout (rows up to a multiple of 128,
/// blocks up to a multiple of 4), which the layout defines as zero; nothing for row-major. The
/// quantizers call it, so the padding never keeps what caller memory held before.
template <class BlockFormat>
BLOCKSCALE_HOST_DEVICE void
clear_scale_padding(const basic_quantized_view<BlockFormat, std::uint8_t>& view) noexcept {
  if (view.layout() != scale_layout::tensor_core)
    return;
  const std::size_t rows = view.rows(), blocks = view.blocks_per_row();
  const std::size_t padded_rows = (rows + 127) / 128 * 128, padded_blocks = (blocks + 3) / 4 * 4;
  for (std::size_t r = 0; r < padded_rows; ++r)
    for (std::size_t kb = r < rows ? blocks : 0; kb < padded_blocks; ++kb)
      view.scales()[tensor_core_scale_offset(r, kb, blocks)] = 0;
}

/// A view to quantize into.
template <class BlockFormat>
using quantized_view = basic_quantized_view<BlockFormat, std::uint8_t>;
/// A view to read (dequantize, GEMM, metrics).
template <class BlockFormat>
using const_quantized_view = basic_quantized_view<BlockFormat, const std::uint8_t>;

static_assert(std::is_trivially_copyable<quantized_view<nvfp4>>::value &&
                  std::is_trivially_copyable<const_quantized_view<nvfp4>>::value,
              "quantized views are passed to kernels by value");

} // namespace v0
} // namespace blockscale
