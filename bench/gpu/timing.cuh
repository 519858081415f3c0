// The device timing both CUDA benchmarks use: a device's properties and a stream, and the timing of
// calls queued on that stream, each after an untimed L2 flush and a spin kernel, with CUDA events
// around the call alone (bench/gpu/README.md, "How the timing is done").
#pragma once

#include <blockscale/cuda/buffer.cuh>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace blockscale_bench {

/// Throws a bench_error naming `what` and the error when a CUDA runtime call failed.
inline void check_cuda(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess)
    throw bench_error(what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

/// Whether the machine has a CUDA device; where it has none, says so on stdout ("no CUDA device
/// (why): skipped"), and the benchmark exits with exit_no_device.
inline bool found_cuda_device() {
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e == cudaSuccess && devices > 0)
    return true;
  std::printf("no CUDA device (%s): skipped\n",
              e != cudaSuccess ? cudaGetErrorName(e) : "none found");
  return false;
}

namespace detail {

// Static: a kernel cannot be inline, and each benchmark includes this header in one file only.

inline constexpr int flush_threads = 256;

/// Reads n 16-byte words (grid-stride), so that the L2 holds clean lines of this buffer only.
static __global__ void __launch_bounds__(flush_threads)
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
static __global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

} // namespace detail

/// A device to time calls on: its properties, a non-blocking stream, the L2 flush's buffers and
/// the events. Not copyable; the destructor waits for the stream.
class timed_device {
public:
  explicit timed_device(int device) : device_(device) {
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
    check_cuda(cudaGetDeviceProperties(&props_, device), "cudaGetDeviceProperties");
    // The SM clock is for the report and for sizing the spin only: a runtime that no longer
    // answers (CUDA 13 dropped it from cudaDeviceProp) gives 0, not a failure.
    if (cudaDeviceGetAttribute(&clock_khz_, cudaDevAttrClockRate, device) != cudaSuccess)
      clock_khz_ = 0;
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
    check_cuda(cudaMemsetAsync(flush_read_.data(), 0x5A, flush_bytes_, stream_), "cudaMemsetAsync");
    check_cuda(cudaMemsetAsync(sink_.data(), 0, 16, stream_), "cudaMemsetAsync");
    sync();
  }
  timed_device(const timed_device&) = delete;
  timed_device& operator=(const timed_device&) = delete;
  ~timed_device() {
    (void)cudaStreamSynchronize(stream_);
    flush_write_ = buffer();
    flush_read_ = buffer();
    sink_ = buffer();
    for (cudaEvent_t e : events_)
      (void)cudaEventDestroy(e);
    (void)cudaStreamSynchronize(stream_);
    (void)cudaStreamDestroy(stream_);
  }

  int device() const noexcept { return device_; }
  const cudaDeviceProp& properties() const noexcept { return props_; }
  /// The SM clock's maximum in kHz, 0 where the runtime does not say.
  int clock_khz() const noexcept { return clock_khz_; }
  /// "CUDA driver a.b, runtime c.d".
  std::string versions() const {
    return "CUDA driver " + std::to_string(driver_ / 1000) + "." +
           std::to_string(driver_ % 1000 / 10) + ", runtime " + std::to_string(runtime_ / 1000) +
           "." + std::to_string(runtime_ % 1000 / 10);
  }
  cudaStream_t stream() const noexcept { return stream_; }
  /// The bytes one L2 flush writes (and reads).
  std::size_t flush_bytes() const noexcept { return flush_bytes_; }
  void sync() { check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }
  /// False once the context has a sticky error (nothing more can run).
  bool healthy() {
    (void)cudaGetLastError();
    return cudaDeviceSynchronize() == cudaSuccess;
  }

  /// Times `op` (which queues work on the stream): `plan.warmup` untimed calls (at least one),
  /// then `plan.iterations` timed ones, each after an L2 flush and a spin long enough for the
  /// host to have queued the call, with CUDA events around the call alone. Returns each timed
  /// call's device and host-queueing times in microseconds.
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
      detail::spin<<<1, 1, 0, stream_>>>(cycles);
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

private:
  using buffer = blockscale::cuda::device_allocation;

  /// Writes one buffer of twice the L2, then reads another: the L2 then holds clean lines of the
  /// second alone, so a timed call neither finds its data cached nor pays for writing back lines
  /// dirtied before it (the previous call's output, the write here).
  void flush() {
    check_cuda(cudaMemsetAsync(flush_write_.data(), ++flush_pattern_ & 0xFF, flush_bytes_, stream_),
               "cudaMemsetAsync (flush)");
    const auto blocks = static_cast<unsigned>(std::max(props_.multiProcessorCount, 1) * 4);
    detail::read_words<<<blocks, detail::flush_threads, 0, stream_>>>(
        reinterpret_cast<const uint4*>(flush_read_.data()), flush_bytes_ / 16,
        reinterpret_cast<unsigned*>(sink_.data()));
    check_cuda(cudaGetLastError(), "flush kernel launch");
  }

  int device_ = 0;
  cudaDeviceProp props_{};
  int clock_khz_ = 0, spin_khz_ = 0, driver_ = 0, runtime_ = 0;
  cudaStream_t stream_ = nullptr;
  std::size_t flush_bytes_ = 0;
  buffer flush_write_, flush_read_, sink_;
  int flush_pattern_ = 0x5A;
  std::vector<cudaEvent_t> events_;
};

} // namespace blockscale_bench
