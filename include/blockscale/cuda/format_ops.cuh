/// \file cuda/format_ops.cuh
/// The device tables of cuda/format_ops.hpp filled from the typed launchers of cuda/quantize.cuh
/// and cuda/gemm.cuh (compile with nvcc): `make_device_format_ops<F>(name)`,
/// `device_preset_format_ops(name)` and the erased `measure_amax`. Every entry calls the typed
/// launcher, so a call through the table queues the kernels a typed call queues and computes the
/// same bits.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "../contract/registry.hpp"
#include "format_ops.hpp"
#include "gemm.cuh"
#include "quantize.cuh"

namespace blockscale {
inline namespace v0 {
namespace cuda {

/// amax_t of x as quantizing with `options` sees it, max-ed into *amax_bits (device memory,
/// zeroed by the caller): no block format is involved.
[[nodiscard]] inline status measure_amax(const any_const_matrix& x, std::uint32_t* amax_bits,
                                         const quantize_options& options, cudaStream_t stream) {
  return detail::checked([&] {
    return blockscale::detail::with_matrix(
        x, [&](auto in) { return measure_amax(in, amax_bits, options, stream); });
  });
}

/// The input element types, the device policies and the GEMM output types a table is compiled
/// for: each pair of a format and an input type (and each policy) instantiates its own
/// quantization kernels, and each GEMM output type its own GEMM kernels (for formats with
/// `gemm_format`), so a caller that reaches only some of them (the Python extension: float32 and
/// bfloat16 inputs, no NoTensorScale on the device) compiles only those; the others are refused
/// by name at run time. An empty `GemmOutputs` compiles no GEMM.
template <class Inputs = blockscale::detail::type_list<float, float16, bfloat16>,
          class Policies = blockscale::detail::type_list<
              no_tensor_scale, current_tensor_scale, periodic_tensor_scale, delayed_tensor_scale>,
          class GemmOutputs = blockscale::detail::type_list<float, bfloat16>>
struct device_table_coverage {
  using inputs = Inputs;
  using policies = Policies;
  using gemm_outputs = GemmOutputs;
};

namespace detail {

template <class T>
constexpr element_type element_type_of() noexcept {
  if constexpr (std::is_same<T, float16>::value)
    return element_type::float16;
  else if constexpr (std::is_same<T, bfloat16>::value)
    return element_type::bfloat16;
  else
    return element_type::float32;
}

/// T, const for the matrices of `const void` (inputs).
template <class Void, class T>
using element_for = std::conditional_t<std::is_const<Void>::value, const T, T>;

/// f(matrix_view<T>) (const T for a `const void` matrix) for m's element type T when the list
/// has it; else `refusal` naming the type: "<what>: <type> <kind> are not compiled into this
/// device table".
template <class... Ts, class Void, class F>
status with_element(blockscale::detail::type_list<Ts...>, const basic_any_matrix<Void>& m,
                    errc refusal, const char* what, const char* kind, F&& f) {
  status result{refusal, std::string(what) + ": " + element_type_names[static_cast<int>(m.type)] +
                             " " + kind + " are not compiled into this device table"};
  (void)((element_type_of<Ts>() == m.type
              ? (result = f(matrix_view<element_for<Void, Ts>>(
                     static_cast<element_for<Void, Ts>*>(m.data), m.rows, m.cols, m.ld)),
                 true)
              : false) ||
         ...);
  return result;
}

/// f(matrix_view<const T>) for x's element type T when the list has it; else a status naming it.
template <class List, class F>
status with_input(List inputs, const any_const_matrix& x, F&& f) {
  return with_element(inputs, x, errc::invalid_argument, "x", "inputs", std::forward<F>(f));
}

/// f(matrix_view<T>) for c's element type T when the list has it; else a status naming it.
template <class List, class F>
status with_output(List outputs, const any_matrix& c, F&& f) {
  return with_element(outputs, c, errc::unsupported, "gemm: c", "outputs", std::forward<F>(f));
}

/// f(tensor_scale_state<P>*) for the policy's type P when the list has it; else a status.
template <class... Ps, class F>
status with_policy(blockscale::detail::type_list<Ps...>, any_device_policy policy, F&& f) {
  if (policy.state == nullptr)
    return {errc::invalid_argument, "quantize_into: the policy state is null"};
  status result{errc::invalid_argument, "policy: kind " +
                                            std::to_string(static_cast<int>(policy.type)) +
                                            " is not compiled into this device table"};
  (void)((policy_kind_of<Ps>() == policy.type
              ? (result = f(static_cast<tensor_scale_state<Ps>*>(policy.state)), true)
              : false) ||
         ...);
  return result;
}

template <class Format, class Coverage>
struct device_format_ops_impl {
  template <class F>
  static status with_input(const any_const_matrix& x, F&& f) {
    return detail::with_input(typename Coverage::inputs{}, x, std::forward<F>(f));
  }
  template <class F>
  static status with_policy(any_device_policy policy, F&& f) {
    return detail::with_policy(typename Coverage::policies{}, policy, std::forward<F>(f));
  }

  static status quantize_into(const any_const_matrix& x, const any_quantized& out,
                              const quantize_options& options, any_device_policy policy,
                              cudaStream_t stream, device_quantize_stats* stats) {
    return checked([&] {
      const auto view = blockscale::detail::view_of<Format>(out);
      device_runner runner{stream};
      return with_input(x, [&](auto in) {
        if (policy.type == any_policy::kind::none)
          return launch_quantize(runner, as_input(in), view, options, stats);
        return with_policy(policy, [&](auto* state) {
          return launch_policy_step(runner, as_input(in), view, state, options);
        });
      });
    });
  }

  static status policy_measure(const any_const_matrix& x, any_device_policy policy,
                               const quantize_options& options, cudaStream_t stream) {
    return checked([&] {
      device_runner runner{stream};
      return with_input(x, [&](auto in) {
        return with_policy(policy, [&](auto* state) {
          return launch_policy_measure<Format>(runner, as_input(in), state, options, false);
        });
      });
    });
  }

  static status policy_apply(any_device_policy policy, const quantize_options& options,
                             cudaStream_t stream) {
    return checked([&] {
      device_runner runner{stream};
      return with_policy(
          policy, [&](auto* state) { return launch_policy_apply<Format>(runner, state, options); });
    });
  }

  static status quantize_applied(const any_const_matrix& x, const any_quantized& out,
                                 const quantize_options& options, any_device_policy policy,
                                 cudaStream_t stream) {
    return checked([&] {
      const auto view = blockscale::detail::view_of<Format>(out);
      device_runner runner{stream};
      return with_input(x, [&](auto in) {
        return with_policy(policy, [&](auto* state) {
          return launch_policy_quantize(runner, as_input(in), view, state, options);
        });
      });
    });
  }

  static status dequantize(const any_const_quantized& q, const any_matrix& out, bool padded,
                           cudaStream_t stream) {
    return checked([&] {
      const auto view = blockscale::detail::view_of<Format>(q);
      device_runner runner{stream};
      return blockscale::detail::with_matrix(
          out, [&](auto o) { return launch_dequantize(runner, view, o, padded); });
    });
  }

  static status gemm(const any_const_quantized& a, const any_const_quantized& b,
                     const any_matrix& c, float alpha, float beta, cudaStream_t stream) {
    if constexpr (!gemm_format<Format>) {
      return {errc::unsupported, "gemm: the device GEMM takes E2M1 block formats only"};
    } else {
      return checked([&] {
        const auto va = blockscale::detail::view_of<Format>(a);
        const auto vb = blockscale::detail::view_of<Format>(b);
        return with_output(typename Coverage::gemm_outputs{}, c,
                           [&](auto out) { return cuda::gemm(va, vb, out, alpha, beta, stream); });
      });
    }
  }
};

} // namespace detail

/// The table of `Format`'s device operations.
template <class Format, class Coverage = device_table_coverage<>>
constexpr device_format_ops make_device_format_ops(const char* name) noexcept {
  using impl = detail::device_format_ops_impl<Format, Coverage>;
  return {name,
          &impl::quantize_into,
          &impl::policy_measure,
          &impl::policy_apply,
          &impl::quantize_applied,
          &impl::dequantize,
          &impl::gemm};
}

/// The device table of the preset named `name` (registry.hpp's closed list), compiled for
/// `Coverage`; null for a name that is not a preset.
template <class Coverage = device_table_coverage<>>
const device_format_ops* device_preset_format_ops(std::string_view name) {
  static const auto tables = [] {
    struct holder {
      device_format_ops ops[blockscale::detail::count_of(preset_formats{})];
    } h{};
    std::size_t i = 0;
    for_each_type(preset_formats{}, [&](auto tag) {
      h.ops[i] =
          make_device_format_ops<typename decltype(tag)::type, Coverage>(preset_names[i + 1]);
      ++i;
    });
    return h;
  }();
  for (const device_format_ops& ops : tables.ops)
    if (name == ops.name)
      return &ops;
  return nullptr;
}

} // namespace cuda
} // namespace v0
} // namespace blockscale
