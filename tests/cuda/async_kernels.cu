// A warp-specialised program (tests/support/async_ring.hpp: a TMA producer warp, mbarriers, two
// consumer warps storing by TMA) compiled through the specialised kernel of cuda/runner.cuh for
// sm_90a, for the static check wgmma_static.py: the kernel must hold the mbarrier, TMA, proxy
// fence and setmaxnreg instructions and no local memory. The host test runs the same program.
#include <blockscale/cuda/runner.cuh>

#include "async_ring.hpp"

namespace blockscale_static {

blockscale::cuda::status launch_async_ring(const blockscale_test::async_ring::ring_program& p,
                                           std::size_t ctas, cudaStream_t stream) {
  return blockscale::cuda::device_runner{stream}.run_specialized(p, ctas);
}

} // namespace blockscale_static
