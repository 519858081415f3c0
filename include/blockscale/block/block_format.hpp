/// \file block_format.hpp
/// Block formats: an element format, a block length and a scale format. The presets are the
/// formats of the field: NVFP4 (E2M1, 16, UE4M3), MXFP4 (E2M1, 32, UE8M0), UE5M3-FP4 (E2M1, 16,
/// UE5M3) and MXFP8 (E4M3, 32, UE8M0). Any other combination works by instantiation.
#pragma once

#include <limits>

#include "../config.hpp"
#include "../numeric/convert.hpp"
#include "../numeric/minifloat.hpp"

namespace blockscale {
inline namespace v0 {

/// `BlockSize` consecutive `Element` values along the reduction dimension share one `Scale`.
template <class Element, int BlockSize, class Scale>
struct block_format {
  using element_type = Element;
  using scale_type = Scale;
  static constexpr int block_size = BlockSize;

  static_assert(detail::is_minifloat<Element>::value && detail::is_minifloat<Scale>::value,
                "block_format takes minifloat element and scale types");
  static_assert(BlockSize > 0 && BlockSize % 2 == 0 && BlockSize <= 256,
                "the block size must be even (two E2M1 per byte) and at most 256");
  static_assert(!format_traits<typename Scale::format>::is_signed,
                "block scales are unsigned formats");

  /// Element bits: 4 for FP4 (stored two per byte, element 2i in the low nibble), else 8.
  static constexpr int element_bits =
      format_traits<typename Element::format>::total_bits <= 4 ? 4 : 8;
  /// Largest finite element and scale values.
  BLOCKSCALE_HOST_DEVICE static BLOCKSCALE_BIT_CAST_CONSTEXPR float element_max() noexcept {
    return static_cast<float>(
        Element::from_bits(format_traits<typename Element::format>::max_code));
  }
  BLOCKSCALE_HOST_DEVICE static BLOCKSCALE_BIT_CAST_CONSTEXPR float scale_max() noexcept {
    return static_cast<float>(Scale::from_bits(format_traits<typename Scale::format>::max_code));
  }
};

/// NVIDIA NVFP4: E2M1 in blocks of 16 with UE4M3 scales and an FP32 tensor scale.
using nvfp4 = block_format<e2m1, 16, ue4m3>;
/// OCP MXFP4: E2M1 in blocks of 32 with power-of-two UE8M0 scales.
using mxfp4 = block_format<e2m1, 32, ue8m0>;
/// E2M1 in blocks of 16 with UE5M3 scales (arXiv 2609.02846).
using ue5m3_fp4 = block_format<e2m1, 16, ue5m3>;
/// OCP MXFP8: E4M3 in blocks of 32 with UE8M0 scales.
using mxfp8 = block_format<e4m3, 32, ue8m0>;

namespace detail {
template <class T>
struct is_block_format : std::false_type {};
template <class E, int B, class S>
struct is_block_format<block_format<E, B, S>> : std::true_type {};
} // namespace detail

} // namespace v0
} // namespace blockscale
