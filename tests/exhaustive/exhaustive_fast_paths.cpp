// The fast quantize path's E2M1 nearest-even conversion (seven comparisons) against convert<e2m1>
// for all 2^32 float bit patterns, NaN and Inf included. Exit 1 on any mismatch.
#include <blockscale/host/quantize.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

int main() {
  using namespace blockscale;
  const char* override_threads = std::getenv("BLOCKSCALE_THREADS");
  unsigned threads = override_threads ? static_cast<unsigned>(std::atoi(override_threads))
                                      : std::thread::hardware_concurrency();
  threads = threads == 0 ? 1 : threads;
  const auto start = std::chrono::steady_clock::now();
  std::atomic<std::uint64_t> mismatches{0};
  std::atomic<std::uint32_t> first_mismatch{0};
  std::vector<std::thread> workers;
  constexpr std::uint64_t total = std::uint64_t{1} << 32;
  for (unsigned t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      std::uint64_t local = 0;
      for (std::uint64_t u = total * t / threads; u < total * (t + 1) / threads; ++u) {
        const float x = detail::bit_cast<float>(static_cast<std::uint32_t>(u));
        if (detail::e2m1_nearest_even(x) != convert<e2m1>(x).bits()) {
          if (local++ == 0)
            first_mismatch = static_cast<std::uint32_t>(u);
        }
      }
      mismatches += local;
    });
  for (auto& worker : workers)
    worker.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("e2m1 fast nearest-even vs convert<e2m1>: 2^32 inputs, %llu mismatches, %.1f s\n",
              static_cast<unsigned long long>(mismatches.load()), seconds);
  if (mismatches != 0) {
    std::printf("first mismatch: input bits 0x%08X\n", first_mismatch.load());
    return 1;
  }
  return 0;
}
