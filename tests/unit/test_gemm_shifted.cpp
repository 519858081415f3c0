// The shifted GEMM (cuda/gemm.hpp `launch_gemm_shifted`, cuda/kernels/scale_shift.hpp) run on the
// host through emulation::host_runner: UE5M3-FP4 (and NVFP4 beside it) on the block-scaled MMA
// with scales shifted onto UE4M3.
//
// What is proven, tile by tile of C:
// - a tile whose rows of A and B all fit equals, bit for bit, the block-scaled MMA chain on the
//   operands' own scales (emulation/ptx.hpp's dot_add_e2m1, each scale aligned by its exponent:
//   what a tensor core taking UE5M3 scales would compute), then the kernels' epilogue;
// - every other tile equals the BF16 path's GEMM (launch_gemm with the fallback shape) on the
//   original operands, bit for bit;
// - where every sum is exact (one scale per row, integer-like products), C equals gemm::reference
//   bit for bit.
// The device pass of the shift equals the host's (block/scale_shift.hpp) byte for byte.
#include "catch.hpp"
#include "gemm_operands.hpp"
#include "shifted_operands.hpp"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "blockscale/block/block_format.hpp"
#include "blockscale/block/scale_shift.hpp"
#include "blockscale/cuda/gemm.hpp"
#include "blockscale/emulation/host_runner.hpp"
#include "blockscale/emulation/ptx.hpp"
#include "blockscale/host/gemm_reference.hpp"
#include "blockscale/host/quantize.hpp"

using namespace blockscale;

namespace {

struct tally {
  std::size_t native = 0, fallback = 0, bad = 0;
};

/// Runs the shift passes and the shifted GEMM on the host and checks C tile by tile (the file's
/// comment). Returns how many outputs took each path.
template <class Fallback, class FA, class FB, class Out>
tally check_shifted(const quantized_matrix<FA>& a, const quantized_matrix<FB>& b, float alpha,
                    float beta, std::uint64_t seed) {
  const std::size_t m = a.rows(), n = b.rows();
  std::vector<float> c0 = random_matrix(m, n, seed, 1.0f);
  std::vector<Out> start(c0.size());
  for (std::size_t e = 0; e < c0.size(); ++e)
    start[e] = Out(c0[e]);

  emulation::host_runner runner;
  runner.order_seed = seed;
  host_shifted<FA> sa(a.view().shape());
  host_shifted<FB> sb(b.view().shape());
  REQUIRE(cuda::launch_shift_scales(runner, a.view(), sa.view()).ok());
  REQUIRE(cuda::launch_shift_scales(runner, b.view(), sb.view()).ok());

  std::vector<Out> c = start;
  const cuda::status st = cuda::launch_gemm_shifted<cuda::gemm_block_scaled, Fallback>(
      runner, a.view(), const_shifted_scales(sa.view()), b.view(), const_shifted_scales(sb.view()),
      matrix_view<Out>(c.data(), m, n), alpha, beta);
  REQUIRE(st.ok());
  std::vector<Out> fallback = start;
  REQUIRE(cuda::launch_gemm<Fallback>(runner, a.view(), b.view(),
                                      matrix_view<Out>(fallback.data(), m, n), alpha, beta)
              .ok());

  tally count;
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      const bool fits = sa.tiles[i / shift_tile_rows] != 0 && sb.tiles[j / shift_tile_rows] != 0;
      const Out want =
          fits ? native_mma_output(a, b, i, j, alpha, beta, start[i * n + j], runner.mma)
               : fallback[i * n + j];
      (fits ? count.native : count.fallback) += 1;
      const float got_f = static_cast<float>(c[i * n + j]), want_f = static_cast<float>(want);
      if (std::memcmp(&got_f, &want_f, sizeof(float)) != 0 && ++count.bad <= 5)
        FAIL_CHECK("C(" << i << ", " << j << ") = " << got_f << ", the "
                        << (fits ? "block-scaled MMA on the own scales" : "BF16 path") << " gives "
                        << want_f);
    }
  CHECK(count.bad == 0);
  return count;
}

} // namespace

TEST_CASE("the device shift pass equals the host's byte for byte", "[unit][gemm][scale_shift]") {
  // 17 blocks a row (fewer than a warp's lanes) and 101 (several a lane, not a multiple of 4).
  const std::size_t shapes[][2] = {{1, 272}, {128, 272}, {300, 272}, {130, 1616}};
  for (const scale_layout layout : {scale_layout::row_major, scale_layout::tensor_core}) {
    for (const auto& shape : shapes) {
      const std::size_t rows = shape[0], k = shape[1];
      INFO(rows << " x " << k << ", layout "
                << (layout == scale_layout::row_major ? "row-major" : "tensor-core"));
      // Spreads from 0 to 24 binades: rows on both sides of the 14.8-binade bound.
      const auto x = spread_matrix(rows, k, rows + 7,
                                   [](std::size_t r) { return static_cast<float>(r % 25); });
      const auto q = quantized<ue5m3_fp4>(x, rows, k, layout);
      host_shifted<ue5m3_fp4> host(q.view().shape(), 0xEE), device(q.view().shape(), 0x11);
      const scale_shift_census census = shift_scales<nvfp4>(q.view(), host.view());
      emulation::host_runner runner;
      REQUIRE(cuda::launch_shift_scales(runner, q.view(), device.view()).ok());
      CHECK(device.codes == host.codes); // different sentinels: every byte is written
      // The tensor-core layout's padding (rows and blocks) holds zeros, as the layout defines.
      if (layout == scale_layout::tensor_core)
        for (std::size_t i = 0; i < tensor_core_padding_count(rows, q.view().blocks_per_row()); ++i)
          REQUIRE(host.codes[tensor_core_padding_offset<std::size_t>(
                      i, rows, q.view().blocks_per_row())] == 0);
      CHECK(device.shifts == host.shifts);
      CHECK(device.tiles == host.tiles);
      const scale_shift_census expected = census_of_shifts<ue4m3_format>(q.view());
      CHECK(census.fitting_rows == expected.fitting_rows);
      CHECK(census.fitting_tiles == expected.fitting_tiles);
      if (rows >= 128) {
        CHECK(census.fitting_rows > 0);
        CHECK(census.fitting_rows < rows);
      }
      // A fitting row's codes times 2^shift are its UE5M3 scales.
      for (std::size_t r = 0; r < rows; ++r) {
        if (host.shifts[r] == no_row_shift)
          continue;
        for (std::size_t kb = 0; kb < q.view().blocks_per_row(); ++kb) {
          const std::size_t at = q.view().scale_index(r, kb);
          const float shifted = static_cast<float>(ue4m3::from_bits(host.codes[at]));
          const float original = static_cast<float>(ue5m3::from_bits(q.view().scales()[at]));
          REQUIRE(std::ldexp(shifted, host.shifts[r]) == original);
        }
      }
    }
  }
}

TEST_CASE("the shifted GEMM equals the block-scaled MMA on the own scales where rows fit, and the "
          "BF16 path elsewhere",
          "[unit][gemm][scale_shift]") {
  // A: 256 rows in two tiles; row 200 spreads over 22 binades, so A's second tile falls back.
  // B: 136 rows in two tiles (the second of 8 rows); every row fits.
  const std::size_t m = 256, n = 136, k = 192;
  const auto a = quantized_spread<ue5m3_fp4>(m, k, 1, scale_layout::tensor_core, 9.0f, 22.0f, 200);
  const auto b = quantized_spread<ue5m3_fp4>(n, k, 2, scale_layout::row_major, 9.0f, 9.0f, n);
  const tally t = check_shifted<cuda::gemm_large_m_in_register, ue5m3_fp4, ue5m3_fp4, float>(
      a, b, 1.0f, 0.0f, 3);
  CHECK(t.native == 128 * n);
  CHECK(t.fallback == 128 * n);

  SECTION("UE5M3-FP4 × NVFP4, BF16 out, alpha and beta, the staged fallback") {
    // B's row 5 (first tile) spreads too far for UE4M3's normals.
    const auto b4 = quantized_spread<nvfp4>(n, k, 4, scale_layout::tensor_core, 5.0f, 22.0f, 5);
    const tally u =
        check_shifted<cuda::gemm_large_m, ue5m3_fp4, nvfp4, bfloat16>(a, b4, -0.75f, 1.5f, 5);
    CHECK(u.native == 128 * 8);
    CHECK(u.fallback == m * n - 128 * 8);
  }
  SECTION("NVFP4 × UE5M3-FP4, every row fits") {
    const auto a4 = quantized_spread<nvfp4>(130, 64, 6, scale_layout::row_major, 4.0f, 4.0f, 999);
    const auto b5 =
        quantized_spread<ue5m3_fp4>(40, 64, 7, scale_layout::row_major, 12.0f, 12.0f, 999);
    const tally u = check_shifted<cuda::gemm_large_m_in_register, nvfp4, ue5m3_fp4, float>(
        a4, b5, 2.0f, 0.0f, 8);
    CHECK(u.fallback == 0);
  }
}

TEST_CASE("the shifted GEMM equals the exact reference where every sum is exact",
          "[unit][gemm][scale_shift]") {
  // One scale S_r per row (every block holds ±6 · S_r), elements E2M1 values times S_r: each
  // output is S_a · S_b · (a sum of multiples of 1/4 below 2^14), exact in float and in every
  // MMA; rows' scales across 20 binades, so the shifts differ from row to row.
  const std::size_t m = 140, n = 72, k = 256;
  const float e2m1_values[] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  std::mt19937_64 gen(99);
  const auto make = [&](std::size_t rows) {
    std::vector<float> x(rows * k);
    for (std::size_t r = 0; r < rows; ++r) {
      const float s = std::ldexp(1.0f + static_cast<float>(gen() % 8) / 8.0f,
                                 static_cast<int>(gen() % 21) - 10);
      for (std::size_t c = 0; c < k; ++c) {
        const float v = c % 16 == 0 ? 6.0f : e2m1_values[gen() % 8];
        x[r * k + c] = (gen() % 2 != 0 ? -v : v) * s;
      }
    }
    return x;
  };
  quantize_options options;
  options.layout = scale_layout::row_major;
  const auto xa = make(m), xb = make(n);
  const auto a = quantize<ue5m3_fp4>(matrix_view<const float>(xa.data(), m, k), options);
  const auto b = quantize<ue5m3_fp4>(matrix_view<const float>(xb.data(), n, k), options);
  for (std::size_t e = 0; e < m * k; ++e)
    REQUIRE(a.value(e / k, e % k) == xa[e]); // the quantization is exact

  host_shifted<ue5m3_fp4> sa(a.view().shape()), sb(b.view().shape());
  emulation::host_runner runner;
  REQUIRE(cuda::launch_shift_scales(runner, a.view(), sa.view()).ok());
  REQUIRE(cuda::launch_shift_scales(runner, b.view(), sb.view()).ok());
  CHECK(sa.tiles == std::vector<std::uint8_t>{1, 1});
  std::vector<float> c(m * n), ref(m * n);
  REQUIRE(cuda::launch_gemm_shifted<cuda::gemm_block_scaled, cuda::gemm_large_m_in_register>(
              runner, a.view(), const_shifted_scales(sa.view()), b.view(),
              const_shifted_scales(sb.view()), matrix_view<float>(c.data(), m, n))
              .ok());
  gemm::reference(a, b, matrix_view<float>(ref.data(), m, n));
  CHECK(std::memcmp(c.data(), ref.data(), c.size() * sizeof(float)) == 0);
}

TEST_CASE("the shift pass and the shifted GEMM refuse bad arguments by name",
          "[unit][gemm][scale_shift]") {
  const auto x = random_matrix(8, 64, 1, 1.0f);
  const auto a = quantized<ue5m3_fp4>(x, 8, 64, scale_layout::row_major);
  const auto b =
      quantized<ue5m3_fp4>(random_matrix(8, 32, 2, 1.0f), 8, 32, scale_layout::row_major);
  host_shifted<ue5m3_fp4> sa(a.view().shape()), sb(b.view().shape());
  emulation::host_runner runner;
  std::vector<float> c(64, 7.0f);

  const cuda::status null_out = cuda::launch_shift_scales(runner, a.view(), shifted_scales{});
  CHECK(null_out.code() == cuda::errc::invalid_argument);
  CHECK(null_out.message().find("out.codes") != std::string::npos);
  CHECK_THROWS_AS(shift_scales<nvfp4>(a.view(), shifted_scales{}), std::invalid_argument);

  REQUIRE(cuda::launch_shift_scales(runner, a.view(), sa.view()).ok());
  const cuda::status null_shifted =
      cuda::launch_gemm_shifted<cuda::gemm_block_scaled, cuda::gemm_large_m_in_register>(
          runner, a.view(), const_shifted_scales{}, a.view(), const_shifted_scales(sa.view()),
          matrix_view<float>(c.data(), 8, 8));
  CHECK(null_shifted.code() == cuda::errc::invalid_argument);
  CHECK(null_shifted.message().find("sa and sb") != std::string::npos);
  const cuda::status k_differs =
      cuda::launch_gemm_shifted<cuda::gemm_block_scaled, cuda::gemm_large_m_in_register>(
          runner, a.view(), const_shifted_scales(sa.view()), b.view(),
          const_shifted_scales(sb.view()), matrix_view<float>(c.data(), 8, 8));
  CHECK(k_differs.code() == cuda::errc::invalid_argument);
  CHECK(k_differs.message().find("same K") != std::string::npos);
  CHECK(c == std::vector<float>(64, 7.0f)); // nothing ran
}
