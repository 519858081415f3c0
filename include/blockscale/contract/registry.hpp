/// \file contract/registry.hpp
/// The closed lists of the library, each declared once with its names: the scalar formats, the
/// preset block formats (block_format.hpp holds their list), the element roundings of `convert`,
/// the run-time enumerations of `quantize_options`, the scale-rule presets and the global-scale
/// conventions. Everything that meets these lists by name derives from here: the visitors that
/// turn a name into a type, the Python bindings (`blockscale._core.registry()`), the error
/// messages that list the choices, and the tests' type lists. Host code (it throws).
///
/// Adding a scalar format: its descriptor (numeric/format.hpp), its `minifloat` alias, one entry
/// in `scalar_formats` and `scalar_format_names` below, and docs/formats.md regenerated
/// (`blockscale_example_format_tables --markdown`); the tests, the exhaustive sweeps and the
/// Python package take it from here.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "../block/block_format.hpp"
#include "../block/global_scale.hpp"
#include "../block/quantize_params.hpp"
#include "../block/quantized_shape.hpp"
#include "../block/scale_layout.hpp"
#include "../block/scale_rule.hpp"
#include "../block/tensor_scale.hpp"
#include "../config.hpp"
#include "../numeric/minifloat.hpp"
#include "../numeric/rounding.hpp"

namespace blockscale {
inline namespace v0 {

/// Names a type as a value (`typename decltype(tag)::type`): what the visitors below pass.
template <class T>
struct type_tag {
  using type = T;
};

/// Calls f(type_tag<T>{}) for each type T of a list, in order.
template <class F, class... Types>
void for_each_type(detail::type_list<Types...>, F&& f) {
  (f(type_tag<Types>{}), ...);
}

/// The scalar formats, in the order of `scalar_format_names`.
using scalar_formats =
    detail::type_list<e2m1, e4m3, e5m2, ue4m3, ue5m3, ue5m3_ieee, ue8m0, e2m3, e3m2>;
inline constexpr const char* scalar_format_names[] = {
    "e2m1", "e4m3", "e5m2", "ue4m3", "ue5m3", "ue5m3_ieee", "ue8m0", "e2m3", "e3m2"};

/// The rounding tags of `convert` that need no random bits, in the order of
/// `element_rounding_names`. `round_stochastic` ("stochastic") takes bits per value, so callers
/// that offer it handle it beside this list.
using convert_roundings = detail::type_list<round_nearest_even, round_nearest_away,
                                            round_toward_zero, round_up, round_down, round_to_odd>;
inline constexpr const char* convert_rounding_names[] = {
    "nearest_even", "nearest_away", "toward_zero", "up", "down", "to_odd"};

/// Names of the run-time enumerations, by value.
inline constexpr const char* element_rounding_names[] = {"nearest_even", "stochastic"};
inline constexpr const char* scale_rounding_names[] = {"nearest_even", "up", "down"};
inline constexpr const char* block_shape_names[] = {"rowwise", "tile"};
inline constexpr const char* scale_layout_names[] = {"row_major", "tensor_core"};
inline constexpr const char* global_scale_convention_names[] = {
    "compressed_tensors", "flashinfer", "transformer_engine", "modelopt", "torchao"};

/// The scale-rule presets of `scale_rules`, by name (`scale_rule_named` resolves them).
inline constexpr const char* scale_rule_names[] = {"nvfp4", "ocp_floor", "rceil", "ue5m3_nearest",
                                                   "ue5m3_up"};

namespace detail {
template <std::size_t N>
constexpr std::size_t count_of(const char* const (&)[N]) noexcept {
  return N;
}
template <class... Types>
constexpr std::size_t count_of(type_list<Types...>) noexcept {
  return sizeof...(Types);
}

/// The position of `name` in `names`, or -1.
template <std::size_t N>
constexpr int index_of_name(const char* const (&names)[N], std::string_view name) noexcept {
  for (std::size_t i = 0; i < N; ++i)
    if (name == names[i])
      return static_cast<int>(i);
  return -1;
}

/// "a, b or c": the choices, for an error message.
template <std::size_t N>
std::string name_choices(const char* const (&names)[N], std::size_t first = 0) {
  std::string out;
  for (std::size_t i = first; i < N; ++i) {
    if (i != first)
      out += i + 1 == N ? " or " : ", ";
    out += names[i];
  }
  return out;
}

template <std::size_t N>
[[noreturn]] void unknown_name(const char* what, std::string_view name,
                               const char* const (&names)[N], std::size_t first = 0) {
  throw std::invalid_argument("unknown " + std::string(what) + " '" + std::string(name) + "' (" +
                              name_choices(names, first) + ")");
}

/// Calls f(type_tag<T>{}) for the `index`-th type of the list (index must be in range).
template <class F, class First, class... Rest>
decltype(auto) visit_index(int index, F&& f, type_list<First, Rest...>) {
  if constexpr (sizeof...(Rest) == 0) {
    return f(type_tag<First>{});
  } else {
    if (index == 0)
      return f(type_tag<First>{});
    return visit_index(index - 1, std::forward<F>(f), type_list<Rest...>{});
  }
}

/// The value of an enumeration whose values are 0..N-1 in the order of `names`.
template <class Enum, std::size_t N>
Enum enum_named(const char* what, std::string_view name, const char* const (&names)[N]) {
  const int index = index_of_name(names, name);
  if (index < 0)
    unknown_name(what, name, names);
  return static_cast<Enum>(index);
}
} // namespace detail

static_assert(detail::count_of(scalar_formats{}) == detail::count_of(scalar_format_names),
              "scalar_formats and scalar_format_names list the formats in one order");
static_assert(detail::count_of(convert_roundings{}) == detail::count_of(convert_rounding_names),
              "convert_roundings and convert_rounding_names list the tags in one order");
static_assert(static_cast<int>(element_rounding::stochastic) == 1 &&
                  static_cast<int>(scale_rounding::down) == 2 &&
                  static_cast<int>(block_shape::tile) == 1 &&
                  static_cast<int>(scale_layout::tensor_core) == 1 &&
                  static_cast<int>(global_scale_convention::torchao) == 4,
              "the name arrays follow the enumerations' values");

/// The name of a scalar format type ("e2m1", ...); a compile error for a type not in the list.
template <class Minifloat>
constexpr const char* scalar_format_name() noexcept {
  constexpr int index = detail::index_in<Minifloat, scalar_formats>::value;
  static_assert(index < static_cast<int>(detail::count_of(scalar_format_names)),
                "scalar_format_name: not one of scalar_formats");
  return scalar_format_names[index];
}

/// The name of any scalar format: its name in the list, or for a format outside it one made from
/// its traits in the list's style ("ue6m2": unsigned, 6 exponent and 2 mantissa bits).
template <class Minifloat>
std::string scalar_format_label() {
  constexpr int index = detail::index_in<Minifloat, scalar_formats>::value;
  if constexpr (index < static_cast<int>(detail::count_of(scalar_format_names))) {
    return scalar_format_names[index];
  } else {
    using traits = format_traits<typename Minifloat::format>;
    return std::string(traits::is_signed ? "e" : "ue") + std::to_string(traits::exponent_bits) +
           "m" + std::to_string(traits::mantissa_bits);
  }
}

/// Calls f(type_tag<S>{}) for each scalar format S a block scale can take (the unsigned ones,
/// `block_format`'s requirement), in the order of `scalar_formats`.
template <class F>
void for_each_scale_format(F&& f) {
  for_each_type(scalar_formats{}, [&](auto tag) {
    if constexpr (!format_traits<typename decltype(tag)::type::format>::is_signed)
      f(tag);
  });
}

/// Calls f(type_tag<M>{}) for the scalar format named `name`; std::invalid_argument naming the
/// choices for any other name.
template <class F>
decltype(auto) visit_scalar_format(std::string_view name, F&& f) {
  const int index = detail::index_of_name(scalar_format_names, name);
  if (index < 0)
    detail::unknown_name("scalar format", name, scalar_format_names);
  return detail::visit_index(index, std::forward<F>(f), scalar_formats{});
}

/// Calls f(tag) with the rounding tag named `name` (one of `convert_rounding_names`).
template <class F>
decltype(auto) visit_convert_rounding(std::string_view name, F&& f) {
  const int index = detail::index_of_name(convert_rounding_names, name);
  if (index < 0)
    detail::unknown_name("rounding", name, convert_rounding_names);
  return detail::visit_index(
      index, [&](auto tag) -> decltype(auto) { return f(typename decltype(tag)::type{}); },
      convert_roundings{});
}

/// The preset block format named `name` ("nvfp4", "mxfp4", "ue5m3_fp4", "mxfp8"); not
/// "high_precision". std::invalid_argument naming the choices otherwise.
inline block_format_id block_format_named(std::string_view name) {
  const int index = detail::index_of_name(preset_names, name);
  if (index < 1)
    detail::unknown_name("block format", name, preset_names, 1);
  return static_cast<block_format_id>(index);
}

/// Calls f(block_format_tag<F>{}) for the preset block format named `name`.
template <class F>
decltype(auto) visit_preset_named(std::string_view name, F&& f) {
  const int index = static_cast<int>(block_format_named(name)) - 1;
  return detail::visit_index(
      index,
      [&](auto tag) -> decltype(auto) {
        return f(block_format_tag<typename decltype(tag)::type>{});
      },
      preset_formats{});
}

/// The run-time enumerations by name.
inline element_rounding element_rounding_named(std::string_view name) {
  return detail::enum_named<element_rounding>("rounding", name, element_rounding_names);
}
inline scale_rounding scale_rounding_named(std::string_view name) {
  return detail::enum_named<scale_rounding>("scale rounding", name, scale_rounding_names);
}
inline block_shape block_shape_named(std::string_view name) {
  return detail::enum_named<block_shape>("block shape", name, block_shape_names);
}
inline scale_layout scale_layout_named(std::string_view name) {
  return detail::enum_named<scale_layout>("scale layout", name, scale_layout_names);
}
inline global_scale_convention global_scale_convention_named(std::string_view name) {
  return detail::enum_named<global_scale_convention>("convention", name,
                                                     global_scale_convention_names);
}
/// The name of a convention ("compressed_tensors", ...).
constexpr const char* to_string(global_scale_convention c) noexcept {
  const auto index = static_cast<std::size_t>(c);
  return index < detail::count_of(global_scale_convention_names)
             ? global_scale_convention_names[index]
             : "unknown";
}

/// The scale-rule preset named `name`, resolved for `BlockFormat`'s elements: "ocp_floor" targets
/// 2^emax of the element format and "rceil" its largest value (4 and 6 for E2M1, 256 and 448 for
/// E4M3); the others are the `scale_rules` functions of the same name.
template <class BlockFormat>
scale_rule scale_rule_named(std::string_view name) {
  using element_traits = format_traits<typename BlockFormat::element_type::format>;
  switch (detail::index_of_name(scale_rule_names, name)) {
  case 0:
    return scale_rules::nvfp4();
  case 1:
    return scale_rules::ocp_floor(detail::exp2i(element_traits::max_exponent));
  case 2:
    return scale_rules::rceil(BlockFormat::element_max());
  case 3:
    return scale_rules::ue5m3_nearest();
  case 4:
    return scale_rules::ue5m3_up();
  default:
    detail::unknown_name("scale rule", name, scale_rule_names);
  }
}

/// Throws std::invalid_argument naming `name` unless 0 <= binades <= max_headroom_binades<F>():
/// the check a run-time headroom or margin passes before a policy's `make` (the run-time policy of
/// training/, the Python policies).
template <class BlockFormat>
void check_headroom_binades(int binades, const char* name) {
  if (binades < 0 || binades > max_headroom_binades<BlockFormat>())
    throw std::invalid_argument(std::string(name) + " must be between 0 and " +
                                std::to_string(max_headroom_binades<BlockFormat>()) +
                                " binades for this block format, not " + std::to_string(binades));
}

} // namespace v0
} // namespace blockscale
