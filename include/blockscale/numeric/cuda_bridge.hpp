/// \file numeric/cuda_bridge.hpp
/// The one bridge between blockscale's storage types and CUDA's types of the same encoding:
/// `__nv_fp4_e2m1`, `__nv_fp8_e4m3`, `__nv_fp8_e5m2`, `__nv_fp8_e8m0`, `__nv_bfloat16` and
/// `__half`. A CUDA type takes part when its header (`cuda_fp4.h`, `cuda_fp8.h`, `cuda_bf16.h`,
/// `cuda_fp16.h`) was included before blockscale; blockscale itself includes none of them. Values
/// cross the bridge as codes: nothing is rounded.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../config.hpp"
#include "format.hpp"

namespace blockscale {
inline namespace v0 {

struct bfloat16_layout;
struct float16_layout;

namespace detail {

/// `cuda_bridge<Encoding>::type` is the CUDA type with the encoding `Encoding` (a format
/// descriptor of format.hpp, or bfloat16_layout / float16_layout), or void; `bits` and `from_bits`
/// move its code in and out.
template <class Encoding>
struct cuda_bridge {
  using type = void;
};

/// CUDA's FP4 and FP8 types keep their code in the public member `__x`.
template <class Cuda>
struct cuda_code_member_bridge {
  using type = Cuda;
  BLOCKSCALE_HOST_DEVICE static std::uint8_t bits(const Cuda& value) noexcept {
    return static_cast<std::uint8_t>(value.__x);
  }
  BLOCKSCALE_HOST_DEVICE static Cuda from_bits(std::uint8_t bits) noexcept {
    Cuda value;
    value.__x = bits;
    return value;
  }
};

/// CUDA's 16-bit types expose their code through a `_raw` companion struct.
template <class Cuda, class Raw>
struct cuda_raw_bridge {
  using type = Cuda;
  BLOCKSCALE_HOST_DEVICE static std::uint16_t bits(const Cuda& value) noexcept {
    return static_cast<Raw>(value).x;
  }
  BLOCKSCALE_HOST_DEVICE static Cuda from_bits(std::uint16_t bits) noexcept {
    Raw raw;
    raw.x = bits;
    return Cuda(raw);
  }
};

#if defined(__CUDA_FP4_TYPES_EXIST__)
template <>
struct cuda_bridge<e2m1_format> : cuda_code_member_bridge<__nv_fp4_e2m1> {};
#endif
#if defined(__CUDA_FP8_TYPES_EXIST__)
template <>
struct cuda_bridge<e4m3_format> : cuda_code_member_bridge<__nv_fp8_e4m3> {};
template <>
struct cuda_bridge<e5m2_format> : cuda_code_member_bridge<__nv_fp8_e5m2> {};
template <>
struct cuda_bridge<ue8m0_format> : cuda_code_member_bridge<__nv_fp8_e8m0> {};
#endif
#if defined(__CUDA_BF16_TYPES_EXIST__)
template <>
struct cuda_bridge<bfloat16_layout> : cuda_raw_bridge<__nv_bfloat16, __nv_bfloat16_raw> {};
#endif
#if defined(__CUDA_FP16_TYPES_EXIST__)
template <>
struct cuda_bridge<float16_layout> : cuda_raw_bridge<__half, __half_raw> {};
#endif

/// Enables a member template only for the CUDA type that shares `Encoding`.
template <class Encoding, class Cuda>
using enable_if_cuda_equivalent =
    std::enable_if_t<!std::is_void<Cuda>::value &&
                         std::is_same<Cuda, typename cuda_bridge<Encoding>::type>::value,
                     int>;

} // namespace detail
} // namespace v0
} // namespace blockscale
