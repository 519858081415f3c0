// Decoding, round trips and properties of every format, against values from first principles
// and the anchors' published tables (OCP MX v1.0, OCP OFP8, CUDA's cuda_fp8.h / cuda_fp4.h).
#include <blockscale/blockscale.hpp>

#include <cmath>
#include <cstdint>
#include <limits>

#include "catch.hpp"

using namespace blockscale;

namespace {

// The value of a code read straight from the field layout, in double, with no library code.
template <class Format>
double first_principles_value(unsigned code) {
  const int m = Format::mantissa_bits;
  const int e = Format::exponent_bits;
  const bool negative = Format::is_signed && ((code >> (e + m)) & 1u) != 0;
  const int exponent_field = static_cast<int>((code >> m) & ((1u << e) - 1));
  const int mantissa = static_cast<int>(code & ((1u << m) - 1));
  const int all_ones = (1 << e) - 1;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (Format::nonfinite == nonfinite_encoding::nan_only && exponent_field == all_ones &&
      mantissa == (1 << m) - 1)
    return nan;
  if (Format::nonfinite == nonfinite_encoding::ieee && exponent_field == all_ones)
    return mantissa != 0 ? nan : (negative ? -1.0 : 1.0) * std::numeric_limits<double>::infinity();
  const double magnitude = (exponent_field == 0 && Format::has_subnormals)
                               ? std::ldexp(mantissa, 1 - Format::bias - m)
                               : std::ldexp((1 << m) + mantissa, exponent_field - Format::bias - m);
  return negative ? -magnitude : magnitude;
}

template <class T>
unsigned code_count() {
  return 1u << format_traits<typename T::format>::total_bits;
}

} // namespace

TEMPLATE_LIST_TEST_CASE("every code decodes to its first-principles value", "[format]",
                        scalar_formats) {
  using format = typename TestType::format;
  for (unsigned code = 0; code < code_count<TestType>(); ++code) {
    INFO("code " << code);
    const double expected = first_principles_value<format>(code);
    const float got = static_cast<float>(TestType::from_bits(static_cast<std::uint8_t>(code)));
    if (std::isnan(expected)) {
      CHECK(std::isnan(got));
      CHECK(TestType::from_bits(static_cast<std::uint8_t>(code)).is_nan());
    } else {
      CHECK(static_cast<double>(got) == expected);
      CHECK(std::signbit(got) == std::signbit(expected));
    }
  }
}

TEMPLATE_LIST_TEST_CASE("every non-NaN code survives encode(decode(code)) in every mode",
                        "[format]", scalar_formats) {
  for (unsigned code = 0; code < code_count<TestType>(); ++code) {
    const auto value = TestType::from_bits(static_cast<std::uint8_t>(code));
    if (value.is_nan())
      continue;
    INFO("code " << code);
    const auto x = static_cast<float>(value);
    if (value.is_inf()) {
      // Infinity survives only where overflow is allowed to produce it.
      if constexpr (format_traits<typename TestType::format>::has_infinity)
        CHECK(convert<TestType>(x, round_toward_zero{}, to_nonfinite{}).bits() == code);
      continue;
    }
    CHECK(convert<TestType>(x).bits() == code);
    CHECK(convert<TestType>(static_cast<double>(x)).bits() == code);
    CHECK(convert<TestType>(x, round_nearest_away{}).bits() == code);
    CHECK(convert<TestType>(x, round_toward_zero{}).bits() == code);
    CHECK(convert<TestType>(x, round_up{}).bits() == code);
    CHECK(convert<TestType>(x, round_down{}).bits() == code);
    CHECK(convert<TestType>(x, round_to_odd{}).bits() == code);
    CHECK(convert<TestType>(x, round_stochastic{0xFFFFFFFFu}).bits() == code);
    if constexpr (format_traits<typename TestType::format>::has_nan)
      CHECK(convert<TestType>(x, round_nearest_even{}, to_nonfinite{}).bits() == code);
  }
}

TEST_CASE("value tables match the published ones", "[format]") {
  const float e2m1_values[] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (unsigned code = 0; code < 8; ++code) {
    CHECK(static_cast<float>(e2m1::from_bits(static_cast<std::uint8_t>(code))) ==
          e2m1_values[code]);
    CHECK(static_cast<float>(e2m1::from_bits(static_cast<std::uint8_t>(code | 8))) ==
          -e2m1_values[code]);
  }
  CHECK(std::signbit(static_cast<float>(e2m1::from_bits(0x8))));

  CHECK(static_cast<float>(e4m3::from_bits(0x7E)) == 448.0f);
  CHECK(static_cast<float>(e4m3::from_bits(0x01)) == std::ldexp(1.0f, -9));
  CHECK(static_cast<float>(e4m3::from_bits(0x08)) == std::ldexp(1.0f, -6));
  CHECK(e4m3::from_bits(0x7F).is_nan());
  CHECK(e4m3::from_bits(0xFF).is_nan());

  CHECK(static_cast<float>(e5m2::from_bits(0x7B)) == 57344.0f);
  CHECK(e5m2::from_bits(0x7C).is_inf());
  CHECK(static_cast<float>(e5m2::from_bits(0xFC)) == -std::numeric_limits<float>::infinity());
  CHECK(static_cast<float>(e5m2::from_bits(0x01)) == std::ldexp(1.0f, -16));

  CHECK(static_cast<float>(ue4m3::from_bits(0x7E)) == 448.0f);
  CHECK(ue4m3::from_bits(0x7F).is_nan());
  CHECK(format_traits<ue4m3_format>::total_bits == 7);

  CHECK(static_cast<float>(ue5m3::from_bits(0xFE)) == 114688.0f);
  CHECK(static_cast<float>(ue5m3::from_bits(0xF8)) == 65536.0f);
  CHECK(static_cast<float>(ue5m3::from_bits(0x08)) == std::ldexp(1.0f, -14));
  CHECK(static_cast<float>(ue5m3::from_bits(0x01)) == std::ldexp(1.0f, -17));
  CHECK(ue5m3::from_bits(0xFF).is_nan());

  CHECK(static_cast<float>(ue5m3_ieee::from_bits(0xF7)) == 61440.0f);
  CHECK(ue5m3_ieee::from_bits(0xF8).is_inf());
  for (unsigned code = 0xF9; code <= 0xFF; ++code)
    CHECK(ue5m3_ieee::from_bits(static_cast<std::uint8_t>(code)).is_nan());

  CHECK(static_cast<float>(ue8m0::from_bits(0x00)) == std::ldexp(1.0f, -127));
  CHECK(static_cast<float>(ue8m0::from_bits(0x7F)) == 1.0f);
  CHECK(static_cast<float>(ue8m0::from_bits(0xFE)) == std::ldexp(1.0f, 127));
  CHECK(ue8m0::from_bits(0xFF).is_nan());

  CHECK(static_cast<float>(std::numeric_limits<e2m3>::max()) == 7.5f);
  CHECK(static_cast<float>(std::numeric_limits<e3m2>::max()) == 28.0f);
  CHECK(static_cast<float>(std::numeric_limits<e2m3>::denorm_min()) == 0.125f);
  CHECK(static_cast<float>(std::numeric_limits<e3m2>::denorm_min()) == 0.0625f);
}

TEST_CASE("derived properties", "[format]") {
  using t = format_traits<ue5m3_format>;
  STATIC_REQUIRE(t::max_code == 0xFE);
  STATIC_REQUIRE(t::nan_code == 0xFF);
  STATIC_REQUIRE(t::min_exponent == -14);
  STATIC_REQUIRE(t::max_exponent == 16);
  STATIC_REQUIRE(format_traits<e2m1_format>::code_count == 16);
  STATIC_REQUIRE(format_traits<e2m1_format>::sign_mask == 0x8);
  STATIC_REQUIRE(!format_traits<e2m1_format>::has_nan);
  STATIC_REQUIRE(format_traits<ue5m3_ieee_format>::max_code == 0xF7);
  STATIC_REQUIRE(format_traits<ue5m3_ieee_format>::infinity_code == 0xF8);
  STATIC_REQUIRE(format_traits<ue8m0_format>::min_exponent == -127);
  STATIC_REQUIRE(!format_traits<ue8m0_format>::has_zero);
  // UE5M3's range is about twice UE4M3's in binades (docs/formats.md): 34.8 against 17.8.
  const double ue5m3_binades = std::log2(114688.0 / std::ldexp(1.0, -17));
  const double ue4m3_binades = std::log2(448.0 / std::ldexp(1.0, -9));
  CHECK(ue5m3_binades == Approx(33.8).margin(0.1));
  CHECK(ue4m3_binades == Approx(17.8).margin(0.1));
}

TEST_CASE("numeric_limits", "[format]") {
  using limits = std::numeric_limits<e4m3>;
  STATIC_REQUIRE(limits::is_specialized);
  STATIC_REQUIRE(limits::digits == 4);
  STATIC_REQUIRE(limits::has_quiet_NaN);
  STATIC_REQUIRE(!limits::has_infinity);
  CHECK(static_cast<float>(limits::max()) == 448.0f);
  CHECK(static_cast<float>(limits::lowest()) == -448.0f);
  CHECK(static_cast<float>(limits::min()) == std::ldexp(1.0f, -6));
  CHECK(static_cast<float>(limits::denorm_min()) == std::ldexp(1.0f, -9));
  CHECK(static_cast<float>(limits::epsilon()) == 0.125f);
  CHECK(static_cast<float>(limits::round_error()) == 0.5f);
  CHECK(limits::quiet_NaN().is_nan());
  // C's convention: min() == 2^(min_exponent - 1), max() < 2^max_exponent.
  CHECK(static_cast<float>(limits::min()) == std::ldexp(1.0f, limits::min_exponent - 1));
  CHECK(static_cast<float>(limits::max()) < std::ldexp(1.0f, limits::max_exponent));

  CHECK(static_cast<float>(std::numeric_limits<e2m1>::epsilon()) == 0.5f);
  CHECK(static_cast<float>(std::numeric_limits<e2m1>::min()) == 1.0f);
  CHECK(static_cast<float>(std::numeric_limits<ue8m0>::epsilon()) == 1.0f);
  CHECK(static_cast<float>(std::numeric_limits<ue8m0>::lowest()) == std::ldexp(1.0f, -127));
  CHECK(static_cast<float>(std::numeric_limits<ue8m0>::min()) == std::ldexp(1.0f, -127));
  CHECK(static_cast<float>(std::numeric_limits<ue5m3>::lowest()) == 0.0f);
  CHECK(static_cast<float>(std::numeric_limits<e5m2>::infinity()) ==
        std::numeric_limits<float>::infinity());
  STATIC_REQUIRE(std::numeric_limits<ue8m0>::has_denorm == std::denorm_absent);
}

TEST_CASE("special inputs", "[format]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  SECTION("NaN gives the canonical NaN, or +max without one") {
    CHECK(convert<e2m1>(nan).bits() == 0x7);
    CHECK(convert<e2m1>(-nan).bits() == 0x7);
    CHECK(convert<e4m3>(-nan).bits() == 0x7F);
    CHECK(convert<e5m2>(nan).bits() == 0x7F);
    CHECK(convert<ue5m3>(nan).bits() == 0xFF);
    CHECK(convert<ue5m3_ieee>(nan).bits() == 0xFF);
    CHECK(convert<ue8m0>(-nan).bits() == 0xFF);
    CHECK(convert<e2m3>(nan).bits() == 0x1F);
  }
  SECTION("Inf saturates, or stays non-finite under to_nonfinite") {
    CHECK(convert<e2m1>(-inf).bits() == 0xF);
    CHECK(convert<e4m3>(inf).bits() == 0x7E);
    CHECK(convert<e4m3>(-inf, round_nearest_even{}, to_nonfinite{}).bits() == 0xFF);
    CHECK(convert<e5m2>(-inf, round_toward_zero{}, to_nonfinite{}).bits() == 0xFC);
    CHECK(convert<ue5m3_ieee>(inf, round_nearest_even{}, to_nonfinite{}).bits() == 0xF8);
    CHECK(convert<ue5m3>(inf, round_nearest_even{}, to_nonfinite{}).bits() == 0xFF);
  }
  SECTION("negative input to an unsigned format gives its smallest code") {
    for (float x : {-0.0f, -1e-30f, -1.0f, -1e30f, -inf}) {
      CHECK(convert<ue4m3>(x).bits() == 0);
      CHECK(convert<ue5m3>(x, round_up{}).bits() == 0);
      CHECK(convert<ue5m3>(x, round_down{}, to_nonfinite{}).bits() == 0);
      CHECK(convert<ue8m0>(x, round_up{}).bits() == 0);
    }
  }
  SECTION("signed zeros") {
    CHECK(convert<e2m1>(-0.0f).bits() == 0x8);
    CHECK(convert<e4m3>(-1e-30f).bits() == 0x80);
    CHECK(convert<e4m3>(-1e-30f, round_down{}).bits() == 0x81);
    CHECK(convert<e4m3>(1e-30f, round_up{}).bits() == 0x01);
  }
}

TEST_CASE("comparisons follow IEEE 754", "[format]") {
  CHECK(e2m1::from_bits(0x0) == e2m1::from_bits(0x8));
  CHECK(e4m3::from_bits(0x7F) != e4m3::from_bits(0x7F));
  CHECK_FALSE(e4m3::from_bits(0x7F) < e4m3(1.0f));
  CHECK_FALSE(e4m3::from_bits(0x7F) >= e4m3(1.0f));
  CHECK(e2m1(-6.0f) < e2m1(-4.0f));
  CHECK(e2m1(3.0f) > e2m1(2.0f));
  CHECK(e2m1(3.0f) <= e2m1(3.0f));
  for (unsigned code = 0; code + 1 < 0x7F; ++code)
    CHECK(ue5m3::from_bits(static_cast<std::uint8_t>(code)) <
          ue5m3::from_bits(static_cast<std::uint8_t>(code + 1)));
}

TEST_CASE("from_bits ignores bits above the format's width", "[format]") {
  CHECK(e2m1::from_bits(0xF3).bits() == 0x3);
  CHECK(ue4m3::from_bits(0xFE).bits() == 0x7E);
  CHECK(ue5m3::from_bits(0xFE).bits() == 0xFE);
}

TEST_CASE("decoding and encoding are constant expressions", "[format]") {
  constexpr float six = static_cast<float>(e2m1::from_bits(0x7));
  STATIC_REQUIRE(six == 6.0f);
  constexpr float max_ue5m3 = static_cast<float>(std::numeric_limits<ue5m3>::max());
  STATIC_REQUIRE(max_ue5m3 == 114688.0f);
#if BLOCKSCALE_HAS_BUILTIN_BIT_CAST
  constexpr e2m1 three(2.6f);
  STATIC_REQUIRE(three.bits() == 0x5);
  STATIC_REQUIRE(convert<ue8m0>(5.0f, round_up{}).bits() == 130);
#endif
}

TEST_CASE("numeric_limits' decimal members are computed, as C defines them for float",
          "[format][limits]") {
  // The same computation applied to float's parameters gives float's own constants.
  constexpr auto f = detail::make_decimal_limits(24, 0x1p-126, 0x1.fffffep127);
  STATIC_REQUIRE(f.digits10 == std::numeric_limits<float>::digits10);
  STATIC_REQUIRE(f.max_digits10 == std::numeric_limits<float>::max_digits10);
  STATIC_REQUIRE(f.min_exponent10 == std::numeric_limits<float>::min_exponent10);
  STATIC_REQUIRE(f.max_exponent10 == std::numeric_limits<float>::max_exponent10);
  constexpr auto d = detail::make_decimal_limits(53, 0x1p-1022, 0x1.fffffffffffffp1023);
  STATIC_REQUIRE(d.digits10 == std::numeric_limits<double>::digits10);
  STATIC_REQUIRE(d.max_digits10 == std::numeric_limits<double>::max_digits10);
  STATIC_REQUIRE(d.min_exponent10 == std::numeric_limits<double>::min_exponent10);
  STATIC_REQUIRE(d.max_exponent10 == std::numeric_limits<double>::max_exponent10);
  // The small formats, by hand: E4M3 (4 digits, 2^-6 .. 448), E2M1 (2 digits, 1 .. 6), UE5M3
  // (2^-14 .. 114688), UE8M0 (1 digit, 2^-127 .. 2^127).
  using L4 = std::numeric_limits<e4m3>;
  STATIC_REQUIRE((L4::digits10 == 0 && L4::max_digits10 == 3 && L4::min_exponent10 == -1 &&
                  L4::max_exponent10 == 2));
  using L2 = std::numeric_limits<e2m1>;
  STATIC_REQUIRE((L2::digits10 == 0 && L2::max_digits10 == 2 && L2::min_exponent10 == 0 &&
                  L2::max_exponent10 == 0));
  using L5 = std::numeric_limits<ue5m3>;
  STATIC_REQUIRE((L5::digits10 == 0 && L5::max_digits10 == 3 && L5::min_exponent10 == -4 &&
                  L5::max_exponent10 == 5));
  using L8 = std::numeric_limits<ue8m0>;
  STATIC_REQUIRE((L8::digits10 == 0 && L8::max_digits10 == 2 && L8::min_exponent10 == -38 &&
                  L8::max_exponent10 == 38));
}
