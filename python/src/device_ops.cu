// The CUDA extension's kernels outside the format tables: the lookup of a preset's table (each
// compiled by its own device_preset_<i>.cu, device_preset.cuh), the amax pass and the policies'
// device states, compiled by nvcc for BLOCKSCALE_CUDA_ARCHITECTURES.
#include "device_ops.hpp"

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <utility>

#include "blockscale/cuda/format_ops.cuh"
#include "blockscale/cuda/tensor_scale.cuh"

namespace blockscale_python {

namespace {
template <int... I>
const bs::cuda::device_format_ops* find(std::string_view name, std::integer_sequence<int, I...>) {
  const bs::cuda::device_format_ops* found = nullptr;
  (void)((name == preset_table<I + 1>().name ? (found = &preset_table<I + 1>(), true) : false) ||
         ...);
  return found;
}
} // namespace

const bs::cuda::device_format_ops* device_ops(std::string_view name) {
  constexpr int presets = static_cast<int>(bs::detail::count_of(bs::preset_formats{}));
  static_assert(presets == BLOCKSCALE_PYTHON_PRESETS,
                "python/CMakeLists.txt compiles one device_preset_<i>.cu per preset format");
  return find(name, std::make_integer_sequence<int, presets>{});
}

bs::cuda::status device_measure_amax(const bs::any_const_matrix& x, std::uint32_t* amax_bits,
                                     const bs::quantize_options& options, cudaStream_t stream) {
  return bs::cuda::measure_amax(x, amax_bits, options, stream);
}

namespace {
template <class Policy>
class typed_policy_state final : public device_policy_state {
public:
  typed_policy_state(const Policy& policy, cudaStream_t stream) : device_(policy, stream) {}
  // The state is freed in the order of the stream it was made on, but kernels on other streams
  // may still read it: wait for the device first (a policy is destroyed rarely).
  ~typed_policy_state() override { cudaDeviceSynchronize(); }
  void* state() const noexcept override { return device_.state(); }
  std::uint32_t* amax_bits() const noexcept override { return device_.amax_bits(); }
  bs::cuda::status read(void* policy, bs::quantize_stats& last,
                        cudaStream_t stream) const override {
    typename bs::cuda::device_tensor_scale<Policy>::state_type host{};
    // The last step may have run on any stream: wait for the device, then copy.
    if (bs::cuda::status s =
            bs::cuda::detail::cuda_status(cudaDeviceSynchronize(), "read: cudaDeviceSynchronize");
        !s)
      return s;
    if (bs::cuda::status s = device_.read(host, stream); !s)
      return s;
    if (bs::cuda::status s = bs::cuda::detail::cuda_status(cudaStreamSynchronize(stream),
                                                           "read: cudaStreamSynchronize");
        !s)
      return s;
    *static_cast<Policy*>(policy) = host.policy;
    last = host.last;
    return {};
  }

private:
  bs::cuda::device_tensor_scale<Policy> device_;
};
} // namespace

std::unique_ptr<device_policy_state> make_device_policy(bs::any_policy::kind kind,
                                                        const void* policy, cudaStream_t stream) {
  return bs::visit_policy_kind(kind, [&](auto tag) -> std::unique_ptr<device_policy_state> {
    using P = typename decltype(tag)::type;
    try {
      return std::make_unique<typed_policy_state<P>>(*static_cast<const P*>(policy), stream);
    } catch (const bs::cuda::error& e) {
      throw std::runtime_error(e.what());
    }
  });
}

} // namespace blockscale_python
