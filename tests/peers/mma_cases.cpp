// blockscale_mma_cases: writes test cases of the emulated tensor-core MMAs (emulation/ptx.hpp) for
// a peer to recompute: random operand tiles of one input mix, run through the emulated instruction
// (fragments in, fragments out) under one arithmetic model, and stored with the outputs as plain
// matrices. python/tests/test_peers_mma.py recomputes every output with MMA-Sim and compares bits.
//
//   blockscale_mma_cases <instruction> <model> <mix> <cases> <seed> <output file>
//     instruction: bf16 (mma.sync m16n8k16 .f32.bf16.bf16.f32),
//                  nvfp4 (m16n8k64 kind::mxf4nvf4 block_scale scale_vec::4X .ue4m3),
//                  mxfp4 (the same with scale_vec::2X .ue8m0)
//     model:       exact, sm80, sm90, sm100, sm120
//     mix:         random, random_acc, wide, cancel, subnormal, specials, zeros, integers
//
// Records, little-endian, one per case: A (16 × K) and B (8 × K, n-major) element codes (bf16:
// uint16, E2M1: one uint8 each), for the E2M1 instructions the scale codes of A (16 × S) and B
// (8 × S) with S = 4 (nvfp4) or 2 (mxfp4) as uint8, then C and D (16 × 8 float bits, uint32).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "blockscale/detail/bits.hpp"
#include "blockscale/emulation/ptx.hpp"
#include "splitmix64.hpp"

namespace ptx = blockscale::emulation::ptx;
using blockscale::detail::bit_cast;

namespace {

enum class instruction { bf16, nvfp4, mxfp4 };

struct case_writer {
  std::FILE* file;
  template <class T>
  void write(const T* data, std::size_t count) {
    if (std::fwrite(data, sizeof(T), count, file) != count)
      throw std::runtime_error("writing the output file failed");
  }
};

/// The bf16 code nearest to x (bf16_round is the emulation's own, exact for a double x).
std::uint16_t bf16(double x) {
  return ptx::bf16_round(x);
}

/// A random float from the mix, for accumulators.
float random_float(splitmix64& rng, double scale) {
  return static_cast<float>(scale * (rng.uniform() - 0.5) * 2.0);
}

std::uint16_t bf16_element(const std::string& mix, splitmix64& rng) {
  const double u = rng.uniform(-1.0, 1.0);
  if (mix == "random" || mix == "random_acc" || mix == "cancel")
    return bf16(u * 4.0);
  if (mix == "wide") // magnitudes from 2^-60 to 2^60
    return bf16(std::ldexp(u, static_cast<int>(rng.next() % 121) - 60));
  if (mix == "subnormal") { // bf16 subnormals, and tiny normals whose products are float subnormals
    const unsigned kind = rng.next() % 4;
    if (kind == 0)
      return static_cast<std::uint16_t>((rng.next() % 2) << 15 | (1 + rng.next() % 127));
    if (kind == 1)
      return bf16(std::ldexp(u, static_cast<int>(rng.next() % 8))); // partners of subnormals
    return bf16(std::ldexp(u, -60 - static_cast<int>(rng.next() % 16)));
  }
  if (mix == "specials") {
    const unsigned kind = rng.next() % 40;
    if (kind == 0)
      return 0x7F80; // +Inf
    if (kind == 1)
      return 0xFF80; // -Inf
    if (kind == 2)
      return static_cast<std::uint16_t>(0x7FC0 | (rng.next() % 2) << 15); // NaN
    if (kind < 6)
      return static_cast<std::uint16_t>((rng.next() % 2) << 15); // ±0
    return bf16(u * 8.0);
  }
  if (mix == "zeros")
    return static_cast<std::uint16_t>((rng.next() % 2) << 15);
  if (mix == "integers")
    return bf16(static_cast<double>(static_cast<int>(rng.next() % 17) - 8));
  throw std::invalid_argument("unknown mix '" + mix + "'");
}

float accumulator(const std::string& mix, splitmix64& rng) {
  if (mix == "random" || (mix == "wide" && rng.next() % 4 == 0))
    return 0.0f;
  if (mix == "random_acc")
    return random_float(rng, 64.0);
  if (mix == "wide")
    return static_cast<float>(
        std::ldexp(rng.uniform(-1.0, 1.0), static_cast<int>(rng.next() % 161) - 80));
  if (mix == "cancel")
    return random_float(rng, 0x1p-12);
  if (mix == "subnormal") {
    const unsigned kind = rng.next() % 3;
    return kind == 0   ? 0.0f
           : kind == 1 ? bit_cast<float>(static_cast<std::uint32_t>((rng.next() % 2) << 31 |
                                                                    (1 + rng.next() % 0x7FFFFF)))
                       : static_cast<float>(std::ldexp(rng.uniform(-1.0, 1.0), -120));
  }
  if (mix == "specials") {
    const unsigned kind = rng.next() % 16;
    return kind == 0   ? INFINITY
           : kind == 1 ? -INFINITY
           : kind == 2 ? NAN
           : kind == 3 ? -0.0f
                       : random_float(rng, 16.0);
  }
  if (mix == "zeros")
    return rng.next() % 2 ? -0.0f : 0.0f;
  if (mix == "integers")
    return static_cast<float>(static_cast<int>(rng.next() % 201) - 100);
  throw std::invalid_argument("unknown mix '" + mix + "'");
}

// Heavy cancellation: the products of k = 2i and 2i + 1 cancel exactly (A's odd column is minus
// its even one, B's equal), except at a few k where a small value replaces one operand.
template <class Element, class Negate, class Small>
void make_cancelling(Element (&a)[16][64], Element (&b)[8][64], int k, splitmix64& rng,
                     Negate negate, Small small) {
  for (int kk = 0; kk + 1 < k; kk += 2) {
    for (int m = 0; m < 16; ++m)
      a[m][kk + 1] = negate(a[m][kk]);
    for (int n = 0; n < 8; ++n)
      b[n][kk + 1] = b[n][kk];
  }
  for (int i = 0; i < 3; ++i) {
    const int kk = static_cast<int>(rng.next() % static_cast<unsigned>(k));
    for (int m = 0; m < 16; ++m)
      if (rng.next() % 2)
        a[m][kk] = small(rng);
  }
}

// Packs A's and B's codes into the lanes' registers by the fragment maps: `per_register` codes of
// `bits` bits each; C's values into the accumulator fragments.
template <class Element, class ACoord, class BCoord>
void pack(const Element (&a)[16][64], const Element (&b)[8][64], const float (&c)[16][8],
          int per_register, ACoord a_coord, BCoord b_coord, std::uint32_t (&ar)[32][4],
          std::uint32_t (&br)[32][2], float (&cr)[32][4]) {
  const int bits = 32 / per_register;
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < per_register; ++i) {
      for (int r = 0; r < 4; ++r) {
        const ptx::coord mk = a_coord(lane, r, i);
        ar[lane][r] |= std::uint32_t{a[mk.row][mk.col]} << (bits * i);
      }
      for (int r = 0; r < 2; ++r) {
        const ptx::coord nk = b_coord(lane, r, i);
        br[lane][r] |= std::uint32_t{b[nk.row][nk.col]} << (bits * i);
      }
    }
    for (int r = 0; r < 4; ++r)
      cr[lane][r] = c[ptx::accumulator_coord(lane, r).row][ptx::accumulator_coord(lane, r).col];
  }
}

// Writes C and the D fragments, gathered into a 16 × 8 matrix, as float bits.
void write_c_d(case_writer& out, const float (&c)[16][8], const float (&dr)[32][4]) {
  std::uint32_t d[16][8];
  for (int lane = 0; lane < 32; ++lane)
    for (int r = 0; r < 4; ++r)
      d[ptx::accumulator_coord(lane, r).row][ptx::accumulator_coord(lane, r).col] =
          bit_cast<std::uint32_t>(dr[lane][r]);
  out.write(&c[0][0], 16 * 8);
  out.write(&d[0][0], 16 * 8);
}

// Makes every addend of every output −0: A's codes +0, B's −0 and C −0.
template <class Element>
void all_negative_zero(Element (&a)[16][64], Element (&b)[8][64], float (&c)[16][8],
                       Element plus_zero, Element minus_zero) {
  for (auto& row : a)
    for (auto& x : row)
      x = plus_zero;
  for (auto& row : b)
    for (auto& x : row)
      x = minus_zero;
  for (auto& row : c)
    for (float& x : row)
      x = -0.0f;
}

// C from the mix; for half the cases of the `zeros` mix, every addend −0 instead.
template <class Element>
void fill_accumulators(const std::string& mix, splitmix64& rng, Element (&a)[16][64],
                       Element (&b)[8][64], float (&c)[16][8], Element plus_zero,
                       Element minus_zero) {
  for (auto& row : c)
    for (float& x : row)
      x = accumulator(mix, rng);
  if (mix == "zeros" && rng.next() % 2) // +0 · −0 products, C −0
    all_negative_zero(a, b, c, plus_zero, minus_zero);
}

void bf16_cases(const std::string& mix, ptx::mma_model model, int cases, splitmix64& rng,
                case_writer& out) {
  for (int t = 0; t < cases; ++t) {
    std::uint16_t a[16][64], b[8][64]; // k < 16 used
    for (auto& row : a)
      for (int k = 0; k < 16; ++k)
        row[k] = bf16_element(mix, rng);
    for (auto& row : b)
      for (int k = 0; k < 16; ++k)
        row[k] = bf16_element(mix, rng);
    if (mix == "cancel")
      make_cancelling(
          a, b, 16, rng, [](std::uint16_t x) { return std::uint16_t(x ^ 0x8000u); },
          [](splitmix64& r) { return bf16(std::ldexp(r.uniform(-1.0, 1.0), -14)); });
    float c[16][8];
    fill_accumulators(mix, rng, a, b, c, std::uint16_t{0}, std::uint16_t{0x8000});
    std::uint32_t ar[32][4] = {}, br[32][2] = {};
    float cr[32][4], dr[32][4];
    pack(a, b, c, 2, ptx::bf16_a_coord, ptx::bf16_b_coord, ar, br, cr);
    ptx::mma_m16n8k16_bf16(dr, ar, br, cr, model);
    for (auto& row : a)
      out.write(row, 16);
    for (auto& row : b)
      out.write(row, 16);
    write_c_d(out, c, dr);
  }
}

unsigned scale_code(instruction which, const std::string& mix, splitmix64& rng) {
  const bool ue4m3 = which == instruction::nvfp4;
  if (mix == "random" || mix == "random_acc" || mix == "cancel" || mix == "zeros")
    return ue4m3 ? 0x28 + rng.next() % 0x30 : 110 + rng.next() % 30; // 2^-2 … 2^8, 2^-17 … 2^12
  if (mix == "wide") // every finite code, UE4M3 subnormals and zero included
    return ue4m3 ? rng.next() % 0x7F : rng.next() % 0xFF;
  if (mix == "subnormal") // the smallest scales: products at and below the zero exponent
    return ue4m3 ? rng.next() % 0x10 : rng.next() % 24;
  if (mix == "specials") {
    const unsigned kind = rng.next() % 24;
    if (kind == 0)
      return ue4m3 ? 0x7F : 0xFF; // NaN
    if (kind == 1 && ue4m3)
      return 0xFF; // NaN with the ignored sign bit set
    if (kind == 2 && ue4m3)
      return 0x00; // zero scale
    if (kind == 3 && ue4m3)
      return 0x80 | (0x30 + rng.next() % 0x10); // sign bit set: ignored
    return ue4m3 ? 0x30 + rng.next() % 0x20 : 120 + rng.next() % 16;
  }
  if (mix == "integers")
    return ue4m3 ? 0x38 : 127; // 1.0
  throw std::invalid_argument("unknown mix '" + mix + "'");
}

void e2m1_cases(instruction which, const std::string& mix, ptx::mma_model model, int cases,
                splitmix64& rng, case_writer& out) {
  const bool four = which == instruction::nvfp4;
  const int scales = four ? 4 : 2;
  const ptx::scale_kind kind = four ? ptx::scale_kind::ue4m3 : ptx::scale_kind::ue8m0;
  for (int t = 0; t < cases; ++t) {
    std::uint8_t a[16][64], b[8][64], sa[16][4] = {}, sb[8][4] = {};
    const auto element = [&]() -> std::uint8_t {
      if (mix == "zeros")
        return static_cast<std::uint8_t>(8 * (rng.next() % 2)); // ±0
      if (mix == "integers")                                    // ±{0, 1, 2, 3, 4, 6}
        return static_cast<std::uint8_t>(8 * (rng.next() % 2) | (2 + rng.next() % 6));
      return static_cast<std::uint8_t>(rng.next() % 16);
    };
    for (auto& row : a)
      for (auto& x : row)
        x = element();
    for (auto& row : b)
      for (auto& x : row)
        x = element();
    if (mix == "cancel")
      make_cancelling(
          a, b, 64, rng, [](std::uint8_t x) { return std::uint8_t(x ^ 8u); },
          [](splitmix64& r) { return static_cast<std::uint8_t>(1 + 8 * (r.next() % 2)); });
    for (auto& row : sa)
      for (int s = 0; s < scales; ++s)
        row[s] = static_cast<std::uint8_t>(scale_code(which, mix, rng));
    for (auto& row : sb)
      for (int s = 0; s < scales; ++s)
        row[s] = static_cast<std::uint8_t>(scale_code(which, mix, rng));
    float c[16][8];
    fill_accumulators(mix, rng, a, b, c, std::uint8_t{0}, std::uint8_t{8});
    std::uint32_t ar[32][4] = {}, br[32][2] = {}, sfa[32], sfb[32];
    float cr[32][4], dr[32][4];
    pack(a, b, c, 8, ptx::fp4_a_coord, ptx::fp4_b_coord, ar, br, cr);
    for (int lane = 0; lane < 32; ++lane)
      sfa[lane] = sfb[lane] = rng.next_u32(); // lanes that hold no scales: noise
    for (int m = 0; m < 16; ++m)
      std::memcpy(&sfa[ptx::scale_a_lane(m, 0)], sa[m], 4);
    for (int n = 0; n < 8; ++n)
      std::memcpy(&sfb[ptx::scale_b_lane(n, 0)], sb[n], 4);
    if (!four) // scale_vec::2X reads bytes 0 and 1; bytes 2 and 3 must not matter
      for (int lane = 0; lane < 32; ++lane) {
        sfa[lane] = (sfa[lane] & 0xFFFFu) | (rng.next_u32() & 0xFFFF0000u);
        sfb[lane] = (sfb[lane] & 0xFFFFu) | (rng.next_u32() & 0xFFFF0000u);
      }
    ptx::mma_m16n8k64_mxf4nvf4(four ? 4 : 2, kind, dr, ar, br, cr, sfa, 0, 0, sfb, 0, 0, model);
    out.write(&a[0][0], 16 * 64);
    out.write(&b[0][0], 8 * 64);
    for (auto& row : sa)
      out.write(row, static_cast<std::size_t>(scales));
    for (auto& row : sb)
      out.write(row, static_cast<std::size_t>(scales));
    write_c_d(out, c, dr);
  }
}

ptx::mma_model parse_model(const std::string& name) {
  if (name == "exact")
    return ptx::mma_model::exact;
  if (name == "sm80")
    return ptx::mma_model::sm80;
  if (name == "sm90")
    return ptx::mma_model::sm90;
  if (name == "sm100")
    return ptx::mma_model::sm100;
  if (name == "sm120")
    return ptx::mma_model::sm120;
  throw std::invalid_argument("model: '" + name + "' is not exact, sm80, sm90, sm100 or sm120");
}

int parse_count(const char* text, const char* what) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 0 || value > 10000000)
    throw std::invalid_argument(std::string(what) + ": '" + text + "' is not a count");
  return static_cast<int>(value);
}

} // namespace

int main(int argc, char** argv) {
  try {
    if (argc != 7)
      throw std::invalid_argument("usage: blockscale_mma_cases <bf16|nvfp4|mxfp4> "
                                  "<exact|sm80|sm90|sm100|sm120> <mix> <cases> <seed> <output>");
    const std::string name = argv[1], mix = argv[3];
    const ptx::mma_model model = parse_model(argv[2]);
    const int cases = parse_count(argv[4], "cases");
    splitmix64 rng{static_cast<std::uint64_t>(parse_count(argv[5], "seed")) * 0x9E37u + 1};
    std::FILE* file = std::fopen(argv[6], "wb");
    if (file == nullptr)
      throw std::runtime_error(std::string("cannot open '") + argv[6] + "' for writing");
    case_writer out{file};
    try {
      if (name == "bf16")
        bf16_cases(mix, model, cases, rng, out);
      else if (name == "nvfp4" || name == "mxfp4")
        e2m1_cases(name == "nvfp4" ? instruction::nvfp4 : instruction::mxfp4, mix, model, cases,
                   rng, out);
      else
        throw std::invalid_argument("instruction: '" + name + "' is not bf16, nvfp4 or mxfp4");
    } catch (...) {
      std::fclose(file);
      throw;
    }
    if (std::fclose(file) != 0)
      throw std::runtime_error("closing the output file failed");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "blockscale_mma_cases: %s\n", e.what());
    return 2;
  }
}
