// The emulation of PTX's cvt.rs.satfinite.e2m1x4.f32 (numeric/rounding_ptx.hpp) against a
// re-derivation written here from the PTX ISA's words, without the library's encoder: the
// neighbours of |x| from the table of E2M1 values, the discarded bits as the exact fraction of the
// way from one to the other (double arithmetic), the carry of "the integer addition of the random
// bits to the truncated off bits" over their first 8. Also a second, literal form of that addition
// on the float's bits where E2M1 is normal, the 4-element helper's byte and nibble layout, the
// special values, the identity with round_stochastic, and the mean over random words.
#include <blockscale/blockscale.hpp>
#include <blockscale/numeric/hardware_convert.hpp>
#include <blockscale/numeric/rounding_ptx.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "catch.hpp"
#include "float_bits.hpp"
#include "splitmix64.hpp"

using namespace blockscale;

namespace {

// E2M1 magnitudes, codes 0..7, and 8: the next value were the exponent unbounded.
constexpr double magnitudes[] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0};

// cvt.rs to E2M1 for one element with random byte r, from the ISA's words: NaN -> +MAX_NORM;
// |x| > MAX_NORM -> sign-preserved MAX_NORM; otherwise away from zero iff the first 8 discarded
// bits plus r carry out of 8 bits. The sign is kept, zero included.
std::uint8_t reference_cvt_rs(float x, unsigned r) {
  if (std::isnan(x))
    return 0x7;
  const std::uint8_t sign = std::signbit(x) ? 0x8 : 0x0;
  const double a = std::fabs(static_cast<double>(x));
  if (a > 6.0)
    return static_cast<std::uint8_t>(sign | 0x7);
  int k = 0;
  while (!(a < magnitudes[k + 1]))
    ++k;
  // Exact: a has 24 significant bits, hi - lo is a power of two.
  const double fraction = (a - magnitudes[k]) / (magnitudes[k + 1] - magnitudes[k]);
  const auto first8 = static_cast<unsigned>(std::floor(fraction * 256.0));
  const int index = k + (first8 + r >= 256 ? 1 : 0);
  return static_cast<std::uint8_t>(sign | (index > 7 ? 7 : index));
}

// The same addition done literally on the float's bits, for 1 <= |x| <= 6, where E2M1 keeps one
// mantissa bit and the 22 below it are discarded: r goes under the first 8 of them, the sum is
// truncated, and a carry walks into the exponent by itself.
std::uint8_t literal_cvt_rs_normal(float x, unsigned r) {
  const std::uint32_t sign = float_bits(x) >> 31;
  std::uint32_t u = float_bits(x) & 0x7FFFFFFFu;
  u += r << 14;
  u &= ~((std::uint32_t{1} << 22) - 1);
  const double y = std::fmin(static_cast<double>(float_from_bits(u)), 6.0);
  int index = 0;
  while (magnitudes[index] != y)
    ++index;
  return static_cast<std::uint8_t>((sign << 3) | static_cast<std::uint32_t>(index));
}

std::uint8_t emulated(float x, unsigned r) {
  return convert<e2m1>(x, round_stochastic_ptx{static_cast<std::uint8_t>(r)}).bits();
}

// Inputs around every E2M1 neighbourhood [lo, hi] up to 8: each multiple of (hi - lo) / 256 (the
// thresholds of the 8-bit rule), the float on each side of it, and the point halfway to the next.
std::vector<float> neighbourhood_inputs() {
  std::vector<float> inputs;
  const float inf = std::numeric_limits<float>::infinity();
  for (int k = 0; k < 8; ++k) {
    const double lo = magnitudes[k], step = (magnitudes[k + 1] - lo) / 256.0;
    for (int j = 0; j <= 256; ++j) {
      const auto point = static_cast<float>(lo + j * step);
      inputs.push_back(point);
      inputs.push_back(std::nextafter(point, inf));
      inputs.push_back(std::nextafter(point, 0.0f));
      inputs.push_back(static_cast<float>(lo + (j + 0.5) * step));
    }
  }
  const std::size_t positive = inputs.size();
  for (std::size_t i = 0; i < positive; ++i)
    inputs.push_back(-inputs[i]);
  return inputs;
}

// The nibble the 4-element helper's `operand` (0..3 = a, b, e, f) lands in.
unsigned nibble(std::uint16_t d, int operand) {
  return (d >> (12 - 4 * operand)) & 0xFu;
}

// rbits's byte for `operand`, written out from the ISA's grouping and assumption 1 of
// rounding_ptx.hpp.
unsigned byte_for(std::uint32_t rbits, int operand) {
  switch (operand) {
  case 0:
    return rbits >> 24; // a: upper byte of the upper half
  case 1:
    return (rbits >> 8) & 0xFFu; // b: upper byte of the lower half
  case 2:
    return (rbits >> 16) & 0xFFu; // e: lower byte of the upper half
  default:
    return rbits & 0xFFu; // f: lower byte of the lower half
  }
}

} // namespace

TEST_CASE("cvt.rs: E2M1 values never move, whatever the random byte", "[rounding_ptx]") {
  for (unsigned code = 0; code < 16; ++code) {
    const auto x = static_cast<float>(e2m1::from_bits(static_cast<std::uint8_t>(code)));
    for (unsigned r = 0; r < 256; ++r) {
      INFO("code " << code << ", r = " << r);
      REQUIRE(emulated(x, r) == code);
      REQUIRE(reference_cvt_rs(x, r) == code);
    }
  }
}

TEST_CASE("cvt.rs: hand-checked decisions", "[rounding_ptx]") {
  // 2.25 is a quarter of the way from 2 to 3: first 8 discarded bits 64, so r >= 192 rounds up.
  CHECK(emulated(2.25f, 191) == 0x4);
  CHECK(emulated(2.25f, 192) == 0x5);
  CHECK(emulated(-2.25f, 192) == 0xD);
  // 0.3 is 0.6 of the way from 0 to 0.5 (E2M1's subnormal step): floor(0.6 * 256) = 153.
  CHECK(emulated(0.3f, 102) == 0x0);
  CHECK(emulated(0.3f, 103) == 0x1);
  // 5.5 is three quarters of the way from 4 to 6.
  CHECK(emulated(5.5f, 63) == 0x6);
  CHECK(emulated(5.5f, 64) == 0x7);
  // 2^-9 is 1/256 of the way from 0 to 0.5: only r = 255 carries. Below it nothing does.
  CHECK(emulated(0x1p-9f, 255) == 0x1);
  CHECK(emulated(0x1p-9f, 254) == 0x0);
  CHECK(emulated(-0x1p-9f, 255) == 0x9);
  CHECK(emulated(std::nextafter(0x1p-9f, 0.0f), 255) == 0x0);
  // The bits below the first 8 never carry: 2 + 255/256 + a little is still decided by 255.
  CHECK(emulated(std::nextafter(2.99609375f, 3.0f), 0) == 0x4);
  CHECK(emulated(std::nextafter(2.99609375f, 3.0f), 1) == 0x5);
  // The instruction's words for x4: d = a b e f from the top nibble down.
  CHECK(encode_e2m1x4_stochastic_ptx(1.0f, 2.0f, 3.0f, 4.0f, 0) == 0x2456);
  CHECK(encode_e2m1x4_stochastic_ptx(0.5f, -0.5f, 6.0f, -6.0f, 0xFFFFFFFFu) == 0x197F);
#if BLOCKSCALE_HAS_BUILTIN_BIT_CAST
  static_assert(convert<e2m1>(2.25f, round_stochastic_ptx{192}).bits() == 0x5, "constexpr");
  static_assert(encode_e2m1x4_stochastic_ptx(2.25f, 2.25f, 2.25f, 2.25f, 0xC0000000u) == 0x5444,
                "constexpr, a's byte is rbits[31:24]");
#endif
}

TEST_CASE("cvt.rs equals the re-derivation around every E2M1 value, for every random byte",
          "[rounding_ptx]") {
  const std::vector<float> inputs = neighbourhood_inputs();
  std::size_t mismatches = 0;
  for (const float x : inputs)
    for (unsigned r = 0; r < 256; ++r)
      if (emulated(x, r) != reference_cvt_rs(x, r)) {
        if (mismatches++ == 0)
          FAIL_CHECK("first mismatch: x = " << x << ", r = " << r << ": "
                                            << unsigned{emulated(x, r)} << " against "
                                            << unsigned{reference_cvt_rs(x, r)});
      }
  CHECK(mismatches == 0);
}

TEST_CASE("cvt.rs equals the re-derivation on random floats and random bytes", "[rounding_ptx]") {
  splitmix64 rng{2027};
  std::size_t mismatches = 0;
  for (int i = 0; i < (1 << 20); ++i) {
    const std::uint32_t u = rng.next_u32();
    // Half raw bit patterns, half values in E2M1's range.
    const float x = (i & 1) != 0 ? float_from_bits(u) : static_cast<float>(rng.uniform(-7.0, 7.0));
    const unsigned r = u & 0xFFu;
    mismatches += emulated(x, r) != reference_cvt_rs(x, r);
  }
  CHECK(mismatches == 0);
}

TEST_CASE("cvt.rs equals the literal bit-level addition where E2M1 is normal", "[rounding_ptx]") {
  // Every 251st float in [1, 6] (about 84 thousand), each with every random byte.
  std::size_t mismatches = 0, checked = 0;
  for (std::uint32_t u = float_bits(1.0f); u <= float_bits(6.0f); u += 251) {
    const float x = float_from_bits(u);
    for (unsigned r = 0; r < 256; ++r) {
      const std::uint8_t want = literal_cvt_rs_normal(x, r);
      mismatches += emulated(x, r) != want;
      mismatches += emulated(-x, r) != (want | 0x8);
      mismatches += reference_cvt_rs(x, r) != want;
    }
    ++checked;
  }
  CHECK(checked > 80000);
  CHECK(mismatches == 0);
}

TEST_CASE("cvt.rs special values: NaN, Inf, zeros, tiny values, saturation", "[rounding_ptx]") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nans[] = {std::numeric_limits<float>::quiet_NaN(), float_from_bits(0x7F800001u),
                        float_from_bits(0x7FFFFFFFu), float_from_bits(0xFFC00000u),
                        float_from_bits(0xFF800001u)};
  for (unsigned r = 0; r < 256; ++r) {
    INFO("r = " << r);
    for (const float nan : nans)
      CHECK(emulated(nan, r) == 0x7); // positive MAX_NORM, whatever the NaN's sign
    CHECK(emulated(inf, r) == 0x7);
    CHECK(emulated(-inf, r) == 0xF);
    CHECK(emulated(0.0f, r) == 0x0);
    CHECK(emulated(-0.0f, r) == 0x8);
    // Float subnormals and values below 2^-9: their first 8 discarded bits are 0.
    for (const float tiny : {0x1p-149f, 0x1p-127f, 0x1p-126f, 0x1p-20f, 0x1.fffffep-10f}) {
      CHECK(emulated(tiny, r) == 0x0);
      CHECK(emulated(-tiny, r) == 0x8);
    }
    // Above MAX_NORM, and between 6 and 8 where rounding up would leave the format: always ±6.
    for (const float big : {6.0f, std::nextafter(6.0f, inf), 7.0f, 7.99f, 8.0f, 1e30f,
                            std::numeric_limits<float>::max()}) {
      CHECK(emulated(big, r) == 0x7);
      CHECK(emulated(-big, r) == 0xF);
    }
    // Just below 6: 4 or 6 by the rule.
    const float below = std::nextafter(6.0f, 0.0f);
    CHECK(emulated(below, r) == (r >= 1 ? 0x7 : 0x6));
    CHECK(emulated(-below, r) == (r >= 1 ? 0xF : 0xE));
  }
  // The helper: NaN goes to +6 in every operand's nibble.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(encode_e2m1x4_stochastic_ptx(nan, -nan, nan, -nan, 0x12345678u) == 0x7777);
  CHECK(encode_e2m1x4_stochastic_ptx(-0.0f, 0.0f, -inf, inf, 0xFFFFFFFFu) == 0x80F7);
}

TEST_CASE("round_stochastic_ptx{r} decides as round_stochastic{r << 24}", "[rounding_ptx]") {
  splitmix64 rng{11};
  std::size_t mismatches = 0;
  for (int i = 0; i < (1 << 18); ++i) {
    const float x =
        i % 3 == 0 ? float_from_bits(rng.next_u32()) : static_cast<float>(rng.uniform(-8.0, 8.0));
    const auto r = static_cast<std::uint8_t>(rng.next_u32());
    mismatches +=
        emulated(x, r) != convert<e2m1>(x, round_stochastic{std::uint32_t{r} << 24}).bits();
    // And double input follows the same rule on the double's exact value.
    const double y = static_cast<double>(x) * (1.0 + 0x1p-40);
    mismatches += convert<e2m1>(y, round_stochastic_ptx{r}).bits() !=
                  convert<e2m1>(y, round_stochastic{std::uint32_t{r} << 24}).bits();
  }
  CHECK(mismatches == 0);
}

TEST_CASE("the x4 helper: each operand's byte of rbits, a in the top nibble", "[rounding_ptx]") {
  // The layout function against the table written out above.
  splitmix64 rng{5};
  for (int i = 0; i < 1000; ++i) {
    const std::uint32_t rbits = rng.next_u32();
    for (int operand = 0; operand < 4; ++operand)
      REQUIRE(cvt_rs_e2m1x4_random_bits(rbits, operand) == byte_for(rbits, operand));
  }
  // Random quadruples and words against the reference, operand by operand.
  std::size_t mismatches = 0;
  for (int i = 0; i < (1 << 16); ++i) {
    float x[4];
    for (float& v : x)
      v = i % 4 == 0 ? float_from_bits(rng.next_u32()) : static_cast<float>(rng.uniform(-7.0, 7.0));
    const std::uint32_t rbits = rng.next_u32();
    const std::uint16_t d = encode_e2m1x4_stochastic_ptx(x[0], x[1], x[2], x[3], rbits);
    for (int operand = 0; operand < 4; ++operand)
      mismatches += nibble(d, operand) != reference_cvt_rs(x[operand], byte_for(rbits, operand));
  }
  CHECK(mismatches == 0);
}

TEST_CASE("the x4 helper over every value of each pair's two bytes", "[rounding_ptx]") {
  // For (a, b), every value of rbits[31:24] and rbits[15:8] (2^16 words) with the other two bytes
  // fixed; for (e, f) likewise rbits[23:16] and rbits[7:0]. Each on a grid of inputs, each operand
  // against the reference with its byte; the other pair's nibbles must not move.
  const float grid[][4] = {
      {2.25f, 0.3f, 5.5f, -1.2f}, {-2.9f, 1.75f, -0.1f, 4.5f}, {0.0078125f, -3.3f, 2.0f, 0x1p-9f}};
  std::size_t mismatches = 0;
  for (const auto& x : grid) {
    for (int pair = 0; pair < 2; ++pair) {
      const std::uint32_t fixed = pair == 0 ? 0x005A00A5u : 0x3C00C300u;
      const int shift_high = pair == 0 ? 24 : 16, shift_low = pair == 0 ? 8 : 0;
      for (std::uint32_t v = 0; v < (1u << 16); ++v) {
        const std::uint32_t rbits = fixed | ((v >> 8) << shift_high) | ((v & 0xFFu) << shift_low);
        const std::uint16_t d = encode_e2m1x4_stochastic_ptx(x[0], x[1], x[2], x[3], rbits);
        for (int operand = 0; operand < 4; ++operand)
          mismatches +=
              nibble(d, operand) != reference_cvt_rs(x[operand], byte_for(rbits, operand));
      }
    }
  }
  CHECK(mismatches == 0);
  // No bit outside an operand's byte changes that operand: flip each of the 24 others.
  splitmix64 rng{9};
  for (int i = 0; i < 200; ++i) {
    const float x = static_cast<float>(rng.uniform(-7.0, 7.0));
    const std::uint32_t rbits = rng.next_u32();
    const std::uint16_t base = encode_e2m1x4_stochastic_ptx(x, x, x, x, rbits);
    for (int bit = 0; bit < 32; ++bit) {
      const std::uint32_t flipped = rbits ^ (std::uint32_t{1} << bit);
      const std::uint16_t d = encode_e2m1x4_stochastic_ptx(x, x, x, x, flipped);
      for (int operand = 0; operand < 4; ++operand)
        if (byte_for(flipped, operand) == byte_for(rbits, operand))
          REQUIRE(nibble(d, operand) == nibble(base, operand));
    }
  }
}

TEST_CASE("cvt.rs: the exact mean over all 256 bytes, and the mean over random words",
          "[rounding_ptx]") {
  const auto value = [](unsigned code) {
    return static_cast<double>(
        static_cast<float>(e2m1::from_bits(static_cast<std::uint8_t>(code))));
  };
  // Over all 256 bytes the mean is lo + (hi - lo) * D / 256 exactly: x itself when x's fraction has
  // 8 bits, else x truncated to 8 fraction bits (the rule's bias, below 2^-8 of a unit).
  for (int k = 0; k < 7; ++k) {
    const double lo = magnitudes[k], hi = magnitudes[k + 1];
    for (int j = 0; j < 256; ++j) {
      for (const double offset : {0.0, 0.5}) {
        const auto x = static_cast<float>(lo + (j + offset) * (hi - lo) / 256.0);
        double sum = 0.0, negative_sum = 0.0;
        for (unsigned r = 0; r < 256; ++r) {
          sum += value(emulated(x, r));
          negative_sum += value(emulated(-x, r));
        }
        INFO("x = " << x);
        CHECK(sum / 256.0 == lo + (hi - lo) * j / 256.0);
        CHECK(negative_sum == -sum);
      }
    }
  }
  // Random 32-bit words through the helper, each operand with its own x: the mean of n draws is
  // within a Hoeffding bound of x (8-bit fractions, so no bias), t = gap * sqrt(ln(2/delta) / 2n),
  // delta = 1e-9.
  const float x[4] = {2.3046875f, -0.30078125f, 5.5f, 1.00390625f};
  const double gap[4] = {1.0, 0.5, 2.0, 0.5};
  const int n = 1 << 18;
  splitmix64 rng{2026};
  double sum[4] = {0, 0, 0, 0};
  for (int i = 0; i < n; ++i) {
    const std::uint16_t d = encode_e2m1x4_stochastic_ptx(x[0], x[1], x[2], x[3], rng.next_u32());
    for (int operand = 0; operand < 4; ++operand)
      sum[operand] += value(nibble(d, operand));
  }
  for (int operand = 0; operand < 4; ++operand) {
    const double t = gap[operand] * std::sqrt(std::log(2.0 / 1e-9) / (2.0 * n));
    INFO("operand " << operand << ": mean " << sum[operand] / n << ", x " << x[operand]);
    CHECK(std::fabs(sum[operand] / n - x[operand]) <= t);
  }
}

TEST_CASE("encode_e2m1x2_nearest_even packs convert<e2m1>, x0 in the low nibble",
          "[rounding_ptx]") {
  CHECK(encode_e2m1x2_nearest_even(1.0f, 6.0f) == 0x72);
  CHECK(encode_e2m1x2_nearest_even(-0.0f, std::numeric_limits<float>::quiet_NaN()) == 0x78);
  splitmix64 rng{3};
  std::size_t mismatches = 0;
  for (int i = 0; i < (1 << 18); ++i) {
    const float x0 = float_from_bits(rng.next_u32());
    const auto x1 = static_cast<float>(rng.uniform(-7.0, 7.0));
    const std::uint8_t byte = encode_e2m1x2_nearest_even(x0, x1);
    mismatches += byte != pack_nibble_pair(convert<e2m1>(x0).bits(), convert<e2m1>(x1).bits());
    mismatches += byte != portable::encode_e2m1x2_nearest_even(x0, x1);
  }
  CHECK(mismatches == 0);
}
