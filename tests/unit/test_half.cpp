// bfloat16 and float16 (half.hpp): every code decodes to its value computed from first principles,
// narrowing inverts widening, hand-worked ties and overflow, NaN handling, correct rounding of
// doubles, and agreement with CUDA's host converters on millions of sampled floats (all 2^32 in
// tests/exhaustive/exhaustive_half.cpp).
#if BLOCKSCALE_HAVE_CUDA_HEADERS
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

#include <blockscale/numeric/half.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "catch.hpp"
#include "float_bits.hpp"

using blockscale::bfloat16;
using blockscale::float16;

namespace {

// Value of a float16 code from the IEEE 754 binary16 definition: (-1)^s * 2^(e-15) * 1.m for
// 0 < e < 31, (-1)^s * 2^-14 * 0.m for e = 0.
double float16_reference(std::uint16_t code) {
  const int sign = code >> 15;
  const int field = (code >> 10) & 0x1F;
  const int mantissa = code & 0x3FF;
  const double magnitude = field == 0 ? std::ldexp(static_cast<double>(mantissa), -24)
                                      : std::ldexp(1024.0 + mantissa, field - 25);
  return sign ? -magnitude : magnitude;
}
// Value of a bfloat16 code: (-1)^s * 2^(e-127) * 1.m (7-bit m), or 2^-126 * 0.m for e = 0.
double bfloat16_reference(std::uint16_t code) {
  const int sign = code >> 15;
  const int field = (code >> 7) & 0xFF;
  const int mantissa = code & 0x7F;
  const double magnitude = field == 0 ? std::ldexp(static_cast<double>(mantissa), -133)
                                      : std::ldexp(128.0 + mantissa, field - 134);
  return sign ? -magnitude : magnitude;
}

// What narrowing makes of a NaN: sign and upper payload kept, quiet bit set.
std::uint16_t expected_float16_nan(float x) {
  const std::uint32_t u = float_bits(x);
  return static_cast<std::uint16_t>(((u >> 16) & 0x8000u) | 0x7E00u | ((u >> 13) & 0x3FFu));
}
std::uint16_t expected_bfloat16_nan(float x) {
  return static_cast<std::uint16_t>((float_bits(x) >> 16) | 0x40u);
}

constexpr float inf = std::numeric_limits<float>::infinity();

} // namespace

TEST_CASE("half types are two trivially copyable bytes", "[half]") {
  STATIC_REQUIRE(sizeof(bfloat16) == 2);
  STATIC_REQUIRE(sizeof(float16) == 2);
  STATIC_REQUIRE(std::is_trivially_copyable<bfloat16>::value);
  STATIC_REQUIRE(std::is_trivially_copyable<float16>::value);
  STATIC_REQUIRE(float16::from_bits(0xABCD).bits() == 0xABCD);
  STATIC_REQUIRE(bfloat16::from_bits(0x1234).bits() == 0x1234);
#if BLOCKSCALE_HAS_BUILTIN_BIT_CAST
  STATIC_REQUIRE(float16(1.0f).bits() == 0x3C00);
  STATIC_REQUIRE(bfloat16(-2.0f).bits() == 0xC000);
  STATIC_REQUIRE(static_cast<float>(float16::from_bits(0x0001)) == 0x1p-24f);
  STATIC_REQUIRE(static_cast<float>(bfloat16::from_bits(0x3F81)) == 1.0f + 0x1p-7f);
  STATIC_REQUIRE(float16(1.0 + 0x1p-11 + 0x1p-40).bits() == 0x3C01);
#endif
}

TEST_CASE("every float16 code decodes to its value", "[half]") {
  for (std::uint32_t c = 0; c < 0x10000u; ++c) {
    const auto code = static_cast<std::uint16_t>(c);
    const auto h = float16::from_bits(code);
    const float value = static_cast<float>(h);
    const int field = (code >> 10) & 0x1F;
    const int mantissa = code & 0x3FF;
    INFO("code 0x" << std::hex << c);
    CHECK(std::signbit(value) == ((code & 0x8000) != 0));
    CHECK(h.signbit() == ((code & 0x8000) != 0));
    if (field == 0x1F) {
      CHECK(h.is_nan() == (mantissa != 0));
      CHECK(h.is_inf() == (mantissa == 0));
      // Inf, or a NaN whose payload is carried into the float's upper mantissa bits.
      REQUIRE(float_bits(value) ==
              (((c & 0x8000u) << 16) | 0x7F800000u | (static_cast<std::uint32_t>(mantissa) << 13)));
    } else {
      CHECK_FALSE(h.is_nan());
      CHECK_FALSE(h.is_inf());
      REQUIRE(static_cast<double>(value) == float16_reference(code));
      REQUIRE(static_cast<double>(h) == float16_reference(code));
    }
  }
}

TEST_CASE("every bfloat16 code decodes to its value", "[half]") {
  for (std::uint32_t c = 0; c < 0x10000u; ++c) {
    const auto code = static_cast<std::uint16_t>(c);
    const auto b = bfloat16::from_bits(code);
    const float value = static_cast<float>(b);
    const int field = (code >> 7) & 0xFF;
    const int mantissa = code & 0x7F;
    INFO("code 0x" << std::hex << c);
    CHECK(std::signbit(value) == ((code & 0x8000) != 0));
    CHECK(b.signbit() == ((code & 0x8000) != 0));
    if (field == 0xFF) {
      CHECK(b.is_nan() == (mantissa != 0));
      CHECK(b.is_inf() == (mantissa == 0));
      REQUIRE(float_bits(value) == c << 16);
    } else {
      CHECK_FALSE(b.is_nan());
      CHECK_FALSE(b.is_inf());
      REQUIRE(static_cast<double>(value) == bfloat16_reference(code));
      REQUIRE(static_cast<double>(b) == bfloat16_reference(code));
    }
  }
}

TEST_CASE("narrowing inverts widening", "[half]") {
  SECTION("float16") {
    for (std::uint32_t c = 0; c < 0x10000u; ++c) {
      const auto h = float16::from_bits(static_cast<std::uint16_t>(c));
      INFO("code 0x" << std::hex << c);
      const std::uint16_t expected =
          h.is_nan() ? static_cast<std::uint16_t>(c | 0x0200u) : static_cast<std::uint16_t>(c);
      REQUIRE(float16(static_cast<float>(h)).bits() == expected);
      REQUIRE(float16(static_cast<double>(h)).bits() == expected);
    }
  }
  SECTION("bfloat16") {
    for (std::uint32_t c = 0; c < 0x10000u; ++c) {
      const auto b = bfloat16::from_bits(static_cast<std::uint16_t>(c));
      INFO("code 0x" << std::hex << c);
      const std::uint16_t expected =
          b.is_nan() ? static_cast<std::uint16_t>(c | 0x0040u) : static_cast<std::uint16_t>(c);
      REQUIRE(bfloat16(static_cast<float>(b)).bits() == expected);
      REQUIRE(bfloat16(static_cast<double>(b)).bits() == expected);
    }
  }
}

TEST_CASE("bfloat16 rounds to nearest, ties to even", "[half]") {
  // Around 1 the bfloat16 spacing is 2^-7, so 1 + 2^-8 is the midpoint of 1 (even) and 1 + 2^-7
  // (odd), and 1 + 3*2^-8 the midpoint of 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  CHECK(bfloat16(1.0f + 0x1p-8f).bits() == 0x3F80);
  CHECK(bfloat16(1.0f + 3 * 0x1p-8f).bits() == 0x3F82);
  CHECK(static_cast<float>(bfloat16(1.0f + 3 * 0x1p-8f)) == 1.0f + 0x1p-6f);
  CHECK(bfloat16(std::nextafter(1.0f + 0x1p-8f, 2.0f)).bits() == 0x3F81);
  CHECK(bfloat16(std::nextafter(1.0f + 3 * 0x1p-8f, 0.0f)).bits() == 0x3F81);
  CHECK(bfloat16(-(1.0f + 0x1p-8f)).bits() == 0xBF80);
  CHECK(bfloat16(-(1.0f + 3 * 0x1p-8f)).bits() == 0xBF82);
  // A carry out of the mantissa moves to the next binade: 2 - 2^-9 lies above the midpoint of
  // 2 - 2^-7 (odd) and 2, and 2 - 2^-8 is that midpoint.
  CHECK(bfloat16(2.0f - 0x1p-8f).bits() == 0x4000);
  CHECK(bfloat16(2.0f - 0x1p-9f).bits() == 0x4000);
  // Float subnormals: 0x8000 in the dropped half is a tie.
  CHECK(bfloat16(float_from_bits(0x00008000u)).bits() == 0x0000);
  CHECK(bfloat16(float_from_bits(0x00018000u)).bits() == 0x0002);
  CHECK(bfloat16(float_from_bits(0x00008001u)).bits() == 0x0001);
  CHECK(bfloat16(-0.0f).bits() == 0x8000);
}

TEST_CASE("float16 rounds to nearest, ties to even", "[half]") {
  // Around 1 the float16 spacing is 2^-10.
  CHECK(float16(1.0f + 0x1p-11f).bits() == 0x3C00);
  CHECK(float16(1.0f + 3 * 0x1p-11f).bits() == 0x3C02);
  CHECK(float16(std::nextafter(1.0f + 0x1p-11f, 2.0f)).bits() == 0x3C01);
  CHECK(float16(-(1.0f + 3 * 0x1p-11f)).bits() == 0xBC02);
  // Subnormals: the smallest is 2^-24; 2^-25 ties to 0, 3*2^-25 to 2*2^-24.
  CHECK(float16(0x1p-25f).bits() == 0x0000);
  CHECK(float16(-0x1p-25f).bits() == 0x8000);
  CHECK(float16(std::nextafter(0x1p-25f, 1.0f)).bits() == 0x0001);
  CHECK(float16(3 * 0x1p-25f).bits() == 0x0002);
  CHECK(float16(5 * 0x1p-25f).bits() == 0x0002);
  CHECK(float16(0x1p-149f).bits() == 0x0000);
  // 2^-14 - 2^-25 is the midpoint of the largest subnormal 1023*2^-24 (odd) and 2^-14.
  CHECK(float16(0x1p-14f - 0x1p-25f).bits() == 0x0400);
  CHECK(float16(std::nextafter(0x1p-14f - 0x1p-25f, 0.0f)).bits() == 0x03FF);
  CHECK(float16(0x1p-14f).bits() == 0x0400);
  CHECK(float16(1023 * 0x1p-24f).bits() == 0x03FF);
}

TEST_CASE("overflow gives Inf", "[half]") {
  SECTION("float16") {
    // 65504 is the largest finite float16; 65520 the midpoint to 2^16 (odd mantissa, so it ties
    // up).
    CHECK(float16(65504.0f).bits() == 0x7BFF);
    CHECK(float16(std::nextafter(65520.0f, 0.0f)).bits() == 0x7BFF);
    CHECK(float16(65520.0f).bits() == 0x7C00);
    CHECK(float16(-65520.0f).bits() == 0xFC00);
    CHECK(float16(1e10f).bits() == 0x7C00);
    CHECK(float16(std::numeric_limits<float>::max()).bits() == 0x7C00);
    CHECK(float16(inf).bits() == 0x7C00);
    CHECK(float16(-inf).bits() == 0xFC00);
    CHECK(float16(1e300).bits() == 0x7C00);
    CHECK(float16(-1e300).bits() == 0xFC00);
  }
  SECTION("bfloat16") {
    // The largest finite bfloat16 is 0x7F7F = (2 - 2^-7) * 2^127; 0x7F7F8000 the midpoint to 2^128.
    CHECK(bfloat16(float_from_bits(0x7F7F7FFFu)).bits() == 0x7F7F);
    CHECK(bfloat16(float_from_bits(0x7F7F8000u)).bits() == 0x7F80);
    CHECK(bfloat16(std::numeric_limits<float>::max()).bits() == 0x7F80);
    CHECK(bfloat16(-std::numeric_limits<float>::max()).bits() == 0xFF80);
    CHECK(bfloat16(inf).bits() == 0x7F80);
    CHECK(bfloat16(-inf).bits() == 0xFF80);
    CHECK(bfloat16(1e300).bits() == 0x7F80);
    CHECK(bfloat16(-1e300).bits() == 0xFF80);
  }
}

TEST_CASE("NaN stays a quiet NaN with its sign", "[half]") {
  const std::uint32_t nans[] = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u,
                                0x7FFFFFFFu, 0xFFFFFFFFu, 0x7FA00000u, 0x7F802000u};
  for (std::uint32_t u : nans) {
    const float x = float_from_bits(u);
    INFO("x = 0x" << std::hex << u);
    const float16 h(x);
    const bfloat16 b(x);
    CHECK(h.is_nan());
    CHECK(b.is_nan());
    CHECK(h.signbit() == ((u >> 31) != 0));
    CHECK(b.signbit() == ((u >> 31) != 0));
    CHECK((h.bits() & 0x0200u) != 0); // quiet bit
    CHECK((b.bits() & 0x0040u) != 0);
    CHECK(h.bits() == expected_float16_nan(x));
    CHECK(b.bits() == expected_bfloat16_nan(x));
    CHECK(std::isnan(static_cast<float>(h)));
    CHECK(std::isnan(static_cast<float>(b)));
  }
  CHECK(float16(std::numeric_limits<double>::quiet_NaN()).is_nan());
  CHECK(bfloat16(-std::numeric_limits<double>::quiet_NaN()).signbit());
}

TEST_CASE("doubles are rounded once, not through float", "[half]") {
  // Rounding 1 + 2^-11 + 2^-40 to float gives the tie 1 + 2^-11, which would then go to 1.
  CHECK(float16(1.0 + 0x1p-11 + 0x1p-40).bits() == 0x3C01);
  CHECK(float16(1.0 + 0x1p-11 - 0x1p-40).bits() == 0x3C00);
  CHECK(float16(1.0 + 3 * 0x1p-11 - 0x1p-40).bits() == 0x3C01);
  CHECK(float16(-(1.0 + 3 * 0x1p-11 - 0x1p-40)).bits() == 0xBC01);
  CHECK(bfloat16(1.0 + 0x1p-8 + 0x1p-40).bits() == 0x3F81);
  CHECK(bfloat16(1.0 + 3 * 0x1p-8 - 0x1p-40).bits() == 0x3F81);
  CHECK(float16(0x1p-25 + 0x1p-70).bits() == 0x0001);
  CHECK(float16(1e-300).bits() == 0x0000);
  CHECK(float16(-1e-300).bits() == 0x8000);
  CHECK(bfloat16(1e-300).bits() == 0x0000);
  CHECK(bfloat16(-1e-300).bits() == 0x8000);
  CHECK(float16(65520.0 - 0x1p-30).bits() == 0x7BFF);
  CHECK(float16(65520.0).bits() == 0x7C00);
  // bfloat16 subnormals are float subnormals: 2.5 * 2^-133 (a tie) plus a little rounds up to 3.
  CHECK(bfloat16(2.5 * 0x1p-133 + 0x1p-180).bits() == 0x0003);
  CHECK(bfloat16(2.5 * 0x1p-133).bits() == 0x0002);
}

namespace {
// Checks that `code` is a correctly rounded (nearest, ties to even) encoding of the finite double
// `x` among the finite codes of its sign, given the exact value of each code; beyond the largest
// finite value the answer must be Inf exactly when |x| reaches the midpoint to the next power.
template <class Decode>
bool is_nearest_even(double x, std::uint16_t code, std::uint16_t max_finite, double overflow_at,
                     Decode value_of) {
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double magnitude = std::fabs(x);
  if (magnitude >= overflow_at)
    return code == (sign | (max_finite + 1));
  const std::uint16_t m = code & 0x7FFF;
  if ((code & 0x8000) != sign || m > max_finite)
    return false;
  const double error = std::fabs(magnitude - value_of(m));
  for (int d : {-1, 1}) {
    const int neighbour = m + d;
    if (neighbour < 0 || neighbour > max_finite)
      continue;
    const double other = std::fabs(magnitude - value_of(static_cast<std::uint16_t>(neighbour)));
    if (other < error || (other == error && (m & 1) != 0))
      return false;
  }
  return true;
}
} // namespace

TEST_CASE("random doubles round correctly", "[half]") {
  std::uint64_t state = 12345;
  const auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 11; // 53 random bits
  };
  for (int i = 0; i < 200000; ++i) {
    // Random significand, exponent spread over float16's range and a little beyond.
    const double significand = 1.0 + static_cast<double>(next()) * 0x1p-53;
    const int exponent = static_cast<int>(next() % 48) - 30;
    const double x = ((i & 1) ? -1.0 : 1.0) * std::ldexp(significand, exponent);
    INFO("x = " << x);
    REQUIRE(is_nearest_even(x, float16(x).bits(), 0x7BFF, 65520.0, float16_reference));
  }
  for (int i = 0; i < 200000; ++i) {
    const double significand = 1.0 + static_cast<double>(next()) * 0x1p-53;
    const int exponent = static_cast<int>(next() % 290) - 150; // bfloat16 subnormals to overflow
    const double x = ((i & 1) ? -1.0 : 1.0) * std::ldexp(significand, exponent);
    INFO("x = " << x);
    REQUIRE(is_nearest_even(x, bfloat16(x).bits(), 0x7F7F, 0x1p128 - 0x1p119, bfloat16_reference));
  }
}

#if BLOCKSCALE_HAVE_CUDA_HEADERS
namespace {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The floats the CUDA comparison checks: special values, the neighbourhood of every rounding
// boundary of both formats, and random bit patterns.
std::vector<float> sampled_floats() {
  std::vector<float> xs;
  auto add_around = [&xs](float x, int radius) {
    const std::uint32_t u = float_bits(x);
    for (int d = -radius; d <= radius; ++d)
      xs.push_back(float_from_bits(u + static_cast<std::uint32_t>(d)));
  };
  const std::uint32_t specials[] = {0x00000000u, 0x00000001u, 0x007FFFFFu, 0x00800000u,
                                    0x7F7FFFFFu, 0x7F800000u, 0x7F800001u, 0x7FBFFFFFu,
                                    0x7FC00000u, 0x7FFFFFFFu, 0x3F800000u, 0x477FF000u,
                                    0x477FE000u, 0x33000000u, 0x38800000u, 0x38000000u};
  for (std::uint32_t u : specials) {
    add_around(float_from_bits(u), 2);
    add_around(float_from_bits(u | 0x80000000u), 2);
  }
  // Every midpoint between neighbouring finite values (and to 2^16 / 2^128 past the largest),
  // both signs, with four floats on each side.
  for (std::uint32_t c = 0; c < 0x7C00u; ++c) {
    const double low = float16_reference(static_cast<std::uint16_t>(c));
    const double high =
        c + 1 == 0x7C00u ? 65536.0 : float16_reference(static_cast<std::uint16_t>(c + 1));
    const auto mid = static_cast<float>((low + high) / 2); // exact: 12 significant bits
    add_around(mid, 4);
    add_around(-mid, 4);
  }
  for (std::uint32_t c = 0; c < 0x7F80u; ++c) {
    const float mid = float_from_bits((c << 16) | 0x8000u); // halfway to the next code, exactly
    add_around(mid, 4);
    add_around(-mid, 4);
  }
  std::uint64_t state = 20240601;
  for (int i = 0; i < 3000000; ++i) {
    const std::uint64_t r = splitmix64(state);
    xs.push_back(float_from_bits(static_cast<std::uint32_t>(r)));
    // Also random values inside float16's range, where most of its boundaries are.
    const auto in_range = 0x33000000u + static_cast<std::uint32_t>((r >> 32) % 0x14800000u);
    xs.push_back(float_from_bits(in_range | static_cast<std::uint32_t>(r & 0x80000000u)));
  }
  return xs;
}

} // namespace

TEST_CASE("agreement with CUDA's host converters", "[half][cuda]") {
  const std::vector<float> xs = sampled_floats();
  INFO(xs.size() << " sampled floats");
  REQUIRE(xs.size() > 6000000);
  std::size_t float16_mismatches = 0, bfloat16_mismatches = 0, nans = 0;
  for (float x : xs) {
    const __half_raw cuda_h = static_cast<__half_raw>(__float2half_rn(x));
    const __nv_bfloat16_raw cuda_b = static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(x));
    const std::uint16_t ours_h = float16(x).bits();
    const std::uint16_t ours_b = bfloat16(x).bits();
    if (std::isnan(x)) {
      // The deliberate difference: CUDA returns the canonical NaN 0x7FFF, we keep sign and payload.
      ++nans;
      if (cuda_h.x != 0x7FFF || ours_h != expected_float16_nan(x))
        ++float16_mismatches;
      if (cuda_b.x != 0x7FFF || ours_b != expected_bfloat16_nan(x))
        ++bfloat16_mismatches;
      continue;
    }
    if (ours_h != cuda_h.x) {
      if (++float16_mismatches <= 10)
        UNSCOPED_INFO("float16 x = 0x" << std::hex << float_bits(x) << " ours 0x" << ours_h
                                       << " CUDA 0x" << cuda_h.x);
    }
    if (ours_b != cuda_b.x) {
      if (++bfloat16_mismatches <= 10)
        UNSCOPED_INFO("bfloat16 x = 0x" << std::hex << float_bits(x) << " ours 0x" << ours_b
                                        << " CUDA 0x" << cuda_b.x);
    }
  }
  CHECK(nans > 0);
  CHECK(float16_mismatches == 0);
  CHECK(bfloat16_mismatches == 0);
}

TEST_CASE("widening agrees with CUDA's host converters", "[half][cuda]") {
  for (std::uint32_t c = 0; c < 0x10000u; ++c) {
    INFO("code 0x" << std::hex << c);
    __half_raw hr;
    hr.x = static_cast<unsigned short>(c);
    __nv_bfloat16_raw br;
    br.x = static_cast<unsigned short>(c);
    const float cuda_h = __half2float(__half(hr));
    const float cuda_b = __bfloat162float(__nv_bfloat16(br));
    const auto h = float16::from_bits(static_cast<std::uint16_t>(c));
    const auto b = bfloat16::from_bits(static_cast<std::uint16_t>(c));
    // CUDA's host __half2float returns the canonical NaN; ours keeps sign and payload.
    if (h.is_nan()) {
      REQUIRE(std::isnan(cuda_h));
    } else {
      REQUIRE(float_bits(static_cast<float>(h)) == float_bits(cuda_h));
    }
    if (b.is_nan()) {
      REQUIRE(std::isnan(cuda_b));
    } else {
      REQUIRE(float_bits(static_cast<float>(b)) == float_bits(cuda_b));
    }
  }
}

TEST_CASE("bits round-trip through CUDA's types", "[half][cuda]") {
  for (std::uint32_t c = 0; c < 0x10000u; c += 7) {
    const auto h = float16::from_bits(static_cast<std::uint16_t>(c));
    const auto b = bfloat16::from_bits(static_cast<std::uint16_t>(c));
    const auto cuda_h = static_cast<__half>(h);
    const auto cuda_b = static_cast<__nv_bfloat16>(b);
    REQUIRE(static_cast<__half_raw>(cuda_h).x == c);
    REQUIRE(static_cast<__nv_bfloat16_raw>(cuda_b).x == c);
    REQUIRE(float16(cuda_h).bits() == c);
    REQUIRE(bfloat16(cuda_b).bits() == c);
  }
}
#endif
