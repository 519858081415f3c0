// Power-of-two row shifts of block scales onto a narrower scale format (block/scale_shift.hpp),
// proven exhaustively against a brute-force search over decoded values, for both targets:
// - every code of UE5M3 (PTX and IEEE-style) and of UE4M3 against every shift from -64 to 64:
//   `scale_code_fits` says whether some UE4M3 code (a normal one of a normal scale, for
//   `normals`) times 2^shift equals the scale exactly, and `shift_scale_code` returns that code;
// - rows: `row_shift` fits exactly when some shift fits every scale of the row, and then picks the
//   smallest one; a range merged from parts equals the whole row's; NaN and Inf refuse a row;
// - the arithmetic: sm_120a's block-scaled MMA (emulation/ptx.hpp) on shifted UE4M3 scales gives
//   the bits of the same MMA on the UE5M3 scales times 2^-(t_A + t_B) for rows that fit `normals`;
// - the census of a quantized matrix.
#include <blockscale/blockscale.hpp>
#include <blockscale/emulation/ptx.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "catch.hpp"

using namespace blockscale;

namespace {

template <class Format>
double value_of(std::uint8_t code) {
  return static_cast<double>(static_cast<float>(minifloat<Format>::from_bits(code)));
}

/// The To code whose value times 2^shift is From's `code` exactly, or -1: a search over every
/// finite To code; for `normals`, only normal To codes of normal From codes (zero always fits).
template <class From, class To>
int brute_force_code(std::uint8_t code, int shift, shift_target target) {
  const double want = value_of<From>(code);
  const auto normal = [](double v, int min_exponent) { return v >= std::ldexp(1.0, min_exponent); };
  if (target == shift_target::normals && want != 0.0 &&
      !normal(want, format_traits<From>::min_exponent))
    return -1;
  for (int c = 0; c <= format_traits<To>::max_code; ++c) {
    const double v = value_of<To>(static_cast<std::uint8_t>(c));
    if (std::ldexp(v, shift) == want &&
        (target == shift_target::values || v == 0.0 || normal(v, format_traits<To>::min_exponent)))
      return c;
  }
  return -1;
}

template <class From, class To>
void check_every_code_and_shift(shift_target target, long& fitting, long& checked) {
  for (int code = 0; code <= 255; ++code) {
    const auto c = static_cast<std::uint8_t>(code);
    const bool finite = code <= format_traits<From>::max_code;
    for (int shift = -64; shift <= 64; ++shift) {
      const int want = finite ? brute_force_code<From, To>(c, shift, target) : -1;
      INFO("code " << code << ", shift " << shift);
      REQUIRE(scale_code_fits<From, To>(c, shift, target) == (want >= 0));
      if (want >= 0) {
        REQUIRE(shift_scale_code<From, To>(c, shift) == want);
        ++fitting;
      }
      ++checked;
    }
  }
}

/// The smallest shift in [-64, 64] that fits every code of the row, or 65.
template <class From, class To>
int brute_force_row(const std::vector<std::uint8_t>& row, shift_target target) {
  for (int shift = -64; shift <= 64; ++shift) {
    bool all = true;
    for (std::uint8_t c : row)
      all = all && brute_force_code<From, To>(c, shift, target) >= 0;
    if (all)
      return shift;
  }
  return 65;
}

} // namespace

TEST_CASE("every scale code against every shift, by brute force", "[scale-shift]") {
  for (shift_target target : {shift_target::values, shift_target::normals}) {
    long fitting[3] = {}, checked[3] = {};
    check_every_code_and_shift<ue5m3_format, ue4m3_format>(target, fitting[0], checked[0]);
    check_every_code_and_shift<ue5m3_ieee_format, ue4m3_format>(target, fitting[1], checked[1]);
    check_every_code_and_shift<ue4m3_format, ue4m3_format>(target, fitting[2], checked[2]);
    for (long n : checked)
      CHECK(n == 256 * 129);
    WARN((target == shift_target::values ? "values" : "normals")
         << ": (code, shift) pairs that fit, of " << checked[0] << " each: UE5M3 -> UE4M3 "
         << fitting[0] << ", UE5M3 (IEEE-style) -> UE4M3 " << fitting[1] << ", UE4M3 -> UE4M3 "
         << fitting[2]);
  }

  // Anchors: 448 (UE4M3's largest) shifts by 0, UE5M3's largest 1.75 · 2^16 by 8, its smallest
  // subnormal 2^-17 by -8 (to 2^-9), and 1.875 · 2^8 (UE4M3's missing 480) needs a shift of 1.
  using from = ue5m3_format;
  using to = ue4m3_format;
  const auto code_of = [](double v) {
    for (int c = 0; c <= 255; ++c)
      if (value_of<from>(static_cast<std::uint8_t>(c)) == v)
        return static_cast<std::uint8_t>(c);
    FAIL("no UE5M3 code for " << v);
    return std::uint8_t{0};
  };
  constexpr shift_target values = shift_target::values;
  CHECK(value_of<to>(shift_scale_code<from, to>(code_of(448.0), 0)) == 448.0);
  CHECK(scale_code_fits<from, to>(code_of(114688.0), 8));
  CHECK(!scale_code_fits<from, to>(code_of(114688.0), 7));
  CHECK(scale_code_fits<from, to>(code_of(std::ldexp(1.0, -17)), -8, values));
  CHECK(shift_scale_code<from, to>(code_of(std::ldexp(1.0, -17)), -8) == 1);
  CHECK(!scale_code_fits<from, to>(code_of(std::ldexp(1.0, -17)), -8)); // not normal in UE5M3
  CHECK(!scale_code_fits<from, to>(code_of(std::ldexp(1.0, -12)), -3)); // 2^-9: UE4M3 subnormal
  CHECK(scale_code_fits<from, to>(code_of(std::ldexp(1.0, -12)), -3, values));
  CHECK(scale_code_fits<from, to>(code_of(std::ldexp(1.0, -12)), -6)); // 2^-6: normal
  CHECK(!scale_code_fits<from, to>(code_of(480.0), 0));
  CHECK(value_of<to>(shift_scale_code<from, to>(code_of(480.0), 1)) == 240.0);
}

TEST_CASE("a row fits exactly when one shift fits all its scales", "[scale-shift]") {
  using from = ue5m3_format;
  using to = ue4m3_format;
  std::mt19937 rng(20261207);
  for (shift_target target : {shift_target::values, shift_target::normals}) {
    long rows = 0, fitting = 0;
    for (int span : {4, 8, 12, 14, 15, 16, 17, 18, 19, 22, 30}) {
      for (int trial = 0; trial < 300; ++trial) {
        // Scales within `span` binades of a random top, some zero, some subnormal.
        std::uniform_int_distribution<int> top_field(span > 30 ? 31 : span, 31);
        const int top = top_field(rng);
        std::uniform_int_distribution<int> field(top - span < 0 ? 0 : top - span, top);
        std::uniform_int_distribution<int> mantissa(0, 7), blocks(1, 40), zero(0, 9);
        std::vector<std::uint8_t> row(static_cast<std::size_t>(blocks(rng)));
        for (auto& c : row) {
          c = zero(rng) == 0 ? 0 : static_cast<std::uint8_t>(field(rng) << 3 | mantissa(rng));
          if (c == 0xFF)
            c = 0xFE;
        }
        bool all_zero = true;
        for (std::uint8_t c : row)
          all_zero = all_zero && c == 0;
        const int want = all_zero ? 0 : brute_force_row<from, to>(row, target); // zeros: 0
        std::vector<std::uint8_t> out(row.size(), 0xAA);
        const scale_row_shift s =
            shift_scale_row<from, to>(row.data(), row.size(), out.data(), 1, 1, target);
        INFO("span " << span << ", trial " << trial);
        REQUIRE(s.fits == (want <= 64));
        if (s.fits) {
          REQUIRE(s.shift == want);
          for (std::size_t i = 0; i < row.size(); ++i)
            REQUIRE(std::ldexp(value_of<to>(out[i]), s.shift) == value_of<from>(row[i]));
          ++fitting;
        } else {
          for (std::uint8_t c : out)
            REQUIRE(c == 0xAA);
        }
        // The range of two halves merged is the row's.
        scale_row_range<from> left, right, whole;
        for (std::size_t i = 0; i < row.size(); ++i) {
          (i < row.size() / 2 ? left : right).add(row[i]);
          whole.add(row[i]);
        }
        left.merge(right);
        REQUIRE(left.max_code == whole.max_code);
        REQUIRE(left.min_code == whole.min_code);
        REQUIRE(left.min_lsb == whole.min_lsb);
        ++rows;
      }
    }
    WARN((target == shift_target::values ? "values: " : "normals: ")
         << fitting << " of " << rows << " random rows fit");
    CHECK(fitting > 0);
    CHECK(fitting < rows);
  }
}

TEST_CASE("zero, NaN and Inf scales", "[scale-shift]") {
  using to = ue4m3_format;
  const std::uint8_t zeros[4] = {0, 0, 0, 0};
  std::uint8_t out[4] = {9, 9, 9, 9};
  const scale_row_shift z = shift_scale_row<ue5m3_format, to>(zeros, 4, out);
  CHECK(z.fits);
  CHECK(z.shift == 0);
  CHECK(out[0] == 0);
  const std::uint8_t with_nan[3] = {0x40, 0xFF, 0x41};
  CHECK(!shift_scale_row<ue5m3_format, to>(with_nan, 3, out).fits);
  const std::uint8_t with_inf[3] = {0xF0, 0xF8, 0xF1}; // 0xF8 is Inf in the IEEE-style variant
  CHECK(!shift_scale_row<ue5m3_ieee_format, to>(with_inf, 3, out).fits);
  CHECK(shift_scale_row<ue5m3_format, to>(with_inf, 3, out).fits); // a finite 2^16 in PTX's
  // Strided rows: every other byte, into every third.
  const std::uint8_t strided[6] = {0x40, 0xFF, 0x48, 0xFF, 0x50, 0xFF};
  std::uint8_t spread[9] = {};
  const scale_row_shift s = shift_scale_row<ue5m3_format, to>(strided, 3, spread, 2, 3);
  CHECK(s.shift == row_shift<ue5m3_format, to>([&] {
                     scale_row_range<ue5m3_format> r;
                     for (int i = 0; i < 3; ++i)
                       r.add(strided[2 * i]);
                     return r;
                   }())
                       .shift);
  REQUIRE(s.fits);
  for (int i = 0; i < 3; ++i)
    CHECK(std::ldexp(value_of<to>(spread[3 * i]), s.shift) ==
          value_of<ue5m3_format>(strided[2 * i]));
}

TEST_CASE("the census of a quantized matrix counts its fitting rows and tiles", "[scale-shift]") {
  // Rows whose values span few binades fit; a row with one huge and one tiny block does not.
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (scale_layout layout : {scale_layout::row_major, scale_layout::tensor_core}) {
    const std::size_t rows = 300, cols = 256;
    std::vector<float> x(rows * cols);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < cols; ++c) {
        const bool wide = r % 7 == 3; // blocks 2^20 apart: more than UE4M3 spans
        const float magnitude = wide && c < 16 ? 1e4f : wide && c >= 240 ? 1e-2f : 1.0f;
        x[r * cols + c] = normal(rng) * magnitude;
      }
    quantize_options options;
    options.layout = layout;
    const auto q = quantize<ue5m3_fp4>(matrix_view<const float>(x.data(), rows, cols), options);
    const scale_shift_census census = census_of_shifts<ue4m3_format>(q.view(), 128);
    std::size_t fitting = 0, tiles = 0, fitting_tiles = 0;
    bool tile = true;
    for (std::size_t r = 0; r < rows; ++r) {
      std::vector<std::uint8_t> codes(q.view().blocks_per_row()), out(codes.size());
      for (std::size_t kb = 0; kb < codes.size(); ++kb)
        codes[kb] = q.view().scales()[q.view().scale_index(r, kb)];
      const bool fits =
          shift_scale_row<ue5m3_format, ue4m3_format>(codes.data(), codes.size(), out.data()).fits;
      CHECK(fits == (r % 7 != 3));
      fitting += fits;
      tile = tile && fits;
      if ((r + 1) % 128 == 0 || r + 1 == rows) {
        ++tiles;
        fitting_tiles += tile;
        tile = true;
      }
    }
    CHECK(census.rows == rows);
    CHECK(census.fitting_rows == fitting);
    CHECK(census.tiles == 3);
    CHECK(census.tiles == tiles);
    CHECK(census.fitting_tiles == fitting_tiles);
    CHECK(census.fitting_tiles == 0); // every tile holds a wide row
    CHECK(census_of_shifts<ue4m3_format>(q.view(), 1).fitting_tiles == fitting);
  }
  const auto q = quantize<ue5m3_fp4>(matrix_view<const float>(nullptr, 0, 0));
  CHECK(census_of_shifts<ue4m3_format>(q.view()).tiles == 0);
  CHECK_THROWS_AS(census_of_shifts<ue4m3_format>(q.view(), 0), std::invalid_argument);
}

TEST_CASE("the block-scaled MMA on shifted scales gives the UE5M3 bits", "[scale-shift]") {
  // sm_120a's kind::mxf4nvf4 arithmetic (emulation/ptx.hpp): each 16-group's exact sum times its
  // two scales, aligned by the scales' exponents, 35 fraction bits, truncated. The UE5M3 side
  // passes its (normal) scale values with UE8M0's alignment rule, which for normal scales is their
  // own exponent: an MMA that took UE5M3 scales. Four k64 steps accumulate through c.
  namespace ptx = emulation::ptx;
  using from = ue5m3_format;
  using to = ue4m3_format;
  std::mt19937 rng(99);
  const double e2m1[] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  std::uniform_int_distribution<int> pick(0, 15), mantissa(0, 7);
  long compared = 0, values_only_rows = 0, values_only_differ = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    // Two rows of 16 UE5M3 scales (4 k64 steps of 4 groups), spanning up to 17 binades.
    std::uniform_int_distribution<int> top(18, 31), span(0, 17);
    std::uint8_t sa[16], sb[16];
    for (std::uint8_t* s : {sa, sb}) {
      const int hi = top(rng), lo = hi - span(rng);
      std::uniform_int_distribution<int> field(lo < 1 ? 1 : lo, hi);
      for (int g = 0; g < 16; ++g)
        s[g] = static_cast<std::uint8_t>(field(rng) << 3 | mantissa(rng));
      for (int g = 0; g < 16; ++g)
        if (s[g] == 0xFF)
          s[g] = 0xFE;
    }
    double a[4][64], b[4][64];
    for (int step = 0; step < 4; ++step)
      for (int k = 0; k < 64; ++k) {
        const int ca = pick(rng), cb = pick(rng);
        a[step][k] = (ca & 8 ? -1 : 1) * e2m1[ca & 7];
        b[step][k] = (cb & 8 ? -1 : 1) * e2m1[cb & 7];
      }
    for (shift_target target : {shift_target::normals, shift_target::values}) {
      std::uint8_t ta[16], tb[16];
      const scale_row_shift shift_a = shift_scale_row<from, to>(sa, 16, ta, 1, 1, target);
      const scale_row_shift shift_b = shift_scale_row<from, to>(sb, 16, tb, 1, 1, target);
      if (!shift_a.fits || !shift_b.fits)
        continue;
      const bool normal_rows = row_shift<from, to>([&] {
                                 scale_row_range<from> r;
                                 for (std::uint8_t c : sa)
                                   r.add(c);
                                 return r;
                               }())
                                   .fits &&
                               row_shift<from, to>([&] {
                                 scale_row_range<from> r;
                                 for (std::uint8_t c : sb)
                                   r.add(c);
                                 return r;
                               }())
                                   .fits;
      if (target == shift_target::values && normal_rows)
        continue; // counted under normals
      const int t = shift_a.shift + shift_b.shift;
      float native = 0.0f, shifted = 0.0f;
      for (int step = 0; step < 4; ++step) {
        double na[4], nb[4], ha[4], hb[4];
        for (int g = 0; g < 4; ++g) {
          na[g] = value_of<from>(sa[4 * step + g]);
          nb[g] = value_of<from>(sb[4 * step + g]);
          ha[g] = value_of<to>(ta[4 * step + g]);
          hb[g] = value_of<to>(tb[4 * step + g]);
        }
        native = ptx::dot_add_e2m1(ptx::mma_model::sm120, ptx::scale_kind::ue8m0, a[step], b[step],
                                   na, nb, native);
        shifted = ptx::dot_add_e2m1(ptx::mma_model::sm120, ptx::scale_kind::ue4m3, a[step], b[step],
                                    ha, hb, shifted);
      }
      const float back = std::ldexp(shifted, t);
      // Outside FP32's subnormals and overflow (|native| far from both here).
      REQUIRE(std::fabs(native) < 1e30f);
      if (native != 0.0f && std::fabs(native) < 1e-30f)
        continue;
      if (target == shift_target::normals) {
        INFO("trial " << trial << ", shifts " << shift_a.shift << ", " << shift_b.shift);
        REQUIRE(std::memcmp(&back, &native, sizeof back) == 0);
        ++compared;
      } else {
        ++values_only_rows;
        values_only_differ += std::memcmp(&back, &native, sizeof back) != 0;
      }
    }
  }
  WARN(compared << " pairs of rows fitting `normals` equal bit for bit; of " << values_only_rows
                << " fitting only `values` (UE4M3 subnormal scales), " << values_only_differ
                << " differ");
  CHECK(compared > 1000);
}
