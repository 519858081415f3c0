// The CUDA quantization kernels on a device (skipped without one): every launch of
// cuda/quantize.cuh against the host quantizer, byte for byte — every preset, input types, both
// directions and the pair from one read, 1×B and B×B blocks, both scale layouts, nearest-even and
// stochastic rounding, the scale rules, the Hadamard transform — on ragged shapes with NaN, Inf
// and zero blocks and on fresh random inputs (the seed is printed); the amax and dequantize
// kernels; device tensor-scale policies over many steps; device buffers and their copies. The
// float and bfloat16 quantize cases are in test_cuda_quantize/, one translation unit each.
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
#include "test_cuda_quantize/quantize_checks.cuh"

using namespace blockscale;
using namespace kernel_cases;
using namespace device_quantize;

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
