// The device quantize checks for test_cuda_quantize: one launch per direction and the pair from one
// read, on the device, against quantize_into byte for byte over the option matrix of
// kernel_cases.hpp (a quarter of it on the large shapes). Each input type is its own translation
// unit: the launchers' kernels for every format and option are most of this test's compile time.
#pragma once

#include <blockscale/blockscale.hpp>
#include <blockscale/cuda/quantize.cuh>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <iterator>
#include <vector>

#include "catch.hpp"
#include "cuda_test.cuh"
#include "kernel_cases.hpp"
#include "same_stats.hpp"

namespace device_quantize {

using namespace blockscale;
using namespace kernel_cases;

template <class T>
T* device_zeroed(cuda::device_allocation& memory) {
  check(cudaMemsetAsync(memory.data(), 0, memory.size(), memory.stream()));
  return reinterpret_cast<T*>(memory.data());
}

template <class F>
cuda::device_quantized_matrix<F> device_garbage(const quantized_shape& shape, cudaStream_t stream) {
  cuda::device_quantized_matrix<F> q(shape, stream);
  if (q.storage().element_bytes != 0)
    check(cudaMemsetAsync(q.view().elements(), 0xCD, q.storage().element_bytes, stream));
  if (q.storage().scale_bytes != 0)
    check(cudaMemsetAsync(q.view().scales(), 0xCD, q.storage().scale_bytes, stream));
  return q;
}

template <class F>
quantized_matrix<F> to_host(const cuda::device_quantized_matrix<F>& q, cudaStream_t stream) {
  quantized_matrix<F> host(q.shape());
  require_ok(q.copy_to(host, stream));
  check(cudaStreamSynchronize(stream));
  return host;
}

inline cuda::device_quantize_stats read_stats(const cuda::device_quantize_stats* p,
                                              cudaStream_t stream) {
  cuda::device_quantize_stats s;
  check(cudaMemcpyAsync(&s, p, sizeof s, cudaMemcpyDeviceToHost, stream));
  check(cudaStreamSynchronize(stream));
  return s;
}

template <class F, class T>
void check_pair_on_device(const shape_case& s, const std::vector<T>& data,
                          const quantize_options& row_options,
                          const quantize_options& column_options) {
  const cudaStream_t stream = test_stream();
  const matrix_view<const T> x(data.data(), s.rows, s.cols, s.ld);
  device_array<T> input(data);
  const auto x_device = matrix_view<const T>::unchecked(input.data(), s.rows, s.cols, s.ld);
  cuda::device_allocation stats_memory(2 * sizeof(cuda::device_quantize_stats), stream);
  auto* stats = device_zeroed<cuda::device_quantize_stats>(stats_memory);

  // One direction each, then both from one read.
  for (const quantize_options* options : {&row_options, &column_options}) {
    quantized_matrix<F> host(quantized_shape_for(s.rows, s.cols, *options));
    const quantize_stats host_stats = quantize_into(x, host, *options);
    auto device = device_garbage<F>(host.shape(), stream);
    check(cudaMemsetAsync(stats, 0, sizeof *stats, stream));
    require_ok(cuda::quantize_into(x_device, device.view(), *options, stream, stats));
    check_same_matrix(to_host(device, stream), host);
    check_same_stats(read_stats(stats, stream).value(), host_stats);
  }
  quantized_matrix<F> host_row(quantized_shape_for(s.rows, s.cols, row_options));
  quantized_matrix<F> host_column(quantized_shape_for(s.rows, s.cols, column_options));
  const quantize_pair_stats host_stats =
      quantize_into(x, host_row.view(), row_options, host_column.view(), column_options);
  auto row = device_garbage<F>(host_row.shape(), stream);
  auto column = device_garbage<F>(host_column.shape(), stream);
  check(cudaMemsetAsync(stats, 0, 2 * sizeof *stats, stream));
  require_ok(cuda::quantize_into(x_device, row.view(), row_options, column.view(), column_options,
                                 stream, stats, stats + 1));
  check_same_matrix(to_host(row, stream), host_row);
  check_same_matrix(to_host(column, stream), host_column);
  check_same_stats(read_stats(stats, stream).value(), host_stats.rowwise);
  check_same_stats(read_stats(stats + 1, stream).value(), host_stats.columnwise);
}

template <class F, class T>
void check_matrix_on_device() {
  std::uint64_t seed = fresh_seed();
  std::vector<shape_case> cases(std::begin(shapes), std::end(shapes));
  cases.push_back({1000, 3000, 3000}); // many CTAs
  cases.push_back({777, 1234, 1240});
  for (const shape_case& s : cases) {
    const bool large = s.rows * s.cols > 100000;
    for (bool specials : {false, true}) {
      const std::vector<T> data = make_input<T>(s, seed * 7919 + 1, specials);
      for (const scale_rule& rule : rules_for<F>()) {
        for (const option_case& c : option_cases()) {
          ++seed;
          if (large && seed % 4 != 0)
            continue; // a quarter of the option matrix on the large shapes
          INFO("seed " << seed << ", shape " << s.rows << " x " << s.cols << " ld " << s.ld
                       << ", specials " << specials << ", rule " << rule.target << "/"
                       << static_cast<int>(rule.rounding) << ", tile "
                       << (c.blocks == block_shape::tile) << ", tensor-core "
                       << (c.layout == scale_layout::tensor_core) << ", stochastic "
                       << (c.rounding == element_rounding::stochastic) << ", hadamard "
                       << c.hadamard);
          const float s_enc = seed % 2 ? 1.0f : 6.0f * 448.0f / 3.5f;
          check_pair_on_device<F>(s, data, make_options(c, rule, false, s_enc, seed),
                                  make_options(c, rule, true, s_enc, seed + 1));
        }
      }
    }
  }
}

} // namespace device_quantize
