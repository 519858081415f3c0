/// \file cuda/runner.cuh
/// `program_kernel<Program>`: the one `__global__` function every CTA program (cuda/warp.hpp) runs
/// as, phase after phase with `__syncthreads()` between them; and `device_runner`, the runner of
/// cuda/launch.hpp that queues it on a stream and reports the launch's error as a status.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <type_traits>

#include "status.hpp"
#include "tensor_map.cuh"
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

namespace detail {
template <int Phase, class Program, class State>
__device__ __forceinline__ void
run_loop_phases(const Program& program, device_warp& warp, cta_coord cta,
                typename Program::shared_storage& shared, State& state, int step) {
  program.template step<Phase>(warp, cta, shared, state, step);
  if constexpr (Phase + 1 < Program::loop_phases) {
    __syncthreads();
    run_loop_phases<Phase + 1>(program, warp, cta, shared, state, step);
  }
}
} // namespace detail

namespace detail {
/// `Program::min_ctas_per_sm` where the program declares it, else 0 (the compiler's choice): the
/// second argument of the looped kernel's `__launch_bounds__`, with which ptxas keeps each thread
/// within 64 K / (threads · it) registers and does not go below that on its own.
template <class Program, class = void>
struct min_ctas_per_sm : std::integral_constant<int, 0> {};
template <class Program>
struct min_ctas_per_sm<Program, std::void_t<decltype(Program::min_ctas_per_sm)>>
    : std::integral_constant<int, Program::min_ctas_per_sm> {};
} // namespace detail

/// Runs one CTA of a *looped* program: `begin`, a barrier, then `steps(cta)` times the phases
/// `step<0..loop_phases-1>` with `__syncthreads()` between phases (not between steps: a step's
/// first phase is what comes before its barrier), a barrier, then `end`. Each thread keeps its
/// `warp_state<device_warp>` in registers throughout. Shared storage is dynamic, so it may pass
/// 48 KiB.
template <class Program>
__global__ void __launch_bounds__(Program::threads, detail::min_ctas_per_sm<Program>::value)
    looped_program_kernel(const Program program) {
  extern __shared__ __align__(16) unsigned char looped_shared[];
  auto& shared = *reinterpret_cast<typename Program::shared_storage*>(looped_shared);
  device_warp warp;
  const cta_coord cta{blockIdx.x, gridDim.x};
  typename Program::template warp_state<device_warp> state;
  program.begin(warp, cta, shared, state);
  __syncthreads(); // what begin put in shared memory is there for every warp
  const int steps = program.steps(cta);
  for (int step = 0; step < steps; ++step)
    detail::run_loop_phases<0>(program, warp, cta, shared, state, step);
  __syncthreads(); // every warp is done with the steps before any runs end
  program.end(warp, cta, shared, state);
}

/// Runs one CTA of a *warp-specialised* program (emulation/host_async.hpp describes the kind):
/// `program.run(warp, cta, shared)` once per warp, which synchronise through `sync_cta`, mbarriers
/// and the asynchronous units (cuda/warp/async.hpp). The program is a `__grid_constant__`
/// parameter, so the TMA tensor maps it holds are usable as they are; its shared storage is
/// dynamic and aligned to 1024 bytes (the 128-byte swizzle's atom).
template <class Program>
__global__ void __launch_bounds__(Program::warps* warp_size, 1)
    specialized_program_kernel(const __grid_constant__ Program program) {
  extern __shared__ __align__(1024) unsigned char specialized_shared[];
  auto& shared = *reinterpret_cast<typename Program::shared_storage*>(specialized_shared);
  device_warp warp;
  program.run(warp, cta_coord{blockIdx.x, gridDim.x}, shared);
}

namespace detail {
/// Lets `kernel` take `bytes` of dynamic shared memory, where that is more than the 48 KiB every
/// kernel may take.
template <class Kernel>
status allow_dynamic_shared(Kernel kernel, int bytes) {
  if (bytes <= 48 * 1024)
    return {};
  const status set =
      cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
                  "cudaFuncSetAttribute (dynamic shared memory)");
  if (!set)
    (void)cudaGetLastError(); // not left for the next launch to report
  return set;
}
} // namespace detail

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

  template <class Program>
  status run_looped(const Program& program, std::size_t ctas) {
    if (ctas == 0)
      return {};
    constexpr int bytes = static_cast<int>(sizeof(typename Program::shared_storage));
    const status allowed = detail::allow_dynamic_shared(looped_program_kernel<Program>, bytes);
    if (!allowed)
      return allowed;
    looped_program_kernel<Program>
        <<<static_cast<unsigned>(ctas), Program::threads, bytes, stream>>>(program);
    return detail::cuda_status(cudaGetLastError(), "kernel launch");
  }
  /// Queues a warp-specialised program over `ctas` CTAs.
  template <class Program>
  status run_specialized(const Program& program, std::size_t ctas) {
    if (ctas == 0)
      return {};
    constexpr int bytes = static_cast<int>(sizeof(typename Program::shared_storage));
    const status allowed = detail::allow_dynamic_shared(specialized_program_kernel<Program>, bytes);
    if (!allowed)
      return allowed;
    specialized_program_kernel<Program>
        <<<static_cast<unsigned>(ctas), Program::warps * warp_size, bytes, stream>>>(program);
    return detail::cuda_status(cudaGetLastError(), "kernel launch");
  }

  /// The TMA descriptor of `shape` (cuda/tensor_map.cuh), for programs that take tensor maps.
  status tensor_map_2d(const warp::tensor_map_2d_shape& shape, warp::tensor_map& map) const {
    return make_tensor_map_2d(shape, map);
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
