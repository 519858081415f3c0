// Host quantization throughput on a 4096×4096 matrix of N(0,1) values, each benchmark next to a
// memcpy of the same bytes in the same run: bytes_per_second counts the input read (quantize, the
// amax pass) or the output written (dequantize), so every line divides by the matching memcpy
// line (BM_memcpy/4 for fp32, BM_memcpy/2 for bf16) to give the ratio docs/performance.md reports.
// Steady state: the quantized storage and the thread pool are made once, outside the timed loop.
#include <blockscale/blockscale.hpp>

#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
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

const std::vector<bfloat16>& input_bf16() {
  static const std::vector<bfloat16> data = [] {
    std::vector<bfloat16> values(rows * cols);
    for (std::size_t i = 0; i < values.size(); ++i)
      values[i] = bfloat16(input()[i]);
    return values;
  }();
  return data;
}

template <class T>
matrix_view<const T> view_of(const std::vector<T>& data) {
  return matrix_view<const T>(data.data(), rows, cols);
}

/// A pool of `threads` (null for one: the calling thread alone).
std::unique_ptr<thread_pool> pool_of(benchmark::State& state, int arg) {
  const auto threads = static_cast<unsigned>(state.range(arg));
  return threads > 1 ? std::make_unique<thread_pool>(threads) : nullptr;
}

void set_bytes(benchmark::State& state, std::size_t element_size) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(rows * cols * element_size));
}

quantize_options base_options() {
  quantize_options options;
  options.encode_scale = 6.0f * 448.0f / 5.0f;
  return options;
}

// Argument: the element size (4: fp32, 2: bf16).
void BM_memcpy(benchmark::State& state) {
  const std::size_t bytes = rows * cols * static_cast<std::size_t>(state.range(0));
  std::vector<unsigned char> from(bytes, 1), to(bytes, 0);
  for (auto _ : state) {
    std::memcpy(to.data(), from.data(), bytes);
    benchmark::DoNotOptimize(to.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(bytes));
}
BENCHMARK(BM_memcpy)
    ->Arg(4)
    ->Arg(2)
    ->ArgName("bytes")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Arguments: threads, stochastic (0/1), columnwise (0/1).
template <class Format, class T>
void BM_quantize(benchmark::State& state) {
  const std::vector<T>& x = []() -> const std::vector<T>& {
    if constexpr (std::is_same<T, float>::value)
      return input();
    else
      return input_bf16();
  }();
  auto pool = pool_of(state, 0);
  quantize_options options = base_options();
  options.rounding =
      state.range(1) != 0 ? element_rounding::stochastic : element_rounding::nearest_even;
  options.columnwise = state.range(2) != 0;
  quantized_matrix<Format> q(quantized_shape_for(rows, cols, options));
  for (auto _ : state) {
    benchmark::DoNotOptimize(quantize_into(view_of(x), q.view(), options, pool.get()));
    benchmark::ClobberMemory();
  }
  set_bytes(state, sizeof(T));
}
BENCHMARK_TEMPLATE(BM_quantize, nvfp4, float)
    ->ArgsProduct({{1, 2}, {0, 1}, {0, 1}})
    ->ArgNames({"threads", "stochastic", "columnwise"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_TEMPLATE(BM_quantize, ue5m3_fp4, float)
    ->ArgsProduct({{1, 2}, {0, 1}, {0, 1}})
    ->ArgNames({"threads", "stochastic", "columnwise"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_TEMPLATE(BM_quantize, mxfp4, float)
    ->Args({1, 0, 0})
    ->ArgNames({"threads", "stochastic", "columnwise"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_TEMPLATE(BM_quantize, nvfp4, bfloat16)
    ->ArgsProduct({{1, 2}, {0}, {0, 1}})
    ->ArgNames({"threads", "stochastic", "columnwise"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_TEMPLATE(BM_quantize, ue5m3_fp4, bfloat16)
    ->Args({1, 0, 0})
    ->ArgNames({"threads", "stochastic", "columnwise"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Rowwise and columnwise from one read. Argument: threads.
template <class Format>
void BM_quantize_both(benchmark::State& state) {
  auto pool = pool_of(state, 0);
  const quantize_options row_options = base_options();
  quantize_options column_options = base_options();
  column_options.columnwise = true;
  quantized_matrix<Format> qr(quantized_shape_for(rows, cols, row_options));
  quantized_matrix<Format> qc(quantized_shape_for(rows, cols, column_options));
  for (auto _ : state) {
    benchmark::DoNotOptimize(quantize_into(view_of(input()), qr.view(), row_options, qc.view(),
                                           column_options, pool.get()));
    benchmark::ClobberMemory();
  }
  set_bytes(state, sizeof(float));
}
BENCHMARK_TEMPLATE(BM_quantize_both, nvfp4)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("threads")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The tensor amax pass a current-scaling policy needs. Argument: threads.
void BM_amax(benchmark::State& state) {
  auto pool = pool_of(state, 0);
  for (auto _ : state)
    benchmark::DoNotOptimize(measure_amax<nvfp4>(view_of(input()), {}, pool.get()));
  set_bytes(state, sizeof(float));
}
BENCHMARK(BM_amax)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("threads")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// One policy step: the amax pass (current, every call) or not (periodic, between refreshes),
// then quantization. Argument: 0 current, 1 periodic.
void BM_quantize_policy(benchmark::State& state) {
  auto current = current_tensor_scale::make<nvfp4>();
  auto periodic = periodic_tensor_scale::make<ue5m3_fp4>(1000000, 8);
  quantized_matrix<nvfp4> qn(quantized_shape_for(rows, cols, {}));
  quantized_matrix<ue5m3_fp4> qu(quantized_shape_for(rows, cols, {}));
  for (auto _ : state) {
    if (state.range(0) == 0)
      benchmark::DoNotOptimize(quantize_into(view_of(input()), qn.view(), current));
    else
      benchmark::DoNotOptimize(quantize_into(view_of(input()), qu.view(), periodic));
    benchmark::ClobberMemory();
  }
  set_bytes(state, sizeof(float));
}
BENCHMARK(BM_quantize_policy)
    ->Arg(0)
    ->Arg(1)
    ->ArgName("periodic")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Arguments: threads. T is the output type.
template <class Format, class T>
void BM_dequantize(benchmark::State& state) {
  auto pool = pool_of(state, 0);
  const auto q = quantize<Format>(view_of(input()), base_options());
  std::vector<T> out(rows * cols);
  const matrix_view<T> view(out.data(), rows, cols);
  for (auto _ : state) {
    if (pool)
      dequantize(q, view, *pool);
    else
      dequantize(q, view);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, sizeof(T));
}
BENCHMARK_TEMPLATE(BM_dequantize, nvfp4, float)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("threads")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_TEMPLATE(BM_dequantize, ue5m3_fp4, float)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("threads")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_TEMPLATE(BM_dequantize, nvfp4, bfloat16)
    ->Arg(1)
    ->ArgName("threads")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

} // namespace
