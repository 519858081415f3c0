// Device quantization throughput (cuda/quantize.cuh) on the current GPU, each figure next to a
// device-to-device copy of the same bytes measured in the same run, and every configuration's
// output checked byte for byte against the host quantizer before it is timed.
//
// A plain main() with CUDA events rather than Google Benchmark: each timed call needs untimed
// device work before it (an L2 flush and a short spin kernel, both queued on the stream) and a
// device-side clock around it, which Google Benchmark's manual timing would only wrap; the
// program must also build where Google Benchmark is missing (the device machines), and stands
// alone as its own CMake project (bench/gpu/CMakeLists.txt) for that reason.
//
//   blockscale_bench_quantize_cuda [--out PATH] [--quick] [--emulate] [--size N] [--rows N]
//       [--cols N] [--iterations N] [--warmup N] [--windows N] [--steps N] [--seed N]
//       [--threads N] [--only TEXT]...
//
// Exit status: 0 when every configuration ran and matched the host, 1 when one failed or
// differed, 2 for a bad argument, 77 when there is no CUDA device (and no --emulate). Missed
// performance targets are reported, not failed.
//
// --emulate runs the same program without a GPU: the launchers run their CTA programs on the host
// (emulation/host_runner.hpp) over host memory, at a small size, timed by the host clock. It tests
// this program's setup, checks and report; its times mean nothing.
//
// Files: bench_core.hpp (the benchmark over a backend: configurations, checks, report, arguments),
// this file (the device backend, the copy baseline's kernel, main), bench_emulated.cpp (the host
// emulation backend), timing.cuh (the L2 flush and the event timing, shared with
// bench_gemm_cuda.cu) and bench_common.hpp (what both benchmarks share on the host).
#include <blockscale/cuda/quantize.cuh>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench_core.hpp"
#include "timing.cuh"

using namespace blockscale;
using namespace blockscale_bench;

namespace {

// ------------------------------------------------------------------------------------------------
// The copy baseline's kernel (the L2 flush and the spin are timing.cuh's).

constexpr int copy_threads = 256;
constexpr int copy_unroll = 4;

/// Copies n 16-byte words: each thread moves `copy_unroll` words a block's width apart, all loads
/// issued before the first store.
__global__ void __launch_bounds__(copy_threads)
    copy_words(const uint4* __restrict__ from, uint4* __restrict__ to, std::size_t n) {
  const std::size_t base =
      static_cast<std::size_t>(blockIdx.x) * copy_threads * copy_unroll + threadIdx.x;
  uint4 v[copy_unroll];
#pragma unroll
  for (int k = 0; k < copy_unroll; ++k) {
    const std::size_t i = base + static_cast<std::size_t>(k) * copy_threads;
    v[k] = i < n ? from[i] : make_uint4(0u, 0u, 0u, 0u);
  }
#pragma unroll
  for (int k = 0; k < copy_unroll; ++k) {
    const std::size_t i = base + static_cast<std::size_t>(k) * copy_threads;
    if (i < n)
      to[i] = v[k];
  }
}

// ------------------------------------------------------------------------------------------------
// The device backend (see bench_core.hpp for what a backend provides).

class device_backend {
public:
  using buffer = cuda::device_allocation;
  template <class F>
  using matrix = cuda::device_quantized_matrix<F>;
  template <class P>
  using policy = cuda::device_tensor_scale<P>;

  explicit device_backend(int device) : gpu_(device), stream_(gpu_.stream()) {
    // The memory clock is for the report only: a runtime that no longer answers (CUDA 13 dropped
    // it from cudaDeviceProp) gives 0, not a failure.
    if (cudaDeviceGetAttribute(&memory_clock_khz_, cudaDevAttrMemoryClockRate, device) !=
        cudaSuccess)
      memory_clock_khz_ = 0;
    (void)cudaGetLastError();
  }
  device_backend(const device_backend&) = delete;
  device_backend& operator=(const device_backend&) = delete;

  std::vector<std::string> describe() const {
    const cudaDeviceProp& props = gpu_.properties();
    std::ostringstream device;
    device << "#" << gpu_.device() << " " << props.name << " (sm_" << props.major << props.minor
           << "), " << props.multiProcessorCount << " SMs, L2 "
           << static_cast<double>(props.l2CacheSize) / (1 << 20) << " MiB, "
           << static_cast<double>(props.totalGlobalMem) / (1ull << 30) << " GiB, SM clock up to "
           << gpu_.clock_khz() / 1000 << " MHz, memory clock " << memory_clock_khz_ / 1000
           << " MHz, " << props.memoryBusWidth << "-bit bus";
    return {"device: " + device.str(), gpu_.versions()};
  }
  std::size_t flush_bytes() const noexcept { return gpu_.flush_bytes(); }

  // Memory.
  buffer alloc(std::size_t bytes) { return buffer(bytes, stream_); }
  void upload(void* to, const void* from, std::size_t bytes) {
    check_cuda(cudaMemcpyAsync(to, from, bytes, cudaMemcpyHostToDevice, stream_),
               "cudaMemcpyAsync (to the device)");
    sync();
  }
  void download(void* to, const void* from, std::size_t bytes) {
    check_cuda(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToHost, stream_),
               "cudaMemcpyAsync (to the host)");
    sync();
  }
  void fill(void* p, int byte, std::size_t bytes) {
    check_cuda(cudaMemsetAsync(p, byte, bytes, stream_), "cudaMemsetAsync");
  }
  void sync() { gpu_.sync(); }
  /// False once the context has a sticky error (nothing more can run).
  bool healthy() { return gpu_.healthy(); }

  template <class F>
  matrix<F> make_matrix(const quantized_shape& shape) {
    return matrix<F>(shape, stream_);
  }
  template <class F>
  void download(const matrix<F>& from, quantized_matrix<F>& to) {
    check_status(from.copy_to(to, stream_), "device_quantized_matrix::copy_to");
    sync();
  }
  template <class P>
  policy<P> make_policy(const P& p) {
    return policy<P>(p, stream_);
  }
  template <class P>
  cuda::tensor_scale_state<P> read_policy(const policy<P>& p) {
    cuda::tensor_scale_state<P> state;
    check_status(p.read(state, stream_), "device_tensor_scale::read");
    sync();
    return state;
  }

  // The operations timed.
  template <class F, class T>
  void quantize(matrix_view<const T> x, quantized_view<F> out, const quantize_options& options) {
    check_status(cuda::quantize_into(x, out, options, stream_), "cuda::quantize_into");
  }
  template <class R, class C, class T>
  void quantize_pair(matrix_view<const T> x, quantized_view<R> rowwise,
                     const quantize_options& rowwise_options, quantized_view<C> columnwise,
                     const quantize_options& columnwise_options) {
    check_status(
        cuda::quantize_into(x, rowwise, rowwise_options, columnwise, columnwise_options, stream_),
        "cuda::quantize_into (pair)");
  }
  template <class F, class T, class P>
  void quantize_step(matrix_view<const T> x, quantized_view<F> out, policy<P>& p,
                     const quantize_options& options) {
    check_status(cuda::quantize_into(x, out, p, options, stream_),
                 "cuda::quantize_into (device tensor-scale policy)");
  }
  template <class T>
  void amax(matrix_view<const T> x, std::uint32_t* bits, const quantize_options& options) {
    check_status(cuda::measure_amax(x, bits, options, stream_), "cuda::measure_amax");
  }
  template <class F, class T>
  void dequantize(const_quantized_view<F> q, matrix_view<T> out) {
    check_status(cuda::dequantize(q, out, stream_), "cuda::dequantize");
  }
  void memcpy_d2d(void* to, const void* from, std::size_t bytes) {
    check_cuda(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream_),
               "cudaMemcpyAsync (device to device)");
  }
  void copy_kernel(void* to, const void* from, std::size_t bytes) {
    if (bytes % 16 != 0)
      throw bench_error("copy_kernel: the size is not a multiple of 16 bytes");
    const std::size_t words = bytes / 16, per_block = copy_threads * copy_unroll;
    const std::size_t blocks = (words + per_block - 1) / per_block;
    copy_words<<<static_cast<unsigned>(blocks), copy_threads, 0, stream_>>>(
        static_cast<const uint4*>(from), static_cast<uint4*>(to), words);
    check_cuda(cudaGetLastError(), "copy kernel launch");
  }

  /// Times `op` (which queues work on the stream) as timing.cuh does: an L2 flush and a spin
  /// before each timed call, CUDA events around the call alone.
  template <class Op>
  timings time(Op&& op, const timing_plan& plan) {
    return gpu_.time(op, plan);
  }

  /// `op` captured once into a CUDA graph; the result replays it.
  template <class Op>
  auto captured(Op&& op) {
    struct captured_graph {
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      ~captured_graph() {
        if (exec != nullptr)
          (void)cudaGraphExecDestroy(exec);
        if (graph != nullptr)
          (void)cudaGraphDestroy(graph);
      }
    };
    auto g = std::make_shared<captured_graph>();
    check_cuda(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
               "cudaStreamBeginCapture");
    try {
      op();
    } catch (...) {
      cudaGraph_t partial = nullptr;
      (void)cudaStreamEndCapture(stream_, &partial);
      if (partial != nullptr)
        (void)cudaGraphDestroy(partial);
      throw;
    }
    check_cuda(cudaStreamEndCapture(stream_, &g->graph), "cudaStreamEndCapture");
    check_cuda(cudaGraphInstantiate(&g->exec, g->graph, 0), "cudaGraphInstantiate");
    return
        [g, stream = stream_] { check_cuda(cudaGraphLaunch(g->exec, stream), "cudaGraphLaunch"); };
  }

private:
  timed_device gpu_;
  cudaStream_t stream_; // gpu_'s
  int memory_clock_khz_ = 0;
};

} // namespace

int main(int argc, char** argv) {
  return bench_main(argc, argv, usage, parse, [](const bench_args& args) {
    if (args.emulate)
      return run_emulated(args);
    if (!found_cuda_device())
      return exit_no_device;
    device_backend backend(0);
    return run(backend, args);
  });
}
