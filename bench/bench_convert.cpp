// Scalar conversion throughput: float -> E2M1 / E4M3 / UE5M3, nearest-even and stochastic, next
// to CUDA's host converters and a memcpy of the same input bytes, all in the same run. The
// counters report input bytes per second; compare each line with BM_memcpy and BM_cuda_*.
// BM_e2m1_plain_loop and BM_cuda_float_to_fp4 (2^24 floats, one code byte per float) report
// conversions per second (items_per_second); their ratio is the scalar E2M1 figure of
// docs/performance.md.
#if BLOCKSCALE_HAVE_CUDA_HEADERS
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#endif

#include <blockscale/blockscale.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

using namespace blockscale;

namespace {

constexpr std::size_t element_count = std::size_t{1} << 20; // 4 MiB of float input

// N(0, 2): most values fall inside E2M1's range, with rounding in every binade and some
// saturation, so a branchy converter sees unpredictable branches as on real activations.
const std::vector<float>& input() {
  static const std::vector<float> data = [] {
    std::vector<float> values(element_count);
    std::mt19937 rng(2026);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    for (auto& value : values)
      value = normal(rng);
    return values;
  }();
  return data;
}

// 2^24 values of the same N(0, 2) distribution (64 MiB), for the plain-loop E2M1 comparison.
const std::vector<float>& large_input() {
  static const std::vector<float> data = [] {
    std::vector<float> values(std::size_t{1} << 24);
    std::mt19937 rng(2026);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    for (auto& value : values)
      value = normal(rng);
    return values;
  }();
  return data;
}

// Positive inputs spread over many binades, as block scales are (for UE5M3 / E4M3 targets).
const std::vector<float>& scale_input() {
  static const std::vector<float> data = [] {
    std::vector<float> values(element_count);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> exponent(-12.0f, 15.0f);
    for (auto& value : values)
      value = std::exp2(exponent(rng));
    return values;
  }();
  return data;
}

// A counter-based hash for per-element random bits (stands in for a Philox stream).
inline std::uint32_t hash32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x;
}

void set_bytes(benchmark::State& state) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(element_count * sizeof(float)));
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
BENCHMARK(BM_memcpy);

// float -> packed E2M1 pairs, the layout of __nv_cvt_float2_to_fp4x2.
template <class Rounding>
void pack_e2m1(const float* x, std::uint8_t* out, std::size_t pairs) {
  for (std::size_t i = 0; i < pairs; ++i) {
    const auto low = convert<e2m1>(x[2 * i], Rounding{}).bits();
    const auto high = convert<e2m1>(x[2 * i + 1], Rounding{}).bits();
    out[i] = static_cast<std::uint8_t>(low | (high << 4));
  }
}

void BM_e2m1_nearest_even(benchmark::State& state) {
  const auto& x = input();
  std::vector<std::uint8_t> out(x.size() / 2);
  for (auto _ : state) {
    pack_e2m1<round_nearest_even>(x.data(), out.data(), out.size());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state);
}
BENCHMARK(BM_e2m1_nearest_even);

// The plain loop a user writes: one convert<e2m1> per float, one code byte stored per float. Its
// rate depends on how well the compiler vectorizes detail::e2m1_nearest_even on this machine;
// compare it with BM_cuda_float_to_fp4, the same loop over CUDA's host converter.
void BM_e2m1_plain_loop(benchmark::State& state) {
  const auto& x = large_input();
  std::vector<std::uint8_t> out(x.size());
  for (auto _ : state) {
    for (std::size_t i = 0; i < x.size(); ++i)
      out[i] = convert<e2m1>(x[i], round_nearest_even{}, saturate_finite{}).bits();
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(x.size()));
}
BENCHMARK(BM_e2m1_plain_loop);

void BM_e2m1_stochastic(benchmark::State& state) {
  // In chunks that stay in L1: random words, then codes, then pairs, each a loop that
  // vectorizes (the random words come from a hash standing in for a Philox stream).
  constexpr std::size_t chunk = 1024;
  const auto& x = input();
  std::vector<std::uint8_t> out(x.size() / 2);
  std::uint32_t bits[chunk];
  std::uint8_t codes[chunk];
  for (auto _ : state) {
    for (std::size_t begin = 0; begin < x.size(); begin += chunk) {
      for (std::size_t j = 0; j < chunk; ++j)
        bits[j] = hash32(static_cast<std::uint32_t>(begin + j));
      for (std::size_t j = 0; j < chunk; ++j)
        codes[j] = convert<e2m1>(x[begin + j], round_stochastic{bits[j]}).bits();
      for (std::size_t j = 0; j < chunk / 2; ++j)
        out[begin / 2 + j] = static_cast<std::uint8_t>(codes[2 * j] | (codes[2 * j + 1] << 4));
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state);
}
BENCHMARK(BM_e2m1_stochastic);

template <class To>
void BM_convert_nearest_even(benchmark::State& state) {
  const auto& x = scale_input();
  std::vector<To> out(x.size());
  for (auto _ : state) {
    convert_n(x.data(), out.data(), x.size());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state);
}
BENCHMARK_TEMPLATE(BM_convert_nearest_even, e4m3);
BENCHMARK_TEMPLATE(BM_convert_nearest_even, ue5m3);

template <class To>
void BM_convert_stochastic(benchmark::State& state) {
  const auto& x = scale_input();
  std::vector<To> out(x.size());
  for (auto _ : state) {
    for (std::size_t i = 0; i < x.size(); ++i)
      out[i] = convert<To>(x[i], round_stochastic{hash32(static_cast<std::uint32_t>(i))});
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state);
}
BENCHMARK_TEMPLATE(BM_convert_stochastic, e4m3);
BENCHMARK_TEMPLATE(BM_convert_stochastic, ue5m3);

#if BLOCKSCALE_HAVE_CUDA_HEADERS
// The baseline of BM_e2m1_plain_loop: the same loop over CUDA's host converter.
void BM_cuda_float_to_fp4(benchmark::State& state) {
  const auto& x = large_input();
  std::vector<std::uint8_t> out(x.size());
  for (auto _ : state) {
    for (std::size_t i = 0; i < x.size(); ++i)
      out[i] = __nv_cvt_float_to_fp4(x[i], __NV_E2M1, cudaRoundNearest);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(x.size()));
}
BENCHMARK(BM_cuda_float_to_fp4);

void BM_cuda_float2_to_fp4x2(benchmark::State& state) {
  const auto& x = input();
  std::vector<std::uint8_t> out(x.size() / 2);
  for (auto _ : state) {
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] =
          __nv_cvt_float2_to_fp4x2(float2{x[2 * i], x[2 * i + 1]}, __NV_E2M1, cudaRoundNearest);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state);
}
BENCHMARK(BM_cuda_float2_to_fp4x2);

void BM_cuda_float_to_e4m3(benchmark::State& state) {
  const auto& x = scale_input();
  std::vector<std::uint8_t> out(x.size());
  for (auto _ : state) {
    for (std::size_t i = 0; i < x.size(); ++i)
      out[i] = __nv_cvt_float_to_fp8(x[i], __NV_SATFINITE, __NV_E4M3);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state);
}
BENCHMARK(BM_cuda_float_to_e4m3);
#endif

} // namespace
