/// \file numeric/rounding_ptx.hpp
/// PTX's stochastic rounding to E2M1, `cvt.rs.satfinite.e2m1x4.f32 d, {a, b, e, f}, rbits`
/// (sm_100a and sm_103a only), emulated: the rounding tag `round_stochastic_ptx` (one element with
/// the 8 random bits the instruction gives it, through the one rounding routine of
/// numeric/encode.hpp) and `encode_e2m1x4_stochastic_ptx` (four floats and one 32-bit word, as the
/// instruction converts them), which has an inline-PTX body under BLOCKSCALE_CUDA_HARDWARE_CONVERT
/// (numeric/hardware_convert.hpp). A header of its own rather than part of rounding.hpp because
/// the four-element helper needs `convert`, which includes rounding.hpp.
///
/// What the PTX ISA says ("Data Movement and Conversion Instructions: cvt", section 9.7.9.21 in the
/// edition with the PTX ISA 9.1 notes; the number moves between editions):
/// - `.rs`: "Operation's result is rounded in the direction toward zero or away from zero based on
///   the carry out of the integer addition of the supplied random bits (rbits) to the truncated
///   off (discarded) bits of mantissa from the input."
/// - `.e2m1x4`: "two 16-bit values are provided from rbits where lower 8-bits from both 16-bits
///   half of rbits are used for operands e, f and upper 8-bits from both 16-bits half of rbits
///   are used for operands a, b": 8 random bits per element.
/// - Semantics: d[15:12] = convert(a), d[11:8] = convert(b), d[7:4] = convert(e),
///   d[3:0] = convert(f); d is .b16.
/// - `.satfinite`, mandatory for this form: NaN results become positive MAX_NORM (+6, code 0x7);
///   an input whose absolute value exceeds MAX_NORM gives sign-preserved MAX_NORM (±6, ±Inf
///   included). For E2M1 it makes no difference whether that is judged before or after rounding.
/// - No `.ftz`: float subnormal input is kept (the ISA's default since sm_20).
///
/// What the text leaves open, and what this file assumes. tests/unit/test_hardware_convert.cu
/// checks all of it against the instruction over all 2^32 floats and probes the bit layout, but
/// has not yet run on an sm_100a device: until it has, these are assumptions.
/// 1. The order within each pair. The text gives a and b the upper bytes of the two halves,
///    rbits[31:24] and rbits[15:8], and e and f the lower ones, rbits[23:16] and rbits[7:0], and
///    leaves the rest to Figure 40, an image with no text. Assumed, as the text says for .bf16x2
///    (upper half to a, lower half to b): a = rbits[31:24], b = rbits[15:8], e = rbits[23:16],
///    f = rbits[7:0], bit 7 of each byte its most significant random bit. Evidence for the
///    grouping, not for the order: ptxas 13.0 compiles the instruction for sm_100a into two
///    identical `F2FP.SATFINITE.E2M1.F32.PACK_AB_MERGE_C.RS`, the first converting (a, b) with
///    rbits as its merge operand, the second (e, f) with the first's result, which fits a
///    shift-and-merge that moves bytes [23:16] and [7:0] to where [31:24] and [15:8] were
///    (nvcc 13.0's output, read with nvdisasm). A warning against trusting the order: a public
///    note on the `.e4m3x4` form (flashinfer's mamba conversion header) reports from a hardware
///    run that its a and e operands take their random byte bit-reversed; not checked here, and a
///    different form, but the device test's probe would show the same for `.e2m1x4`.
/// 2. Where 8 random bits stand against the 22 or more discarded bits; the text gives no
///    alignment. Assumed: under the first 8 discarded bits, in units of the result's quantum
///    (0.5 below 1, E2M1's subnormal step), the bits below them never carrying.
/// 3. The sign of a zero result: not stated. Assumed kept (−0 and negative input that rounds to
///    zero give code 0x8), as `convert` does.
///
/// The rule, then, for finite x and the element's random byte r: with lo < |x| < hi the
/// neighbours of |x| among the E2M1 values continued past 6 (docs/conversion.md) and
/// D = floor(256 · (|x| − lo) / (hi − lo)), the first 8 discarded bits, the magnitude is hi iff
/// D + r >= 256, else lo, then saturated to 6; x's sign is kept; an |x| in E2M1 is exact. It rounds
/// away with probability D / 256: the discarded fraction truncated to 8 bits, so an inexact value
/// less than (hi − lo) / 256 above lo never rounds away, and the mean is biased toward zero by
/// less than 2^-8 of a unit (`round_stochastic`, with 32 bits, by less than 2^-32).
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "convert.hpp"
#include "hardware_convert.hpp"
#include "minifloat.hpp"
#include "rounding.hpp"

namespace blockscale {
inline namespace v0 {

/// Stochastic rounding as PTX's `cvt.rs` rounds to E2M1 (see the file comment): away from zero
/// iff the first 8 discarded bits plus the element's 8 random bits carry out of 8 bits. The same
/// decisions as `round_stochastic{std::uint32_t{bits} << 24}`; a tag of its own so that code says
/// which rule it reproduces. Meant for E2M1: on another format it applies the same rule, which
/// says nothing about `cvt.rs`'s forms for that format.
struct round_stochastic_ptx {
  std::uint8_t bits; ///< the element's 8 random bits (`cvt_rs_e2m1x4_random_bits`)

  BLOCKSCALE_HOST_DEVICE constexpr bool rounds_away(discarded_bits d) const noexcept {
    return (d.fraction >> 24) + std::uint32_t{bits} >= 256u;
  }
  BLOCKSCALE_HOST_DEVICE static constexpr bool overflows_to_nonfinite(bool) noexcept {
    return true;
  }
};

/// The 8 random bits that `cvt.rs.satfinite.e2m1x4.f32 d, {a, b, e, f}, rbits` gives operand
/// `operand` (0, 1, 2, 3 for a, b, e, f): a = rbits[31:24], b = rbits[15:8], e = rbits[23:16],
/// f = rbits[7:0]. The one statement of that layout (assumption 1 of the file comment).
BLOCKSCALE_HOST_DEVICE constexpr std::uint8_t cvt_rs_e2m1x4_random_bits(std::uint32_t rbits,
                                                                        int operand) noexcept {
  const int shift = ((operand & 1) != 0 ? 8 : 24) - ((operand & 2) != 0 ? 8 : 0);
  return static_cast<std::uint8_t>(rbits >> shift);
}

namespace portable {

/// Four floats rounded to E2M1 by `round_stochastic_ptx`, each with its byte of `rbits`, packed
/// as the instruction packs them: `a` in bits [15:12], `b` [11:8], `e` [7:4], `f` [3:0].
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE BLOCKSCALE_BIT_CAST_CONSTEXPR std::uint16_t
encode_e2m1x4_stochastic_ptx(float a, float b, float e, float f, std::uint32_t rbits) noexcept {
  const std::uint32_t ca =
      convert<e2m1>(a, round_stochastic_ptx{cvt_rs_e2m1x4_random_bits(rbits, 0)}).bits();
  const std::uint32_t cb =
      convert<e2m1>(b, round_stochastic_ptx{cvt_rs_e2m1x4_random_bits(rbits, 1)}).bits();
  const std::uint32_t ce =
      convert<e2m1>(e, round_stochastic_ptx{cvt_rs_e2m1x4_random_bits(rbits, 2)}).bits();
  const std::uint32_t cf =
      convert<e2m1>(f, round_stochastic_ptx{cvt_rs_e2m1x4_random_bits(rbits, 3)}).bits();
  return static_cast<std::uint16_t>((ca << 12) | (cb << 8) | (ce << 4) | cf);
}

} // namespace portable

namespace hardware {

#if BLOCKSCALE_PTX_HAS_CVT_RS_E2M1X4
/// `cvt.rs.satfinite.e2m1x4.f32 d, {a, b, e, f}, rbits` itself: the contract of
/// `portable::encode_e2m1x4_stochastic_ptx`, if the assumptions of the file comment hold.
__device__ BLOCKSCALE_FORCEINLINE std::uint16_t
encode_e2m1x4_stochastic_ptx(float a, float b, float e, float f, std::uint32_t rbits) noexcept {
  std::uint16_t d;
  asm("cvt.rs.satfinite.e2m1x4.f32 %0, {%1, %2, %3, %4}, %5;"
      : "=h"(d)
      : "f"(a), "f"(b), "f"(e), "f"(f), "r"(rbits));
  return d;
}
#endif

} // namespace hardware

/// Four floats and one 32-bit word of random bits converted as
/// `cvt.rs.satfinite.e2m1x4.f32 d, {a, b, e, f}, rbits` converts them, returning d: `a` in bits
/// [15:12], `b` [11:8], `e` [7:4], `f` [3:0], the instruction's order, the reverse of
/// numeric/packed.hpp's. For storage order (element i in bits [4i, 4i+4)) pass (x3, x2, x1, x0):
/// x0 then takes rbits[7:0], x1 rbits[23:16], x2 rbits[15:8], x3 rbits[31:24]. The portable body,
/// unless BLOCKSCALE_CUDA_HARDWARE_CONVERT is 1 in device code for sm_100a or sm_103a.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE BLOCKSCALE_BIT_CAST_CONSTEXPR std::uint16_t
encode_e2m1x4_stochastic_ptx(float a, float b, float e, float f, std::uint32_t rbits) noexcept {
#if BLOCKSCALE_CUDA_HARDWARE_CONVERT && BLOCKSCALE_PTX_HAS_CVT_RS_E2M1X4
  return hardware::encode_e2m1x4_stochastic_ptx(a, b, e, f, rbits);
#else
  return portable::encode_e2m1x4_stochastic_ptx(a, b, e, f, rbits);
#endif
}

} // namespace v0
} // namespace blockscale
