/// \file host/quantize_reference.hpp
/// The reference quantizer: a plain loop over the codec, one block at a time, every element
/// through `convert` — what one CUDA thread does for its block, written out for the host. It is
/// the oracle of the fast path (host/quantize_fast.hpp), and the path that block sizes the fast
/// path does not specialise take. No heap allocation; scratch is one block on the stack.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../block/codec.hpp"
#include "../block/matrix_view.hpp"
#include "../block/quantize_params.hpp"
#include "../block/quantized_view.hpp"
#include "../config.hpp"
#include "../numeric/random.hpp"

namespace blockscale {
inline namespace v0 {
namespace detail {

/// Rows of the quantized matrix that share block scales: B for tiles, else 1.
template <class BlockFormat>
constexpr std::size_t group_rows(const quantized_shape& shape) noexcept {
  return shape.blocks == block_shape::tile ? static_cast<std::size_t>(BlockFormat::block_size) : 1;
}

/// Quantizes the row groups [group_begin, group_end) of `out` from `x` (already checked against
/// each other), block by block: gather every row of the group, amax, decide the scale, then
/// gather, encode and store each row. Returns what it saw.
template <class BlockFormat, class T, class ScaleRounding, class ElementRounding>
quantize_stats quantize_groups_reference(matrix_view<const T> x, quantized_view<BlockFormat> out,
                                         const quantize_params& params, std::size_t group_begin,
                                         std::size_t group_end, ScaleRounding scale_rounding,
                                         ElementRounding) noexcept {
  constexpr int b = BlockFormat::block_size;
  constexpr bool stochastic = std::is_same<ElementRounding, round_stochastic>::value;
  const quantized_shape& shape = params.shape;
  const std::size_t group = group_rows<BlockFormat>(shape);
  const std::size_t padded = out.padded_cols();
  float values[b];
  std::uint8_t codes[b];
  std::uint32_t random[b];
  quantize_stats stats;
  for (std::size_t g = group_begin; g < group_end; ++g) {
    const std::size_t r0 = g * group;
    const std::size_t rows_here = shape.rows - r0 < group ? shape.rows - r0 : group;
    for (std::size_t kb = 0; kb < out.blocks_per_row(); ++kb) {
      std::uint32_t amax = 0;
      for (std::size_t i = 0; i < rows_here; ++i) {
        codec::gather_block<BlockFormat>(x, shape, r0 + i, kb, values);
        const std::uint32_t row_amax = codec::block_amax_bits(values, b);
        amax = row_amax > amax ? row_amax : amax;
      }
      const float block_amax = codec::amax_value(amax);
      const auto decision = codec::decide_scale<BlockFormat>(block_amax, params, scale_rounding);
      const std::uint8_t scale_code = decision.scale.bits();
      codec::count_blocks<BlockFormat>(stats, &amax, &scale_code, 1, params.scale_multiplier,
                                       scale_rounding);
      for (std::size_t i = 0; i < rows_here; ++i) {
        const std::size_t r = r0 + i;
        out.scales()[out.scale_index(r, kb)] = decision.scale.bits();
        codec::gather_block<BlockFormat>(x, shape, r, kb, values);
        if constexpr (stochastic) {
          for (int j = 0; j < b; ++j)
            random[j] =
                rounding_bits(params.seed, params.offset,
                              codec::random_index(r, kb * b + static_cast<std::size_t>(j), padded));
          codec::encode_block<BlockFormat>(values, decision.factor, decision.keep,
                                           codec::stochastic_rounding_from{random}, codes);
        } else {
          codec::encode_block<BlockFormat>(values, decision.factor, decision.keep,
                                           codec::same_rounding<ElementRounding>{{}}, codes);
        }
        codec::store_block<BlockFormat>(codes,
                                        out.row(r) + codec::element_bytes<BlockFormat>(kb * b));
      }
    }
  }
  return stats;
}

/// The number of row groups of a quantized shape.
template <class BlockFormat>
constexpr std::size_t group_count(const quantized_shape& shape) noexcept {
  const std::size_t group = group_rows<BlockFormat>(shape);
  return (shape.rows + group - 1) / group;
}

} // namespace detail
} // namespace v0
} // namespace blockscale
