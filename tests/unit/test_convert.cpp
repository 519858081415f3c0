// Hand-checked conversions: the E2M1 decision points (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5), each
// rounding mode, the overflow rules of docs/conversion.md, and double input.
#include <blockscale/blockscale.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "catch.hpp"

using namespace blockscale;

namespace {
float next_up(float x) {
  return std::nextafter(x, std::numeric_limits<float>::infinity());
}
float next_down(float x) {
  return std::nextafter(x, -std::numeric_limits<float>::infinity());
}
} // namespace

TEST_CASE("E2M1 nearest-even decision points (Transformer Engine's table)", "[convert]") {
  struct interval {
    float low, high;
    bool low_closed, high_closed;
    float value;
  };
  // <=0.25 -> 0, (0.25,0.75) -> 0.5, [0.75,1.25] -> 1, (1.25,1.75) -> 1.5, [1.75,2.5] -> 2,
  // (2.5,3.5) -> 3, [3.5,5] -> 4, >5 -> 6
  const interval table[] = {{0.0f, 0.25f, true, true, 0.0f},  {0.25f, 0.75f, false, false, 0.5f},
                            {0.75f, 1.25f, true, true, 1.0f}, {1.25f, 1.75f, false, false, 1.5f},
                            {1.75f, 2.5f, true, true, 2.0f},  {2.5f, 3.5f, false, false, 3.0f},
                            {3.5f, 5.0f, true, true, 4.0f},   {5.0f, 1e30f, false, true, 6.0f}};
  for (const auto& row : table) {
    const float first = row.low_closed ? row.low : next_up(row.low);
    const float last = row.high_closed ? row.high : next_down(row.high);
    for (float x : {first, last, (row.low + row.high) / 2}) {
      INFO("x = " << x);
      CHECK(static_cast<float>(convert<e2m1>(x)) == row.value);
      CHECK(static_cast<float>(convert<e2m1>(-x)) == -row.value);
    }
  }
}

TEST_CASE("each rounding mode on E2M1", "[convert]") {
  // 2.5 is a tie between 2 (even mantissa) and 3; 0.25 a tie between 0 and 0.5.
  CHECK(static_cast<float>(convert<e2m1>(2.5f, round_nearest_even{})) == 2.0f);
  CHECK(static_cast<float>(convert<e2m1>(2.5f, round_nearest_away{})) == 3.0f);
  CHECK(static_cast<float>(convert<e2m1>(-2.5f, round_nearest_away{})) == -3.0f);
  CHECK(static_cast<float>(convert<e2m1>(3.5f, round_nearest_even{})) == 4.0f);
  CHECK(static_cast<float>(convert<e2m1>(0.25f, round_nearest_away{})) == 0.5f);
  CHECK(static_cast<float>(convert<e2m1>(2.9f, round_toward_zero{})) == 2.0f);
  CHECK(static_cast<float>(convert<e2m1>(-2.9f, round_toward_zero{})) == -2.0f);
  CHECK(static_cast<float>(convert<e2m1>(2.1f, round_up{})) == 3.0f);
  CHECK(static_cast<float>(convert<e2m1>(-2.1f, round_up{})) == -2.0f);
  CHECK(static_cast<float>(convert<e2m1>(2.9f, round_down{})) == 2.0f);
  CHECK(static_cast<float>(convert<e2m1>(-2.1f, round_down{})) == -3.0f);
  CHECK(static_cast<float>(convert<e2m1>(0.1f, round_up{})) == 0.5f);
  // Round to odd: inexact results land on an odd mantissa (0.5, 1.5, 3, 6).
  CHECK(static_cast<float>(convert<e2m1>(2.1f, round_to_odd{})) == 3.0f);
  CHECK(static_cast<float>(convert<e2m1>(2.9f, round_to_odd{})) == 3.0f);
  CHECK(static_cast<float>(convert<e2m1>(4.5f, round_to_odd{})) == 6.0f);
  CHECK(static_cast<float>(convert<e2m1>(1.2f, round_to_odd{})) == 1.5f);
  CHECK(static_cast<float>(convert<e2m1>(0.2f, round_to_odd{})) == 0.5f);
  CHECK(static_cast<float>(convert<e2m1>(4.0f, round_to_odd{})) == 4.0f);
}

TEST_CASE("stochastic rounding decides by fraction + bits >= 2^32", "[convert]") {
  // 2.25 lies a quarter of the way from 2 to 3: fraction 0x40000000.
  CHECK(static_cast<float>(convert<e2m1>(2.25f, round_stochastic{0xBFFFFFFFu})) == 2.0f);
  CHECK(static_cast<float>(convert<e2m1>(2.25f, round_stochastic{0xC0000000u})) == 3.0f);
  CHECK(static_cast<float>(convert<e2m1>(-2.25f, round_stochastic{0xC0000000u})) == -3.0f);
  CHECK(static_cast<float>(convert<e2m1>(2.0f, round_stochastic{0xFFFFFFFFu})) == 2.0f);
  // Beyond the max the upper neighbour overflows: saturate gives 6 either way.
  CHECK(static_cast<float>(convert<e2m1>(7.0f, round_stochastic{0xFFFFFFFFu})) == 6.0f);
}

TEST_CASE("overflow follows the rounding direction under to_nonfinite", "[convert]") {
  // E4M3: 464 is the midpoint of 448 and the unbounded neighbour 480.
  CHECK(convert<e4m3>(464.0f, round_nearest_even{}, to_nonfinite{}).bits() == 0x7E);
  CHECK(convert<e4m3>(next_up(464.0f), round_nearest_even{}, to_nonfinite{}).bits() == 0x7F);
  CHECK(convert<e4m3>(464.0f, round_nearest_away{}, to_nonfinite{}).bits() == 0x7F);
  CHECK(convert<e4m3>(-1e6f, round_nearest_even{}, to_nonfinite{}).bits() == 0xFF);
  CHECK(convert<e4m3>(1e6f, round_toward_zero{}, to_nonfinite{}).bits() == 0x7E);
  CHECK(convert<e4m3>(1e6f, round_down{}, to_nonfinite{}).bits() == 0x7E);
  CHECK(convert<e4m3>(-1e6f, round_up{}, to_nonfinite{}).bits() == 0xFE);
  CHECK(convert<e4m3>(-1e6f, round_down{}, to_nonfinite{}).bits() == 0xFF);
  CHECK(convert<e4m3>(449.0f, round_up{}, to_nonfinite{}).bits() == 0x7F);
  CHECK(convert<e4m3>(449.0f, round_up{}).bits() == 0x7E);
  // Round to odd: 448 has an even mantissa, so anything above it goes to 480 and overflows.
  CHECK(convert<e4m3>(449.0f, round_to_odd{}, to_nonfinite{}).bits() == 0x7F);
  CHECK(convert<e5m2>(61440.0f, round_nearest_even{}, to_nonfinite{}).bits() == 0x7C);
  CHECK(convert<e5m2>(next_down(61440.0f), round_nearest_even{}, to_nonfinite{}).bits() == 0x7B);
  // UE5M3: PTX encoding saturates at 114688; the IEEE variant at 61440 with Inf above.
  CHECK(static_cast<float>(convert<ue5m3>(1e9f)) == 114688.0f);
  // 118784 is the midpoint of 114688 (even mantissa) and the unbounded neighbour 122880.
  CHECK(convert<ue5m3>(118784.0f, round_nearest_even{}, to_nonfinite{}).bits() == 0xFE);
  CHECK(convert<ue5m3>(next_up(118784.0f), round_nearest_even{}, to_nonfinite{}).bits() == 0xFF);
  CHECK(convert<ue5m3_ieee>(1e9f, round_nearest_even{}, to_nonfinite{}).bits() == 0xF8);
  CHECK(static_cast<float>(convert<ue5m3_ieee>(1e9f)) == 61440.0f);
}

TEST_CASE("UE8M0: powers of two, no zero", "[convert]") {
  CHECK(static_cast<float>(convert<ue8m0>(5.0f, round_up{})) == 8.0f);
  CHECK(static_cast<float>(convert<ue8m0>(5.0f, round_down{})) == 4.0f);
  CHECK(static_cast<float>(convert<ue8m0>(5.0f, round_toward_zero{})) == 4.0f);
  CHECK(static_cast<float>(convert<ue8m0>(5.0f)) == 4.0f);
  CHECK(static_cast<float>(convert<ue8m0>(6.0f)) == 8.0f); // tie: 8 has the even exponent field
  CHECK(static_cast<float>(convert<ue8m0>(6.0f, round_nearest_away{})) == 8.0f);
  CHECK(static_cast<float>(convert<ue8m0>(0.75f)) == 0.5f); // tie: 0.5 is code 126, 1 is 127
  CHECK(static_cast<float>(convert<ue8m0>(3.0f, round_to_odd{})) == 4.0f); // code 129
  CHECK(static_cast<float>(convert<ue8m0>(5.0f, round_to_odd{})) == 4.0f);
  // Below 2^-127 there is nothing: every mode gives code 0.
  const float tiny = std::ldexp(1.0f, -140);
  CHECK(convert<ue8m0>(0.0f).bits() == 0);
  CHECK(convert<ue8m0>(tiny, round_toward_zero{}).bits() == 0);
  CHECK(convert<ue8m0>(tiny, round_up{}).bits() == 0);
  // Float subnormals in [2^-127, 2^-126) are handled with their true exponent.
  CHECK(convert<ue8m0>(std::ldexp(1.0f, -127), round_up{}).bits() == 0);
  CHECK(convert<ue8m0>(std::ldexp(1.5f, -127), round_up{}).bits() == 1);
  CHECK(convert<ue8m0>(std::ldexp(1.5f, -127), round_toward_zero{}).bits() == 0);
  CHECK(convert<ue8m0>(3e38f, round_up{}, to_nonfinite{}).bits() == 0xFF);
  CHECK(convert<ue8m0>(3e38f, round_up{}).bits() == 0xFE);
}

TEST_CASE("double input is rounded once, from its exact value", "[convert]") {
  // 0.25 + 2^-40 is above the 0 / 0.5 midpoint; as a float it would be exactly 0.25 (a tie to 0).
  const double just_above = 0.25 + std::ldexp(1.0, -40);
  CHECK(static_cast<float>(convert<e2m1>(just_above)) == 0.5f);
  CHECK(static_cast<float>(convert<e2m1>(static_cast<float>(just_above))) == 0.0f);
  CHECK(static_cast<float>(convert<e4m3>(1e300)) == 448.0f);
  CHECK(convert<e4m3>(1e-300, round_up{}).bits() == 0x01);
  CHECK(convert<e4m3>(std::numeric_limits<double>::denorm_min(), round_down{}).bits() == 0x00);
  CHECK(convert<ue8m0>(std::ldexp(1.0, -127)).bits() == 0);
  CHECK(convert<ue8m0>(std::ldexp(1.0, 127)).bits() == 0xFE);
  CHECK(convert<ue8m0>(std::ldexp(1.0, 128), round_nearest_even{}, to_nonfinite{}).bits() == 0xFF);
  // The stochastic fraction of a double is its first 32 discarded bits.
  const double quarter_past_two = 2.25;
  CHECK(static_cast<float>(convert<e2m1>(quarter_past_two, round_stochastic{0xC0000000u})) == 3.0f);
}

TEST_CASE("FP6 formats come from the same template", "[convert]") {
  CHECK(static_cast<float>(convert<e2m3>(7.2f)) == 7.0f);
  CHECK(static_cast<float>(convert<e2m3>(100.0f)) == 7.5f);
  CHECK(static_cast<float>(convert<e3m2>(27.0f)) == 28.0f);
  CHECK(static_cast<float>(convert<e3m2>(0.03f)) == 0.0f);
  CHECK(static_cast<float>(convert<e3m2>(0.04f)) == 0.0625f);
}

TEST_CASE("convert_n converts arrays", "[convert]") {
  const float input[] = {0.1f, 0.3f, 2.6f, -5.5f, 100.0f};
  e2m1 output[5];
  convert_n(input, output, 5);
  const std::uint8_t expected[] = {0x0, 0x1, 0x5, 0xF, 0x7};
  for (int i = 0; i < 5; ++i)
    CHECK(output[i].bits() == expected[i]);
  ue8m0 scales[5];
  convert_n(input, scales, 5, round_up{});
  CHECK(static_cast<float>(scales[2]) == 4.0f);
  CHECK(scales[3].bits() == 0);
}

TEST_CASE("E2M1 nearest-even special inputs: signs, zeros, NaN, Inf, subnormals, the clamp",
          "[convert]") {
  const auto code = [](std::uint32_t bits) {
    return convert<e2m1>(detail::bit_cast<float>(bits), round_nearest_even{}, saturate_finite{})
        .bits();
  };
  struct row {
    std::uint32_t bits;
    std::uint8_t expected;
  };
  const row table[] = {
      {0x00000000u, 0x0}, {0x80000000u, 0x8}, // ±0 keep their sign
      {0x00000001u, 0x0}, {0x80000001u, 0x8}, // ±smallest subnormal
      {0x007FFFFFu, 0x0}, {0x807FFFFFu, 0x8}, // ±largest subnormal
      {0x7F800000u, 0x7}, {0xFF800000u, 0xF}, // ±Inf saturate to ±6
      {0x7F800001u, 0x7}, {0xFF800001u, 0x7}, // NaN of either sign gives +6
      {0x7FC00000u, 0x7}, {0xFFFFFFFFu, 0x7}, //
      {0x7F7FFFFFu, 0x7}, {0xFF7FFFFFu, 0xF}, // ±largest finite
      {0x40C00000u, 0x7}, {0x40C00001u, 0x7}, // 6 and just above it
      {0x40BFFFFFu, 0x7}, {0x40A00000u, 0x6}, // just below 6; 5 is a tie: even 4
      {0x40A00001u, 0x7}, {0xC0A00001u, 0xF}, // just above 5
      {0x3E800000u, 0x0}, {0x3E800001u, 0x1}, // 0.25 is a tie: even 0; just above
      {0x3FFFFFFFu, 0x4}, {0x40000000u, 0x4}, // just below 2 rounds up to 2; 2
      {0x407FFFFFu, 0x6}, {0x40800000u, 0x6}, // just below 4 rounds up to 4; 4
  };
  for (const auto& r : table) {
    INFO("bits = 0x" << std::hex << r.bits);
    CHECK(code(r.bits) == r.expected);
  }
#if BLOCKSCALE_HAS_BUILTIN_BIT_CAST
  static_assert(convert<e2m1>(2.5f).bits() == 0x4 && convert<e2m1>(-5.5f).bits() == 0xF,
                "convert<e2m1> is constexpr");
#endif
}

TEST_CASE("E2M1 nearest-even in a plain loop equals the general routine", "[convert]") {
  // A loop the compiler vectorizes, as BM_e2m1_plain_loop runs it, over bit patterns that step
  // through every exponent (NaN and Inf included) with varied mantissas and both signs.
  std::vector<float> input;
  for (std::uint64_t bits = 0; bits <= 0xFFFFFFFFu; bits += 0x00012345u)
    input.push_back(detail::bit_cast<float>(static_cast<std::uint32_t>(bits)));
  std::vector<std::uint8_t> codes(input.size());
  for (std::size_t i = 0; i < input.size(); ++i)
    codes[i] = convert<e2m1>(input[i], round_nearest_even{}, saturate_finite{}).bits();
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < input.size(); ++i)
    mismatches += codes[i] != detail::encode_general<e2m1_format>(input[i], round_nearest_even{},
                                                                  saturate_finite{});
  CHECK(input.size() > 50000);
  CHECK(mismatches == 0);
}
