/// \file cuda/kernels/quantize.hpp
/// The quantize kernel as a CTA program (cuda/warp.hpp): one CTA reads a tile of the input once
/// into shared memory and writes from it the rowwise output, the columnwise output (the
/// transpose), or both. Every decision is the codec's (block/codec.hpp), in the order the host
/// reference takes (host/quantize_reference.hpp), so the bytes equal `quantize_into`'s.
///
/// Tile: R = 4·B rows × 64 columns of the input (B the larger block size of the two outputs), 256
/// threads. Phase 0 loads the tile as floats (zeros beyond the matrix; 16-byte loads where the
/// address allows). Phase 1: for each output, each warp takes units of 32 blocks — 32 quantized
/// rows, one block each — lane i owning quantized row i of the unit: it reads its block from shared
/// memory (a row of the tile rowwise, a column columnwise), transforms it, takes its amax (a B×B
/// tile: the max over B lanes, one xor-shuffle butterfly), decides the scale, encodes, and writes
/// its packed bytes with one vector store and its scale. Counters are summed per warp and added to
/// device memory with one atomic each. Phase 2 (only with a completion action, as the device
/// tensor-scale policies use): the last CTA to finish runs the action, which then sees every CTA's
/// counters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../../block/codec.hpp"
#include "../../block/matrix_view.hpp"
#include "../../block/quantize_params.hpp"
#include "../../block/quantized_view.hpp"
#include "../../block/scale_layout.hpp"
#include "../../config.hpp"
#include "../../numeric/random.hpp"
#include "../memory.hpp"
#include "../warp.hpp"

namespace blockscale {
inline namespace v0 {
namespace cuda {

/// The three numbers a tensor scale decides, as the kernels read them: s_enc, s_dec = 1 / s_enc
/// and m = s_enc · fp32(1 / target). Lives in device memory when a device policy chooses it.
struct tensor_scales {
  float encode_scale = 1.0f;
  float decode_scale = 1.0f;
  float scale_multiplier = 1.0f;

  /// The scales for s_enc under a rule whose fp32(1 / target) is `inverse_target`, computed as
  /// make_quantize_params computes them.
  BLOCKSCALE_HOST_DEVICE static tensor_scales make(float s_enc, float inverse_target) noexcept {
    return {s_enc, 1.0f / s_enc, s_enc * inverse_target};
  }
};

/// Quantization counters in device memory, added to with atomics (a tile counts once).
struct device_quantize_stats {
  unsigned long long blocks = 0;
  unsigned long long saturated_scales = 0;
  unsigned long long zero_scales = 0;
  unsigned long long nan_scales = 0;
  std::uint32_t amax_bits = 0; ///< max of |x|'s bit patterns (NaN patterns above Inf's)

  /// The counters as the host's quantize_stats.
  BLOCKSCALE_HOST_DEVICE quantize_stats value() const noexcept {
    quantize_stats stats;
    stats.blocks = blocks;
    stats.saturated_scales = saturated_scales;
    stats.zero_scales = zero_scales;
    stats.nan_scales = nan_scales;
    stats.amax = codec::amax_value(amax_bits);
    return stats;
  }
};

/// One output of a quantize program: the view it writes, its checked parameters, and the rounding
/// tags the launcher chose (`with_rounding_tags`). `scales`, when set, points at device memory
/// whose three scales replace the params' (a device policy's choice, made after the launch was
/// queued); `stats`, when set, receives the counters.
template <class BlockFormat, class ScaleRounding, class ElementRounding>
struct quantize_output {
  using format = BlockFormat;
  using scale_rounding = ScaleRounding;
  using element_rounding = ElementRounding;
  static constexpr bool enabled = true;
  static constexpr int block_size = BlockFormat::block_size;
  static_assert(64 % block_size == 0 && block_size <= warp_size,
                "device quantization takes blocks of 1, 2, 4, 8, 16 or 32 elements");

  quantized_view<BlockFormat> view;
  quantize_params params;
  const tensor_scales* scales = nullptr;
  device_quantize_stats* stats = nullptr;

  /// The parameters in force: params, with the scales read from `scales` when it is set.
  BLOCKSCALE_HOST_DEVICE quantize_params effective_params() const noexcept {
    quantize_params p = params;
    if (scales != nullptr) {
      p.encode_scale = scales->encode_scale;
      p.decode_scale = scales->decode_scale;
      p.scale_multiplier = scales->scale_multiplier;
    }
    return p;
  }
};

/// The absent output of a one-direction program.
struct no_quantize_output {
  static constexpr bool enabled = false;
  static constexpr int block_size = 1;
};

/// The absent completion action.
struct no_completion {
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE void operator()(const Warp&) const noexcept {}
};

namespace detail {

/// Counters of one lane, summed over the warp before they go to memory.
struct lane_counts {
  std::uint32_t blocks = 0, saturated = 0, zero = 0, nan = 0, amax_bits = 0;
};

/// Sums the lanes' counters and lets lane 0 add them to `stats` (when set).
template <class Warp>
BLOCKSCALE_HOST_DEVICE void publish_counts(Warp& warp, lanes<Warp, lane_counts>& counts,
                                           device_quantize_stats* stats) {
  if (stats == nullptr)
    return;
  lanes<Warp, std::uint32_t> value;
  const auto reduce = [&](std::uint32_t lane_counts::*field, bool max) {
    warp.each([&](int lane) { value[lane] = counts[lane].*field; });
    if (max)
      warp.max_over(value, warp_size);
    else
      warp.sum_over(value, warp_size);
    warp.each([&](int lane) { counts[lane].*field = value[lane]; });
  };
  reduce(&lane_counts::blocks, false);
  reduce(&lane_counts::saturated, false);
  reduce(&lane_counts::zero, false);
  reduce(&lane_counts::nan, false);
  reduce(&lane_counts::amax_bits, true);
  warp.each([&](int lane) {
    if (lane != 0)
      return;
    const lane_counts& c = counts[lane];
    if (c.blocks != 0) {
      warp.atomic_add(&stats->blocks, c.blocks);
      warp.atomic_add(&stats->saturated_scales, c.saturated);
      warp.atomic_add(&stats->zero_scales, c.zero);
      warp.atomic_add(&stats->nan_scales, c.nan);
      warp.atomic_max(&stats->amax_bits, c.amax_bits);
    }
    warp.fence();
  });
}

/// The last phase of a program with a completion action: warp 0's lane 0 of each CTA counts the
/// CTA done in `*done` (when set); the CTA that counts last runs `completion` — every other CTA's
/// writes are then visible — and resets the counter for the next launch.
template <class Warp, class Completion>
BLOCKSCALE_HOST_DEVICE void complete_last_cta(Warp& warp, cta_coord cta, std::uint32_t* done,
                                              const Completion& completion) {
  if (done == nullptr || warp.index() != 0)
    return;
  warp.each([&](int lane) {
    if (lane != 0)
      return;
    warp.fence();
    if (warp.atomic_add(done, 1u) + 1 == cta.count) {
      warp.fence();
      completion(warp);
      *done = 0;
    }
  });
}

} // namespace detail

/// The quantize program over input element type T (float, bfloat16, float16) with a rowwise and a
/// columnwise output, either of which may be `no_quantize_output`, and a completion action run by
/// the last CTA when `done` is set (a counter in device memory, zero before the launch; the last
/// CTA resets it).
template <class T, class RowOutput, class ColumnOutput, class Completion = no_completion>
struct quantize_program {
  static_assert(RowOutput::enabled || ColumnOutput::enabled, "a quantize program writes something");
  static constexpr int warps = 8;
  static constexpr int threads = warps * warp_size;
  static constexpr int phases = 3;
  static constexpr int max_block = RowOutput::block_size > ColumnOutput::block_size
                                       ? RowOutput::block_size
                                       : ColumnOutput::block_size;
  static constexpr int tile_rows = 4 * max_block < 32 ? 32 : 4 * max_block;
  static constexpr int tile_cols = 64;
  static constexpr int chunk = 8; ///< consecutive values one lane loads at a time

  /// The input tile as floats; one column of padding keeps the rowwise reads (one row per lane)
  /// free of bank conflicts, and the columnwise reads are consecutive words.
  struct shared_storage {
    float tile[tile_rows][tile_cols + 1];
  };

  matrix_view<const T> x;
  RowOutput rowwise{};
  ColumnOutput columnwise{};
  std::uint32_t* done = nullptr;
  Completion completion{};

  BLOCKSCALE_HOST_DEVICE std::size_t tiles_across() const noexcept {
    return (x.cols() + tile_cols - 1) / tile_cols;
  }
  BLOCKSCALE_HOST_DEVICE std::size_t tiles_down() const noexcept {
    return (x.rows() + tile_rows - 1) / tile_rows;
  }
  /// CTAs of the launch: one per tile, at least one (it writes the decode scales).
  BLOCKSCALE_HOST_DEVICE std::size_t grid_size() const noexcept {
    const std::size_t tiles = tiles_across() * tiles_down();
    return tiles == 0 ? 1 : tiles;
  }

  template <int Phase, class Warp>
  BLOCKSCALE_HOST_DEVICE void run(Warp& warp, cta_coord cta, shared_storage& shared) const {
    // 32-bit: the launcher keeps the grid below 2^31 CTAs.
    const std::uint32_t across =
        tiles_across() == 0 ? 1u : static_cast<std::uint32_t>(tiles_across());
    const std::size_t r0 = static_cast<std::size_t>(cta.index / across) * tile_rows;
    const std::size_t c0 = static_cast<std::size_t>(cta.index % across) * tile_cols;
    if constexpr (Phase == 0) {
      load(warp, shared, r0, c0);
    } else if constexpr (Phase == 1) {
      if constexpr (RowOutput::enabled)
        quantize_units<false>(warp, cta, rowwise, shared, r0, c0);
      if constexpr (ColumnOutput::enabled)
        quantize_units<true>(warp, cta, columnwise, shared, r0, c0);
    } else {
      detail::complete_last_cta(warp, cta, done, completion);
    }
  }

private:
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE void load(Warp& warp, shared_storage& shared, std::size_t r0,
                                   std::size_t c0) const {
    constexpr int chunks_per_row = tile_cols / chunk;
    warp.each([&](int lane) {
      for (int q = warp.index() * warp_size + lane; q < tile_rows * chunks_per_row; q += threads) {
        const int row = q / chunks_per_row, col = q % chunks_per_row * chunk;
        const std::size_t r = r0 + static_cast<std::size_t>(row);
        const std::size_t c = c0 + static_cast<std::size_t>(col);
        const int valid = r < x.rows() && c < x.cols()
                              ? (x.cols() - c < chunk ? static_cast<int>(x.cols() - c) : chunk)
                              : 0;
        float values[chunk];
        detail::load_floats<chunk>(valid > 0 ? x.row(r) + c : x.data(), valid, values);
        for (int j = 0; j < chunk; ++j)
          shared.tile[row][col + j] = values[j];
      }
    });
  }

  /// Phase 1 for one output. Columnwise, quantized row i of the tile is input column c0 + i and
  /// its K runs down the tile's rows.
  template <bool Columnwise, class Output, class Warp>
  BLOCKSCALE_HOST_DEVICE void quantize_units(Warp& warp, cta_coord cta, const Output& output,
                                             const shared_storage& shared, std::size_t r0,
                                             std::size_t c0) const {
    using format = typename Output::format;
    using scale_rounding = typename Output::scale_rounding;
    using element_rounding = typename Output::element_rounding;
    constexpr int b = format::block_size;
    constexpr int along = Columnwise ? tile_cols : tile_rows;  // quantized rows in the tile
    constexpr int across = Columnwise ? tile_rows : tile_cols; // K in the tile
    constexpr int blocks_across = across / b;
    constexpr int units = along / warp_size * blocks_across;
    constexpr std::size_t element_bytes = codec::element_bytes<format>(b);
    const quantize_params params = output.effective_params();
    const quantized_view<format>& out = output.view;
    const quantized_shape& shape = params.shape;
    const bool tiles = shape.blocks == block_shape::tile;
    const std::size_t row0 = Columnwise ? c0 : r0, k0 = Columnwise ? r0 : c0;

    lanes<Warp, detail::lane_counts> counts;
    warp.each([&](int lane) { counts[lane] = {}; });
    for (int unit = warp.index(); unit < units; unit += warps) {
      const int group = unit / blocks_across, block = unit % blocks_across;
      lanes<Warp, float[b]> values;
      lanes<Warp, std::uint32_t> amax;
      warp.each([&](int lane) {
        const int i = group * warp_size + lane;
        for (int j = 0; j < b; ++j)
          values[lane][j] =
              Columnwise ? shared.tile[block * b + j][i] : shared.tile[i][block * b + j];
        codec::transform_block<format>(shape, values[lane]);
        amax[lane] = codec::block_amax_bits(values[lane], b);
      });
      if (tiles)
        warp.max_over(amax, b); // B consecutive lanes are the B rows of one tile
      warp.each([&](int lane) {
        const std::size_t r = row0 + static_cast<std::size_t>(group * warp_size + lane);
        const std::size_t k = k0 + static_cast<std::size_t>(block * b);
        if (r >= out.rows() || k >= out.cols())
          return; // no block here
        const std::size_t kb = k / b;
        const auto decision =
            codec::decide_scale<format>(codec::amax_value(amax[lane]), params, scale_rounding{});
        const std::uint8_t scale_code = decision.scale.bits();
        out.scales()[out.scale_index(r, kb)] = scale_code;
        std::uint8_t codes[b];
        if constexpr (std::is_same<element_rounding, round_stochastic>::value) {
          std::uint32_t random[b];
          fill_random_bits(params.seed, params.offset, codec::random_index(r, k, out.padded_cols()),
                           b, random);
          codec::encode_block<format>(values[lane], decision.factor, decision.keep,
                                      codec::stochastic_rounding_from{random}, codes);
        } else {
          codec::encode_block<format>(values[lane], decision.factor, decision.keep,
                                      codec::same_rounding<element_rounding>{{}}, codes);
        }
        alignas(16) std::uint8_t bytes[element_bytes];
        codec::store_block<format>(codes, bytes);
        detail::store_bytes<static_cast<int>(element_bytes)>(
            out.row(r) + codec::element_bytes<format>(k), bytes);
        if (!tiles || r % b == 0) {
          quantize_stats one;
          codec::count_blocks<format>(one, &amax[lane], &scale_code, 1, params.scale_multiplier,
                                      scale_rounding{});
          detail::lane_counts& c = counts[lane];
          c.blocks += 1;
          c.saturated += static_cast<std::uint32_t>(one.saturated_scales);
          c.zero += static_cast<std::uint32_t>(one.zero_scales);
          c.nan += static_cast<std::uint32_t>(one.nan_scales);
          c.amax_bits = amax[lane] > c.amax_bits ? amax[lane] : c.amax_bits;
        }
      });
    }
    detail::publish_counts(warp, counts, output.stats);

    // The decode scale, once; the tensor-core layout's padding, spread over every thread.
    const bool padded = shape.layout == scale_layout::tensor_core;
    warp.each([&](int lane) {
      const std::size_t thread =
          static_cast<std::size_t>(cta.index) * threads + warp.index() * warp_size + lane;
      if (thread == 0)
        *out.decode_scale_data() = params.decode_scale;
      if (!padded)
        return;
      // 32-bit offsets: the launcher keeps tensor-core scale storage below 2^32 bytes.
      const auto rows = static_cast<std::uint32_t>(out.rows());
      const auto blocks = static_cast<std::uint32_t>(out.blocks_per_row());
      const std::size_t count = tensor_core_padding_count(rows, blocks);
      for (std::size_t i = thread; i < count; i += static_cast<std::size_t>(cta.count) * threads)
        out.scales()[tensor_core_padding_offset<std::uint32_t>(static_cast<std::uint32_t>(i), rows,
                                                               blocks)] = 0;
    });
  }
};

} // namespace cuda
} // namespace v0
} // namespace blockscale
