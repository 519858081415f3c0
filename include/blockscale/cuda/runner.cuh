/// \file cuda/runner.cuh
/// `program_kernel<Program>`: the one `__global__` function every CTA program (cuda/warp.hpp) runs
/// as, phase after phase with `__syncthreads()` between them; and `device_runner`, the runner of
/// cuda/launch.hpp that queues it on a stream and reports the launch's error as a status.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "status.hpp"
#include "warp.hpp"

namespace blockscale {
inline namespace v0 {
namespace cuda {
namespace detail {

template <int Phase, class Program>
__device__ __forceinline__ void run_device_phases(const Program& program, device_warp& warp,
                                                  cta_coord cta,
                                                  typename Program::shared_storage& shared) {
  program.template run<Phase>(warp, cta, shared);
  if constexpr (Phase + 1 < Program::phases) {
    __syncthreads();
    run_device_phases<Phase + 1>(program, warp, cta, shared);
  }
}

/// A status for a CUDA error, naming where it happened.
inline status cuda_status(cudaError_t error, const char* where) {
  if (error == cudaSuccess)
    return {};
  return {errc::cuda_error,
          std::string(where) + ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) +
              ")",
          static_cast<int>(error)};
}

} // namespace detail

/// Runs one CTA of `Program` per block: `Program::threads` threads, its shared storage static.
template <class Program>
__global__ void __launch_bounds__(Program::threads) program_kernel(const Program program) {
  __shared__ typename Program::shared_storage shared;
  device_warp warp;
  detail::run_device_phases<0>(program, warp, cta_coord{blockIdx.x, gridDim.x}, shared);
}

/// Queues programs on `stream`.
struct device_runner {
  cudaStream_t stream = nullptr;
  /// CTAs of the grid-stride kernels: `ctas_per_sm` per multiprocessor of the current device.
  int ctas_per_sm = 8;

  template <class Program>
  status run(const Program& program, std::size_t ctas) {
    if (ctas == 0)
      return {};
    program_kernel<Program><<<static_cast<unsigned>(ctas), Program::threads, 0, stream>>>(program);
    return detail::cuda_status(cudaGetLastError(), "kernel launch");
  }

  std::size_t persistent_ctas() const {
    int device = 0, sms = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        sms <= 0) {
      (void)cudaGetLastError(); // the launch that follows reports the device's trouble
      return 1024;
    }
    return static_cast<std::size_t>(sms) * static_cast<std::size_t>(ctas_per_sm);
  }
};

} // namespace cuda
} // namespace v0
} // namespace blockscale
