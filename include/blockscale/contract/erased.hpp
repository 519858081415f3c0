/// \file contract/erased.hpp
/// The erased matrices, quantized storage and policies that cross run-time dispatch tables (the
/// host's host/format_ops.hpp, the device's cuda/format_ops.hpp): a pointer, an element type and
/// a geometry each, turned back into typed views by `detail::with_matrix` and `detail::view_of`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "../block/matrix_view.hpp"
#include "../block/quantized_shape.hpp"
#include "../block/quantized_view.hpp"
#include "../block/tensor_scale.hpp"
#include "../config.hpp"
#include "../numeric/half.hpp"
#include "registry.hpp"

namespace blockscale {
inline namespace v0 {

/// The element types a matrix crossing the table may hold, and their names.
enum class element_type : std::uint8_t { float32, float16, bfloat16 };
inline constexpr const char* element_type_names[] = {"float32", "float16", "bfloat16"};

/// A matrix of any element type: rows × cols, unit column stride, row stride ld (elements).
/// `Void` is `const void` for an input, `void` for an output.
template <class Void>
struct basic_any_matrix {
  Void* data = nullptr;
  element_type type = element_type::float32;
  std::size_t rows = 0, cols = 0, ld = 0;
};
using any_matrix = basic_any_matrix<void>;
using any_const_matrix = basic_any_matrix<const void>;

/// A quantized matrix's storage: its shape, the element and scale bytes with their sizes, and the
/// decode scale. `Byte` is `const std::uint8_t` for an input, `std::uint8_t` for an output.
template <class Byte>
struct basic_any_quantized {
  using decode_scale_type = std::conditional_t<std::is_const<Byte>::value, const float, float>;
  quantized_shape shape;
  Byte* elements = nullptr;
  std::size_t element_bytes = 0;
  Byte* scales = nullptr;
  std::size_t scale_bytes = 0;
  decode_scale_type* decode_scale = nullptr;
};
using any_quantized = basic_any_quantized<std::uint8_t>;
using any_const_quantized = basic_any_quantized<const std::uint8_t>;

/// A tensor-scale policy of block/tensor_scale.hpp, or none (`policy` null).
struct any_policy {
  enum class kind : std::uint8_t { none, no_tensor_scale, current, periodic, delayed };
  /// The policy types of the kinds after `none`, in the enumeration's order: the one list by
  /// which the host and device tables and the bindings map kinds to types (policy_kind_of,
  /// visit_policy_kind).
  using types = detail::type_list<no_tensor_scale, current_tensor_scale, periodic_tensor_scale,
                                  delayed_tensor_scale>;
  kind type = kind::none;
  void* policy = nullptr;
};

/// The kind of tensor-scale policy type `P` (a compile error for another type).
template <class P>
constexpr any_policy::kind policy_kind_of() noexcept {
  constexpr int index = detail::index_in<P, any_policy::types>::value;
  static_assert(index < static_cast<int>(detail::count_of(any_policy::types{})),
                "policy_kind_of: not one of any_policy::types");
  return static_cast<any_policy::kind>(index + 1);
}

/// Calls f(type_tag<P>{}) with P the policy type `kind` names; std::invalid_argument for `none`
/// or a value outside the enumeration.
template <class F>
decltype(auto) visit_policy_kind(any_policy::kind kind, F&& f) {
  using k = any_policy::kind;
  switch (kind) {
  case k::no_tensor_scale:
    return f(type_tag<no_tensor_scale>{});
  case k::current:
    return f(type_tag<current_tensor_scale>{});
  case k::periodic:
    return f(type_tag<periodic_tensor_scale>{});
  case k::delayed:
    return f(type_tag<delayed_tensor_scale>{});
  case k::none:
    break;
  }
  throw std::invalid_argument("policy: kind " + std::to_string(static_cast<int>(kind)) +
                              " is not a tensor-scale policy");
}

// The switch above and the list agree.
static_assert(policy_kind_of<no_tensor_scale>() == any_policy::kind::no_tensor_scale &&
                  policy_kind_of<current_tensor_scale>() == any_policy::kind::current &&
                  policy_kind_of<periodic_tensor_scale>() == any_policy::kind::periodic &&
                  policy_kind_of<delayed_tensor_scale>() == any_policy::kind::delayed,
              "any_policy::types lists the policies in the order of any_policy::kind");

namespace detail {

/// Calls f(type_tag<T>{}) with T the element type of `type`, const when Void is.
template <class Void, class F>
decltype(auto) visit_element_type(element_type type, F&& f) {
  constexpr bool in = std::is_const<Void>::value;
  switch (type) {
  case element_type::float32:
    return f(type_tag<std::conditional_t<in, const float, float>>{});
  case element_type::float16:
    return f(type_tag<std::conditional_t<in, const float16, float16>>{});
  case element_type::bfloat16:
    return f(type_tag<std::conditional_t<in, const bfloat16, bfloat16>>{});
  }
  throw std::invalid_argument("element type " + std::to_string(static_cast<int>(type)) +
                              " is not float32, float16 or bfloat16");
}

/// Calls f(matrix_view<T>) for an erased matrix.
template <class Void, class F>
decltype(auto) with_matrix(const basic_any_matrix<Void>& m, F&& f) {
  return visit_element_type<Void>(m.type, [&](auto tag) -> decltype(auto) {
    using T = typename decltype(tag)::type;
    return f(matrix_view<T>(static_cast<T*>(m.data), m.rows, m.cols, m.ld));
  });
}

/// The checked view of erased storage.
template <class Format, class Byte>
basic_quantized_view<Format, Byte> view_of(const basic_any_quantized<Byte>& q) {
  return basic_quantized_view<Format, Byte>::make(q.shape, q.elements, q.element_bytes, q.scales,
                                                  q.scale_bytes, q.decode_scale);
}

} // namespace detail
} // namespace v0
} // namespace blockscale
