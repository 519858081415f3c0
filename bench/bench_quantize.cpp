// Host quantization throughput: fp32 4096×4096 → UE5M3-FP4 and NVFP4 (rowwise), nearest-even
// and stochastic, 1 and 2 threads, and dequantization, each next to a memcpy of the same input
// bytes in the same run. bytes_per_second counts the fp32 bytes read (quantize) or written
// (dequantize), so each line divides directly by BM_memcpy's.
#include <blockscale/blockscale.hpp>

#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

using namespace blockscale;

namespace {

constexpr std::size_t rows = 4096, cols = 4096;

const std::vector<float>& input() {
  static const std::vector<float> data = [] {
    std::vector<float> values(rows * cols);
    std::mt19937 rng(2026);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (auto& value : values)
      value = normal(rng);
    return values;
  }();
  return data;
}

void set_bytes(benchmark::State& state) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(rows * cols * sizeof(float)));
}

void BM_memcpy(benchmark::State& state) {
  const auto& x = input();
  std::vector<float> out(x.size());
  for (auto _ : state) {
    std::memcpy(out.data(), x.data(), x.size() * sizeof(float));
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state);
}
BENCHMARK(BM_memcpy)->Unit(benchmark::kMillisecond)->UseRealTime();

// Arguments: threads, stochastic (0/1).
template <class Format>
void BM_quantize(benchmark::State& state) {
  const auto& x = input();
  quantize_options options;
  options.threads = static_cast<unsigned>(state.range(0));
  options.rounding =
      state.range(1) != 0 ? element_rounding::stochastic : element_rounding::nearest_even;
  options.encode_scale = 6.0f * 448.0f / 5.0f;
  const matrix_view<const float> view(x.data(), rows, cols);
  for (auto _ : state) {
    auto q = quantize<Format>(view, options);
    benchmark::DoNotOptimize(q.element_data());
  }
  set_bytes(state);
}
BENCHMARK_TEMPLATE(BM_quantize, ue5m3_fp4)
    ->ArgsProduct({{1, 2}, {0, 1}})
    ->ArgNames({"threads", "stochastic"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_TEMPLATE(BM_quantize, nvfp4)
    ->ArgsProduct({{1, 2}, {0, 1}})
    ->ArgNames({"threads", "stochastic"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

template <class Format>
void BM_dequantize(benchmark::State& state) {
  const auto& x = input();
  const auto q = quantize<Format>(matrix_view<const float>(x.data(), rows, cols));
  std::vector<float> out(rows * cols);
  for (auto _ : state) {
    dequantize(q, matrix_view<float>(out.data(), rows, cols),
               static_cast<unsigned>(state.range(0)));
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state);
}
BENCHMARK_TEMPLATE(BM_dequantize, ue5m3_fp4)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("threads")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_TEMPLATE(BM_dequantize, nvfp4)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("threads")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

} // namespace
