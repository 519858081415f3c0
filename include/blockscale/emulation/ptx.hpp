/// \file emulation/ptx.hpp
/// Host versions of the PTX instructions the warp-level GEMM is built from, written from the PTX
/// ISA's description of each and nothing else, so that they can serve as an oracle: the bf16x2
/// arithmetic `mul.rn.bf16x2` and `fma.rn.bf16x2`, the tensor-core products
/// `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32` and
/// `mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale`, the shared-memory matrix loads
/// `ldmatrix.sync.aligned.m8n8.{x2,x4}[.trans].shared.b16`, Hopper's warpgroup MMA
/// `wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16` with its shared-memory descriptors and
/// swizzles, and `shfl.sync.{idx,bfly}` as CUDA's `__shfl_sync` / `__shfl_xor_sync` issue them
/// with a full mask. A warp register is an array of 32 values indexed by lane; lane L is in group
/// g = L / 4 with thread-in-group t = L % 4; a warpgroup's thread T is lane T % 32 of warp T / 32.
///
/// Arithmetic contract. The bf16x2 operations are exact: every result is the correctly rounded
/// (nearest, ties to even) bf16 of the exact product or exact a·b + c, subnormal results kept,
/// overflow to ±Inf, any NaN result the canonical 0x7FFF. The loads and shuffles only move bits.
///
/// The MMAs follow a model of the tensor cores' arithmetic, chosen by `mma_model` (an argument
/// that defaults to `default_mma_model`, the architecture the emulated kernel is compiled for):
///
/// - the hardware models (`sm80`, `sm90`, `sm100`, `sm120`) compute each output as the tensor
///   cores do according to the fused dot-add model of MMA-Sim (Tang et al., arXiv 2511.10909,
///   verified against NVIDIA GPUs by differential testing): every product and the accumulator are
///   aligned to the largest exponent among them, each truncated toward zero to `fraction_bits`
///   bits below that exponent, summed exactly, and the sum truncated toward zero to float
///   (subnormals kept, 2^128 and beyond ±Inf, a zero result +0). sm_80 (Ampere, Ada) keeps 24
///   fraction bits and adds a k16 BF16 MMA in two halves of 8 (the first half's float result is the
///   second's accumulator); sm_90, sm_100 and sm_120 keep 25 bits in one pass. The block-scaled
///   E2M1 MMA (sm_120a only: every hardware model selects its arithmetic) sums each 16-element
///   group exactly, multiplies the group sum by its two scale factors, and aligns the four group
///   terms and the accumulator with 35 fraction bits. Details with `dot_add_bf16` and
///   `dot_add_e2m1`; peers/test_mmasim.py checks every model against MMA-Sim's bit for bit.
/// - `exact` rounds the exact sum of the products and the accumulator once to float (nearest
///   even, subnormals kept, overflow to ±Inf; −0 only when every addend is −0): the mathematical
///   result, for proofs. The hardware models equal it when no term has bits below the truncation
///   point and the sum is a float (integer tiles, say), up to the sign of zero.
///
/// NaN and Inf follow IEEE rules in every model: any NaN operand or scale, Inf · 0 or Inf − Inf
/// gives NaN (canonical 0x7FFFFFFF), else an Inf operand gives that Inf.
#pragma once

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "../detail/bits.hpp"

namespace blockscale {
inline namespace v0 {
namespace emulation {
namespace ptx {

/// Lanes in a warp.
constexpr int lanes = 32;

/// Whose arithmetic the emulated tensor-core MMAs follow (see the file comment).
enum class mma_model {
  exact, ///< the exact sum rounded once to nearest: the mathematical result
  sm80,  ///< Ampere and Ada (sm_80 … sm_89): 24 fraction bits, a k16 BF16 MMA in two halves
  sm90,  ///< Hopper (sm_90, sm_90a): 25 fraction bits
  sm100, ///< Blackwell (sm_100a, sm_103a): 25 fraction bits
  sm120, ///< Blackwell (sm_120a, sm_121a): 25 fraction bits; the block-scaled E2M1 MMA
};

/// The model of compute capability `arch` (80 for sm_80, 120 for sm_120a); 80 … 89 share sm_80's
/// arithmetic. Throws std::invalid_argument below 80, where none of these MMAs exists.
constexpr mma_model mma_model_of_arch(int arch) {
  return arch < 80    ? throw std::invalid_argument("emulation::ptx: no MMA model below sm_80")
         : arch < 90  ? mma_model::sm80
         : arch < 100 ? mma_model::sm90
         : arch < 120 ? mma_model::sm100
                      : mma_model::sm120;
}

#ifndef BLOCKSCALE_EMULATION_ARCH
/// The architecture emulated kernels are taken to be compiled for (compute capability × 10):
/// define it to the target of your device build. Default: 90 (Hopper).
#define BLOCKSCALE_EMULATION_ARCH 90
#endif
/// The model the MMAs follow unless told otherwise: BLOCKSCALE_EMULATION_ARCH's.
constexpr mma_model default_mma_model = mma_model_of_arch(BLOCKSCALE_EMULATION_ARCH);

/// A position in a tile: `row` and `col` as the instruction names them (m, k for A; n, k for B;
/// m, n for C and D).
struct coord {
  int row;
  int col;
};

// ---------------------------------------------------------------------------------------------
// Fragment maps: where each element of a register of each lane sits in the tile.

/// m16n8k16 bf16 A (16×16, row-major m×k): register r of lane L, half h (0 = low).
constexpr coord bf16_a_coord(int lane, int reg, int half) noexcept {
  return {lane / 4 + 8 * (reg & 1), 2 * (lane % 4) + half + 8 * (reg >> 1)};
}
/// m16n8k16 bf16 B (8×16 stored as n×k, i.e. column-major k×n): register r, half h.
constexpr coord bf16_b_coord(int lane, int reg, int half) noexcept {
  return {lane / 4, 2 * (lane % 4) + half + 8 * reg};
}
/// m16n8k64 E2M1 A (16×64, m×k): register r of lane L, nibble i (bits [4i, 4i + 4)).
constexpr coord fp4_a_coord(int lane, int reg, int nibble) noexcept {
  return {lane / 4 + 8 * (reg & 1), 8 * (lane % 4) + nibble + 32 * (reg >> 1)};
}
/// m16n8k64 E2M1 B (8×64, n×k): register r, nibble i.
constexpr coord fp4_b_coord(int lane, int reg, int nibble) noexcept {
  return {lane / 4, 8 * (lane % 4) + nibble + 32 * reg};
}
/// C and D of both MMAs (16×8 floats, m×n): register r of lane L.
constexpr coord accumulator_coord(int lane, int reg) noexcept {
  return {lane / 4 + 8 * (reg >> 1), 2 * (lane % 4) + (reg & 1)};
}
/// The lane whose scale-a register holds row m's scale factors, for thread-id-a ∈ {0, 1}.
constexpr int scale_a_lane(int m, int thread_id_a) noexcept {
  return 4 * (m % 8) + m / 8 + 2 * thread_id_a;
}
/// The lane whose scale-b register holds column n's scale factors, for thread-id-b ∈ 0..3.
constexpr int scale_b_lane(int n, int thread_id_b) noexcept {
  return 4 * n + thread_id_b;
}

namespace detail {

/// `x` rounded to `precision` significant bits with a quantum of at least 2^min_exponent (nearest,
/// ties to even), magnitudes that round to 2^128 or beyond becoming ±Inf; zeros keep their sign.
/// Correct for the exact value `x` — the double is the number rounded, not an approximation of it.
inline double round_significand(double x, int precision, int min_exponent) noexcept {
  if (!std::isfinite(x) || x == 0.0)
    return x;
  int exponent = 0;
  std::frexp(x, &exponent); // |x| ∈ [2^(exponent-1), 2^exponent)
  const int quantum = std::max(exponent - precision, min_exponent);
  const double scaled = std::ldexp(std::fabs(x), -quantum); // exact: a power-of-two scaling
  double integer = std::floor(scaled);
  const double fraction = scaled - integer; // exact: scaled < 2^precision + 1
  if (fraction > 0.5 || (fraction == 0.5 && std::fmod(integer, 2.0) != 0.0))
    integer += 1.0;
  double magnitude = std::ldexp(integer, quantum);
  if (magnitude >= 0x1p128)
    magnitude = std::numeric_limits<double>::infinity();
  return std::copysign(magnitude, x);
}

/// An exact sum of doubles: a two's-complement fixed-point number of 20 limbs of 32 bits (each
/// kept in an int64 so additions carry lazily) whose lowest bit weighs 2^-320. Holds exactly any
/// finite double that is a multiple of 2^-320 and below 2^300 in magnitude — every bf16 product,
/// scaled E2M1 product and float the MMAs add — and throws std::domain_error on any other finite
/// term. NaN and Inf terms are recorded aside and decide the result by IEEE rules.
class exact_sum {
public:
  void add(double x) {
    if (std::isnan(x)) {
      nan_ = true;
      return;
    }
    if (std::isinf(x)) {
      (x > 0 ? pos_inf_ : neg_inf_) = true;
      return;
    }
    all_negative_zero_ = all_negative_zero_ && x == 0.0 && std::signbit(x);
    if (x == 0.0)
      return;
    int exponent = 0;
    const double fraction = std::frexp(std::fabs(x), &exponent);
    auto significand = static_cast<std::uint64_t>(std::ldexp(fraction, 53));
    int position = exponent - 53 - lsb_exponent; // of the significand's lowest bit
    if (exponent > max_exponent || position <= -53 ||
        (position < 0 && (significand & ((std::uint64_t{1} << -position) - 1)) != 0))
      throw std::domain_error("emulation::ptx::exact_sum: term outside the exact range");
    if (position < 0) {
      significand >>= -position;
      position = 0;
    }
    const int limb = position / 32, shift = position % 32;
    const std::uint64_t low = (significand & mask) << shift;
    const std::uint64_t high = (significand >> 32) << shift;
    const std::int64_t sign = x < 0 ? -1 : 1;
    limbs_[limb] += sign * static_cast<std::int64_t>(low & mask);
    limbs_[limb + 1] += sign * static_cast<std::int64_t>((low >> 32) + (high & mask));
    limbs_[limb + 2] += sign * static_cast<std::int64_t>(high >> 32);
  }

  /// The sum rounded once to `precision` bits with quantum at least 2^min_exponent (see
  /// round_significand); NaN for any NaN term or for +Inf and −Inf together.
  double rounded(int precision, int min_exponent) const {
    if (nan_ || (pos_inf_ && neg_inf_))
      return std::numeric_limits<double>::quiet_NaN();
    if (pos_inf_ || neg_inf_)
      return pos_inf_ ? std::numeric_limits<double>::infinity()
                      : -std::numeric_limits<double>::infinity();
    std::int64_t v[limb_count];
    std::copy(limbs_, limbs_ + limb_count, v);
    propagate_carries(v);
    const bool negative = v[limb_count - 1] < 0;
    if (negative) { // magnitude: negate every limb and carry again
      for (std::int64_t& limb : v)
        limb = -limb;
      propagate_carries(v);
    }
    int top = limb_count - 1;
    while (top >= 0 && v[top] == 0)
      --top;
    if (top < 0)
      return all_negative_zero_ ? -0.0 : 0.0;
    // Round to odd at 53 bits, then to nearest at `precision` ≤ 51 bits: the odd rounding keeps
    // the exact value's side of every point the second rounding decides on, so the pair rounds
    // correctly (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums", 2008).
    const int high_bit =
        32 * top + 31 - blockscale::detail::countl_zero(static_cast<std::uint32_t>(v[top]));
    const int low_bit = std::max(high_bit - 52, 0);
    std::uint64_t significand = 0;
    for (int b = high_bit; b >= low_bit; --b)
      significand = (significand << 1) | static_cast<std::uint64_t>((v[b / 32] >> (b % 32)) & 1);
    bool inexact =
        low_bit % 32 != 0 && (v[low_bit / 32] & ((std::int64_t{1} << (low_bit % 32)) - 1)) != 0;
    for (int i = 0; i < low_bit / 32; ++i)
      inexact = inexact || v[i] != 0;
    const double odd =
        std::ldexp(static_cast<double>(significand | (inexact ? 1u : 0u)), low_bit + lsb_exponent);
    return round_significand(negative ? -odd : odd, precision, min_exponent);
  }

private:
  static constexpr int limb_count = 20, lsb_exponent = -320, max_exponent = 300;
  static constexpr std::uint64_t mask = 0xFFFFFFFFu;

  // Leaves limbs 0..n-2 in [0, 2^32) and the sign in the top limb.
  static void propagate_carries(std::int64_t (&v)[limb_count]) noexcept {
    for (int i = 0; i + 1 < limb_count; ++i) {
      const std::int64_t low = v[i] & static_cast<std::int64_t>(mask);
      v[i + 1] += (v[i] - low) / (std::int64_t{1} << 32); // exact: floor(v[i] / 2^32)
      v[i] = low;
    }
  }

  std::int64_t limbs_[limb_count] = {};
  bool nan_ = false, pos_inf_ = false, neg_inf_ = false, all_negative_zero_ = true;
};

inline float float_result(double rounded) noexcept {
  return std::isnan(rounded) ? blockscale::detail::bit_cast<float>(std::uint32_t{0x7FFFFFFFu})
                             : static_cast<float>(rounded); // exact: rounded is a float or ±Inf
}
inline std::uint16_t bf16_bits(double rounded) noexcept { // `rounded`: a bf16 value, ±Inf or NaN
  if (std::isnan(rounded))
    return 0x7FFF;
  return static_cast<std::uint16_t>(
      blockscale::detail::bit_cast<std::uint32_t>(static_cast<float>(rounded)) >> 16);
}
inline std::uint16_t half_of(std::uint32_t word, int half) noexcept {
  return static_cast<std::uint16_t>(word >> (16 * half));
}

} // namespace detail

// ---------------------------------------------------------------------------------------------
// bf16 arithmetic

/// The value of a bf16 code (exact: a bf16 is the upper half of a float).
inline double bf16_value(std::uint16_t bits) noexcept {
  return blockscale::detail::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

/// The bf16 nearest to `x` (ties to even), bf16 subnormals kept, ±Inf from 2^128·(1 − 2^-9) up,
/// zeros signed, NaN → 0x7FFF. Correctly rounded only when `x` is the exact value to round: a
/// double that is itself a rounding of it may round twice.
inline std::uint16_t bf16_round(double x) noexcept {
  return detail::bf16_bits(detail::round_significand(x, 8, -133));
}

/// `mul.rn.bf16x2`: the two bf16 halves multiplied pairwise (a product of two bf16 is exact in
/// double, so one rounding follows).
inline std::uint32_t mul_bf16x2(std::uint32_t a, std::uint32_t b) noexcept {
  std::uint32_t d = 0;
  for (int h = 0; h < 2; ++h)
    d |= std::uint32_t{bf16_round(bf16_value(detail::half_of(a, h)) *
                                  bf16_value(detail::half_of(b, h)))}
         << (16 * h);
  return d;
}

/// `fma.rn.bf16x2`: a·b + c pairwise with a single rounding of the exact value.
inline std::uint32_t fma_bf16x2(std::uint32_t a, std::uint32_t b, std::uint32_t c) {
  std::uint32_t d = 0;
  for (int h = 0; h < 2; ++h) {
    detail::exact_sum sum;
    sum.add(bf16_value(detail::half_of(a, h)) * bf16_value(detail::half_of(b, h)));
    sum.add(bf16_value(detail::half_of(c, h)));
    d |= std::uint32_t{detail::bf16_bits(sum.rounded(8, -133))} << (16 * h);
  }
  return d;
}

// ---------------------------------------------------------------------------------------------
// Tensor-core arithmetic: one output of an MMA

/// The scale-factor type of the block-scaled MMA.
enum class scale_kind { ue4m3, ue8m0 };

/// The value of an E2M1 code (low 4 bits: sign bit 3, exponent bits 2..1 with bias 1, mantissa
/// bit 0).
inline double e2m1_value(unsigned code) noexcept {
  static constexpr double magnitude[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  return (code & 8u) != 0 ? -magnitude[code & 7u] : magnitude[code & 7u];
}

/// The value of a scale-factor byte: UE4M3 (the sign bit ignored; 4 exponent bits with bias 7, 3
/// mantissa bits, subnormals 2^-6·m/8, 0x7F NaN) or UE8M0 (2^(code − 127), 0xFF NaN).
inline double scale_value(scale_kind kind, unsigned code) noexcept {
  code &= 0xFFu;
  if (kind == scale_kind::ue8m0)
    return code == 0xFFu ? std::numeric_limits<double>::quiet_NaN()
                         : std::ldexp(1.0, static_cast<int>(code) - 127);
  code &= 0x7Fu;
  if (code == 0x7Fu)
    return std::numeric_limits<double>::quiet_NaN();
  const int exponent = static_cast<int>(code >> 3), mantissa = static_cast<int>(code & 7u);
  return exponent == 0 ? std::ldexp(mantissa, -9) : std::ldexp(8 + mantissa, exponent - 10);
}

namespace detail {

/// The exponent the hardware aligns a nonzero finite `x` by: ⌊log2 |x|⌋, but never below the
/// subnormal exponent of x's type (subnormals keep it and a significand below 1).
inline int aligned_exponent(double x, int subnormal_exponent) noexcept {
  return std::max(std::ilogb(x), subnormal_exponent);
}

/// The truncating fused sum of the hardware models: terms (an exact value and the exponent it is
/// aligned by) are added as trunc(value · 2^(F − e_max)) at a common point, e_max the largest
/// exponent of all terms, and the sum is truncated toward zero to float.
class truncated_sum {
public:
  explicit truncated_sum(int fraction_bits) noexcept : fraction_bits_(fraction_bits) {}

  void add(double value, int exponent) {
    if (count_ == capacity)
      throw std::logic_error("emulation::ptx::truncated_sum: more terms than an MMA adds");
    if (std::isnan(value))
      nan_ = true;
    else if (std::isinf(value))
      (value > 0 ? pos_inf_ : neg_inf_) = true;
    else {
      values_[count_] = value;
      exponents_[count_] = exponent;
      ++count_;
    }
  }

  float result() const noexcept {
    if (nan_ || (pos_inf_ && neg_inf_))
      return blockscale::detail::bit_cast<float>(std::uint32_t{0x7FFFFFFFu});
    if (pos_inf_ || neg_inf_)
      return pos_inf_ ? std::numeric_limits<float>::infinity()
                      : -std::numeric_limits<float>::infinity();
    int e_max = INT_MIN;
    for (int i = 0; i < count_; ++i)
      e_max = std::max(e_max, exponents_[i]);
    // Each term is below 2^(F + 13) at this point (|value| < 2^(exponent + 13) for every term an
    // MMA adds), so the truncated terms and their sum are exact in 64-bit integers.
    const int lsb = e_max - fraction_bits_; // the weight of the sum's unit
    std::int64_t sum = 0;
    for (int i = 0; i < count_; ++i)
      sum += static_cast<std::int64_t>(std::trunc(std::ldexp(values_[i], -lsb)));
    if (sum == 0)
      return 0.0f; // +0 whatever the signs of the terms
    std::uint64_t magnitude =
        sum < 0 ? 0 - static_cast<std::uint64_t>(sum) : static_cast<std::uint64_t>(sum);
    const int top = lsb + 63 - blockscale::detail::countl_zero(magnitude); // ⌊log2 |sum|⌋
    float result = std::numeric_limits<float>::infinity();
    if (top < 128) {
      const int quantum = std::max(top - 23, -149); // float's ulp at |sum|, subnormals included
      if (quantum > lsb)                            // toward zero
        magnitude = quantum - lsb < 64 ? magnitude >> (quantum - lsb) : 0;
      if (magnitude == 0)
        return 0.0f; // below float's least subnormal: +0 too
      result = static_cast<float>(
          std::ldexp(static_cast<double>(magnitude), std::max(quantum, lsb))); // exact: a float
    }
    return sum < 0 ? -result : result;
  }

private:
  static constexpr int capacity = 17; // the most one pass adds: 16 products and the accumulator
  int fraction_bits_;
  int count_ = 0;
  double values_[capacity] = {};
  int exponents_[capacity] = {};
  bool nan_ = false, pos_inf_ = false, neg_inf_ = false;
};

inline float float_of(const exact_sum& sum) {
  return float_result(sum.rounded(24, -149));
}

/// The exponent the float accumulator `c` is aligned by (an Inf or NaN one is not aligned).
inline int accumulator_exponent(float c, int zero_exponent) noexcept {
  return c == 0.0f ? zero_exponent : !std::isfinite(c) ? 0 : aligned_exponent(c, -126); // FP32
}

} // namespace detail

/// The subnormal exponents of the operand types (the least exponent a term is aligned by).
constexpr int bf16_subnormal_exponent = -126, float_subnormal_exponent = -126;

/// One output of `mma.sync … m16n8k16 … .f32.bf16.bf16.f32` under `model`: c + Σ_k a[k]·b[k] for
/// k < 16, from the bf16 values a, b (exact doubles) and the float accumulator c. Hardware
/// models: the products (exact) and c are the terms, each aligned by its exponent (the sum of the
/// operands' for a product, bf16 subnormals at −126, c's float exponent); a zero term is aligned
/// by the model's zero exponent (−132 on sm_80, −133 later), which may exceed the others' and so
/// truncate them. sm_80 adds k < 8 and then k ≥ 8 with 24 fraction bits, the others all 16 with 25.
inline float dot_add_bf16(mma_model model, const double a[16], const double b[16], float c) {
  if (model == mma_model::exact) {
    detail::exact_sum sum;
    sum.add(c);
    for (int k = 0; k < 16; ++k)
      sum.add(a[k] * b[k]);
    return detail::float_of(sum);
  }
  const bool ampere = model == mma_model::sm80;
  const int fraction_bits = ampere ? 24 : 25, zero_exponent = ampere ? -132 : -133;
  const int pass = ampere ? 8 : 16;
  for (int k0 = 0; k0 < 16; k0 += pass) {
    detail::truncated_sum sum(fraction_bits);
    sum.add(c, detail::accumulator_exponent(c, zero_exponent));
    for (int k = k0; k < k0 + pass; ++k) {
      const double product = a[k] * b[k]; // exact; NaN for Inf · 0
      // A finite nonzero product has finite nonzero operands; an Inf or NaN one is not aligned
      // (its operands' exponents could overflow an int).
      int exponent = zero_exponent;
      if (product != 0.0 && std::isfinite(product))
        exponent = detail::aligned_exponent(a[k], bf16_subnormal_exponent) +
                   detail::aligned_exponent(b[k], bf16_subnormal_exponent);
      sum.add(product, exponent);
    }
    c = sum.result();
  }
  return c;
}

/// One output of `mma.sync … m16n8k64 … kind::mxf4nvf4.block_scale … .f32.e2m1.e2m1.f32.{ue4m3|
/// ue8m0}` under `model`: c + Σ_k a[k]·sa[k / 16]·b[k]·sb[k / 16] for k < 64, from the E2M1 values
/// a, b, the scale-factor values of each 16-element group (a 32-element block repeats its scale)
/// and the accumulator. Hardware models (all: sm_120a's, the one architecture with the
/// instruction): group g's products are summed exactly to p_g, and p_g · sa[g] · sb[g] is a term
/// aligned by the scales' exponents (UE4M3 subnormals at −6, UE8M0 from −127) — by the zero
/// exponent −139 instead when all 16 products are zero or a scale is zero (a group whose products
/// cancel keeps its scales' exponent); c is aligned by its own (zero: −139); 35 fraction bits.
inline float dot_add_e2m1(mma_model model, scale_kind kind, const double a[64], const double b[64],
                          const double sa[4], const double sb[4], float c) {
  if (model == mma_model::exact) {
    detail::exact_sum sum;
    sum.add(c);
    for (int k = 0; k < 64; ++k)
      sum.add(a[k] * sa[k / 16] * (b[k] * sb[k / 16])); // exact: E2M1 × scale products are
    return detail::float_of(sum);
  }
  constexpr int zero_exponent = -139;
  const int scale_subnormal = kind == scale_kind::ue4m3 ? -6 : -127;
  detail::truncated_sum sum(35);
  sum.add(c, detail::accumulator_exponent(c, zero_exponent));
  for (int g = 0; g < 4; ++g) {
    double p = 0.0; // exact: a sum of 16 multiples of 1/4 below 36 in magnitude
    bool all_zero = true;
    for (int k = 16 * g; k < 16 * g + 16; ++k) {
      p += a[k] * b[k];
      all_zero = all_zero && a[k] * b[k] == 0.0;
    }
    const double scale = sa[g] * sb[g]; // exact; NaN for a NaN scale
    const bool zero = all_zero || scale == 0.0;
    int exponent = zero_exponent;
    if (!zero && std::isfinite(scale)) // a NaN scale's term is NaN: not aligned
      exponent = detail::aligned_exponent(sa[g], scale_subnormal) +
                 detail::aligned_exponent(sb[g], scale_subnormal);
    sum.add(p * scale, exponent);
  }
  return sum.result();
}

// ---------------------------------------------------------------------------------------------
// Tensor-core MMA

namespace detail {

// D[m][n] = dot(m, n, C[m][n]) over the accumulator fragments; C is read before D is written so
// that `c` and `d` may be the same array.
template <class Dot>
void mma_outputs(float d[lanes][4], const float c[lanes][4], Dot dot) {
  float out[16][8];
  for (int lane = 0; lane < lanes; ++lane)
    for (int r = 0; r < 4; ++r) {
      const coord mn = accumulator_coord(lane, r);
      out[mn.row][mn.col] = dot(mn.row, mn.col, c[lane][r]);
    }
  for (int lane = 0; lane < lanes; ++lane)
    for (int r = 0; r < 4; ++r) {
      const coord mn = accumulator_coord(lane, r);
      d[lane][r] = out[mn.row][mn.col];
    }
}

} // namespace detail

/// `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`: D = A·Bᵀ + C over the fragments mapped
/// by bf16_a_coord, bf16_b_coord and accumulator_coord, each output by dot_add_bf16 under `model`.
/// bf16 subnormals are honoured.
inline void mma_m16n8k16_bf16(float d[lanes][4], const std::uint32_t a[lanes][4],
                              const std::uint32_t b[lanes][2], const float c[lanes][4],
                              mma_model model = default_mma_model) {
  double av[16][16], bv[8][16];
  for (int lane = 0; lane < lanes; ++lane)
    for (int h = 0; h < 2; ++h) {
      for (int r = 0; r < 4; ++r) {
        const coord mk = bf16_a_coord(lane, r, h);
        av[mk.row][mk.col] = bf16_value(detail::half_of(a[lane][r], h));
      }
      for (int r = 0; r < 2; ++r) {
        const coord nk = bf16_b_coord(lane, r, h);
        bv[nk.row][nk.col] = bf16_value(detail::half_of(b[lane][r], h));
      }
    }
  detail::mma_outputs(
      d, c, [&](int m, int n, float acc) { return dot_add_bf16(model, av[m], bv[n], acc); });
}

/// `mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::{2X|4X}
/// .f32.e2m1.e2m1.f32.{ue8m0|ue4m3}`: D = (A∘SA)·(B∘SB)ᵀ + C over the E2M1 fragments of
/// fp4_a_coord / fp4_b_coord, each output by dot_add_e2m1 under `model`. Row m's scales are the
/// word sfa[scale_a_lane(m, thread_id_a)] and column n's sfb[scale_b_lane(n, thread_id_b)]; with
/// scale_vec 4 (ue4m3, byte_id 0) byte j scales k ∈ [16j, 16j + 16), with scale_vec 2 (ue8m0,
/// byte_id 0 or 2) byte byte_id + j scales k ∈ [32j, 32j + 32). Any other selector combination
/// throws std::invalid_argument.
inline void mma_m16n8k64_mxf4nvf4(int scale_vec, scale_kind kind, float d[lanes][4],
                                  const std::uint32_t a[lanes][4], const std::uint32_t b[lanes][2],
                                  const float c[lanes][4], const std::uint32_t sfa[lanes],
                                  int byte_id_a, int thread_id_a, const std::uint32_t sfb[lanes],
                                  int byte_id_b, int thread_id_b,
                                  mma_model model = default_mma_model) {
  const bool four = scale_vec == 4 && kind == scale_kind::ue4m3;
  const bool two = scale_vec == 2 && kind == scale_kind::ue8m0;
  const auto byte_ok = [&](int id) { return four ? id == 0 : (id == 0 || id == 2); };
  if (!(four || two) || !byte_ok(byte_id_a) || !byte_ok(byte_id_b) || thread_id_a < 0 ||
      thread_id_a > 1 || thread_id_b < 0 || thread_id_b > 3)
    throw std::invalid_argument("emulation::ptx::mma_m16n8k64_mxf4nvf4: invalid scale selector");
  const int groups_per_scale = 4 / scale_vec;
  // The scales of the four 16-element groups of a row of A (column of B).
  const auto group_scales = [&](std::uint32_t word, int byte_id, double(&out)[4]) {
    for (int g = 0; g < 4; ++g)
      out[g] = scale_value(kind, word >> (8 * (byte_id + g / groups_per_scale)));
  };
  double av[16][64], bv[8][64], sav[16][4], sbv[8][4];
  for (int lane = 0; lane < lanes; ++lane)
    for (int i = 0; i < 8; ++i) {
      for (int r = 0; r < 4; ++r) {
        const coord mk = fp4_a_coord(lane, r, i);
        av[mk.row][mk.col] = e2m1_value(a[lane][r] >> (4 * i));
      }
      for (int r = 0; r < 2; ++r) {
        const coord nk = fp4_b_coord(lane, r, i);
        bv[nk.row][nk.col] = e2m1_value(b[lane][r] >> (4 * i));
      }
    }
  for (int m = 0; m < 16; ++m)
    group_scales(sfa[scale_a_lane(m, thread_id_a)], byte_id_a, sav[m]);
  for (int n = 0; n < 8; ++n)
    group_scales(sfb[scale_b_lane(n, thread_id_b)], byte_id_b, sbv[n]);
  detail::mma_outputs(d, c, [&](int m, int n, float acc) {
    return dot_add_e2m1(model, kind, av[m], bv[n], sav[m], sbv[n], acc);
  });
}

// ---------------------------------------------------------------------------------------------
// ldmatrix

namespace detail {

inline std::uint32_t load_b16(const unsigned char* p) noexcept {
  return std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8;
}

// `Count` 8×8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i.
template <int Count>
void ldmatrix(std::uint32_t d[lanes][Count], const unsigned char* shared_base,
              const std::uint32_t address[lanes], bool trans) {
  for (int lane = 0; lane < 8 * Count; ++lane)
    if (address[lane] % 16 != 0)
      throw std::invalid_argument("emulation::ptx::ldmatrix: row address not 16-byte aligned");
  const auto element = [&](int matrix, int row, int col) {
    return load_b16(shared_base + address[8 * matrix + row] + 2 * col);
  };
  for (int lane = 0; lane < lanes; ++lane)
    for (int i = 0; i < Count; ++i) {
      const int g = lane / 4, t = lane % 4;
      d[lane][i] = trans ? element(i, 2 * t, g) | element(i, 2 * t + 1, g) << 16
                         : element(i, g, 2 * t) | element(i, g, 2 * t + 1) << 16;
    }
}

} // namespace detail

/// `ldmatrix.sync.aligned.m8n8.x4.shared.b16`: `address` holds byte offsets from `shared_base`
/// (lanes 8i..8i+7: the rows of matrix i, each 16-byte aligned, else std::invalid_argument); lane
/// L's register i gets row L/4, elements 2(L%4) (low half) and 2(L%4)+1 of matrix i.
inline void ldmatrix_x4(std::uint32_t d[lanes][4], const unsigned char* shared_base,
                        const std::uint32_t address[lanes]) {
  detail::ldmatrix<4>(d, shared_base, address, false);
}
/// `ldmatrix.sync.aligned.m8n8.x2.shared.b16`: as ldmatrix_x4 for two matrices (lanes 0..15 give
/// the addresses; the others are ignored).
inline void ldmatrix_x2(std::uint32_t d[lanes][2], const unsigned char* shared_base,
                        const std::uint32_t address[lanes]) {
  detail::ldmatrix<2>(d, shared_base, address, false);
}
/// `ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16`: lane L's register i gets the elements at
/// (row 2(L%4), column L/4) (low half) and (row 2(L%4)+1, column L/4) of matrix i.
inline void ldmatrix_x4_trans(std::uint32_t d[lanes][4], const unsigned char* shared_base,
                              const std::uint32_t address[lanes]) {
  detail::ldmatrix<4>(d, shared_base, address, true);
}
/// `ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16`.
inline void ldmatrix_x2_trans(std::uint32_t d[lanes][2], const unsigned char* shared_base,
                              const std::uint32_t address[lanes]) {
  detail::ldmatrix<2>(d, shared_base, address, true);
}

// ---------------------------------------------------------------------------------------------
// shfl.sync, full mask

namespace detail {

// PTX's shfl.sync with the clamp operand c = ((32 − width) << 8) | 0x1F that CUDA's
// __shfl_sync / __shfl_xor_sync pass: segment mask 32 − width, last lane of the segment
// maxLane = (lane & segmask) | (0x1F & ~segmask); a source beyond maxLane reads the own lane.
inline std::uint32_t shfl(const std::uint32_t v[lanes], int lane, int b, int width, bool bfly) {
  if (lane < 0 || lane >= lanes || width <= 0 || width > lanes || (width & (width - 1)) != 0)
    throw std::invalid_argument("emulation::ptx::shfl_sync: bad lane or width");
  const unsigned seg_mask = static_cast<unsigned>(lanes - width), self = unsigned(lane);
  const unsigned b5 = static_cast<unsigned>(b) & 0x1Fu;
  const unsigned min_lane = self & seg_mask, max_lane = min_lane | (0x1Fu & ~seg_mask);
  const unsigned j = bfly ? self ^ b5 : min_lane | (b5 & ~seg_mask);
  return v[j <= max_lane ? j : self];
}

} // namespace detail

/// `shfl.sync.idx.b32` as __shfl_sync(0xFFFFFFFF, v, src_lane, width) for lane `lane`: the value
/// of lane src_lane % width of the lane's segment of `width` lanes.
inline std::uint32_t shfl_sync_idx(const std::uint32_t v[lanes], int lane, int src_lane,
                                   int width) {
  return detail::shfl(v, lane, src_lane, width, false);
}
/// `shfl.sync.bfly.b32` as __shfl_xor_sync(0xFFFFFFFF, v, mask, width): the value of lane
/// lane ^ mask, or the lane's own where that lies beyond its segment (earlier segments can be
/// read, as in CUDA).
inline std::uint32_t shfl_sync_xor(const std::uint32_t v[lanes], int lane, int mask, int width) {
  return detail::shfl(v, lane, mask, width, true);
}

// ---------------------------------------------------------------------------------------------
// Warpgroup MMA (sm_90a)

/// The fields of a `wgmma` shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"):
/// bits 0–13 the start address, 16–29 the leading-dimension byte offset, 32–45 the stride-dimension
/// byte offset, each in units of 16 bytes; 49–51 the base offset; 62–63 the swizzle (0 none,
/// 1 128-byte, 2 64-byte, 3 32-byte).
struct wgmma_descriptor {
  std::uint32_t start = 0, leading = 0, stride = 0; ///< bytes
  int base_offset = 0;
  int swizzle_width = 16; ///< bytes of a swizzled row: 128, 64, 32, or 16 (none)
};

inline wgmma_descriptor decode_wgmma_descriptor(std::uint64_t bits) noexcept {
  static constexpr int widths[4] = {16, 128, 64, 32};
  wgmma_descriptor d;
  d.start = static_cast<std::uint32_t>(bits & 0x3FFF) * 16;
  d.leading = static_cast<std::uint32_t>((bits >> 16) & 0x3FFF) * 16;
  d.stride = static_cast<std::uint32_t>((bits >> 32) & 0x3FFF) * 16;
  d.base_offset = static_cast<int>((bits >> 49) & 7);
  d.swizzle_width = widths[(bits >> 62) & 3];
  return d;
}

/// The shared-memory address of byte `k_byte` of row `row` of a K-major operand (PTX ISA, "Shared
/// Memory Matrix Layout", canonical layouts): rows in groups of eight, `stride` bytes apart.
/// Without swizzle a group is 8 × 16-byte core matrices, K-adjacent ones `leading` bytes apart,
/// row r at 16·r. With a swizzle of W bytes a group is eight W-byte rows (LBO unused) and the
/// 16-byte chunk of the address, bits [4, 4 + log2(W / 16)), is XORed with bits [7, …) of it.
inline std::uint32_t wgmma_kmajor_address(const wgmma_descriptor& d, int row, int k_byte) {
  const auto r = static_cast<std::uint32_t>(row), k = static_cast<std::uint32_t>(k_byte);
  if (d.swizzle_width == 16)
    return d.start + (r / 8) * d.stride + (k / 16) * d.leading + (r % 8) * 16 + k % 16;
  if (k_byte >= d.swizzle_width)
    throw std::invalid_argument("wgmma: byte " + std::to_string(k_byte) +
                                " of a row is beyond the " + std::to_string(d.swizzle_width) +
                                "-byte swizzle");
  const std::uint32_t address =
      d.start + (r / 8) * d.stride + (r % 8) * static_cast<std::uint32_t>(d.swizzle_width) + k;
  const std::uint32_t chunk_bits = static_cast<std::uint32_t>(d.swizzle_width / 16 - 1);
  return address ^ (((address >> 7) & chunk_bits) << 4);
}

namespace detail {

/// The bf16 values of a rows × 16 K-major operand in `shared` (`shared_bytes` long), read through
/// descriptor `bits`. Throws std::invalid_argument for what the emulation does not model (a
/// nonzero base offset) and std::out_of_range for an address outside the shared memory.
inline void wgmma_read_operand(double (*out)[16], int rows, std::uint64_t bits,
                               const unsigned char* shared, std::size_t shared_bytes,
                               const char* which) {
  const wgmma_descriptor d = decode_wgmma_descriptor(bits);
  if (d.base_offset != 0)
    throw std::invalid_argument(std::string("wgmma: ") + which +
                                "'s descriptor has a base offset; the emulation takes 0");
  for (int row = 0; row < rows; ++row)
    for (int k = 0; k < 16; ++k) {
      const std::uint32_t address = wgmma_kmajor_address(d, row, 2 * k);
      if (address + 2 > shared_bytes)
        throw std::out_of_range(std::string("wgmma: ") + which + " row " + std::to_string(row) +
                                ", k " + std::to_string(k) + " is at shared address " +
                                std::to_string(address) + ", beyond the " +
                                std::to_string(shared_bytes) + " bytes of shared memory");
      out[row][k] = bf16_value(static_cast<std::uint16_t>(load_b16(shared + address)));
    }
}

} // namespace detail

/// `wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16` over the 128 threads of a warpgroup,
/// both operands K-major: D[64×n] = A[64×16]·B[n×16]ᵀ + (scale_d ? D : 0). D is `d[thread][i]`,
/// n / 2 floats per thread, thread T's register i at (16·(T / 32) + g + 8·((i % 4) / 2),
/// 8·(i / 4) + 2t + i % 2) with g, t of lane T % 32. A comes from `a_registers` (`[128][4]`,
/// register r half h of thread T at (16·(T / 32), 0) + bf16_a_coord) when it is not null, else from
/// shared memory through `a_descriptor`; B from shared memory through `b_descriptor`, addresses
/// counted from `shared`. Each output is dot_add_bf16 under `model`; scale_d = 0 is modelled as an
/// accumulator of +0.
inline void wgmma_m64nNk16_bf16(int n, float* d, const std::uint32_t (*a_registers)[4],
                                std::uint64_t a_descriptor, std::uint64_t b_descriptor,
                                const unsigned char* shared, std::size_t shared_bytes, bool scale_d,
                                mma_model model = default_mma_model) {
  if (n < 8 || n > 256 || n % 8 != 0)
    throw std::invalid_argument("wgmma: N must be a multiple of 8 from 8 to 256, not " +
                                std::to_string(n));
  double av[64][16];
  static thread_local double bv[256][16];
  if (a_registers != nullptr) {
    for (int thread = 0; thread < 128; ++thread)
      for (int r = 0; r < 4; ++r)
        for (int h = 0; h < 2; ++h) {
          const coord mk = bf16_a_coord(thread % 32, r, h);
          av[16 * (thread / 32) + mk.row][mk.col] =
              bf16_value(detail::half_of(a_registers[thread][r], h));
        }
  } else {
    detail::wgmma_read_operand(av, 64, a_descriptor, shared, shared_bytes, "A");
  }
  detail::wgmma_read_operand(bv, n, b_descriptor, shared, shared_bytes, "B");
  const int per_thread = n / 2;
  for (int thread = 0; thread < 128; ++thread)
    for (int i = 0; i < per_thread; ++i) {
      const coord mn = accumulator_coord(thread % 32, i % 4);
      const int m = 16 * (thread / 32) + mn.row, col = 8 * (i / 4) + mn.col;
      float& out = d[thread * per_thread + i];
      out = dot_add_bf16(model, av[m], bv[col], scale_d ? out : 0.0f);
    }
}

} // namespace ptx
} // namespace emulation
} // namespace v0
} // namespace blockscale
