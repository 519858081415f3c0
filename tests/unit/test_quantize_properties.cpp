// Properties of quantize / dequantize: the decode error bound, requantization of decoded data,
// stochastic rounding (reproducibility, fast == reference, unbiasedness), the Hadamard option and
// the error metrics.
#include <blockscale/blockscale.hpp>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "catch.hpp"
#include "quantized_bytes.hpp"
#include "splitmix64.hpp"

using namespace blockscale;

namespace {

constexpr double u = 0x1p-24; // unit roundoff of float

std::uint32_t float_bits(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// Test data: N(0,1), heavy tails, 40 binades, and rows scaled by 2^k (k from -140 to 90), so that
// some blocks have subnormal or zero scales.
std::vector<float> make_data(int kind, std::size_t rows, std::size_t cols, std::uint64_t seed) {
  static const int row_exponents[] = {0, 37, -45, -80, 64, -126, -140, 12, -20, 90, -100, 5};
  splitmix64 rng{seed};
  std::vector<float> x(rows * cols);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) {
      double v = rng.normal();
      if (kind == 1) // Student-t, 3 degrees of freedom
        v /= std::sqrt(
            (std::pow(rng.normal(), 2) + std::pow(rng.normal(), 2) + std::pow(rng.normal(), 2)) /
            3.0);
      else if (kind == 2) // 40 binades
        v = (v < 0 ? -1.0 : 1.0) * std::exp2(40.0 * rng.uniform() - 20.0);
      else if (kind == 3) // rows scaled by very different powers of two
        v = std::ldexp(v, row_exponents[r % 12]);
      x[r * cols + c] = static_cast<float>(v);
    }
  return x;
}

float amax_of(const std::vector<float>& x) {
  float a = 0.0f;
  for (float v : x)
    a = std::fabs(v) > a ? std::fabs(v) : a;
  return a;
}

// s_enc = min(2688 / amax_t, FLT_MAX), 1 when that is 0 (Transformer Engine's NVFP4 reference
// quantizer).
float te_encode_scale(float amax_t) {
  float s = 2688.0f / amax_t;
  s = s < FLT_MAX ? s : FLT_MAX;
  return s == 0.0f ? 1.0f : s;
}

// f_b as documented: min(1 / (float(S_b) · s_dec), FLT_MAX).
float factor_of(float scale, float s_dec) {
  const float inv = 1.0f / (scale * s_dec);
  return inv < FLT_MAX ? inv : FLT_MAX;
}

// Half the E2M1 spacing at a code's magnitude: the grid is 0, .5, 1, 1.5, 2, 3, 4, 6, so the
// spacing is 0.5 below 2, 1 in [2, 4) and 2 in [4, 6]. An unclipped y rounds to the nearer of its
// two neighbours, so |y - q| <= half the spacing of the interval holding y, which is at most
// half_gap(|q|) (for y just below 2 or 4, q is the upper neighbour, whose value is >= 2 or 4).
double half_gap(double q) {
  return q < 2.0 ? 0.25 : (q < 4.0 ? 0.5 : 1.0);
}

template <class F>
float scale_min_normal() {
  return static_cast<float>((std::numeric_limits<typename F::scale_type>::min)());
}

// ---------------------------------------------------------------------------------------------
// The error bound, for FP4 formats.
//
// For an element x of a block with scale S (finite, > 0) and tensor decode scale s_dec, let
// D = S · s_dec (exact), f_b = fl(1 / fl(S · s_dec)), y = fl(x · f_b) and q = e2m1_rne(y).
// - Unclipped (|y| <= 6): x̂ = fl(fl(q · S) · s_dec) and q · S is exact (2 × 4 significant bits),
//   so x̂ = q · D (1 + e4). With f_b · D = (1 + e3) / (1 + e2), y · D = x (1 + e1)(1 + e3)/(1 + e2),
//   hence |x - x̂| <= |y - q| · D + |x - y·D| + |q·D - x̂|
//                  <= half_gap(|q|) · D + 3.01u |x| + u |q| D,
//   plus absolute terms of 2^-149 (1 + D) where a product is subnormal. The check uses
//   half_gap(|q|)·D + 4u(|x| + |q|D) + 2^-149 (1 + D), valid where fl(S·s_dec) is a normal float
//   and f_b is not capped at FLT_MAX (other elements are counted and skipped).
// - Clipped (|y| > 6): q = ±6 and x̂ = fl(fl(±6 · S) · s_dec) exactly.
// - Zero scale: x̂ = 0 and the block's elements are stored as zero codes.
template <class F>
void check_error_bound(const std::vector<float>& x, std::size_t rows, std::size_t cols,
                       const quantize_options& options, std::size_t& skipped) {
  const matrix_view<const float> view(x.data(), rows, cols);
  const quantized_matrix<F> q = quantize<F>(view, options);
  const std::size_t qr = q.rows(), qc = q.cols();
  REQUIRE(qr == (options.columnwise ? cols : rows));
  // Element (r, c) of q is x(r, c), or x(c, r) when columnwise.
  auto source = [&](std::size_t r, std::size_t c) {
    return options.columnwise ? x[c * cols + r] : x[r * cols + c];
  };
  std::vector<float> out(qr * qc, -1.0f), out2(qr * qc, -1.0f);
  dequantize(q, matrix_view<float>(out.data(), qr, qc));
  dequantize(q, matrix_view<float>(out2.data(), qr, qc), 2);
  const float s_dec = q.decode_scale();
  std::size_t value_mismatch = 0, bound_fail = 0, clip_fail = 0, zero_fail = 0;
  std::string first;
  for (std::size_t r = 0; r < qr; ++r)
    for (std::size_t c = 0; c < qc; ++c) {
      const float xv = source(r, c);
      const float got = out[r * qc + c];
      value_mismatch += float_bits(got) != float_bits(q.value(r, c)) ||
                        float_bits(out2[r * qc + c]) != float_bits(got);
      const float scale = static_cast<float>(q.block_scale(r, c));
      if (scale == 0.0f) {
        zero_fail += got != 0.0f || q.element(r, c).bits() != 0;
        continue;
      }
      const float decode = scale * s_dec;
      const float fb = factor_of(scale, s_dec);
      if (!(decode >= FLT_MIN) || !(1.0f / decode < FLT_MAX)) {
        ++skipped;
        continue;
      }
      const float y = xv * fb;
      if (std::fabs(y) > 6.0f) {
        const float clipped = (std::signbit(y) ? -6.0f * scale : 6.0f * scale) * s_dec;
        clip_fail += float_bits(got) != float_bits(clipped);
        continue;
      }
      const double qd = std::fabs(static_cast<double>(static_cast<float>(q.element(r, c))));
      const double d = static_cast<double>(scale) * s_dec;
      const double bound =
          half_gap(qd) * d + 4 * u * (std::fabs(double(xv)) + qd * d) + 0x1p-149 * (1.0 + d);
      const double err = std::fabs(static_cast<double>(xv) - got);
      if (err > bound && bound_fail++ == 0)
        first = "q(" + std::to_string(r) + "," + std::to_string(c) + "): x=" + std::to_string(xv) +
                " decoded " + std::to_string(got) + " bound " + std::to_string(bound);
    }
  INFO(first);
  CHECK(value_mismatch == 0);
  CHECK(bound_fail == 0);
  CHECK(clip_fail == 0);
  CHECK(zero_fail == 0);
}

// Is `scale` a normal value of the scale format (or zero, or NaN)?
template <class F>
bool normal_zero_or_nan(typename F::scale_type s) {
  const float v = static_cast<float>(s);
  return v == 0.0f || std::isnan(v) || v >= scale_min_normal<F>();
}

// Requantizes the decoded q with the same options; counts blocks whose scale or elements changed,
// split by whether the original scale was normal/zero/NaN ("must hold") or subnormal.
template <class F>
void requantize_counts(const quantized_matrix<F>& q, const quantize_options& options,
                       std::size_t& changed_normal, std::size_t& changed_subnormal,
                       std::size_t& subnormal_blocks) {
  std::vector<float> decoded(q.rows() * q.cols());
  dequantize(q, matrix_view<float>(decoded.data(), q.rows(), q.cols()));
  // q holds the transpose when columnwise: requantize the decoded transpose rowwise.
  quantize_options again = options;
  again.columnwise = false;
  const quantized_matrix<F> q2 =
      quantize<F>(matrix_view<const float>(decoded.data(), q.rows(), q.cols()), again);
  REQUIRE(float_bits(q2.decode_scale()) == float_bits(q.decode_scale()));
  constexpr std::size_t b = F::block_size;
  for (std::size_t r = 0; r < q.rows(); ++r)
    for (std::size_t c0 = 0; c0 < q.padded_cols(); c0 += b) {
      bool same = q.block_scale(r, c0).bits() == q2.block_scale(r, c0).bits();
      for (std::size_t j = 0; j < b; ++j)
        same = same && q.element(r, c0 + j).bits() == q2.element(r, c0 + j).bits();
      const bool must = normal_zero_or_nan<F>(q.block_scale(r, c0));
      subnormal_blocks += must ? 0 : 1;
      if (!same)
        ++(must ? changed_normal : changed_subnormal);
    }
}

} // namespace

TEST_CASE("dequantize(quantize(x)) is within the format's error bound", "[quantize][properties]") {
  std::size_t skipped = 0, checked = 0;
  for (int kind = 0; kind < 4; ++kind)
    for (bool columnwise : {false, true}) {
      const std::size_t rows = 45, cols = 70;
      const std::vector<float> x = make_data(kind, rows, cols, 11 + kind);
      INFO("data kind " << kind << (columnwise ? " columnwise" : " rowwise"));
      quantize_options options;
      options.columnwise = columnwise;
      options.encode_scale = te_encode_scale(amax_of(x));
      check_error_bound<nvfp4>(x, rows, cols, options, skipped);
      options.shape = block_shape::tile;
      check_error_bound<nvfp4>(x, rows, cols, options, skipped);
      check_error_bound<ue5m3_fp4>(x, rows, cols, options, skipped);
      options.shape = block_shape::rowwise;
      check_error_bound<ue5m3_fp4>(x, rows, cols, options, skipped);
      options.rule = scale_rules::ue5m3_up();
      check_error_bound<ue5m3_fp4>(x, rows, cols, options, skipped);
      options.rule.reset();
      options.encode_scale = 1.0f;
      check_error_bound<ue5m3_fp4>(x, rows, cols, options, skipped);
      check_error_bound<mxfp4>(x, rows, cols, options, skipped);
      options.rule = scale_rules::rceil();
      check_error_bound<mxfp4>(x, rows, cols, options, skipped);
      checked += 8 * rows * cols;
    }
  // Skipped: elements whose fl(S·s_dec) is subnormal or whose f_b is capped, which only the
  // far-underflowing rows of data kind 3 produce.
  INFO("skipped " << skipped << " of " << checked);
  CHECK(skipped < checked / 8);
}

// ---------------------------------------------------------------------------------------------
// quantize(dequantize(q)) == q
//
// Where it must hold (same options, same s_enc):
// - OCP floor (MXFP4, MXFP8): X = 2^(floor(log2 amax) - emax) puts the block max at
//   amax / X in [2^emax, 2^(emax+1)), which rounds (or clips) to an element q_max in
//   [2^emax, max] (4 or 6 for E2M1; 256..448 for E4M3), so the decoded block max q_max · X has the
//   same floor(log2) and gives the same X; the decoded elements q · X are exact, and q · X / X = q.
//   At the clamp X = 2^-127 the decoded block max is below 2^-125 and the clamp repeats.
// - Nearest-even scales (NVFP4, UE5M3) when the scale is a normal value of its format: S is within
//   a relative 2^-4 of amax · m, so y_max = amax · f_b >= 6 / (1 + 2^-4) > 5 and the block max
//   becomes 6 (also when it clipped, including a scale that rounded down: requantizing then gives
//   the same scale); the decoded max 6 · S · s_dec times m is S (1 + a few u), which rounds back to
//   S; the elements come back as q (1 + 2u), which rounds back to q. Zero- and NaN-scale blocks
//   decode to 0 and NaN and requantize to zero and NaN scales.
// - Round-up UE5M3 scales without a tensor scale (s_enc = 1), normal scales: S < amax · m · 9/8
//   gives y_max > 5.33, so q_max = 6, and fl(6 · S · fp32(1/6)) = S exactly because
//   6 · fp32(1/6) = 1 + 2.98e-8 is below half an ulp for every mantissa of S (>= 3.18e-8).
// Where it need not hold (tests below show a case of each):
// - cuBLAS rceil: X = 2^ceil(log2(amax / 6)) leaves y_max in (3, 6]; when y_max in (3, 3.5) the
//   max becomes 3, and 3X / 6 = X / 2 gives a scale one binade lower.
// - Subnormal scales (UE4M3 below 2^-6, UE5M3 below 2^-14): with only a few significant bits the
//   scale can round far up, the block max becomes 3 or 4 instead of 6, and the requantized scale is
//   smaller (or zero).
// - Round-up scales with a tensor scale: fl(fl(6 · S · s_dec) · m) may land one float ulp above S,
//   and rounding up then gives the next scale.

TEST_CASE("requantizing dequantized data gives q back where the rule guarantees it",
          "[quantize][properties]") {
  for (int kind = 0; kind < 4; ++kind)
    for (bool columnwise : {false, true})
      for (bool tile : {false, true}) {
        const std::size_t rows = 40, cols = 96;
        const std::vector<float> x = make_data(kind, rows, cols, 100 + kind);
        const matrix_view<const float> view(x.data(), rows, cols);
        INFO("data kind " << kind << (columnwise ? " columnwise" : " rowwise")
                          << (tile ? " tiles" : ""));
        quantize_options options;
        options.columnwise = columnwise;
        options.shape = tile ? block_shape::tile : block_shape::rowwise;
        std::size_t changed_normal = 0, changed_subnormal = 0, subnormal_blocks = 0;
        for (float s_enc : {te_encode_scale(amax_of(x)), 1.0f}) {
          options.encode_scale = s_enc;
          requantize_counts(quantize<nvfp4>(view, options), options, changed_normal,
                            changed_subnormal, subnormal_blocks);
          requantize_counts(quantize<ue5m3_fp4>(view, options), options, changed_normal,
                            changed_subnormal, subnormal_blocks);
        }
        CHECK(changed_normal == 0);
        CHECK(changed_subnormal <= subnormal_blocks);

        options.shape = block_shape::rowwise;
        options.encode_scale = 1.0f;
        options.rule = scale_rules::ue5m3_up();
        changed_normal = 0;
        requantize_counts(quantize<ue5m3_fp4>(view, options), options, changed_normal,
                          changed_subnormal, subnormal_blocks);
        CHECK(changed_normal == 0);
        options.rule.reset();

        // OCP floor: every block, subnormal or not (UE8M0 has no subnormals).
        const auto q4 = quantize<mxfp4>(view, options);
        const auto q8 = quantize<mxfp8>(view, options);
        std::vector<float> d4(q4.rows() * q4.cols()), d8(q8.rows() * q8.cols());
        dequantize(q4, matrix_view<float>(d4.data(), q4.rows(), q4.cols()));
        dequantize(q8, matrix_view<float>(d8.data(), q8.rows(), q8.cols()));
        quantize_options rowwise = options;
        rowwise.columnwise = false;
        const auto r4 =
            quantize<mxfp4>(matrix_view<const float>(d4.data(), q4.rows(), q4.cols()), rowwise);
        const auto r8 =
            quantize<mxfp8>(matrix_view<const float>(d8.data(), q8.rows(), q8.cols()), rowwise);
        CHECK(element_bytes(r4) == element_bytes(q4));
        CHECK(scale_bytes(r4) == scale_bytes(q4));
        CHECK(element_bytes(r8) == element_bytes(q8));
        CHECK(scale_bytes(r8) == scale_bytes(q8));
      }
}

TEST_CASE("an NVFP4 scale that rounded down and clipped the max still requantizes to itself",
          "[quantize][properties]") {
  // amax / 6 = 6.37 / 6 = 1.0617 rounds down to the UE4M3 scale 1.0; 6.37 clips to 6.
  std::vector<float> x(16, 0.0f);
  x[0] = 6.37f;
  x[1] = -2.2f;
  x[2] = 0.3f;
  quantize_options options; // s_enc = 1
  const auto q = quantize<nvfp4>(matrix_view<const float>(x.data(), 1, 16), options);
  REQUIRE(static_cast<float>(q.block_scale(0, 0)) == 1.0f);
  REQUIRE(static_cast<float>(q.element(0, 0)) == 6.0f);
  std::vector<float> d(16);
  dequantize(q, matrix_view<float>(d.data(), 1, 16));
  const auto q2 = quantize<nvfp4>(matrix_view<const float>(d.data(), 1, 16), options);
  CHECK(q2 == q);
}

TEST_CASE("requantization need not give q back: rceil, subnormal scales, round-up with s_enc",
          "[quantize][properties]") {
  SECTION("MXFP4 rceil: a block max of 3.2 decodes to 3, one binade lower") {
    std::vector<float> x(32, 0.0f);
    x[0] = 3.2f; // X = 2^ceil(log2(3.2 / 6)) = 1, 3.2 -> 3
    x[1] = 1.0f;
    quantize_options options;
    options.rule = scale_rules::rceil();
    const auto q = quantize<mxfp4>(matrix_view<const float>(x.data(), 1, 32), options);
    CHECK(static_cast<float>(q.block_scale(0, 0)) == 1.0f);
    CHECK(static_cast<float>(q.element(0, 0)) == 3.0f);
    std::vector<float> d(32);
    dequantize(q, matrix_view<float>(d.data(), 1, 32));
    const auto q2 = quantize<mxfp4>(matrix_view<const float>(d.data(), 1, 32), options);
    CHECK(static_cast<float>(q2.block_scale(0, 0)) == 0.5f);
    CHECK(static_cast<float>(q2.element(0, 0)) == 6.0f);
    CHECK(static_cast<float>(q2.element(0, 1)) == 2.0f);
    CHECK(q2 != q);
  }
  SECTION("NVFP4, subnormal scale: 3.3·2^-9 gets scale 2^-9, decodes to 3·2^-9, scale 0") {
    std::vector<float> x(16, 0.0f);
    x[0] = std::ldexp(3.3f, -9); // amax · fp32(1/6) = 0.55 · 2^-9 -> 2^-9 (code 1)
    quantize_options options;
    const auto q = quantize<nvfp4>(matrix_view<const float>(x.data(), 1, 16), options);
    CHECK(q.block_scale(0, 0).bits() == 0x01);
    CHECK(static_cast<float>(q.element(0, 0)) == 3.0f);
    std::vector<float> d(16);
    dequantize(q, matrix_view<float>(d.data(), 1, 16));
    // 3 · 2^-9 · fp32(1/6) = 2^-10 exactly: a tie between 0 and 2^-9, to even: 0.
    const auto q2 = quantize<nvfp4>(matrix_view<const float>(d.data(), 1, 16), options);
    CHECK(q2.block_scale(0, 0).bits() == 0x00);
    CHECK(q2.element(0, 0).bits() == 0);
  }
  SECTION("UE5M3 round-up with a tensor scale: some normal block moves up one scale code") {
    // Not a bug: the FP32 noise of fl(fl(6·S·s_dec)·m) is amplified by rounding up.
    std::size_t changed = 0, blocks = 0;
    for (std::uint64_t seed = 1; seed <= 8 && changed == 0; ++seed) {
      const std::vector<float> x = make_data(0, 64, 64, seed);
      quantize_options options;
      options.rule = scale_rules::ue5m3_up();
      options.encode_scale = te_encode_scale(amax_of(x)) * 0.7f;
      const auto q = quantize<ue5m3_fp4>(matrix_view<const float>(x.data(), 64, 64), options);
      std::size_t changed_subnormal = 0, subnormal = 0;
      requantize_counts(q, options, changed, changed_subnormal, subnormal);
      blocks += 64 * 4;
    }
    INFO(changed << " of " << blocks << " blocks changed");
    CHECK(changed > 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Stochastic rounding

TEST_CASE("stochastic rounding is reproducible and keyed by (seed, offset, element index)",
          "[quantize][properties][stochastic]") {
  const std::size_t rows = 33, cols = 50;
  const std::vector<float> x = make_data(1, rows, cols, 9);
  const matrix_view<const float> view(x.data(), rows, cols);
  for (bool columnwise : {false, true})
    for (bool tile : {false, true}) {
      INFO((columnwise ? "columnwise" : "rowwise") << (tile ? ", tiles" : ""));
      quantize_options options;
      options.rounding = element_rounding::stochastic;
      options.seed = 0x1234567890ABCDEFull;
      options.offset = 17;
      options.columnwise = columnwise;
      options.shape = tile ? block_shape::tile : block_shape::rowwise;
      options.encode_scale = te_encode_scale(amax_of(x));
      const auto a = quantize<nvfp4>(view, options);
      CHECK(quantize<nvfp4>(view, options) == a);
      // Fast == reference under SR, with 1 and 2 threads and both layouts.
      for (unsigned threads : {1u, 2u}) {
        options.threads = threads;
        CHECK(quantize<nvfp4>(view, options) == a);
        CHECK(quantize<ue5m3_fp4>(view, options) == quantize_reference<ue5m3_fp4>(view, options));
        CHECK(quantize<mxfp4>(view, options) == quantize_reference<mxfp4>(view, options));
        CHECK(quantize<mxfp8>(view, options) == quantize_reference<mxfp8>(view, options));
        options.layout = scale_layout::tensor_core;
        CHECK(quantize<nvfp4>(view, options) == quantize_reference<nvfp4>(view, options));
        options.layout = scale_layout::row_major;
      }
      CHECK(quantize_reference<nvfp4>(view, options) == a);
      // The documented keying: element (r, c) of q rounds with rounding_bits(seed, offset,
      // r · padded_cols + c), from the same scales as nearest-even rounding.
      std::size_t keyed_mismatch = 0;
      for (std::size_t r = 0; r < a.rows(); ++r)
        for (std::size_t c = 0; c < a.cols(); ++c) {
          const float scale = static_cast<float>(a.block_scale(r, c));
          if (scale == 0.0f)
            continue;
          const float xv = columnwise ? x[c * cols + r] : x[r * cols + c];
          const float y = xv * factor_of(scale, a.decode_scale());
          const std::uint32_t bits =
              rounding_bits(options.seed, options.offset, r * a.padded_cols() + c);
          keyed_mismatch +=
              convert<e2m1>(y, round_stochastic{bits}).bits() != a.element(r, c).bits();
        }
      CHECK(keyed_mismatch == 0);
      // A different offset or seed gives other codes (same scales).
      options.offset = 18;
      const auto b = quantize<nvfp4>(view, options);
      CHECK(scale_bytes(b) == scale_bytes(a));
      CHECK(element_bytes(b) != element_bytes(a));
      options.offset = 17;
      options.seed ^= 1;
      const auto c = quantize<nvfp4>(view, options);
      CHECK(scale_bytes(c) == scale_bytes(a));
      CHECK(element_bytes(c) != element_bytes(a));
      // Nearest-even uses the same scales.
      options.rounding = element_rounding::nearest_even;
      CHECK(scale_bytes(quantize<nvfp4>(view, options)) == scale_bytes(a));
    }
}

// The mean of the decoded values over N seeds converges to x.
//
// The scales do not depend on the seed (checked), so for each element y = fl(x · f_b) is fixed and
// the code is a two-point random variable on the E2M1 neighbours lo <= y <= hi (w = hi - lo),
// hi with probability (y - lo) / w up to the 2^-32 granularity of the random bits, so
// |E[q] - y| <= w · 2^-32. For |y| >= 6 it is ±6 always. Hoeffding for N independent draws in
// [lo, hi]: P(|mean - E[q]| >= t) <= 2 exp(-2 N t^2 / w^2). With N = 1024, a union over the 1024
// elements and a total failure probability of 1e-9: t = w · sqrt(ln(2 · 1024 / 1e-9) / (2N))
// = 0.1177 w. Decoding multiplies by D = S · s_dec with one rounding (q · S is exact), and
// y · D = x (1 + 3.01u), so |mean_decoded - x| <= (t + w 2^-32) · D + 4u (|x| + 6D). (Philox
// streams for different seeds are treated as independent; the test is deterministic.)
TEMPLATE_TEST_CASE("the mean of stochastically rounded values converges to x",
                   "[quantize][properties][stochastic]", nvfp4, ue5m3_fp4, mxfp4) {
  const std::size_t rows = 16, cols = 64;
  const int n = 1024;
  std::vector<float> x = make_data(0, rows, cols, 31);
  x[5] = 1.0e-3f; // tiny elements next to large ones: y near 0
  x[70] = 0.0f;
  quantize_options options;
  options.rounding = element_rounding::stochastic;
  options.offset = 3;
  if (TestType::block_size == 16)
    options.encode_scale = te_encode_scale(amax_of(x));
  const matrix_view<const float> view(x.data(), rows, cols);
  std::vector<double> sum(rows * cols, 0.0);
  std::vector<std::uint8_t> scales;
  bool same_scales = true;
  for (int s = 0; s < n; ++s) {
    options.seed = 1000 + static_cast<std::uint64_t>(s);
    const auto q = quantize<TestType>(view, options);
    if (s == 0)
      scales = scale_bytes(q);
    same_scales = same_scales && scale_bytes(q) == scales;
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < cols; ++c)
        sum[r * cols + c] += q.value(r, c);
  }
  CHECK(same_scales);
  const auto q = quantize<TestType>(view, options);
  const double t_over_w = std::sqrt(std::log(2.0 * 1024 / 1e-9) / (2.0 * n));
  const double grid[] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  std::size_t fail = 0;
  std::string first;
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) {
      const float xv = x[r * cols + c];
      const float scale = static_cast<float>(q.block_scale(r, c));
      const double mean = sum[r * cols + c] / n;
      const double d = static_cast<double>(scale) * q.decode_scale();
      const float y = xv * factor_of(scale, q.decode_scale());
      const double a = std::fabs(static_cast<double>(y));
      double bound;
      if (a >= 6.0) {
        bound = 4 * u * 6 * d;
        const double clipped = (y < 0 ? -6.0 : 6.0) * d;
        fail += std::fabs(mean - clipped) > bound;
        continue;
      }
      double w = 0.5;
      for (int i = 0; i < 7; ++i)
        if (a >= grid[i] && a < grid[i + 1])
          w = grid[i + 1] - grid[i];
      bound = (t_over_w + 0x1p-32) * w * d + 4 * u * (std::fabs(double(xv)) + 6 * d);
      if (std::fabs(mean - xv) > bound && fail++ == 0)
        first = "x(" + std::to_string(r) + "," + std::to_string(c) + ")=" + std::to_string(xv) +
                " mean " + std::to_string(mean) + " bound " + std::to_string(bound);
    }
  INFO(first);
  CHECK(fail == 0);
}

// ---------------------------------------------------------------------------------------------
// Hadamard

namespace {

// x with each 16-group along the quantized dimension transformed by hadamard16::forward: along
// the rows (columns padded with zeros to a multiple of 16), or down the columns when columnwise
// (rows padded). Returns the padded matrix and its shape.
std::vector<float> pre_transform(const std::vector<float>& x, std::size_t rows, std::size_t cols,
                                 bool columnwise, const hadamard16& h, std::size_t& out_rows,
                                 std::size_t& out_cols) {
  out_rows = columnwise ? (rows + 15) / 16 * 16 : rows;
  out_cols = columnwise ? cols : (cols + 15) / 16 * 16;
  std::vector<float> z(out_rows * out_cols, 0.0f);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c)
      z[r * out_cols + c] = x[r * cols + c];
  float group[16];
  if (!columnwise) {
    for (std::size_t r = 0; r < out_rows; ++r)
      for (std::size_t c = 0; c < out_cols; c += 16)
        h.forward(&z[r * out_cols + c], &z[r * out_cols + c]);
  } else {
    for (std::size_t c = 0; c < out_cols; ++c)
      for (std::size_t r0 = 0; r0 < out_rows; r0 += 16) {
        for (int i = 0; i < 16; ++i)
          group[i] = z[(r0 + i) * out_cols + c];
        h.forward(group, group);
        for (int i = 0; i < 16; ++i)
          z[(r0 + i) * out_cols + c] = group[i];
      }
  }
  return z;
}

template <class F>
void check_hadamard(const std::vector<float>& x, std::size_t rows, std::size_t cols,
                    bool columnwise, const hadamard16& h, unsigned threads) {
  std::size_t zr = 0, zc = 0;
  const std::vector<float> z = pre_transform(x, rows, cols, columnwise, h, zr, zc);
  float z_amax = 0.0f;
  for (float v : z)
    z_amax = std::fabs(v) > z_amax ? std::fabs(v) : z_amax;
  quantize_options with;
  with.hadamard = true;
  with.transform = h;
  with.columnwise = columnwise;
  with.threads = threads;
  const matrix_view<const float> xv(x.data(), rows, cols);
  const float amax = measure_amax<F>(xv, with);
  CHECK(float_bits(amax) == float_bits(z_amax));
  with.encode_scale = te_encode_scale(amax);
  quantize_options without = with;
  without.hadamard = false;
  const auto qh = quantize<F>(xv, with);
  const auto qz = quantize<F>(matrix_view<const float>(z.data(), zr, zc), without);
  CHECK(qh == quantize_reference<F>(xv, with));
  // qz covers the padded matrix; qh's padding columns hold the transformed values too.
  REQUIRE(qh.rows() == qz.rows());
  REQUIRE(qh.padded_cols() == qz.padded_cols());
  std::size_t mismatches = 0;
  for (std::size_t r = 0; r < qh.rows(); ++r)
    for (std::size_t c = 0; c < qh.padded_cols(); ++c)
      mismatches += qh.element(r, c).bits() != qz.element(r, c).bits() ||
                    qh.block_scale(r, c).bits() != qz.block_scale(r, c).bits();
  CHECK(mismatches == 0);
  CHECK(float_bits(qh.decode_scale()) == float_bits(qz.decode_scale()));
}

} // namespace

TEST_CASE("Hadamard quantization equals quantizing the transformed data",
          "[quantize][properties][hadamard]") {
  const struct { std::size_t rows, cols; } shapes[] = {{32, 64}, {37, 45}, {16, 16}, {5, 96}};
  for (const auto& sh : shapes)
    for (bool columnwise : {false, true})
      for (int kind : {0, 1, 2}) {
        INFO(sh.rows << "x" << sh.cols << (columnwise ? " columnwise" : " rowwise") << ", kind "
                     << kind);
        const std::vector<float> x = make_data(kind, sh.rows, sh.cols, 50 + kind);
        check_hadamard<nvfp4>(x, sh.rows, sh.cols, columnwise, hadamard16::te_default(), 1);
        check_hadamard<ue5m3_fp4>(x, sh.rows, sh.cols, columnwise, hadamard16::from_seed(7), 2);
        check_hadamard<mxfp4>(x, sh.rows, sh.cols, columnwise, hadamard16::te_default(), 3);
      }
}

TEST_CASE("Hadamard needs a block size that is a multiple of 16",
          "[quantize][properties][hadamard]") {
  using fp4_block8 = block_format<e2m1, 8, ue5m3>;
  std::vector<float> x(16, 1.0f);
  const matrix_view<const float> view(x.data(), 2, 8);
  quantize_options options;
  options.hadamard = true;
  CHECK_THROWS_AS(quantize<fp4_block8>(view, options), std::invalid_argument);
  CHECK_THROWS_AS(quantize_reference<fp4_block8>(view, options), std::invalid_argument);
  CHECK_THROWS_AS(measure_amax<fp4_block8>(view, options), std::invalid_argument);
  options.hadamard = false;
  CHECK(quantize<fp4_block8>(view, options).blocks_per_row() == 1);
}

// ---------------------------------------------------------------------------------------------
// Metrics

namespace {

template <class F>
void check_metrics(const std::vector<float>& x, std::size_t rows, std::size_t cols,
                   const quantize_options& options) {
  const matrix_view<const float> view(x.data(), rows, cols);
  const auto q = quantize<F>(view, options);
  const quantization_error e = measure_error(view, q);
  double err = 0, sig = 0, max_err = 0;
  std::size_t clipped = 0, flushed = 0;
  for (std::size_t r = 0; r < q.rows(); ++r)
    for (std::size_t c = 0; c < q.cols(); ++c) {
      const float xv = options.columnwise ? x[c * cols + r] : x[r * cols + c];
      const float scale = static_cast<float>(q.block_scale(r, c));
      const double diff = static_cast<double>(xv) - q.value(r, c);
      err += diff * diff;
      sig += static_cast<double>(xv) * xv;
      max_err = std::fmax(max_err, std::fabs(diff));
      clipped += scale > 0.0f && std::fabs(xv * factor_of(scale, q.decode_scale())) > 6.0f;
      flushed += xv != 0.0f && q.value(r, c) == 0.0f;
    }
  const double n = static_cast<double>(rows * cols);
  CHECK(e.elements == rows * cols);
  CHECK(e.relative_mse == Approx(err / sig).epsilon(1e-12));
  CHECK(e.sqnr_db == Approx(-10.0 * std::log10(err / sig)).epsilon(1e-12));
  CHECK(e.max_abs_error == max_err);
  CHECK(e.clipped_fraction == Approx(clipped / n).epsilon(1e-15));
  CHECK(e.flushed_fraction == Approx(flushed / n).epsilon(1e-15));
  CHECK(e.blocks == q.stats().blocks);
  CHECK(e.zero_scales == q.stats().zero_scales);
  CHECK(e.saturated_scales == q.stats().saturated_scales);
  CHECK(e.nan_scales == q.stats().nan_scales);
}

} // namespace

TEST_CASE("measure_error agrees with a direct computation", "[quantize][properties][metrics]") {
  for (int kind = 0; kind < 4; ++kind)
    for (bool columnwise : {false, true}) {
      INFO("kind " << kind << (columnwise ? " columnwise" : " rowwise"));
      const std::vector<float> x = make_data(kind, 29, 83, 400 + kind);
      quantize_options options;
      options.columnwise = columnwise;
      options.encode_scale = te_encode_scale(amax_of(x));
      check_metrics<nvfp4>(x, 29, 83, options);
      check_metrics<ue5m3_fp4>(x, 29, 83, options);
      options.encode_scale = 1.0f;
      check_metrics<mxfp4>(x, 29, 83, options);
    }
  // N(0,1) data: NVFP4 lands near the published SQNR (about 20 dB for N(0,1) at this size).
  const std::vector<float> x = make_data(0, 64, 256, 4);
  quantize_options options;
  options.encode_scale = te_encode_scale(amax_of(x));
  const auto e =
      measure_error(matrix_view<const float>(x.data(), 64, 256),
                    quantize<nvfp4>(matrix_view<const float>(x.data(), 64, 256), options));
  CHECK(e.sqnr_db > 15.0);
  CHECK(e.sqnr_db < 25.0);
}

TEST_CASE("measure_error counts clipped and flushed elements", "[quantize][properties][metrics]") {
  // NVFP4, s_enc = 1, one row of four blocks:
  // block 0: max 6.37 -> scale rne(6.37 · fp32(1/6)) = 1.0 (below 1.0625), so 6.37 clips;
  //          0.2 -> y = 0.2 -> 0 (flushed); 0 stays 0 (not flushed); 1 exact.
  // block 1: 16 × 1e-6: scale rne(1.67e-7) = 0 (UE4M3 min 2^-9): 16 flushed, none clipped.
  // block 2: max 12 -> scale 2, f_b = 0.5: 12 -> 6, 0.4 -> 0.2 -> 0 (flushed).
  // block 3: a 13-element tail (cols = 61) of 0.5 · k, k = 1..13: see below.
  std::vector<float> x(61, 0.0f);
  x[0] = 6.37f;
  x[1] = 0.2f;
  x[2] = 1.0f;
  for (int j = 16; j < 32; ++j)
    x[j] = 1.0e-6f;
  x[32] = 12.0f;
  x[33] = 0.4f;
  x[34] = -3.0f;
  for (int j = 48; j < 61; ++j)
    x[j] = 0.5f * static_cast<float>(j - 47);
  quantize_options options;
  const matrix_view<const float> view(x.data(), 1, 61);
  const auto q = quantize<nvfp4>(view, options);
  REQUIRE(static_cast<float>(q.block_scale(0, 0)) == 1.0f);
  REQUIRE(static_cast<float>(q.block_scale(0, 16)) == 0.0f);
  REQUIRE(static_cast<float>(q.block_scale(0, 32)) == 2.0f);
  // Block 3: amax 6.5, 6.5 · fp32(1/6) = 1.0833 -> 1.125 (0x39); f_b = 1/1.125: 6.5 -> 5.78 -> 6
  // (not clipped); 0.5 -> 0.444 -> 0.5 (kept); 5.5 -> 4.89 -> 4 decodes to 4.5, the largest
  // error (1.0; 6.37 -> 6 is off by 0.37, 0.4 -> 0 by 0.4).
  REQUIRE(static_cast<float>(q.block_scale(0, 48)) == 1.125f);
  const quantization_error e = measure_error(view, q);
  CHECK(e.elements == 61);
  CHECK(e.clipped_fraction == Approx(1.0 / 61));  // 6.37 only (12 -> 6 exactly is not clipped)
  CHECK(e.flushed_fraction == Approx(18.0 / 61)); // 0.2, 16 × 1e-6, 0.4
  CHECK(e.zero_scales == 1);
  CHECK(e.blocks == 4);
  CHECK(e.max_abs_error == 1.0);
}
