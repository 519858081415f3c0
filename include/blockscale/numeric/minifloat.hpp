/// \file numeric/minifloat.hpp
/// `minifloat<Format>`: a one-byte value type for any format descriptor, and the aliases of the
/// formats this library is about (`e2m1`, `e4m3`, `e5m2`, `ue4m3`, `ue5m3`, `ue5m3_ieee`, `ue8m0`,
/// `e2m3`, `e3m2`).
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "../config.hpp"
#include "../detail/bits.hpp"
#include "cuda_bridge.hpp"
#include "encode.hpp"
#include "format.hpp"
#include "rounding.hpp"

namespace blockscale {
inline namespace v0 {

namespace detail {
/// Exact value of a code: sign * n * 2^k with n the significand as an integer.
template <class Format>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR float decode(std::uint8_t code) noexcept {
  using traits = format_traits<Format>;
  const auto magnitude = static_cast<std::uint8_t>(code & traits::magnitude_mask);
  const bool negative = (code & traits::sign_mask) != 0;
  if constexpr (traits::nonfinite == nonfinite_encoding::nan_only) {
    if (magnitude == traits::nan_code)
      return bit_cast<float>(0x7FC00000u); // quiet NaN (numeric_limits is host-only under nvcc)
  } else if constexpr (traits::nonfinite == nonfinite_encoding::ieee) {
    if (magnitude >= traits::infinity_code) {
      if (magnitude != traits::infinity_code)
        return bit_cast<float>(0x7FC00000u);
      return bit_cast<float>(negative ? 0xFF800000u : 0x7F800000u);
    }
  }
  const int field = magnitude >> traits::mantissa_bits;
  const int mantissa = magnitude & ((1 << traits::mantissa_bits) - 1);
  // Subnormals (field 0 with subnormals) lack the hidden bit and share min_exponent's quantum.
  const bool subnormal = traits::has_subnormals && field == 0;
  const int significand = subnormal ? mantissa : mantissa | (1 << traits::mantissa_bits);
  const int exponent = (subnormal ? traits::min_exponent : field - traits::bias);
  const float value = static_cast<float>(significand) * exp2i(exponent - traits::mantissa_bits);
  return negative ? -value : value;
}
} // namespace detail

/// A value of the small floating-point format `Format`, stored in one byte (the code in the low
/// `format_traits<Format>::total_bits` bits). Trivially copyable; comparisons follow IEEE 754
/// (NaN is unordered, -0 == +0).
template <class Format>
class minifloat {
public:
  using format = Format;
  using traits = format_traits<Format>;

  minifloat() = default;

  /// Rounds to nearest, ties to even, saturating at ±max (use `convert` for other modes).
  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR explicit minifloat(float x) noexcept
      : bits_(detail::encode<Format>(x, round_nearest_even{}, saturate_finite{})) {}
  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR explicit minifloat(double x) noexcept
      : bits_(detail::encode<Format>(x, round_nearest_even{}, saturate_finite{})) {}

  /// Reinterprets CUDA's type of the same encoding (`__nv_fp4_e2m1`, `__nv_fp8_e4m3`,
  /// `__nv_fp8_e5m2`, `__nv_fp8_e8m0`): available when `cuda_fp4.h` / `cuda_fp8.h` are included
  /// before blockscale. No conversion happens; the code is copied.
  template <class Cuda, detail::enable_if_cuda_equivalent<Format, Cuda> = 0>
  BLOCKSCALE_HOST_DEVICE explicit minifloat(const Cuda& value) noexcept
      : bits_(detail::cuda_bridge<Format>::bits(value)) {}
  template <class Cuda, detail::enable_if_cuda_equivalent<Format, Cuda> = 0>
  BLOCKSCALE_HOST_DEVICE explicit operator Cuda() const noexcept {
    return detail::cuda_bridge<Format>::from_bits(bits_);
  }

  /// The value with the given code; bits above `total_bits` are ignored.
  BLOCKSCALE_HOST_DEVICE static constexpr minifloat from_bits(std::uint8_t bits) noexcept {
    return minifloat(bits_tag{}, static_cast<std::uint8_t>(bits & traits::code_mask));
  }
  /// The code.
  BLOCKSCALE_HOST_DEVICE constexpr std::uint8_t bits() const noexcept { return bits_; }

  /// The exact value (every code of every format here is a float).
  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR explicit operator float() const noexcept {
    return detail::decode<Format>(bits_);
  }
  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR explicit operator double() const noexcept {
    return static_cast<double>(detail::decode<Format>(bits_));
  }

  BLOCKSCALE_HOST_DEVICE constexpr bool is_nan() const noexcept {
    const auto magnitude = bits_ & traits::magnitude_mask;
    return traits::nonfinite == nonfinite_encoding::nan_only ? magnitude == traits::nan_code
           : traits::nonfinite == nonfinite_encoding::ieee   ? magnitude > traits::infinity_code
                                                             : false;
  }
  BLOCKSCALE_HOST_DEVICE constexpr bool is_inf() const noexcept {
    return traits::has_infinity && (bits_ & traits::magnitude_mask) == traits::infinity_code;
  }
  BLOCKSCALE_HOST_DEVICE constexpr bool is_finite() const noexcept {
    return !is_nan() && !is_inf();
  }
  BLOCKSCALE_HOST_DEVICE constexpr bool signbit() const noexcept {
    return (bits_ & traits::sign_mask) != 0;
  }

  friend BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR bool
  operator==(minifloat a, minifloat b) noexcept {
    return static_cast<float>(a) == static_cast<float>(b);
  }
  friend BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR bool
  operator!=(minifloat a, minifloat b) noexcept {
    return !(a == b);
  }
  friend BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR bool operator<(minifloat a,
                                                                             minifloat b) noexcept {
    return static_cast<float>(a) < static_cast<float>(b);
  }
  friend BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR bool operator>(minifloat a,
                                                                             minifloat b) noexcept {
    return b < a;
  }
  friend BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR bool
  operator<=(minifloat a, minifloat b) noexcept {
    return static_cast<float>(a) <= static_cast<float>(b);
  }
  friend BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR bool
  operator>=(minifloat a, minifloat b) noexcept {
    return b <= a;
  }

private:
  struct bits_tag {};
  BLOCKSCALE_HOST_DEVICE constexpr minifloat(bits_tag, std::uint8_t bits) noexcept : bits_(bits) {}

  std::uint8_t bits_;
};

using e2m1 = minifloat<e2m1_format>;             ///< FP4
using e4m3 = minifloat<e4m3_format>;             ///< FP8 E4M3 (OCP "fn")
using e5m2 = minifloat<e5m2_format>;             ///< FP8 E5M2
using ue4m3 = minifloat<ue4m3_format>;           ///< NVFP4 block scale
using ue5m3 = minifloat<ue5m3_format>;           ///< UE5M3 block scale (PTX encoding)
using ue5m3_ieee = minifloat<ue5m3_ieee_format>; ///< UE5M3 with IEEE Inf/NaN
using ue8m0 = minifloat<ue8m0_format>;           ///< MX block scale
using e2m3 = minifloat<e2m3_format>;             ///< FP6 E2M3
using e3m2 = minifloat<e3m2_format>;             ///< FP6 E3M2

static_assert(sizeof(e2m1) == 1 && std::is_trivially_copyable<e2m1>::value,
              "minifloat is one trivially copyable byte");

} // namespace v0
} // namespace blockscale

namespace blockscale {
inline namespace v0 {
namespace detail {
/// floor(log10(2^exponent · significand)) for a positive value, in exact constant arithmetic.
constexpr int floor_log10(double value) noexcept {
  int n = 0;
  for (; value >= 10.0; value /= 10.0)
    ++n;
  for (; value < 1.0; value *= 10.0)
    --n;
  return n;
}
/// numeric_limits' decimal members, from a format's significant bits and its extreme values
/// (the definitions of C's FLT_DIG, FLT_DECIMAL_DIG, FLT_MIN_10_EXP and FLT_MAX_10_EXP).
struct decimal_limits {
  int digits10;       ///< floor((digits - 1) · log10 2): decimal digits that survive a round trip
  int max_digits10;   ///< ceil(1 + digits · log10 2): digits that tell every value apart
  int min_exponent10; ///< the least n with 10^n at or above the smallest normal value
  int max_exponent10; ///< the greatest n with 10^n at or below the largest finite value
};
constexpr decimal_limits make_decimal_limits(int digits, double min_normal, double max) noexcept {
  constexpr double log10_2 = 0.30102999566398119521;
  const double low = (digits - 1) * log10_2;
  const double high = 1.0 + digits * log10_2;
  const int high_floor = static_cast<int>(high);
  const int min_floor = floor_log10(min_normal);
  // ceil(log10(min_normal)): the floor, plus one unless min_normal is a power of ten (only 10^n
  // with n >= 0 can be a binary value, and those are exact doubles up to 10^22).
  double power = 1.0;
  for (int i = 0; i < min_floor; ++i)
    power *= 10.0;
  const bool power_of_ten = min_floor >= 0 && power == min_normal;
  return {static_cast<int>(low), high_floor + (high > high_floor ? 1 : 0),
          min_floor + (power_of_ten ? 0 : 1), floor_log10(max)};
}
/// The code of 2^k, which must lie within the format's range.
template <class Format>
constexpr std::uint8_t power_of_two_code(int k) noexcept {
  using traits = format_traits<Format>;
  return static_cast<std::uint8_t>(k >= traits::min_exponent
                                       ? (k + traits::bias) << traits::mantissa_bits
                                       : 1 << (k - traits::min_exponent + traits::mantissa_bits));
}
} // namespace detail
} // namespace v0
} // namespace blockscale

/// `std::numeric_limits` for every minifloat; `min()` is the smallest normal, as for float, and
/// `lowest()` of an unsigned format is its smallest value.
namespace std {
template <class Format>
class numeric_limits<blockscale::minifloat<Format>> {
  using type = blockscale::minifloat<Format>;
  using traits = blockscale::format_traits<Format>;
  static constexpr blockscale::detail::decimal_limits decimal =
      blockscale::detail::make_decimal_limits(
          traits::mantissa_bits + 1,
          static_cast<double>(blockscale::detail::decode<Format>(
              blockscale::detail::power_of_two_code<Format>(traits::min_exponent))),
          static_cast<double>(blockscale::detail::decode<Format>(traits::max_code)));

public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = traits::is_signed;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = traits::has_infinity;
  static constexpr bool has_quiet_NaN = traits::has_nan;
  static constexpr bool has_signaling_NaN = false;
  static constexpr float_denorm_style has_denorm =
      traits::has_subnormals ? denorm_present : denorm_absent;
  static constexpr bool has_denorm_loss = false;
  static constexpr float_round_style round_style = round_to_nearest;
  static constexpr bool is_iec559 = false;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = traits::mantissa_bits + 1;
  static constexpr int digits10 = decimal.digits10;
  static constexpr int max_digits10 = decimal.max_digits10;
  static constexpr int radix = 2;
  // C's convention: 2^(min_exponent - 1) is the smallest normal.
  static constexpr int min_exponent = traits::min_exponent + 1;
  static constexpr int min_exponent10 = decimal.min_exponent10;
  static constexpr int max_exponent = traits::max_exponent + 1;
  static constexpr int max_exponent10 = decimal.max_exponent10;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;

  BLOCKSCALE_HOST_DEVICE static constexpr type min() noexcept {
    return type::from_bits(blockscale::detail::power_of_two_code<Format>(traits::min_exponent));
  }
  BLOCKSCALE_HOST_DEVICE static constexpr type max() noexcept {
    return type::from_bits(traits::max_code);
  }
  BLOCKSCALE_HOST_DEVICE static constexpr type lowest() noexcept {
    return type::from_bits(traits::is_signed ? traits::max_code | traits::sign_mask : 0);
  }
  /// The gap between 1 and the next value, 2^-mantissa_bits.
  BLOCKSCALE_HOST_DEVICE static constexpr type epsilon() noexcept {
    return type::from_bits(blockscale::detail::power_of_two_code<Format>(-traits::mantissa_bits));
  }
  BLOCKSCALE_HOST_DEVICE static constexpr type round_error() noexcept {
    return type::from_bits(blockscale::detail::power_of_two_code<Format>(-1));
  }
  BLOCKSCALE_HOST_DEVICE static constexpr type infinity() noexcept {
    return type::from_bits(traits::infinity_code);
  }
  BLOCKSCALE_HOST_DEVICE static constexpr type quiet_NaN() noexcept {
    return type::from_bits(traits::nan_code);
  }
  BLOCKSCALE_HOST_DEVICE static constexpr type signaling_NaN() noexcept {
    return type::from_bits(traits::nan_code);
  }
  BLOCKSCALE_HOST_DEVICE static constexpr type denorm_min() noexcept {
    return type::from_bits(traits::has_subnormals ? 1 : 0);
  }
};
} // namespace std
