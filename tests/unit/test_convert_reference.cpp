// blockscale::convert against the independent reference of tests/exhaustive/reference.hpp, on
// sampled inputs: the special values, every float within a few ulps of every format value and of
// every midpoint (and quarter point) between neighbours, random bit patterns and random values in
// the format's range from a fixed seed; for every format, rounding mode and overflow policy. Also
// double inputs that no float can represent, and the exact stochastic-rounding threshold.
// tests/exhaustive/ runs the same comparison over all 2^32 floats.
#include <blockscale/contract/registry.hpp>
#include <blockscale/numeric/convert.hpp>
#include <blockscale/numeric/format.hpp>
#include <blockscale/numeric/minifloat.hpp>
#include <blockscale/numeric/rounding.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../exhaustive/reference.hpp"
#include "catch.hpp"

namespace {

namespace bs = blockscale;
using blockscale_test::float_from_bits;
using blockscale_test::mix32;
using blockscale_test::ref_mode;
using blockscale_test::ref_overflow;
using blockscale_test::reference_convert;
using blockscale_test::reference_table;

constexpr float inf = std::numeric_limits<float>::infinity();

template <class Format>
constexpr bool allows_nonfinite = Format::nonfinite != bs::nonfinite_encoding::none;

// The library's answer for one (mode, overflow) combination; `From` is float or double.
template <class Format, class From, class Overflow>
std::uint8_t library_code(From x, ref_mode mode, Overflow of, std::uint32_t sr) {
  using T = bs::minifloat<Format>;
  switch (mode) {
  case ref_mode::nearest_even:
    return bs::convert<T>(x, bs::round_nearest_even{}, of).bits();
  case ref_mode::nearest_away:
    return bs::convert<T>(x, bs::round_nearest_away{}, of).bits();
  case ref_mode::toward_zero:
    return bs::convert<T>(x, bs::round_toward_zero{}, of).bits();
  case ref_mode::up:
    return bs::convert<T>(x, bs::round_up{}, of).bits();
  case ref_mode::down:
    return bs::convert<T>(x, bs::round_down{}, of).bits();
  case ref_mode::to_odd:
    return bs::convert<T>(x, bs::round_to_odd{}, of).bits();
  case ref_mode::stochastic:
    return bs::convert<T>(x, bs::round_stochastic{sr}, of).bits();
  }
  return 0xEE;
}

template <class Format, class From>
std::uint8_t library_code(From x, ref_mode mode, ref_overflow overflow, std::uint32_t sr) {
  if (overflow == ref_overflow::saturate)
    return library_code<Format>(x, mode, bs::saturate_finite{}, sr);
  if constexpr (allows_nonfinite<Format>) {
    return library_code<Format>(x, mode, bs::to_nonfinite{}, sr);
  } else {
    return 0xEE; // not reached: callers skip to_nonfinite for these formats
  }
}

// Mismatch bookkeeping: counts per (mode, overflow), the first few described.
struct tally {
  std::uint64_t checks = 0;
  std::uint64_t mismatches = 0;
  std::vector<std::string> first;

  void compare(double x, const char* kind, ref_mode mode, ref_overflow overflow, std::uint32_t sr,
               unsigned expected, unsigned got) {
    ++checks;
    if (expected == got)
      return;
    ++mismatches;
    if (first.size() < 10) {
      std::ostringstream out;
      out.precision(17);
      out << kind << " x = " << x << " (float bits 0x" << std::hex
          << blockscale_test::bits_from_float(static_cast<float>(x)) << ") "
          << blockscale_test::ref_mode_name(mode) << " sr=0x" << sr << " "
          << blockscale_test::ref_overflow_name(overflow) << ": expected 0x" << expected
          << " got 0x" << got;
      first.push_back(out.str());
    }
  }
};

// Sampled float inputs for one format.
template <class Format>
std::vector<float> float_samples() {
  const auto& table = reference_table<Format>();
  std::vector<float> out;
  auto around = [&](float v, int ulps) {
    if (!(std::fabs(v) < inf))
      return;
    float lo = v, hi = v;
    out.push_back(v);
    for (int k = 0; k < ulps; ++k) {
      lo = std::nextafter(lo, -inf);
      hi = std::nextafter(hi, inf);
      out.push_back(lo);
      out.push_back(hi);
    }
  };
  // Values, midpoints and quarter points, including past the largest value (overflow threshold).
  const auto& entries = table.entries();
  for (std::size_t i = 0; i + 1 < entries.size(); ++i) {
    const double lo = entries[i].value;
    around(static_cast<float>(lo), 4);
    if (i + 2 < entries.size()) {
      const double hi = entries[i + 1].value;
      for (double q : {0.25, 0.5, 0.75})
        around(static_cast<float>(lo + q * (hi - lo)), 4);
    }
  }
  const double top = table.overflow_threshold();
  for (double v : {top, top * 1.25, top * 1.5, top * 2, top * 3, top * 4})
    if (v < 3.4e38)
      around(static_cast<float>(v), 3);
  // Tiny values around the smallest one: the first interval's sticky / fraction limits.
  for (int e = -149; e <= -100; ++e)
    around(std::ldexp(1.0f, e), 1);
  for (int e = -40; e <= 0; ++e)
    around(static_cast<float>(std::ldexp(table.entries()[1].value, e)), 2);
  // Special values.
  for (float v : {0.0f, std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(),
                  std::numeric_limits<float>::max(), 1.0f, 0.5f, 2.0f})
    around(v, 2);
  out.push_back(inf);
  for (std::uint32_t nan : {0x7FC00000u, 0x7F800001u, 0x7FFFFFFFu, 0x7FA5A5A5u})
    out.push_back(float_from_bits(nan));
  // Random bit patterns (every exponent), and random values spread over the format's range.
  std::mt19937 rng(0xB10C5CA1u);
  for (int i = 0; i < 60000; ++i)
    out.push_back(float_from_bits(static_cast<std::uint32_t>(rng())));
  std::uniform_real_distribution<double> spread(0.0, 1.0);
  const double range = top * 1.2;
  for (int i = 0; i < 60000; ++i) {
    const double r = spread(rng);
    // Half uniform over [0, 1.2 * top), half log-uniform down to the smallest subnormal.
    const double v =
        i % 2 ? r * range
              : range * std::exp2(-r * (std::log2(range / table.entries()[1].value) + 4));
    out.push_back(static_cast<float>(v));
  }
  // Both signs of everything.
  const std::size_t n = out.size();
  for (std::size_t i = 0; i < n; ++i)
    out.push_back(-out[i]);
  return out;
}

template <class Format>
void check_format_against_reference(const char* name) {
  const int overflow_count = allows_nonfinite<Format> ? 2 : 1;
  const std::vector<float> samples = float_samples<Format>();
  tally t;
  const auto& table = reference_table<Format>();
  for (const float x : samples) {
    const std::uint32_t u = blockscale_test::bits_from_float(x);
    for (int o = 0; o < overflow_count; ++o) {
      const auto ov = o == 0 ? ref_overflow::saturate : ref_overflow::nonfinite;
      for (int m = 0; m < blockscale_test::ref_mode_count; ++m) {
        const auto mode = static_cast<ref_mode>(m);
        if (mode != ref_mode::stochastic) {
          t.compare(x, "float", mode, ov, 0, reference_convert<Format>(x, mode, ov),
                    library_code<Format>(x, mode, ov, 0));
          continue;
        }
        // Stochastic: hashed bits, the extremes, and the exact threshold 2^32 - f (and one less),
        // where f is the reference's discarded fraction.
        std::vector<std::uint32_t> bits = {mix32(u ^ 0x5bd1e995u), 0u, 0xFFFFFFFFu, 0x80000000u};
        if (std::isfinite(x)) {
          const double a = std::fabs(static_cast<double>(x));
          const auto p = table.locate(a, table.lookup(a));
          if (!p.exact && p.frac != 0) {
            const std::uint32_t threshold =
                static_cast<std::uint32_t>((std::uint64_t{1} << 32) - p.frac);
            bits.push_back(threshold);
            bits.push_back(threshold - 1);
          }
        }
        for (const std::uint32_t sr : bits)
          t.compare(x, "float", mode, ov, sr, reference_convert<Format>(x, mode, ov, sr),
                    library_code<Format>(x, mode, ov, sr));
      }
    }
  }

  // Double inputs: midpoints and values nudged by less than a float ulp, and doubles outside the
  // float range, all rounded once from the exact double (docs/conversion.md).
  std::vector<double> doubles;
  const auto& entries = table.entries();
  for (std::size_t i = 0; i + 2 < entries.size(); ++i) {
    const double lo = entries[i].value, hi = entries[i + 1].value;
    const double mid = 0.5 * (lo + hi);
    for (double v : {lo, mid, 0.25 * lo + 0.75 * hi})
      for (double eps : {0.0, 0x1p-40, -0x1p-40, 0x1p-52, -0x1p-52})
        doubles.push_back(v + eps * (hi - lo));
  }
  for (double v :
       {1e300, -1e300, 1e-300, -1e-300, 0x1p-1074, 0x1p-140, 0x1p-130, 0x1p200,
        std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
        std::numeric_limits<double>::quiet_NaN(), 0.0, -0.0})
    doubles.push_back(v);
  const std::size_t n = doubles.size();
  for (std::size_t i = 0; i < n; ++i)
    doubles.push_back(-doubles[i]);
  for (const double x : doubles)
    for (int o = 0; o < overflow_count; ++o) {
      const auto ov = o == 0 ? ref_overflow::saturate : ref_overflow::nonfinite;
      for (int m = 0; m < blockscale_test::ref_mode_count; ++m) {
        const auto mode = static_cast<ref_mode>(m);
        for (const std::uint32_t sr : {0x12345678u, 0xFFFFFFFFu, 0x80000000u}) {
          t.compare(x, "double", mode, ov, sr, reference_convert<Format>(x, mode, ov, sr),
                    library_code<Format>(x, mode, ov, sr));
          if (mode != ref_mode::stochastic)
            break;
        }
      }
    }

  INFO(name << ": " << t.checks << " conversions checked, " << t.mismatches << " mismatches");
  std::string first_lines;
  for (const auto& line : t.first)
    first_lines += "\n  " + line;
  INFO("first mismatches:" << first_lines);
  CHECK(t.mismatches == 0);
  CHECK(t.checks > 100000);
}

// The reference's own reading of the descriptor must agree with the library's derived traits and
// decoder (an independent derivation of the same numbers).
template <class Format>
void check_tables_agree(const char* name) {
  using T = bs::minifloat<Format>;
  using traits = bs::format_traits<Format>;
  const auto& table = reference_table<Format>();
  INFO(name);
  CHECK(table.max_code() == traits::max_code);
  CHECK(table.has_nan() == traits::has_nan);
  CHECK(table.has_infinity() == traits::has_infinity);
  CHECK(table.has_zero() == traits::has_zero);
  if (traits::has_nan)
    CHECK(table.nan_code() == traits::nan_code);
  if (traits::has_infinity)
    CHECK(table.infinity_code() == traits::infinity_code);
  CHECK(table.sign_bit() == traits::sign_mask);
  int mismatches = 0;
  for (int i = 0; i < table.finite_count(); ++i) {
    const auto& e = table.entries()[static_cast<std::size_t>(i)];
    const double decoded =
        static_cast<double>(static_cast<float>(T::from_bits(static_cast<std::uint8_t>(e.code))));
    if (decoded != e.value)
      ++mismatches;
    if (traits::is_signed) {
      const auto neg = T::from_bits(static_cast<std::uint8_t>(e.code | table.sign_bit()));
      if (static_cast<double>(static_cast<float>(neg)) != -e.value)
        ++mismatches;
    }
  }
  CHECK(mismatches == 0);
  // Spot values from docs/conversion.md and the OCP MX / OFP8 specifications.
  CHECK(table.largest() == static_cast<double>(static_cast<float>(T::from_bits(traits::max_code))));
}

} // namespace

TEST_CASE("reference tables agree with format_traits and the decoder", "[convert][reference]") {
  bs::for_each_type(bs::scalar_formats{}, [](auto tag) {
    using M = typename decltype(tag)::type;
    check_tables_agree<typename M::format>(bs::scalar_format_name<M>());
  });
  // Published maxima (OCP MX v1.0, OCP OFP8, PTX ISA).
  CHECK(reference_table<bs::e2m1_format>().largest() == 6.0);
  CHECK(reference_table<bs::e4m3_format>().largest() == 448.0);
  CHECK(reference_table<bs::e5m2_format>().largest() == 57344.0);
  CHECK(reference_table<bs::ue4m3_format>().largest() == 448.0);
  CHECK(reference_table<bs::ue5m3_format>().largest() == 114688.0);
  CHECK(reference_table<bs::ue5m3_ieee_format>().largest() == 61440.0);
  CHECK(reference_table<bs::ue8m0_format>().largest() == std::ldexp(1.0, 127));
  CHECK(reference_table<bs::ue8m0_format>().smallest() == std::ldexp(1.0, -127));
  CHECK(reference_table<bs::e2m3_format>().largest() == 7.5);
  CHECK(reference_table<bs::e3m2_format>().largest() == 28.0);
}

TEST_CASE("the reference follows the examples of docs/conversion.md", "[convert][reference]") {
  // Sanity of the reference itself, against hand-derived answers.
  using blockscale_test::reference_convert;
  CHECK(reference_convert<bs::e2m1_format>(2.6, ref_mode::nearest_even, ref_overflow::saturate) ==
        0x5);
  CHECK(reference_convert<bs::e2m1_format>(2.6, ref_mode::toward_zero, ref_overflow::saturate) ==
        0x4);
  CHECK(reference_convert<bs::e4m3_format>(470.0, ref_mode::nearest_even,
                                           ref_overflow::nonfinite) == 0x7F);
  CHECK(reference_convert<bs::e4m3_format>(-470.0, ref_mode::nearest_even,
                                           ref_overflow::nonfinite) == 0xFF);
  CHECK(reference_convert<bs::e4m3_format>(464.0, ref_mode::nearest_even,
                                           ref_overflow::nonfinite) == 0x7E);
  CHECK(reference_convert<bs::e4m3_format>(1e9, ref_mode::toward_zero, ref_overflow::nonfinite) ==
        0x7E);
  CHECK(reference_convert<bs::e4m3_format>(-1e9, ref_mode::up, ref_overflow::nonfinite) == 0xFE);
  CHECK(reference_convert<bs::e4m3_format>(1e9, ref_mode::down, ref_overflow::nonfinite) == 0x7E);
  CHECK(reference_convert<bs::e5m2_format>(61440.0, ref_mode::nearest_even,
                                           ref_overflow::nonfinite) == 0x7C);
  CHECK(reference_convert<bs::e5m2_format>(-inf, ref_mode::toward_zero, ref_overflow::nonfinite) ==
        0xFC);
  CHECK(reference_convert<bs::ue8m0_format>(5.0, ref_mode::up, ref_overflow::saturate) == 130);
  CHECK(reference_convert<bs::ue8m0_format>(0.0, ref_mode::up, ref_overflow::saturate) == 0);
  CHECK(reference_convert<bs::ue8m0_format>(1e-39, ref_mode::up, ref_overflow::saturate) == 0);
  CHECK(reference_convert<bs::ue8m0_format>(-4.0, ref_mode::up, ref_overflow::saturate) == 0);
  CHECK(reference_convert<bs::ue4m3_format>(-0.0, ref_mode::nearest_even, ref_overflow::saturate) ==
        0);
  CHECK(reference_convert<bs::e2m1_format>(-0.1, ref_mode::nearest_even, ref_overflow::saturate) ==
        0x8);
  CHECK(reference_convert<bs::e2m1_format>(std::nan(""), ref_mode::nearest_even,
                                           ref_overflow::saturate) == 0x7);
  CHECK(reference_convert<bs::ue5m3_ieee_format>(-std::nan(""), ref_mode::up,
                                                 ref_overflow::nonfinite) == 0xFF);
  CHECK(reference_convert<bs::ue5m3_ieee_format>(1e9, ref_mode::up, ref_overflow::nonfinite) ==
        0xF8);
  // Stochastic: 0.3 in E2M1 lies 0.6 of the way from 0 to 0.5.
  const auto f =
      static_cast<std::uint32_t>(std::floor(static_cast<double>(0.3f) / 0.5 * 4294967296.0));
  CHECK(reference_convert<bs::e2m1_format>(0.3f, ref_mode::stochastic, ref_overflow::saturate,
                                           0u - f) == 0x1);
  CHECK(reference_convert<bs::e2m1_format>(0.3f, ref_mode::stochastic, ref_overflow::saturate,
                                           0u - f - 1) == 0x0);
}

// One test case per scalar format of the registry (contract/registry.hpp), named by it.
TEMPLATE_LIST_TEST_CASE("convert matches the reference on sampled inputs", "[convert][reference]",
                        bs::scalar_formats) {
  check_format_against_reference<typename TestType::format>(bs::scalar_format_name<TestType>());
}
