// The tiled GEMM kernel (cuda/gemm.hpp, cuda/kernels/gemm.hpp) run on the host: the launcher,
// the CTA program, its cp.async pipeline and the warp tiles, through emulation::host_runner,
// against gemm::reference on the same quantized operands.
//
// The emulated MMAs follow the tensor cores' arithmetic (emulation/ptx.hpp; sm_90's here, the
// default). Bound. A CTA chains K/16 BF16 MMAs (or K/64 block-scaled ones) per output; each
// aligns its products and accumulator to the largest exponent and truncates them to F fraction
// bits, then truncates the sum to float. On sm_80 (two passes of 8 products and C, F = 24) that
// loses less than 2 · (9 · 2^-24 + 2^-23) = 11 · 2^-23 of the running Σ_k |a_k · b_k| per MMA, on
// sm_90 and later (one pass of 16, F = 25) 5.25 · 2^-23, per block-scaled MMA (F = 35) about
// 2^-23 (test_warp_gemm_host.cpp derives each; there the warp tile equals each model's MMA chain
// bit for bit). The epilogue is the reference's (double) but starts from the accumulator; the
// final float rounding adds at most half an ulp of the result. The tests allow the worst,
// (11 · K/16 + 2) · 2^-23 · |alpha| · Σ|a_k b_k| (decoded values, tensor scales included), plus one
// ulp of the reference result (and the same for C with beta): the device test uses the same.
#include "catch.hpp"
#include "gemm_operands.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "blockscale/block/block_format.hpp"
#include "blockscale/cuda/gemm.hpp"
#include "blockscale/emulation/host_runner.hpp"
#include "blockscale/host/gemm_reference.hpp"
#include "blockscale/host/quantize.hpp"

using namespace blockscale;

namespace {

/// Σ_k |a(i,k) · b(j,k)| from the decoded values (tensor scales included).
template <class FA, class FB>
double magnitude(const quantized_matrix<FA>& a, const quantized_matrix<FB>& b, std::size_t i,
                 std::size_t j) {
  double sum = 0.0;
  for (std::size_t k = 0; k < a.cols(); ++k)
    sum += std::fabs(static_cast<double>(a.value(i, k))) *
           std::fabs(static_cast<double>(b.value(j, k)));
  return sum;
}

struct case_shape {
  std::size_t m, n, k;
};

template <class Shape, class FA, class FB, class Out>
void check_gemm(case_shape s, scale_layout layout, float alpha, float beta,
                emulation::async_copies copies, std::uint32_t seed) {
  const auto xa = random_matrix(s.m, s.k, seed, 3.0f);
  const auto xb = random_matrix(s.n, s.k, seed + 1, 3.0f);
  const auto a = quantized<FA>(xa, s.m, s.k, layout);
  const auto b = quantized<FB>(xb, s.n, s.k, layout);
  std::vector<float> c0 = random_matrix(s.m, s.n, seed + 2, 1.0f);
  std::vector<float> ref = c0;
  gemm::reference(a, b, matrix_view<float>(ref.data(), s.m, s.n), alpha, beta);

  std::vector<Out> c(c0.size());
  for (std::size_t i = 0; i < c.size(); ++i)
    c[i] = Out(c0[i]);
  emulation::host_runner runner;
  runner.order_seed = seed;
  runner.copies = copies;
  const cuda::status st = cuda::launch_gemm<Shape>(
      runner, a.view(), b.view(), matrix_view<Out>(c.data(), s.m, s.n), alpha, beta);
  REQUIRE(st.ok());
  const double t = std::fabs(static_cast<double>(alpha)); // magnitude() has the tensor scales
  int bad = 0;
  for (std::size_t i = 0; i < s.m; ++i)
    for (std::size_t j = 0; j < s.n; ++j) {
      const double want = static_cast<double>(Out(ref[i * s.n + j]));
      const double got = static_cast<double>(static_cast<float>(c[i * s.n + j]));
      const double bound = gemm_error_bound<Out>(
          s.k, t, magnitude(a, b, i, j), std::fabs(want) + std::fabs(beta * c0[i * s.n + j]));
      if (!(std::fabs(got - want) <= bound) && ++bad <= 5)
        FAIL_CHECK("C(" << i << ", " << j << ") = " << got << ", reference " << want << ", bound "
                        << bound);
    }
  CHECK(bad == 0);
}

} // namespace

TEMPLATE_TEST_CASE("the tiled GEMM on the host equals the reference within the bound",
                   "[unit][gemm]", cuda::gemm_small_m, cuda::gemm_large_m,
                   cuda::gemm_large_m_in_register) {
  using emulation::async_copies;
  const case_shape shapes[] = {{1, 8, 128}, {16, 64, 256}, {37, 70, 160}, {130, 129, 384}};
  std::uint32_t seed = 11;
  for (const case_shape s : shapes) {
    if (TestType::block_m == 128 && s.m * s.n > 20000)
      continue; // keeps the host run short: the 128 × 128 tile is covered by 37 × 70
    INFO("M = " << s.m << ", N = " << s.n << ", K = " << s.k);
    check_gemm<TestType, nvfp4, nvfp4, float>(s, scale_layout::row_major, 1.0f, 0.0f,
                                              async_copies::eager, seed++);
    check_gemm<TestType, ue5m3_fp4, ue5m3_fp4, float>(s, scale_layout::tensor_core, -0.5f, 1.25f,
                                                      async_copies::deferred, seed++);
    check_gemm<TestType, nvfp4, mxfp4, bfloat16>(s, scale_layout::row_major, 2.0f, 0.0f,
                                                 async_copies::deferred, seed++);
  }
}

TEST_CASE("the block-scaled GEMM shape on the host equals the reference", "[unit][gemm]") {
  using emulation::async_copies;
  const case_shape shapes[] = {{5, 9, 128}, {37, 70, 256}, {130, 20, 96}};
  std::uint32_t seed = 101;
  for (const case_shape s : shapes) {
    INFO("M = " << s.m << ", N = " << s.n << ", K = " << s.k);
    check_gemm<cuda::gemm_block_scaled, nvfp4, nvfp4, float>(s, scale_layout::tensor_core, 1.0f,
                                                             0.0f, async_copies::deferred, seed++);
    check_gemm<cuda::gemm_block_scaled, mxfp4, mxfp4, float>(s, scale_layout::row_major, 0.5f,
                                                             -1.0f, async_copies::eager, seed++);
  }
}

TEST_CASE("the GEMM launcher rejects bad arguments with a clear error", "[unit][gemm]") {
  const auto x = random_matrix(4, 64, 1, 0.0f);
  const auto a = quantized<nvfp4>(x, 4, 64, scale_layout::row_major);
  const auto x2 = random_matrix(3, 48, 2, 0.0f);
  const auto b48 = quantized<nvfp4>(x2, 3, 48, scale_layout::row_major);
  const auto bx = random_matrix(3, 40, 3, 0.0f);
  const auto b40 = quantized<nvfp4>(bx, 3, 40, scale_layout::row_major);
  const auto a40 = quantized<nvfp4>(random_matrix(4, 40, 4, 0.0f), 4, 40, scale_layout::row_major);
  std::vector<float> c(64);
  emulation::host_runner runner;
  const auto run = [&](auto av, auto bv, matrix_view<float> cv) {
    return cuda::launch_gemm<cuda::gemm_small_m>(runner, av, bv, cv);
  };
  cuda::status st = run(a.view(), b48.view(), matrix_view<float>(c.data(), 4, 3));
  CHECK(st.code() == cuda::errc::invalid_argument);
  CHECK(st.message().find("same K") != std::string::npos);
  st = run(a40.view(), b40.view(), matrix_view<float>(c.data(), 4, 4));
  CHECK(st.message().find("c is 4 x 4") != std::string::npos);
  st = run(a40.view(), b40.view(), matrix_view<float>(c.data(), 4, 3));
  CHECK(st.code() == cuda::errc::invalid_argument);
  CHECK(st.message().find("not a multiple of the block sizes") != std::string::npos);
  const auto m40 = quantized<mxfp4>(random_matrix(3, 48, 5, 0.0f), 3, 48, scale_layout::row_major);
  const auto a48 = quantized<nvfp4>(random_matrix(4, 48, 6, 0.0f), 4, 48, scale_layout::row_major);
  st = cuda::launch_gemm<cuda::gemm_small_m>(runner, a48.view(), m40.view(),
                                             matrix_view<float>(c.data(), 4, 3));
  CHECK(st.message().find("(16, 32)") != std::string::npos);
  CHECK(runner.launches == 0);
}

TEMPLATE_TEST_CASE("the W4A16 warp tile (BF16 activations × FP4 weights) equals the reference",
                   "[unit][gemm]", nvfp4, mxfp4, ue5m3_fp4) {
  using tile = cuda::warp::warp_tile_w4a16<32, 16, TestType>;
  constexpr std::size_t m = 32, n = 16, k = 192;
  // A in bf16 (its values are exact floats for the reference), B quantized along K.
  std::vector<float> xa = random_matrix(m, k, 7, 2.0f);
  std::vector<bfloat16> a16(xa.size());
  for (std::size_t i = 0; i < xa.size(); ++i) {
    a16[i] = bfloat16(xa[i]);
    xa[i] = static_cast<float>(a16[i]);
  }
  const auto b = quantized<TestType>(random_matrix(n, k, 8, 2.0f), n, k, scale_layout::row_major);

  // "Shared memory": A rows 2k + 16 bytes apart, B's packed rows and row-major scales.
  const int a_stride = static_cast<int>(2 * k + 16);
  std::vector<std::uint8_t> sa(m * static_cast<std::size_t>(a_stride));
  for (std::size_t r = 0; r < m; ++r)
    std::memcpy(sa.data() + r * static_cast<std::size_t>(a_stride), a16.data() + r * k, 2 * k);
  const auto bv = b.view();
  const int b_stride = static_cast<int>(bv.row_bytes() + 32);
  const int b_scale_stride = static_cast<int>(bv.blocks_per_row() + 4);
  std::vector<std::uint8_t> sb(n * static_cast<std::size_t>(b_stride));
  std::vector<std::uint8_t> sbs(n * static_cast<std::size_t>(b_scale_stride));
  for (std::size_t r = 0; r < n; ++r) {
    std::memcpy(sb.data() + r * static_cast<std::size_t>(b_stride), bv.row(r), bv.row_bytes());
    for (std::size_t kb = 0; kb < bv.blocks_per_row(); ++kb)
      sbs[r * static_cast<std::size_t>(b_scale_stride) + kb] = bv.scales()[bv.scale_index(r, kb)];
  }
  const cuda::warp::shared_operand sbo{sb.data(), b_stride, sbs.data(), b_scale_stride};

  emulation::host_warp warp(0);
  typename tile::template accumulators<emulation::host_warp> acc;
  tile::clear(warp, acc);
  for (int k0 = 0; k0 < static_cast<int>(k); k0 += tile::k_step)
    tile::step(warp, acc, sa.data(), a_stride, sbo, k0);

  std::vector<float> ref(m * n);
  gemm::reference(matrix_view<const float>(xa.data(), m, k), b,
                  matrix_view<float>(ref.data(), m, n));
  int bad = 0;
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < tile::tiles_m; ++i)
      for (int j = 0; j < tile::tiles_n; ++j)
        for (int r = 0; r < 4; ++r) {
          const cuda::warp::coord at = tile::coord_of(lane, i, j, r);
          const double got = std::ldexp(static_cast<double>(acc.tile[i][j][lane].r[r]),
                                        tile::accumulator_exponent) *
                             b.decode_scale();
          double mag = 0.0;
          for (std::size_t kk = 0; kk < k; ++kk)
            mag += std::fabs(static_cast<double>(xa[static_cast<std::size_t>(at.row) * k + kk])) *
                   std::fabs(static_cast<double>(b.value(static_cast<std::size_t>(at.col), kk)));
          const double want =
              ref[static_cast<std::size_t>(at.row) * n + static_cast<std::size_t>(at.col)];
          const double bound =
              (11 * static_cast<double>(k) / 16 + 2) * 0x1p-23 * mag + 0x1p-23 * std::fabs(want);
          if (!(std::fabs(got - want) <= bound) && ++bad <= 5)
            FAIL_CHECK("C(" << at.row << ", " << at.col << ") = " << got << ", reference " << want);
        }
  CHECK(bad == 0);
}
