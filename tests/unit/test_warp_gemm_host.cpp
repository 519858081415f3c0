// The warp-level FP4 GEMM (cuda/warp/{mma,dequant,tile}.hpp) on the host, through
// emulation::host_warp, whose `mma` is the PTX emulation (emulation/ptx.hpp):
//  1. the atoms' fragment maps are bijections onto their tiles and agree with the emulation's maps;
//     every scale-selector instantiation reads 16 distinct A lanes, 8 distinct B lanes and only its
//     selected bytes; warp_tile::coord_of is a bijection onto WarpM × WarpN;
//  2. the in-register E2M1 → BF16 dequantization is exact for every scale code of UE4M3, UE5M3 and
//     UE8M0, every E2M1 code and every nibble position, bit for bit (signs and zeros included),
//     NaN scales giving NaN; every scale code's multiplier words are those of the rule in
//     cuda/warp/dequant.hpp, derived here from the code's value alone; the same for two user
//     formats (IEEE-style UE5M3 with an Inf code, and a UE4M3 without subnormals);
//  3. warp_tile::step on operands staged as in shared memory reproduces gemm::reference bit for
//     bit where every partial sum is a float; on quantized random data it equals, bit for bit under
//     each tensor-core model (exact, sm_80, sm_90), the chain of that model's dot-adds over the
//     path's k-steps in order, and lies within the model's stated bound of the reference; NaN
//     block scales poison exactly their row (column);
//  4. the loaders' shared-memory accesses, with the CTA's strides (cuda/kernels/gemm.hpp), are
//     aligned and free of bank conflicts.
#include <blockscale/block/tensor_scale.hpp>
#include <blockscale/blockscale.hpp>
#include <blockscale/cuda/kernels/gemm.hpp>
#include <blockscale/cuda/warp/dequant.hpp>
#include <blockscale/cuda/warp/mma.hpp>
#include <blockscale/cuda/warp/tile.hpp>
#include <blockscale/emulation/host_warp.hpp>
#include <blockscale/emulation/ptx.hpp>
#include <blockscale/host/gemm_reference.hpp>
#include <blockscale/host/quantize.hpp>
#include <blockscale/host/quantized_matrix.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "bank_conflicts.hpp"
#include "catch.hpp"
#include "splitmix64.hpp"
#include "ue6m2.hpp"

using namespace blockscale;
namespace warp = blockscale::cuda::warp;
namespace ptx = blockscale::emulation::ptx;
using blockscale::emulation::host_warp;

// A path is a specialisation of warp::path_tile, not a branch inside warp_tile: this one, the bf16
// step on rows dequantized in registers, is declared here, outside the library, and its warp tile
// is checked against the reference GEMM below like the library's paths.
struct own_path {};
namespace blockscale {
inline namespace v0 {
namespace cuda {
namespace warp {
template <int WarpM, int WarpN, class FormatA, class FormatB>
struct path_tile<own_path, WarpM, WarpN, FormatA, FormatB> {
  using type = bf16_tile<dequantized_rows, WarpM, WarpN, FormatA, FormatB>;
};
} // namespace warp
} // namespace cuda
} // namespace v0
} // namespace blockscale

// An atom is its op (the instruction) and its traits (the maps), apart.
static_assert(std::is_base_of<warp::sm80_mma_m16n8k16_f32_bf16, warp::mma_bf16_m16n8k16>::value &&
                  std::is_base_of<warp::mma_traits<warp::sm80_mma_m16n8k16_f32_bf16>,
                                  warp::mma_bf16_m16n8k16>::value,
              "the bf16 atom");
static_assert(warp::mma_traits<warp::sm120_mma_m16n8k64_f32_e2m1<ue8m0, warp::scale_vector::x2, 2,
                                                                 0, 0, 3>>::scale_b_lane(5) == 23,
              "the block-scaled traits, read without the op");

namespace {

std::uint32_t bits_of(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
std::uint64_t bits_of(double x) {
  std::uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
bool bf16_is_nan(std::uint16_t bits) {
  return (bits & 0x7FFFu) > 0x7F80u;
}
double bf16_value(std::uint16_t bits) {
  return static_cast<double>(static_cast<float>(bfloat16::from_bits(bits)));
}
std::uint16_t half_of(std::uint32_t word, int half) {
  return static_cast<std::uint16_t>(word >> (16 * half));
}

/// Counts failures of a bulk comparison and keeps the first one's description, so that a loop
/// over thousands of values is one assertion that still says what went wrong.
struct mismatches {
  long checked = 0;
  long count = 0;
  std::string first;
  template <class Describe>
  void expect(bool ok, Describe&& describe) {
    ++checked;
    if (ok || count++ != 0)
      return;
    std::ostringstream s;
    describe(s);
    first = s.str();
  }
};

// ---------------------------------------------------------------------------------------------
// 1. Coordinate maps

/// How often each cell of a rows × cols tile is hit, and how many hits fell outside.
struct coverage {
  int rows, cols;
  std::vector<int> hits;
  int outside = 0;
  coverage(int r, int c) : rows(r), cols(c), hits(static_cast<std::size_t>(r * c), 0) {}
  void add(warp::coord x) {
    if (x.row < 0 || x.row >= rows || x.col < 0 || x.col >= cols)
      ++outside;
    else
      ++hits[static_cast<std::size_t>(x.row * cols + x.col)];
  }
  /// Every cell hit exactly once (with as many hits as cells: a bijection).
  bool exactly_once() const {
    return outside == 0 && std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; });
  }
};

bool same(warp::coord a, ptx::coord b) {
  return a.row == b.row && a.col == b.col;
}

// The maps are usable in constant expressions (the device loaders are written from them).
static_assert(warp::mma_bf16_m16n8k16::a_coord(5, 3, 1) == warp::coord{9, 11}, "bf16 A map");
static_assert(warp::mma_bf16_m16n8k16::b_coord(31, 1, 1) == warp::coord{7, 15}, "bf16 B map");
static_assert(warp::mma_bf16_m16n8k16::c_coord(6, 3) == warp::coord{9, 5}, "accumulator map");
static_assert(warp::mma_e2m1_m16n8k64<ue4m3, warp::scale_vector::x4>::a_coord(7, 2, 5) ==
                  warp::coord{1, 61},
              "E2M1 A map");

template <class Atom>
void check_scale_selectors() {
  INFO("scale_vector " << Atom::vector << ", ByteA " << Atom::byte_a << ", ThreadA "
                       << Atom::thread_a << ", ByteB " << Atom::byte_b << ", ThreadB "
                       << Atom::thread_b);
  static_assert(Atom::scale_block * Atom::vector == 64, "the scale blocks tile k64");
  std::set<int> a_lanes, b_lanes;
  for (int row = 0; row < 16; ++row) {
    const int lane = Atom::scale_a_lane(row);
    a_lanes.insert(lane);
    CHECK(lane >= 0);
    CHECK(lane < 32);
    CHECK(lane == ptx::scale_a_lane(row, Atom::thread_a));
    // The lanes of the selected thread pair, and the row the tile's scale loader puts there
    // (lane (g, t) loads row g + 8·(t % 2)).
    CHECK((lane % 4) / 2 == Atom::thread_a);
    CHECK(lane / 4 + 8 * (lane % 2) == row);
  }
  CHECK(a_lanes.size() == 16);
  for (int col = 0; col < 8; ++col) {
    const int lane = Atom::scale_b_lane(col);
    b_lanes.insert(lane);
    CHECK(lane == ptx::scale_b_lane(col, Atom::thread_b));
    CHECK(lane % 4 == Atom::thread_b);
    CHECK(lane / 4 == col);
  }
  CHECK(b_lanes.size() == 8);
  std::array<int, 4> a_bytes{}, b_bytes{};
  int a_outside = 0, b_outside = 0, a_wrong = 0, b_wrong = 0;
  for (int k = 0; k < 64; ++k) {
    const int ba = Atom::scale_a_byte(k), bb = Atom::scale_b_byte(k);
    if (ba < Atom::byte_a || ba >= Atom::byte_a + Atom::vector || ba > 3)
      ++a_outside;
    else
      ++a_bytes[static_cast<std::size_t>(ba)];
    if (bb < Atom::byte_b || bb >= Atom::byte_b + Atom::vector || bb > 3)
      ++b_outside;
    else
      ++b_bytes[static_cast<std::size_t>(bb)];
    a_wrong += ba != Atom::byte_a + k / Atom::scale_block;
    b_wrong += bb != Atom::byte_b + k / Atom::scale_block;
  }
  CHECK(a_outside == 0);
  CHECK(b_outside == 0);
  CHECK(a_wrong == 0);
  CHECK(b_wrong == 0);
  for (int byte = 0; byte < 4; ++byte) {
    const bool in_a = byte >= Atom::byte_a && byte < Atom::byte_a + Atom::vector;
    const bool in_b = byte >= Atom::byte_b && byte < Atom::byte_b + Atom::vector;
    CHECK(a_bytes[static_cast<std::size_t>(byte)] == (in_a ? Atom::scale_block : 0));
    CHECK(b_bytes[static_cast<std::size_t>(byte)] == (in_b ? Atom::scale_block : 0));
  }
}

template <class Scale, warp::scale_vector V, int ByteA, int ThreadA, int ByteB, int... ThreadB>
void check_selectors_over_thread_b(std::integer_sequence<int, ThreadB...>) {
  (check_scale_selectors<warp::mma_e2m1_m16n8k64<Scale, V, ByteA, ThreadA, ByteB, ThreadB>>(), ...);
}

template <class Path, int WarpM, int WarpN>
void check_coord_of() {
  using tile = warp::warp_tile<Path, WarpM, WarpN, nvfp4, nvfp4>;
  INFO("warp tile " << WarpM << " x " << WarpN << (tile::block_scaled ? " block-scaled" : " bf16"));
  coverage c(WarpM, WarpN);
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < tile::tiles_m; ++i)
      for (int j = 0; j < tile::tiles_n; ++j)
        for (int r = 0; r < 4; ++r)
          c.add(tile::coord_of(lane, i, j, r));
  CHECK(c.outside == 0);
  CHECK(c.exactly_once());
}

// ---------------------------------------------------------------------------------------------
// 2. Dequantization

/// The bf16 code of `magnitude` (exactly a bf16 value, else 0xFFFF: no finite bf16 is that code's
/// magnitude) with the sign bit `negative`.
std::uint16_t exact_bf16_bits(double magnitude, bool negative) {
  const float f = static_cast<float>(magnitude);
  if (static_cast<double>(f) != magnitude || (bits_of(f) & 0xFFFFu) != 0)
    return 0xFFFFu;
  return static_cast<std::uint16_t>((bits_of(f) >> 16) | (negative ? 0x8000u : 0u));
}

/// Word of eight E2M1 codes with `code` at nibble `position` and varied fillers elsewhere.
std::uint32_t word_with(unsigned code, int position) {
  std::uint32_t q = 0;
  for (int n = 0; n < 8; ++n) {
    const unsigned c =
        n == position ? code : (code * 7u + 3u * static_cast<unsigned>(n) + 5u) & 15u;
    q |= std::uint32_t{c} << (4 * n);
  }
  return q;
}
unsigned nibble(std::uint32_t q, int n) {
  return (q >> (4 * n)) & 15u;
}

/// The multiplier words of a scale code by the rule of cuda/warp/dequant.hpp's file comment,
/// derived from the code's value S alone: S · 2^fold as a bf16 in both halves of the first word
/// (the second is 0); for UE8M0 (S = 2^k) the factors 2^x1 and 2^x2 with x = k + fold = x1 + x2
/// and x2 = floor(x / 2); a NaN code 0x7FC0 and an Inf code 0x7F80 in both halves of both words.
template <class Scale>
warp::bf16_multiplier expected_multiplier(std::uint8_t code) {
  using rule = warp::dequant_scale<Scale>;
  const auto both_halves = [](std::uint16_t half) { return std::uint32_t{half} * 0x00010001u; };
  const auto s = Scale::from_bits(code);
  const double scale = static_cast<double>(static_cast<float>(s));
  if (s.is_nan())
    return {both_halves(0x7FC0u), both_halves(0x7FC0u)};
  if (std::isinf(scale))
    return {both_halves(0x7F80u), both_halves(0x7F80u)};
  if (rule::multiplies == 1)
    return {both_halves(exact_bf16_bits(std::ldexp(scale, rule::fold), false)), 0u};
  const int x = std::ilogb(scale) + rule::fold;
  const int x2 = static_cast<int>(std::floor(x / 2.0)), x1 = x - x2;
  return {both_halves(exact_bf16_bits(std::ldexp(1.0, x1), false)),
          both_halves(exact_bf16_bits(std::ldexp(1.0, x2), false))};
}

/// A user's format: UE4M3 without subnormals (exponent field 0 is the binade of 2^-7, code 0 is
/// 2^-7, no zero), which `dequant_scale` must read as a normal binade.
struct ue4m3_without_subnormals_format {
  static constexpr int exponent_bits = 4;
  static constexpr int mantissa_bits = 3;
  static constexpr int bias = 7;
  static constexpr bool is_signed = false;
  static constexpr bool has_subnormals = false;
  static constexpr nonfinite_encoding nonfinite = nonfinite_encoding::nan_only;
};
using ue4m3_without_subnormals = minifloat<ue4m3_without_subnormals_format>;

template <class Scale>
void check_dequant_exhaustive(int expected_offset, int expected_multiplies, int expected_nans,
                              int expected_infinities = 0) {
  using rule = warp::dequant_scale<Scale>;
  CHECK(rule::offset == expected_offset);
  CHECK(rule::multiplies == expected_multiplies);
  const double unoffset = std::ldexp(1.0, rule::offset);
  mismatches words, bits, values;
  int nan_codes = 0, infinite_codes = 0;
  for (int code = 0; code < 256; ++code) {
    const auto s = Scale::from_bits(static_cast<std::uint8_t>(code));
    const bool nan = s.is_nan();
    nan_codes += nan;
    const double scale = static_cast<double>(static_cast<float>(s));
    const bool infinite = std::isinf(scale);
    infinite_codes += infinite;
    const warp::bf16_multiplier m = rule::multiplier(static_cast<std::uint8_t>(code));
    const warp::bf16_multiplier want = expected_multiplier<Scale>(static_cast<std::uint8_t>(code));
    words.expect(m.first == want.first && m.second == want.second, [&](std::ostream& o) {
      o << "scale code " << code << " (value " << scale << "): multipliers 0x" << std::hex
        << m.first << ", 0x" << m.second << "; expected 0x" << want.first << ", 0x" << want.second;
    });
    for (unsigned c = 0; c < 16; ++c)
      for (int position = 0; position < 8; ++position) {
        const std::uint32_t q = word_with(c, position);
        std::uint32_t out[4];
        warp::dequantize8<host_warp, Scale>(q, m, out);
        for (int n = 0; n < 8; ++n) {
          const unsigned e_code = nibble(q, n);
          const std::uint16_t got = half_of(out[n % 4], n / 4);
          const auto describe = [&](std::ostream& o) {
            o << "scale code " << code << ", word 0x" << std::hex << q << std::dec << ", nibble "
              << n << " (E2M1 code " << e_code << "): got bf16 0x" << std::hex << got;
          };
          if (nan) {
            bits.expect(bf16_is_nan(got), describe);
            continue;
          }
          if (infinite) { // ±Inf with the element's sign, NaN for ±0 · Inf
            bits.expect((e_code & 7u) == 0 ? bf16_is_nan(got)
                                           : got == ((e_code & 8u) != 0 ? 0xFF80u : 0x7F80u),
                        describe);
            continue;
          }
          // Exact in double: E2M1 values have two significant bits, the scales at most four.
          const double exact = static_cast<double>(static_cast<float>(
                                   e2m1::from_bits(static_cast<std::uint8_t>(e_code)))) *
                               scale;
          // The sign of the bf16 product is sign(e) · sign(S) = sign(e): S is unsigned, and a
          // zero scale or a ±0 element gives a zero carrying the element's sign.
          const std::uint16_t want =
              exact_bf16_bits(std::ldexp(std::fabs(exact), -rule::offset), (e_code & 8u) != 0);
          bits.expect(got == want, describe);
          values.expect(bf16_value(got) * unoffset == exact, describe);
        }
      }
  }
  CHECK(nan_codes == expected_nans);
  CHECK(infinite_codes == expected_infinities);
  INFO(words.first);
  CHECK(words.checked == 256);
  CHECK(words.count == 0);
  INFO(bits.first);
  CHECK(bits.checked == 256 * 16 * 8 * 8);
  CHECK(bits.count == 0);
  INFO(values.first);
  CHECK(values.count == 0);
}

// ---------------------------------------------------------------------------------------------
// 3. The warp tile against the reference GEMM

/// The code of the scale 2^e.
template <class Scale>
std::uint8_t power_of_two_code(int e) {
  using traits = typename Scale::traits;
  return static_cast<std::uint8_t>((traits::bias + e) << traits::mantissa_bits);
}

/// rows × k of random E2M1 codes (all sixteen, ±0 included) with block scales 2^e, e in [-2, 2],
/// written directly into the storage; decode scale `s_dec` (a power of two).
template <class F>
quantized_matrix<F> exact_operand(std::size_t rows, std::size_t k, float s_dec, splitmix64& rng) {
  quantized_shape shape;
  shape.rows = rows;
  shape.cols = k;
  quantized_matrix<F> q(shape);
  using scale = typename F::scale_type;
  for (int e = -2; e <= 2; ++e)
    REQUIRE(static_cast<float>(scale::from_bits(power_of_two_code<scale>(e))) ==
            std::ldexp(1.0f, e));
  const quantized_view<F> v = q.view();
  for (std::size_t i = 0; i < q.storage().element_bytes; ++i)
    v.elements()[i] = static_cast<std::uint8_t>(rng.next());
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t kb = 0; kb < q.blocks_per_row(); ++kb)
      v.scales()[v.scale_index(r, kb)] =
          power_of_two_code<scale>(static_cast<int>(rng.next() % 5) - 2);
  *v.decode_scale_data() = s_dec;
  return q;
}

/// rows × k normal random values, each 16-column block scaled by its own random 2^[-6, 6],
/// quantized rowwise by the library (row-major scales), with a current tensor scale where the
/// scale format has a mantissa (NVFP4, UE5M3), else s_enc = 1 (MXFP4).
template <class F>
quantized_matrix<F> random_operand(std::size_t rows, std::size_t k, splitmix64& rng) {
  std::vector<float> x(rows * k);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < k; c += 16) {
      const double block = std::ldexp(1.0, static_cast<int>(rng.next() % 13) - 6);
      for (std::size_t i = c; i < c + 16 && i < k; ++i)
        x[r * k + i] = static_cast<float>(rng.normal() * block);
    }
  const matrix_view<const float> view(x.data(), rows, k);
  quantize_options options;
  options.layout = scale_layout::row_major;
  if (format_traits<typename F::scale_type::format>::mantissa_bits != 0)
    options.encode_scale =
        encode_scale_from_amax(tensor_scale_numerator<F>(0), measure_amax<F>(view));
  return quantize<F>(view, options);
}

/// The operand as the CTA stages it in shared memory: rows of packed elements `stride` bytes apart
/// (K/2 + 32), then the scale codes row-major `scale_stride` bytes apart (K/block + 4); the
/// padding is 0xFF (E2M1 −6, a NaN scale for every format), so any read outside the rows shows.
template <class F>
warp::shared_operand stage(const quantized_matrix<F>& q, std::vector<std::uint8_t>& buffer) {
  const int rows = static_cast<int>(q.rows()), k = static_cast<int>(q.cols());
  const int stride = k / 2 + 32, scale_stride = k / F::block_size + 4;
  REQUIRE(stride % 4 == 0);
  REQUIRE(scale_stride % 4 == 0);
  REQUIRE(q.row_bytes() == static_cast<std::size_t>(k / 2));
  buffer.assign(static_cast<std::size_t>(rows * (stride + scale_stride)), 0xFF);
  const const_quantized_view<F> v = q.view();
  std::uint8_t* scales = buffer.data() + rows * stride;
  for (int r = 0; r < rows; ++r) {
    std::memcpy(buffer.data() + r * stride, v.row(static_cast<std::size_t>(r)), q.row_bytes());
    for (int kb = 0; kb < k / F::block_size; ++kb)
      scales[r * scale_stride + kb] =
          v.scales()[v.scale_index(static_cast<std::size_t>(r), static_cast<std::size_t>(kb))];
  }
  return {buffer.data(), stride, scales, scale_stride};
}

/// C = A · Bᵀ by warp_tile on host_warp, with the CTA's epilogue in double:
/// acc · (2^accumulator_exponent · s_dec_a · s_dec_b). WarpM × WarpN, row-major.
template <class Path, int WarpM, int WarpN, class FA, class FB>
std::vector<double> warp_gemm(const quantized_matrix<FA>& a, const quantized_matrix<FB>& b,
                              ptx::mma_model model = ptx::default_mma_model) {
  using tile = warp::warp_tile<Path, WarpM, WarpN, FA, FB>;
  REQUIRE(a.rows() == static_cast<std::size_t>(WarpM));
  REQUIRE(b.rows() == static_cast<std::size_t>(WarpN));
  REQUIRE(a.cols() == b.cols());
  const int k = static_cast<int>(a.cols());
  REQUIRE(k % tile::k_step == 0);
  std::vector<std::uint8_t> buffer_a, buffer_b;
  const warp::shared_operand sa = stage(a, buffer_a), sb = stage(b, buffer_b);
  auto acc = std::make_unique<typename tile::template accumulators<host_warp>>();
  const host_warp warp(0, emulation::async_copies::eager, model);
  tile::clear(warp, *acc);
  for (int k0 = 0; k0 < k; k0 += tile::k_step)
    tile::step(warp, *acc, sa, sb, k0);
  const double t = static_cast<double>(a.decode_scale()) * static_cast<double>(b.decode_scale()) *
                   std::ldexp(1.0, tile::accumulator_exponent);
  std::vector<double> out(static_cast<std::size_t>(WarpM * WarpN),
                          std::numeric_limits<double>::infinity());
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < tile::tiles_m; ++i)
      for (int j = 0; j < tile::tiles_n; ++j)
        for (int r = 0; r < 4; ++r) {
          const warp::coord at = tile::coord_of(lane, i, j, r);
          out[static_cast<std::size_t>(at.row * WarpN + at.col)] =
              t * static_cast<double>(acc->tile[i][j][lane].r[r]);
        }
  return out;
}

template <class FA, class FB>
std::vector<float> reference_gemm(const quantized_matrix<FA>& a, const quantized_matrix<FB>& b) {
  std::vector<float> c(a.rows() * b.rows(), std::numeric_limits<float>::quiet_NaN());
  gemm::reference(a, b, matrix_view<float>(c.data(), a.rows(), b.rows()), 1.0f, 0.0f);
  return c;
}

/// |decoded value| of element (r, k): |element · block scale · s_dec|, exact in double.
template <class F>
double magnitude(const quantized_matrix<F>& q, std::size_t r, std::size_t k) {
  return std::fabs(static_cast<double>(static_cast<float>(q.element(r, k))) *
                   static_cast<double>(static_cast<float>(q.block_scale(r, k))) *
                   static_cast<double>(q.decode_scale()));
}

template <class Path, int WarpM, int WarpN, class FA, class FB>
void check_exact(int k, splitmix64& rng) {
  INFO("exact case, K = " << k);
  // Every product e_a·S_a·e_b·S_b is a multiple of 0.5·2^-2·0.5·2^-2 = 2^-6 and every partial sum
  // is at most K·6·4·6·4 = 576·K ≤ 2^18 in magnitude (K ≤ 256): at most 24 significant bits, so
  // each MMA's single rounding is exact and so is the reference; the power-of-two decode scales
  // keep the epilogue exact.
  const auto a = exact_operand<FA>(WarpM, static_cast<std::size_t>(k), 0.5f, rng);
  const auto b = exact_operand<FB>(WarpN, static_cast<std::size_t>(k), 4.0f, rng);
  const std::vector<double> got = warp_gemm<Path, WarpM, WarpN>(a, b);
  const std::vector<float> want = reference_gemm(a, b);
  mismatches m;
  for (int row = 0; row < WarpM; ++row)
    for (int col = 0; col < WarpN; ++col) {
      const std::size_t at = static_cast<std::size_t>(row * WarpN + col);
      m.expect(got[at] == static_cast<double>(want[at]) &&
                   bits_of(static_cast<float>(got[at])) == bits_of(want[at]),
               [&](std::ostream& o) {
                 o << "(" << row << ", " << col << "): got " << got[at] << ", reference "
                   << want[at];
               });
    }
  INFO(m.first);
  CHECK(m.checked == WarpM * WarpN);
  CHECK(m.count == 0);
}

/// What the tensor cores compute for the warp tile, written without the tile: for each output,
/// the chain of the path's MMAs over k in order, each output of each MMA one dot-add of `model`
/// (emulation/ptx.hpp) on the values the MMA sees — the bf16 path's dequantized bf16 values
/// (element · block scale · 2^-offset, exact), the block-scaled path's E2M1 values and scale
/// factors — times the epilogue's factor, as warp_gemm applies it.
template <class Path, int WarpM, int WarpN, class FA, class FB>
std::vector<double> hardware_gemm(const quantized_matrix<FA>& a, const quantized_matrix<FB>& b,
                                  ptx::mma_model model) {
  using tile = warp::warp_tile<Path, WarpM, WarpN, FA, FB>;
  const int k = static_cast<int>(a.cols());
  const double t = static_cast<double>(a.decode_scale()) * static_cast<double>(b.decode_scale()) *
                   std::ldexp(1.0, tile::accumulator_exponent);
  const auto element = [](const auto& q, int r, int kk) {
    return static_cast<double>(
        static_cast<float>(q.element(static_cast<std::size_t>(r), static_cast<std::size_t>(kk))));
  };
  const auto scale = [](const auto& q, int r, int kk) {
    return static_cast<double>(static_cast<float>(
        q.block_scale(static_cast<std::size_t>(r), static_cast<std::size_t>(kk))));
  };
  std::vector<double> out(static_cast<std::size_t>(WarpM * WarpN));
  for (int row = 0; row < WarpM; ++row)
    for (int col = 0; col < WarpN; ++col) {
      float c = 0.0f;
      if constexpr (tile::block_scaled) {
        const ptx::scale_kind kind = std::is_same<typename FA::scale_type, ue4m3>::value
                                         ? ptx::scale_kind::ue4m3
                                         : ptx::scale_kind::ue8m0;
        for (int k0 = 0; k0 < k; k0 += 64) {
          double av[64], bv[64], sa[4], sb[4];
          for (int i = 0; i < 64; ++i) {
            av[i] = element(a, row, k0 + i);
            bv[i] = element(b, col, k0 + i);
          }
          for (int g = 0; g < 4; ++g) {
            sa[g] = scale(a, row, k0 + 16 * g);
            sb[g] = scale(b, col, k0 + 16 * g);
          }
          c = ptx::dot_add_e2m1(model, kind, av, bv, sa, sb, c);
        }
      } else {
        const int offset_a = warp::dequant_scale<typename FA::scale_type>::offset;
        const int offset_b = warp::dequant_scale<typename FB::scale_type>::offset;
        // Each k64 window takes four MMAs; lane t of a row group dequantizes the window's
        // elements 16t … 16t + 15 to eight bf16 pairs, pair j holding elements (b, b + 4) with
        // b = j for j < 4 and j + 4 after (dequantize8's order), and MMA s takes pairs 2s (at its
        // k = 2t + h) and 2s + 1 (at k = 8 + 2t + h) of every lane.
        for (int k0 = 0; k0 < k; k0 += 64)
          for (int step = 0; step < 4; ++step) {
            double av[16], bv[16];
            for (int t4 = 0; t4 < 4; ++t4)
              for (int h = 0; h < 2; ++h)
                for (int high = 0; high < 2; ++high) {
                  const int local = 2 * t4 + h + 8 * high;
                  const int pair = 2 * step + high;
                  const int kk = k0 + 16 * t4 + (pair < 4 ? pair : pair + 4) + 4 * h;
                  av[local] = std::ldexp(element(a, row, kk) * scale(a, row, kk), -offset_a);
                  bv[local] = std::ldexp(element(b, col, kk) * scale(b, col, kk), -offset_b);
                }
            c = ptx::dot_add_bf16(model, av, bv, c);
          }
      }
      out[static_cast<std::size_t>(row * WarpN + col)] = t * static_cast<double>(c);
    }
  return out;
}

/// The bound on |MMA chain − exact| per unit of Σ_k |a_k|·|b_k| and per MMA, under `model`
/// (normal operands). Each pass of L products and the accumulator aligns them to 2^e_max with
/// F fraction bits: truncating each of the L + 1 terms loses < 2^(e_max − F), and 2^e_max is at
/// most the largest term — for a block-scaled group term at most 4 times its products' magnitude
/// (a nonzero E2M1 product is at least 1/4, and the group is aligned by its scales) — so at most
/// the running Σ|a_k·b_k| (times 4); the float result's truncation adds < 2^-23 of it. Rounded
/// once (exact), an MMA loses at most 2^-24.
double mma_error_factor(ptx::mma_model model, bool block_scaled) {
  if (model == ptx::mma_model::exact)
    return 0x1p-24;
  if (block_scaled) // one pass: 4 group terms and C, F = 35
    return 5 * 0x1p-33 + 0x1p-23;
  if (model == ptx::mma_model::sm80) // two passes of 8 products and C, F = 24
    return 2 * (9 * 0x1p-24 + 0x1p-23);
  return 17 * 0x1p-25 + 0x1p-23; // one pass of 16 products and C, F = 25
}

template <class Path, int WarpM, int WarpN, class FA, class FB>
void check_random(int k, splitmix64& rng) {
  using tile = warp::warp_tile<Path, WarpM, WarpN, FA, FB>;
  INFO("random case, K = " << k);
  const auto a = random_operand<FA>(WarpM, static_cast<std::size_t>(k), rng);
  const auto b = random_operand<FB>(WarpN, static_cast<std::size_t>(k), rng);
  const std::vector<float> want = reference_gemm(a, b);
  for (const ptx::mma_model model :
       {ptx::mma_model::exact, ptx::mma_model::sm80, ptx::mma_model::sm90}) {
    INFO("tensor-core model " << static_cast<int>(model));
    const std::vector<double> got = warp_gemm<Path, WarpM, WarpN>(a, b, model);
    const std::vector<double> hardware = hardware_gemm<Path, WarpM, WarpN>(a, b, model);
    // Error bound. The dequantization and every product are exact; the chain has n = K/16 (bf16
    // path) or K/64 (block-scaled path) MMAs, each within mma_error_factor · Σ_k |a_k|·|b_k|; the
    // reference's final float rounding adds 2^-24 · |C| and the double epilogue far less:
    //   |got − ref| ≤ (n · factor + 2^-23) · Σ_k |a_k|·|b_k|  (decoded values, tensor scales in).
    const int mma_count = k / (tile::block_scaled ? 64 : 16);
    const double factor = mma_count * mma_error_factor(model, tile::block_scaled) + 0x1p-23;
    mismatches m;
    double total = 0.0;
    for (int row = 0; row < WarpM; ++row)
      for (int col = 0; col < WarpN; ++col) {
        double sum = 0.0;
        for (int kk = 0; kk < k; ++kk)
          sum += magnitude(a, static_cast<std::size_t>(row), static_cast<std::size_t>(kk)) *
                 magnitude(b, static_cast<std::size_t>(col), static_cast<std::size_t>(kk));
        const double bound = factor * sum;
        const std::size_t at = static_cast<std::size_t>(row * WarpN + col);
        total += std::fabs(static_cast<double>(want[at]));
        m.expect(std::isfinite(got[at]) && got[at] == hardware[at] &&
                     std::fabs(got[at] - static_cast<double>(want[at])) <= bound,
                 [&](std::ostream& o) {
                   o.precision(17);
                   o << "(" << row << ", " << col << "): got " << got[at] << ", the model's MMA "
                     << "chain " << hardware[at] << ", reference " << want[at] << ", bound "
                     << bound;
                 });
      }
    INFO(m.first);
    CHECK(total > 0.0);
    CHECK(m.checked == WarpM * WarpN);
    CHECK(m.count == 0);
  }
}

template <class F>
void poison_scale(quantized_matrix<F>& q, std::size_t row, std::size_t kb) {
  const quantized_view<F> v = q.view();
  using scale = typename F::scale_type;
  v.scales()[v.scale_index(row, kb)] = scale::traits::nan_code;
  REQUIRE(q.block_scale(row, kb * F::block_size).is_nan());
}

template <class Path, int WarpM, int WarpN, class FA, class FB>
void check_nan(splitmix64& rng) {
  INFO("NaN block scales");
  constexpr int k = 128;
  const auto a = random_operand<FA>(WarpM, k, rng);
  const auto b = random_operand<FB>(WarpN, k, rng);
  const std::vector<double> clean = warp_gemm<Path, WarpM, WarpN>(a, b);
  // A NaN scale in one block of A's row `bad_row` (and of B's row `bad_col`): the products of that
  // block are NaN, zeros included, so exactly that row (column) of C is NaN, as in the reference.
  const std::size_t bad_row = WarpM / 2 + 1, bad_col = WarpN - 3;
  auto a_nan = a;
  poison_scale(a_nan, bad_row, a.blocks_per_row() - 1);
  auto b_nan = b;
  poison_scale(b_nan, bad_col, 1);
  for (int side = 0; side < 2; ++side) {
    INFO((side == 0 ? "NaN in A, row " : "NaN in B, column ") << (side == 0 ? bad_row : bad_col));
    const std::vector<double> got = side == 0 ? warp_gemm<Path, WarpM, WarpN>(a_nan, b)
                                              : warp_gemm<Path, WarpM, WarpN>(a, b_nan);
    const std::vector<float> want = side == 0 ? reference_gemm(a_nan, b) : reference_gemm(a, b_nan);
    mismatches m;
    for (int row = 0; row < WarpM; ++row)
      for (int col = 0; col < WarpN; ++col) {
        const std::size_t at = static_cast<std::size_t>(row * WarpN + col);
        const bool poisoned = side == 0 ? static_cast<std::size_t>(row) == bad_row
                                        : static_cast<std::size_t>(col) == bad_col;
        m.expect(poisoned ? std::isnan(got[at]) && std::isnan(want[at])
                          : bits_of(got[at]) == bits_of(clean[at]) && !std::isnan(want[at]),
                 [&](std::ostream& o) {
                   o << "(" << row << ", " << col << "): got " << got[at] << ", reference "
                     << want[at] << ", without the NaN " << clean[at];
                 });
      }
    INFO(m.first);
    CHECK(m.count == 0);
  }
}

template <class Path, int WarpM, int WarpN, class FA, class FB>
void check_warp_shape(splitmix64& rng) {
  INFO("warp tile " << WarpM << " x " << WarpN);
  for (int k : {128, 256}) {
    check_exact<Path, WarpM, WarpN, FA, FB>(k, rng);
    check_random<Path, WarpM, WarpN, FA, FB>(k, rng);
  }
  check_nan<Path, WarpM, WarpN, FA, FB>(rng);
}

template <class Path, class FA, class FB>
void check_warp_tile(const char* name, std::uint64_t seed) {
  INFO((std::is_same<Path, warp::block_scaled_path>::value ? "block_scaled_path, " : "bf16_path, ")
       << name);
  splitmix64 rng{seed};
  check_warp_shape<Path, 16, 8, FA, FB>(rng);
  check_warp_shape<Path, 32, 16, FA, FB>(rng);
  check_warp_shape<Path, 16, 32, FA, FB>(rng);
  check_warp_shape<Path, 64, 32, FA, FB>(rng);
}

// ---------------------------------------------------------------------------------------------
// 4. Bank conflicts

/// Worst bank load over the bf16 path's loads of one operand tile (`rows` rows, a multiple of 8):
/// per row group h and atom row (A: 16i + g + 8h; B: 8j + g), the 8-byte element load and the
/// 1-byte scale load of each k64 chunk of a 128-wide k-tile — the offsets row_pairs uses.
std::pair<int, int> bf16_path_bank_load(int rows, int stride, int block, int scale_stride) {
  int elements = 0, scales = 0;
  for (int k0 = 0; k0 < 128; k0 += 64)
    for (int base = 0; base < rows; base += 8) {
      lane_offsets e{}, s{};
      for (int lane = 0; lane < 32; ++lane) {
        const int row = base + lane / 4;
        e[static_cast<std::size_t>(lane)] =
            warp::load_offsets::bf16_elements(lane, row, k0, stride);
        s[static_cast<std::size_t>(lane)] =
            warp::load_offsets::bf16_scale(lane, row, k0, block, scale_stride);
      }
      elements = std::max(elements, worst_bank_load(e, 8));
      scales = std::max(scales, worst_bank_load(s, 1));
    }
  return {elements, scales};
}

/// The same for the block-scaled path: the 4-byte element loads of registers 0..3 (A, per 16
/// rows) or 0..1 (B, per 8 rows) of both k64 steps of a k128 step, and the 4-byte scale-word loads
/// (restated from block_scaled_tile::step: A lane (g, t) reads row 16i + g + 8·(t % 2), B lane
/// (g, t) row 8j + g; NVFP4 at block (k0 + 64·step) / 16 with step t / 2 for A and t % 2 for B,
/// MXFP4 at k0 / 32).
std::pair<int, int> native_path_bank_load(bool b, bool nv, int rows, int stride, int scale_stride) {
  int elements = 0, scales = 0;
  const int k0 = 0;
  const int group = b ? 8 : 16;
  for (int base = 0; base < rows; base += group) {
    for (int step = 0; step < 2; ++step)
      for (int reg = 0; reg < (b ? 2 : 4); ++reg) {
        lane_offsets e{};
        for (int lane = 0; lane < 32; ++lane)
          e[static_cast<std::size_t>(lane)] =
              base * stride +
              warp::load_offsets::native_elements(lane, reg, b, k0 + 64 * step, stride);
        elements = std::max(elements, worst_bank_load(e, 4));
      }
    lane_offsets s{};
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane / 4, t = lane % 4;
      const int row = base + g + (b ? 0 : 8 * (t % 2));
      const int kb = nv ? (k0 + 64 * (b ? t % 2 : t / 2)) / 16 : k0 / 32;
      s[static_cast<std::size_t>(lane)] = row * scale_stride + kb;
    }
    scales = std::max(scales, worst_bank_load(s, 4));
  }
  return {elements, scales};
}

template <class Path, class F>
using cta_layout = cuda::kernels::gemm_operand_layout<Path, F, 128>;

template <class F>
void check_bf16_banks(const char* name) {
  using layout = cta_layout<warp::bf16_path, F>;
  INFO("bf16_path, " << name << ": element stride " << layout::element_stride << ", scale stride "
                     << layout::scale_stride);
  CHECK(layout::element_stride == 96);
  CHECK(layout::element_stride % 64 == 32);
  for (int rows : {16, 32, 64, 128}) {
    INFO(rows << " rows");
    const auto load =
        bf16_path_bank_load(rows, layout::element_stride, F::block_size, layout::scale_stride);
    CHECK(load.first == 1);
    CHECK(load.second == 1);
  }
}

template <class F>
void check_native_banks(const char* name) {
  using layout = cta_layout<warp::block_scaled_path, F>;
  constexpr bool nv = std::is_same<F, nvfp4>::value;
  INFO("block_scaled_path, " << name << ": element stride " << layout::element_stride
                             << ", scale stride " << layout::scale_stride);
  CHECK(layout::element_stride == 80);
  for (bool b : {false, true})
    for (int rows : {16, 32, 64, 128}) {
      INFO((b ? "B, " : "A, ") << rows << " rows");
      const auto load =
          native_path_bank_load(b, nv, rows, layout::element_stride, layout::scale_stride);
      CHECK(load.first == 1);
      CHECK(load.second == 1);
    }
}

} // namespace

TEST_CASE("warp MMA fragment maps and warp-tile coordinates are bijections", "[unit][warp]") {
  SECTION("mma_bf16_m16n8k16") {
    using atom = warp::mma_bf16_m16n8k16;
    coverage a(16, 16), b(8, 16), c(16, 8);
    int disagree = 0;
    for (int lane = 0; lane < 32; ++lane)
      for (int half = 0; half < 2; ++half) {
        for (int reg = 0; reg < 4; ++reg) {
          a.add(atom::a_coord(lane, reg, half));
          disagree += !same(atom::a_coord(lane, reg, half), ptx::bf16_a_coord(lane, reg, half));
        }
        for (int reg = 0; reg < 2; ++reg) {
          b.add(atom::b_coord(lane, reg, half));
          disagree += !same(atom::b_coord(lane, reg, half), ptx::bf16_b_coord(lane, reg, half));
        }
      }
    for (int lane = 0; lane < 32; ++lane)
      for (int reg = 0; reg < 4; ++reg) {
        c.add(atom::c_coord(lane, reg));
        disagree += !same(atom::c_coord(lane, reg), ptx::accumulator_coord(lane, reg));
      }
    CHECK(a.exactly_once());
    CHECK(b.exactly_once());
    CHECK(c.exactly_once());
    CHECK(disagree == 0); // the emulation (the oracle) places the elements alike
  }
  SECTION("mma_e2m1_m16n8k64") {
    using atom = warp::mma_e2m1_m16n8k64<ue8m0, warp::scale_vector::x2>;
    coverage a(16, 64), b(8, 64), c(16, 8);
    int disagree = 0;
    for (int lane = 0; lane < 32; ++lane)
      for (int nibble = 0; nibble < 8; ++nibble) {
        for (int reg = 0; reg < 4; ++reg) {
          a.add(atom::a_coord(lane, reg, nibble));
          disagree += !same(atom::a_coord(lane, reg, nibble), ptx::fp4_a_coord(lane, reg, nibble));
        }
        for (int reg = 0; reg < 2; ++reg) {
          b.add(atom::b_coord(lane, reg, nibble));
          disagree += !same(atom::b_coord(lane, reg, nibble), ptx::fp4_b_coord(lane, reg, nibble));
        }
      }
    for (int lane = 0; lane < 32; ++lane)
      for (int reg = 0; reg < 4; ++reg) {
        c.add(atom::c_coord(lane, reg));
        disagree += !same(atom::c_coord(lane, reg), ptx::accumulator_coord(lane, reg));
      }
    CHECK(a.exactly_once());
    CHECK(b.exactly_once());
    CHECK(c.exactly_once());
    CHECK(disagree == 0);
  }
  SECTION("scale selectors: UE4M3 x4, ThreadA 0..1, ThreadB 0..3") {
    using tb = std::integer_sequence<int, 0, 1, 2, 3>;
    check_selectors_over_thread_b<ue4m3, warp::scale_vector::x4, 0, 0, 0>(tb{});
    check_selectors_over_thread_b<ue4m3, warp::scale_vector::x4, 0, 1, 0>(tb{});
  }
  SECTION("scale selectors: UE8M0 x2, ByteA and ByteB in {0, 2}, ThreadA 0..1, ThreadB 0..3") {
    using tb = std::integer_sequence<int, 0, 1, 2, 3>;
    check_selectors_over_thread_b<ue8m0, warp::scale_vector::x2, 0, 0, 0>(tb{});
    check_selectors_over_thread_b<ue8m0, warp::scale_vector::x2, 0, 0, 2>(tb{});
    check_selectors_over_thread_b<ue8m0, warp::scale_vector::x2, 2, 0, 0>(tb{});
    check_selectors_over_thread_b<ue8m0, warp::scale_vector::x2, 2, 0, 2>(tb{});
    check_selectors_over_thread_b<ue8m0, warp::scale_vector::x2, 0, 1, 0>(tb{});
    check_selectors_over_thread_b<ue8m0, warp::scale_vector::x2, 0, 1, 2>(tb{});
    check_selectors_over_thread_b<ue8m0, warp::scale_vector::x2, 2, 1, 0>(tb{});
    check_selectors_over_thread_b<ue8m0, warp::scale_vector::x2, 2, 1, 2>(tb{});
  }
  SECTION("warp_tile::coord_of") {
    check_coord_of<warp::bf16_path, 16, 8>();
    check_coord_of<warp::bf16_path, 32, 16>();
    check_coord_of<warp::bf16_path, 16, 32>();
    check_coord_of<warp::bf16_path, 64, 32>();
    check_coord_of<warp::bf16_path, 48, 24>();
    check_coord_of<warp::block_scaled_path, 64, 32>();
    check_coord_of<warp::block_scaled_path, 128, 64>();
  }
}

TEST_CASE("e2m1_pair and dequantize8 are exact for every scale and element code", "[unit][warp]") {
  SECTION("e2m1_pair: nibbles j and j + 4 as v · 2^-126, signs and zeros kept") {
    mismatches m;
    for (unsigned c = 0; c < 16; ++c)
      for (int position = 0; position < 8; ++position) {
        const std::uint32_t q = word_with(c, position);
        for (int j = 0; j < 4; ++j)
          for (int half = 0; half < 2; ++half) {
            const unsigned code = nibble(q, j + 4 * half);
            const double v = static_cast<double>(
                static_cast<float>(e2m1::from_bits(static_cast<std::uint8_t>(code))));
            const std::uint16_t got = half_of(warp::e2m1_pair(q, j), half);
            m.expect(got == exact_bf16_bits(std::ldexp(std::fabs(v), -126), (code & 8u) != 0),
                     [&](std::ostream& o) {
                       o << "word 0x" << std::hex << q << ", pair " << std::dec << j << ", half "
                         << half << ": got 0x" << std::hex << got;
                     });
          }
      }
    INFO(m.first);
    CHECK(m.checked == 16 * 8 * 8);
    CHECK(m.count == 0);
    // Hand-checked codes: 6 (0x7) → 6 · 2^-126 = 1.5 · 2^-124 = bf16 0x01C0; −0 (0x8) → 0x8000;
    // 0.5 (0x1) → 2^-127, the bf16 subnormal 0x0040.
    CHECK(warp::e2m1_pair(0x00000007u, 0) == 0x000001C0u);
    CHECK(warp::e2m1_pair(0x80000000u, 3) == 0x80000000u);
    CHECK(warp::e2m1_pair(0x00001000u, 3) == 0x00000040u);
  }
  SECTION("UE4M3") {
    check_dequant_exhaustive<ue4m3>(26, 1, 2);
  }
  SECTION("UE5M3") {
    check_dequant_exhaustive<ue5m3>(26, 1, 1);
  }
  SECTION("UE8M0") {
    check_dequant_exhaustive<ue8m0>(4, 2, 1);
  }
  SECTION("user formats: IEEE-style UE5M3 (Inf 0xF8), UE4M3 without subnormals") {
    check_dequant_exhaustive<ue5m3_ieee>(26, 1, 7, 1);
    check_dequant_exhaustive<ue4m3_without_subnormals>(26, 1, 2);
  }
  SECTION("a format outside the presets: UE6M2 (largest exponent 32, so d = 31)") {
    check_dequant_exhaustive<ue6m2>(31, 1, 1);
  }
  SECTION("multiplier words, derived by hand") {
    // UE4M3 1.0 (0x38) → 2^100: bf16 exponent field 227, 0x7180. Its smallest subnormal 2^-9
    // (0x01) → 2^91 (0x6D00), and 0x07 = 7 · 2^-9 = 1.75 · 2^-7 → 1.75 · 2^93 (0x6E60). Bit 7 is
    // not UE4M3's: 0xB8 is 0x38. UE8M0 2^0 (127): x = 122 = 61 + 61, bf16 0x5E00 twice; 2^-127
    // (0): x = -5 = -2 + -3, 0x3E80 and 0x3E00.
    CHECK(warp::dequant_scale<ue4m3>::multiplier(0x38).first == 0x71807180u);
    CHECK(warp::dequant_scale<ue4m3>::multiplier(0x01).first == 0x6D006D00u);
    CHECK(warp::dequant_scale<ue4m3>::multiplier(0x07).first == 0x6E606E60u);
    CHECK(warp::dequant_scale<ue4m3>::multiplier(0xB8).first == 0x71807180u);
    CHECK(warp::dequant_scale<ue4m3>::multiplier(0x00).first == 0u);
    CHECK(warp::dequant_scale<ue8m0>::multiplier(127).first == 0x5E005E00u);
    CHECK(warp::dequant_scale<ue8m0>::multiplier(127).second == 0x5E005E00u);
    CHECK(warp::dequant_scale<ue8m0>::multiplier(0).first == 0x3E803E80u);
    CHECK(warp::dequant_scale<ue8m0>::multiplier(0).second == 0x3E003E00u);
    CHECK(warp::dequant_scale<ue8m0>::multiplier(255).first == 0x7FC07FC0u);
    CHECK(warp::dequant_scale<ue8m0>::multiplier(255).second == 0x7FC07FC0u);
  }
  SECTION("signed zeros, derived by hand") {
    // A zero UE4M3 scale (code 0): +1 · 0 = +0, −1 · 0 = −0 (sign(e) · sign(S), S unsigned).
    std::uint32_t out[4];
    warp::dequantize8<host_warp, ue4m3>(0x000000A2u, warp::dequant_scale<ue4m3>::multiplier(0),
                                        out);
    CHECK(half_of(out[0], 0) == 0x0000u); // nibble 0: code 2 = +1
    CHECK(half_of(out[1], 0) == 0x8000u); // nibble 1: code 0xA = −1
    // −0 (code 8) times UE8M0 2^127 (code 254) stays −0; 6 · 2^127 is 1.5 · 2^125 after the
    // offset 2^-4: bf16 0x7E40.
    warp::dequantize8<host_warp, ue8m0>(0x00000078u, warp::dequant_scale<ue8m0>::multiplier(254),
                                        out);
    CHECK(half_of(out[0], 0) == 0x8000u);
    CHECK(half_of(out[1], 0) == 0x7E40u);
  }
}

TEST_CASE("warp_tile on host_warp reproduces the reference GEMM", "[unit][warp]") {
  using warp::bf16_path;
  using warp::block_scaled_path;
  SECTION("bf16_path, NVFP4 x NVFP4") {
    check_warp_tile<bf16_path, nvfp4, nvfp4>("nvfp4 x nvfp4", 1);
  }
  SECTION("bf16_path, MXFP4 x MXFP4") {
    check_warp_tile<bf16_path, mxfp4, mxfp4>("mxfp4 x mxfp4", 2);
  }
  SECTION("bf16_path, UE5M3 x UE5M3") {
    check_warp_tile<bf16_path, ue5m3_fp4, ue5m3_fp4>("ue5m3_fp4 x ue5m3_fp4", 3);
  }
  SECTION("bf16_path, NVFP4 x MXFP4") {
    check_warp_tile<bf16_path, nvfp4, mxfp4>("nvfp4 x mxfp4", 4);
  }
  SECTION("bf16_path, UE5M3 x NVFP4") {
    check_warp_tile<bf16_path, ue5m3_fp4, nvfp4>("ue5m3_fp4 x nvfp4", 5);
  }
  SECTION("bf16_path, MXFP4 x UE5M3") {
    check_warp_tile<bf16_path, mxfp4, ue5m3_fp4>("mxfp4 x ue5m3_fp4", 6);
  }
  SECTION("bf16_path, a format outside the presets: UE6M2-FP4 x UE6M2-FP4 and x NVFP4") {
    check_warp_tile<bf16_path, ue6m2_fp4, ue6m2_fp4>("ue6m2_fp4 x ue6m2_fp4", 9);
    check_warp_tile<bf16_path, ue6m2_fp4, nvfp4>("ue6m2_fp4 x nvfp4", 10);
  }
  SECTION("block_scaled_path, NVFP4 x NVFP4") {
    check_warp_tile<block_scaled_path, nvfp4, nvfp4>("nvfp4 x nvfp4", 7);
  }
  SECTION("a path declared outside the library (own_path), NVFP4 x UE5M3") {
    splitmix64 rng{11};
    check_warp_shape<own_path, 32, 16, nvfp4, ue5m3_fp4>(rng);
  }
  SECTION("block_scaled_path, MXFP4 x MXFP4") {
    check_warp_tile<block_scaled_path, mxfp4, mxfp4>("mxfp4 x mxfp4", 8);
  }
}

TEST_CASE("the warp tile's shared-memory loads are free of bank conflicts", "[unit][warp]") {
  SECTION("the checker sees conflicts and misalignment") {
    // bf16 path with a 64-byte stride: rows g and g + 2 are 128 bytes apart, the same banks.
    CHECK(bf16_path_bank_load(16, 64, 16, 8).first == 2);
    // block-scaled path with a 64-byte stride: rows g and g + 2 again.
    CHECK(native_path_bank_load(false, true, 16, 64, 8).first == 4);
    lane_offsets misaligned{};
    for (int lane = 0; lane < 32; ++lane)
      misaligned[static_cast<std::size_t>(lane)] = 8 * lane + 4;
    CHECK(worst_bank_load(misaligned, 8) > 32);
    lane_offsets broadcast{};
    CHECK(worst_bank_load(broadcast, 4) == 1); // one word for all lanes: a broadcast
  }
  SECTION("bf16 path: 8-byte element loads in two phases, byte scale loads") {
    check_bf16_banks<nvfp4>("nvfp4");
    check_bf16_banks<mxfp4>("mxfp4");
    check_bf16_banks<ue5m3_fp4>("ue5m3_fp4");
  }
  SECTION("block-scaled path: 4-byte element and scale-word loads") {
    check_native_banks<nvfp4>("nvfp4");
    check_native_banks<mxfp4>("mxfp4");
  }
}

TEST_CASE("the dequantize-once path's shared-memory traffic is free of bank conflicts",
          "[unit][warp]") {
  using layout = cuda::warp::staged_bf16<128>;
  using packed = cuda::kernels::gemm_operand_layout<cuda::warp::bf16_staged_path, nvfp4, 128>;
  // The CTA's dequantizer: thread i takes chunk i % 8 of row i / 8 (gemm_program::dequantize_tile)
  // and reads its 8 packed bytes, then stores two 16-byte halves, the first half first for chunks
  // 0..3 and the second first for chunks 4..7 (staged_bf16::dequantize_chunk).
  int reads = 0, stores = 0, loads = 0;
  for (int base = 0; base < 128 * layout::chunks; base += 32) {
    lane_offsets read{}, first{}, second{};
    for (int lane = 0; lane < 32; ++lane) {
      const int row = (base + lane) / layout::chunks, c = (base + lane) % layout::chunks;
      read[static_cast<std::size_t>(lane)] = row * packed::element_stride + 8 * c;
      const int at = row * layout::row_stride + 32 * c;
      first[static_cast<std::size_t>(lane)] = (c & 4) == 0 ? at : at + 16;
      second[static_cast<std::size_t>(lane)] = (c & 4) == 0 ? at + 16 : at;
    }
    reads = std::max(reads, worst_bank_load(read, 8));
    stores = std::max({stores, worst_bank_load(first, 16), worst_bank_load(second, 16)});
  }
  // The warp tile's loads: lane (g, t) reads both halves of chunk k0/16 + t of rows g and g + 8.
  for (int row0 = 0; row0 < 128; row0 += 8)
    for (int k0 = 0; k0 < 128; k0 += 64)
      for (int q = 0; q < 2; ++q) {
        lane_offsets load{};
        for (int lane = 0; lane < 32; ++lane)
          load[static_cast<std::size_t>(lane)] = cuda::warp::load_offsets::staged_pairs(
              lane, row0 + lane / 4, k0, q, layout::row_stride);
        loads = std::max(loads, worst_bank_load(load, 16));
      }
  CHECK(reads == 1);
  CHECK(stores == 1);
  CHECK(loads == 1);
}
