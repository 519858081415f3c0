/// \file numeric/format.hpp
/// Format descriptors: the bit layout of each small floating-point encoding, and the properties
/// derived from it. Sources: OCP Microscaling Formats (MX) v1.0, OCP 8-bit Floating Point (OFP8)
/// v1.0, PTX ISA (`ue5m3`, `ue8m0`); see docs/formats.md for the generated value tables.
#pragma once

#include <cstdint>

#include "../config.hpp"

namespace blockscale {
inline namespace v0 {

/// How a format spends its codes on non-finite values.
enum class nonfinite_encoding {
  none,     ///< every code is a finite number (E2M1, FP6)
  nan_only, ///< the code with all exponent and mantissa bits set is NaN (either sign); no Inf
  ieee,     ///< all-ones exponent: mantissa 0 is Inf, anything else NaN (E5M2)
};

/// The name of an encoding, as docs/formats.md and the Python package give it: "none",
/// "nan_only", "inf_and_nan" (ieee).
BLOCKSCALE_HOST_DEVICE constexpr const char* to_string(nonfinite_encoding e) noexcept {
  return e == nonfinite_encoding::none       ? "none"
         : e == nonfinite_encoding::nan_only ? "nan_only"
         : e == nonfinite_encoding::ieee     ? "inf_and_nan"
                                             : "unknown";
}

// Descriptors. A descriptor names the fields; `format_traits` derives everything else. A user can
// write their own descriptor with the same six members and get a working `minifloat`.

/// FP4 E2M1: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives (OCP MX v1.0).
struct e2m1_format {
  static constexpr int exponent_bits = 2;
  static constexpr int mantissa_bits = 1;
  static constexpr int bias = 1;
  static constexpr bool is_signed = true;
  static constexpr bool has_subnormals = true;
  static constexpr nonfinite_encoding nonfinite = nonfinite_encoding::none;
};

/// FP8 E4M3 as OCP "E4M3FN": max 448, NaN at S.1111.111, no Inf.
struct e4m3_format {
  static constexpr int exponent_bits = 4;
  static constexpr int mantissa_bits = 3;
  static constexpr int bias = 7;
  static constexpr bool is_signed = true;
  static constexpr bool has_subnormals = true;
  static constexpr nonfinite_encoding nonfinite = nonfinite_encoding::nan_only;
};

/// FP8 E5M2 with IEEE Inf and NaN: max 57344.
struct e5m2_format {
  static constexpr int exponent_bits = 5;
  static constexpr int mantissa_bits = 2;
  static constexpr int bias = 15;
  static constexpr bool is_signed = true;
  static constexpr bool has_subnormals = true;
  static constexpr nonfinite_encoding nonfinite = nonfinite_encoding::ieee;
};

/// Unsigned E4M3, the NVFP4 block scale: the positive half of E4M3 in 7 bits (max 448, NaN 0x7F).
struct ue4m3_format {
  static constexpr int exponent_bits = 4;
  static constexpr int mantissa_bits = 3;
  static constexpr int bias = 7;
  static constexpr bool is_signed = false;
  static constexpr bool has_subnormals = true;
  static constexpr nonfinite_encoding nonfinite = nonfinite_encoding::nan_only;
};

/// Unsigned E5M3 as in PTX: max 0xFE = 114688, NaN 0xFF only, no Inf.
struct ue5m3_format {
  static constexpr int exponent_bits = 5;
  static constexpr int mantissa_bits = 3;
  static constexpr int bias = 15;
  static constexpr bool is_signed = false;
  static constexpr bool has_subnormals = true;
  static constexpr nonfinite_encoding nonfinite = nonfinite_encoding::nan_only;
};

/// Unsigned E5M3 with IEEE specials: Inf 0xF8, NaN 0xF9..0xFF, max 0xF7 = 61440.
struct ue5m3_ieee_format {
  static constexpr int exponent_bits = 5;
  static constexpr int mantissa_bits = 3;
  static constexpr int bias = 15;
  static constexpr bool is_signed = false;
  static constexpr bool has_subnormals = true;
  static constexpr nonfinite_encoding nonfinite = nonfinite_encoding::ieee;
};

/// Unsigned E8M0, the MX block scale: powers of two 2^-127..2^127, NaN 0xFF, no zero.
struct ue8m0_format {
  static constexpr int exponent_bits = 8;
  static constexpr int mantissa_bits = 0;
  static constexpr int bias = 127;
  static constexpr bool is_signed = false;
  static constexpr bool has_subnormals = false; ///< code 0 is 2^-127, so there is no zero
  static constexpr nonfinite_encoding nonfinite = nonfinite_encoding::nan_only;
};

/// FP6 E2M3 (OCP MX v1.0): max 7.5, no specials.
struct e2m3_format {
  static constexpr int exponent_bits = 2;
  static constexpr int mantissa_bits = 3;
  static constexpr int bias = 1;
  static constexpr bool is_signed = true;
  static constexpr bool has_subnormals = true;
  static constexpr nonfinite_encoding nonfinite = nonfinite_encoding::none;
};

/// FP6 E3M2 (OCP MX v1.0): max 28, no specials.
struct e3m2_format {
  static constexpr int exponent_bits = 3;
  static constexpr int mantissa_bits = 2;
  static constexpr int bias = 3;
  static constexpr bool is_signed = true;
  static constexpr bool has_subnormals = true;
  static constexpr nonfinite_encoding nonfinite = nonfinite_encoding::none;
};

/// Everything that follows from a descriptor. Codes are `std::uint8_t` holding `total_bits` bits:
/// the sign (if any) on top, then the exponent, then the mantissa. A format without subnormals
/// reads exponent field 0 as a normal binade and so has no zero (UE8M0).
template <class Format>
struct format_traits {
  static constexpr int exponent_bits = Format::exponent_bits;
  static constexpr int mantissa_bits = Format::mantissa_bits;
  static constexpr int bias = Format::bias;
  static constexpr bool is_signed = Format::is_signed;
  static constexpr bool has_subnormals = Format::has_subnormals;
  static constexpr nonfinite_encoding nonfinite = Format::nonfinite;

  static_assert(exponent_bits >= 1, "a format needs at least one exponent bit");
  static_assert(mantissa_bits >= 0, "mantissa_bits cannot be negative");
  static_assert((is_signed ? 1 : 0) + exponent_bits + mantissa_bits <= 8,
                "blockscale formats fit in one byte");
  static_assert(nonfinite != nonfinite_encoding::ieee || exponent_bits >= 2,
                "an IEEE-style format needs a spare exponent field for Inf and NaN");

  static constexpr int magnitude_bits = exponent_bits + mantissa_bits;
  static constexpr int total_bits = (is_signed ? 1 : 0) + magnitude_bits;
  static constexpr int code_count = 1 << total_bits;
  static constexpr std::uint8_t magnitude_mask =
      static_cast<std::uint8_t>((1u << magnitude_bits) - 1);
  static constexpr std::uint8_t sign_mask =
      is_signed ? static_cast<std::uint8_t>(1u << magnitude_bits) : std::uint8_t{0};
  static constexpr std::uint8_t code_mask = static_cast<std::uint8_t>((1u << total_bits) - 1);
  static constexpr int exponent_field_max = (1 << exponent_bits) - 1;

  static constexpr bool has_nan = nonfinite != nonfinite_encoding::none;
  static constexpr bool has_infinity = nonfinite == nonfinite_encoding::ieee;
  static constexpr bool has_zero = has_subnormals;

  /// Largest finite magnitude code.
  static constexpr std::uint8_t max_code =
      nonfinite == nonfinite_encoding::none ? magnitude_mask
      : nonfinite == nonfinite_encoding::nan_only
          ? static_cast<std::uint8_t>(magnitude_mask - 1)
          : static_cast<std::uint8_t>((exponent_field_max << mantissa_bits) - 1);
  /// The canonical NaN (positive; all magnitude bits set). Meaningless when `!has_nan`.
  static constexpr std::uint8_t nan_code = magnitude_mask;
  /// +Inf. Meaningless when `!has_infinity`.
  static constexpr std::uint8_t infinity_code =
      static_cast<std::uint8_t>(exponent_field_max << mantissa_bits);

  /// Unbiased exponent of the smallest normal number, and of the largest finite one.
  static constexpr int min_exponent = has_subnormals ? 1 - bias : -bias;
  static constexpr int max_exponent = (max_code >> mantissa_bits) - bias;

  static_assert(max_code > 0, "a format needs at least one nonzero finite code");
  static_assert(max_exponent <= 127 && min_exponent - mantissa_bits >= -149,
                "every value must be exactly representable as a float");
};

} // namespace v0
} // namespace blockscale
