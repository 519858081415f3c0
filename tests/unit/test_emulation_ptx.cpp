// The PTX emulation of emulation/ptx.hpp against references written here from the instructions'
// descriptions: bf16 rounding by a binary search over the ordered bf16 codes and by float
// arithmetic where that is provably exact, hand-computed subnormal, overflow, NaN and signed-zero
// cases; the MMA fragment maps restated literally (and checked to be bijections), tiles built as
// matrices, scattered to registers, multiplied and gathered, compared bit for bit with plain loops;
// every scale selector of the block-scaled MMA, including which scale lanes and bytes it reads;
// ldmatrix's distribution with and without .trans; shfl.sync's segments.
#include <blockscale/emulation/ptx.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "catch.hpp"
#include "float_bits.hpp"
#include "splitmix64.hpp"

namespace ptx = blockscale::emulation::ptx;

namespace {

float bf16_float(std::uint16_t code) {
  return float_from_bits(std::uint32_t{code} << 16);
}
bool bf16_is_nan(std::uint16_t code) {
  return (code & 0x7FFF) > 0x7F80;
}
// A float that is a bf16 value (the tests only pass such), as its code.
std::uint16_t bf16_code(float x) {
  return static_cast<std::uint16_t>(float_bits(x) >> 16);
}

// The bf16 nearest to the exact value x (finite), ties to the even code, by binary search over the
// nonnegative codes 0x0000..0x7F80, whose values increase; 0x7F80 stands for 2^128 so that the
// overflow threshold is the midpoint between the largest finite bf16 and 2^128, as IEEE rounds.
std::uint16_t nearest_bf16(double x) {
  const double magnitude = std::fabs(x);
  const auto value = [](unsigned code) {
    return code == 0x7F80 ? 0x1p128
                          : static_cast<double>(bf16_float(static_cast<std::uint16_t>(code)));
  };
  unsigned low = 0, high = 0x7F80; // invariant: value(low) <= magnitude < value(high), or high
  if (magnitude >= value(high)) {
    low = high;
  } else {
    while (high - low > 1) {
      const unsigned mid = (low + high) / 2;
      (value(mid) <= magnitude ? low : high) = mid;
    }
    const double midpoint = (value(low) + value(low + 1)) / 2; // exact: neighbours in double
    if (magnitude > midpoint || (magnitude == midpoint && (low & 1) != 0))
      low = low + 1;
  }
  return static_cast<std::uint16_t>(low | (std::signbit(x) ? 0x8000u : 0u));
}

// float → bf16 nearest even on the bits (correct for every float; NaN not passed).
std::uint16_t float_to_bf16(float x) {
  const std::uint32_t u = float_bits(x);
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

std::uint32_t pack(std::uint16_t low, std::uint16_t high) {
  return std::uint32_t{low} | std::uint32_t{high} << 16;
}
std::uint16_t half(std::uint32_t word, int h) {
  return static_cast<std::uint16_t>(word >> (16 * h));
}

// --- Fragment maps, restated from the PTX ISA's figures (g = lane / 4, t = lane % 4). ---------
struct mk {
  int row, col;
};
mk map_bf16_a(int lane, int r, int h) {
  return {(lane >> 2) + 8 * (r & 1), 2 * (lane & 3) + h + 8 * (r >> 1)};
}
mk map_bf16_b(int lane, int r, int h) {
  return {lane >> 2, 2 * (lane & 3) + h + 8 * r};
}
mk map_fp4_a(int lane, int r, int i) {
  return {(lane >> 2) + 8 * (r & 1), 8 * (lane & 3) + i + 32 * (r >> 1)};
}
mk map_fp4_b(int lane, int r, int i) {
  return {lane >> 2, 8 * (lane & 3) + i + 32 * r};
}
mk map_cd(int lane, int r) {
  return {(lane >> 2) + 8 * (r >> 1), 2 * (lane & 3) + (r & 1)};
}

// Every (lane, register, element) of a map hits each cell of a rows×cols tile exactly once, and
// the header's map says the same.
template <class Mine, class Theirs>
void check_map(int regs, int elements, int rows, int cols, Mine mine, Theirs theirs) {
  std::vector<int> hits(static_cast<std::size_t>(rows * cols), 0);
  int mismatches = 0;
  for (int lane = 0; lane < 32; ++lane)
    for (int r = 0; r < regs; ++r)
      for (int e = 0; e < elements; ++e) {
        const mk p = mine(lane, r, e);
        const ptx::coord q = theirs(lane, r, e);
        mismatches += p.row != q.row || p.col != q.col;
        REQUIRE(p.row >= 0);
        REQUIRE(p.row < rows);
        REQUIRE(p.col >= 0);
        REQUIRE(p.col < cols);
        ++hits[static_cast<std::size_t>(p.row * cols + p.col)];
      }
  CHECK(mismatches == 0);
  for (int h : hits)
    REQUIRE(h == 1);
}

using tile16x8 = float[16][8];

void scatter_c(float c[32][4], const tile16x8& cm) {
  for (int lane = 0; lane < 32; ++lane)
    for (int r = 0; r < 4; ++r)
      c[lane][r] = cm[map_cd(lane, r).row][map_cd(lane, r).col];
}
// D gathered and compared bit for bit with the expected tile; the number of differing cells.
int count_differences(const float d[32][4], const tile16x8& expected) {
  int differences = 0;
  for (int lane = 0; lane < 32; ++lane)
    for (int r = 0; r < 4; ++r) {
      const mk p = map_cd(lane, r);
      const bool same = float_bits(d[lane][r]) == float_bits(expected[p.row][p.col]);
      if (!same)
        UNSCOPED_INFO("m=" << p.row << " n=" << p.col << " got " << d[lane][r] << " expected "
                           << expected[p.row][p.col]);
      differences += !same;
    }
  return differences;
}

const ptx::mma_model all_models[] = {ptx::mma_model::exact, ptx::mma_model::sm80,
                                     ptx::mma_model::sm90, ptx::mma_model::sm100,
                                     ptx::mma_model::sm120};

// --- bf16 MMA harness --------------------------------------------------------------------------
struct bf16_tiles {
  std::uint16_t a[16][16]; // m×k codes
  std::uint16_t b[8][16];  // n×k codes
  float c[16][8];
};

void run_bf16(const bf16_tiles& t, float d[32][4], ptx::mma_model model = ptx::mma_model::exact) {
  std::uint32_t a[32][4] = {}, b[32][2] = {};
  float c[32][4];
  for (int lane = 0; lane < 32; ++lane)
    for (int h = 0; h < 2; ++h) {
      for (int r = 0; r < 4; ++r)
        a[lane][r] |= std::uint32_t{t.a[map_bf16_a(lane, r, h).row][map_bf16_a(lane, r, h).col]}
                      << (16 * h);
      for (int r = 0; r < 2; ++r)
        b[lane][r] |= std::uint32_t{t.b[map_bf16_b(lane, r, h).row][map_bf16_b(lane, r, h).col]}
                      << (16 * h);
    }
  scatter_c(c, t.c);
  ptx::mma_m16n8k16_bf16(d, a, b, c, model);
}

// --- E2M1 MMA harness --------------------------------------------------------------------------
const double e2m1_table[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6};

double ue4m3(unsigned code) {
  code &= 0x7F;
  const int e = static_cast<int>(code >> 3), m = static_cast<int>(code & 7);
  return e == 0 ? m / 512.0 : (1 + m / 8.0) * std::pow(2.0, e - 7);
}
double ue8m0(unsigned code) {
  return std::pow(2.0, static_cast<int>(code) - 127);
}

struct fp4_tiles {
  unsigned a[16][64], b[8][64]; // E2M1 codes
  unsigned sa[16][4], sb[8][4]; // scale codes per row / column and block
  float c[16][8];
};

struct fp4_selector {
  int scale_vec;
  ptx::scale_kind kind;
  int byte_a, thread_a, byte_b, thread_b;
};

struct fp4_registers {
  std::uint32_t a[32][4], b[32][2], sfa[32], sfb[32];
  float c[32][4];
};

// Registers for the tiles under selector s; the scale words of lanes and bytes it does not read
// are filled from `junk`.
fp4_registers scatter_fp4(const fp4_tiles& t, const fp4_selector& s, splitmix64& junk) {
  fp4_registers reg{};
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 8; ++i) {
      for (int r = 0; r < 4; ++r)
        reg.a[lane][r] |= t.a[map_fp4_a(lane, r, i).row][map_fp4_a(lane, r, i).col] << (4 * i);
      for (int r = 0; r < 2; ++r)
        reg.b[lane][r] |= t.b[map_fp4_b(lane, r, i).row][map_fp4_b(lane, r, i).col] << (4 * i);
    }
    reg.sfa[lane] = junk.next_u32();
    reg.sfb[lane] = junk.next_u32();
  }
  const auto put = [](std::uint32_t& word, int byte, unsigned code) {
    word = (word & ~(0xFFu << (8 * byte))) | code << (8 * byte);
  };
  const int blocks = s.scale_vec;
  for (int m = 0; m < 16; ++m)
    for (int j = 0; j < blocks; ++j)
      put(reg.sfa[4 * (m % 8) + m / 8 + 2 * s.thread_a], s.byte_a + j, t.sa[m][j]);
  for (int n = 0; n < 8; ++n)
    for (int j = 0; j < blocks; ++j)
      put(reg.sfb[4 * n + s.thread_b], s.byte_b + j, t.sb[n][j]);
  scatter_c(reg.c, t.c);
  return reg;
}

void run_fp4(const fp4_registers& reg, const fp4_selector& s, float d[32][4],
             ptx::mma_model model = ptx::mma_model::exact) {
  ptx::mma_m16n8k64_mxf4nvf4(s.scale_vec, s.kind, d, reg.a, reg.b, reg.c, reg.sfa, s.byte_a,
                             s.thread_a, reg.sfb, s.byte_b, s.thread_b, model);
}

// Plain loops in double; exact for the ranges the tests draw from, so one cast rounds correctly.
void expected_fp4(const fp4_tiles& t, ptx::scale_kind kind, int scale_vec, tile16x8& out) {
  const int block = 64 / scale_vec;
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n) {
      double sum = t.c[m][n];
      for (int k = 0; k < 64; ++k) {
        const double sa =
            kind == ptx::scale_kind::ue4m3 ? ue4m3(t.sa[m][k / block]) : ue8m0(t.sa[m][k / block]);
        const double sb =
            kind == ptx::scale_kind::ue4m3 ? ue4m3(t.sb[n][k / block]) : ue8m0(t.sb[n][k / block]);
        sum += e2m1_table[t.a[m][k]] * sa * e2m1_table[t.b[n][k]] * sb;
      }
      out[m][n] = static_cast<float>(sum);
    }
}

// Tiles with scale codes from [low, high] and E2M1 codes from all 16 (or positive ones only).
fp4_tiles random_fp4(splitmix64& rng, unsigned low, unsigned high, bool positive) {
  fp4_tiles t;
  const auto element = [&] {
    return positive ? 1 + static_cast<unsigned>(rng.next() % 7)
                    : static_cast<unsigned>(rng.next() % 16);
  };
  const auto scale = [&] { return low + static_cast<unsigned>(rng.next() % (high - low + 1)); };
  for (auto& row : t.a)
    for (auto& x : row)
      x = element();
  for (auto& row : t.b)
    for (auto& x : row)
      x = element();
  for (auto& row : t.sa)
    for (auto& x : row)
      x = scale();
  for (auto& row : t.sb)
    for (auto& x : row)
      x = scale();
  for (auto& row : t.c)
    for (auto& x : row)
      x = static_cast<float>(static_cast<int>(rng.next() % 64) - (positive ? 0 : 32));
  return t;
}

std::vector<fp4_selector> all_selectors() {
  std::vector<fp4_selector> all;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 4; ++tb) {
      all.push_back({4, ptx::scale_kind::ue4m3, 0, ta, 0, tb});
      for (int ba = 0; ba <= 2; ba += 2)
        for (int bb = 0; bb <= 2; bb += 2)
          all.push_back({2, ptx::scale_kind::ue8m0, ba, ta, bb, tb});
    }
  return all;
}

} // namespace

TEST_CASE("ptx fragment maps are the ISA's and bijections", "[unit][emulation]") {
  check_map(4, 2, 16, 16, map_bf16_a, ptx::bf16_a_coord);
  check_map(2, 2, 8, 16, map_bf16_b, ptx::bf16_b_coord);
  check_map(4, 8, 16, 64, map_fp4_a, ptx::fp4_a_coord);
  check_map(2, 8, 8, 64, map_fp4_b, ptx::fp4_b_coord);
  check_map(
      4, 1, 16, 8, [](int lane, int r, int) { return map_cd(lane, r); },
      [](int lane, int r, int) { return ptx::accumulator_coord(lane, r); });
  // Scale lanes: distinct per row (per thread-id), per column, and as the ISA's tables give.
  for (int tid = 0; tid < 2; ++tid)
    for (int m = 0; m < 16; ++m) {
      CHECK(ptx::scale_a_lane(m, tid) == 4 * (m % 8) + m / 8 + 2 * tid);
      for (int m2 = 0; m2 < m; ++m2)
        CHECK(ptx::scale_a_lane(m, tid) != ptx::scale_a_lane(m2, tid));
    }
  for (int tid = 0; tid < 4; ++tid)
    for (int n = 0; n < 8; ++n)
      CHECK(ptx::scale_b_lane(n, tid) == 4 * n + tid);
}

TEST_CASE("mul_bf16x2 against float products and a search over bf16 codes", "[unit][emulation]") {
  splitmix64 rng{0x6D756C6266ull};
  std::uint16_t bs[160];
  for (auto& b : bs)
    b = static_cast<std::uint16_t>(rng.next_u32());
  long long float_checked = 0, search_checked = 0, mismatches = 0;
  for (unsigned a = 0; a < 0x10000; ++a)
    for (const std::uint16_t b : bs) {
      const auto a_high = static_cast<std::uint16_t>(a * 40503u + 7u); // another a in the high half
      const std::uint32_t d = ptx::mul_bf16x2(pack(static_cast<std::uint16_t>(a), a_high),
                                              pack(b, static_cast<std::uint16_t>(~b)));
      const std::uint16_t as[2] = {static_cast<std::uint16_t>(a), a_high};
      const std::uint16_t bh[2] = {b, static_cast<std::uint16_t>(~b)};
      for (int h = 0; h < 2; ++h) {
        const float fa = bf16_float(as[h]), fb = bf16_float(bh[h]);
        const std::uint16_t got = half(d, h);
        const double exact = static_cast<double>(fa) * fb; // 16 bits: exact in double
        if (std::isnan(exact)) {
          mismatches += got != 0x7FFF;
          continue;
        }
        // The float product is exact unless the exact product lies below float's normal range.
        if (exact == 0 || std::fabs(exact) >= 0x1p-126) {
          mismatches += got != float_to_bf16(fa * fb);
          ++float_checked;
        }
        if (!std::isinf(exact)) {
          mismatches += got != nearest_bf16(exact);
          ++search_checked;
        }
      }
    }
  INFO("float-checked " << float_checked << ", search-checked " << search_checked);
  CHECK(mismatches == 0);
  CHECK(float_checked > 15000000);
  CHECK(search_checked > 18000000);

  struct product {
    std::uint16_t a, b, d;
  };
  const product cases[] = {
      {0x0001, 0x3F80, 0x0001}, // 2^-133 · 1: the smallest subnormal survives
      {0x0001, 0x3F00, 0x0000}, // 2^-134: a tie between 0 and 2^-133, to even 0
      {0x0001, 0x3FC0, 0x0002}, // 1.5 · 2^-133: a tie, to even 2 · 2^-133
      {0x0003, 0x3F00, 0x0002}, // 1.5 · 2^-133 again
      {0x0005, 0x3F00, 0x0002}, // 2.5 · 2^-133 → 2 (even)
      {0x0001, 0xBF00, 0x8000}, // −2^-134 → −0
      {0x007F, 0x4000, 0x00FE}, // subnormal · 2 = subnormal, exact
      {0x007F, 0x4040, 0x013E}, // 381 · 2^-133: 9 bits, a tie → 190 · 2^-132 (normal, even)
      {0x1C80, 0x2180, 0x0008}, // 2^-70 · 2^-60 = 2^-130, normal × normal → subnormal
      {0x1CC0, 0x2180, 0x000C}, // 1.5 · 2^-70 · 2^-60 = 12 · 2^-133
      {0x0080, 0x3F00, 0x0040}, // 2^-126 · 0.5: normal → subnormal
      {0x7F7F, 0x3F80, 0x7F7F}, // max · 1
      {0x7F7F, 0x4000, 0x7F80}, // max · 2 → +Inf
      {0x7F7F, 0xC000, 0xFF80}, // → −Inf
      {0x5F80, 0x5F80, 0x7F80}, // 2^64 · 2^64 = 2^128 → +Inf
      {0x5F7F, 0x5F80, 0x7F7F}, // just below: finite
      {0x7F80, 0xC000, 0xFF80}, // Inf · −2
      {0x7F80, 0x0000, 0x7FFF}, // Inf · 0 → NaN
      {0x7FC0, 0x3F80, 0x7FFF}, // NaN · 1 → canonical NaN
      {0xFFC1, 0x3F80, 0x7FFF}, // negative NaN with payload → canonical
      {0x3F80, 0x7F81, 0x7FFF}, // signalling-pattern NaN → canonical
      {0x8000, 0x4040, 0x8000}, // −0 · 3 = −0
      {0x8000, 0xC040, 0x0000}, // −0 · −3 = +0
      {0x0000, 0xC040, 0x8000}, // +0 · −3 = −0
      {0x3FC0, 0x3FC0, 0x4010}, // 1.5 · 1.5 = 2.25
      {0x3F88, 0x3F88, 0x3F90}, // 1.0625² = 1.12890625, a tie → 1.125
  };
  for (const product& p : cases) {
    INFO(std::hex << p.a << " * " << p.b);
    CHECK(ptx::mul_bf16x2(p.a, p.b) == p.d);                                           // low half
    CHECK(ptx::mul_bf16x2(pack(0x3F80, p.a), pack(0x4000, p.b)) == pack(0x4000, p.d)); // high
  }
  // A NaN in one half leaves the other alone.
  CHECK(ptx::mul_bf16x2(pack(0x7FC0, 0x4040), pack(0x3F80, 0x4000)) == pack(0x7FFF, 0x40C0));
}

TEST_CASE("fma_bf16x2 rounds a·b + c once", "[unit][emulation]") {
  // a·b + (−0) is a·b for every a, b (also when a·b is ±0), so fma agrees with mul.
  splitmix64 rng{0x666D61ull};
  long long mismatches = 0;
  for (int i = 0; i < 400000; ++i) {
    const std::uint32_t a = rng.next_u32(), b = rng.next_u32();
    mismatches += ptx::fma_bf16x2(a, b, 0x80008000u) != ptx::mul_bf16x2(a, b);
  }
  CHECK(mismatches == 0);

  // Random triples, c drawn near −a·b half the time (cancellation) and with exponents that keep
  // the double sum exact (its TwoSum error is zero): then the search gives the reference.
  long long checked = 0;
  mismatches = 0;
  for (int i = 0; i < 400000; ++i) {
    const auto a = static_cast<std::uint16_t>(rng.next_u32());
    const auto b = static_cast<std::uint16_t>(rng.next_u32());
    const double p = static_cast<double>(bf16_float(a)) * bf16_float(b);
    std::uint16_t c = static_cast<std::uint16_t>(rng.next_u32());
    if ((i & 1) != 0 && std::isfinite(p))
      c = static_cast<std::uint16_t>(nearest_bf16(-p) + (rng.next() % 9) - 4);
    const double cv = bf16_float(c);
    const std::uint16_t got = ptx::fma_bf16x2(a, b, c);
    if (bf16_is_nan(a) || bf16_is_nan(b) || bf16_is_nan(c) || std::isnan(p) ||
        (std::isinf(p) && std::isinf(cv) && (p > 0) != (cv > 0))) {
      mismatches += got != 0x7FFF;
      continue;
    }
    if (std::isinf(p) || std::isinf(cv)) {
      mismatches += got != (std::isinf(p) ? nearest_bf16(p > 0 ? 0x1p200 : -0x1p200) : c);
      continue;
    }
    const double s = p + cv, bb = s - p, err = (p - (s - bb)) + (cv - bb); // TwoSum
    if (err != 0)
      continue;
    const std::uint16_t expected =
        s == 0 ? static_cast<std::uint16_t>(std::signbit(p) && std::signbit(cv) ? 0x8000 : 0)
               : nearest_bf16(s);
    if (got != expected && mismatches < 5)
      UNSCOPED_INFO(std::hex << a << " " << b << " " << c << " got " << got << " expected "
                             << expected);
    mismatches += got != expected;
    ++checked;
  }
  CHECK(mismatches == 0);
  CHECK(checked > 150000);

  struct triple {
    std::uint16_t a, b, c, d;
  };
  const triple cases[] = {
      {0x3F88, 0x3F88, 0x0000, 0x3F90}, // 1.12890625: a tie → 1.125
      {0x3F88, 0x3F88, 0x0B80, 0x3F91}, // + 2^-104: just above the tie (exact only beyond double)
      {0x3F88, 0x3F88, 0x8B80, 0x3F90}, // − 2^-104: just below
      {0x3F88, 0x3F88, 0x0001, 0x3F91}, // + 2^-133
      {0x3FC0, 0x3FC0, 0xC010, 0x0000}, // 2.25 − 2.25 = +0
      {0xBFC0, 0x3FC0, 0x4010, 0x0000}, // −2.25 + 2.25 = +0
      {0x8000, 0x3F80, 0x8000, 0x8000}, // −0 + −0 = −0
      {0x8000, 0x3F80, 0x0000, 0x0000}, // −0 + +0 = +0
      {0x1C80, 0x2180, 0x0001, 0x0009}, // 2^-130 + 2^-133 = 9 · 2^-133
      {0x0001, 0x0001, 0x3F80, 0x3F80}, // 2^-266 + 1 = 1
      {0x0001, 0x0001, 0x8000, 0x0000}, // 2^-266 + −0 → +0 (a positive value rounded to zero)
      {0x8001, 0x0001, 0x0000, 0x8000}, // −2^-266 + 0 → −0
      {0x0001, 0x3F00, 0x0001, 0x0002}, // 2^-134 + 2^-133 = 1.5 · 2^-133 → 2 · 2^-133
      {0x7F7F, 0x3F80, 0x7F7F, 0x7F80}, // max + max → +Inf
      {0x7F7F, 0x3F80, 0xFF7F, 0x0000}, // max − max = +0
      {0x7F80, 0x3F80, 0xFF80, 0x7FFF}, // Inf − Inf → NaN
      {0x7F80, 0x3F80, 0x7F80, 0x7F80}, // Inf + Inf
      {0x3F80, 0x3F80, 0xFF80, 0xFF80}, // 1 − Inf
      {0x3F80, 0x3F80, 0x7FC0, 0x7FFF}, // NaN c
      {0x0000, 0x7F80, 0x3F80, 0x7FFF}, // 0 · Inf + 1 → NaN
  };
  for (const triple& t : cases) {
    INFO(std::hex << t.a << " * " << t.b << " + " << t.c);
    CHECK(ptx::fma_bf16x2(t.a, t.b, t.c) == t.d);
    CHECK(ptx::fma_bf16x2(pack(0x4000, t.a), pack(0x4000, t.b), pack(0x3F80, t.c)) ==
          pack(0x40A0, t.d)); // 2 · 2 + 1 = 5 in the low half
  }
  CHECK(ptx::bf16_round(0x1p-134) == 0x0000);
  CHECK(ptx::bf16_round(-0x1.8p-134) == 0x8001);
  CHECK(ptx::bf16_round(0x1.FEp127) == 0x7F7F);   // the largest finite bf16
  CHECK(ptx::bf16_round(0x1.FFp127) == 0x7F80);   // 2^128 (1 − 2^-9): the overflow tie → Inf
  CHECK(ptx::bf16_round(0x1.FEFFp127) == 0x7F7F); // just below it
  CHECK(ptx::bf16_round(std::numeric_limits<double>::quiet_NaN()) == 0x7FFF);
}

TEST_CASE("mma_m16n8k16_bf16 on integer tiles equals plain loops in every model",
          "[unit][emulation]") {
  splitmix64 rng{0x6D6D61ull};
  for (int round = 0; round < 40; ++round) {
    bf16_tiles t;
    float a[16][16], b[8][16];
    for (int m = 0; m < 16; ++m)
      for (int k = 0; k < 16; ++k)
        t.a[m][k] = bf16_code(a[m][k] = static_cast<float>(static_cast<int>(rng.next() % 33) - 16));
    for (int n = 0; n < 8; ++n)
      for (int k = 0; k < 16; ++k)
        t.b[n][k] = bf16_code(b[n][k] = static_cast<float>(static_cast<int>(rng.next() % 33) - 16));
    tile16x8 expected;
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 8; ++n) {
        t.c[m][n] = static_cast<float>(static_cast<int>(rng.next() % 2001) - 1000);
        float sum = t.c[m][n]; // integers below 2^24: exact in any order
        for (int k = 0; k < 16; ++k)
          sum += a[m][k] * b[n][k];
        expected[m][n] = sum;
      }
    // Integer sums below 2^24 lose nothing to any model's truncation.
    for (const ptx::mma_model model : all_models) {
      INFO("model " << static_cast<int>(model));
      float d[32][4];
      run_bf16(t, d, model);
      REQUIRE(count_differences(d, expected) == 0);
    }
  }
}

TEST_CASE("mma_m16n8k16_bf16's exact model is exact, keeps subnormals, and follows IEEE specials",
          "[unit][emulation]") {
  bf16_tiles t{};
  tile16x8 expected{};
  float d[32][4];
  // Row 0: 2^24 + 1 + 2^-100 (2^-50 · 2^-50) rounds to 2^24 + 2; without the tiny term the tie
  // goes to even, 2^24. Row 1: 2^60 + 1 − 2^60 = 1, where a float running sum would give 0.
  // Row 2: bf16 subnormals 3 · 2^-133 times 2^120 = 3 · 2^-13. Row 3: 2^-133 · 2^-16 = 2^-149,
  // the smallest float subnormal.
  for (int n = 0; n < 8; ++n) {
    t.c[0][n] = 0x1p24f;
    t.a[0][0] = 0x3F80;
    t.b[n][0] = 0x3F80;
    t.a[0][1] = 0x2680;                       // 2^-50
    t.b[n][1] = n % 2 == 0 ? 0x2680 : 0x0000; // 2^-50 or 0
    expected[0][n] = n % 2 == 0 ? 0x1p24f + 2 : 0x1p24f;
    t.a[1][2] = 0x5D80; // 2^60
    t.a[1][3] = 0x3F80;
    t.a[1][4] = 0xDD80; // −2^60
    t.b[n][2] = t.b[n][3] = t.b[n][4] = 0x3F80;
    expected[1][n] = 1;
    t.a[2][5] = 0x0003;
    t.b[n][5] = 0x7B80; // 2^120
    expected[2][n] = 0x3p-13f;
    t.a[3][6] = 0x0001;
    t.b[n][6] = 0x3780; // 2^-16
    expected[3][n] = std::ldexp(1.0f, -149);
  }
  run_bf16(t, d);
  CHECK(count_differences(d, expected) == 0);

  // Specials: a NaN in A row 5 → row 5 NaN; Inf in B column 3 meeting A[m][7] = 1 (m = 6) → +Inf,
  // meeting A[m][7] = 0 (every other row) → NaN; C[8][2] = +Inf; C[9][1] = +Inf with a −Inf
  // product → NaN, and row 9's other columns −Inf · 0 → NaN.
  bf16_tiles s{};
  tile16x8 want{};
  const float nan = float_from_bits(0x7FFFFFFF), inf = std::numeric_limits<float>::infinity();
  s.a[5][0] = 0x7FC1;
  s.a[6][7] = 0x3F80;
  s.b[3][7] = 0x7F80;
  s.c[8][2] = inf;
  s.c[9][1] = inf;
  s.a[9][8] = 0xFF80;
  s.b[1][8] = 0x3F80;
  s.c[10][4] = -0.0f; // all addends −0 only where C is −0 and the products are −0
  s.a[10][9] = 0x8000;
  s.b[4][9] = 0x3F80;
  for (int n = 0; n < 8; ++n)
    want[5][n] = nan;
  want[6][3] = inf;
  for (int m = 0; m < 16; ++m)
    if (m != 6)
      want[m][3] = nan; // 0 · Inf
  want[8][2] = inf;
  for (int n = 0; n < 8; ++n)
    want[9][n] = nan;
  // Row 10: every product of the row is ±0 · x; column 4 has −0 · 1 = −0 and C = −0, but the other
  // 15 products 0 · 0 = +0 → +0. IEEE gives −0 only when every addend is −0.
  want[10][4] = 0.0f;
  run_bf16(s, d);
  CHECK(count_differences(d, want) == 0);

  // Every addend −0: C = −0 and each product (−0) · (+1).
  bf16_tiles z{};
  for (int m = 0; m < 16; ++m)
    for (int k = 0; k < 16; ++k)
      z.a[m][k] = 0x8000;
  for (int n = 0; n < 8; ++n)
    for (int k = 0; k < 16; ++k)
      z.b[n][k] = 0x3F80;
  tile16x8 negative_zero;
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n)
      z.c[m][n] = negative_zero[m][n] = -0.0f;
  run_bf16(z, d);
  CHECK(count_differences(d, negative_zero) == 0);

  // In place: d may be c.
  bf16_tiles one{}; // only C is used; A = B = 1 everywhere
  tile16x8 ones;
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n) {
      one.c[m][n] = static_cast<float>(m * 8 + n);
      ones[m][n] = one.c[m][n] + 16;
    }
  std::uint32_t ar[32][4], br[32][2];
  for (int lane = 0; lane < 32; ++lane) {
    for (int r = 0; r < 4; ++r)
      ar[lane][r] = 0x3F803F80u;
    for (int r = 0; r < 2; ++r)
      br[lane][r] = 0x3F803F80u;
  }
  float cd[32][4];
  scatter_c(cd, one.c);
  ptx::mma_m16n8k16_bf16(cd, ar, br, cd, ptx::mma_model::exact);
  CHECK(count_differences(cd, ones) == 0);
}

TEST_CASE("mma_m16n8k64_mxf4nvf4 for every scale selector", "[unit][emulation]") {
  splitmix64 rng{0x6D7866ull};
  for (const fp4_selector& s : all_selectors()) {
    INFO("scale_vec " << s.scale_vec << " byte_a " << s.byte_a << " thread_a " << s.thread_a
                      << " byte_b " << s.byte_b << " thread_b " << s.thread_b);
    const bool e4 = s.kind == ptx::scale_kind::ue4m3;
    for (int round = 0; round < 4; ++round) {
      // Wide scale ranges (the double reference stays exact): UE4M3 all finite codes, UE8M0 ±8.
      const fp4_tiles t =
          e4 ? random_fp4(rng, 0x00, 0x7E, false) : random_fp4(rng, 119, 135, false);
      tile16x8 expected;
      expected_fp4(t, s.kind, s.scale_vec, expected);
      const fp4_registers reg = scatter_fp4(t, s, rng);
      float d[32][4];
      run_fp4(reg, s, d);
      REQUIRE(count_differences(d, expected) == 0);
    }
    // Small scales keep every sum exact in float, so every scale change shows. Changing a byte of a
    // lane the selector does not read changes nothing; a read one changes exactly its row / column.
    const fp4_tiles t = e4 ? random_fp4(rng, 0x30, 0x40, true) : random_fp4(rng, 125, 129, true);
    const fp4_registers reg = scatter_fp4(t, s, rng);
    float base[32][4];
    run_fp4(reg, s, base);
    int wrong = 0;
    for (int side = 0; side < 2; ++side)
      for (int lane = 0; lane < 32; ++lane)
        for (int byte = 0; byte < 4; ++byte) {
          fp4_registers changed = reg;
          std::uint32_t& word = side == 0 ? changed.sfa[lane] : changed.sfb[lane];
          const unsigned old = (word >> (8 * byte)) & 0xFF;
          const unsigned code = e4 ? (old == 0x38 ? 0x39 : 0x38) : (old == 127 ? 128 : 127);
          word = (word & ~(0xFFu << (8 * byte))) | code << (8 * byte);
          const int first = side == 0 ? s.byte_a : s.byte_b;
          const bool byte_read = byte >= first && byte < first + s.scale_vec;
          int owner = -1; // the row (A) or column (B) whose scale this lane holds, if any
          for (int x = 0; x < (side == 0 ? 16 : 8); ++x)
            if ((side == 0 ? 4 * (x % 8) + x / 8 + 2 * s.thread_a : 4 * x + s.thread_b) == lane)
              owner = x;
          const bool original_valid = (e4 ? old >= 0x30 && old <= 0x40 : old >= 125 && old <= 129);
          const bool read = byte_read && owner >= 0;
          if (read && !original_valid)
            ++wrong; // the selected byte must be one we placed
          float d[32][4];
          run_fp4(changed, s, d);
          for (int l = 0; l < 32; ++l)
            for (int r = 0; r < 4; ++r) {
              const mk p = map_cd(l, r);
              const bool affected = read && (side == 0 ? p.row : p.col) == owner;
              wrong += affected == (float_bits(d[l][r]) == float_bits(base[l][r]));
            }
        }
    CHECK(wrong == 0);
  }
}

TEST_CASE("mma_m16n8k64_mxf4nvf4 scale specials and selector errors", "[unit][emulation]") {
  splitmix64 rng{0x73706563ull};
  const float nan = float_from_bits(0x7FFFFFFF), inf = std::numeric_limits<float>::infinity();
  // One product per output: A[m][0] = B[n][0] = 1 (code 2), the rest 0.
  fp4_tiles t{};
  for (int m = 0; m < 16; ++m)
    t.a[m][0] = 2;
  for (int n = 0; n < 8; ++n)
    t.b[n][0] = 2;
  const fp4_selector e8{2, ptx::scale_kind::ue8m0, 2, 1, 0, 3};
  for (auto& row : t.sa)
    for (auto& x : row)
      x = 127;
  for (auto& row : t.sb)
    for (auto& x : row)
      x = 127;
  t.sa[0][0] = 0; // 2^-127, times column 0's 2^-20: 2^-147, a float subnormal
  t.sb[0][0] = 107;
  t.sa[1][0] = 254; // 2^127 · 2^127 in column 1 → +Inf
  t.sb[1][0] = 254;
  t.sa[2][0] = 0xFF; // NaN: all of row 2
  t.sa[3][1] = 0xFF; // NaN in the second block of row 3, whose elements are zero: still NaN
  tile16x8 want;
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n)
      want[m][n] = 1.0f;
  for (int n = 0; n < 8; ++n) {
    want[0][n] = 0x1p-127f;
    want[1][n] = 0x1p127f;
    want[2][n] = nan;
    want[3][n] = nan;
  }
  for (int m = 0; m < 16; ++m) {
    want[m][0] = 0x1p-20f;
    want[m][1] = 0x1p127f;
  }
  want[0][0] = std::ldexp(1.0f, -147);
  want[1][0] = 0x1p-20f * 0x1p127f;
  want[0][1] = 1.0f; // 2^-127 · 2^127
  want[1][1] = inf;
  want[2][0] = want[2][1] = want[3][0] = want[3][1] = nan;
  fp4_registers reg = scatter_fp4(t, e8, rng);
  float d[32][4];
  run_fp4(reg, e8, d);
  CHECK(count_differences(d, want) == 0);

  // UE4M3: the sign bit is ignored, 0x7F and 0xFF are NaN, subnormal 0x01 = 2^-9.
  const fp4_selector e4{4, ptx::scale_kind::ue4m3, 0, 0, 0, 2};
  for (auto& row : t.sa)
    for (auto& x : row)
      x = 0x38; // 1.0
  for (auto& row : t.sb)
    for (auto& x : row)
      x = 0x38;
  t.sa[0][0] = 0xB8; // −1.0's pattern: 1.0
  t.sa[1][0] = 0x01; // 2^-9
  t.sa[2][0] = 0x7F; // NaN
  t.sa[3][0] = 0xFF; // NaN
  t.sb[4][0] = 0xFE; // 0x7E = 448
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n)
      want[m][n] = n == 4 ? 448.0f : 1.0f;
  for (int n = 0; n < 8; ++n) {
    want[1][n] = n == 4 ? 448.0f / 512 : 1.0f / 512;
    want[2][n] = want[3][n] = nan;
  }
  reg = scatter_fp4(t, e4, rng);
  run_fp4(reg, e4, d);
  CHECK(count_differences(d, want) == 0);
  CHECK(ptx::scale_value(ptx::scale_kind::ue4m3, 0x08) == 0x1p-6);
  CHECK(ptx::scale_value(ptx::scale_kind::ue4m3, 0x07) == 7 * 0x1p-9);
  CHECK(ptx::scale_value(ptx::scale_kind::ue8m0, 0) == 0x1p-127);
  CHECK(std::isnan(ptx::scale_value(ptx::scale_kind::ue8m0, 0xFF)));
  for (unsigned code = 0; code < 16; ++code)
    CHECK(float_bits(static_cast<float>(ptx::e2m1_value(code))) ==
          float_bits(static_cast<float>(e2m1_table[code])));

  const auto call = [&](int vec, ptx::scale_kind kind, int ba, int ta, int bb, int tb) {
    run_fp4(reg, fp4_selector{vec, kind, ba, ta, bb, tb}, d);
  };
  using ptx::scale_kind;
  CHECK_THROWS_AS(call(4, scale_kind::ue8m0, 0, 0, 0, 0), std::invalid_argument);
  CHECK_THROWS_AS(call(2, scale_kind::ue4m3, 0, 0, 0, 0), std::invalid_argument);
  CHECK_THROWS_AS(call(1, scale_kind::ue8m0, 0, 0, 0, 0), std::invalid_argument);
  CHECK_THROWS_AS(call(4, scale_kind::ue4m3, 1, 0, 0, 0), std::invalid_argument);
  CHECK_THROWS_AS(call(4, scale_kind::ue4m3, 0, 0, 2, 0), std::invalid_argument);
  CHECK_THROWS_AS(call(2, scale_kind::ue8m0, 1, 0, 0, 0), std::invalid_argument);
  CHECK_THROWS_AS(call(2, scale_kind::ue8m0, 0, 0, 3, 0), std::invalid_argument);
  CHECK_THROWS_AS(call(2, scale_kind::ue8m0, 0, 2, 0, 0), std::invalid_argument);
  CHECK_THROWS_AS(call(4, scale_kind::ue4m3, 0, -1, 0, 0), std::invalid_argument);
  CHECK_THROWS_AS(call(4, scale_kind::ue4m3, 0, 0, 0, 4), std::invalid_argument);
  CHECK_NOTHROW(call(2, scale_kind::ue8m0, 2, 1, 2, 3));
}

TEST_CASE("ldmatrix distributes 8x8 b16 matrices, with and without .trans", "[unit][emulation]") {
  // 128 rows of 16 bytes; the b16 at byte 2s holds s (distinct). The warp's 32 row addresses are
  // a shuffle of 32 of the 128 rows.
  std::vector<unsigned char> shared(2048);
  for (std::size_t s = 0; s < 1024; ++s) {
    shared[2 * s] = static_cast<unsigned char>(s & 0xFF);
    shared[2 * s + 1] = static_cast<unsigned char>(s >> 8);
  }
  splitmix64 rng{0x6C646D78ull};
  int rows[128];
  for (int i = 0; i < 128; ++i)
    rows[i] = i;
  for (int i = 127; i > 0; --i)
    std::swap(rows[i], rows[rng.next() % static_cast<std::uint64_t>(i + 1)]);
  std::uint32_t address[32];
  for (int lane = 0; lane < 32; ++lane)
    address[lane] = static_cast<std::uint32_t>(16 * rows[lane]);
  // Element (row, col) of matrix i: the b16 at address[8i + row] + 2·col, i.e. its slot number.
  const auto element = [&](int i, int row, int col) {
    return static_cast<std::uint32_t>(8 * rows[8 * i + row] + col);
  };
  std::uint32_t d4[32][4], t4[32][4], d2[32][2], t2[32][2];
  ptx::ldmatrix_x4(d4, shared.data(), address);
  ptx::ldmatrix_x4_trans(t4, shared.data(), address);
  std::uint32_t address2[32];
  std::memcpy(address2, address, sizeof address);
  for (int lane = 16; lane < 32; ++lane)
    address2[lane] = 3; // ignored by .x2
  ptx::ldmatrix_x2(d2, shared.data(), address2);
  ptx::ldmatrix_x2_trans(t2, shared.data(), address2);
  int wrong = 0;
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) {
      const int g = lane / 4, t = lane % 4;
      const std::uint32_t plain = element(i, g, 2 * t) | element(i, g, 2 * t + 1) << 16;
      const std::uint32_t trans = element(i, 2 * t, g) | element(i, 2 * t + 1, g) << 16;
      wrong += d4[lane][i] != plain;
      wrong += t4[lane][i] != trans;
      if (i < 2) {
        wrong += d2[lane][i] != plain;
        wrong += t2[lane][i] != trans;
      }
    }
  CHECK(wrong == 0);

  // .trans of a matrix is the plain load of its transpose, stored as rows elsewhere.
  std::vector<unsigned char> transposed(4 * 128);
  std::uint32_t address_t[32];
  for (int i = 0; i < 4; ++i)
    for (int r = 0; r < 8; ++r) {
      address_t[8 * i + r] = static_cast<std::uint32_t>(16 * (8 * i + r));
      for (int c = 0; c < 8; ++c) {
        const std::uint32_t v = element(i, c, r);
        transposed[16 * (8 * i + r) + 2 * c] = static_cast<unsigned char>(v & 0xFF);
        transposed[16 * (8 * i + r) + 2 * c + 1] = static_cast<unsigned char>(v >> 8);
      }
    }
  std::uint32_t via_plain[32][4];
  ptx::ldmatrix_x4(via_plain, transposed.data(), address_t);
  CHECK(std::memcmp(via_plain, t4, sizeof t4) == 0);

  std::uint32_t bad[32];
  std::memcpy(bad, address, sizeof address);
  bad[29] += 8;
  CHECK_THROWS_AS(ptx::ldmatrix_x4(d4, shared.data(), bad), std::invalid_argument);
  CHECK_THROWS_AS(ptx::ldmatrix_x4_trans(t4, shared.data(), bad), std::invalid_argument);
  CHECK_NOTHROW(ptx::ldmatrix_x2(d2, shared.data(), bad)); // lane 29 is not read by .x2
  bad[3] += 2;
  CHECK_THROWS_AS(ptx::ldmatrix_x2(d2, shared.data(), bad), std::invalid_argument);
}

TEST_CASE("shfl_sync idx and xor within segments", "[unit][emulation]") {
  std::uint32_t v[32];
  for (int lane = 0; lane < 32; ++lane)
    v[lane] = 1000u + static_cast<std::uint32_t>(lane);
  int wrong = 0;
  for (int lane = 0; lane < 32; ++lane) {
    const auto at = [&](int source) { return 1000u + static_cast<std::uint32_t>(source); };
    wrong += ptx::shfl_sync_idx(v, lane, 5, 32) != at(5);
    wrong += ptx::shfl_sync_idx(v, lane, 3, 16) != at(lane < 16 ? 3 : 19);
    wrong += ptx::shfl_sync_idx(v, lane, 18, 16) != at(lane < 16 ? 2 : 18); // src modulo width
    wrong += ptx::shfl_sync_idx(v, lane, -1, 8) != at(lane / 8 * 8 + 7);
    wrong += ptx::shfl_sync_idx(v, lane, 0, 1) != at(lane);
    wrong += ptx::shfl_sync_xor(v, lane, 1, 32) != at(lane ^ 1);
    wrong += ptx::shfl_sync_xor(v, lane, 16, 32) != at(lane ^ 16);
    wrong += ptx::shfl_sync_xor(v, lane, 4, 8) != at(lane ^ 4);
    wrong += ptx::shfl_sync_xor(v, lane, 2, 16) != at(lane ^ 2);
    // A source past the lane's segment returns its own value; an earlier segment can be read.
    wrong += ptx::shfl_sync_xor(v, lane, 8, 8) != at((lane & 8) != 0 ? lane ^ 8 : lane);
    wrong += ptx::shfl_sync_xor(v, lane, 16, 16) != at(lane >= 16 ? lane - 16 : lane);
  }
  CHECK(wrong == 0);
  CHECK_THROWS_AS(ptx::shfl_sync_idx(v, 0, 0, 0), std::invalid_argument);
  CHECK_THROWS_AS(ptx::shfl_sync_idx(v, 0, 0, 12), std::invalid_argument);
  CHECK_THROWS_AS(ptx::shfl_sync_xor(v, 0, 1, 64), std::invalid_argument);
  CHECK_THROWS_AS(ptx::shfl_sync_xor(v, 32, 1, 32), std::invalid_argument);
}

TEST_CASE("mma_m16n8k16_bf16's hardware models truncate as the tensor cores do",
          "[unit][emulation]") {
  // Hand-derived from the model (emulation/ptx.hpp); python/tests/test_peers_mma.py checks the
  // models against MMA-Sim on random inputs. B holds one non-negative value per k, shared by all
  // columns; each row of A uses its own k.
  //   row 0: 2^30 − 2^30 − 555 (k 0, 1, 2). Aligned to 2^30, −555 keeps multiples of 2^(30−25) = 32
  //          on sm_90 and later (−544) and of 64 on sm_80 (−512); exactly −555.
  //   row 1: C = 2^24, + 1 + 2^-100 (k 3, 4): 2^-100 truncates away and 2^24 + 1 truncates to
  //          float's 2^24; rounded once it is 2^24 + 2.
  //   row 2: C = 2^24, + 1 (k 5) + 1 (k 8): one pass gives 2^24 + 2 exactly; sm_80 adds k < 8
  //          first (2^24 + 1 → 2^24) and k ≥ 8 then (again 2^24).
  //   row 3: 3·2^-133 (a bf16 subnormal, aligned as 2^-126) · 2^120 + 3·2^-17 · 2^-16 (k 6, 7): the
  //          subnormal's product is aligned by 2^-6, which drops 3·2^-33; exactly both are kept.
  //   row 4: every addend −0 (A −0, B ≥ +0, C −0): +0 in the hardware, −0 rounded once.
  //   row 5: +Inf · 2^100 (k 10) → +Inf; row 6: NaN · 2^-100 (k 11) → NaN (neither is aligned:
  //          their exponents would overflow an int); row 7: 2^100 · 2^100 (k 12) → +Inf.
  bf16_tiles t{};
  const std::uint16_t b_of_k[16] = {0x4700, 0x4700, 0x4170, 0x3F80, 0x2680, 0x3F80, 0x7B80, 0x3780,
                                    0x3F80, 0x0000, 0x7180, 0x0D80, 0x7180, 0,      0,      0};
  for (int n = 0; n < 8; ++n)
    for (int k = 0; k < 16; ++k)
      t.b[n][k] = b_of_k[k];
  t.a[0][0] = 0x4700; // 2^15
  t.a[0][1] = 0xC700; // −2^15
  t.a[0][2] = 0xC214; // −37 (· 15 = −555)
  t.a[1][3] = 0x3F80;
  t.a[1][4] = 0x2680; // 2^-50
  t.a[2][5] = 0x3F80;
  t.a[2][8] = 0x3F80;
  t.a[3][6] = 0x0003; // 3·2^-133
  t.a[3][7] = 0x37C0; // 3·2^-17
  for (int k = 0; k < 16; ++k)
    t.a[4][k] = 0x8000;
  t.a[5][10] = 0x7F80;
  t.a[6][11] = 0x7FC1;
  t.a[7][12] = 0x7180; // 2^100
  for (int n = 0; n < 8; ++n) {
    t.c[1][n] = t.c[2][n] = 0x1p24f;
    t.c[4][n] = -0.0f;
  }
  const float inf = std::numeric_limits<float>::infinity(), nan = float_from_bits(0x7FFFFFFF);
  struct rows {
    ptx::mma_model model;
    float value[8];
  };
  const rows expected[] = {
      {ptx::mma_model::exact,
       {-555, 0x1p24f + 2, 0x1p24f + 2, 0x3p-13f + 0x3p-33f, -0.0f, inf, nan, inf}},
      {ptx::mma_model::sm80, {-512, 0x1p24f, 0x1p24f, 0x3p-13f, 0.0f, inf, nan, inf}},
      {ptx::mma_model::sm90, {-544, 0x1p24f, 0x1p24f + 2, 0x3p-13f, 0.0f, inf, nan, inf}},
      {ptx::mma_model::sm100, {-544, 0x1p24f, 0x1p24f + 2, 0x3p-13f, 0.0f, inf, nan, inf}},
      {ptx::mma_model::sm120, {-544, 0x1p24f, 0x1p24f + 2, 0x3p-13f, 0.0f, inf, nan, inf}},
  };
  for (const rows& e : expected) {
    INFO("model " << static_cast<int>(e.model));
    tile16x8 want{}; // rows 8..15: +0
    for (int m = 0; m < 8; ++m)
      for (int n = 0; n < 8; ++n)
        want[m][n] = e.value[m];
    float d[32][4];
    run_bf16(t, d, e.model);
    CHECK(count_differences(d, want) == 0);
  }
  CHECK(ptx::mma_model_of_arch(80) == ptx::mma_model::sm80);
  CHECK(ptx::mma_model_of_arch(89) == ptx::mma_model::sm80);
  CHECK(ptx::mma_model_of_arch(90) == ptx::mma_model::sm90);
  CHECK(ptx::mma_model_of_arch(100) == ptx::mma_model::sm100);
  CHECK(ptx::mma_model_of_arch(120) == ptx::mma_model::sm120);
  CHECK_THROWS_AS(ptx::mma_model_of_arch(75), std::invalid_argument);
  CHECK(ptx::default_mma_model == ptx::mma_model_of_arch(BLOCKSCALE_EMULATION_ARCH));
}

TEST_CASE("mma_m16n8k64_mxf4nvf4's hardware model sums groups exactly and truncates at 35 bits",
          "[unit][emulation]") {
  // UE8M0, scale_vec 2: block 0 is k 0..31 (groups 0, 1), block 1 is k 32..63 (groups 2, 3).
  //   row 0: group 0 holds 6·6 − 6·6 under scales 2^20 · 2^20: its sum is 0, but its products are
  //          not, so the group keeps its exponent 40 and 1 · 1 in group 2 truncates away (multiples
  //          of 2^(40 − 35) only): +0 in the hardware, 1 exactly.
  //   row 1: the same 1 · 1 with group 0's products all zero: that group takes the zero exponent,
  //          and the result is 1 in both.
  //   row 2: C = 2^24, + 1 · 1 + 0.5 · 1 in group 2: 2^24 + 1.5 truncates to 2^24; rounded once it
  //          is 2^24 + 2.
  fp4_tiles t{};
  for (int n = 0; n < 8; ++n) {
    t.b[n][0] = t.b[n][1] = 7;   // 6
    t.b[n][32] = t.b[n][33] = 2; // 1
    t.sb[n][0] = 147;            // 2^20
    t.sb[n][1] = 127;            // 1
  }
  for (int m = 0; m < 16; ++m) {
    t.sa[m][0] = m == 0 ? 147 : 127;
    t.sa[m][1] = 127;
  }
  t.a[0][0] = 7;  // 6
  t.a[0][1] = 15; // −6
  t.a[0][32] = 2; // 1
  t.a[1][32] = 2;
  t.a[2][32] = 2;
  t.a[2][33] = 1; // 0.5
  for (int n = 0; n < 8; ++n)
    t.c[2][n] = 0x1p24f;
  splitmix64 rng{0x7472756Eull};
  const fp4_selector e8{2, ptx::scale_kind::ue8m0, 0, 0, 0, 0};
  const fp4_registers reg = scatter_fp4(t, e8, rng);
  for (const ptx::mma_model model : all_models) {
    INFO("model " << static_cast<int>(model));
    const bool exact = model == ptx::mma_model::exact;
    tile16x8 want{};
    for (int n = 0; n < 8; ++n) {
      want[0][n] = exact ? 1.0f : 0.0f;
      want[1][n] = 1.0f;
      want[2][n] = exact ? 0x1p24f + 2 : 0x1p24f;
    }
    float d[32][4];
    run_fp4(reg, e8, d, model);
    CHECK(count_differences(d, want) == 0);
  }
}
