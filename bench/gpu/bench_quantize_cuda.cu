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
// this file (the device backend, the benchmark's own kernels, main) and bench_emulated.cpp (the
// host emulation backend).
#include <blockscale/cuda/quantize.cuh>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench_core.hpp"

using namespace blockscale;
using namespace blockscale_bench;

namespace {

void check_cuda(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess)
    throw bench_error(what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

// ------------------------------------------------------------------------------------------------
// Device kernels of the benchmark itself: the copy baseline, the L2 flush and the spin that lets
// the host queue a timed call before it starts.

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

/// Reads n 16-byte words (grid-stride), so that the L2 holds clean lines of this buffer only.
__global__ void __launch_bounds__(copy_threads)
    read_words(const uint4* __restrict__ from, std::size_t n, unsigned* sink) {
  unsigned acc = 0;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const uint4 v = from[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9E3779B9u) // keeps the loads; the fill pattern never gives it
    *sink = acc;
}

/// Spins one thread for `cycles` SM clocks.
__global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
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

  explicit device_backend(int device) : device_(device) {
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
    check_cuda(cudaGetDeviceProperties(&props_, device), "cudaGetDeviceProperties");
    // The clocks are for the report and for sizing the spin only: a runtime that no longer
    // answers (CUDA 13 dropped them from cudaDeviceProp) gives 0, not a failure.
    if (cudaDeviceGetAttribute(&clock_khz_, cudaDevAttrClockRate, device) != cudaSuccess)
      clock_khz_ = 0;
    if (cudaDeviceGetAttribute(&memory_clock_khz_, cudaDevAttrMemoryClockRate, device) !=
        cudaSuccess)
      memory_clock_khz_ = 0;
    (void)cudaGetLastError();
    spin_khz_ = clock_khz_ > 0 ? clock_khz_ : 2000000;
    check_cuda(cudaDriverGetVersion(&driver_), "cudaDriverGetVersion");
    check_cuda(cudaRuntimeGetVersion(&runtime_), "cudaRuntimeGetVersion");
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
               "cudaStreamCreateWithFlags");
    const std::size_t l2 = props_.l2CacheSize > 0 ? static_cast<std::size_t>(props_.l2CacheSize)
                                                  : std::size_t{64} << 20;
    flush_bytes_ = std::max<std::size_t>(2 * l2, std::size_t{32} << 20) / 16 * 16;
    flush_write_ = buffer(flush_bytes_, stream_);
    flush_read_ = buffer(flush_bytes_, stream_);
    sink_ = buffer(16, stream_);
    fill(flush_read_.data(), 0x5A, flush_bytes_);
    fill(sink_.data(), 0, 16);
    sync();
  }
  device_backend(const device_backend&) = delete;
  device_backend& operator=(const device_backend&) = delete;
  ~device_backend() {
    (void)cudaStreamSynchronize(stream_);
    flush_write_ = buffer();
    flush_read_ = buffer();
    sink_ = buffer();
    for (cudaEvent_t e : events_)
      (void)cudaEventDestroy(e);
    (void)cudaStreamSynchronize(stream_);
    (void)cudaStreamDestroy(stream_);
  }

  std::vector<std::string> describe() const {
    std::ostringstream device;
    device << "#" << device_ << " " << props_.name << " (sm_" << props_.major << props_.minor
           << "), " << props_.multiProcessorCount << " SMs, L2 "
           << static_cast<double>(props_.l2CacheSize) / (1 << 20) << " MiB, "
           << static_cast<double>(props_.totalGlobalMem) / (1ull << 30) << " GiB, SM clock up to "
           << clock_khz_ / 1000 << " MHz, memory clock " << memory_clock_khz_ / 1000 << " MHz, "
           << props_.memoryBusWidth << "-bit bus";
    std::ostringstream versions;
    versions << "CUDA driver " << driver_ / 1000 << "." << driver_ % 1000 / 10 << ", runtime "
             << runtime_ / 1000 << "." << runtime_ % 1000 / 10;
    return {"device: " + device.str(), versions.str()};
  }
  std::size_t flush_bytes() const noexcept { return flush_bytes_; }

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
  void sync() { check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }
  /// False once the context has a sticky error (nothing more can run).
  bool healthy() {
    (void)cudaGetLastError();
    return cudaDeviceSynchronize() == cudaSuccess;
  }

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

  /// Times `op` (which queues work on the stream): `warmup` untimed calls, then per timed call an
  /// L2 flush and a spin long enough for the host to queue the call, then CUDA events around the
  /// call alone. Returns each call's device and host-queueing times in microseconds.
  template <class Op>
  timings time(Op&& op, const timing_plan& plan) {
    double enqueue_us = 0.0;
    for (int i = 0; i < std::max(plan.warmup, 1); ++i) {
      flush();
      const auto start = std::chrono::steady_clock::now();
      op();
      enqueue_us = std::max(enqueue_us, microseconds_since(start));
      sync();
    }
    // The host must be ahead of the device when the start event fires: spin 20 µs plus twice the
    // longest time the host took to queue one call (capped at 5 ms).
    const double spin_us = std::min(20.0 + 2.0 * enqueue_us, 5000.0);
    const auto cycles = static_cast<long long>(spin_us * spin_khz_ / 1000.0);
    while (events_.size() < 2 * static_cast<std::size_t>(plan.iterations)) {
      cudaEvent_t e = nullptr;
      check_cuda(cudaEventCreate(&e), "cudaEventCreate");
      events_.push_back(e);
    }
    timings t;
    for (int i = 0; i < plan.iterations; ++i) {
      flush();
      spin<<<1, 1, 0, stream_>>>(cycles);
      check_cuda(cudaGetLastError(), "spin kernel launch");
      check_cuda(cudaEventRecord(events_[2 * i], stream_), "cudaEventRecord");
      const auto queued = std::chrono::steady_clock::now();
      op();
      t.host_us.push_back(microseconds_since(queued));
      check_cuda(cudaEventRecord(events_[2 * i + 1], stream_), "cudaEventRecord");
    }
    sync();
    for (int i = 0; i < plan.iterations; ++i) {
      float ms = 0.0f;
      check_cuda(cudaEventElapsedTime(&ms, events_[2 * i], events_[2 * i + 1]),
                 "cudaEventElapsedTime");
      t.device_us.push_back(1000.0 * static_cast<double>(ms));
    }
    return t;
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
  /// Writes one buffer of twice the L2, then reads another: the L2 then holds clean lines of the
  /// second alone, so a timed call neither finds its data cached nor pays for writing back lines
  /// dirtied before it (the previous call's output, the write here).
  void flush() {
    fill(flush_write_.data(), ++flush_pattern_ & 0xFF, flush_bytes_);
    const auto blocks = static_cast<unsigned>(std::max(props_.multiProcessorCount, 1) * 4);
    read_words<<<blocks, copy_threads, 0, stream_>>>(
        reinterpret_cast<const uint4*>(flush_read_.data()), flush_bytes_ / 16,
        reinterpret_cast<unsigned*>(sink_.data()));
    check_cuda(cudaGetLastError(), "flush kernel launch");
  }

  int device_ = 0;
  cudaDeviceProp props_{};
  int clock_khz_ = 0, spin_khz_ = 0, memory_clock_khz_ = 0, driver_ = 0, runtime_ = 0;
  cudaStream_t stream_ = nullptr;
  std::size_t flush_bytes_ = 0;
  buffer flush_write_, flush_read_, sink_;
  int flush_pattern_ = 0x5A;
  std::vector<cudaEvent_t> events_;
};

} // namespace

int main(int argc, char** argv) {
  bench_args args;
  try {
    args = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n%s", e.what(), usage);
    return exit_usage;
  }
  std::fprintf(stderr, "[bench] seed %llu\n", static_cast<unsigned long long>(args.seed));
  try {
    if (args.emulate)
      return run_emulated(args);
    int devices = 0;
    const cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices == 0) {
      std::printf("no CUDA device (%s): skipped\n",
                  e != cudaSuccess ? cudaGetErrorName(e) : "none found");
      return exit_no_device;
    }
    device_backend backend(0);
    return run(backend, args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return exit_failed;
  }
}
