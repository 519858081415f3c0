// The blockscale Python CUDA extension, `blockscale._cuda`: bindings over the device launchers for
// CUDA arrays (torch, CuPy or any DLPack producer), read and written in place and queued on the
// stream the caller names. The kernels are device_ops.cu's; this file maps Python arguments to the
// erased matrices and storage of cuda/format_ops.hpp and a status that is not ok to an exception
// (ValueError for a bad argument, RuntimeError for a CUDA error). Nothing here synchronises but
// the policies' construction and read(), and the device GEMM's first call on each device (which
// asks the device which MMA its code has, once). It shares the host extension's types
// (QuantizedShape, QuantizeOptions, the policies): import blockscale first.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "device_ops.hpp"

namespace nb = nanobind;
namespace bs = blockscale;
using namespace blockscale_python;

namespace {

using device_array = nb::ndarray<nb::device::cuda>;
using device_input = nb::ndarray<nb::ro, nb::device::cuda>;
using kind = bs::any_policy::kind;

void raise_if(const bs::cuda::status& s) {
  if (s.ok())
    return;
  if (s.code() == bs::cuda::errc::cuda_error)
    throw std::runtime_error(s.message());
  throw std::invalid_argument(s.message());
}

cudaStream_t stream_of(std::uintptr_t stream) {
  return reinterpret_cast<cudaStream_t>(stream);
}

const bs::cuda::device_format_ops& ops_named(const std::string& format) {
  if (const bs::cuda::device_format_ops* ops = device_ops(format))
    return *ops;
  throw std::invalid_argument("block format '" + format +
                              "' has no device kernels in this build (the presets do)");
}

template <class A>
auto* decode_scale_of(const A& a) {
  if (!is_dtype(a, nb::dlpack::dtype_code::Float, 32) || a.size() != 1)
    throw std::invalid_argument("decode_scale must be a float32 CUDA array of one element");
  using value = std::conditional_t<std::is_same<A, device_input>::value, const float, float>;
  return static_cast<value*>(a.data());
}

// ---- Policies on the device ------------------------------------------------------------------

/// A tensor-scale policy whose state lives in device memory (cuda::tensor_scale_state<P>), made
/// from a host policy object; the kernels read and update it, so a training step under it never
/// waits for the host. `amax_bits` is its measured amax (a uint32 CUDA array of one element) for
/// an all-reduce between measure and apply.
class device_policy {
public:
  device_policy(nb::handle host, std::uintptr_t stream) {
    const nb::object format = nb::getattr(host, "format", nb::none());
    format_ = nb::isinstance<nb::str>(format) ? nb::cast<std::string>(format) : std::string();
    const bs::any_policy policy = any_policy_of(host);
    kind_ = policy.type;
    state_ = make_device_policy(kind_, policy.policy, stream_of(stream));
  }

  bs::cuda::any_device_policy erased() const { return {kind_, state_->state()}; }
  const std::string& format() const { return format_; }
  kind type() const { return kind_; }

  /// Copies the device state into `host` (a policy object of the same class) and returns the last
  /// step's counters: waits for the stream.
  nb::dict read(nb::handle host, std::uintptr_t stream) const {
    bs::any_policy into{};
    try {
      into = any_policy_of(host);
    } catch (const std::invalid_argument&) {
    }
    if (into.type != kind_)
      throw std::invalid_argument(
          "read: into must be a policy of the class this one was made from");
    void* policy = into.policy;
    bs::quantize_stats last;
    {
      nb::gil_scoped_release unlocked;
      raise_if(state_->read(policy, last, stream_of(stream)));
    }
    return stats_dict(last);
  }

  std::uint32_t* amax_bits() const { return state_->amax_bits(); }

private:
  std::unique_ptr<device_policy_state> state_;
  kind kind_ = kind::none;
  std::string format_;
};

bs::cuda::any_device_policy policy_of(const device_policy* policy, const std::string& format) {
  if (policy == nullptr)
    return {};
  if (policy->type() != kind::no_tensor_scale && !policy->format().empty() &&
      policy->format() != format)
    throw std::invalid_argument("policy was made for " + policy->format() + ", not " + format);
  return policy->erased();
}

// ---- The bindings ----------------------------------------------------------------------------

void quantize_into(const device_input& x, const std::string& element, const std::string& format,
                   const bs::quantized_shape& shape, const device_array& elements,
                   const device_array& scales, const device_array& decode_scale,
                   const bs::quantize_options& options, const device_policy* policy,
                   std::uintptr_t stream) {
  const auto& ops = ops_named(format);
  const auto in = any_matrix_of<const void>(x, "x", element_of(x, element, "x"));
  const auto out = storage_of<std::uint8_t>(shape, elements, scales, decode_scale_of(decode_scale));
  const auto p = policy_of(policy, format);
  nb::gil_scoped_release unlocked;
  raise_if(ops.quantize_into(in, out, options, p, stream_of(stream), nullptr));
}

void policy_measure(const device_input& x, const std::string& element, const std::string& format,
                    const bs::quantize_options& options, const device_policy& policy,
                    std::uintptr_t stream) {
  const auto& ops = ops_named(format);
  const auto in = any_matrix_of<const void>(x, "x", element_of(x, element, "x"));
  const auto p = policy_of(&policy, format);
  nb::gil_scoped_release unlocked;
  raise_if(ops.policy_measure(in, p, options, stream_of(stream)));
}

void policy_apply(const std::string& format, const bs::quantize_options& options,
                  const device_policy& policy, std::uintptr_t stream) {
  const auto& ops = ops_named(format);
  const auto p = policy_of(&policy, format);
  nb::gil_scoped_release unlocked;
  raise_if(ops.policy_apply(p, options, stream_of(stream)));
}

void quantize_applied(const device_input& x, const std::string& element, const std::string& format,
                      const bs::quantized_shape& shape, const device_array& elements,
                      const device_array& scales, const device_array& decode_scale,
                      const bs::quantize_options& options, const device_policy& policy,
                      std::uintptr_t stream) {
  const auto& ops = ops_named(format);
  const auto in = any_matrix_of<const void>(x, "x", element_of(x, element, "x"));
  const auto out = storage_of<std::uint8_t>(shape, elements, scales, decode_scale_of(decode_scale));
  const auto p = policy_of(&policy, format);
  nb::gil_scoped_release unlocked;
  raise_if(ops.quantize_applied(in, out, options, p, stream_of(stream)));
}

void measure_amax(const device_input& x, const std::string& element,
                  const bs::quantize_options& options, const device_array& amax_bits,
                  std::uintptr_t stream) {
  // int32 or uint32: the kernel max-es the bit patterns of non-negative floats, which order the
  // same either way (torch has no full uint32 support).
  if (!(is_dtype(amax_bits, nb::dlpack::dtype_code::UInt, 32) ||
        is_dtype(amax_bits, nb::dlpack::dtype_code::Int, 32)) ||
      amax_bits.size() != 1)
    throw std::invalid_argument("amax_bits must be an int32 or uint32 CUDA array of one element");
  const auto in = any_matrix_of<const void>(x, "x", element_of(x, element, "x"));
  auto* bits = static_cast<std::uint32_t*>(amax_bits.data());
  nb::gil_scoped_release unlocked;
  raise_if(device_measure_amax(in, bits, options, stream_of(stream)));
}

void dequantize(const std::string& format, const bs::quantized_shape& shape,
                const device_input& elements, const device_input& scales,
                const device_input& decode_scale, const device_array& out,
                const std::string& element, bool padded, std::uintptr_t stream) {
  const auto& ops = ops_named(format);
  const auto q =
      storage_of<const std::uint8_t>(shape, elements, scales, decode_scale_of(decode_scale));
  const auto o = any_matrix_of<void>(out, "out", element_of(out, element, "out"));
  nb::gil_scoped_release unlocked;
  raise_if(ops.dequantize(q, o, padded, stream_of(stream)));
}

void gemm(const std::string& format, const bs::quantized_shape& shape_a,
          const device_input& elements_a, const device_input& scales_a,
          const device_input& decode_a, const bs::quantized_shape& shape_b,
          const device_input& elements_b, const device_input& scales_b,
          const device_input& decode_b, const device_array& c, const std::string& element,
          float alpha, float beta, std::uintptr_t stream) {
  const auto& ops = ops_named(format);
  const auto a = storage_of<const std::uint8_t>(shape_a, elements_a, scales_a,
                                                decode_scale_of(decode_a), "a.");
  const auto b = storage_of<const std::uint8_t>(shape_b, elements_b, scales_b,
                                                decode_scale_of(decode_b), "b.");
  const auto out = any_matrix_of<void>(c, "c", element_of(c, element, "c"));
  nb::gil_scoped_release unlocked;
  raise_if(ops.gemm(a, b, out, alpha, beta, stream_of(stream)));
}

} // namespace

NB_MODULE(_cuda, m) {
  m.doc() = "blockscale's CUDA kernels (use the blockscale package, not this module directly)";
  nb::class_<device_policy>(m, "DevicePolicy")
      .def(nb::init<nb::handle, std::uintptr_t>(), nb::arg("policy"), nb::arg("stream"))
      .def_prop_ro("format", &device_policy::format)
      .def("read", &device_policy::read, nb::arg("into"), nb::arg("stream"))
      .def_prop_ro(
          "amax_bits",
          [](nb::handle self) {
            const auto& p = nb::cast<const device_policy&>(self);
            int device = 0;
            cudaGetDevice(&device);
            return nb::ndarray<std::uint32_t, nb::shape<1>, nb::device::cuda>(
                p.amax_bits(), {1}, self, {}, nb::dtype<std::uint32_t>(), nb::device::cuda::value,
                device);
          },
          nb::rv_policy::reference_internal);
  m.def("quantize_into", &quantize_into, nb::arg("x"), nb::arg("element"), nb::arg("format"),
        nb::arg("shape"), nb::arg("elements"), nb::arg("scales"), nb::arg("decode_scale"),
        nb::arg("options"), nb::arg("policy").none(), nb::arg("stream"));
  m.def("policy_measure", &policy_measure, nb::arg("x"), nb::arg("element"), nb::arg("format"),
        nb::arg("options"), nb::arg("policy"), nb::arg("stream"));
  m.def("policy_apply", &policy_apply, nb::arg("format"), nb::arg("options"), nb::arg("policy"),
        nb::arg("stream"));
  m.def("quantize_applied", &quantize_applied, nb::arg("x"), nb::arg("element"), nb::arg("format"),
        nb::arg("shape"), nb::arg("elements"), nb::arg("scales"), nb::arg("decode_scale"),
        nb::arg("options"), nb::arg("policy"), nb::arg("stream"));
  m.def("measure_amax", &measure_amax, nb::arg("x"), nb::arg("element"), nb::arg("options"),
        nb::arg("amax_bits"), nb::arg("stream"));
  m.def("dequantize", &dequantize, nb::arg("format"), nb::arg("shape"), nb::arg("elements"),
        nb::arg("scales"), nb::arg("decode_scale"), nb::arg("out"), nb::arg("element"),
        nb::arg("padded"), nb::arg("stream"));
  m.def("gemm", &gemm, nb::arg("format"), nb::arg("shape_a"), nb::arg("elements_a"),
        nb::arg("scales_a"), nb::arg("decode_a"), nb::arg("shape_b"), nb::arg("elements_b"),
        nb::arg("scales_b"), nb::arg("decode_b"), nb::arg("c"), nb::arg("element"),
        nb::arg("alpha"), nb::arg("beta"), nb::arg("stream"));
  m.def("device_count", [] {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
  });
}
