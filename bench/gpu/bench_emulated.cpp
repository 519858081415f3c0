// The host emulation backend of the CUDA benchmark (bench_core.hpp): the launchers of
// cuda/launch.hpp run their CTA programs on the host (emulation::host_runner) over host memory, so
// `blockscale_bench_quantize_cuda --emulate` exercises the whole program (setup, checks, report)
// without a GPU. Plain C++: the host driver of the CTA programs calls host functions from
// __host__ __device__ code, which a CUDA translation unit with warnings as errors rejects.
#include <blockscale/cuda/launch.hpp>
#include <blockscale/emulation/host_runner.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bench_core.hpp"

namespace blockscale_bench {
namespace {

/// Host memory aligned to 256 bytes, as the device allocator aligns.
class host_buffer {
public:
  host_buffer() = default;
  explicit host_buffer(std::size_t bytes) : bytes_(bytes + 256), size_(bytes) {
    const auto p = reinterpret_cast<std::uintptr_t>(bytes_.data());
    data_ = bytes_.data() + (256 - p % 256) % 256;
  }
  std::uint8_t* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }

private:
  std::vector<std::uint8_t> bytes_;
  std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

/// A policy's state in host memory, initialised as device_tensor_scale initialises it.
template <class P>
class host_policy {
public:
  explicit host_policy(const P& p) {
    state_.policy = p;
    state_.scales = cuda::tensor_scales::make(p.encode_scale(), 1.0f);
  }
  cuda::tensor_scale_state<P>* state() noexcept { return &state_; }
  const cuda::tensor_scale_state<P>& value() const noexcept { return state_; }

private:
  cuda::tensor_scale_state<P> state_{};
};

class emulated_backend {
public:
  /// With `fault`, every operation corrupts one byte of what it writes (--emulate-fault), so that
  /// the checks can be seen to fail.
  explicit emulated_backend(bool fault) : fault_(fault) {}

  using buffer = host_buffer;
  template <class F>
  using matrix = quantized_matrix<F>;
  template <class P>
  using policy = host_policy<P>;

  std::vector<std::string> describe() const {
    return {"device: none: --emulate runs the launchers' CTA programs on the host "
            "(emulation::host_runner); the times are the host's and mean nothing"};
  }
  std::size_t flush_bytes() const noexcept { return 0; }

  buffer alloc(std::size_t bytes) { return buffer(bytes); }
  void upload(void* to, const void* from, std::size_t bytes) { copy(to, from, bytes); }
  void download(void* to, const void* from, std::size_t bytes) { copy(to, from, bytes); }
  void fill(void* p, int byte, std::size_t bytes) {
    if (bytes > max_bytes)
      throw bench_error("fill: a size beyond any object");
    std::memset(p, byte, bytes);
  }
  void sync() {}
  bool healthy() { return true; }

  template <class F>
  matrix<F> make_matrix(const quantized_shape& shape) {
    return matrix<F>(shape);
  }
  template <class F>
  void download(const matrix<F>& from, quantized_matrix<F>& to) {
    to = from;
  }
  template <class P>
  policy<P> make_policy(const P& p) {
    return policy<P>(p);
  }
  template <class P>
  cuda::tensor_scale_state<P> read_policy(const policy<P>& p) {
    return p.value();
  }

  template <class F, class T>
  void quantize(matrix_view<const T> x, quantized_view<F> out, const quantize_options& options) {
    check_status(cuda::launch_quantize(runner_, x, out, options), "cuda::launch_quantize");
    corrupt(out.elements());
  }
  template <class R, class C, class T>
  void quantize_pair(matrix_view<const T> x, quantized_view<R> rowwise,
                     const quantize_options& rowwise_options, quantized_view<C> columnwise,
                     const quantize_options& columnwise_options) {
    check_status(
        cuda::launch_quantize(runner_, x, rowwise, rowwise_options, columnwise, columnwise_options),
        "cuda::launch_quantize (pair)");
    corrupt(columnwise.scales());
  }
  template <class F, class T, class P>
  void quantize_step(matrix_view<const T> x, quantized_view<F> out, policy<P>& p,
                     const quantize_options& options) {
    check_status(cuda::launch_policy_step(runner_, x, out, p.state(), options),
                 "cuda::launch_policy_step");
    corrupt(out.scales() + storage_for<F>(out.shape()).scale_bytes - 1);
  }
  template <class T>
  void amax(matrix_view<const T> x, std::uint32_t* bits, const quantize_options& options) {
    check_status(cuda::launch_amax(runner_, x, bits, options), "cuda::launch_amax");
    corrupt(reinterpret_cast<std::uint8_t*>(bits));
  }
  template <class F, class T>
  void dequantize(const_quantized_view<F> q, matrix_view<T> out) {
    check_status(cuda::launch_dequantize(runner_, q, out, false), "cuda::launch_dequantize");
    corrupt(reinterpret_cast<std::uint8_t*>(out.row(out.rows() - 1)));
  }
  void memcpy_d2d(void* to, const void* from, std::size_t bytes) { copy(to, from, bytes); }
  void copy_kernel(void* to, const void* from, std::size_t bytes) {
    copy(to, from, bytes);
    corrupt(static_cast<std::uint8_t*>(to) + bytes / 2);
  }

  template <class Op>
  timings time(Op&& op, const timing_plan& plan) {
    for (int i = 0; i < plan.warmup; ++i)
      op();
    timings t;
    for (int i = 0; i < plan.iterations; ++i) {
      const auto start = std::chrono::steady_clock::now();
      op();
      t.device_us.push_back(microseconds_since(start));
    }
    t.host_us = t.device_us;
    return t;
  }
  template <class Op>
  auto captured(Op&& op) {
    return op;
  }

private:
  static constexpr std::size_t max_bytes = PTRDIFF_MAX;

  static void copy(void* to, const void* from, std::size_t bytes) {
    if (bytes > max_bytes)
      throw bench_error("copy: a size beyond any object");
    std::memcpy(to, from, bytes);
  }
  void corrupt(std::uint8_t* byte) const {
    if (fault_)
      *byte ^= 0x10;
  }

  bool fault_ = false;
  emulation::host_runner runner_;
};
} // namespace

int run_emulated(const bench_args& args) {
  emulated_backend backend(args.emulate_fault);
  return run(backend, args);
}

} // namespace blockscale_bench
