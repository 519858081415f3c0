/// \file block/scale_layout.hpp
/// Where the block scale of (row m, block kb) lives in memory. Row-major: m · blocks + kb. The
/// tensor-core layout of cuBLASLt (VEC16_UE4M3 / VEC32_UE8M0) and CUTLASS's Sm1xx block-scaled
/// config pads rows to a multiple of 128 and blocks to a multiple of 4 (with zero scales) and
/// stores each 128×4 tile as 512 consecutive bytes (check values in the nvmath-python
/// documentation):
///
///     tile   = (m / 128) · ceil(blocks / 4) + kb / 4
///     offset = tile · 512 + (m % 32) · 16 + ((m % 128) / 32) · 4 + kb % 4
#pragma once

#include <cstddef>
#include <cstdint>

#include "../config.hpp"

namespace blockscale {
inline namespace v0 {

namespace detail {
/// T, in a form template argument deduction ignores (C++20's std::type_identity_t).
template <class T>
struct same_type_t {
  using type = T;
};
template <class T>
using same_type = typename same_type_t<T>::type;
} // namespace detail

/// Memory layout of a matrix's block scales.
enum class scale_layout {
  row_major,   ///< [rows][blocks]
  tensor_core, ///< 128×4 tiles of 512 bytes, rows padded to 128 and blocks to 4
};

/// Offset of scale (m, kb) in the tensor-core layout, for a matrix with `blocks` blocks per row.
/// `Index` is std::size_t, or std::uint32_t where the offsets fit (device code: 32-bit division
/// is a few instructions, 64-bit a subroutine call).
template <class Index = std::size_t>
BLOCKSCALE_HOST_DEVICE constexpr Index
tensor_core_scale_offset(detail::same_type<Index> m, detail::same_type<Index> kb,
                         detail::same_type<Index> blocks) noexcept {
  const Index tile = (m / 128) * ((blocks + 3) / 4) + kb / 4;
  return tile * 512 + (m % 32) * 16 + ((m % 128) / 32) * 4 + kb % 4;
}

/// Offset of scale (m, kb) in `layout`.
BLOCKSCALE_HOST_DEVICE constexpr std::size_t
scale_offset(scale_layout layout, std::size_t m, std::size_t kb, std::size_t blocks) noexcept {
  return layout == scale_layout::row_major ? m * blocks + kb
                                           : tensor_core_scale_offset(m, kb, blocks);
}

/// Bytes of scale storage for `rows` × `blocks` scales in `layout` (padding included).
BLOCKSCALE_HOST_DEVICE constexpr std::size_t
scale_storage_size(scale_layout layout, std::size_t rows, std::size_t blocks) noexcept {
  return layout == scale_layout::row_major ? rows * blocks
                                           : ((rows + 127) / 128 * 128) * ((blocks + 3) / 4 * 4);
}

/// Entries of the tensor-core layout's padding for `rows` × `blocks` scales: what lies beyond the
/// matrix in its rows padded to 128 and blocks padded to 4 (all zero by the layout's definition).
BLOCKSCALE_HOST_DEVICE constexpr std::size_t
tensor_core_padding_count(std::size_t rows, std::size_t blocks) noexcept {
  return scale_storage_size(scale_layout::tensor_core, rows, blocks) - rows * blocks;
}

/// Where padding entry `i` < tensor_core_padding_count(rows, blocks) lives: first the padded blocks
/// of the matrix's rows, row by row, then the padded rows whole. Lets many threads clear the
/// padding in parallel, each its own entries.
/// `Index` as for tensor_core_scale_offset.
template <class Index = std::size_t>
BLOCKSCALE_HOST_DEVICE constexpr Index
tensor_core_padding_offset(detail::same_type<Index> i, detail::same_type<Index> rows,
                           detail::same_type<Index> blocks) noexcept {
  const Index padded_blocks = (blocks + 3) / 4 * 4;
  const Index extra = padded_blocks - blocks;
  const Index in_rows = rows * extra;
  Index m = 0, kb = 0;
  if (i < in_rows) {
    m = i / extra;
    kb = blocks + i % extra;
  } else {
    m = rows + (i - in_rows) / padded_blocks;
    kb = (i - in_rows) % padded_blocks;
  }
  return tensor_core_scale_offset<Index>(m, kb, blocks);
}

} // namespace v0
} // namespace blockscale
