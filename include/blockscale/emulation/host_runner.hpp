/// \file emulation/host_runner.hpp
/// `host_runner`: the runner of cuda/launch.hpp that executes a launch's CTA program on the host
/// (emulation/host_cta.hpp) instead of queueing its kernel. With it, `cuda::launch_quantize` and
/// the other launchers run their device code, argument checks and grid sizing included, on any
/// machine; pointers are host memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../cuda/status.hpp"
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
};

} // namespace emulation
} // namespace v0
} // namespace blockscale
