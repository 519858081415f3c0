/// \file io/safetensors_dtype.hpp
/// The element types of the safetensors format (https://huggingface.co/docs/safetensors) by the
/// names its headers use ("BF16", "F8_E4M3", "F4"), their sizes in bits, the record of one tensor
/// as a header describes it (`tensor_info`), and the exact widening of the float types blockscale
/// quantizes from (F32, F16, BF16, F8_E4M3) to float.
///
/// A dtype this library does not know is kept with its name as `tensor_dtype::unknown`: its bytes
/// can be copied, never interpreted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../config.hpp"
#include "../detail/bits.hpp"
#include "../numeric/half.hpp"
#include "../numeric/minifloat.hpp"
#include "safetensors_error.hpp"

namespace blockscale {
inline namespace v0 {
namespace io {

/// The element types of the safetensors format. `unknown` stands for a dtype name this library
/// does not know (kept as written in `tensor_info::dtype_name`).
enum class tensor_dtype {
  f64,
  f32,
  f16,
  bf16,
  f8_e4m3,
  f8_e5m2,
  f8_e8m0,
  f6_e2m3,
  f6_e3m2,
  f4,
  i64,
  i32,
  i16,
  i8,
  u64,
  u32,
  u16,
  u8,
  boolean,
  c64,
  unknown
};

namespace detail {
struct dtype_entry {
  const char* name;
  tensor_dtype dtype;
  int bits;
};
// clang-format off
inline constexpr dtype_entry dtype_table[] = {
    {"F64", tensor_dtype::f64, 64},         {"F32", tensor_dtype::f32, 32},
    {"F16", tensor_dtype::f16, 16},         {"BF16", tensor_dtype::bf16, 16},
    {"F8_E4M3", tensor_dtype::f8_e4m3, 8},  {"F8_E5M2", tensor_dtype::f8_e5m2, 8},
    {"F8_E8M0", tensor_dtype::f8_e8m0, 8},  {"F6_E2M3", tensor_dtype::f6_e2m3, 6},
    {"F6_E3M2", tensor_dtype::f6_e3m2, 6},  {"F4", tensor_dtype::f4, 4},
    {"I64", tensor_dtype::i64, 64},         {"I32", tensor_dtype::i32, 32},
    {"I16", tensor_dtype::i16, 16},         {"I8", tensor_dtype::i8, 8},
    {"U64", tensor_dtype::u64, 64},         {"U32", tensor_dtype::u32, 32},
    {"U16", tensor_dtype::u16, 16},         {"U8", tensor_dtype::u8, 8},
    {"BOOL", tensor_dtype::boolean, 8},     {"C64", tensor_dtype::c64, 64},
};
// clang-format on
} // namespace detail

/// The dtype a name stands for ("BF16" -> bf16), `unknown` for any other name.
inline tensor_dtype parse_dtype(const std::string& name) noexcept {
  for (const auto& entry : detail::dtype_table)
    if (name == entry.name)
      return entry.dtype;
  return tensor_dtype::unknown;
}

/// The name the format uses for `dtype` ("BF16"); "unknown" for `unknown`.
inline const char* dtype_name(tensor_dtype dtype) noexcept {
  for (const auto& entry : detail::dtype_table)
    if (entry.dtype == dtype)
      return entry.name;
  return "unknown";
}

/// Bits per element (4 for F4, 6 for the FP6 types); 0 for `unknown`.
inline int dtype_bits(tensor_dtype dtype) noexcept {
  for (const auto& entry : detail::dtype_table)
    if (entry.dtype == dtype)
      return entry.bits;
  return 0;
}

/// Whether elements of `dtype` widen exactly to float: F32, F16, BF16, F8_E4M3.
inline bool is_float_input(tensor_dtype dtype) noexcept {
  return dtype == tensor_dtype::f32 || dtype == tensor_dtype::f16 || dtype == tensor_dtype::bf16 ||
         dtype == tensor_dtype::f8_e4m3;
}

/// One tensor of a safetensors file, as its header describes it.
struct tensor_info {
  std::string name;
  std::string dtype_name; ///< as written in the file ("BF16")
  tensor_dtype dtype = tensor_dtype::unknown;
  std::vector<std::uint64_t> shape; ///< outermost first; {} is a scalar
  std::uint64_t begin = 0;          ///< offset of the first byte, from the start of the data
  std::uint64_t end = 0;            ///< offset past the last byte

  /// Bytes the tensor occupies.
  std::uint64_t bytes() const noexcept { return end - begin; }
  /// The element count, the product of the shape (1 for a scalar).
  std::uint64_t elements() const noexcept {
    std::uint64_t n = 1;
    for (std::uint64_t d : shape)
      n *= d; // checked for overflow when the header was parsed
    return n;
  }
};

/// Widens elements [first, first + count) of a F32, F16, BF16 or F8_E4M3 tensor whose bytes start
/// at `data` to float, exactly (unaligned data is fine). Throws safetensors_error for other
/// dtypes.
inline void widen_to_float(const tensor_info& tensor, const std::uint8_t* data, std::uint64_t first,
                           std::uint64_t count, float* out) {
  switch (tensor.dtype) {
  case tensor_dtype::f32:
    for (std::uint64_t i = 0; i < count; ++i) {
      const std::uint8_t* p = data + 4 * (first + i);
      out[i] = blockscale::detail::bit_cast<float>(
          static_cast<std::uint32_t>(p[0] | p[1] << 8 | p[2] << 16) |
          static_cast<std::uint32_t>(p[3]) << 24);
    }
    return;
  case tensor_dtype::f16:
  case tensor_dtype::bf16:
    for (std::uint64_t i = 0; i < count; ++i) {
      const std::uint8_t* p = data + 2 * (first + i);
      const auto bits = static_cast<std::uint16_t>(p[0] | p[1] << 8);
      out[i] = tensor.dtype == tensor_dtype::f16 ? static_cast<float>(float16::from_bits(bits))
                                                 : static_cast<float>(bfloat16::from_bits(bits));
    }
    return;
  case tensor_dtype::f8_e4m3:
    for (std::uint64_t i = 0; i < count; ++i)
      out[i] = static_cast<float>(e4m3::from_bits(data[first + i]));
    return;
  default:
    detail::safetensors_fail("", "tensor '" + detail::printable(tensor.name) + "' of dtype " +
                                     detail::printable(tensor.dtype_name) +
                                     " does not widen to float");
  }
}

} // namespace io
} // namespace v0
} // namespace blockscale
