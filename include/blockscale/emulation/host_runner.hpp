/// \file emulation/host_runner.hpp
/// `host_runner`: the runner of cuda/launch.hpp that executes a launch's CTA program on the host
/// (emulation/host_cta.hpp) instead of queueing its kernel. With it, `cuda::launch_quantize` and
/// the other launchers run their device code, argument checks and grid sizing included, on any
/// machine; pointers are host memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "../cuda/status.hpp"
#include "../cuda/warp/async.hpp"
#include "host_async.hpp"
#include "host_cta.hpp"

namespace blockscale {
inline namespace v0 {
namespace emulation {

/// Runs programs on the host.
struct host_runner {
  /// The grid of grid-stride programs: small, so that tests take the grid-stride loops' turns.
  std::size_t persistent = 3;
  /// Nonzero: CTAs run in a shuffled order (run_grid).
  std::uint64_t order_seed = 0;
  /// CTAs run so far, over all launches.
  std::size_t ctas_run = 0;
  /// Launches so far.
  std::size_t launches = 0;

  /// The tensor-core arithmetic the MMAs follow (emulation/ptx.hpp).
  ptx::mma_model mma = ptx::default_mma_model;

  template <class Program>
  cuda::status run(const Program& program, std::size_t ctas) {
    run_grid(program, ctas, order_seed, mma);
    ctas_run += ctas;
    ++launches;
    return {};
  }
  /// When emulated asynchronous copies land (host_warp.hpp).
  async_copies copies = async_copies::eager;
  template <class Program>
  cuda::status run_looped(const Program& program, std::size_t ctas) {
    run_looped_grid(program, ctas, order_seed, copies, mma);
    ctas_run += ctas;
    ++launches;
    return {};
  }
  std::size_t persistent_ctas() const noexcept { return persistent; }

  /// A warp-specialised program (emulation/host_async.hpp), its warps interleaved by
  /// `order_seed` (0: a warp runs until it must wait).
  template <class Program>
  cuda::status run_specialized(const Program& program, std::size_t ctas) {
    run_specialized_grid(program, ctas, order_seed, mma);
    ctas_run += ctas;
    ++launches;
    return {};
  }
  /// The emulation's tensor map of `shape`; refuses what cuda::warp::tensor_map_2d_problem names.
  cuda::status tensor_map_2d(const cuda::warp::tensor_map_2d_shape& shape,
                             cuda::warp::tensor_map& map) const {
    const std::string problem = cuda::warp::tensor_map_2d_problem(shape);
    if (!problem.empty())
      return {cuda::errc::invalid_argument, "make_tensor_map_2d: " + problem};
    map = make_tensor_map_2d(shape);
    return {};
  }
};

} // namespace emulation
} // namespace v0
} // namespace blockscale
