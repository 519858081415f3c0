// Host randomized Hadamard transform: hadamard16::forward_rows over a 4096 × 4096 float matrix
// (64 MiB, in place) next to a memcpy of the same bytes, in the same run. bytes_per_second counts
// the matrix once (forward_rows reads and writes it; memcpy reads one copy and writes another), so
// the ratio of the two rates says how close the transform comes to streaming the data.
#include <blockscale/block/hadamard.hpp>
#include <blockscale/host/hadamard_rows.hpp>

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

using namespace blockscale;

namespace {

constexpr std::size_t rows = 4096;
constexpr std::size_t cols = 4096;
constexpr std::size_t bytes = rows * cols * sizeof(float);

std::vector<float> random_matrix() {
  std::vector<float> values(rows * cols);
  std::mt19937 rng(2026);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& value : values)
    value = normal(rng);
  return values;
}

void BM_memcpy(benchmark::State& state) {
  const std::vector<float> source = random_matrix();
  std::vector<float> destination(source.size());
  for (auto _ : state) {
    std::memcpy(destination.data(), source.data(), bytes);
    benchmark::DoNotOptimize(destination.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(bytes));
}
BENCHMARK(BM_memcpy)->Unit(benchmark::kMillisecond);

// In place and repeated: each iteration transforms the previous result (the values stay bounded,
// since the transform is orthogonal, and the work does not depend on them).
void BM_hadamard16_forward_rows(benchmark::State& state) {
  std::vector<float> data = random_matrix();
  const auto rht = hadamard16::te_default();
  for (auto _ : state) {
    hadamard_forward_rows(rht, matrix_view<float>(data.data(), rows, cols));
    benchmark::DoNotOptimize(data.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(bytes));
}
BENCHMARK(BM_hadamard16_forward_rows)->Unit(benchmark::kMillisecond);

} // namespace
