// The warp-specialised programs' emulation (emulation/host_async.hpp): a producer warp feeding a
// ring of shared-memory stages by TMA under mbarriers and two consumer warps storing by TMA, and a
// GEMM whose consumer warpgroup multiplies the stages with the warpgroup MMA (SS and RS), run
// over every swizzle, ragged shapes and random interleavings against direct computations; each
// rule the device imposes broken on purpose, one at a time, and caught; the TMA box's landing
// bytes against an independent statement of the swizzles.
#include <blockscale/emulation/host_async.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "async_gemm.hpp"
#include "async_ring.hpp"

namespace {

using namespace blockscale;
using blockscale_test::async_ring::box_rows;
using blockscale_test::async_ring::bug;
using blockscale_test::async_ring::consumers;
using blockscale_test::async_ring::ring_program;
using cuda::warp::mbarrier;
using cuda::warp::smem_swizzle;
using cuda::warp::tensor_map;
using emulation::sync_error;

struct ring_case {
  int rows, cols;
  smem_swizzle swizzle;
  int box_cols;
};

/// Runs the ring program over rows × cols 16-bit elements; returns whether `out` equals 3·in + 1.
bool run_ring(const ring_case& rc, std::size_t ctas, std::uint64_t seed, bug planted = bug::none) {
  const std::size_t stride = (static_cast<std::size_t>(rc.cols) * 2 + 15) / 16 * 16 + 16;
  std::vector<std::uint16_t> in(stride / 2 * static_cast<std::size_t>(rc.rows));
  std::vector<std::uint16_t> out(in.size(), 0x5A5A);
  for (std::size_t i = 0; i < in.size(); ++i)
    in[i] = static_cast<std::uint16_t>(i * 2654435761u >> 7);
  ring_program p;
  p.in = emulation::make_tensor_map_2d(in.data(), 2, static_cast<std::uint64_t>(rc.rows),
                                       static_cast<std::uint64_t>(rc.cols), stride, box_rows,
                                       rc.box_cols, rc.swizzle);
  p.out = emulation::make_tensor_map_2d(out.data(), 2, static_cast<std::uint64_t>(rc.rows),
                                        static_cast<std::uint64_t>(rc.cols), stride,
                                        box_rows / consumers, rc.box_cols, smem_swizzle::none);
  p.tiles_x = (rc.cols + rc.box_cols - 1) / rc.box_cols;
  p.tiles_y = (rc.rows + box_rows - 1) / box_rows;
  p.box_cols = rc.box_cols;
  p.swizzle = rc.swizzle;
  p.planted = planted;
  emulation::run_specialized_grid(p, ctas, seed);
  for (int r = 0; r < rc.rows; ++r)
    for (std::size_t col = 0; col < stride / 2; ++col) {
      const std::size_t i = static_cast<std::size_t>(r) * stride / 2 + col;
      const std::uint16_t want = col < static_cast<std::size_t>(rc.cols)
                                     ? static_cast<std::uint16_t>(3 * in[i] + 1)
                                     : std::uint16_t{0x5A5A}; // past the tensor: untouched
      if (out[i] != want)
        return false;
    }
  return true;
}

const ring_case cases[] = {{40, 72, smem_swizzle::none, 32},
                           {33, 48, smem_swizzle::bytes32, 16},
                           {64, 64, smem_swizzle::bytes64, 32},
                           {17, 130, smem_swizzle::bytes128, 64},
                           {200, 64, smem_swizzle::bytes128, 64}};

std::string name(const ring_case& rc) {
  return std::to_string(rc.rows) + "x" + std::to_string(rc.cols) + ", swizzle " +
         std::to_string(cuda::warp::swizzle_bytes(rc.swizzle)) + ", box cols " +
         std::to_string(rc.box_cols);
}

} // namespace

TEST_CASE("a producer/consumer ring through TMA and mbarriers computes its tiles",
          "[emulation][async]") {
  for (const ring_case& rc : cases)
    for (std::size_t ctas : {std::size_t{1}, std::size_t{3}})
      for (std::uint64_t seed : {0u, 1u, 2u, 3u, 4u, 5u}) {
        INFO(name(rc) << ", " << ctas << " CTA(s), seed " << seed);
        CHECK(run_ring(rc, ctas, seed));
      }
}

namespace {

/// Whether the emulation catches `planted`: a wrong result (the stages read before their loads
/// land hold the 0xA5 fill or the loads' 0xFF poison) or a sync_error.
bool caught(const ring_case& rc, std::size_t ctas, std::uint64_t seed, bug planted) {
  try {
    return !run_ring(rc, ctas, seed, planted);
  } catch (const sync_error& e) {
    UNSCOPED_INFO(e.what());
    return true;
  }
}

} // namespace

TEST_CASE("a consumer that does not wait for its stage is caught", "[emulation][async]") {
  // Consumers that skip their wait, or wait for the wrong parity (which passes at once on phase
  // 0), read unlanded stages, or run ahead and complete `empty` phases the producer has not
  // reached, so that it waits for a phase that never comes: wrong results or a deadlock.
  for (const bug planted : {bug::consumer_skips_full_wait, bug::consumer_wrong_parity})
    for (const ring_case& rc : cases)
      for (std::size_t ctas : {std::size_t{1}, std::size_t{3}})
        for (std::uint64_t seed : {0u, 1u, 2u}) {
          INFO(name(rc) << ", " << ctas << " CTA(s), seed " << seed << ", bug "
                        << static_cast<int>(planted));
          CHECK(caught(rc, ctas, seed, planted));
        }
}

TEST_CASE("the emulation throws on broken rules of the asynchronous units", "[emulation][async]") {
  const ring_case rc = cases[3];
  // Without its empty wait the producer arrives on a full phase with no arrival pending.
  CHECK_THROWS_WITH(run_ring(rc, 1, 0, bug::producer_skips_empty_wait),
                    Catch::Contains("none pending"));
  CHECK_THROWS_WITH(run_ring(rc, 1, 0, bug::producer_wrong_parity),
                    Catch::Contains("deadlock") && Catch::Contains("parity 0"));
  CHECK_THROWS_WITH(run_ring(rc, 1, 3, bug::producer_wrong_parity), Catch::Contains("deadlock"));
  CHECK_THROWS_WITH(run_ring(rc, 1, 0, bug::missing_proxy_fence),
                    Catch::Contains("fence_proxy_async"));
  CHECK_THROWS_AS(run_ring(rc, 2, 7, bug::missing_proxy_fence), sync_error);
  CHECK_THROWS_WITH(run_ring(rc, 1, 0, bug::no_init), Catch::Contains("never initialised"));
  CHECK_THROWS_WITH(run_ring(rc, 3, 0, bug::return_before_barrier),
                    Catch::Contains("deadlock") && Catch::Contains("sync_cta") &&
                        Catch::Contains("has returned"));
}

namespace {

/// One warp loads one box at (x, y) and copies the stage's bytes out, as they lie.
struct box_program {
  static constexpr int warps = 1;
  struct shared_storage {
    alignas(1024) unsigned char stage[32 * 128];
    mbarrier bar;
  };
  tensor_map map;
  int x, y;
  int bytes;
  unsigned char* copy;
  template <class Warp>
  void run(Warp& warp, cuda::cta_coord, shared_storage& shared) const {
    warp.mbarrier_init(shared.bar, 1);
    warp.sync_cta();
    warp.mbarrier_arrive_expect_tx(shared.bar, static_cast<std::uint32_t>(bytes));
    warp.tma_load_2d(shared.stage, map, x, y, shared.bar);
    warp.mbarrier_wait(shared.bar, 0);
    std::memcpy(copy, shared.stage, static_cast<std::size_t>(bytes));
  }
};

} // namespace

TEST_CASE("a TMA box lands swizzled, zero outside the tensor", "[emulation][async]") {
  // 8-bit elements: box byte b of row r is element x + b of row y + r.
  constexpr int rows = 20, cols = 100, stride = 112;
  std::vector<unsigned char> tensor(static_cast<std::size_t>(rows) * stride);
  for (std::size_t i = 0; i < tensor.size(); ++i)
    tensor[i] = static_cast<unsigned char>(1 + i % 251);
  for (const smem_swizzle s :
       {smem_swizzle::none, smem_swizzle::bytes32, smem_swizzle::bytes64, smem_swizzle::bytes128}) {
    const int width = s == smem_swizzle::none ? 48 : cuda::warp::swizzle_bytes(s);
    const int box_rows = 24;
    for (const auto& at : {std::pair<int, int>{0, 0}, {-16, -5}, {60, 3}, {96, 18}}) {
      INFO("swizzle " << cuda::warp::swizzle_bytes(s) << ", box at (" << at.first << ", "
                      << at.second << ")");
      std::vector<unsigned char> copy(static_cast<std::size_t>(box_rows * width));
      box_program p{
          emulation::make_tensor_map_2d(tensor.data(), 1, rows, cols, stride, box_rows, width, s),
          at.first, at.second, box_rows * width, copy.data()};
      emulation::run_specialized_grid(p, 1);
      int wrong = 0;
      for (int r = 0; r < box_rows; ++r)
        for (int b = 0; b < width; ++b) {
          // The swizzles as the PTX ISA draws them: within each 128-byte line of the stage, the
          // 16-byte chunk index XORed with the line's index, modulo the swizzle's chunks.
          const int logical = r * width + b;
          const int chunks = s == smem_swizzle::none ? 1 : width / 16;
          const int line = logical / 128;
          const int chunk = (logical % 128) / 16;
          const int stored = line * 128 + ((chunk ^ (line % chunks)) % 8) * 16 + logical % 16;
          const int gx = at.first + b, gy = at.second + r;
          const unsigned char want =
              gx >= 0 && gx < cols && gy >= 0 && gy < rows
                  ? tensor[static_cast<std::size_t>(gy) * stride + static_cast<std::size_t>(gx)]
                  : 0;
          wrong += copy[static_cast<std::size_t>(stored)] != want;
        }
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("tensor maps and mbarriers refuse bad arguments", "[emulation][async]") {
  std::vector<unsigned char> t(4096);
  unsigned char* base = t.data() + (16 - reinterpret_cast<std::uintptr_t>(t.data()) % 16) % 16;
  using emulation::make_tensor_map_2d;
  CHECK_THROWS_WITH(make_tensor_map_2d(base + 1, 2, 8, 8, 16, 8, 8, smem_swizzle::none),
                    Catch::Contains("16-byte aligned"));
  CHECK_THROWS_WITH(make_tensor_map_2d(base, 3, 8, 8, 32, 8, 8, smem_swizzle::none),
                    Catch::Contains("element_bytes"));
  CHECK_THROWS_WITH(make_tensor_map_2d(base, 2, 8, 8, 8, 8, 8, smem_swizzle::none),
                    Catch::Contains("row_stride"));
  CHECK_THROWS_WITH(make_tensor_map_2d(base, 2, 8, 8, 16, 8, 4, smem_swizzle::none),
                    Catch::Contains("multiple of 16 bytes"));
  CHECK_THROWS_WITH(make_tensor_map_2d(base, 2, 8, 64, 128, 300, 8, smem_swizzle::none),
                    Catch::Contains("1 to 256"));
  CHECK_THROWS_WITH(make_tensor_map_2d(base, 2, 8, 64, 128, 8, 32, smem_swizzle::bytes128),
                    Catch::Contains("exactly as wide"));
  CHECK_NOTHROW(make_tensor_map_2d(base, 2, 8, 64, 128, 8, 64, smem_swizzle::bytes128));
}

namespace {

namespace ag = blockscale_test::async_gemm;

struct gemm_case {
  int m, n, k;
};

/// Runs the warp-specialised GEMM on m × k and n × k bf16 operands (`integers`: small integers,
/// whose sums are exact; else random values within ±4) and counts the outputs that differ from
/// the reference: the exact integer product, or the chain of the sm_90 dot-adds in k order.
int gemm_mismatches(const gemm_case& g, ag::form f, bool integers, std::uint64_t seed,
                    ag::bug planted = ag::bug::none) {
  const int lda = (g.k + 7) / 8 * 8; // rows 16-byte aligned
  std::vector<std::uint16_t> a(static_cast<std::size_t>(g.m) * lda),
      b(static_cast<std::size_t>(g.n) * lda);
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ull + 7;
  const auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<std::uint32_t>(state >> 33);
  };
  for (auto* v : {&a, &b})
    for (std::uint16_t& x : *v)
      x = integers
              ? emulation::ptx::bf16_round(static_cast<int>(next() % 9) - 4)
              : emulation::ptx::bf16_round((static_cast<double>(next()) / 2147483648.0 - 0.5) * 8);
  std::vector<float> c(static_cast<std::size_t>(g.m) * g.n, -1.0f);
  ag::gemm_program p;
  p.a_map = emulation::make_tensor_map_2d(
      a.data(), 2, static_cast<std::uint64_t>(g.m), static_cast<std::uint64_t>(g.k),
      static_cast<std::uint64_t>(lda) * 2, ag::tile_m, ag::k_step, smem_swizzle::bytes32);
  p.b_map = emulation::make_tensor_map_2d(
      b.data(), 2, static_cast<std::uint64_t>(g.n), static_cast<std::uint64_t>(g.k),
      static_cast<std::uint64_t>(lda) * 2, ag::tile_n, ag::k_step, smem_swizzle::bytes32);
  p.c = c.data();
  p.m = g.m;
  p.n = g.n;
  p.k = g.k;
  p.f = f;
  p.planted = planted;
  const std::size_t ctas = static_cast<std::size_t>((g.m + ag::tile_m - 1) / ag::tile_m) *
                           static_cast<std::size_t>(p.tiles_n());
  emulation::run_specialized_grid(p, ctas, seed, emulation::ptx::mma_model::sm90);
  int wrong = 0;
  for (int i = 0; i < g.m; ++i)
    for (int j = 0; j < g.n; ++j) {
      float want = 0.0f;
      if (integers) {
        long long sum = 0;
        for (int kk = 0; kk < g.k; ++kk)
          sum += static_cast<long long>(
                     emulation::ptx::bf16_value(a[static_cast<std::size_t>(i) * lda + kk])) *
                 static_cast<long long>(
                     emulation::ptx::bf16_value(b[static_cast<std::size_t>(j) * lda + kk]));
        want = static_cast<float>(sum);
      } else {
        for (int s = 0; s * ag::k_step < g.k; ++s) {
          double av[16] = {}, bv[16] = {};
          for (int kk = 0; kk < 16 && s * 16 + kk < g.k; ++kk) {
            av[kk] = emulation::ptx::bf16_value(a[static_cast<std::size_t>(i) * lda + s * 16 + kk]);
            bv[kk] = emulation::ptx::bf16_value(b[static_cast<std::size_t>(j) * lda + s * 16 + kk]);
          }
          want = emulation::ptx::dot_add_bf16(emulation::ptx::mma_model::sm90, av, bv,
                                              s == 0 ? 0.0f : want);
        }
      }
      const float got = c[static_cast<std::size_t>(i) * g.n + j];
      wrong += std::memcmp(&got, &want, sizeof got) != 0;
    }
  return wrong;
}

const gemm_case gemm_cases[] = {{64, 32, 16}, {100, 48, 40}, {130, 64, 88}};

} // namespace

TEST_CASE("a warp-specialised GEMM with the warpgroup MMA computes C = A · Bᵀ bit for bit",
          "[emulation][async][wgmma]") {
  for (const gemm_case& g : gemm_cases)
    for (const ag::form f : {ag::form::ss, ag::form::rs})
      for (const bool integers : {true, false})
        for (std::uint64_t seed : {0u, 1u, 2u}) {
          INFO(g.m << "x" << g.n << "x" << g.k << (f == ag::form::ss ? " SS" : " RS")
                   << (integers ? ", integers" : ", random") << ", seed " << seed);
          CHECK(gemm_mismatches(g, f, integers, seed) == 0);
        }
}

TEST_CASE("the warpgroup MMA's rules, broken, are caught", "[emulation][async][wgmma]") {
  const gemm_case g = gemm_cases[1];
  for (const ag::form f : {ag::form::ss, ag::form::rs}) {
    CHECK_THROWS_WITH(gemm_mismatches(g, f, true, 0, ag::bug::no_wgmma_fence),
                      Catch::Contains("no wgmma_fence"));
    // Accumulators read before the last wait hold NaN.
    CHECK(gemm_mismatches(g, f, true, 0, ag::bug::read_before_wait) == g.m * g.n);
    CHECK_THROWS_WITH(gemm_mismatches(g, f, true, 0, ag::bug::missing_warp),
                      Catch::Contains("deadlock") && Catch::Contains("warpgroup 0"));
    CHECK_THROWS_WITH(gemm_mismatches(g, f, true, 1, ag::bug::disagree),
                      Catch::Contains("different wgmma"));
    CHECK_THROWS_WITH(gemm_mismatches(g, f, true, 0, ag::bug::scribble_b),
                      Catch::Contains("operand B") && Catch::Contains("fence_proxy_async"));
    CHECK_THROWS_WITH(gemm_mismatches(g, f, true, 2, ag::bug::mixed_setmaxnreg),
                      Catch::Contains("setmaxnreg") && Catch::Contains("(-40, -48, -40, -40"));
  }
}
