/// \file host/quantize.hpp
/// Host quantization of float, bfloat16 and float16 matrices into block-scaled formats:
///  - `quantize_into(x, out, options[, pool])` writes into caller memory (a `quantized_view`, or a
///    `quantized_matrix` whose storage is reused) and returns what it saw; with one thread or a
///    caller's `thread_pool` it allocates nothing and starts no thread;
///  - `quantize<F>(x, options)` allocates the result and calls it;
///  - `quantize_into(x, rowwise, rowwise_options, columnwise, columnwise_options[, pool])`
///    produces both directions from one read of x (a training step needs X and dY both ways);
///  - the same three with a tensor-scale policy (block/tensor_scale.hpp) and an amax hook (an
///    all-reduce across ranks, say): the amax is measured in a separate parallel pass only when
///    the policy needs it before quantizing, and is otherwise taken from the quantizing pass;
///  - `measure_amax<F>(x, options[, pool])`: the tensor amax as quantization would see it;
///  - `quantize_reference<F>(x, options)`: the reference path (a plain loop over the codec), the
///    oracle of the fast one; the two are bit-identical.
/// The arithmetic is the codec's (block/codec.hpp); bad arguments throw std::invalid_argument
/// naming the argument.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "../block/block_format.hpp"
#include "../block/codec.hpp"
#include "../block/matrix_view.hpp"
#include "../block/quantize_params.hpp"
#include "../block/quantized_view.hpp"
#include "../block/tensor_scale.hpp"
#include "../config.hpp"
#include "../contract/output_checks.hpp"
#include "../contract/quantize_options.hpp"
#include "quantize_fast.hpp"
#include "quantize_reference.hpp"
#include "quantized_matrix.hpp"
#include "simd.hpp"
#include "thread_pool.hpp"

namespace blockscale {
inline namespace v0 {

/// What a two-output quantization saw, per output.
struct quantize_pair_stats {
  quantize_stats rowwise;
  quantize_stats columnwise;
};

static_assert(quantize_options::max_threads == thread_pool::max_threads,
              "the contract's thread limit is the pool's");

namespace detail {

/// Quantizes x into one checked output: the fast panels where the block size allows, else the
/// reference loop; over `pool` or `threads`.
template <class BlockFormat, class T>
quantize_stats quantize_one(matrix_view<const T> x, quantized_view<BlockFormat> out,
                            const quantize_params& params, unsigned threads, thread_pool* pool) {
  *out.decode_scale_data() = params.decode_scale;
  clear_scale_padding(out);
  if (params.shape.rows == 0 || params.shape.cols == 0)
    return {}; // nothing to read: x.data() may be null
  quantize_stats total;
  std::mutex merge;
  const auto add = [&](const quantize_stats& part) {
    std::lock_guard<std::mutex> lock(merge);
    total.merge(part);
  };
  with_rounding_tags(params, [&](auto scale_rounding, auto element_rounding) {
    if constexpr (fast_path_block<BlockFormat>) {
      fast_output<BlockFormat> job{out, params, {}};
      job.table.template fill<BlockFormat>(params.decode_scale);
      if (!params.shape.columnwise) {
        run_parallel(
            pool, threads, group_count<BlockFormat>(params.shape),
            [&](unsigned, std::size_t begin, std::size_t end) {
              add(quantize_rows_fast(x, job, begin, end, scale_rounding, element_rounding));
            });
        return;
      }
      const auto roundings = [&](auto&& body) { body(scale_rounding, element_rounding); };
      const std::size_t strips = (x.rows() + column_tile.rows - 1) / column_tile.rows;
      run_parallel(pool, threads, strips, [&](unsigned, std::size_t begin, std::size_t end) {
        quantize_stats unused, part;
        quantize_tiles_fast<BlockFormat, BlockFormat>(x, column_tile, nullptr, &job, begin, end,
                                                      roundings, roundings, unused, part);
        add(part);
      });
    } else {
      run_parallel(pool, threads, group_count<BlockFormat>(params.shape),
                   [&](unsigned, std::size_t begin, std::size_t end) {
                     add(quantize_groups_reference(x, out, params, begin, end, scale_rounding,
                                                   element_rounding));
                   });
    }
  });
  return total;
}

/// The tensor amax of x as a quantization with `shape` sees it: max |x|, or after the Hadamard
/// transform along the quantized rows (which adds no value the padding could raise); NaN if any
/// value is NaN.
template <class T>
float tensor_amax(matrix_view<const T> x, const quantized_shape& shape, unsigned threads,
                  thread_pool* pool) {
  if (x.empty())
    return 0.0f;
  std::uint32_t total = 0;
  std::mutex merge;
  const auto add = [&](std::uint32_t part) {
    std::lock_guard<std::mutex> lock(merge);
    total = std::max(total, part);
  };
  constexpr std::size_t chunk = panel_capacity;
  if (!shape.hadamard || !shape.columnwise) {
    // Row by row, in chunks of whole 16-groups.
    run_parallel(pool, threads, x.rows(), [&](unsigned, std::size_t begin, std::size_t end) {
      alignas(64) float scratch[chunk];
      std::uint32_t acc = 0;
      for (std::size_t r = begin; r < end; ++r) {
        for (std::size_t c0 = 0; c0 < x.cols(); c0 += chunk) {
          const std::size_t valid = std::min(chunk, x.cols() - c0);
          const float* values = shape.hadamard ? nullptr : float_input(x, r, c0);
          std::size_t count = valid;
          if (values == nullptr) {
            values = scratch;
            load_values(x.row(r) + c0, valid, scratch);
            if (shape.hadamard) {
              count = (valid + hadamard16::size - 1) / hadamard16::size * hadamard16::size;
              std::fill(scratch + valid, scratch + count, 0.0f);
              shape.transform.forward_groups(scratch, count / hadamard16::size);
            }
          }
          acc = std::max(acc, simd::amax_bits(values, count));
        }
      }
      add(acc);
    });
    return codec::amax_value(total);
  }
  // Transformed down the columns: transposed tiles, the transform on each column's 16-groups.
  const tile_shape shape_of_tile = column_tile;
  const std::size_t strips = (x.rows() + shape_of_tile.rows - 1) / shape_of_tile.rows;
  run_parallel(pool, threads, strips, [&](unsigned, std::size_t begin, std::size_t end) {
    alignas(64) float tile[panel_capacity];
    alignas(64) float transposed[panel_capacity];
    std::uint32_t acc = 0;
    for (std::size_t s = begin; s < end; ++s) {
      const std::size_t i0 = s * shape_of_tile.rows;
      const std::size_t rows_here = std::min(shape_of_tile.rows, x.rows() - i0);
      const std::size_t depth =
          (rows_here + hadamard16::size - 1) / hadamard16::size * hadamard16::size;
      for (std::size_t j0 = 0; j0 < x.cols(); j0 += shape_of_tile.cols) {
        const std::size_t valid = std::min(shape_of_tile.cols, x.cols() - j0);
        std::size_t ld = 0;
        const float* values = load_tile(x, shape_of_tile, i0, j0, valid, tile, ld);
        simd::transpose_tile(values, ld, shape_of_tile.rows, valid, transposed);
        for (std::size_t c = 0; c < valid; ++c) {
          float* column = transposed + c * shape_of_tile.rows;
          shape.transform.forward_groups(column, depth / hadamard16::size);
          acc = std::max(acc, simd::amax_bits(column, depth));
        }
      }
    }
    add(acc);
  });
  return codec::amax_value(total);
}

/// Detects the tensor-scale policy interface.
template <class P, class = void>
struct is_tensor_scale_policy : std::false_type {};
template <class P>
struct is_tensor_scale_policy<P, std::void_t<decltype(std::declval<const P&>().needs_amax()),
                                             decltype(std::declval<const P&>().records_amax()),
                                             decltype(std::declval<P&>().observe_amax(0.0f)),
                                             decltype(std::declval<const P&>().encode_scale()),
                                             decltype(std::declval<P&>().finish(std::uint64_t{0}))>>
    : std::true_type {};
template <class P>
using enable_if_policy = std::enable_if_t<is_tensor_scale_policy<std::remove_cv_t<P>>::value, int>;

/// The checks a policy step makes before it touches the policy: `out` must be what quantizing x
/// with `options` gives (whatever encode scale the policy will choose), so that a bad argument
/// leaves the policy as it was.
template <class BlockFormat, class T>
void check_policy_output(const char* name, matrix_view<T> x, const quantized_shape& out,
                         quantize_options options) {
  options.encode_scale = 1.0f;
  check_output<BlockFormat>("quantize_into", name, out,
                            make_quantize_params<BlockFormat>(x.rows(), x.cols(), options));
}

/// Passes a measured amax through the caller's hook and checks what comes back: a negative amax,
/// or NaN from a non-NaN measurement, is the hook's fault and is reported as such.
template <class Hook>
float hooked_amax(Hook& hook, float measured) {
  const float amax = static_cast<float>(hook(measured));
  if (amax < 0.0f || (amax != amax && measured == measured))
    throw std::invalid_argument("quantize: the amax hook returned " + std::to_string(amax) +
                                " for a measured amax of " + std::to_string(measured) +
                                "; it must return a non-negative amax (NaN only for NaN)");
  return amax;
}

} // namespace detail

/// Quantizes `x` into `out` (caller memory, described by a quantized_view made for x and
/// `options`: see quantized_shape_for) and returns what it saw; `out`'s decode scale is set to
/// 1 / options.encode_scale. Runs on `pool` when given, else on options.threads threads. Throws
/// std::invalid_argument naming the argument for bad options or an `out` of another shape.
template <class BlockFormat, class T>
quantize_stats quantize_into(matrix_view<T> x, quantized_view<BlockFormat> out,
                             const quantize_options& options = {}, thread_pool* pool = nullptr) {
  const matrix_view<const T> input = x;
  const quantize_params params =
      make_quantize_params<BlockFormat>(input.rows(), input.cols(), options);
  detail::check_output<BlockFormat>("quantize_into", "out", out.shape(), params);
  return detail::quantize_one(input, out, params, options.threads, pool);
}

/// As above into a quantized_matrix made for x and `options`, whose stats() then describe this
/// call.
template <class BlockFormat, class T>
quantize_stats quantize_into(matrix_view<T> x, quantized_matrix<BlockFormat>& out,
                             const quantize_options& options = {}, thread_pool* pool = nullptr) {
  const quantize_stats stats = quantize_into(x, out.view(), options, pool);
  out.set_stats(stats);
  return stats;
}

/// Quantizes `x` into a new quantized_matrix (x transposed when options.columnwise).
template <class BlockFormat, class T>
quantized_matrix<BlockFormat> quantize(matrix_view<T> x, const quantize_options& options = {}) {
  quantized_matrix<BlockFormat> q(
      make_quantize_params<BlockFormat>(x.rows(), x.cols(), options).shape);
  quantize_into(x, q, options);
  return q;
}

/// The reference path: block by block through the codec and `convert`, one thread. The oracle for
/// the fast path (and for device kernels); bit-identical to quantize().
template <class BlockFormat, class T>
quantized_matrix<BlockFormat> quantize_reference(matrix_view<T> x,
                                                 const quantize_options& options = {}) {
  const matrix_view<const T> input = x;
  const quantize_params params =
      make_quantize_params<BlockFormat>(input.rows(), input.cols(), options);
  quantized_matrix<BlockFormat> q(params.shape);
  auto out = q.view();
  *out.decode_scale_data() = params.decode_scale;
  q.set_stats(with_rounding_tags(params, [&](auto scale_rounding, auto element_rounding) {
    return detail::quantize_groups_reference(input, out, params, 0,
                                             detail::group_count<BlockFormat>(params.shape),
                                             scale_rounding, element_rounding);
  }));
  return q;
}

/// Both directions of `x` from one read: `rowwise` as quantizing with `rowwise_options` gives
/// (which must not be columnwise) and `columnwise` as `columnwise_options` gives (which must be).
/// The two may differ in format, rounding, rule, encode scale, shape, layout and transform.
/// Without a pool, rowwise_options.threads says how many threads run.
template <class RowFormat, class ColumnFormat, class T>
quantize_pair_stats
quantize_into(matrix_view<T> x, quantized_view<RowFormat> rowwise,
              const quantize_options& rowwise_options, quantized_view<ColumnFormat> columnwise,
              const quantize_options& columnwise_options, thread_pool* pool = nullptr) {
  const matrix_view<const T> input = x;
  if (rowwise_options.columnwise || !columnwise_options.columnwise)
    throw std::invalid_argument("quantize_into: rowwise_options.columnwise must be false and "
                                "columnwise_options.columnwise true");
  const quantize_params row_params =
      make_quantize_params<RowFormat>(input.rows(), input.cols(), rowwise_options);
  const quantize_params column_params =
      make_quantize_params<ColumnFormat>(input.rows(), input.cols(), columnwise_options);
  detail::check_output<RowFormat>("quantize_into", "rowwise", rowwise.shape(), row_params);
  detail::check_output<ColumnFormat>("quantize_into", "columnwise", columnwise.shape(),
                                     column_params);
  if constexpr (!detail::fast_path_block<RowFormat> || !detail::fast_path_block<ColumnFormat>) {
    return {
        detail::quantize_one(input, rowwise, row_params, rowwise_options.threads, pool),
        detail::quantize_one(input, columnwise, column_params, columnwise_options.threads, pool)};
  } else {
    *rowwise.decode_scale_data() = row_params.decode_scale;
    *columnwise.decode_scale_data() = column_params.decode_scale;
    clear_scale_padding(rowwise);
    clear_scale_padding(columnwise);
    quantize_pair_stats total;
    if (input.empty())
      return total;
    detail::fast_output<RowFormat> row_job{rowwise, row_params, {}};
    detail::fast_output<ColumnFormat> column_job{columnwise, column_params, {}};
    row_job.table.template fill<RowFormat>(row_params.decode_scale);
    column_job.table.template fill<ColumnFormat>(column_params.decode_scale);
    const auto row_roundings = [&](auto&& body) { with_rounding_tags(row_params, body); };
    const auto column_roundings = [&](auto&& body) { with_rounding_tags(column_params, body); };
    std::mutex merge;
    const detail::tile_shape tile = detail::pair_tile;
    const std::size_t strips = (input.rows() + tile.rows - 1) / tile.rows;
    detail::run_parallel(
        pool, rowwise_options.threads, strips, [&](unsigned, std::size_t begin, std::size_t end) {
          quantize_pair_stats part;
          detail::quantize_tiles_fast(input, tile, &row_job, &column_job, begin, end, row_roundings,
                                      column_roundings, part.rowwise, part.columnwise);
          std::lock_guard<std::mutex> lock(merge);
          total.rowwise.merge(part.rowwise);
          total.columnwise.merge(part.columnwise);
        });
    return total;
  }
}

/// The tensor amax of `x` as quantization with `options` would see it (after the Hadamard
/// transform when enabled); NaN if any element is NaN. One parallel pass over x.
template <class BlockFormat, class T>
float measure_amax(matrix_view<T> x, const quantize_options& options = {},
                   thread_pool* pool = nullptr) {
  const matrix_view<const T> input = x;
  const quantize_params params =
      make_quantize_params<BlockFormat>(input.rows(), input.cols(), options);
  return detail::tensor_amax(input, params.shape, options.threads, pool);
}

/// Passes the measured amax through unchanged (the default amax hook).
struct identity_amax {
  float operator()(float amax) const noexcept { return amax; }
};

/// One quantization step under a tensor-scale policy: measures amax_t (one parallel pass) when the
/// policy needs it before quantizing, passes it through `amax_hook` (an all-reduce across ranks,
/// say) to the policy, quantizes into `out` with the policy's s_enc (options.encode_scale is
/// replaced), gives a policy that records amaxes the one this pass saw (through the hook too), and
/// tells it how many block scales saturated. Throws std::invalid_argument when the hook returns a
/// negative amax, or NaN for a non-NaN one.
template <class BlockFormat, class T, class Policy, class AmaxHook = identity_amax,
          detail::enable_if_policy<Policy> = 0>
quantize_stats quantize_into(matrix_view<T> x, quantized_view<BlockFormat> out, Policy& policy,
                             quantize_options options = {}, AmaxHook&& amax_hook = {},
                             thread_pool* pool = nullptr) {
  if (policy.needs_amax())
    policy.observe_amax(
        detail::hooked_amax(amax_hook, measure_amax<BlockFormat>(x, options, pool)));
  options.encode_scale = policy.encode_scale();
  const quantize_stats stats = quantize_into(x, out, options, pool);
  if (policy.records_amax())
    policy.observe_amax(detail::hooked_amax(amax_hook, stats.amax));
  policy.finish(stats.saturated_scales);
  return stats;
}

/// As above into a quantized_matrix, whose stats() then describe this call.
template <class BlockFormat, class T, class Policy, class AmaxHook = identity_amax,
          detail::enable_if_policy<Policy> = 0>
quantize_stats quantize_into(matrix_view<T> x, quantized_matrix<BlockFormat>& out, Policy& policy,
                             quantize_options options = {}, AmaxHook&& amax_hook = {},
                             thread_pool* pool = nullptr) {
  const quantize_stats stats =
      quantize_into(x, out.view(), policy, options, std::forward<AmaxHook>(amax_hook), pool);
  out.set_stats(stats);
  return stats;
}

/// One quantization step under a policy, into a new quantized_matrix.
template <class BlockFormat, class T, class Policy, class AmaxHook = identity_amax,
          detail::enable_if_policy<Policy> = 0>
quantized_matrix<BlockFormat> quantize(matrix_view<T> x, Policy& policy,
                                       quantize_options options = {}, AmaxHook&& amax_hook = {}) {
  quantized_matrix<BlockFormat> q(
      make_quantize_params<BlockFormat>(x.rows(), x.cols(), options).shape);
  quantize_into(x, q, policy, options, std::forward<AmaxHook>(amax_hook));
  return q;
}

/// Both directions from one read, each under its own policy. The amaxes that must come first are
/// measured in one pass when both outputs see the same values (no transform on either), else one
/// pass each; the hook sees each measured amax once.
template <class RowFormat, class ColumnFormat, class T, class RowPolicy, class ColumnPolicy,
          class AmaxHook = identity_amax, detail::enable_if_policy<RowPolicy> = 0,
          detail::enable_if_policy<ColumnPolicy> = 0>
quantize_pair_stats
quantize_into(matrix_view<T> x, quantized_view<RowFormat> rowwise, RowPolicy& rowwise_policy,
              quantize_options rowwise_options, quantized_view<ColumnFormat> columnwise,
              ColumnPolicy& columnwise_policy, quantize_options columnwise_options,
              AmaxHook&& amax_hook = {}, thread_pool* pool = nullptr) {
  const bool row_first = rowwise_policy.needs_amax(), column_first = columnwise_policy.needs_amax();
  if (row_first && column_first && !rowwise_options.hadamard && !columnwise_options.hadamard) {
    const float amax =
        detail::hooked_amax(amax_hook, measure_amax<RowFormat>(x, rowwise_options, pool));
    rowwise_policy.observe_amax(amax);
    columnwise_policy.observe_amax(amax);
  } else {
    if (row_first)
      rowwise_policy.observe_amax(
          detail::hooked_amax(amax_hook, measure_amax<RowFormat>(x, rowwise_options, pool)));
    if (column_first)
      columnwise_policy.observe_amax(
          detail::hooked_amax(amax_hook, measure_amax<ColumnFormat>(x, columnwise_options, pool)));
  }
  rowwise_options.encode_scale = rowwise_policy.encode_scale();
  columnwise_options.encode_scale = columnwise_policy.encode_scale();
  const quantize_pair_stats stats =
      quantize_into(x, rowwise, rowwise_options, columnwise, columnwise_options, pool);
  if (rowwise_policy.records_amax())
    rowwise_policy.observe_amax(detail::hooked_amax(amax_hook, stats.rowwise.amax));
  if (columnwise_policy.records_amax())
    columnwise_policy.observe_amax(detail::hooked_amax(amax_hook, stats.columnwise.amax));
  rowwise_policy.finish(stats.rowwise.saturated_scales);
  columnwise_policy.finish(stats.columnwise.saturated_scales);
  return stats;
}

} // namespace v0
} // namespace blockscale
