/// \file numeric/convert.hpp
/// `convert<To>(x, rounding, overflow)`: the conversion from float or double to any minifloat,
/// under every rounding mode of rounding.hpp and both overflow policies. One implementation
/// (numeric/encode.hpp) serves every format and mode, on the host and the device.
#pragma once

#include <cstddef>
#include <type_traits>

#include "../config.hpp"
#include "encode.hpp"
#include "minifloat.hpp"
#include "rounding.hpp"

namespace blockscale {
inline namespace v0 {

namespace detail {
template <class T>
struct is_minifloat : std::false_type {};
template <class Format>
struct is_minifloat<minifloat<Format>> : std::true_type {};
} // namespace detail

/// Converts `x` to the minifloat `To`, rounding with `rounding` (default nearest-even) and
/// handling values beyond the largest finite one with `overflow` (default saturate). NaN gives
/// NaN (+max for formats without NaN); negative input to an unsigned format gives its smallest
/// code. Exact: the result is the correctly rounded value of `x` itself, never of a rounded copy.
template <class To, class From, class Rounding = round_nearest_even,
          class Overflow = saturate_finite>
[[nodiscard]] BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR To
convert(From x, Rounding rounding = {}, Overflow overflow = {}) noexcept {
  static_assert(detail::is_minifloat<To>::value, "convert<To>: To must be a blockscale::minifloat");
  static_assert(std::is_same<From, float>::value || std::is_same<From, double>::value,
                "convert<To>(x): x must be float or double");
  return To::from_bits(detail::encode<typename To::format>(x, rounding, overflow));
}

/// Converts `count` values with one rounding tag and overflow policy (not for stochastic
/// rounding, which needs fresh bits per element).
template <class To, class From, class Rounding = round_nearest_even,
          class Overflow = saturate_finite>
BLOCKSCALE_HOST_DEVICE void convert_n(const From* input, To* output, std::size_t count,
                                      Rounding rounding = {}, Overflow overflow = {}) noexcept {
  for (std::size_t i = 0; i < count; ++i)
    output[i] = convert<To>(input[i], rounding, overflow);
}

} // namespace v0
} // namespace blockscale
