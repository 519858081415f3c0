// The host-emulation example of docs/cuda.md: the CUDA quantize kernel's own code, run on the
// CPU by the host runner — how the kernels are tested without a GPU, and how a user can check a
// launch's arguments and results anywhere. Built and run as a test.
#include <blockscale/blockscale.hpp>
#include <blockscale/cuda/launch.hpp>
#include <blockscale/emulation/host_runner.hpp>
#include <cstdio>
#include <vector>

int main() {
  using namespace blockscale;
  const std::size_t rows = 96, cols = 160;
  std::vector<float> x(rows * cols);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>((i * 37) % 101) - 50.0f;
  const matrix_view<const float> view(x.data(), rows, cols);

  quantize_options options;
  options.rounding = element_rounding::stochastic; // Philox keyed as on the host
  options.seed = 2026;
  quantized_matrix<ue5m3_fp4> on_host = quantize<ue5m3_fp4>(view, options);
  quantized_matrix<ue5m3_fp4> by_kernel(on_host.shape());

  // The launcher of cuda::quantize_into, with a runner that executes the kernel's CTAs on the
  // host (phase by phase, 32 lanes per warp) instead of queueing it on a stream.
  emulation::host_runner runner;
  const cuda::status s = cuda::launch_quantize(runner, view, by_kernel.view(), options);
  std::printf("%s: %zu CTAs, kernel == host: %s\n", s ? "ok" : s.message().c_str(), runner.ctas_run,
              by_kernel == on_host ? "yes" : "no");
  return s && by_kernel == on_host ? 0 : 1;
}
