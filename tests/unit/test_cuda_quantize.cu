// The CUDA quantization kernels on a device (skipped without one): every launch of
// cuda/quantize.cuh against the host quantizer, byte for byte — every preset, input types, both
// directions and the pair from one read, 1×B and B×B blocks, both scale layouts, nearest-even and
// stochastic rounding, the scale rules, the Hadamard transform — on ragged shapes with NaN, Inf
// and zero blocks and on fresh random inputs (the seed is printed); the amax and dequantize
// kernels; device tensor-scale policies over many steps; device buffers and their copies.
#include <blockscale/blockscale.hpp>
#include <blockscale/cuda/quantize.cuh>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "catch.hpp"
#include "cuda_test.cuh"
#include "kernel_cases.hpp"
#include "same_stats.hpp"

using namespace blockscale;
using namespace kernel_cases;

namespace {

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

cuda::device_quantize_stats read_stats(const cuda::device_quantize_stats* p, cudaStream_t stream) {
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

} // namespace

TEMPLATE_TEST_CASE("device quantization equals quantize_into byte for byte", "[cuda]", nvfp4, mxfp4,
                   ue5m3_fp4, mxfp8) {
  SECTION("bfloat16 input") {
    check_matrix_on_device<TestType, bfloat16>();
  }
  SECTION("float input") {
    check_matrix_on_device<TestType, float>();
  }
}

TEST_CASE("device quantization of float16 input equals quantize_into", "[cuda]") {
  check_matrix_on_device<nvfp4, float16>();
}

TEST_CASE("the device amax equals measure_amax; tile amaxes equal the tiles'", "[cuda]") {
  const cudaStream_t stream = test_stream();
  std::uint64_t seed = fresh_seed();
  for (const shape_case& s : {shape_case{70, 130, 131}, shape_case{1000, 3000, 3000}})
    for (bool specials : {false, true})
      for (bool columnwise : {false, true})
        for (bool hadamard : {false, true}) {
          const std::vector<bfloat16> data = make_input<bfloat16>(s, ++seed, specials);
          const matrix_view<const bfloat16> x(data.data(), s.rows, s.cols, s.ld);
          device_array<bfloat16> input(data);
          quantize_options options;
          options.columnwise = columnwise;
          options.hadamard = hadamard;
          const std::size_t tiles = ((s.rows + 15) / 16) * ((s.cols + 15) / 16);
          cuda::device_allocation memory(sizeof(std::uint32_t) + tiles * sizeof(float), stream);
          auto* bits = device_zeroed<std::uint32_t>(memory);
          float* tile_amax = hadamard ? nullptr : reinterpret_cast<float*>(bits + 1);
          require_ok(cuda::measure_amax(
              matrix_view<const bfloat16>::unchecked(input.data(), s.rows, s.cols, s.ld), bits,
              options, stream, tile_amax));
          std::vector<std::uint32_t> back(1 + tiles);
          check(
              cudaMemcpyAsync(back.data(), bits, back.size() * 4, cudaMemcpyDeviceToHost, stream));
          check(cudaStreamSynchronize(stream));
          CHECK(back[0] == float_bits(measure_amax<nvfp4>(x, options)));
          if (tile_amax != nullptr) {
            const std::size_t across = (s.cols + 15) / 16;
            for (std::size_t t = 0; t < tiles; ++t) {
              std::uint32_t want = 0;
              for (std::size_t r = t / across * 16; r < s.rows && r < t / across * 16 + 16; ++r)
                for (std::size_t c = t % across * 16; c < s.cols && c < t % across * 16 + 16; ++c)
                  want = codec::amax_bits(want, static_cast<float>(x(r, c)));
              CHECK(back[1 + t] == float_bits(codec::amax_value(want)));
            }
          }
        }
}

namespace {

template <class F, class T>
void check_dequantize_on_device(const quantized_matrix<F>& q, bool padded) {
  const cudaStream_t stream = test_stream();
  cuda::device_quantized_matrix<F> device(q.shape(), stream);
  require_ok(device.copy_from(q, stream));
  const std::size_t cols = padded ? q.padded_cols() : q.cols(), ld = cols + 1;
  std::vector<T> host(q.rows() * ld, T(-7.0f));
  const matrix_view<T> host_out(host.data(), q.rows(), cols, ld);
  if (padded)
    dequantize_padded(q, host_out);
  else
    dequantize(q, host_out);
  device_array<T> out(std::vector<T>(q.rows() * ld, T(-7.0f)));
  const auto device_out = matrix_view<T>::unchecked(out.data(), q.rows(), cols, ld);
  require_ok(padded ? cuda::dequantize_padded(device.view(), device_out, stream)
                    : cuda::dequantize(device.view(), device_out, stream));
  const std::vector<T> back = out.download(host.size());
  CHECK(std::memcmp(host.data(), back.data(), host.size() * sizeof(T)) == 0);
}

} // namespace

TEMPLATE_TEST_CASE("device dequantization equals dequantize", "[cuda]", nvfp4, mxfp4, ue5m3_fp4,
                   mxfp8) {
  std::uint64_t seed = fresh_seed();
  for (const shape_case& s : {shape_case{70, 130, 131}, shape_case{513, 1000, 1000}})
    for (bool hadamard : {false, true}) {
      const std::vector<float> data = make_input<float>(s, ++seed, true);
      quantize_options options;
      options.hadamard = hadamard;
      options.layout = scale_layout::tensor_core;
      options.encode_scale = 0.25f;
      const auto q =
          quantize<TestType>(matrix_view<const float>(data.data(), s.rows, s.cols, s.ld), options);
      for (bool padded : {false, true}) {
        check_dequantize_on_device<TestType, float>(q, padded);
        check_dequantize_on_device<TestType, bfloat16>(q, padded);
      }
    }
}

namespace {

template <class F, class Policy>
void check_policy_on_device(Policy policy, quantize_options options, int steps) {
  const cudaStream_t stream = test_stream();
  const shape_case s{300, 520, 520};
  Policy host_policy = policy;
  cuda::device_tensor_scale<Policy> device_policy(policy, stream);
  for (int step = 0; step < steps; ++step) {
    INFO("step " << step);
    options.offset = static_cast<std::uint64_t>(step);
    const std::vector<float> data = step_input(s, step, fresh_seed());
    const matrix_view<const float> x(data.data(), s.rows, s.cols, s.ld);
    quantized_matrix<F> host(quantized_shape_for(s.rows, s.cols, options));
    const quantize_stats host_stats = quantize_into(x, host.view(), host_policy, options);
    device_array<float> input(data);
    auto device = device_garbage<F>(host.shape(), stream);
    require_ok(
        cuda::quantize_into(matrix_view<const float>::unchecked(input.data(), s.rows, s.cols, s.ld),
                            device.view(), device_policy, options, stream));
    check_same_matrix(to_host(device, stream), host);
    typename cuda::device_tensor_scale<Policy>::state_type state;
    require_ok(device_policy.read(state, stream));
    check(cudaStreamSynchronize(stream));
    check_same_stats(state.last, host_stats);
    CHECK(float_bits(state.policy.encode_scale()) == float_bits(host_policy.encode_scale()));
    CHECK(state.policy.amax_measurements() == host_policy.amax_measurements());
    CHECK(state.policy.needs_amax() == host_policy.needs_amax());
  }
}

} // namespace

TEST_CASE("device tensor-scale policies step as the host's, on the device", "[cuda]") {
  SECTION("current, NVFP4") {
    check_policy_on_device<nvfp4>(current_tensor_scale::make<nvfp4>(), {}, 5);
  }
  SECTION("periodic, UE5M3") {
    check_policy_on_device<ue5m3_fp4>(periodic_tensor_scale::make<ue5m3_fp4>(3, 8), {}, 10);
  }
  SECTION("delayed, NVFP4") {
    check_policy_on_device<nvfp4>(delayed_tensor_scale::make<nvfp4>(4, 0), {}, 6);
  }
}

TEST_CASE("device launchers report bad arguments and queue nothing", "[cuda]") {
  const cudaStream_t stream = test_stream();
  cuda::device_quantized_matrix<nvfp4> q(quantized_shape_for(8, 32, {}), stream);
  const auto null_input = matrix_view<const float>::unchecked(nullptr, 8, 32, 32);
  const cuda::status s = cuda::quantize_into(null_input, q.view(), {}, stream);
  CHECK(s.code() == cuda::errc::invalid_argument);
  check(cudaStreamSynchronize(stream));
  check(cudaGetLastError());
}
