/// \file block/block_format.hpp
/// Block formats: an element format, a block length and a scale format. The presets are the
/// formats of the field: NVFP4 (E2M1, 16, UE4M3), MXFP4 (E2M1, 32, UE8M0), UE5M3-FP4 (E2M1, 16,
/// UE5M3) and MXFP8 (E4M3, 32, UE8M0). Any other combination works by instantiation. The presets
/// are one closed list (`preset_formats`), from which their run-time ids, names and
/// `visit_block_format` are derived.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

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
  /// Largest finite element value.
  BLOCKSCALE_HOST_DEVICE static BLOCKSCALE_BIT_CAST_CONSTEXPR float element_max() noexcept {
    return static_cast<float>(
        Element::from_bits(format_traits<typename Element::format>::max_code));
  }
  /// Largest finite scale value.
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

template <class... Types>
struct type_list {};

/// The position of `T` in `type_list<Types...>` (the list's length if absent).
template <class T, class List>
struct index_in;
template <class T>
struct index_in<T, type_list<>> : std::integral_constant<int, 0> {};
template <class T, class... Rest>
struct index_in<T, type_list<T, Rest...>> : std::integral_constant<int, 0> {};
template <class T, class First, class... Rest>
struct index_in<T, type_list<First, Rest...>>
    : std::integral_constant<int, 1 + index_in<T, type_list<Rest...>>::value> {};
} // namespace detail

/// The preset block formats, in the order of their ids. Adding a preset means adding it here, to
/// `block_format_id` and to `preset_names` (static_asserts below check the three agree).
using preset_formats = detail::type_list<nvfp4, mxfp4, ue5m3_fp4, mxfp8>;

/// The presets as run-time values (a recipe, a command line, the Python bindings), and
/// `high_precision` for "not quantized".
enum class block_format_id { high_precision, nvfp4, mxfp4, ue5m3_fp4, mxfp8 };

/// Names by id: "high_precision", "nvfp4", "mxfp4", "ue5m3_fp4", "mxfp8".
inline constexpr const char* preset_names[] = {"high_precision", "nvfp4", "mxfp4", "ue5m3_fp4",
                                               "mxfp8"};

/// The id of a preset (compile error for any other block format).
template <class BlockFormat>
constexpr block_format_id preset_id() noexcept {
  constexpr int index = detail::index_in<BlockFormat, preset_formats>::value;
  static_assert(index < static_cast<int>(sizeof(preset_names) / sizeof(preset_names[0])) - 1,
                "preset_id: not one of preset_formats");
  return static_cast<block_format_id>(index + 1);
}

static_assert(
    preset_id<nvfp4>() == block_format_id::nvfp4 && preset_id<mxfp4>() == block_format_id::mxfp4 &&
        preset_id<ue5m3_fp4>() == block_format_id::ue5m3_fp4 &&
        preset_id<mxfp8>() == block_format_id::mxfp8,
    "preset_formats, block_format_id and preset_names must list the presets in one order");

/// The name of a block format id ("nvfp4", ...); "unknown" for a value outside the enumeration.
constexpr const char* to_string(block_format_id id) noexcept {
  const auto index = static_cast<std::size_t>(id);
  return index < sizeof(preset_names) / sizeof(preset_names[0]) ? preset_names[index] : "unknown";
}

/// Names a block format type as a value (`typename decltype(tag)::type`).
template <class BlockFormat>
struct block_format_tag {
  using type = BlockFormat;
};
/// Stands for "not quantized" in visit_block_format.
struct high_precision_tag {};

namespace detail {
template <class F, class First, class... Rest>
decltype(auto) visit_preset(block_format_id id, F&& f, type_list<First, Rest...>) {
  if constexpr (sizeof...(Rest) == 0) {
    if (id == preset_id<First>())
      return f(block_format_tag<First>{});
    return f(high_precision_tag{});
  } else {
    if (id == preset_id<First>())
      return f(block_format_tag<First>{});
    return visit_preset(id, std::forward<F>(f), type_list<Rest...>{});
  }
}
} // namespace detail

/// Calls `f(block_format_tag<F>{})` with the preset F that `id` names, or `f(high_precision_tag{})`
/// for `high_precision` (and any value outside the enumeration): the one place where run-time
/// format names meet the types. Every call of `f` must return the same type.
template <class F>
decltype(auto) visit_block_format(block_format_id id, F&& f) {
  return detail::visit_preset(id, std::forward<F>(f), preset_formats{});
}

} // namespace v0
} // namespace blockscale
