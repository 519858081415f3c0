// Hopper's warpgroup MMA on the host (cuda/warp/wgmma.hpp, emulation/ptx.hpp): the descriptor's
// bits, the swizzles against the patterns the PTX ISA draws, the K-major address map as a
// bijection, the warpgroup fragment maps, and the emulated wgmma — SS and RS, every N, every
// swizzle, with and without accumulation, and stepping along K inside a swizzle atom — against
// dot_add_bf16 on the logical matrices, bit for bit. The GPU's own answer is the device test's.
#include <blockscale/cuda/warp/wgmma.hpp>
#include <blockscale/emulation/ptx.hpp>
#include <blockscale/numeric/half.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <stdexcept>
#include <vector>

#include "catch.hpp"
#include "float_bits.hpp"
#include "splitmix64.hpp"

using namespace blockscale;
namespace warp = blockscale::cuda::warp;
namespace ptx = blockscale::emulation::ptx;
using warp::smem_descriptor;
using warp::smem_swizzle;

namespace {

constexpr smem_swizzle all_swizzles[] = {smem_swizzle::none, smem_swizzle::bytes32,
                                         smem_swizzle::bytes64, smem_swizzle::bytes128};

/// The canonical K-major descriptor of a rows × (row_bytes) operand at `address`: without swizzle
/// the K-adjacent core matrices 128 bytes apart and row groups row_bytes · 8 apart; with a W-byte
/// swizzle one atom (8 rows of W bytes) per row group.
smem_descriptor canonical(std::uint32_t address, smem_swizzle s, int row_bytes) {
  if (s == smem_swizzle::none)
    return smem_descriptor::make(address, 128, static_cast<std::uint32_t>(8 * row_bytes), s);
  return smem_descriptor::make(address, 16, static_cast<std::uint32_t>(8 * warp::swizzle_bytes(s)),
                               s);
}

/// A bf16 drawn to exercise the dot-add: normals over a few binades, some zeros and subnormals.
std::uint16_t draw_bf16(splitmix64& rng) {
  const std::uint32_t pick = rng.next_u32() % 16;
  if (pick == 0)
    return 0;
  if (pick == 1) // subnormal
    return static_cast<std::uint16_t>((rng.next_u32() & 0x807Fu) | 1u);
  const float x =
      static_cast<float>(rng.normal() * std::ldexp(1.0, static_cast<int>(pick % 9) - 4));
  return bfloat16(x).bits();
}

double value_of(std::uint16_t bits) {
  return static_cast<double>(static_cast<float>(bfloat16::from_bits(bits)));
}

} // namespace

TEST_CASE("wgmma descriptor: fields and bits", "[unit][wgmma]") {
  const smem_descriptor d = smem_descriptor::make(0x1230, 0x40, 0x400, smem_swizzle::bytes128);
  // start 0x1230 >> 4 = 0x123 in bits 0-13, LBO 4 in 16-29, SBO 0x40 in 32-45, swizzle 1 in 62-63.
  CHECK(d.bits == (0x123ull | (0x4ull << 16) | (0x40ull << 32) | (1ull << 62)));
  CHECK(d.start_address() == 0x1230);
  CHECK(d.leading_bytes() == 0x40);
  CHECK(d.stride_bytes() == 0x400);
  CHECK(d.base_offset() == 0);
  CHECK(d.swizzle() == smem_swizzle::bytes128);
  CHECK(d.advanced(32).start_address() == 0x1250);
  CHECK(d.advanced(32).stride_bytes() == 0x400);
  // The emulation decodes the same fields from the bits alone.
  splitmix64 rng{1};
  for (int i = 0; i < 1000; ++i) {
    const auto s = all_swizzles[rng.next_u32() % 4];
    const std::uint32_t address = (rng.next_u32() % (1u << 14)) * 16;
    const std::uint32_t lbo = (rng.next_u32() % (1u << 14)) * 16;
    const std::uint32_t sbo = (rng.next_u32() % (1u << 14)) * 16;
    const auto e = ptx::decode_wgmma_descriptor(smem_descriptor::make(address, lbo, sbo, s).bits);
    CHECK(e.start == address);
    CHECK(e.leading == lbo);
    CHECK(e.stride == sbo);
    CHECK(e.base_offset == 0);
    CHECK(e.swizzle_width == warp::swizzle_bytes(s));
  }
}

TEST_CASE("wgmma swizzles: the ISA's XOR patterns, involutions", "[unit][wgmma]") {
  using warp::swizzle_address;
  // 128 B: row r of an atom (address bits 7-9) XORs its 16-byte chunk index (bits 4-6).
  CHECK(swizzle_address(smem_swizzle::bytes128, 0x000) == 0x000);
  CHECK(swizzle_address(smem_swizzle::bytes128, 0x080) == 0x090); // row 1, chunk 0 -> chunk 1
  CHECK(swizzle_address(smem_swizzle::bytes128, 0x090) == 0x080);
  CHECK(swizzle_address(smem_swizzle::bytes128, 0x3F5) == 0x385); // row 7 chunk 7 -> chunk 0
  CHECK(swizzle_address(smem_swizzle::bytes128, 0x400) == 0x400); // the next atom starts over
  // 64 B: bits 4-5 XOR bits 7-8, so two 64-byte rows share a pattern.
  CHECK(swizzle_address(smem_swizzle::bytes64, 0x040) == 0x040);
  CHECK(swizzle_address(smem_swizzle::bytes64, 0x080) == 0x090);
  CHECK(swizzle_address(smem_swizzle::bytes64, 0x100) == 0x120);
  CHECK(swizzle_address(smem_swizzle::bytes64, 0x1B0) == 0x180);
  // 32 B: bit 4 XOR bit 7.
  CHECK(swizzle_address(smem_swizzle::bytes32, 0x080) == 0x090);
  CHECK(swizzle_address(smem_swizzle::bytes32, 0x100) == 0x100);
  CHECK(swizzle_address(smem_swizzle::none, 0x090) == 0x090);
  for (const auto s : all_swizzles)
    for (std::uint32_t a = 0; a < 8192; ++a) {
      const std::uint32_t b = swizzle_address(s, a);
      REQUIRE(swizzle_address(s, b) == a);
      // The swizzle moves 16-byte chunks within their W-byte row.
      REQUIRE(b / static_cast<std::uint32_t>(warp::swizzle_bytes(s)) ==
              a / static_cast<std::uint32_t>(warp::swizzle_bytes(s)));
      REQUIRE(b % 16 == a % 16);
    }
}

TEST_CASE("wgmma K-major layouts: one byte per address, as the emulation reads them",
          "[unit][wgmma]") {
  for (const auto s : all_swizzles)
    for (int row_bytes : {32, 64, 128}) {
      if (s != smem_swizzle::none && row_bytes > warp::swizzle_bytes(s))
        continue;
      INFO("swizzle " << warp::swizzle_bytes(s) << ", row bytes " << row_bytes);
      const smem_descriptor d = canonical(1024, s, row_bytes);
      const auto e = ptx::decode_wgmma_descriptor(d.bits);
      std::set<std::uint32_t> seen;
      for (int row = 0; row < 64; ++row)
        for (int k = 0; k < row_bytes; ++k) {
          const std::uint32_t address = warp::kmajor_address(d, row, k);
          REQUIRE(address == ptx::wgmma_kmajor_address(e, row, k));
          REQUIRE(seen.insert(address).second);
        }
      // Without swizzle the 64 rows fill their bytes exactly.
      if (s == smem_swizzle::none) {
        CHECK(*seen.begin() == 1024);
        CHECK(*seen.rbegin() == 1024 + 64 * static_cast<std::uint32_t>(row_bytes) - 1);
      }
    }
}

TEST_CASE("wgmma fragment maps: bijections onto A (64 x 16) and D (64 x N)", "[unit][wgmma]") {
  using traits = warp::mma_traits<warp::sm90_wgmma_m64nNk16_f32_bf16_rs<256>>;
  static_assert(traits::m == 64 && traits::n == 256 && traits::k == 16, "the shape");
  static_assert(warp::wgmma_bf16_rs<8>::kind == warp::mma_kind::wgmma_bf16_rs, "the kind");
  std::vector<int> a_hits(64 * 16, 0);
  for (int thread = 0; thread < 128; ++thread)
    for (int r = 0; r < 4; ++r)
      for (int h = 0; h < 2; ++h) {
        const warp::coord c = traits::a_coord(thread, r, h);
        const ptx::coord e = ptx::bf16_a_coord(thread % 32, r, h);
        CHECK((c.row == 16 * (thread / 32) + e.row && c.col == e.col));
        ++a_hits[static_cast<std::size_t>(c.row * 16 + c.col)];
      }
  CHECK(std::count(a_hits.begin(), a_hits.end(), 1) == 64 * 16);
  for (int n : {8, 16, 32, 64, 128, 256}) {
    std::vector<int> hits(static_cast<std::size_t>(64 * n), 0);
    for (int thread = 0; thread < 128; ++thread)
      for (int i = 0; i < n / 2; ++i) {
        const warp::coord c = traits::c_coord(thread, i);
        REQUIRE(c.col < n);
        ++hits[static_cast<std::size_t>(c.row * n + c.col)];
      }
    CHECK(std::count(hits.begin(), hits.end(), 1) == 64 * n);
  }
}

namespace {

/// Runs the emulated wgmma on random operands laid out by `kmajor_address` and compares every
/// output with dot_add_bf16 on the logical rows.
void check_wgmma(int n, smem_swizzle s, bool registers, bool accumulate, ptx::mma_model model,
                 splitmix64& rng) {
  INFO("N " << n << ", swizzle " << warp::swizzle_bytes(s) << (registers ? ", RS" : ", SS")
            << (accumulate ? ", accumulate" : ""));
  // A: 64 x 64 and B: n x 64 (K = 64, 128-byte rows where the swizzle allows), one wgmma per k16.
  const int k_total = s == smem_swizzle::none ? 64 : warp::swizzle_bytes(s) / 2;
  const int row_bytes = 2 * k_total;
  const std::uint32_t a_at = 0, b_at = 64u * static_cast<std::uint32_t>(row_bytes);
  std::vector<unsigned char> shared(b_at + static_cast<std::size_t>(n * row_bytes) + 1024, 0xEE);
  std::vector<std::uint16_t> a(64 * static_cast<std::size_t>(k_total)),
      b(static_cast<std::size_t>(n * k_total));
  for (auto& x : a)
    x = draw_bf16(rng);
  for (auto& x : b)
    x = draw_bf16(rng);
  const smem_descriptor da = canonical(a_at, s, row_bytes), db = canonical(b_at, s, row_bytes);
  const auto store = [&](const smem_descriptor& d, const std::vector<std::uint16_t>& m, int rows) {
    for (int row = 0; row < rows; ++row)
      for (int k = 0; k < k_total; ++k) {
        const std::uint16_t v = m[static_cast<std::size_t>(row * k_total + k)];
        const std::uint32_t at = warp::kmajor_address(d, row, 2 * k);
        shared[at] = static_cast<unsigned char>(v & 0xFF);
        shared[at + 1] = static_cast<unsigned char>(v >> 8);
      }
  };
  store(da, a, 64);
  store(db, b, n);

  using traits = warp::mma_traits<warp::sm90_wgmma_m64nNk16_f32_bf16_rs<256>>;
  std::vector<float> d(static_cast<std::size_t>(128 * n / 2)), want(d.size());
  for (auto& x : d)
    x = accumulate ? static_cast<float>(rng.normal()) : std::numeric_limits<float>::quiet_NaN();
  want = d;
  for (int step = 0; step < k_total / 16; ++step) {
    // Advancing a descriptor by 32 bytes steps k by 16 inside a row (and a swizzle atom).
    const std::uint32_t bytes = 32u * static_cast<std::uint32_t>(step);
    // Without swizzle the next k16 starts two core matrices (2 · LBO = 256 bytes) further.
    const std::uint32_t advance =
        s == smem_swizzle::none ? 2 * 128 * static_cast<std::uint32_t>(step) : bytes;
    std::uint32_t regs[128][4];
    for (int thread = 0; thread < 128; ++thread)
      for (int r = 0; r < 4; ++r) {
        std::uint32_t word = 0;
        for (int h = 0; h < 2; ++h) {
          const warp::coord c = traits::a_coord(thread, r, h);
          word |= std::uint32_t{a[static_cast<std::size_t>(c.row * k_total + 16 * step + c.col)]}
                  << (16 * h);
        }
        regs[thread][r] = word;
      }
    const bool scale_d = accumulate || step > 0;
    ptx::wgmma_m64nNk16_bf16(n, d.data(), registers ? regs : nullptr, da.advanced(advance).bits,
                             db.advanced(advance).bits, shared.data(), shared.size(), scale_d,
                             model);
    for (int thread = 0; thread < 128; ++thread)
      for (int i = 0; i < n / 2; ++i) {
        const warp::coord c = traits::c_coord(thread, i);
        double av[16], bv[16];
        for (int k = 0; k < 16; ++k) {
          av[k] = value_of(a[static_cast<std::size_t>(c.row * k_total + 16 * step + k)]);
          bv[k] = value_of(b[static_cast<std::size_t>(c.col * k_total + 16 * step + k)]);
        }
        float& w = want[static_cast<std::size_t>(thread * n / 2 + i)];
        w = ptx::dot_add_bf16(model, av, bv, scale_d ? w : 0.0f);
      }
  }
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < d.size(); ++i)
    wrong += float_bits(d[i]) != float_bits(want[i]);
  CHECK(wrong == 0);
}

} // namespace

TEST_CASE("wgmma emulated: SS and RS, every N and swizzle, against dot_add_bf16 bit for bit",
          "[unit][wgmma]") {
  splitmix64 rng{2026};
  for (int n : {8, 16, 32, 64, 128, 256})
    for (const auto s : all_swizzles)
      for (bool registers : {false, true})
        check_wgmma(n, s, registers, n == 64, ptx::mma_model::sm90, rng);
  check_wgmma(24, smem_swizzle::bytes128, false, true, ptx::mma_model::exact, rng);
}

TEST_CASE("wgmma emulated: what it does not model fails loudly", "[unit][wgmma]") {
  // A (64 rows of 128 bytes, 128-byte swizzle) fills 8 KiB exactly; from 1 KiB on it does not fit.
  std::vector<unsigned char> shared(8192, 0);
  std::vector<float> d(128 * 4, 0.0f);
  const smem_descriptor inside = canonical(0, smem_swizzle::bytes128, 128);
  const smem_descriptor beyond = canonical(1024, smem_swizzle::bytes128, 128);
  CHECK_NOTHROW(ptx::wgmma_m64nNk16_bf16(8, d.data(), nullptr, inside.bits, inside.bits,
                                         shared.data(), shared.size(), false));
  CHECK_THROWS_AS(ptx::wgmma_m64nNk16_bf16(8, d.data(), nullptr, beyond.bits, inside.bits,
                                           shared.data(), shared.size(), false),
                  std::out_of_range);
  CHECK_THROWS_AS(ptx::wgmma_m64nNk16_bf16(8, d.data(), nullptr, inside.bits | (1ull << 49),
                                           inside.bits, shared.data(), shared.size(), false),
                  std::invalid_argument);
  CHECK_THROWS_AS(ptx::wgmma_m64nNk16_bf16(12, d.data(), nullptr, inside.bits, inside.bits,
                                           shared.data(), shared.size(), false),
                  std::invalid_argument);
}
