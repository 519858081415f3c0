// The quantize kernel's checks for test_cuda_kernels_host: one launch per direction and the pair
// from one read, through the host runner, against quantize_into byte for byte, over the whole
// option matrix of kernel_cases.hpp. Each input type is its own translation unit (the kernels'
// programs for every format and option, run on the host, are most of this test's compile time).
#pragma once

#include <blockscale/blockscale.hpp>
#include <blockscale/cuda/launch.hpp>
#include <blockscale/emulation/host_runner.hpp>

#include <cstdint>
#include <vector>

#include "catch.hpp"
#include "kernel_cases.hpp"
#include "quantized_bytes.hpp"
#include "same_stats.hpp"

namespace kernels_host {

using namespace blockscale;
using namespace kernel_cases;

template <class F, class T>
void check_one_direction(const shape_case& s, const std::vector<T>& data,
                         const quantize_options& options, emulation::host_runner& runner) {
  const matrix_view<const T> x(data.data(), s.rows, s.cols, s.ld);
  quantized_matrix<F> host(quantized_shape_for(s.rows, s.cols, options));
  const quantize_stats host_stats = quantize_into(x, host, options);
  quantized_matrix<F> device = garbage_matrix<F>(host.shape());
  cuda::device_quantize_stats counters;
  const cuda::status status = cuda::launch_quantize(runner, x, device.view(), options, &counters);
  REQUIRE(status.ok());
  check_same_matrix(device, host);
  check_same_stats(counters.value(), host_stats);
}

template <class F, class T>
void check_pair(const shape_case& s, const std::vector<T>& data,
                const quantize_options& row_options, const quantize_options& column_options,
                emulation::host_runner& runner) {
  const matrix_view<const T> x(data.data(), s.rows, s.cols, s.ld);
  quantized_matrix<F> host_row(quantized_shape_for(s.rows, s.cols, row_options));
  quantized_matrix<F> host_column(quantized_shape_for(s.rows, s.cols, column_options));
  const quantize_pair_stats host_stats =
      quantize_into(x, host_row.view(), row_options, host_column.view(), column_options);
  quantized_matrix<F> row = garbage_matrix<F>(host_row.shape());
  quantized_matrix<F> column = garbage_matrix<F>(host_column.shape());
  cuda::device_quantize_stats row_counters, column_counters;
  const cuda::status status =
      cuda::launch_quantize(runner, x, row.view(), row_options, column.view(), column_options,
                            &row_counters, &column_counters);
  REQUIRE(status.ok());
  check_same_matrix(row, host_row);
  check_same_matrix(column, host_column);
  check_same_stats(row_counters.value(), host_stats.rowwise);
  check_same_stats(column_counters.value(), host_stats.columnwise);
}

template <class F, class T>
void check_format_and_type() {
  emulation::host_runner runner;
  std::uint64_t seed = 1;
  for (const shape_case& s : shapes) {
    for (bool specials : {false, true}) {
      const std::vector<T> data = make_input<T>(s, seed * 7919 + 1, specials);
      for (const scale_rule& rule : rules_for<F>()) {
        for (const option_case& c : option_cases()) {
          ++seed;
          runner.order_seed = seed % 3 == 0 ? seed : 0;
          INFO("shape " << s.rows << " x " << s.cols << " ld " << s.ld << ", specials " << specials
                        << ", rule " << rule.target << "/" << static_cast<int>(rule.rounding)
                        << ", tile " << (c.blocks == block_shape::tile) << ", tensor-core "
                        << (c.layout == scale_layout::tensor_core) << ", stochastic "
                        << (c.rounding == element_rounding::stochastic) << ", hadamard "
                        << c.hadamard);
          // s_enc: 1, and a TE-like tensor scale, which moves every block scale.
          const float s_enc = seed % 2 ? 1.0f : 6.0f * 448.0f / 3.5f;
          const quantize_options row = make_options(c, rule, false, s_enc, seed);
          const quantize_options column = make_options(c, rule, true, s_enc, seed + 1);
          check_one_direction<F>(s, data, row, runner);
          check_one_direction<F>(s, data, column, runner);
          check_pair<F>(s, data, row, column, runner);
        }
      }
    }
  }
}

} // namespace kernels_host
