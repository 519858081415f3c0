// Stochastic rounding: exact on representable values, always one of the two neighbours, rounding
// up with probability exactly fraction / 2^32, and unbiased in the mean within a stated bound.
#include <blockscale/blockscale.hpp>

#include <cmath>
#include <cstdint>
#include <limits>

#include "catch.hpp"
#include "splitmix64.hpp"

using namespace blockscale;

namespace {

// The representable values around x >= 0, by the library's directed modes (which the exhaustive
// tests check independently).
template <class T>
void neighbours(float x, float& low, float& high) {
  low = static_cast<float>(convert<T>(x, round_down{}));
  high = static_cast<float>(convert<T>(x, round_up{}));
}

} // namespace

TEMPLATE_LIST_TEST_CASE("stochastic rounding is exact on representable values", "[stochastic]",
                        scalar_formats) {
  splitmix64 rng{42};
  for (unsigned code = 0; code < format_traits<typename TestType::format>::code_count; ++code) {
    const auto value = TestType::from_bits(static_cast<std::uint8_t>(code));
    if (!value.is_finite())
      continue;
    const auto x = static_cast<float>(value);
    for (int draw = 0; draw < 64; ++draw)
      REQUIRE(convert<TestType>(x, round_stochastic{rng.next_u32()}).bits() == code);
    REQUIRE(convert<TestType>(x, round_stochastic{0xFFFFFFFFu}).bits() == code);
  }
}

TEMPLATE_LIST_TEST_CASE("stochastic results are one of the two neighbours", "[stochastic]",
                        scalar_formats) {
  splitmix64 rng{7};
  const double max = static_cast<double>(std::numeric_limits<TestType>::max());
  for (int i = 0; i < 200000; ++i) {
    const auto x = static_cast<float>(rng.uniform(0.0, max));
    const auto down = convert<TestType>(x, round_down{}).bits();
    const auto up = convert<TestType>(x, round_up{}).bits();
    const auto got = convert<TestType>(x, round_stochastic{rng.next_u32()}).bits();
    INFO("x = " << x);
    REQUIRE((got == down || got == up));
  }
}

TEST_CASE("stochastic rounding goes up for exactly `fraction` of the 2^32 bit values",
          "[stochastic]") {
  // Rounding up is monotone in the random bits, so the threshold t with "up iff bits >= t" pins
  // the probability of rounding up to (2^32 - t) / 2^32 exactly; it must be the discarded
  // fraction floor(2^32 (x - lo) / (hi - lo)).
  splitmix64 rng{11};
  for (int i = 0; i < 2000; ++i) {
    const auto x = static_cast<float>(rng.uniform(0.0, 6.0));
    float low = 0, high = 0;
    neighbours<e2m1>(x, low, high);
    if (low == high)
      continue;
    const auto fraction = static_cast<std::uint64_t>(
        std::floor(std::ldexp((static_cast<double>(x) - low) / (high - low), 32)));
    const std::uint64_t threshold = (std::uint64_t{1} << 32) - fraction;
    INFO("x = " << x << " fraction = " << fraction);
    REQUIRE(static_cast<float>(convert<e2m1>(
                x, round_stochastic{static_cast<std::uint32_t>(threshold - 1)})) == low);
    if (threshold <= 0xFFFFFFFFu)
      REQUIRE(static_cast<float>(convert<e2m1>(
                  x, round_stochastic{static_cast<std::uint32_t>(threshold)})) == high);
  }
}

TEMPLATE_TEST_CASE("stochastic rounding is unbiased", "[stochastic]", e2m1, ue5m3, e4m3) {
  // Each draw is lo or hi, so by Hoeffding's inequality the mean of n draws lies within
  // t = gap * sqrt(ln(2 / delta) / (2 n)) of its expectation with probability 1 - delta. The
  // expectation itself is within gap * 2^-32 of x (the fraction is truncated to 32 bits).
  // With n = 2^16 and delta = 1e-9, t = 0.0128 gap: a correct implementation fails this test
  // for fewer than one seed in a billion.
  const int draws = 1 << 16;
  const double delta = 1e-9;
  splitmix64 rng{2026};
  const double max = static_cast<double>(std::numeric_limits<TestType>::max());
  for (int trial = 0; trial < 64; ++trial) {
    const auto x = static_cast<float>(rng.uniform(0.0, max) * std::ldexp(1.0, -(trial % 8)));
    float low = 0, high = 0;
    neighbours<TestType>(x, low, high);
    const double gap = static_cast<double>(high) - low;
    double sum = 0;
    for (int i = 0; i < draws; ++i)
      sum += static_cast<float>(convert<TestType>(x, round_stochastic{rng.next_u32()}));
    const double mean = sum / draws;
    const double bound = gap * (std::sqrt(std::log(2 / delta) / (2.0 * draws)) + 0x1p-32);
    INFO("x = " << x << " mean = " << mean << " gap = " << gap);
    CHECK(std::fabs(mean - x) <= bound);
  }
}
