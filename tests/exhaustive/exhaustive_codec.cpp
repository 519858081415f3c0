// The codec's short bodies against the general conversion, exhaustively. Exit 1 on any mismatch.
//  - codec::scale_code for every scale format of the registry (the unsigned scalar formats: UE4M3,
//    UE5M3, UE5M3 with IEEE specials, UE8M0) under every scale rounding (nearest-even, up,
//    down) on every float a block's amax times a positive multiplier can be: all 2^31 patterns
//    of +0 .. +Inf and every NaN pattern, positive and negative; expected:
//    convert<Scale>(capped(s), rounding).
//  - The E2M1 register encoders of block/codec_e2m1.hpp on all 2^32 floats: the nearest-even
//    magnitude against convert<e2m1>, and the stochastic magnitude with 8 random bits against
//    convert<e2m1>(y, round_stochastic{r << 24}) for r in {0, 1, 127, 128, 255} and, for each y,
//    the two bytes on either side of its threshold (read from the general routine's discarded
//    fraction), so that every byte agrees.
// Threads: every core (BLOCKSCALE_THREADS overrides).
#include <blockscale/block/codec.hpp>
#include <blockscale/block/codec_e2m1.hpp>
#include <blockscale/contract/registry.hpp>
#include <blockscale/numeric/convert.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace blockscale;

unsigned thread_count() {
  if (const char* env = std::getenv("BLOCKSCALE_THREADS"))
    return static_cast<unsigned>(std::max(1, std::atoi(env)));
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

/// Runs check(first, count) over [0, total) in chunks on every thread; returns the mismatches.
template <class Check>
std::uint64_t sweep(std::uint64_t total, Check check) {
  constexpr std::uint64_t chunk = 1u << 20;
  std::atomic<std::uint64_t> next{0}, mismatches{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < thread_count(); ++t)
    threads.emplace_back([&] {
      std::uint64_t local = 0;
      for (std::uint64_t first = next.fetch_add(chunk); first < total;
           first = next.fetch_add(chunk))
        local += check(first, first + chunk < total ? chunk : total - first);
      mismatches += local;
    });
  for (std::thread& t : threads)
    t.join();
  return mismatches.load();
}

/// The floats a scaled block amax can be: +0 .. +Inf (i < 2^31 - 2^23 + 1), then the NaN patterns
/// of both signs.
float scaled_input(std::uint64_t i) {
  constexpr std::uint64_t finite = 0x7F800001u; // +0 .. +Inf
  if (i < finite)
    return detail::bit_cast<float>(static_cast<std::uint32_t>(i));
  const std::uint64_t nan = i - finite; // 2 · (2^23 - 1) NaN patterns
  const std::uint32_t payload = static_cast<std::uint32_t>(nan / 2) + 1;
  return detail::bit_cast<float>((nan % 2 ? 0xFF800000u : 0x7F800000u) | payload);
}
constexpr std::uint64_t scaled_inputs = 0x7F800001u + 2 * 0x7FFFFFu;

template <class Scale, class Rounding>
bool check_scale_codes(const char* name) {
  const auto start = std::chrono::steady_clock::now();
  const std::uint64_t bad = sweep(scaled_inputs, [](std::uint64_t first, std::uint64_t count) {
    std::uint64_t local = 0;
    for (std::uint64_t i = first; i < first + count; ++i) {
      const float s = scaled_input(i);
      const std::uint8_t want = convert<Scale>(codec::capped(s), Rounding{}).bits();
      const std::uint8_t got = codec::scale_code<Scale>(s, Rounding{});
      if (got != want && local++ < 3)
        std::fprintf(stderr, "  %08x: got %02x, want %02x\n", detail::bit_cast<std::uint32_t>(s),
                     got, want);
    }
    return local;
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("scale_code<%s>: %llu mismatches (%.1f s)\n", name,
              static_cast<unsigned long long>(bad), seconds);
  return bad == 0;
}

/// A rounding tag that records the discarded fraction the general routine computes.
struct fraction_probe {
  std::uint32_t* fraction;
  bool rounds_away(discarded_bits d) const noexcept {
    *fraction = d.fraction;
    return false;
  }
  static constexpr bool overflows_to_nonfinite(bool) noexcept { return true; }
};

/// E2M1 code of y from the register encoders: the magnitude and y's sign.
std::uint8_t with_sign(float y, std::uint32_t magnitude) {
  return static_cast<std::uint8_t>(magnitude | ((detail::bit_cast<std::uint32_t>(y) >> 28) & 8u));
}

bool check_e2m1() {
  const auto start = std::chrono::steady_clock::now();
  const std::uint64_t bad = sweep(std::uint64_t{1} << 32, [](std::uint64_t first,
                                                             std::uint64_t count) {
    std::uint64_t local = 0;
    const auto report = [&](const char* what, std::uint32_t bits, unsigned got, unsigned want) {
      if (local++ < 3)
        std::fprintf(stderr, "  %s %08x: got %x, want %x\n", what, bits, got, want);
    };
    for (std::uint64_t i = first; i < first + count; ++i) {
      const auto bits = static_cast<std::uint32_t>(i);
      const float y = detail::bit_cast<float>(bits);
      if (y != y)
        continue; // NaN never reaches the register encoders: its block is stored as zeros
      const std::uint8_t nearest = convert<e2m1>(y).bits();
      const std::uint8_t got = with_sign(y, codec::e2m1_magnitude_nearest(y));
      if (got != nearest)
        report("nearest", bits, got, nearest);
      std::uint32_t fraction = 0;
      (void)detail::encode_general<e2m1_format>(y, fraction_probe{&fraction}, saturate_finite{});
      // Rounds away iff (fraction >> 24) + r >= 256: the bytes on both sides of that threshold.
      const std::uint32_t threshold = 256u - (fraction >> 24);
      const std::uint32_t bytes[] = {
          0u, 1u, 127u, 128u, 255u, threshold & 0xFFu, (threshold - 1u) & 0xFFu};
      for (const std::uint32_t r : bytes) {
        const std::uint8_t want = convert<e2m1>(y, round_stochastic{r << 24}).bits();
        const std::uint8_t stochastic = with_sign(y, codec::e2m1_magnitude_stochastic(y, r));
        if (stochastic != want)
          report("stochastic", bits, stochastic, want);
      }
    }
    return local;
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("E2M1 register encoders: %llu mismatches (%.1f s)\n",
              static_cast<unsigned long long>(bad), seconds);
  return bad == 0;
}

} // namespace

int main(int argc, char** argv) {
  const std::string only = argc > 1 ? argv[1] : "";
  bool ok = true;
  if (only.empty() || only == "scale") {
    // Every scale format of the registry under every scale rounding.
    for_each_scale_format([&](auto tag) {
      using Scale = typename decltype(tag)::type;
      for (const char* rounding : scale_rounding_names)
        visit_convert_rounding(rounding, [&](auto r) {
          const std::string name = std::string(scalar_format_name<Scale>()) + ", " + rounding;
          ok &= check_scale_codes<Scale, decltype(r)>(name.c_str());
        });
    });
  }
  if (only.empty() || only == "e2m1")
    ok &= check_e2m1();
  std::printf(ok ? "all agree\n" : "MISMATCHES\n");
  return ok ? 0 : 1;
}
