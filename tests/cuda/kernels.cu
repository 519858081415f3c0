// The representative kernels of cuda/quantize.cuh, instantiated through the public launchers for
// the static checks of tests/cuda (no GPU needed): this translation unit is compiled for every
// architecture in CMAKE_CUDA_ARCHITECTURES with warnings as errors, and the kernels in its object
// file are then read by cuobjdump (check_static.py: registers, shared memory, no local memory, no
// spills; scripts/cuda_static_report.sh: the tables and the SASS instruction counts of
// docs/cuda-static.md).
//
// Nothing here runs. Each function below calls a launcher, which builds every program it can
// choose at run time — both directions, three scale roundings (nearest-even, up, down) times two
// element roundings (nearest-even, stochastic), the pair kernel from one read, a policy step's
// gated amax kernel and its quantize kernels with a completion action, the amax and dequantize
// kernels — and hands each to the runner. The runner here is cuda::device_runner behind a filter:
// it instantiates the kernels of only the 113 programs worth compiling (96 quantize, 9 amax, 8
// dequantize; about 90 seconds per architecture on 2 cores), namely
//   - quantize kernels (each in its common-case and general variant, cuda/kernels/quantize.hpp)
//     whose scale rounding is the format's default rule's (nearest-even for
//     NVFP4 and UE5M3-FP4, down for the OCP rule of MXFP4 and MXFP8): the other two roundings
//     change only the scale conversion;
//   - among the policy steps' quantize kernels (those with a completion action), the nearest-even
//     elements only: stochastic rounding is covered by the plain kernels;
//   - every amax and dequantize kernel.
// Define BLOCKSCALE_STATIC_ALL_KERNELS to 1 for every kernel the launchers can choose
// (scripts/cuda_static_report.sh --all-kernels).
#include <blockscale/blockscale.hpp>
#include <blockscale/cuda/quantize.cuh>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#ifndef BLOCKSCALE_STATIC_ALL_KERNELS
#define BLOCKSCALE_STATIC_ALL_KERNELS 0
#endif

namespace blockscale_static {

using namespace blockscale;

/// The scale_rounding value of a scale-rounding tag.
template <class Rounding>
constexpr scale_rounding rounding_of() noexcept {
  if constexpr (std::is_same<Rounding, round_up>::value)
    return scale_rounding::up;
  else if constexpr (std::is_same<Rounding, round_down>::value)
    return scale_rounding::down;
  else
    return scale_rounding::nearest_even;
}

/// Whether an output of a quantize program rounds its scales by its format's default rule.
template <class Output>
struct default_scales : std::true_type {}; // cuda::no_quantize_output
template <class F, class ScaleRounding, class ElementRounding>
struct default_scales<cuda::quantize_output<F, ScaleRounding, ElementRounding>>
    : std::integral_constant<bool,
                             rounding_of<ScaleRounding>() == default_scale_rule<F>().rounding> {};

/// Whether an output of a quantize program rounds its elements stochastically.
template <class Output>
struct stochastic : std::false_type {}; // cuda::no_quantize_output
template <class F, class ScaleRounding, class ElementRounding>
struct stochastic<cuda::quantize_output<F, ScaleRounding, ElementRounding>>
    : std::is_same<ElementRounding, round_stochastic> {};

/// Whether the runner compiles a kernel for `Program` (see the top of this file).
template <class Program>
struct compiled : std::true_type {}; // amax and dequantize programs
template <class T, class Row, class Column, class Completion, class Case>
struct compiled<cuda::quantize_program<T, Row, Column, Completion, Case>>
    : std::integral_constant<bool, default_scales<Row>::value && default_scales<Column>::value &&
                                       (std::is_same<Completion, cuda::no_completion>::value ||
                                        !(stochastic<Row>::value || stochastic<Column>::value))> {};

/// cuda::device_runner, queuing only the programs that `compiled` keeps.
struct runner {
  cuda::device_runner device;

  template <class Program>
  cuda::status run(const Program& program, std::size_t ctas) {
    if constexpr (BLOCKSCALE_STATIC_ALL_KERNELS || compiled<Program>::value)
      return device.run(program, ctas);
    else
      return {cuda::errc::invalid_argument, "not compiled in the static-check build"};
  }
  template <class Program>
  cuda::status run_looped(const Program& program, std::size_t ctas) {
    if constexpr (BLOCKSCALE_STATIC_ALL_KERNELS || compiled<Program>::value)
      return device.run_looped(program, ctas);
    else
      return {cuda::errc::invalid_argument, "not compiled in the static-check build"};
  }
  std::size_t persistent_ctas() const { return device.persistent_ctas(); }
};

/// Rowwise or columnwise (options.columnwise), any rounding.
template <class F, class T>
cuda::status quantize(runner& r, matrix_view<const T> x, quantized_view<F> out,
                      const quantize_options& options) {
  return cuda::launch_quantize(r, x, out, options);
}

/// Both directions from one read: the pair kernels (and the one-direction kernels above, for
/// outputs that round differently).
template <class F, class T>
cuda::status quantize_pair(runner& r, matrix_view<const T> x, quantized_view<F> rowwise,
                           const quantize_options& rowwise_options, quantized_view<F> columnwise,
                           const quantize_options& columnwise_options) {
  return cuda::launch_quantize(r, x, rowwise, rowwise_options, columnwise, columnwise_options);
}

/// One step under a device policy: its gated amax kernel, and quantize kernels that finish the
/// step in their last CTA.
template <class F, class T, class Policy>
cuda::status policy_step(runner& r, matrix_view<const T> x, quantized_view<F> out,
                         cuda::tensor_scale_state<Policy>* state, const quantize_options& options) {
  return cuda::launch_policy_step(r, x, out, state, options);
}

/// The tensor amax kernel.
template <class T>
cuda::status amax(runner& r, matrix_view<const T> x, std::uint32_t* bits,
                  const quantize_options& options, float* tile_amax) {
  return cuda::launch_amax(r, x, bits, options, tile_amax);
}

/// A dequantize kernel.
template <class F, class T>
cuda::status dequantize(runner& r, const_quantized_view<F> q, matrix_view<T> out) {
  return cuda::launch_dequantize(r, q, out);
}

// ---- the instantiations -----------------------------------------------------------------------

#define BLOCKSCALE_STATIC_QUANTIZE(F, T)                                                           \
  template cuda::status quantize<F, T>(runner&, matrix_view<const T>, quantized_view<F>,           \
                                       const quantize_options&);                                   \
  template cuda::status quantize_pair<F, T>(runner&, matrix_view<const T>, quantized_view<F>,      \
                                            const quantize_options&, quantized_view<F>,            \
                                            const quantize_options&);                              \
  template cuda::status policy_step<F, T, current_tensor_scale>(                                   \
      runner&, matrix_view<const T>, quantized_view<F>,                                            \
      cuda::tensor_scale_state<current_tensor_scale>*, const quantize_options&);                   \
  template cuda::status policy_step<F, T, periodic_tensor_scale>(                                  \
      runner&, matrix_view<const T>, quantized_view<F>,                                            \
      cuda::tensor_scale_state<periodic_tensor_scale>*, const quantize_options&);

#define BLOCKSCALE_STATIC_DEQUANTIZE(F)                                                            \
  template cuda::status dequantize<F, bfloat16>(runner&, const_quantized_view<F>,                  \
                                                matrix_view<bfloat16>);                            \
  template cuda::status dequantize<F, float>(runner&, const_quantized_view<F>, matrix_view<float>);

BLOCKSCALE_STATIC_QUANTIZE(nvfp4, bfloat16)
BLOCKSCALE_STATIC_QUANTIZE(ue5m3_fp4, bfloat16)
BLOCKSCALE_STATIC_QUANTIZE(mxfp4, bfloat16)
BLOCKSCALE_STATIC_QUANTIZE(mxfp8, bfloat16)
BLOCKSCALE_STATIC_QUANTIZE(nvfp4, float)
BLOCKSCALE_STATIC_QUANTIZE(nvfp4, float16)

BLOCKSCALE_STATIC_DEQUANTIZE(nvfp4)
BLOCKSCALE_STATIC_DEQUANTIZE(ue5m3_fp4)
BLOCKSCALE_STATIC_DEQUANTIZE(mxfp4)
BLOCKSCALE_STATIC_DEQUANTIZE(mxfp8)

template cuda::status amax<bfloat16>(runner&, matrix_view<const bfloat16>, std::uint32_t*,
                                     const quantize_options&, float*);
template cuda::status amax<float>(runner&, matrix_view<const float>, std::uint32_t*,
                                  const quantize_options&, float*);
template cuda::status amax<float16>(runner&, matrix_view<const float16>, std::uint32_t*,
                                    const quantize_options&, float*);

#undef BLOCKSCALE_STATIC_QUANTIZE
#undef BLOCKSCALE_STATIC_DEQUANTIZE

} // namespace blockscale_static
