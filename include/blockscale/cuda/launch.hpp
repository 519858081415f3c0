/// \file cuda/launch.hpp
/// The launchers of the quantization kernels, written once over a *runner*: the device runner
/// (cuda/quantize.cuh) queues a program's kernel on a stream, the host runner
/// (emulation/host_runner.hpp) runs the same program on the CPU. Everything a launcher does before
/// the launch — checking the arguments into a status, choosing the rounding tags, building the
/// program, sizing the grid — is therefore the same code on every machine, and tested on all.
///
/// A runner has `status run(const Program&, std::size_t ctas)` and `std::size_t persistent_ctas()`
/// (the grid of the grid-stride kernels: a few CTAs per SM on a device).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "../block/block_format.hpp"
#include "../block/matrix_view.hpp"
#include "../block/quantize_params.hpp"
#include "../block/quantized_view.hpp"
#include "../contract/output_checks.hpp"
#include "../contract/quantize_options.hpp"
#include "kernels/amax.hpp"
#include "kernels/dequantize.hpp"
#include "kernels/quantize.hpp"
#include "kernels/tensor_scale.hpp"
#include "status.hpp"

namespace blockscale {
inline namespace v0 {
namespace cuda {
namespace detail {

/// The largest grid the launchers queue (gridDim.x may reach 2^31 - 1).
inline constexpr std::size_t max_ctas = 0x7FFFFFFFu;

/// Runs f() and turns a std::invalid_argument it throws (the host checks' way of saying what is
/// wrong) into a status.
template <class F>
[[nodiscard]] status checked(F&& f) noexcept {
  try {
    return f();
  } catch (const std::invalid_argument& e) {
    return {errc::invalid_argument, e.what()};
  } catch (const std::exception& e) {
    return {errc::invalid_argument, e.what()};
  }
}

template <class T>
[[nodiscard]] status check_input(const char* function, matrix_view<const T> x) {
  if (x.data() == nullptr && !x.empty())
    return {errc::invalid_argument, std::string(function) + ": x is null but has " +
                                        std::to_string(x.rows()) + " x " +
                                        std::to_string(x.cols()) + " elements"};
  if (x.ld() < x.cols())
    return {errc::invalid_argument, std::string(function) + ": x.ld() is smaller than x.cols()"};
  return {};
}

/// The checks a view must pass before a kernel writes through it: buffers present for the
/// storage its shape needs, and the element bytes aligned for the kernel's vector stores.
template <class BlockFormat, class Byte>
[[nodiscard]] status check_view(const char* function, const char* name,
                                basic_quantized_view<BlockFormat, Byte> view) {
  const quantized_storage need = storage_for<BlockFormat>(view.shape());
  const auto fail = [&](errc code, const std::string& what) {
    return status{code, std::string(function) + ": " + name + " " + what};
  };
  if (view.elements() == nullptr && need.element_bytes != 0)
    return fail(errc::invalid_argument, "has null elements");
  if (view.scales() == nullptr && need.scale_bytes != 0)
    return fail(errc::invalid_argument, "has null scales");
  if (view.decode_scale_data() == nullptr)
    return fail(errc::invalid_argument, "has a null decode scale");
  constexpr std::size_t block_bytes = codec::element_bytes<BlockFormat>(BlockFormat::block_size);
  constexpr std::size_t alignment = block_bytes < 16 ? block_bytes : 16;
  if (view.layout() == scale_layout::tensor_core && need.scale_bytes > 0xFFFFFFFFu)
    return fail(errc::too_large, "has more than 2^32 bytes of tensor-core scales");
  if (!cuda::detail::is_aligned(view.elements(), alignment))
    return fail(errc::misaligned, "elements must be aligned to " + std::to_string(alignment) +
                                      " bytes (one vector store per block)");
  return {};
}

/// The output description of a launch with the given tags.
template <class BlockFormat, class ScaleRounding, class ElementRounding>
quantize_output<BlockFormat, ScaleRounding, ElementRounding>
make_output(quantized_view<BlockFormat> view, const quantize_params& params,
            const tensor_scales* scales, device_quantize_stats* stats) {
  quantize_output<BlockFormat, ScaleRounding, ElementRounding> output;
  output.view = view;
  output.params = params;
  output.scales = scales;
  output.stats = stats;
  return output;
}

/// The output description of a launch: view, params and tags, the tags chosen from params.
template <class BlockFormat, class F>
[[nodiscard]] status with_output(quantized_view<BlockFormat> view, const quantize_params& params,
                                 const tensor_scales* scales, device_quantize_stats* stats, F&& f) {
  return with_rounding_tags(params, [&](auto scale_rounding, auto element_rounding) {
    return f(make_output<BlockFormat, decltype(scale_rounding), decltype(element_rounding)>(
        view, params, scales, stats));
  });
}

template <class Runner, class Program>
[[nodiscard]] status run_sized(Runner& runner, const Program& program, std::size_t ctas) {
  if (ctas > max_ctas)
    return {errc::too_large,
            "the launch needs " + std::to_string(ctas) + " CTAs, more than a grid holds"};
  return runner.run(program, ctas);
}

/// Whether an output's launch fits the common case (common_case, cuda/kernels/quantize.hpp): 1×B
/// blocks, row-major scales, no transform, no counters.
template <class Output>
bool common_output(const Output& output) noexcept {
  if constexpr (Output::enabled) {
    const quantized_shape& shape = output.params.shape;
    return shape.blocks == block_shape::rowwise && shape.layout == scale_layout::row_major &&
           !shape.hadamard && output.stats == nullptr;
  } else {
    return true;
  }
}

/// Queues the quantize program for x and the two outputs (either may be no_quantize_output): the
/// common-case instantiation when the launch allows it, else the general one. A persistent grid:
/// at most the runner's persistent CTAs, at least one (it writes the decode scales).
template <class Runner, class T, class Row, class Column, class Completion = no_completion>
[[nodiscard]] status run_quantize(Runner& runner, matrix_view<const T> x, const Row& row,
                                  const Column& column, std::uint32_t* done = nullptr,
                                  Completion completion = {}) {
  const bool aligned = x.empty() || (is_aligned(x.data(), 16) && x.ld() * sizeof(T) % 16 == 0);
  const auto run = [&](auto variant) {
    quantize_program<T, Row, Column, Completion, decltype(variant)> program;
    program.x = x;
    program.rowwise = row;
    program.columnwise = column;
    program.done = done;
    program.completion = completion;
    program.aligned = aligned;
    const std::size_t tiles = program.tiles();
    if (tiles > max_ctas)
      return status{errc::too_large, "the launch needs " + std::to_string(tiles) +
                                         " tiles, more than a grid-stride kernel counts"};
    const std::size_t cap = runner.persistent_ctas();
    const std::size_t ctas = tiles == 0 ? 1 : (tiles < cap ? tiles : cap);
    return runner.run_looped(program, ctas);
  };
  if constexpr (std::is_same<Completion, no_completion>::value) {
    if (aligned && done == nullptr && common_output(row) && common_output(column))
      return run(common_case{});
  }
  return run(general_case{});
}

/// Whether two outputs round alike (the same scale and element rounding): then one kernel
/// writes both from one read. Otherwise they are two launches, so that a kernel is instantiated
/// per rounding, not per pair of roundings.
inline bool round_alike(const quantize_params& a, const quantize_params& b) noexcept {
  return a.rule.rounding == b.rule.rounding && a.rounding == b.rounding;
}

/// Both outputs: one launch when they round alike, else one launch each. `done` and `completion`
/// go with the launch that writes the columnwise output (the last).
template <class Runner, class T, class RowFormat, class ColumnFormat,
          class Completion = no_completion>
[[nodiscard]] status
run_pair(Runner& runner, matrix_view<const T> x, quantized_view<RowFormat> rowwise,
         const quantize_params& row_params, const tensor_scales* row_scales,
         device_quantize_stats* row_stats, quantized_view<ColumnFormat> columnwise,
         const quantize_params& column_params, const tensor_scales* column_scales,
         device_quantize_stats* column_stats, std::uint32_t* done = nullptr,
         Completion completion = {}) {
  if (round_alike(row_params, column_params))
    return with_output(rowwise, row_params, row_scales, row_stats, [&](const auto& row) {
      using row_type = std::decay_t<decltype(row)>;
      const auto column = make_output<ColumnFormat, typename row_type::scale_rounding,
                                      typename row_type::element_rounding>(
          columnwise, column_params, column_scales, column_stats);
      return run_quantize(runner, x, row, column, done, completion);
    });
  if (status s = with_output(
          rowwise, row_params, row_scales, row_stats,
          [&](const auto& row) { return run_quantize(runner, x, row, no_quantize_output{}); });
      !s)
    return s;
  return with_output(
      columnwise, column_params, column_scales, column_stats, [&](const auto& column) {
        return run_quantize(runner, x, no_quantize_output{}, column, done, completion);
      });
}

/// The grid of a grid-stride program: enough CTAs for its units, at most the runner's persistent
/// grid, at least one.
template <class Runner>
std::size_t stride_grid(Runner& runner, std::size_t units, int warps) {
  if (units > 0xFFFFFFFFu)
    return max_ctas + 1; // run_sized reports it: the grid-stride kernels count units in 32 bits
  const std::size_t wanted = (units + warps - 1) / warps;
  const std::size_t cap = runner.persistent_ctas();
  return wanted == 0 ? 1 : (wanted < cap ? wanted : cap);
}

} // namespace detail

/// Quantizes x (float, bfloat16 or float16; device memory for the device runner) into `out`, as
/// host `quantize_into(x, out, options)` does: checks everything first (an invalid status and
/// nothing queued on a bad argument), then one launch. `stats`, when set, receives the counters
/// (device memory, zeroed by the caller). `options.threads` has no meaning here.
template <class BlockFormat, class T, class Runner>
[[nodiscard]] status
launch_quantize(Runner& runner, matrix_view<const T> x, quantized_view<BlockFormat> out,
                const quantize_options& options = {}, device_quantize_stats* stats = nullptr) {
  return detail::checked([&]() -> status {
    if (status s = detail::check_input("quantize_into", x); !s)
      return s;
    const quantize_params params = make_quantize_params<BlockFormat>(x.rows(), x.cols(), options);
    blockscale::detail::check_output<BlockFormat>("quantize_into", "out", out.shape(), params);
    if (status s = detail::check_view("quantize_into", "out", out); !s)
      return s;
    return detail::with_output(out, params, nullptr, stats, [&](const auto& output) {
      if (params.shape.columnwise)
        return detail::run_quantize(runner, x, no_quantize_output{}, output);
      return detail::run_quantize(runner, x, output, no_quantize_output{});
    });
  });
}

/// Both directions of x from one read, as host `quantize_into(x, rowwise, rowwise_options,
/// columnwise, columnwise_options)`: rowwise_options must not be columnwise, columnwise_options
/// must be.
template <class RowFormat, class ColumnFormat, class T, class Runner>
[[nodiscard]] status
launch_quantize(Runner& runner, matrix_view<const T> x, quantized_view<RowFormat> rowwise,
                const quantize_options& rowwise_options, quantized_view<ColumnFormat> columnwise,
                const quantize_options& columnwise_options,
                device_quantize_stats* rowwise_stats = nullptr,
                device_quantize_stats* columnwise_stats = nullptr) {
  return detail::checked([&]() -> status {
    if (status s = detail::check_input("quantize_into", x); !s)
      return s;
    if (rowwise_options.columnwise || !columnwise_options.columnwise)
      return {errc::invalid_argument, "quantize_into: rowwise_options.columnwise must be false "
                                      "and columnwise_options.columnwise true"};
    const quantize_params row_params =
        make_quantize_params<RowFormat>(x.rows(), x.cols(), rowwise_options);
    const quantize_params column_params =
        make_quantize_params<ColumnFormat>(x.rows(), x.cols(), columnwise_options);
    blockscale::detail::check_output<RowFormat>("quantize_into", "rowwise", rowwise.shape(),
                                                row_params);
    blockscale::detail::check_output<ColumnFormat>("quantize_into", "columnwise",
                                                   columnwise.shape(), column_params);
    if (status s = detail::check_view("quantize_into", "rowwise", rowwise); !s)
      return s;
    if (status s = detail::check_view("quantize_into", "columnwise", columnwise); !s)
      return s;
    return detail::run_pair(runner, x, rowwise, row_params, nullptr, rowwise_stats, columnwise,
                            column_params, nullptr, columnwise_stats);
  });
}

/// amax_t of x as quantizing with `options` sees it (after the transform along K when enabled),
/// max-ed into `*amax_bits` (device memory: the caller zeroes it first; the value is the float
/// whose pattern it holds, NaN for a NaN pattern: codec::amax_value). With `tile_amax` (device
/// memory, ceil(rows / 16) × ceil(cols / 16) floats, row-major; not with the transform), also the
/// amax of every 16×16 tile of x, from the same read.
template <class T, class Runner>
[[nodiscard]] status launch_amax(Runner& runner, matrix_view<const T> x, std::uint32_t* amax_bits,
                                 const quantize_options& options = {}, float* tile_amax = nullptr) {
  return detail::checked([&]() -> status {
    if (status s = detail::check_input("measure_amax", x); !s)
      return s;
    if (amax_bits == nullptr)
      return {errc::invalid_argument, "measure_amax: amax_bits is null"};
    if (tile_amax != nullptr && options.hadamard)
      return {errc::invalid_argument,
              "measure_amax: tile amaxes are of the input, without the Hadamard transform"};
    amax_program<T> program;
    program.x = x;
    program.columnwise = options.columnwise;
    program.hadamard = options.hadamard;
    program.transform = options.transform;
    program.amax_bits = amax_bits;
    program.tile_amax = tile_amax;
    return detail::run_sized(runner, program,
                             detail::stride_grid(runner, program.units(), program.warps));
  });
}

/// Decodes q into out (q.rows() × q.cols(); float, bfloat16 or float16), as host `dequantize`.
/// With `padded`, out is q.rows() × q.padded_cols() and receives the padding too
/// (host `dequantize_padded`).
template <class BlockFormat, class Byte, class T, class Runner>
[[nodiscard]] status launch_dequantize(Runner& runner, basic_quantized_view<BlockFormat, Byte> q,
                                       matrix_view<T> out, bool padded = false) {
  return detail::checked([&]() -> status {
    const char* function = padded ? "dequantize_padded" : "dequantize";
    const std::size_t cols = padded ? q.padded_cols() : q.cols();
    if (out.rows() != q.rows() || out.cols() != cols)
      return {errc::invalid_argument, std::string(function) + ": out is " +
                                          std::to_string(out.rows()) + " x " +
                                          std::to_string(out.cols()) + ", expected " +
                                          std::to_string(q.rows()) + " x " + std::to_string(cols)};
    if (out.data() == nullptr && !out.empty())
      return {errc::invalid_argument, std::string(function) + ": out is null"};
    if (out.ld() < out.cols())
      return {errc::invalid_argument,
              std::string(function) + ": out.ld() is smaller than out.cols()"};
    if (status s = detail::check_view(function, "q", q); !s)
      return s;
    dequantize_program<BlockFormat, T> program;
    program.q = const_quantized_view<BlockFormat>(q);
    program.out = out;
    program.cols = cols;
    return detail::run_sized(runner, program,
                             detail::stride_grid(runner, program.units(), program.warps));
  });
}

/// The checks of a policy step, shared by the launches below: the rule's target at least 1 (so
/// s_enc · fp32(1 / target) stays finite for every s_enc a policy can choose; the host reports the
/// overflow when it happens, the device cannot), and the usual output checks with s_enc = 1.
template <class BlockFormat, class T>
[[nodiscard]] status check_policy_step(const char* name, matrix_view<const T> x,
                                       const quantized_view<BlockFormat>& out,
                                       quantize_options options, quantize_params& params) {
  if (status s = detail::check_input("quantize_into", x); !s)
    return s;
  options.encode_scale = 1.0f;
  params = make_quantize_params<BlockFormat>(x.rows(), x.cols(), options);
  if (!(params.rule.target >= 1.0f))
    return {errc::invalid_argument,
            std::string("quantize_into: a device tensor-scale policy needs options.rule->target >= "
                        "1, not ") +
                std::to_string(params.rule.target)};
  blockscale::detail::check_output<BlockFormat>("quantize_into", name, out.shape(), params);
  return detail::check_view("quantize_into", name, out);
}

/// The amax half of a policy step: measures amax_t into state->amax_bits when the policy (read on
/// the device) needs it, and — unless `apply` is false, for a caller who all-reduces amax_bits
/// first and then calls launch_policy_apply — applies it. `state` is device memory for the device
/// runner.
template <class BlockFormat, class T, class Policy, class Runner>
[[nodiscard]] status launch_policy_measure(Runner& runner, matrix_view<const T> x,
                                           tensor_scale_state<Policy>* state,
                                           const quantize_options& options, bool apply = true) {
  return detail::checked([&]() -> status {
    if (status s = detail::check_input("measure_amax", x); !s)
      return s;
    if (state == nullptr)
      return {errc::invalid_argument, "quantize_into: the policy state is null"};
    quantize_options unit_scale = options;
    unit_scale.encode_scale = 1.0f;
    const quantize_params params =
        make_quantize_params<BlockFormat>(x.rows(), x.cols(), unit_scale);
    amax_program<T, policy_needs_amax<Policy>, policy_apply<Policy>> program;
    program.x = x;
    program.columnwise = options.columnwise;
    program.hadamard = options.hadamard;
    program.transform = options.transform;
    program.amax_bits = &state->amax_bits;
    program.gate = {state};
    program.done = apply ? &state->amax_done : nullptr;
    program.completion = {state, params.scale_multiplier};
    return detail::run_sized(runner, program,
                             detail::stride_grid(runner, program.units(), program.warps));
  });
}

/// Applies the measured (and perhaps all-reduced) amax: the step between launch_policy_measure(...,
/// apply = false) and launch_policy_quantize, with the same options.
template <class BlockFormat, class Policy, class Runner>
[[nodiscard]] status launch_policy_apply(Runner& runner, tensor_scale_state<Policy>* state,
                                         const quantize_options& options) {
  return detail::checked([&]() -> status {
    if (state == nullptr)
      return {errc::invalid_argument, "quantize_into: the policy state is null"};
    quantize_options unit_scale = options;
    unit_scale.encode_scale = 1.0f;
    const quantize_params params = make_quantize_params<BlockFormat>(0, 0, unit_scale);
    amax_program<float, always_measure, policy_apply<Policy>> program; // no data: only the action
    program.done = &state->amax_done;
    program.completion = {state, params.scale_multiplier};
    return detail::run_sized(runner, program, 1);
  });
}

/// The quantize half of a policy step: quantizes with the scales the policy published, counts into
/// the state, and finishes the step on the device.
template <class BlockFormat, class T, class Policy, class Runner>
[[nodiscard]] status
launch_policy_quantize(Runner& runner, matrix_view<const T> x, quantized_view<BlockFormat> out,
                       tensor_scale_state<Policy>* state, const quantize_options& options) {
  return detail::checked([&]() -> status {
    if (state == nullptr)
      return {errc::invalid_argument, "quantize_into: the policy state is null"};
    quantize_params params;
    if (status s = check_policy_step("out", x, out, options, params); !s)
      return s;
    return detail::with_output(out, params, &state->scales, &state->stats, [&](const auto& output) {
      const policy_finish<Policy> finish{state};
      if (params.shape.columnwise)
        return detail::run_quantize(runner, x, no_quantize_output{}, output, &state->quantize_done,
                                    finish);
      return detail::run_quantize(runner, x, output, no_quantize_output{}, &state->quantize_done,
                                  finish);
    });
  });
}

/// One whole step under a device policy, as host `quantize_into(x, out, policy, options)`: the
/// gated amax pass (applied in its last CTA), then the quantization (finished in its last CTA).
/// Two launches; no host synchronisation.
template <class BlockFormat, class T, class Policy, class Runner>
[[nodiscard]] status
launch_policy_step(Runner& runner, matrix_view<const T> x, quantized_view<BlockFormat> out,
                   tensor_scale_state<Policy>* state, const quantize_options& options) {
  quantize_params params;
  if (status s = detail::checked([&] { return check_policy_step("out", x, out, options, params); });
      !s)
    return s;
  if (status s = launch_policy_measure<BlockFormat>(runner, x, state, options); !s)
    return s;
  return launch_policy_quantize(runner, x, out, state, options);
}

/// Both directions from one read, each under its own device policy, as the host's pair step.
/// The amaxes are measured one pass each (the host measures once when neither output has the
/// transform; the values are the same).
template <class RowFormat, class ColumnFormat, class T, class RowPolicy, class ColumnPolicy,
          class Runner>
[[nodiscard]] status
launch_policy_step(Runner& runner, matrix_view<const T> x, quantized_view<RowFormat> rowwise,
                   tensor_scale_state<RowPolicy>* row_state,
                   const quantize_options& rowwise_options, quantized_view<ColumnFormat> columnwise,
                   tensor_scale_state<ColumnPolicy>* column_state,
                   const quantize_options& columnwise_options) {
  return detail::checked([&]() -> status {
    if (row_state == nullptr || column_state == nullptr)
      return {errc::invalid_argument, "quantize_into: a policy state is null"};
    if (rowwise_options.columnwise || !columnwise_options.columnwise)
      return {errc::invalid_argument, "quantize_into: rowwise_options.columnwise must be false "
                                      "and columnwise_options.columnwise true"};
    quantize_params row_params, column_params;
    if (status s = check_policy_step("rowwise", x, rowwise, rowwise_options, row_params); !s)
      return s;
    if (status s =
            check_policy_step("columnwise", x, columnwise, columnwise_options, column_params);
        !s)
      return s;
    if (status s = launch_policy_measure<RowFormat>(runner, x, row_state, rowwise_options); !s)
      return s;
    if (status s = launch_policy_measure<ColumnFormat>(runner, x, column_state, columnwise_options);
        !s)
      return s;
    const pair_finish<RowPolicy, ColumnPolicy> finish{{row_state}, {column_state}};
    return detail::run_pair(runner, x, rowwise, row_params, &row_state->scales, &row_state->stats,
                            columnwise, column_params, &column_state->scales, &column_state->stats,
                            &row_state->quantize_done, finish);
  });
}

} // namespace cuda
} // namespace v0
} // namespace blockscale
