/// \file numeric/hardware_convert.hpp
/// The switch between the library's own E2M1 encoders and the GPUs' conversion instructions, and
/// the two-element nearest-even helper that can use `cvt.rn.satfinite.e2m1x2.f32`.
///
/// A helper here (and in numeric/rounding_ptx.hpp) has up to three forms: `portable::` (the
/// library's encoder, numeric/encode.hpp; the reference, on the host and on every device),
/// `hardware::` (inline PTX, declared only in device code compiled for an architecture that has
/// the instruction) and the unqualified one, which is the portable body unless
/// BLOCKSCALE_CUDA_HARDWARE_CONVERT is 1 and the instruction exists. tests/unit/
/// test_hardware_convert.cu compares `hardware::` with `portable::` over all 2^32 floats.
///
/// Source: PTX ISA, "Data Movement and Conversion Instructions: cvt" (section 9.7.9.21 in the
/// edition with the PTX ISA 9.1 notes; the number moves between editions), read for this file.
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "convert.hpp"
#include "minifloat.hpp"
#include "packed.hpp"

/// 1: device code uses the conversion instructions (`hardware::` bodies) where the architecture
/// has them; 0 (the default): the portable bodies everywhere. The default stays 0 until a device
/// run of tests/unit/test_hardware_convert.cu has shown the instruction bit-identical to the
/// portable body; define it (to 0 or 1) before including blockscale to choose.
#ifndef BLOCKSCALE_CUDA_HARDWARE_CONVERT
#define BLOCKSCALE_CUDA_HARDWARE_CONVERT 0
#endif

/// 1 in device code for an architecture with `cvt.rn.satfinite.e2m1x2.f32`, else 0. The ISA's
/// Target ISA Notes list sm_100a, sm_101a (renamed sm_110a), sm_120a and the family-specific
/// sm_100f, sm_110f, sm_120f "or higher in the same family" (sm_103, sm_121); ptxas 13.0 accepts
/// it for sm_100a/f, sm_103a/f, sm_110a/f, sm_120a/f and sm_121a/f and rejects it for sm_90a,
/// sm_100 and sm_120 (1010 is sm_101's family, from before the rename). The test is on the
/// family-specific macros, so the generic compute_100 / compute_120 pass that plain
/// `-arch=sm_100a` or `-arch=sm_120a` also runs gets 0. nvcc 13.0 defines
/// `__CUDA_ARCH_FAMILY_SPECIFIC__` for `a` and `f` targets, `__CUDA_ARCH_SPECIFIC__` and
/// `__CUDA_ARCH_FEAT_SM<nnn>_ALL` for `a` targets only; the FEAT macros are tested as well, for a
/// toolkit that has them without the family macro.
#if defined(__CUDA_ARCH__) &&                                                                      \
    ((defined(__CUDA_ARCH_FAMILY_SPECIFIC__) &&                                                    \
      (__CUDA_ARCH_FAMILY_SPECIFIC__ == 1000 || __CUDA_ARCH_FAMILY_SPECIFIC__ == 1010 ||           \
       __CUDA_ARCH_FAMILY_SPECIFIC__ == 1030 || __CUDA_ARCH_FAMILY_SPECIFIC__ == 1100 ||           \
       __CUDA_ARCH_FAMILY_SPECIFIC__ == 1200 || __CUDA_ARCH_FAMILY_SPECIFIC__ == 1210)) ||         \
     defined(__CUDA_ARCH_FEAT_SM100_ALL) || defined(__CUDA_ARCH_FEAT_SM101_ALL) ||                 \
     defined(__CUDA_ARCH_FEAT_SM103_ALL) || defined(__CUDA_ARCH_FEAT_SM110_ALL) ||                 \
     defined(__CUDA_ARCH_FEAT_SM120_ALL) || defined(__CUDA_ARCH_FEAT_SM121_ALL))
#define BLOCKSCALE_PTX_HAS_CVT_E2M1X2 1
#else
#define BLOCKSCALE_PTX_HAS_CVT_E2M1X2 0
#endif

/// 1 in device code for an architecture with `cvt.rs` (stochastic rounding) and its
/// `.e2m1x4.f32` form, else 0. The ISA lists sm_100a and sm_103a only, with no family-specific
/// target; ptxas 13.0 agrees ("Feature '.rs' not supported" on sm_100f, sm_103f, sm_110a, sm_120a,
/// sm_121a). Arch-specific macros only, so the generic pass of `-arch=sm_100a` gets 0.
#if defined(__CUDA_ARCH__) &&                                                                      \
    ((defined(__CUDA_ARCH_SPECIFIC__) &&                                                           \
      (__CUDA_ARCH_SPECIFIC__ == 1000 || __CUDA_ARCH_SPECIFIC__ == 1030)) ||                       \
     defined(__CUDA_ARCH_FEAT_SM100_ALL) || defined(__CUDA_ARCH_FEAT_SM103_ALL))
#define BLOCKSCALE_PTX_HAS_CVT_RS_E2M1X4 1
#else
#define BLOCKSCALE_PTX_HAS_CVT_RS_E2M1X4 0
#endif

namespace blockscale {
inline namespace v0 {

/// The portable bodies of the hardware-convert helpers: the library's encoder.
namespace portable {

/// Two floats rounded to E2M1 (nearest, ties to even, saturating: `convert<e2m1>`, which is
/// detail::e2m1_nearest_even) and packed, `x0` in the low nibble, `x1` in the high one.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE BLOCKSCALE_BIT_CAST_CONSTEXPR std::uint8_t
encode_e2m1x2_nearest_even(float x0, float x1) noexcept {
  return pack_nibble_pair(convert<e2m1>(x0).bits(), convert<e2m1>(x1).bits());
}

} // namespace portable

/// The inline-PTX bodies: each declared only where its instruction exists (device code, and the
/// BLOCKSCALE_PTX_HAS_* macro above is 1), with the portable body's signature and contract.
namespace hardware {

#if BLOCKSCALE_PTX_HAS_CVT_E2M1X2
/// `cvt.rn.satfinite.e2m1x2.f32 d, a, b`, which stores cvt(a) in d[7:4] and cvt(b) in d[3:0]
/// (ISA, Semantics), called with a = x1, b = x0 so that x0 lands in the low nibble. Where the
/// ISA states the result it agrees with the portable body: `.rn` is nearest, ties to even;
/// `.satfinite` gives sign-preserved MAX_NORM (±6) when |input| exceeds MAX_NORM (±Inf included),
/// and turns NaN into positive MAX_NORM, +6 (code 0x7), for E2M1 whatever the NaN's sign (the
/// portable body gives 0x7 too). The ISA says nothing of the sign of a zero result (−0 input, or
/// negative input that rounds to 0): the portable body keeps it (code 0x8), as CUDA's
/// `__nv_cvt_float_to_fp4` does; whether the instruction does is what the device test finds out.
/// Float subnormal input is not flushed (no `.ftz`; the ISA's default keeps subnormals) and rounds
/// to ±0 either way.
__device__ BLOCKSCALE_FORCEINLINE std::uint8_t encode_e2m1x2_nearest_even(float x0,
                                                                          float x1) noexcept {
  std::uint32_t d;
  asm("{\n\t"
      ".reg .b8 d8;\n\t"
      "cvt.rn.satfinite.e2m1x2.f32 d8, %2, %1;\n\t"
      "cvt.u32.u8 %0, d8;\n\t"
      "}"
      : "=r"(d)
      : "f"(x0), "f"(x1));
  return static_cast<std::uint8_t>(d);
}
#endif

} // namespace hardware

/// Two floats rounded to E2M1 (nearest, ties to even, saturating) and packed into one byte, `x0`
/// in the low nibble (the storage order of numeric/packed.hpp). The portable body, unless
/// BLOCKSCALE_CUDA_HARDWARE_CONVERT is 1 in device code for an architecture with
/// `cvt.rn.satfinite.e2m1x2.f32` (see `hardware::encode_e2m1x2_nearest_even` for what the ISA
/// says of the instruction's special cases).
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE BLOCKSCALE_BIT_CAST_CONSTEXPR std::uint8_t
encode_e2m1x2_nearest_even(float x0, float x1) noexcept {
#if BLOCKSCALE_CUDA_HARDWARE_CONVERT && BLOCKSCALE_PTX_HAS_CVT_E2M1X2
  return hardware::encode_e2m1x2_nearest_even(x0, x1);
#else
  return portable::encode_e2m1x2_nearest_even(x0, x1);
#endif
}

} // namespace v0
} // namespace blockscale
