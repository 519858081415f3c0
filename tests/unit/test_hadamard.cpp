// The 16-point randomized Hadamard transform: the butterfly against the matrix definition,
// orthogonality, the inverse, cancellation in a GEMM, the sign vectors, and the row helpers.
//
// Error bounds used below (u = 2^-24, gamma4 = 4u / (1 - 4u)):
// - forward/inverse: each output is a depth-4 balanced sum of 16 terms ±x_i (exact products), then
//   an exact multiply by 0.25, so |y_float - y_exact| <= gamma4 · Σ|x_i| / 4 (Higham, pairwise
//   summation). The double reference adds at most 16 · 2^-53 · Σ|x_i| / 4, covered by a 1% slack.
// - inverse(forward(x)): the forward error e (|e_j| <= gamma4 Σ|x| / 4) passes through Mᵀ, whose
//   entries are ±1/4: Σ_j |e_j| / 4 <= gamma4 Σ|x|; the inverse adds gamma4 Σ_j|ŷ_j| / 4 with
//   Σ_j|ŷ_j| <= 4 Σ|x| (1 + gamma4). Total per element: 2 gamma4 (1 + gamma4) Σ|x_i|.
// - GEMM (products accumulated in double, so only the transform rounds): with α_g = Σ_g|a|,
//   β_g = Σ_g|b| over one 16-group, â = aM + δa, |δa_j| <= gamma4 α_g / 4 and Σ_j|(bM)_j| <= 4 β_g,
//   so |Σ_j â_j b̂_j - Σ_j (aM)_j (bM)_j| <= (2 gamma4 + gamma4^2) α_g β_g; summed over the groups.
//   (A bound relative to Σ|a_i||b_i| alone does not hold: the transform mixes the 16 elements.)
#include <blockscale/block/hadamard.hpp>
#include <blockscale/host/hadamard_rows.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "catch.hpp"

using namespace blockscale;

namespace {

constexpr double unit_roundoff = 1.0 / 16777216.0; // 2^-24
constexpr double gamma4 = 4 * unit_roundoff / (1 - 4 * unit_roundoff);

int sylvester(int i, int j) {
  unsigned bits = static_cast<unsigned>(i & j);
  int parity = 0;
  for (; bits != 0; bits &= bits - 1)
    parity ^= 1;
  return parity ? -1 : 1;
}

// y_j = Σ_i x_i · s_i · H[i][j] / 4 in double, from the definition.
void reference_forward(const hadamard16& rht, const float* x, double* y) {
  for (int j = 0; j < 16; ++j) {
    double sum = 0;
    for (int i = 0; i < 16; ++i)
      sum += double(x[i]) * rht.sign(i) * sylvester(i, j);
    y[j] = sum / 4;
  }
}

double abs_sum(const float* x, int n = 16) {
  double sum = 0;
  for (int i = 0; i < n; ++i)
    sum += std::fabs(double(x[i]));
  return sum;
}

std::uint32_t bits_of(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

// An independent SplitMix64 (Vigna's reference), to pin from_seed's documented derivation.
std::uint64_t splitmix64(std::uint64_t state) {
  std::uint64_t z = state + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

const hadamard16 transforms[] = {hadamard16::te_default(), hadamard16::from_sign_mask(0),
                                 hadamard16::from_sign_mask(0xFFFF), hadamard16::from_seed(7)};

} // namespace

static_assert(hadamard16::size == 16, "");
static_assert(hadamard16::te_default().sign_mask() == 0xD7E8, "");
static_assert(hadamard16::from_sign_mask(0x1234).sign_mask() == 0x1234, "");
static_assert(hadamard16::te_default().sign(3) == -1.0f && hadamard16::te_default().sign(0) == 1.0f,
              "");
static_assert(hadamard16::from_seed(42).sign_mask() == hadamard16::from_seed(42).sign_mask(), "");

TEST_CASE("the butterfly equals the explicit product with D·H16/4", "[hadamard]") {
  std::mt19937 rng(1234);
  SECTION("random floats: within gamma4 · Σ|x| / 4") {
    for (const auto& rht : transforms) {
      INFO("sign mask " << rht.sign_mask());
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::uniform_int_distribution<int> exponent(-20, 20);
      for (int trial = 0; trial < 2000; ++trial) {
        float x[16];
        for (auto& value : x)
          value = std::ldexp(normal(rng), exponent(rng)); // mixed magnitudes
        double expected[16];
        reference_forward(rht, x, expected);
        float y[16];
        rht.forward(x, y);
        const double bound = 1.01 * gamma4 * abs_sum(x) / 4;
        for (int j = 0; j < 16; ++j) {
          INFO("trial " << trial << " j " << j);
          CHECK(std::fabs(double(y[j]) - expected[j]) <= bound);
        }
      }
    }
  }
  SECTION("small integers: every partial sum is exact, so the result is bit-exact") {
    for (const auto& rht : transforms) {
      INFO("sign mask " << rht.sign_mask());
      // |x| <= 2^15: partial sums stay below 2^19, outputs are multiples of 1/4 below 2^17.
      std::uniform_int_distribution<int> integer(-32768, 32768);
      for (int trial = 0; trial < 2000; ++trial) {
        float x[16];
        for (auto& value : x)
          value = static_cast<float>(integer(rng));
        double expected[16];
        reference_forward(rht, x, expected);
        float y[16];
        rht.forward(x, y);
        for (int j = 0; j < 16; ++j)
          CHECK(bits_of(y[j]) == bits_of(static_cast<float>(expected[j])));
      }
    }
  }
}

// The documented operation order, written out independently: the device code must match it.
void documented_order(const hadamard16& rht, const float* in, float* out, bool inverse) {
  float v[16];
  for (int i = 0; i < 16; ++i)
    v[i] = inverse ? in[i] : in[i] * rht.sign(i);
  for (int h : {1, 2, 4, 8})
    for (int j = 0; j < 16; ++j)
      if ((j & h) == 0) {
        const float a = v[j], b = v[j + h];
        v[j] = a + b;
        v[j + h] = a - b;
      }
  for (int i = 0; i < 16; ++i)
    out[i] = inverse ? (v[i] * 0.25f) * rht.sign(i) : v[i] * 0.25f;
}

TEST_CASE("forward and inverse follow the documented operation order bit for bit", "[hadamard]") {
  std::mt19937 rng(31);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-30, 30);
  for (const auto& rht : transforms) {
    INFO("sign mask " << rht.sign_mask());
    for (int trial = 0; trial < 5000; ++trial) {
      float x[16];
      for (auto& value : x)
        value = std::ldexp(normal(rng), exponent(rng));
      float y[16], expected[16];
      rht.forward(x, y);
      documented_order(rht, x, expected, false);
      for (int j = 0; j < 16; ++j)
        CHECK(bits_of(y[j]) == bits_of(expected[j]));
      rht.inverse(x, y);
      documented_order(rht, x, expected, true);
      for (int j = 0; j < 16; ++j)
        CHECK(bits_of(y[j]) == bits_of(expected[j]));
    }
  }
}

TEST_CASE("forward and inverse may alias", "[hadamard]") {
  const auto rht = hadamard16::te_default();
  float x[16], y[16], z[16];
  for (int i = 0; i < 16; ++i)
    x[i] = static_cast<float>(i * i - 7 * i);
  rht.forward(x, y);
  std::memcpy(z, x, sizeof z);
  rht.forward(z, z);
  for (int j = 0; j < 16; ++j)
    CHECK(bits_of(z[j]) == bits_of(y[j]));
  rht.inverse(z, z);
  for (int i = 0; i < 16; ++i)
    CHECK(z[i] == x[i]);
}

TEST_CASE("M = D·H/4 from unit vectors is orthogonal: M·Mᵀ = I exactly", "[hadamard]") {
  for (const auto& rht : transforms) {
    INFO("sign mask " << rht.sign_mask());
    float m[16][16];
    for (int i = 0; i < 16; ++i) {
      float unit[16] = {};
      unit[i] = 1.0f;
      rht.forward(unit, m[i]);
      for (int j = 0; j < 16; ++j)
        CHECK(m[i][j] == rht.sign(i) * sylvester(i, j) * 0.25f);
    }
    // Entries are ±1/4, products ±1/16, sums of 16 of them exact in float.
    for (int i = 0; i < 16; ++i)
      for (int k = 0; k < 16; ++k) {
        float dot = 0.0f;
        for (int j = 0; j < 16; ++j)
          dot += m[i][j] * m[k][j];
        CHECK(dot == (i == k ? 1.0f : 0.0f));
      }
    // inverse(e_j) = e_j · Mᵀ, row j of Mᵀ: column j of M.
    for (int j = 0; j < 16; ++j) {
      float unit[16] = {};
      unit[j] = 1.0f;
      float column[16];
      rht.inverse(unit, column);
      for (int i = 0; i < 16; ++i)
        CHECK(column[i] == m[i][j]);
    }
  }
}

TEST_CASE("inverse(forward(x)) recovers x", "[hadamard]") {
  std::mt19937 rng(99);
  SECTION("random floats: within 2 gamma4 (1 + gamma4) Σ|x|") {
    for (const auto& rht : transforms) {
      INFO("sign mask " << rht.sign_mask());
      std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
      std::uniform_int_distribution<int> exponent(-30, 30);
      for (int trial = 0; trial < 2000; ++trial) {
        float x[16];
        for (auto& value : x)
          value = std::ldexp(uniform(rng), exponent(rng));
        float y[16], back[16];
        rht.forward(x, y);
        rht.inverse(y, back);
        const double bound = 2 * gamma4 * (1 + gamma4) * abs_sum(x);
        for (int i = 0; i < 16; ++i) {
          INFO("trial " << trial << " i " << i);
          CHECK(std::fabs(double(back[i]) - double(x[i])) <= bound);
        }
      }
    }
  }
  SECTION("small integers: exact") {
    for (const auto& rht : transforms) {
      INFO("sign mask " << rht.sign_mask());
      // |x| <= 2^15: forward is exact (above); the inverse's partial sums are multiples of 1/4
      // below 64 · 2^15 = 2^21, so they are exact too.
      std::uniform_int_distribution<int> integer(-32768, 32768);
      for (int trial = 0; trial < 2000; ++trial) {
        float x[16];
        for (auto& value : x)
          value = static_cast<float>(integer(rng));
        float y[16], back[16];
        rht.forward(x, y);
        rht.inverse(y, back);
        // Equal values; a zero may come back as -0 (0 · 0.25 · -1), as in any sign flip.
        for (int i = 0; i < 16; ++i)
          CHECK(back[i] == x[i]);
      }
    }
  }
}

TEST_CASE("the transform cancels in a GEMM: (A·M)(B·M)ᵀ = A·Bᵀ", "[hadamard]") {
  constexpr std::size_t m = 24, n = 20, k = 64; // 4 groups of 16 along k
  std::mt19937 rng(7);
  SECTION("random floats: within (2 gamma4 + gamma4^2) Σ_groups Σ|a| Σ|b|") {
    for (const auto& rht : transforms) {
      INFO("sign mask " << rht.sign_mask());
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::vector<float> a(m * k), b(n * k);
      for (auto& value : a)
        value = normal(rng);
      for (auto& value : b)
        value = normal(rng) * 1000.0f;
      std::vector<float> at = a, bt = b;
      hadamard_forward_rows(rht, matrix_view<float>(at.data(), m, k, k));
      hadamard_forward_rows(rht, matrix_view<float>(bt.data(), n, k, k));
      double worst_ratio = 0;
      for (std::size_t r = 0; r < m; ++r)
        for (std::size_t c = 0; c < n; ++c) {
          double exact = 0, transformed = 0, bound = 0;
          for (std::size_t g = 0; g < k; g += 16) {
            bound += abs_sum(&a[r * k + g]) * abs_sum(&b[c * k + g]);
            for (std::size_t i = g; i < g + 16; ++i) {
              exact += double(a[r * k + i]) * double(b[c * k + i]);
              transformed += double(at[r * k + i]) * double(bt[c * k + i]);
            }
          }
          // 1% slack covers the double accumulation (k · 2^-53 relative to Σ|a||b|).
          bound *= 1.01 * (2 * gamma4 + gamma4 * gamma4);
          const double error = std::fabs(transformed - exact);
          if (error / bound > worst_ratio)
            worst_ratio = error / bound;
          INFO("r " << r << " c " << c);
          CHECK(error <= bound);
        }
      INFO("worst error / bound " << worst_ratio);
      CHECK(worst_ratio < 1.0);
    }
  }
  SECTION("small integers: exactly equal") {
    for (const auto& rht : transforms) {
      INFO("sign mask " << rht.sign_mask());
      std::uniform_int_distribution<int> integer(-1000, 1000);
      std::vector<float> a(m * k), b(n * k);
      for (auto& value : a)
        value = static_cast<float>(integer(rng));
      for (auto& value : b)
        value = static_cast<float>(integer(rng));
      std::vector<float> at = a, bt = b;
      hadamard_forward_rows(rht, matrix_view<float>(at.data(), m, k, k));
      hadamard_forward_rows(rht, matrix_view<float>(bt.data(), n, k, k));
      for (std::size_t r = 0; r < m; ++r)
        for (std::size_t c = 0; c < n; ++c) {
          // Every term is a multiple of 1/16 below 2^24 in magnitude: exact in double.
          double exact = 0, transformed = 0;
          for (std::size_t i = 0; i < k; ++i) {
            exact += double(a[r * k + i]) * double(b[c * k + i]);
            transformed += double(at[r * k + i]) * double(bt[c * k + i]);
          }
          CHECK(transformed == exact);
        }
    }
  }
}

TEST_CASE("sign vectors: TE's default, seeded, and explicit masks", "[hadamard]") {
  SECTION("te_default() has Transformer Engine's signs") {
    const float te_signs[16] = {1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1};
    const auto rht = hadamard16::te_default();
    for (int i = 0; i < 16; ++i)
      CHECK(rht.sign(i) == te_signs[i]);
    CHECK(rht.sign_mask() == 0xD7E8);
  }
  SECTION("from_sign_mask: bit i set means sign_i = -1") {
    for (unsigned mask : {0x0000u, 0xFFFFu, 0x0001u, 0x8000u, 0xA5C3u}) {
      const auto rht = hadamard16::from_sign_mask(static_cast<std::uint16_t>(mask));
      CHECK(rht.sign_mask() == mask);
      for (int i = 0; i < 16; ++i)
        CHECK(rht.sign(i) == (((mask >> i) & 1u) ? -1.0f : 1.0f));
    }
  }
  SECTION("from_seed is the low 16 bits of SplitMix64, deterministic") {
    for (std::uint64_t seed : {0ull, 1ull, 42ull, 0xFFFFFFFFFFFFFFFFull, 0x123456789ABCDEFull}) {
      CHECK(hadamard16::from_seed(seed).sign_mask() == (splitmix64(seed) & 0xFFFFu));
      CHECK(hadamard16::from_seed(seed).sign_mask() == hadamard16::from_seed(seed).sign_mask());
    }
  }
  SECTION("from_seed differs across seeds") {
    std::set<std::uint16_t> masks;
    int adjacent_equal = 0;
    for (std::uint64_t seed = 0; seed < 1000; ++seed) {
      masks.insert(hadamard16::from_seed(seed).sign_mask());
      adjacent_equal +=
          hadamard16::from_seed(seed).sign_mask() == hadamard16::from_seed(seed + 1).sign_mask();
    }
    // 1000 draws from 65536 masks collide about 7.6 times on average.
    CHECK(masks.size() >= 975);
    CHECK(adjacent_equal <= 1);
  }
  SECTION("from_seed's signs are balanced over many seeds") {
    constexpr int seeds = 20000;
    int negative[16] = {};
    for (std::uint64_t seed = 0; seed < seeds; ++seed) {
      const auto rht = hadamard16::from_seed(seed);
      for (int i = 0; i < 16; ++i)
        negative[i] += rht.sign(i) < 0;
    }
    // Each fraction has standard deviation 0.5 / sqrt(20000) ~ 0.0035; allow about 6 of them.
    for (int i = 0; i < 16; ++i) {
      INFO("sign " << i << " negative " << negative[i]);
      CHECK(std::fabs(negative[i] / double(seeds) - 0.5) < 0.02);
    }
  }
}

TEST_CASE(
    "hadamard_forward_rows and hadamard_inverse_rows transform each 16-group, not the padding",
    "[hadamard]") {
  constexpr std::size_t rows = 3, cols = 48, ld = 53;
  const auto rht = hadamard16::from_seed(2026);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> original(rows * ld);
  for (auto& value : original)
    value = normal(rng);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = cols; c < ld; ++c)
      original[r * ld + c] = -12345.0f - float(c);

  std::vector<float> data = original;
  hadamard_forward_rows(rht, matrix_view<float>(data.data(), rows, cols, ld));
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; c += 16) {
      float expected[16];
      rht.forward(&original[r * ld + c], expected);
      for (std::size_t j = 0; j < 16; ++j)
        CHECK(bits_of(data[r * ld + c + j]) == bits_of(expected[j]));
    }
    for (std::size_t c = cols; c < ld; ++c)
      CHECK(bits_of(data[r * ld + c]) == bits_of(original[r * ld + c]));
  }

  std::vector<float> transformed = data;
  hadamard_inverse_rows(rht, matrix_view<float>(data.data(), rows, cols, ld));
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; c += 16) {
      float expected[16];
      rht.inverse(&transformed[r * ld + c], expected);
      for (std::size_t j = 0; j < 16; ++j)
        CHECK(bits_of(data[r * ld + c + j]) == bits_of(expected[j]));
    }
    for (std::size_t c = cols; c < ld; ++c)
      CHECK(bits_of(data[r * ld + c]) == bits_of(original[r * ld + c]));
  }
}

TEST_CASE("hadamard_forward_rows and hadamard_inverse_rows reject bad shapes, naming the argument",
          "[hadamard]") {
  const auto rht = hadamard16::te_default();
  std::vector<float> data(64 * 4, 1.0f);
  const auto message_of = [&](bool inverse, float* pointer, std::size_t rows, std::size_t cols,
                              std::size_t ld) -> std::string {
    try {
      if (inverse)
        hadamard_inverse_rows(rht, matrix_view<float>(pointer, rows, cols, ld));
      else
        hadamard_forward_rows(rht, matrix_view<float>(pointer, rows, cols, ld));
    } catch (const std::invalid_argument& error) {
      return error.what();
    }
    return "";
  };
  for (bool inverse : {false, true}) {
    INFO((inverse ? "inverse_rows" : "forward_rows"));
    if (inverse) {
      CHECK_THROWS_AS(hadamard_inverse_rows(rht, matrix_view<float>(data.data(), 4, 24, 64)),
                      std::invalid_argument);
      CHECK_THROWS_AS(hadamard_inverse_rows(rht, matrix_view<float>(data.data(), 4, 32, 16)),
                      std::invalid_argument);
      CHECK_THROWS_AS(hadamard_inverse_rows(rht, matrix_view<float>(nullptr, 4, 32, 32)),
                      std::invalid_argument);
    } else {
      CHECK_THROWS_AS(hadamard_forward_rows(rht, matrix_view<float>(data.data(), 4, 24, 64)),
                      std::invalid_argument);
      CHECK_THROWS_AS(hadamard_forward_rows(rht, matrix_view<float>(data.data(), 4, 32, 16)),
                      std::invalid_argument);
      CHECK_THROWS_AS(hadamard_forward_rows(rht, matrix_view<float>(nullptr, 4, 32, 32)),
                      std::invalid_argument);
    }
    const std::string bad_cols = message_of(inverse, data.data(), 4, 24, 64);
    INFO(bad_cols);
    CHECK(bad_cols.find("cols") != std::string::npos);
    CHECK(bad_cols.find("24") != std::string::npos);
    const std::string bad_ld = message_of(inverse, data.data(), 4, 32, 16);
    INFO(bad_ld);
    CHECK(bad_ld.find("ld") != std::string::npos);
    CHECK(bad_ld.find("16") != std::string::npos);
    const std::string bad_data = message_of(inverse, nullptr, 4, 32, 32);
    CHECK(bad_data.find("data") != std::string::npos);
    // Empty matrices are fine, null or not.
    CHECK(message_of(inverse, nullptr, 0, 32, 32).empty());
    CHECK(message_of(inverse, nullptr, 4, 0, 0).empty());
    CHECK(message_of(inverse, data.data(), 4, 64, 64).empty());
  }
}
