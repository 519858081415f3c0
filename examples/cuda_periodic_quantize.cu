// Quantizes a bf16 tensor on the device under the UE5M3 recipe's periodic tensor scale for a few
// training steps — the policy's state in device memory, the refresh decided on the device, no host
// synchronisation inside a step — and prints each step next to the host doing the same.
//   blockscale_example_cuda_periodic_quantize [steps]
// Exits with 77 when the machine has no CUDA device.
#include <blockscale/blockscale.hpp>
#include <blockscale/cuda/quantize.cuh>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace blockscale;

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

void check(const cuda::status& s) {
  if (!s) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    std::exit(1);
  }
}

// A weight-gradient-like tensor whose scale drifts upward by 2^(step/3): the periodic policy
// refreshes on schedule, and early when a block scale saturates.
std::vector<bfloat16> make_tensor(std::size_t rows, std::size_t cols, int step) {
  std::vector<bfloat16> x(rows * cols);
  std::uint64_t state = 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(step + 1);
  const float drift = std::exp2(static_cast<float>(step) / 3.0f);
  for (auto& v : x) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const float u = static_cast<float>(state >> 40) * 0x1p-24f - 0.5f;
    v = bfloat16(u * drift * (1.0f + 30.0f * u * u));
  }
  return x;
}

} // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("no CUDA device: nothing to run");
    return 77;
  }
  const int steps = argc > 1 ? std::atoi(argv[1]) : 12;
  const std::size_t rows = 1024, cols = 4096;
  cudaStream_t stream = nullptr;
  check(cudaStreamCreate(&stream), "cudaStreamCreate");

  // The recipe's policy: amax every 5 steps, 8 binades of headroom.
  const periodic_tensor_scale policy = periodic_tensor_scale::make<ue5m3_fp4>(5, 8);
  periodic_tensor_scale host_policy = policy;
  cuda::device_tensor_scale<periodic_tensor_scale> device_policy(policy, stream);
  const quantize_options options; // rowwise 1x16, nearest-even, row-major scales
  const quantized_shape shape = quantized_shape_for(rows, cols, options);
  cuda::device_quantized_matrix<ue5m3_fp4> q(shape, stream);
  cuda::device_allocation x_device(rows * cols * sizeof(bfloat16), stream);
  quantized_matrix<ue5m3_fp4> from_device(shape), host(shape);

  std::printf("step  measured  s_enc        saturated  bytes equal to host  SQNR (dB)\n");
  for (int step = 0; step < steps; ++step) {
    const std::vector<bfloat16> x = make_tensor(rows, cols, step);
    check(cudaMemcpyAsync(x_device.data(), x.data(), x.size() * sizeof(bfloat16),
                          cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync");
    const auto input = matrix_view<const bfloat16>::unchecked(
        reinterpret_cast<const bfloat16*>(x_device.data()), rows, cols, cols);
    const std::uint64_t before = host_policy.amax_measurements();
    check(cuda::quantize_into(input, q.view(), device_policy, options, stream));

    // The same step on the host, then the device's result and policy state for comparison.
    const matrix_view<const bfloat16> x_host(x.data(), rows, cols);
    const quantize_stats stats = quantize_into(x_host, host.view(), host_policy, options);
    check(q.copy_to(from_device, stream));
    cuda::device_tensor_scale<periodic_tensor_scale>::state_type state;
    check(device_policy.read(state, stream));
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");

    const bool equal = from_device == host &&
                       state.policy.encode_scale() == host_policy.encode_scale() &&
                       state.last.saturated_scales == stats.saturated_scales;
    const quantization_error error = measure_error(x_host, from_device.view());
    std::printf("%4d  %-8s  %-11.5g  %9llu  %-19s  %.2f\n", step,
                host_policy.amax_measurements() > before ? "yes" : "no",
                static_cast<double>(state.policy.encode_scale()),
                static_cast<unsigned long long>(state.last.saturated_scales), equal ? "yes" : "NO",
                error.sqnr_db);
    if (!equal)
      return 1;
  }
  std::printf("amax passes: %llu of %d steps\n",
              static_cast<unsigned long long>(host_policy.amax_measurements()), steps);
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  return 0;
}
