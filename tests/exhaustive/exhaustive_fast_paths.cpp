// The E2M1 encoders against the general rounding routine, for all 2^32 float bit patterns (NaN and
// Inf included). Exit 1 on any mismatch.
//  - detail::e2m1_nearest_even, the one nearest-even body that convert<e2m1> and the codec use,
//    against detail::encode_general<e2m1_format>, and so is detail::e2m1_nearest_even_by_addition,
//    the body device code runs;
//  - where the AVX-512 bodies are compiled in (this target is built with -march=native where the
//    compiler supports it), avx512::e2m1_nearest_even on 16 lanes against the same, and
//    avx512::e2m1_stochastic against the general routine's stochastic rounding. Stochastic
//    rounding rounds away iff fraction + bits >= 2^32, a threshold in the random bits; both bodies
//    are checked at bits 0, 2^32 - 1, and on both sides of each input's threshold 2^32 - fraction,
//    with the fraction read from the general routine itself, so they agree for every bits value.
#include <blockscale/host/simd.hpp>
#include <blockscale/numeric/convert.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

using namespace blockscale;

/// A rounding tag that records the discarded fraction the general routine computes.
struct fraction_probe {
  std::uint32_t* fraction;
  bool rounds_away(discarded_bits d) const noexcept {
    *fraction = d.fraction;
    return false;
  }
  static constexpr bool overflows_to_nonfinite(bool) noexcept { return true; }
};

std::uint8_t general_nearest(float x) {
  return detail::encode_general<e2m1_format>(x, round_nearest_even{}, saturate_finite{});
}

/// Mismatches among the 16 inputs starting at bits `first`.
std::uint64_t check_lanes(std::uint32_t first) {
  std::uint64_t mismatches = 0;
  alignas(64) float x[16];
  for (int i = 0; i < 16; ++i) {
    x[i] = detail::bit_cast<float>(first + static_cast<std::uint32_t>(i));
    mismatches += detail::e2m1_nearest_even(x[i]) != general_nearest(x[i]);
    mismatches += detail::e2m1_nearest_even_by_addition(x[i]) != general_nearest(x[i]);
  }
#if BLOCKSCALE_SIMD_AVX512
  alignas(64) std::uint32_t codes[16];
  const __m512 y = _mm512_load_ps(x);
  _mm512_store_si512(codes, detail::avx512::e2m1_nearest_even(y));
  for (int i = 0; i < 16; ++i)
    mismatches += codes[i] != general_nearest(x[i]);
  // Stochastic: bits on both sides of each lane's threshold, and the extremes.
  alignas(64) std::uint32_t threshold[16];
  for (int i = 0; i < 16; ++i) {
    std::uint32_t fraction = 0;
    (void)detail::encode_general<e2m1_format>(x[i], fraction_probe{&fraction}, saturate_finite{});
    threshold[i] = fraction == 0 ? 0u : 0u - fraction; // 2^32 - fraction
  }
  alignas(64) std::uint32_t bits[16];
  for (int variant = 0; variant < 4; ++variant) {
    for (int i = 0; i < 16; ++i)
      bits[i] = variant == 0   ? 0u
                : variant == 1 ? 0xFFFFFFFFu
                : variant == 2 ? threshold[i]
                               : threshold[i] - (threshold[i] != 0 ? 1u : 0u);
    _mm512_store_si512(codes, detail::avx512::e2m1_stochastic(
                                  y, _mm512_load_si512(reinterpret_cast<const void*>(bits))));
    for (int i = 0; i < 16; ++i)
      mismatches += codes[i] != detail::encode_general<e2m1_format>(x[i], round_stochastic{bits[i]},
                                                                    saturate_finite{});
  }
#endif
  return mismatches;
}

} // namespace

int main() {
  const char* override_threads = std::getenv("BLOCKSCALE_THREADS");
  unsigned threads = override_threads ? static_cast<unsigned>(std::atoi(override_threads))
                                      : std::thread::hardware_concurrency();
  threads = threads == 0 ? 1 : threads;
  const auto start = std::chrono::steady_clock::now();
  std::atomic<std::uint64_t> mismatches{0};
  std::atomic<std::uint32_t> first_mismatch{0};
  std::vector<std::thread> workers;
  constexpr std::uint64_t groups = (std::uint64_t{1} << 32) / 16;
  for (unsigned t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      std::uint64_t local = 0;
      for (std::uint64_t g = groups * t / threads; g < groups * (t + 1) / threads; ++g) {
        const std::uint64_t found = check_lanes(static_cast<std::uint32_t>(g * 16));
        if (found != 0 && local == 0)
          first_mismatch = static_cast<std::uint32_t>(g * 16);
        local += found;
      }
      mismatches += local;
    });
  for (auto& worker : workers)
    worker.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("E2M1 bodies vs the general routine: 2^32 inputs, AVX-512 bodies %s, %llu "
              "mismatches, %.1f s\n",
              BLOCKSCALE_SIMD_AVX512 ? "checked" : "not compiled in (portable only)",
              static_cast<unsigned long long>(mismatches.load()), seconds);
  if (mismatches != 0) {
    std::printf("first mismatch in the 16 inputs from bits 0x%08X\n", first_mismatch.load());
    return 1;
  }
  return 0;
}
