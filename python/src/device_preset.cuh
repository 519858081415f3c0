// One preset's device table for the CUDA extension: python/CMakeLists.txt makes one
// device_preset_<i>.cu per preset format, defining BLOCKSCALE_PYTHON_PRESET (its index in
// preset_names) and including this file, so that a parallel build compiles the formats side by
// side.
#pragma once

#include <cstddef>

#include "blockscale/cuda/format_ops.cuh"
#include "device_ops.hpp"

namespace blockscale_python {
namespace detail {

template <std::size_t I, class List>
struct nth;
template <class First, class... Rest>
struct nth<0, bs::detail::type_list<First, Rest...>> {
  using type = First;
};
template <std::size_t I, class First, class... Rest>
struct nth<I, bs::detail::type_list<First, Rest...>> : nth<I - 1, bs::detail::type_list<Rest...>> {
};

/// What the bindings reach: float32 and bfloat16 inputs (the package widens float16 to float32 on
/// the device first, exactly), and the policies that need device state (NoTensorScale needs
/// none). Each pair of a format and an input type is 24 quantization kernels and each policy as
/// many again: this choice halves the build.
using coverage = bs::cuda::device_table_coverage<
    bs::detail::type_list<float, bs::bfloat16>,
    bs::detail::type_list<bs::current_tensor_scale, bs::periodic_tensor_scale,
                          bs::delayed_tensor_scale>>;

} // namespace detail

template <int Preset>
const bs::cuda::device_format_ops& preset_table() {
  using format = typename detail::nth<Preset - 1, bs::preset_formats>::type;
  static const bs::cuda::device_format_ops table =
      bs::cuda::make_device_format_ops<format, detail::coverage>(bs::preset_names[Preset]);
  return table;
}

template const bs::cuda::device_format_ops& preset_table<BLOCKSCALE_PYTHON_PRESET>();

} // namespace blockscale_python
