// The reference GEMM on block-scaled operands (gemm/reference.hpp) against an independent oracle,
// hand-computed cases, the Hadamard transform, special values and bad shapes.
//
// Why the oracle comparison is bit-exact. The oracle dequantizes each operand without its tensor
// scale (element · block scale: at most 16 significant bits, exact in double), forms every
// product (exact: at most 32 significant bits, or 40 against a float operand, far inside
// double's range) and sums them with Shewchuk's algorithm (Python's math.fsum), which returns the
// exact sum rounded to nearest-even: an algorithm independent of the reference's fixed-point
// accumulator. A plain double sum would not do: the terms of one output span many binades
// (UE8M0 scales differ by up to 2^254), so two summation orders can round differently. Both
// sides thus hold the same double acc, the exact sum rounded once; the epilogue is the same
// sequence of IEEE operations on the same inputs (t = s_a · s_b exact, t · acc, then alpha · that
// or fma(alpha, that, beta · C), then float), so the floats agree to the last bit.
#include <blockscale/blockscale.hpp>
#include <blockscale/host/gemm_reference.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "catch.hpp"

using namespace blockscale;

namespace {

constexpr float nan_f = std::numeric_limits<float>::quiet_NaN();

/// math.fsum (CPython, Shewchuk's msum with the final half-way correction): the exact sum of
/// finite doubles rounded to nearest-even, assuming no intermediate overflow.
double fsum(const std::vector<double>& terms) {
  std::vector<double> partials;
  for (double x : terms) {
    std::size_t i = 0;
    for (std::size_t j = 0; j < partials.size(); ++j) {
      double y = partials[j];
      if (std::fabs(x) < std::fabs(y))
        std::swap(x, y);
      const double hi = x + y;
      const double lo = y - (hi - x);
      if (lo != 0.0)
        partials[i++] = lo;
      x = hi;
    }
    partials.resize(i);
    partials.push_back(x);
  }
  double hi = 0.0;
  std::size_t n = partials.size();
  if (n > 0) {
    hi = partials[--n];
    double lo = 0.0;
    while (n > 0) {
      const double x = hi;
      const double y = partials[--n];
      hi = x + y;
      const double yr = hi - x;
      lo = y - yr;
      if (lo != 0.0)
        break;
    }
    if (n > 0 && ((lo < 0.0 && partials[n - 1] < 0.0) || (lo > 0.0 && partials[n - 1] > 0.0))) {
      const double y = lo * 2.0;
      const double x = hi + y;
      const double yr = x - hi;
      if (y == yr)
        hi = x;
    }
  }
  return hi;
}

/// An operand as the oracle sees it: rows × length exact values (element · block scale, or the
/// float itself) and the tensor scale.
struct operand {
  std::size_t rows = 0, length = 0;
  std::vector<double> values;
  double tensor_scale = 1.0;
  double at(std::size_t r, std::size_t k) const { return values[r * length + k]; }
};

template <class F>
operand dequantized(const quantized_matrix<F>& q) {
  operand d;
  d.rows = q.rows();
  d.length = q.padded_cols();
  d.tensor_scale = q.decode_scale();
  for (std::size_t r = 0; r < q.rows(); ++r)
    for (std::size_t k = 0; k < q.padded_cols(); ++k)
      d.values.push_back(static_cast<double>(static_cast<float>(q.element(r, k))) *
                         static_cast<double>(static_cast<float>(q.block_scale(r, k))));
  return d;
}

operand plain(const std::vector<float>& x, std::size_t rows, std::size_t cols) {
  operand d;
  d.rows = rows;
  d.length = cols;
  d.values.assign(x.begin(), x.end());
  return d;
}

/// The exact sums Σ_{k < length} a(i, k) · b(j, k), rounded once to double (M × N).
std::vector<double> oracle_sums(const operand& a, const operand& b, std::size_t length) {
  std::vector<double> sums(a.rows * b.rows), terms(length);
  for (std::size_t i = 0; i < a.rows; ++i)
    for (std::size_t j = 0; j < b.rows; ++j) {
      for (std::size_t k = 0; k < length; ++k)
        terms[k] = a.at(i, k) * b.at(j, k);
      sums[i * b.rows + j] = fsum(terms);
    }
  return sums;
}

/// The oracle's epilogue (the operation sequence that gemm/reference.hpp documents).
std::vector<float> oracle_epilogue(const std::vector<double>& sums, double s_a, double s_b,
                                   float alpha, float beta, const std::vector<float>& c) {
  std::vector<float> out(sums.size());
  for (std::size_t i = 0; i < sums.size(); ++i) {
    const double scaled = (s_a * s_b) * sums[i];
    out[i] = beta == 0.0f ? static_cast<float>(static_cast<double>(alpha) * scaled)
                          : static_cast<float>(std::fma(static_cast<double>(alpha), scaled,
                                                        static_cast<double>(beta) * c[i]));
  }
  return out;
}

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

/// Counts the outputs whose bits differ, reporting the first.
std::size_t mismatches(const std::vector<float>& got, const std::vector<float>& want) {
  std::size_t count = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (bits_of(got[i]) != bits_of(want[i])) {
      if (count == 0) {
        INFO("first mismatch at " << i << ": got " << got[i] << ", want " << want[i]);
        CHECK(got[i] == want[i]);
      }
      ++count;
    }
  return count;
}

/// Gaussian values times 2^e, e drawn per run of 8 in [-spread, spread], with some exact zeros:
/// blocks and segments of very different magnitudes.
std::vector<float> random_matrix(std::size_t rows, std::size_t cols, std::uint32_t seed,
                                 int spread = 12) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-spread, spread);
  std::uniform_int_distribution<int> percent(0, 99);
  std::vector<float> x(rows * cols);
  int e = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (i % 8 == 0)
      e = exponent(rng);
    x[i] = percent(rng) < 5 ? 0.0f : std::ldexp(normal(rng), e);
  }
  return x;
}

/// How to quantize one operand: options plus whether to measure a current tensor scale.
struct operand_setup {
  quantize_options options;
  float numerator = 0.0f; ///< nonzero: s_enc = encode_scale_from_amax(numerator, amax)
};

template <class F>
quantized_matrix<F> make(const std::vector<float>& x, std::size_t rows, std::size_t cols,
                         operand_setup r) {
  const matrix_view<const float> view(x.data(), rows, cols);
  if (r.numerator != 0.0f)
    r.options.encode_scale = encode_scale_from_amax(r.numerator, measure_amax<F>(view));
  return quantize<F>(view, r.options);
}

struct gemm_shape {
  std::size_t m, n, k;
};
const gemm_shape shapes[] = {{1, 1, 1}, {3, 5, 17}, {37, 29, 45}, {129, 7, 200}, {64, 64, 64}};

struct scalars {
  float alpha, beta;
};
const scalars variants[] = {{1.0f, 0.0f}, {-0.75f, 0.0f}, {1.5f, -1.25f}, {0.3f, 2.0f}};

/// Runs `gemm(alpha, beta, c)` for every alpha/beta variant and compares it with the oracle's
/// sums; beta = 0 runs get NaN in C.
void check_variants(const std::vector<double>& sums, double s_a, double s_b, std::size_t m,
                    std::size_t n, std::uint32_t seed,
                    const std::function<void(matrix_view<float>, float, float)>& gemm) {
  const std::vector<float> c0 = random_matrix(m, n, seed, 4);
  for (const scalars& v : variants) {
    INFO("alpha " << v.alpha << ", beta " << v.beta);
    std::vector<float> c = v.beta == 0.0f ? std::vector<float>(m * n, nan_f) : c0;
    gemm(matrix_view<float>(c.data(), m, n), v.alpha, v.beta);
    CHECK(mismatches(c, oracle_epilogue(sums, s_a, s_b, v.alpha, v.beta, c0)) == 0);
  }
}

/// Two quantized operands over every shape and both block shapes.
template <class FA, class FB>
void check_quantized_pair(operand_setup ra, operand_setup rb) {
  std::uint32_t seed = 1;
  for (const block_shape bs : {block_shape::rowwise, block_shape::tile})
    for (const gemm_shape& s : shapes) {
      INFO("M " << s.m << ", N " << s.n << ", K " << s.k << ", tile " << (bs == block_shape::tile));
      ra.options.shape = rb.options.shape = bs;
      const auto a = make<FA>(random_matrix(s.m, s.k, seed++), s.m, s.k, ra);
      const auto b = make<FB>(random_matrix(s.n, s.k, seed++), s.n, s.k, rb);
      const operand da = dequantized(a), db = dequantized(b);
      const auto sums = oracle_sums(da, db, std::min(da.length, db.length));
      check_variants(sums, da.tensor_scale, db.tensor_scale, s.m, s.n, seed++,
                     [&](matrix_view<float> c, float alpha, float beta) {
                       gemm::reference(a, b, c, alpha, beta);
                     });
    }
}

/// A quantized a and a float b (or the reverse when `float_first`).
template <class F>
void check_mixed_pair(operand_setup r, bool float_first) {
  std::uint32_t seed = 100;
  for (const block_shape bs : {block_shape::rowwise, block_shape::tile})
    for (const gemm_shape& s : shapes) {
      INFO("M " << s.m << ", N " << s.n << ", K " << s.k << ", tile " << (bs == block_shape::tile));
      r.options.shape = bs;
      const std::size_t q_rows = float_first ? s.n : s.m, f_rows = float_first ? s.m : s.n;
      const auto q = make<F>(random_matrix(q_rows, s.k, seed++), q_rows, s.k, r);
      const std::vector<float> f = random_matrix(f_rows, s.k, seed++);
      const matrix_view<const float> fv(f.data(), f_rows, s.k);
      const operand dq = dequantized(q), df = plain(f, f_rows, s.k);
      const auto sums = float_first ? oracle_sums(df, dq, s.k) : oracle_sums(dq, df, s.k);
      check_variants(sums, float_first ? 1.0 : dq.tensor_scale, float_first ? dq.tensor_scale : 1.0,
                     s.m, s.n, seed++, [&](matrix_view<float> c, float alpha, float beta) {
                       if (float_first)
                         gemm::reference(fv, q, c, alpha, beta);
                       else
                         gemm::reference(q, fv, c, alpha, beta);
                     });
    }
}

operand_setup nvfp4_setup() {
  operand_setup r;
  r.numerator = 6.0f * 448.0f; // current tensor scaling, as Transformer Engine
  return r;
}
operand_setup fixed_setup(float s_enc) {
  operand_setup r;
  r.options.encode_scale = s_enc;
  return r;
}

template <class F>
std::string error_of(const F& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

} // namespace

TEST_CASE("exact_sum returns the exact sum rounded once", "[gemm]") {
  using gemm::detail::exact_sum;
  const auto sum_of = [](const std::vector<double>& terms) {
    exact_sum s;
    for (double t : terms)
      s.add(t);
    return s.round();
  };
  const double two53 = 9007199254740992.0, tiny = std::ldexp(1.0, -1074);
  const double big = std::numeric_limits<double>::max();
  SECTION("ties, sticky bits, subnormals, cancellation, intermediate overflow") {
    CHECK(sum_of({}) == 0.0);
    CHECK(sum_of({two53, 1.0}) == two53);                            // tie to even
    CHECK(sum_of({two53, 1.0, std::ldexp(1.0, -100)}) == two53 + 2); // sticky breaks the tie
    CHECK(sum_of({two53, 1.0, -std::ldexp(1.0, -100)}) == two53);    // below the tie
    CHECK(sum_of({two53 + 2, 1.0}) == two53 + 4);                    // tie to even, up
    CHECK(sum_of({tiny, tiny, tiny}) == 3 * tiny);                   // subnormal, exact
    CHECK(sum_of({1e300, 1.0, -1e300}) == 1.0);                      // cancellation
    CHECK(sum_of({big, big, -big}) == big);                          // no intermediate overflow
    CHECK(sum_of({big, big}) == std::numeric_limits<double>::infinity());
    CHECK(sum_of({-3.5, 1.25}) == -2.25);
    CHECK(std::signbit(sum_of({-0.0})) == false); // an exact zero is +0
  }
  SECTION("non-finite terms follow IEEE") {
    const double inf = std::numeric_limits<double>::infinity();
    CHECK(sum_of({1.0, inf}) == inf);
    CHECK(sum_of({-inf, 1.0}) == -inf);
    CHECK(std::isnan(sum_of({inf, -inf})));
    CHECK(std::isnan(sum_of({1.0, std::numeric_limits<double>::quiet_NaN()})));
  }
  SECTION("agrees with fsum on random wide-range terms") {
    std::mt19937_64 rng(7);
    std::uniform_int_distribution<int> exponent(-1074, 960), count(1, 60), pick(0, 3);
    std::uniform_real_distribution<double> unit(-1.0, 1.0);
    std::size_t bad = 0;
    for (int trial = 0; trial < 3000; ++trial) {
      std::vector<double> terms(static_cast<std::size_t>(count(rng)));
      const int centre = exponent(rng);
      for (double& t : terms) {
        // Mostly terms near one magnitude (heavy cancellation and carries), some anywhere.
        const int e = pick(rng) == 0 ? exponent(rng) : centre + pick(rng) * 20;
        t = std::ldexp(unit(rng), e);
      }
      if (pick(rng) == 0)
        terms.push_back(-fsum(terms)); // sums to (nearly) zero
      bad += sum_of(terms) != fsum(terms);
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("reference GEMM equals the exact double oracle bit for bit", "[gemm]") {
  SECTION("nvfp4 x nvfp4") {
    check_quantized_pair<nvfp4, nvfp4>(nvfp4_setup(), nvfp4_setup());
  }
  SECTION("ue5m3_fp4 x ue5m3_fp4") {
    check_quantized_pair<ue5m3_fp4, ue5m3_fp4>(fixed_setup(3.0f), fixed_setup(0.7f));
  }
  SECTION("mxfp4 x mxfp4, OCP floor") {
    check_quantized_pair<mxfp4, mxfp4>(fixed_setup(1.0f), fixed_setup(1.0f));
  }
  SECTION("mxfp4 x mxfp4, rceil") {
    operand_setup r = fixed_setup(1.0f);
    r.options.rule = scale_rules::rceil();
    check_quantized_pair<mxfp4, mxfp4>(r, r);
  }
  SECTION("mxfp8 x mxfp8") {
    check_quantized_pair<mxfp8, mxfp8>(fixed_setup(1.0f), fixed_setup(0.375f));
  }
  SECTION("nvfp4 x mxfp4 (blocks of 16 and 32)") {
    check_quantized_pair<nvfp4, mxfp4>(nvfp4_setup(), fixed_setup(1.0f));
  }
  SECTION("nvfp4 x float") {
    check_mixed_pair<nvfp4>(nvfp4_setup(), false);
  }
  SECTION("float x ue5m3_fp4") {
    check_mixed_pair<ue5m3_fp4>(fixed_setup(5.0f), true);
  }
  SECTION("E5M2 elements take the product path") {
    // 32 · 57344² spans more than 53 bits above E5M2's 2^-16 lsb squared: no segment sums.
    using e5m2_fp8 = block_format<e5m2, 32, ue8m0>;
    static_assert(!gemm::detail::segment_sum_is_exact<e5m2_fp8, e5m2_fp8>(), "");
    static_assert(gemm::detail::segment_sum_is_exact<mxfp8, mxfp8>(), "");
    static_assert(gemm::detail::segment_sum_is_exact<nvfp4, mxfp4>(), "");
    check_quantized_pair<e5m2_fp8, mxfp8>(fixed_setup(1.0f), fixed_setup(1.0f));
  }
}

/// (NVFP4 x NVFP4 cannot show it: its products are multiples of 2^-20 below 2^23, so any double
/// sum of fewer than 2^30 of them is exact; UE8M0 scales span 2^254.)
/// Operands whose large products cancel exactly: A = [P | P'] and B = [Q | -Q], where P' equals
/// P except in its last block of 32 (small values in both). The exact sum is a small residue that
/// a plain double sum in any fixed order gets wrong, so the bitwise comparison with the oracle
/// fails for an accumulator that is not exact.
template <class FA, class FB>
void check_cancellation(int spread, int spread_b) {
  const std::size_t m = 9, n = 11, h = 96, k = 2 * h;
  const std::vector<float> p = random_matrix(m, h, 31, spread),
                           q = random_matrix(n, h, 32, spread_b);
  const std::vector<float> small = random_matrix(m, 64, 33, 2);
  std::vector<float> x(m * k), w(n * k);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t c = 0; c < h; ++c) {
      const bool last = c >= h - 32;
      x[i * k + c] = last ? std::ldexp(small[i * 64 + c - (h - 32)], -spread) : p[i * h + c];
      x[i * k + h + c] =
          last ? std::ldexp(small[i * 64 + 32 + c - (h - 32)], -spread) : p[i * h + c];
    }
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t c = 0; c < h; ++c) {
      w[j * k + c] = q[j * h + c];
      w[j * k + h + c] = -q[j * h + c];
    }
  const auto a = make<FA>(x, m, k, fixed_setup(1.0f));
  const auto b = make<FB>(w, n, k, fixed_setup(1.0f));
  const operand da = dequantized(a), db = dequantized(b);
  const auto sums = oracle_sums(da, db, k);
  std::size_t plain_differs = 0; // how often a plain double sum in k order would be wrong
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double plain_sum = 0.0;
      for (std::size_t c = 0; c < k; ++c)
        plain_sum += da.at(i, c) * db.at(j, c);
      plain_differs += static_cast<float>(plain_sum) != static_cast<float>(sums[i * n + j]);
    }
  INFO(plain_differs << " of " << m * n << " outputs differ from a plain double sum");
  CHECK(plain_differs > 0);
  check_variants(sums, da.tensor_scale, db.tensor_scale, m, n, 34,
                 [&](matrix_view<float> c, float alpha, float beta) {
                   gemm::reference(a, b, c, alpha, beta);
                 });
}

TEST_CASE("reference GEMM is exact where large products cancel", "[gemm]") {
  SECTION("mxfp8 x mxfp8") {
    check_cancellation<mxfp8, mxfp8>(40, 40);
  }
  SECTION("mxfp4 x nvfp4") {
    check_cancellation<mxfp4, nvfp4>(40, 3);
  }
  SECTION("by hand: 2^100 - 2^100 leaves 2^-100") {
    // One MXFP8 row: 32 × 2^100, 32 × 2^-100, 32 × -2^100 (elements 256 = 2^8 with scales
    // 2^92, 2^-108, 2^92); times ones. Exact: 32 · 2^-100 = 2^-95; a plain double sum gives 0.
    std::vector<float> x(96), ones(96, 1.0f);
    for (std::size_t c = 0; c < 96; ++c)
      x[c] = c < 32 ? 0x1p100f : c < 64 ? 0x1p-100f : -0x1p100f;
    const auto a = quantize<mxfp8>(matrix_view<const float>(x.data(), 1, 96));
    const auto b = quantize<mxfp8>(matrix_view<const float>(ones.data(), 1, 96));
    REQUIRE(a.value(0, 0) == 0x1p100f);
    REQUIRE(a.value(0, 40) == 0x1p-100f);
    float c = 0.0f;
    gemm::reference(a, b, matrix_view<float>(&c, 1, 1));
    CHECK(c == 0x1p-95f);
  }
}

TEST_CASE("reference GEMM: threads, layouts and columnwise operands change nothing", "[gemm]") {
  const std::size_t m = 129, n = 33, k = 72;
  const std::vector<float> x = random_matrix(m, k, 11), w = random_matrix(n, k, 12);
  std::vector<float> wt(k * n); // Wᵀ, K × N
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t p = 0; p < k; ++p)
      wt[p * n + j] = w[j * k + p];
  for (const block_shape bs : {block_shape::rowwise, block_shape::tile}) {
    INFO("tile " << (bs == block_shape::tile));
    operand_setup r = nvfp4_setup();
    r.options.shape = bs;
    const auto a = make<nvfp4>(x, m, k, r);
    const auto b = make<nvfp4>(w, n, k, r);
    operand_setup rc = r;
    rc.options.columnwise = true;
    rc.options.layout = scale_layout::tensor_core;
    const auto b_columnwise = make<nvfp4>(wt, k, n, rc); // the transpose of Wᵀ: N × K
    REQUIRE(b_columnwise.rows() == n);
    REQUIRE(b_columnwise.cols() == k);

    std::vector<float> c1(m * n), c2(m * n), c3(m * n);
    gemm::reference(a, b, matrix_view<float>(c1.data(), m, n));
    gemm::reference(a, b, matrix_view<float>(c2.data(), m, n), 1.0f, 0.0f, 3);
    gemm::reference(a, b_columnwise, matrix_view<float>(c3.data(), m, n), 1.0f, 0.0f, 0);
    CHECK(mismatches(c2, c1) == 0);
    CHECK(mismatches(c3, c1) == 0);
  }
  SECTION("a strided output view") {
    const auto a = make<ue5m3_fp4>(x, m, k, fixed_setup(1.0f));
    const auto b = make<ue5m3_fp4>(w, n, k, fixed_setup(1.0f));
    std::vector<float> dense(m * n), strided(m * (n + 5), 7.0f);
    gemm::reference(a, b, matrix_view<float>(dense.data(), m, n));
    gemm::reference(a, b, matrix_view<float>(strided.data(), m, n, n + 5), 1.0f, 0.0f, 2);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n + 5; ++j)
        bad += j < n ? bits_of(strided[i * (n + 5) + j]) != bits_of(dense[i * n + j])
                     : strided[i * (n + 5) + j] != 7.0f;
    CHECK(bad == 0);
  }
}

TEST_CASE("reference GEMM: hand-computed cases pin the scale application", "[gemm]") {
  SECTION("a row of 6s times a row of 0.5s, quantized as NVFP4 with s_enc = 1") {
    // a: amax 6 -> S = e4m3(6 · fp32(1/6)) = 1, elements 6. b: amax 0.5 -> S = e4m3(0.0833...)
    // = 0.0859375 (1.375 · 2^-4), element e2m1(0.5 / 0.0859375 = 5.82) = 6, decoded 0.515625.
    // C = 16 · 6 · 1 · 6 · 0.0859375 = 49.5.
    const std::vector<float> sixes(16, 6.0f), halves(16, 0.5f);
    const auto a = quantize<nvfp4>(matrix_view<const float>(sixes.data(), 1, 16));
    const auto b = quantize<nvfp4>(matrix_view<const float>(halves.data(), 1, 16));
    REQUIRE(static_cast<float>(b.block_scale(0, 0)) == 0.0859375f);
    float c = 0.0f;
    gemm::reference(a, b, matrix_view<float>(&c, 1, 1));
    CHECK(c == 49.5f);
    c = 1.0f;
    gemm::reference(a, b, matrix_view<float>(&c, 1, 1), 2.0f, 3.0f); // 2 · 49.5 + 3 · 1
    CHECK(c == 102.0f);
    // Against the unquantized row of 0.5s: 16 · 6 · 0.5 = 48.
    c = 0.0f;
    gemm::reference(a, matrix_view<const float>(halves.data(), 1, 16),
                    matrix_view<float>(&c, 1, 1));
    CHECK(c == 48.0f);
  }
  SECTION("built by hand: NVFP4 blocks of 16 against one MXFP4 block of 32, tensor scales") {
    // a (NVFP4, s_dec 0.25): block 0 = sixteen 6s (code 7) with S = 2 (UE4M3 0x40), block 1 =
    // sixteen 0.5s (code 1) with S = 448 (0x7E). b (MXFP4, s_dec 4): thirty-two 1s (code 2) with
    // S = 2^-3 (UE8M0 124). C = 0.25 · 4 · (16 · 6 · 2 · 2^-3 + 16 · 0.5 · 448 · 2^-3) = 472.
    quantized_shape shape;
    shape.rows = 1;
    shape.cols = 32;
    quantized_matrix<nvfp4> a(shape);
    const quantized_view<nvfp4> av = a.view();
    for (std::size_t i = 0; i < 8; ++i)
      av.elements()[i] = 0x77;
    for (std::size_t i = 8; i < 16; ++i)
      av.elements()[i] = 0x11;
    av.scales()[0] = 0x40;
    av.scales()[1] = 0x7E;
    *av.decode_scale_data() = 0.25f;
    quantized_matrix<mxfp4> b(shape);
    const quantized_view<mxfp4> bv = b.view();
    for (std::size_t i = 0; i < b.storage().element_bytes; ++i)
      bv.elements()[i] = 0x22;
    bv.scales()[0] = 124;
    *bv.decode_scale_data() = 4.0f;
    REQUIRE(a.value(0, 0) == 3.0f);
    REQUIRE(a.value(0, 31) == 56.0f);
    REQUIRE(b.value(0, 5) == 0.5f);
    float c = nan_f;
    gemm::reference(a, b, matrix_view<float>(&c, 1, 1));
    CHECK(c == 472.0f);
    c = nan_f;
    gemm::reference(b, a, matrix_view<float>(&c, 1, 1), -0.5f);
    CHECK(c == -236.0f);
  }
  SECTION("K = 1 and K = 0") {
    const float one = 3.0f, other = -1.5f;
    const auto a = quantize<ue5m3_fp4>(matrix_view<const float>(&one, 1, 1));
    const auto b = quantize<ue5m3_fp4>(matrix_view<const float>(&other, 1, 1));
    float c = 0.0f;
    gemm::reference(a, b, matrix_view<float>(&c, 1, 1));
    CHECK(c == -4.5f); // 3 = 6 · 0.5 and -1.5 = -6 · 0.25, UE5M3 scales 0.5 and 0.25
    const auto empty_a = quantize<nvfp4>(matrix_view<const float>(nullptr, 2, 0));
    const auto empty_b = quantize<nvfp4>(matrix_view<const float>(nullptr, 3, 0));
    std::vector<float> c6(6, 5.0f);
    gemm::reference(empty_a, empty_b, matrix_view<float>(c6.data(), 2, 3), 1.0f, 0.5f);
    CHECK(c6 == std::vector<float>(6, 2.5f));
  }
}

TEST_CASE("reference GEMM with the Hadamard transform on both operands", "[gemm]") {
  // K = 40: the last 16-group holds 8 columns of data and 8 of padding, which the transform
  // spreads over all 16; the reference sums k < 48 and the transform cancels.
  const std::size_t m = 24, n = 20, k = 40, padded = 48;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(m * k), w(n * k);
  for (auto& v : x)
    v = normal(rng);
  for (auto& v : w)
    v = normal(rng);
  operand_setup r = nvfp4_setup();
  r.options.hadamard = true;
  const auto a = make<nvfp4>(x, m, k, r);
  const auto b = make<nvfp4>(w, n, k, r);
  std::vector<float> c(m * n);
  gemm::reference(a, b, matrix_view<float>(c.data(), m, n));

  // The transformed, padded rows as quantize() saw them (float, the same forward()).
  const hadamard16 transform = hadamard16::te_default();
  const auto transformed = [&](const std::vector<float>& v, std::size_t rows) {
    std::vector<float> t(rows * padded, 0.0f);
    for (std::size_t i = 0; i < rows; ++i) {
      for (std::size_t p = 0; p < k; ++p)
        t[i * padded + p] = v[i * k + p];
      for (std::size_t g = 0; g < padded; g += 16)
        transform.forward(&t[i * padded + g], &t[i * padded + g]);
    }
    return t;
  };
  const std::vector<float> xt = transformed(x, m), wt = transformed(w, n);
  const operand da = dequantized(a), db = dequantized(b);
  REQUIRE(da.length == padded);

  // Bound, per output: |C_ref - A·Bᵀ| <= Σ_k |â_k - a'_k| |b̂_k| + |a'_k| |b̂_k - b'_k|
  // (quantization error, â = dequantized with s_dec, a' = the float transform)
  // + Σ_groups (2 gamma4 + gamma4²) α_g β_g (the float transform's error, test_hadamard.cpp)
  // + 2^-22 |A·Bᵀ| + 1e-30 (the reference's own rounding, one float rounding and a few double)
  // + K 2^-53 Σ|a_k b_k| (this test's plain double sum for A·Bᵀ).
  const double gamma4 = 4 * 0x1p-24 / (1 - 4 * 0x1p-24);
  double worst = 0.0, error_sq = 0.0, norm_sq = 0.0, truncated_error_sq = 0.0;
  std::size_t truncated_differs = 0, violations = 0;
  const auto truncated =
      oracle_epilogue(oracle_sums(da, db, k), da.tensor_scale, db.tensor_scale, 1.0f, 0.0f, c);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double exact = 0.0, magnitude = 0.0, quantization = 0.0, transform_error = 0.0;
      for (std::size_t p = 0; p < k; ++p) {
        exact += static_cast<double>(x[i * k + p]) * w[j * k + p];
        magnitude += std::fabs(static_cast<double>(x[i * k + p]) * w[j * k + p]);
      }
      for (std::size_t p = 0; p < padded; ++p) {
        const double ah = da.at(i, p) * da.tensor_scale, bh = db.at(j, p) * db.tensor_scale;
        const double at = xt[i * padded + p], bt = wt[j * padded + p];
        quantization += std::fabs(ah - at) * std::fabs(bh) + std::fabs(at) * std::fabs(bh - bt);
      }
      for (std::size_t g = 0; g < k; g += 16) {
        double alpha_g = 0.0, beta_g = 0.0;
        for (std::size_t p = g; p < std::min(g + 16, k); ++p) {
          alpha_g += std::fabs(x[i * k + p]);
          beta_g += std::fabs(w[j * k + p]);
        }
        transform_error += (2 * gamma4 + gamma4 * gamma4) * alpha_g * beta_g;
      }
      const double bound = quantization + transform_error + 0x1p-22 * std::fabs(exact) +
                           k * 0x1p-53 * magnitude + 1e-30;
      const double error = std::fabs(c[i * n + j] - exact);
      violations += error > bound;
      worst = std::max(worst, error / bound);
      error_sq += error * error;
      norm_sq += exact * exact;
      const double te = truncated[i * n + j] - exact;
      truncated_error_sq += te * te;
      truncated_differs += bits_of(truncated[i * n + j]) != bits_of(c[i * n + j]);
    }
  INFO("relative Frobenius error " << std::sqrt(error_sq / norm_sq) << ", summing only k < 40: "
                                   << std::sqrt(truncated_error_sq / norm_sq)
                                   << "; worst error / bound " << worst);
  CHECK(violations == 0);
  // NVFP4 on Gaussian data: relative RMS element error about 0.1 (docs/quantization.md quality
  // table), so a 40-term dot product of independent data is off by about sqrt(2) · 0.1.
  CHECK(std::sqrt(error_sq / norm_sq) < 0.25);
  // The transformed padding matters: leaving it out is a different, much worse result.
  CHECK(truncated_differs > m * n / 2);
  CHECK(truncated_error_sq > 2 * error_sq);
  // The reference is the exact oracle over the padded range.
  CHECK(mismatches(c, oracle_epilogue(oracle_sums(da, db, padded), da.tensor_scale, db.tensor_scale,
                                      1.0f, 0.0f, c)) == 0);

  SECTION("NVFP4 (padded to 48) against MXFP4 (padded to 64), both transformed") {
    operand_setup rm = fixed_setup(1.0f);
    rm.options.hadamard = true;
    const auto bm = make<mxfp4>(w, n, k, rm);
    REQUIRE(bm.padded_cols() == 64);
    std::vector<float> cm(m * n);
    gemm::reference(a, bm, matrix_view<float>(cm.data(), m, n));
    const operand dbm = dequantized(bm);
    CHECK(mismatches(cm, oracle_epilogue(oracle_sums(da, dbm, padded), da.tensor_scale,
                                         dbm.tensor_scale, 1.0f, 0.0f, cm)) == 0);
    double e2 = 0.0;
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        double exact = 0.0;
        for (std::size_t p = 0; p < k; ++p)
          exact += static_cast<double>(x[i * k + p]) * w[j * k + p];
        e2 += (cm[i * n + j] - exact) * (cm[i * n + j] - exact);
      }
    INFO("relative Frobenius error " << std::sqrt(e2 / norm_sq));
    CHECK(std::sqrt(e2 / norm_sq) < 0.35); // MXFP4 floor: coarser scales, about 0.15 RMS
  }
}

TEST_CASE("reference GEMM propagates NaN and Inf", "[gemm]") {
  const std::size_t m = 4, n = 3, k = 40;
  std::vector<float> x = random_matrix(m, k, 21, 2), w = random_matrix(n, k, 22, 2);
  for (auto& v : w)
    v = v == 0.0f ? 1.0f : v;
  x[1 * k + 20] = nan_f; // row 1, block 1 of A: a NaN scale, elements stored as 0
  SECTION("a NaN block scale makes every output of its row NaN") {
    const auto a = make<nvfp4>(x, m, k, nvfp4_setup());
    REQUIRE(std::isnan(static_cast<float>(a.block_scale(1, 20))));
    const auto b = make<mxfp4>(w, n, k, fixed_setup(1.0f));
    std::vector<float> c(m * n);
    gemm::reference(a, b, matrix_view<float>(c.data(), m, n));
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        INFO("C(" << i << ", " << j << ") = " << c[i * n + j]);
        CHECK(std::isnan(c[i * n + j]) == (i == 1));
      }
  }
  SECTION("Inf in a float operand: ±Inf against nonzero elements, NaN against zeros") {
    x[1 * k + 20] = 1.0f;
    x[2 * k + 7] = 0.0f; // A(2, 7) decodes to 0
    const auto a = make<nvfp4>(x, m, k, nvfp4_setup());
    REQUIRE(a.value(0, 7) != 0.0f);
    REQUIRE(a.value(2, 7) == 0.0f);
    w[0 * k + 7] = std::numeric_limits<float>::infinity();
    std::vector<float> c(m * n);
    gemm::reference(a, matrix_view<const float>(w.data(), n, k),
                    matrix_view<float>(c.data(), m, n));
    CHECK(c[0 * n + 0] == (a.value(0, 7) > 0 ? 1 : -1) * std::numeric_limits<float>::infinity());
    CHECK(std::isnan(c[2 * n + 0]));
    CHECK(std::isfinite(c[0 * n + 1]));
  }
}

TEST_CASE("reference GEMM rejects bad shapes, naming the argument", "[gemm]") {
  const std::vector<float> x(3 * 32, 1.0f), w(5 * 32, 1.0f);
  const auto a = quantize<nvfp4>(matrix_view<const float>(x.data(), 3, 32));
  const auto b = quantize<nvfp4>(matrix_view<const float>(w.data(), 5, 32));
  const auto b_short = quantize<nvfp4>(matrix_view<const float>(w.data(), 5, 31));
  const matrix_view<const float> wf(w.data(), 5, 32), wf_short(w.data(), 5, 30);
  std::vector<float> c(3 * 5);
  const matrix_view<float> good(c.data(), 3, 5), transposed(c.data(), 5, 3), narrow(c.data(), 3, 4);

  const std::string k_mismatch = error_of([&] { gemm::reference(a, b_short, good); });
  INFO(k_mismatch);
  CHECK(contains(k_mismatch, "b has K = 31"));
  CHECK(contains(k_mismatch, "3 x 32"));
  CHECK(contains(error_of([&] { gemm::reference(a, wf_short, good); }), "b has K = 30"));
  CHECK(contains(error_of([&] { gemm::reference(wf_short, a, good); }), "b has K = 32"));

  const std::string c_mismatch = error_of([&] { gemm::reference(a, b, transposed); });
  INFO(c_mismatch);
  CHECK(contains(c_mismatch, "c is 5 x 3"));
  CHECK(contains(c_mismatch, "M x N = 3 x 5"));
  CHECK(contains(error_of([&] { gemm::reference(a, wf, narrow); }), "c is 3 x 4"));
  CHECK(contains(error_of([&] { gemm::reference(wf, a, good); }), "c is 3 x 5"));
  CHECK(error_of([&] { gemm::reference(a, b, good); }).empty());
  CHECK(error_of([&] { gemm::reference(a, wf, good); }).empty());
}

TEST_CASE("reference GEMM rejects operands that disagree on the Hadamard transform", "[gemm]") {
  const std::vector<float> x(3 * 32, 1.5f), w(5 * 32, -0.5f);
  quantize_options plain, transformed, other_signs;
  transformed.hadamard = other_signs.hadamard = true;
  other_signs.transform = hadamard16::from_seed(3);
  const auto a = quantize<nvfp4>(matrix_view<const float>(x.data(), 3, 32), transformed);
  CHECK(a.hadamard());
  CHECK(a.hadamard_signs() == hadamard16::te_default().sign_mask());
  const auto b_plain = quantize<nvfp4>(matrix_view<const float>(w.data(), 5, 32), plain);
  const auto b_other = quantize<nvfp4>(matrix_view<const float>(w.data(), 5, 32), other_signs);
  const auto b_same = quantize<nvfp4>(matrix_view<const float>(w.data(), 5, 32), transformed);
  CHECK(!b_plain.hadamard());
  std::vector<float> c(3 * 5);
  const matrix_view<float> out(c.data(), 3, 5);
  CHECK(contains(error_of([&] { gemm::reference(a, b_plain, out); }), "Hadamard"));
  CHECK(contains(error_of([&] { gemm::reference(a, b_other, out); }), "Hadamard"));
  CHECK(error_of([&] { gemm::reference(a, b_same, out); }).empty());
  // The transform cancels: every output is 32 · 1.5 · (-0.5) = -24 up to quantization error.
  for (float v : c)
    CHECK(v == Approx(-24.0f).epsilon(0.1));
}
