// Philox4x32-10 throughput on the host: philox_stream (one Philox call per 4 words) against
// random_bits (one call per word, as an element-parallel kernel would use it), next to a memset of
// the same output bytes. Counters: items = 32-bit words per second, bytes = 4 per word.
#include <blockscale/numeric/random.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

using namespace blockscale;

namespace {

constexpr std::size_t word_count = std::size_t{1} << 16; // 256 KiB of output: stays in L2

void set_counters(benchmark::State& state) {
  const auto words =
      static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(word_count);
  state.SetItemsProcessed(words);
  state.SetBytesProcessed(words * 4);
}

void BM_memset(benchmark::State& state) {
  std::vector<std::uint32_t> out(word_count);
  std::uint8_t value = 0;
  for (auto _ : state) {
    std::memset(out.data(), value++, out.size() * sizeof(std::uint32_t));
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state);
}
BENCHMARK(BM_memset);

void BM_philox_stream(benchmark::State& state) {
  std::vector<std::uint32_t> out(word_count);
  std::uint64_t offset = 0;
  for (auto _ : state) {
    philox_stream stream(0x0123456789abcdefu, offset++);
    for (auto& word : out)
      word = stream.next();
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state);
}
BENCHMARK(BM_philox_stream);

void BM_random_bits(benchmark::State& state) {
  std::vector<std::uint32_t> out(word_count);
  std::uint64_t offset = 0;
  for (auto _ : state) {
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = random_bits(0x0123456789abcdefu, offset, i);
    ++offset;
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state);
}
BENCHMARK(BM_random_bits);

// One Philox block per call, written out whole: the cost floor random_bits pays 4 times per block.
void BM_philox_blocks(benchmark::State& state) {
  std::vector<std::uint32_t> out(word_count);
  std::uint32_t offset = 0;
  for (auto _ : state) {
    for (std::size_t block = 0; block < out.size() / 4; ++block) {
      const auto words = philox4x32_10::generate(
          {{static_cast<std::uint32_t>(block), 0, offset, 0}}, {{0x89abcdefu, 0x01234567u}});
      for (std::size_t lane = 0; lane < 4; ++lane)
        out[4 * block + lane] = words[lane];
    }
    ++offset;
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state);
}
BENCHMARK(BM_philox_blocks);

} // namespace
