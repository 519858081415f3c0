// The warpgroup-MMA GEMMs of sm_90a (cuda/kernels/gemm_w4a16.hpp) run on the host through the
// emulation of warp-specialised programs (emulation/host_async.hpp): the launchers, the TMA ring,
// the producer's scale multipliers (and, FP4 × FP4, its dequantization of the shared operand into
// the swizzled buffer behind a proxy fence), the in-register dequantization and the warpgroup MMA
// with A in registers, against gemm::reference on the same operands (W4A16: X in BF16 as a float
// matrix).
//
// Two checks. Random operands: within the bound of test_cuda_gemm_host.cpp (the tensor cores'
// truncation, here Hopper's wgmma chained K/16 times). Operands whose every partial sum is exact
// (small integers times powers of two): equal to the reference bit for bit, whatever the order
// of summation, so the dequantized values, their placement in the fragments and B's k order are
// proven exactly. Seeds interleave the warps differently.
#include "catch.hpp"
#include "gemm_operands.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "blockscale/block/block_format.hpp"
#include "blockscale/cuda/gemm.hpp"
#include "blockscale/emulation/host_runner.hpp"
#include "blockscale/host/gemm_reference.hpp"
#include "blockscale/host/quantize.hpp"

using namespace blockscale;

namespace {

struct case_shape {
  std::size_t m, n, k;
};

/// x rounded to bf16, row-major with `ld` elements per row (padding NaN: it must not be read).
struct bf16_matrix {
  std::size_t rows, cols, ld;
  std::vector<bfloat16> bits;
  std::vector<float> values; // dense, rows × cols

  bf16_matrix(const std::vector<float>& x, std::size_t r, std::size_t c, std::size_t l)
      : rows(r), cols(c), ld(l), bits(r * l + 8, bfloat16(std::nanf(""))), values(r * c) {
    for (std::size_t i = 0; i < r; ++i)
      for (std::size_t j = 0; j < c; ++j) {
        bits[i * l + j] = bfloat16(x[i * c + j]);
        values[i * c + j] = static_cast<float>(bits[i * l + j]);
      }
  }
  matrix_view<const bfloat16> view() const { return {bits.data(), rows, cols, ld}; }
};

/// rows × k values that E2M1 holds under power-of-two block scales: per block of 16, E2M1 values
/// times 2^e, e in [-1, 2], the block's first one 6 · 2^e so that its scale is exactly 2^e. Each
/// is a multiple of 2^-2 below 25 (MXFP4's blocks of 32 may round the smaller half, still to
/// multiples of 2^-2).
std::vector<float> exact_fp4_values(std::size_t rows, std::size_t k, std::mt19937_64& gen) {
  std::uniform_int_distribution<int> wi(0, 7), ew(-1, 2);
  const float e2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  std::vector<float> v(rows * k);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < k; j += 16) {
      const float scale = std::ldexp(1.0f, ew(gen));
      for (std::size_t q = j; q < j + 16 && q < k; ++q)
        v[i * k + q] = e2m1[wi(gen)] * ((gen() & 1) != 0 ? -scale : scale);
      v[i * k + j] = 6.0f * scale;
    }
  return v;
}

/// C against the reference, element by element: |C - reference (in Out)| <= bound(i, j, want,
/// |beta · C0|) (0: bit for bit); the first five failures named.
template <class Out, class Bound>
void check_against(const std::vector<Out>& c, const std::vector<float>& ref,
                   const std::vector<float>& c0, case_shape s, float beta, Bound bound) {
  int bad = 0;
  for (std::size_t i = 0; i < s.m; ++i)
    for (std::size_t j = 0; j < s.n; ++j) {
      const double want = static_cast<double>(static_cast<float>(Out(ref[i * s.n + j])));
      const double got = static_cast<double>(static_cast<float>(c[i * s.n + j]));
      const double b = bound(i, j, std::fabs(want) + std::fabs(beta * c0[i * s.n + j]));
      if (!(std::fabs(got - want) <= b) && ++bad <= 5)
        FAIL_CHECK("C(" << i << ", " << j << ") = " << got << ", reference " << want << ", bound "
                        << b);
    }
  CHECK(bad == 0);
}

/// A split-K workspace for `splits` splits of C[m×n] (empty for one split) and its wgmma_split_k.
struct split_workspace {
  std::vector<float> floats;
  cuda::wgmma_split_k split;
  split_workspace(std::uint32_t splits, std::size_t m, std::size_t n)
      : floats(splits > 1 ? splits * m * n : 0, std::nanf("")) {
    split.splits = splits;
    split.workspace = floats.empty() ? nullptr : floats.data();
    split.workspace_size = floats.size();
  }
};

template <class Shape, class Format, class Out>
void check(case_shape s, scale_layout layout, float alpha, float beta, std::uint64_t seed,
           bool exact_inputs, std::uint32_t splits = 1) {
  std::vector<float> xf, wf;
  if (exact_inputs) {
    // x: integers in [-8, 8] times 2^e per row, e in [-2, 2]; w: E2M1 values times 2^e per block
    // of 16, e in [-1, 2], each block's first element 6 · 2^e so that its scale is 2^e. Every
    // decoded w is a multiple of 2^-2 below 25, every product a multiple of 2^-4, every sum below
    // 2^19 for K <= 512: exact in the tensor cores' 25 fraction bits and in float, in any order.
    std::mt19937_64 gen(seed);
    std::uniform_int_distribution<int> xi(-8, 8), ex(-2, 2);
    xf.resize(s.m * s.k);
    for (std::size_t i = 0; i < s.m; ++i) {
      const float scale = std::ldexp(1.0f, ex(gen));
      for (std::size_t j = 0; j < s.k; ++j)
        xf[i * s.k + j] = static_cast<float>(xi(gen)) * scale;
    }
    wf = exact_fp4_values(s.n, s.k, gen);
  } else {
    xf = random_matrix(s.m, s.k, seed, 4.0f);
    wf = random_matrix(s.n, s.k, seed + 1, 3.0f);
  }
  const std::size_t ld = (s.k + 7) / 8 * 8 + 8; // rows apart by more than K
  const bf16_matrix x(xf, s.m, s.k, ld);
  quantize_options options;
  options.layout = layout;
  options.encode_scale = exact_inputs ? 1.0f : 0.37f;
  const auto w = quantize<Format>(matrix_view<const float>(wf.data(), s.n, s.k), options);

  std::vector<float> c0 = random_matrix(s.m, s.n, seed + 2, 1.0f);
  std::vector<float> ref = c0;
  gemm::reference(matrix_view<const float>(x.values.data(), s.m, s.k), w,
                  matrix_view<float>(ref.data(), s.m, s.n), alpha, beta);
  std::vector<Out> c(c0.size());
  for (std::size_t i = 0; i < c.size(); ++i)
    c[i] = Out(c0[i]);

  emulation::host_runner runner;
  runner.order_seed = seed;
  split_workspace work(splits, s.m, s.n);
  const cuda::status st = cuda::launch_gemm_w4a16<Shape>(
      runner, x.view(), w.view(), matrix_view<Out>(c.data(), s.m, s.n), alpha, beta, work.split);
  REQUIRE(st.ok());
  CHECK(runner.launches == (cuda::wgmma_splits(splits, s.k) > 1 ? 2u : 1u));

  const auto v = w.view();
  check_against(c, ref, c0, s, beta, [&](std::size_t i, std::size_t j, double size) {
    if (exact_inputs)
      return 0.0;
    double magnitude = 0.0;
    for (std::size_t q = 0; q < s.k; ++q)
      magnitude += std::fabs(static_cast<double>(x.values[i * s.k + q])) *
                   std::fabs(static_cast<double>(v.value(j, q)));
    return gemm_error_bound<Out>(s.k, std::fabs(alpha), magnitude, size);
  });
}

} // namespace

TEMPLATE_TEST_CASE("the W4A16 GEMM on the host equals the reference", "[unit][gemm][w4a16]",
                   cuda::gemm_wgmma_small, cuda::gemm_wgmma_medium, cuda::gemm_wgmma_large) {
  const case_shape shapes[] = {{1, 64, 64}, {16, 200, 320}, {37, 70, 96}, {130, 129, 256}};
  std::uint64_t seed = 31;
  for (const case_shape s : shapes) {
    if (TestType::tile_x <= 16 && s.m > 32)
      continue; // many CTAs of few rows: the decode shape is covered by the smaller cases
    INFO("M = " << s.m << ", N = " << s.n << ", K = " << s.k);
    check<TestType, nvfp4, float>(s, scale_layout::row_major, 1.0f, 0.0f, seed++, true);
    check<TestType, ue5m3_fp4, float>(s, scale_layout::tensor_core, 1.0f, 0.0f, seed++, true);
    check<TestType, mxfp4, float>(s, scale_layout::row_major, 1.0f, 0.0f, seed++, true);
    check<TestType, nvfp4, float>(s, scale_layout::tensor_core, -0.5f, 1.25f, seed++, false);
    check<TestType, ue5m3_fp4, bfloat16>(s, scale_layout::row_major, 2.0f, 0.0f, seed++, false);
    check<TestType, mxfp4, float>(s, scale_layout::row_major, 1.0f, 0.5f, seed++, false);
  }
}

namespace {

/// The FP4 × FP4 GEMM on wgmma against gemm::reference: exact operands (every partial sum exact:
/// products are multiples of 2^-4 below 576, sums below 2^19) bit for bit, random ones within the
/// bound.
template <class Shape, class FA, class FB, class Out>
void check_fp4(case_shape s, scale_layout layout, float alpha, float beta, std::uint64_t seed,
               bool exact_inputs, std::uint32_t splits = 1) {
  std::mt19937_64 gen(seed);
  const std::vector<float> af =
      exact_inputs ? exact_fp4_values(s.m, s.k, gen) : random_matrix(s.m, s.k, seed, 3.0f);
  const std::vector<float> bf =
      exact_inputs ? exact_fp4_values(s.n, s.k, gen) : random_matrix(s.n, s.k, seed + 1, 3.0f);
  quantize_options options;
  options.layout = layout;
  options.encode_scale = exact_inputs ? 1.0f : 0.37f;
  const auto a = quantize<FA>(matrix_view<const float>(af.data(), s.m, s.k), options);
  const auto b = quantize<FB>(matrix_view<const float>(bf.data(), s.n, s.k), options);
  std::vector<float> c0 = random_matrix(s.m, s.n, seed + 2, 1.0f);
  std::vector<float> ref = c0;
  gemm::reference(a, b, matrix_view<float>(ref.data(), s.m, s.n), alpha, beta);
  std::vector<Out> c(c0.size());
  for (std::size_t i = 0; i < c.size(); ++i)
    c[i] = Out(c0[i]);
  emulation::host_runner runner;
  runner.order_seed = seed;
  split_workspace work(splits, s.m, s.n);
  REQUIRE(cuda::launch_gemm_wgmma<Shape>(runner, a.view(), b.view(),
                                         matrix_view<Out>(c.data(), s.m, s.n), alpha, beta,
                                         work.split)
              .ok());
  const double t = std::fabs(static_cast<double>(alpha)) * static_cast<double>(a.decode_scale()) *
                   static_cast<double>(b.decode_scale());
  const std::vector<double> ma = magnitudes(a, s.k), mb = magnitudes(b, s.k);
  check_against(c, ref, c0, s, beta, [&](std::size_t i, std::size_t j, double size) {
    if (exact_inputs)
      return 0.0;
    double magnitude = 0.0;
    for (std::size_t q = 0; q < s.k; ++q)
      magnitude += ma[i * s.k + q] * mb[j * s.k + q];
    return gemm_error_bound<Out>(s.k, t, magnitude, size);
  });
}

} // namespace

TEMPLATE_TEST_CASE("the FP4 x FP4 GEMM on wgmma on the host equals the reference",
                   "[unit][gemm][wgmma]", cuda::gemm_wgmma_small, cuda::gemm_wgmma_medium,
                   cuda::gemm_wgmma_large) {
  const case_shape shapes[] = {{1, 64, 64}, {16, 200, 320}, {37, 70, 96}, {130, 129, 256}};
  std::uint64_t seed = 71;
  for (const case_shape s : shapes) {
    if (TestType::tile_x <= 16 && s.m > 32)
      continue;
    INFO("M = " << s.m << ", N = " << s.n << ", K = " << s.k);
    check_fp4<TestType, nvfp4, nvfp4, float>(s, scale_layout::tensor_core, 1.0f, 0.0f, seed++,
                                             true);
    check_fp4<TestType, ue5m3_fp4, mxfp4, float>(s, scale_layout::row_major, 1.0f, 0.0f, seed++,
                                                 true);
    check_fp4<TestType, mxfp4, ue5m3_fp4, bfloat16>(s, scale_layout::row_major, -0.5f, 1.25f,
                                                    seed++, false);
    check_fp4<TestType, nvfp4, nvfp4, float>(s, scale_layout::tensor_core, 2.0f, 0.0f, seed++,
                                             false);
  }
}

TEST_CASE("split-K: the wgmma GEMMs with K shared by several CTAs equal the reference",
          "[unit][gemm][wgmma][split]") {
  CHECK(cuda::wgmma_splits(0, 320) == 1);
  CHECK(cuda::wgmma_splits(1, 320) == 1);
  CHECK(cuda::wgmma_splits(3, 320) == 3); // 5 k-tiles: 2, 2, 1
  CHECK(cuda::wgmma_splits(4, 320) == 3); // 2, 2, 1: no empty split
  CHECK(cuda::wgmma_splits(9, 320) == 5);
  CHECK(cuda::wgmma_splits(4, 64) == 1);
  CHECK(cuda::wgmma_splits(4, 0) == 1);
  // What gemm_w4a16 and gemm request on a 132-multiprocessor device.
  CHECK(cuda::wgmma_automatic_splits(128, 8192, 132) == 1); // decode, N = 8192: 128 tiles
  CHECK(cuda::wgmma_automatic_splits(64, 8192, 132) == 2);  // N = 4096
  CHECK(cuda::wgmma_automatic_splits(4, 8192, 132) == 16);  // capped
  CHECK(cuda::wgmma_automatic_splits(4, 512, 132) == 2);    // 8 k-tiles: 4 each at least
  CHECK(cuda::wgmma_automatic_splits(4, 256, 132) == 1);
  CHECK(cuda::wgmma_automatic_splits(0, 8192, 132) == 1);
  std::uint64_t seed = 301;
  for (const std::uint32_t splits : {2u, 3u, 4u, 8u}) {
    INFO(splits << " splits requested");
    const case_shape decode{3, 200, 320}, wide{70, 130, 512};
    check<cuda::gemm_wgmma_small, nvfp4, float>(decode, scale_layout::tensor_core, 1.0f, 0.0f,
                                                seed++, true, splits);
    check<cuda::gemm_wgmma_small, ue5m3_fp4, bfloat16>(decode, scale_layout::row_major, 1.5f, 0.5f,
                                                       seed++, false, splits);
    check<cuda::gemm_wgmma_large, mxfp4, float>(wide, scale_layout::row_major, -1.0f, 0.25f, seed++,
                                                false, splits);
    check_fp4<cuda::gemm_wgmma_small, nvfp4, nvfp4, float>(decode, scale_layout::tensor_core, 1.0f,
                                                           0.0f, seed++, true, splits);
    check_fp4<cuda::gemm_wgmma_medium, ue5m3_fp4, mxfp4, bfloat16>(
        wide, scale_layout::row_major, 2.0f, -0.5f, seed++, false, splits);
  }
}

TEST_CASE("persistent CTAs cover every tile of C once, across raster groups",
          "[unit][gemm][wgmma]") {
  // 3 × 11 tiles of the small shape (raster groups of 8 and 3 weight tiles), 33 units for the
  // emulation's 3 resident CTAs; beta != 0 and exact operands: a tile missed keeps C0, a tile
  // done twice applies beta twice, either fails the bit-for-bit comparison.
  const case_shape s{40, 650, 128};
  check<cuda::gemm_wgmma_small, nvfp4, float>(s, scale_layout::tensor_core, 1.0f, 0.5f, 401, true);
  check_fp4<cuda::gemm_wgmma_small, ue5m3_fp4, nvfp4, float>(s, scale_layout::row_major, 1.0f,
                                                             -0.75f, 402, true, 2);
}

TEST_CASE("the W4A16 launcher rejects bad arguments with a clear error", "[unit][gemm][w4a16]") {
  const auto wf = random_matrix(8, 64, 1, 0.0f);
  const auto w = quantize<nvfp4>(matrix_view<const float>(wf.data(), 8, 64));
  const auto w48f = random_matrix(8, 48, 2, 0.0f);
  const auto w48 = quantize<nvfp4>(matrix_view<const float>(w48f.data(), 8, 48));
  std::vector<bfloat16> x(4 * 72 + 8);
  std::vector<float> c(64);
  emulation::host_runner runner;
  const auto run = [&](matrix_view<const bfloat16> xv, auto wv, matrix_view<float> cv) {
    return cuda::launch_gemm_w4a16<cuda::gemm_wgmma_small>(runner, xv, wv, cv);
  };
  cuda::status st = run({x.data(), 4, 48}, w.view(), {c.data(), 4, 8});
  CHECK(st.code() == cuda::errc::invalid_argument);
  CHECK(st.message().find("same K") != std::string::npos);
  st = run({x.data(), 4, 64}, w.view(), {c.data(), 4, 4});
  CHECK(st.message().find("c is 4 x 4") != std::string::npos);
  st = run({x.data(), 4, 64, 68}, w.view(), {c.data(), 4, 8});
  CHECK(st.code() == cuda::errc::misaligned);
  CHECK(st.message().find("x.ld()") != std::string::npos);
  st = run({x.data() + 1, 4, 64, 72}, w.view(), {c.data(), 4, 8});
  CHECK(st.code() == cuda::errc::misaligned);
  st = run({x.data(), 4, 48, 72}, w48.view(), {c.data(), 4, 8});
  CHECK(st.code() == cuda::errc::misaligned);
  CHECK(st.message().find("multiple of 32") != std::string::npos);
  quantize_options hadamard;
  hadamard.hadamard = true;
  const auto wh = quantize<nvfp4>(matrix_view<const float>(wf.data(), 8, 64), hadamard);
  st = run({x.data(), 4, 64, 72}, wh.view(), {c.data(), 4, 8});
  CHECK(st.message().find("Hadamard") != std::string::npos);
  CHECK(runner.launches == 0); // nothing ran
  // K = 0: C = beta · C, no TMA.
  std::vector<float> c1(32, 2.0f);
  const auto w0f = std::vector<float>{};
  const auto w0 = quantize<nvfp4>(matrix_view<const float>(nullptr, 8, 0));
  st = run({x.data(), 4, 0, 8}, w0.view(), {c1.data(), 4, 8});
  CHECK(st.ok());
  CHECK(c1[0] == 0.0f);
}

// The formats the wgmma GEMMs take (cuda::gemm falls back to the mma.sync shapes for others).
static_assert(cuda::kernels::wgmma_format<nvfp4> && cuda::kernels::wgmma_format<mxfp4> &&
              cuda::kernels::wgmma_format<ue5m3_fp4>);
static_assert(!cuda::kernels::wgmma_format<block_format<e2m1, 16, ue8m0>>); // 8 multiplier words
static_assert(!cuda::kernels::wgmma_format<block_format<e2m1, 32, ue4m3>>); // 2
static_assert(!cuda::kernels::wgmma_format<block_format<e2m1, 8, ue4m3>>);
static_assert(!cuda::kernels::wgmma_format<block_format<e4m3, 16, ue4m3>>); // not E2M1

TEST_CASE("the FP4 x FP4 wgmma launcher rejects bad arguments with a clear error",
          "[unit][gemm][wgmma]") {
  const auto f64 = random_matrix(8, 64, 3, 0.0f);
  const auto a = quantize<nvfp4>(matrix_view<const float>(f64.data(), 4, 64));
  const auto b = quantize<nvfp4>(matrix_view<const float>(f64.data(), 8, 64));
  const auto f48 = random_matrix(8, 48, 4, 0.0f);
  const auto a48 = quantize<nvfp4>(matrix_view<const float>(f48.data(), 4, 48));
  const auto b48 = quantize<nvfp4>(matrix_view<const float>(f48.data(), 8, 48));
  const auto m48 = quantize<mxfp4>(matrix_view<const float>(f48.data(), 8, 48));
  std::vector<float> c(64);
  emulation::host_runner runner;
  const auto run = [&](auto av, auto bv, matrix_view<float> cv) {
    return cuda::launch_gemm_wgmma<cuda::gemm_wgmma_small>(runner, av, bv, cv);
  };
  cuda::status st = run(a.view(), b48.view(), {c.data(), 4, 8});
  CHECK(st.code() == cuda::errc::invalid_argument);
  CHECK(st.message().find("same K") != std::string::npos);
  st = run(a.view(), b.view(), {c.data(), 4, 4});
  CHECK(st.code() == cuda::errc::invalid_argument);
  CHECK(st.message().find("c is 4 x 4") != std::string::npos);
  st = run(a48.view(), m48.view(), {c.data(), 4, 8});
  CHECK(st.code() == cuda::errc::invalid_argument);
  CHECK(st.message().find("block sizes") != std::string::npos);
  st = run(a48.view(), b48.view(), {c.data(), 4, 8}); // 24-byte rows: TMA cannot read them
  CHECK(st.code() == cuda::errc::misaligned);
  CHECK(st.message().find("multiple of 32") != std::string::npos);
  CHECK_FALSE(cuda::wgmma_takes(a48.view(), b48.view()));
  CHECK(cuda::wgmma_takes(a.view(), b.view()));
  quantize_options hadamard;
  hadamard.hadamard = true;
  const auto ah = quantize<nvfp4>(matrix_view<const float>(f64.data(), 4, 64), hadamard);
  st = run(ah.view(), b.view(), {c.data(), 4, 8});
  CHECK(st.code() == cuda::errc::invalid_argument);
  CHECK(st.message().find("Hadamard") != std::string::npos);
  // Two splits of K = 128 need 2 · 4 · 8 floats of workspace.
  const auto f128 = random_matrix(8, 128, 5, 0.0f);
  const auto a128 = quantize<nvfp4>(matrix_view<const float>(f128.data(), 4, 128));
  const auto b128 = quantize<nvfp4>(matrix_view<const float>(f128.data(), 8, 128));
  std::vector<float> small(63);
  cuda::wgmma_split_k split;
  split.splits = 2;
  st = cuda::launch_gemm_wgmma<cuda::gemm_wgmma_small>(
      runner, a128.view(), b128.view(), matrix_view<float>(c.data(), 4, 8), 1.0f, 0.0f, split);
  CHECK(st.code() == cuda::errc::invalid_argument);
  CHECK(st.message().find("split.workspace") != std::string::npos);
  split.workspace = small.data();
  split.workspace_size = small.size();
  st = cuda::launch_gemm_wgmma<cuda::gemm_wgmma_small>(
      runner, a128.view(), b128.view(), matrix_view<float>(c.data(), 4, 8), 1.0f, 0.0f, split);
  CHECK(st.code() == cuda::errc::invalid_argument);
  CHECK(st.message().find("64 floats") != std::string::npos);
  st = run(a.view(), b48.view(), {c.data(), 4, 8});
  CHECK(st.message().find("gemm: a is 4 x 64 but b is 8 x 48") == 0);
  CHECK(runner.launches == 0); // nothing ran
  // K = 0: C = beta · C without a TMA.
  std::vector<float> c1(32, 2.0f);
  const auto a0 = quantize<nvfp4>(matrix_view<const float>(nullptr, 4, 0));
  const auto b0 = quantize<nvfp4>(matrix_view<const float>(nullptr, 8, 0));
  st = cuda::launch_gemm_wgmma<cuda::gemm_wgmma_small>(
      runner, a0.view(), b0.view(), matrix_view<float>(c1.data(), 4, 8), 1.0f, 0.5f);
  CHECK(st.ok());
  CHECK(c1[0] == 1.0f);
  CHECK(c1[31] == 1.0f);
}
