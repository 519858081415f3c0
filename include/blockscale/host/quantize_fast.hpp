/// \file host/quantize_fast.hpp
/// The fast host quantizer: the codec's calls (block/codec.hpp) reordered into panels — up to
/// 8192 values of the quantized matrix in one contiguous block of memory — so that every step
/// runs as a loop over many blocks: all block amaxes of the panel, all scale decisions, all
/// encodes. Rowwise panels are read in place where the input is float and needs no padding or
/// transform; columnwise panels are 32 × 256 input tiles transposed on the way in, so the
/// transpose costs no more than a copy; rowwise and columnwise outputs can come from one read of
/// each tile. The per-block bodies (host/simd.hpp) are the codec's, or SIMD bodies proven
/// bit-identical to them. Block sizes that do not divide 32 take the reference loop instead.
/// No heap allocation: scratch lives on the stack (about 80 KiB per worker).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../block/codec.hpp"
#include "../block/matrix_view.hpp"
#include "../block/quantize_params.hpp"
#include "../block/quantized_view.hpp"
#include "../config.hpp"
#include "../numeric/random.hpp"
#include "quantize_reference.hpp"
#include "simd.hpp"

namespace blockscale {
inline namespace v0 {
namespace detail {

/// Whether the panel path handles `BlockFormat`: block sizes that divide 32.
template <class BlockFormat>
constexpr bool fast_path_block = 32 % BlockFormat::block_size == 0;

/// Values in one panel.
constexpr std::size_t panel_capacity = 8192;
/// Input rows × columns of one tile of the tile path: tall for a columnwise output alone (its
/// panel, the transpose, then has rows of 256 values), square-ish when both outputs share it.
struct tile_shape {
  std::size_t rows, cols;
};
constexpr tile_shape column_tile{64, 128}, pair_tile{64, 128};
static_assert(column_tile.rows * column_tile.cols <= panel_capacity &&
                  pair_tile.rows * pair_tile.cols <= panel_capacity,
              "a tile must fit a panel");

/// f_b and whether elements are kept, for every scale code: computed once per call with the
/// codec's encode_factor and keeps_elements, so that the panels need no division.
struct factor_table {
  float factor[256];
  std::uint8_t keep[256];

  template <class BlockFormat>
  void fill(float s_dec) noexcept {
    using scale_type = typename BlockFormat::scale_type;
    for (int code = 0; code < 256; ++code) {
      const auto scale = static_cast<float>(scale_type::from_bits(static_cast<std::uint8_t>(code)));
      factor[code] = codec::encode_factor(scale, s_dec);
      keep[code] = codec::keeps_elements(scale) ? 0xFF : 0x00;
    }
  }
};

/// Part of the quantized matrix held contiguously: rows × cols values, value (i, j) at
/// data[i · ld + j] being element (row0 + i, col0 + j). cols is a multiple of B.
struct panel {
  const float* data;
  std::size_t ld, rows, cols, row0, col0;
};

/// One output of a fast pass: where it goes, how, and its per-call table.
template <class BlockFormat>
struct fast_output {
  quantized_view<BlockFormat> out;
  quantize_params params;
  factor_table table;
};

/// Quantizes one panel: every step over all the panel's blocks.
template <class BlockFormat, class ScaleRounding, class ElementRounding>
void quantize_panel(const panel& p, const fast_output<BlockFormat>& job, quantize_stats& stats,
                    ScaleRounding scale_rounding, ElementRounding) noexcept {
  using scale_type = typename BlockFormat::scale_type;
  constexpr std::size_t b = BlockFormat::block_size;
  constexpr std::size_t max_blocks = panel_capacity / b;
  constexpr bool stochastic = std::is_same<ElementRounding, round_stochastic>::value;
  const quantize_params& params = job.params;
  const quantized_view<BlockFormat>& out = job.out;
  const std::size_t per_row = p.cols / b;
  const bool tile = params.shape.blocks == block_shape::tile;

  // 1. Block amaxes, on bit patterns (codec::amax_bits).
  alignas(64) std::uint32_t amax[max_blocks] = {}; // (zeroed: GCC cannot see every read is written)
  for (std::size_t i = 0; i < p.rows; ++i)
    simd::row_block_amax<b>(p.data + i * p.ld, per_row, amax + i * per_row);
  // 2. A tile's amax is the max over its rows (a panel starts on a tile boundary).
  std::size_t decisions = p.rows * per_row;
  if (tile) {
    const std::size_t groups = (p.rows + b - 1) / b;
    for (std::size_t g = 0; g < groups; ++g) {
      const std::size_t first = g * b, last = std::min(p.rows, first + b);
      for (std::size_t kb = 0; kb < per_row; ++kb) {
        std::uint32_t m = amax[first * per_row + kb];
        for (std::size_t i = first + 1; i < last; ++i)
          m = std::max(m, amax[i * per_row + kb]);
        amax[g * per_row + kb] = m;
      }
    }
    decisions = groups * per_row;
  }
  // 3. Scale codes for all decisions, then the statistics (loops the compiler vectorizes).
  alignas(64) std::uint8_t code[max_blocks] = {};
  const float m = params.scale_multiplier;
  for (std::size_t d = 0; d < decisions; ++d)
    code[d] = codec::scale_code<scale_type>(codec::amax_value(amax[d]) * m, scale_rounding);
  codec::count_blocks<BlockFormat>(stats, amax, code, decisions, m, scale_rounding);
  // 4. Scales, on every row (a tile's on each of its rows).
  const std::size_t kb0 = p.col0 / b;
  for (std::size_t i = 0; i < p.rows; ++i) {
    const std::uint8_t* row_codes = code + (tile ? i / b : i) * per_row;
    const std::size_t r = p.row0 + i;
    if (params.shape.layout == scale_layout::row_major) {
      std::memcpy(out.scales() + out.scale_index(r, kb0), row_codes, per_row);
    } else {
      for (std::size_t kb = 0; kb < per_row; ++kb)
        out.scales()[out.scale_index(r, kb0 + kb)] = row_codes[kb];
    }
  }
  // 5. Elements, row by row.
  alignas(64) std::uint32_t random[stochastic ? panel_capacity : 1];
  const std::size_t padded = out.padded_cols();
  for (std::size_t i = 0; i < p.rows; ++i) {
    const std::uint8_t* row_codes = code + (tile ? i / b : i) * per_row;
    const float* values = p.data + i * p.ld;
    std::uint8_t* dst = out.row(p.row0 + i) + codec::element_bytes<BlockFormat>(p.col0);
    if constexpr (stochastic) {
      simd::fill_rounding_bits(params.seed, params.offset,
                               codec::random_index(p.row0 + i, p.col0, padded), p.cols, random);
      simd::encode_row_stochastic<BlockFormat>(values, per_row, row_codes, job.table, random, dst);
    } else {
      simd::encode_row_nearest<BlockFormat>(values, per_row, row_codes, job.table, dst);
    }
  }
}

/// The input from (r, c) on when it is float already, to be read in place; null otherwise.
template <class T>
const float* float_input(matrix_view<const T> x, std::size_t r, std::size_t c) noexcept {
  if constexpr (std::is_same<std::remove_const_t<T>, float>::value)
    return x.row(r) + c;
  else
    return nullptr;
}

/// Converts `count` input values to float.
template <class T>
void load_values(const T* in, std::size_t count, float* out) noexcept {
  if constexpr (std::is_same<std::remove_const_t<T>, float>::value) {
    std::memcpy(out, in, count * sizeof(float));
  } else {
    for (std::size_t j = 0; j < count; ++j)
      out[j] = static_cast<float>(in[j]);
  }
}

/// Asks for the tile right of (i0, j0) while the current one is worked on: the hardware
/// prefetcher follows few streams and stops at page boundaries, and a tile has shape.rows of them.
template <class T>
void prefetch_next_tile(matrix_view<const T> x, tile_shape shape, std::size_t i0,
                        std::size_t j0) noexcept {
  const std::size_t next = j0 + shape.cols;
  if (next >= x.cols())
    return;
  constexpr std::size_t line = 64 / sizeof(T);
  const std::size_t rows_here = std::min(shape.rows, x.rows() - i0);
  const std::size_t end = std::min(x.cols(), next + shape.cols);
  for (std::size_t i = 0; i < rows_here; ++i)
    for (std::size_t c = next; c < end; c += line)
      prefetch(x.row(i0 + i) + c);
}

/// Input rows [i0, i0 + shape.rows) × columns [j0, j0 + width) as floats, with zeros past the
/// input's last row and column: the input itself when it is float and the tile lies inside it
/// (returns its row stride), else a copy in `scratch` (row stride shape.cols).
template <class T>
const float* load_tile(matrix_view<const T> x, tile_shape shape, std::size_t i0, std::size_t j0,
                       std::size_t width, float* scratch, std::size_t& ld) noexcept {
  const std::size_t rows_here = std::min(shape.rows, x.rows() - i0);
  const std::size_t valid = x.cols() > j0 ? std::min(width, x.cols() - j0) : 0;
  prefetch_next_tile(x, shape, i0, j0);
  const float* in_place = float_input(x, i0, j0);
  if (in_place != nullptr && rows_here == shape.rows && valid == width) {
    ld = x.ld();
    return in_place;
  }
  for (std::size_t i = 0; i < shape.rows; ++i) {
    float* row = scratch + i * shape.cols;
    const std::size_t loaded = i < rows_here ? valid : 0;
    if (loaded != 0)
      load_values(x.row(i0 + i) + j0, loaded, row);
    std::fill(row + loaded, row + width, 0.0f);
  }
  ld = shape.cols;
  return scratch;
}

/// Rowwise output: quantizes the row groups [group_begin, group_end) (one row, or B for tiles),
/// in panels of whole row groups.
template <class BlockFormat, class T, class ScaleRounding, class ElementRounding>
quantize_stats quantize_rows_fast(matrix_view<const T> x, const fast_output<BlockFormat>& job,
                                  std::size_t group_begin, std::size_t group_end,
                                  ScaleRounding scale_rounding,
                                  ElementRounding element_rounding) noexcept {
  constexpr std::size_t b = BlockFormat::block_size;
  const quantized_shape& shape = job.params.shape;
  const std::size_t group = group_rows<BlockFormat>(shape);
  const std::size_t width = panel_capacity / group / b * b;
  const std::size_t padded = job.out.padded_cols();
  alignas(64) float scratch[panel_capacity];
  quantize_stats stats;
  for (std::size_t g = group_begin; g < group_end; ++g) {
    const std::size_t r0 = g * group, rows_here = std::min(group, shape.rows - r0);
    for (std::size_t c0 = 0; c0 < padded; c0 += width) {
      const std::size_t cols_here = std::min(width, padded - c0);
      const std::size_t valid = shape.cols > c0 ? std::min(cols_here, shape.cols - c0) : 0;
      panel p{scratch, cols_here, rows_here, cols_here, r0, c0};
      const float* in_place = float_input(x, r0, c0);
      if (in_place != nullptr && !shape.hadamard && valid == cols_here) {
        p.data = in_place;
        p.ld = x.ld();
      } else {
        for (std::size_t i = 0; i < rows_here; ++i) {
          float* row = scratch + i * cols_here;
          load_values(x.row(r0 + i) + c0, valid, row);
          std::fill(row + valid, row + cols_here, 0.0f);
          if (shape.hadamard)
            shape.transform.forward_groups(row, cols_here / hadamard16::size);
        }
      }
      quantize_panel(p, job, stats, scale_rounding, element_rounding);
    }
  }
  return stats;
}

/// The tile path: for each tile of `shape` (input rows × columns), the rowwise output's panel is
/// the tile itself and the columnwise output's panel is its transpose. Either job may be null.
/// Quantizes the row strips [strip_begin, strip_end) of shape.rows input rows.
template <class RowFormat, class ColumnFormat, class T, class RowRoundings, class ColumnRoundings>
void quantize_tiles_fast(matrix_view<const T> x, tile_shape shape,
                         const fast_output<RowFormat>* rowwise,
                         const fast_output<ColumnFormat>* columnwise, std::size_t strip_begin,
                         std::size_t strip_end, RowRoundings row_roundings,
                         ColumnRoundings column_roundings, quantize_stats& row_stats,
                         quantize_stats& column_stats) noexcept {
  alignas(64) float tile[panel_capacity];
  alignas(64) float transposed[panel_capacity];
  const std::size_t row_padded = rowwise != nullptr ? rowwise->out.padded_cols() : x.cols();
  const std::size_t column_padded = columnwise != nullptr ? columnwise->out.padded_cols() : 0;
  for (std::size_t s = strip_begin; s < strip_end; ++s) {
    const std::size_t i0 = s * shape.rows, rows_here = std::min(shape.rows, x.rows() - i0);
    for (std::size_t j0 = 0; j0 < row_padded; j0 += shape.cols) {
      const std::size_t width = std::min(shape.cols, row_padded - j0);
      const std::size_t valid = x.cols() > j0 ? std::min(width, x.cols() - j0) : 0;
      std::size_t ld = 0;
      const float* values = load_tile(x, shape, i0, j0, width, tile, ld);
      if (columnwise != nullptr && valid != 0) {
        simd::transpose_tile(values, ld, shape.rows, valid, transposed);
        const quantized_shape& out_shape = columnwise->params.shape;
        const std::size_t depth = std::min(shape.rows, column_padded - i0);
        if (out_shape.hadamard)
          for (std::size_t c = 0; c < valid; ++c)
            out_shape.transform.forward_groups(transposed + c * shape.rows,
                                               depth / hadamard16::size);
        const panel p{transposed, shape.rows, valid, depth, j0, i0};
        column_roundings([&](auto scale_rounding, auto element_rounding) {
          quantize_panel(p, *columnwise, column_stats, scale_rounding, element_rounding);
        });
      }
      if (rowwise != nullptr) {
        const quantized_shape& out_shape = rowwise->params.shape;
        if (out_shape.hadamard) {
          if (values != tile) { // transform a copy, never the input
            for (std::size_t i = 0; i < rows_here; ++i)
              std::memcpy(tile + i * shape.cols, values + i * ld, width * sizeof(float));
            values = tile;
            ld = shape.cols;
          }
          for (std::size_t i = 0; i < rows_here; ++i)
            out_shape.transform.forward_groups(tile + i * shape.cols, width / hadamard16::size);
        }
        const panel p{values, ld, rows_here, width, i0, j0};
        row_roundings([&](auto scale_rounding, auto element_rounding) {
          quantize_panel(p, *rowwise, row_stats, scale_rounding, element_rounding);
        });
      }
    }
  }
}

} // namespace detail
} // namespace v0
} // namespace blockscale
