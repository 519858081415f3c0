// The arrays both extension modules read (numpy / DLPack arrays on the CPU for `_core`, CUDA
// arrays for `_cuda`): dtype checks, a 2-D array as an erased matrix, the bytes of a uint8 array,
// the element type a caller names, a QuantizedTensor's arrays as erased storage, and the
// counters' dict. Every check throws std::invalid_argument naming the
// argument, which nanobind raises as ValueError.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "blockscale/block/codec.hpp"
#include "blockscale/block/tensor_scale.hpp"
#include "blockscale/contract/erased.hpp"

namespace blockscale_python {

namespace nb = nanobind;
namespace bs = blockscale;

template <class A>
bool is_dtype(const A& a, nb::dlpack::dtype_code code, int bits) {
  return a.dtype().code == static_cast<std::uint8_t>(code) && a.dtype().bits == bits &&
         a.dtype().lanes == 1;
}

template <class A>
std::string dtype_string(const A& a) {
  static const char* const codes[] = {"int",    "uint",    "float", "opaque",
                                      "bfloat", "complex", "bool"};
  const unsigned code = a.dtype().code;
  return std::string(code < 7 ? codes[code] : "unknown") + std::to_string(a.dtype().bits);
}

/// A 2-D array with unit column stride as an erased matrix of `type` (the row stride becomes ld).
template <class Void, class A>
bs::basic_any_matrix<Void> any_matrix_of(const A& a, const char* name, bs::element_type type) {
  if (a.ndim() != 2)
    throw std::invalid_argument(std::string(name) + " must be 2-D, not " +
                                std::to_string(a.ndim()) + "-D");
  const std::size_t rows = a.shape(0), cols = a.shape(1);
  if (rows == 0 || cols == 0)
    return {nullptr, type, rows, cols, cols};
  if (cols > 1 && a.stride(1) != 1)
    throw std::invalid_argument(std::string(name) +
                                " must have contiguous rows (unit stride along its last axis)");
  if (rows > 1 && a.stride(0) < static_cast<std::int64_t>(cols))
    throw std::invalid_argument(std::string(name) + " has overlapping rows");
  const std::size_t ld = rows > 1 ? static_cast<std::size_t>(a.stride(0)) : cols;
  return {a.data(), type, rows, cols, ld};
}

/// The bytes of a C-contiguous uint8 array, and how many.
template <class A>
auto bytes_of(const A& a, const char* name) {
  // const for a read-only array (nb::ro), whose data() is a pointer to const
  using byte = std::conditional_t<std::is_const<std::remove_pointer_t<decltype(a.data())>>::value,
                                  const std::uint8_t, std::uint8_t>;
  if (!is_dtype(a, nb::dlpack::dtype_code::UInt, 8))
    throw std::invalid_argument(std::string(name) + " must be uint8, not " + dtype_string(a));
  if (a.size() == 0)
    return std::pair<byte*, std::size_t>{static_cast<byte*>(a.data()), 0};
  std::size_t expect = 1;
  for (std::size_t d = a.ndim(); d-- > 0;) {
    if (a.shape(d) != 1 && a.stride(d) != static_cast<std::int64_t>(expect))
      throw std::invalid_argument(std::string(name) + " must be C-contiguous");
    expect *= a.shape(d);
  }
  return std::pair<byte*, std::size_t>{static_cast<byte*>(a.data()), a.size()};
}

/// The element type of a matrix the caller names `element`: float32, float16, or bfloat16 (passed
/// as 16-bit integers with element = "bfloat16", how numpy carries ml_dtypes' bfloat16).
template <class A>
bs::element_type element_of(const A& a, const std::string& element, const char* name) {
  using code = nb::dlpack::dtype_code;
  if (element == "float32" && is_dtype(a, code::Float, 32))
    return bs::element_type::float32;
  if (element == "float16" && is_dtype(a, code::Float, 16))
    return bs::element_type::float16;
  if (element == "bfloat16" &&
      (is_dtype(a, code::Bfloat, 16) || is_dtype(a, code::UInt, 16) || is_dtype(a, code::Int, 16)))
    return bs::element_type::bfloat16;
  throw std::invalid_argument(std::string(name) + " must be float32, float16 or bfloat16, not " +
                              dtype_string(a));
}

/// The arrays of a Python QuantizedTensor as erased storage (its table checks the sizes); errors
/// name them `prefix` + "elements" and + "scales" (a GEMM's "a." and "b.").
template <class Byte, class A>
bs::basic_any_quantized<Byte>
storage_of(const bs::quantized_shape& shape, const A& elements, const A& scales,
           typename bs::basic_any_quantized<Byte>::decode_scale_type* decode_scale,
           const std::string& prefix = "") {
  const auto e = bytes_of(elements, (prefix + "elements").c_str());
  const auto s = bytes_of(scales, (prefix + "scales").c_str());
  return {shape, e.first, e.second, s.first, s.second, decode_scale};
}

/// The tensor-scale policy object `policy` holds (one of the four classes `_core` binds) as an
/// erased policy pointing into it; std::invalid_argument for any other object.
inline bs::any_policy any_policy_of(nb::handle policy) {
  bs::any_policy found;
  bs::for_each_type(bs::any_policy::types{}, [&](auto tag) {
    using P = typename decltype(tag)::type;
    P* p = nullptr;
    if (found.policy == nullptr && nb::try_cast(policy, p, false) && p)
      found = {bs::policy_kind_of<P>(), p};
  });
  if (found.policy == nullptr)
    throw std::invalid_argument("policy must be a NoTensorScale, CurrentTensorScale, "
                                "PeriodicTensorScale or DelayedTensorScale");
  return found;
}

/// A quantization's counters as the dict Python sees.
inline nb::dict stats_dict(const bs::quantize_stats& stats) {
  nb::dict d;
  d["blocks"] = stats.blocks;
  d["saturated_scales"] = stats.saturated_scales;
  d["zero_scales"] = stats.zero_scales;
  d["nan_scales"] = stats.nan_scales;
  d["amax"] = stats.amax;
  return d;
}

} // namespace blockscale_python
