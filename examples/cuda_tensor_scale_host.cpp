// The host example of device tensor-scale policies in docs/cuda.md. Built and run as a test.
// A device policy stepped on the CPU: the state that cuda::device_tensor_scale keeps in device
// memory, here in host memory, driven by the launcher of cuda::quantize_into(x, out, policy) with
// the host runner (the same amax and quantize kernels, the same policy code). Each step is checked
// against host quantize_into under the same policy.
#include <blockscale/blockscale.hpp>
#include <blockscale/cuda/launch.hpp>
#include <blockscale/emulation/host_runner.hpp>
#include <cstdio>
#include <vector>

int main() {
  using namespace blockscale;
  const std::size_t rows = 64, cols = 256;
  std::vector<float> x(rows * cols);
  const matrix_view<const float> view(x.data(), rows, cols);

  // A periodic tensor scale as in the UE5M3 recipe (8 binades of headroom), measured every 4 steps.
  periodic_tensor_scale on_host = periodic_tensor_scale::make<ue5m3_fp4>(4, 8);
  // What device_tensor_scale<periodic_tensor_scale> keeps in device memory, here in host memory:
  // the policy, the scales it publishes each step, the step's counters.
  cuda::tensor_scale_state<periodic_tensor_scale> state{};
  state.policy = on_host;

  emulation::host_runner runner;
  bool all_same = true;
  for (int step = 0; step < 8; ++step) {
    // From step 2 on the data is 1000 times larger, beyond the 2^8 of headroom: step 2, still
    // under step 0's scale, saturates block scales, so step 3 measures early, and the schedule
    // measures again 4 steps later, at step 7.
    const float growth = step < 2 ? 1.0f : 1000.0f;
    for (std::size_t i = 0; i < x.size(); ++i)
      x[i] = growth * (static_cast<float>((i * 37 + static_cast<std::size_t>(step)) % 101) - 50.0f);

    quantized_matrix<ue5m3_fp4> by_host(quantized_shape_for(rows, cols, {}));
    quantized_matrix<ue5m3_fp4> by_kernels(by_host.shape());
    const quantize_stats stats = quantize_into(view, by_host.view(), on_host, {});
    // The two launches of a device step (amax pass, then quantize), run on the CPU.
    const cuda::status s = cuda::launch_policy_step(runner, view, by_kernels.view(), &state, {});
    if (!s) { // a bad argument: nothing ran, and the message says what is wrong
      std::printf("%s\n", s.message().c_str());
      return 1;
    }

    const bool same = by_kernels == by_host && // bytes and s_dec
                      state.policy.encode_scale() == on_host.encode_scale() &&
                      state.policy.amax_measurements() == on_host.amax_measurements() &&
                      state.last.saturated_scales == stats.saturated_scales;
    std::printf("step %d: s_dec %.9g, amax measured %llu times, %llu saturated block scales, "
                "kernels == host: %s\n",
                step, static_cast<double>(by_kernels.decode_scale()),
                static_cast<unsigned long long>(state.policy.amax_measurements()),
                static_cast<unsigned long long>(state.last.saturated_scales), same ? "yes" : "no");
    all_same = all_same && same;
  }
  return all_same ? 0 : 1;
}
