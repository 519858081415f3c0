// The reference GEMM (gemm/reference.hpp), NVFP4 x NVFP4 at M = N = K = 256, one thread and all
// hardware threads. The `flops` rate (read G/s as GFLOP/s) counts 2 · M · N · K flops per call, the
// decode of both operands included.
#include <blockscale/blockscale.hpp>
#include <blockscale/host/gemm_reference.hpp>

#include <benchmark/benchmark.h>

#include <random>
#include <vector>

using namespace blockscale;

namespace {

constexpr std::size_t size = 256;

quantized_matrix<nvfp4> operand(std::uint32_t seed) {
  std::vector<float> x(size * size);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& value : x)
    value = normal(rng);
  const matrix_view<const float> view(x.data(), size, size);
  quantize_options options;
  options.encode_scale = encode_scale_from_amax(6.0f * 448.0f, measure_amax<nvfp4>(view));
  return quantize<nvfp4>(view, options);
}

void BM_reference_nvfp4(benchmark::State& state) {
  const auto a = operand(1), b = operand(2);
  std::vector<float> c(size * size);
  const auto threads = static_cast<unsigned>(state.range(0));
  for (auto _ : state) {
    gemm::reference(a, b, matrix_view<float>(c.data(), size, size), 1.0f, 0.0f, threads);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  state.counters["flops"] =
      benchmark::Counter(2.0 * size * size * size * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}
BENCHMARK(BM_reference_nvfp4)
    ->Arg(1)
    ->Arg(0)
    ->ArgName("threads")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

} // namespace
