// Two warp-specialised programs compiled through the specialised kernel of cuda/runner.cuh for
// sm_90a, for the static check wgmma_static.py: the ring (tests/support/async_ring.hpp: a TMA
// producer warp, mbarriers, two consumer warps storing by TMA) must hold the mbarrier, TMA, proxy
// fence and setmaxnreg instructions, the GEMM (tests/support/async_gemm.hpp) the warpgroup MMA
// with A by descriptor and in registers, and neither local memory. The host test runs the same
// programs.
#include <blockscale/cuda/runner.cuh>

#include "async_gemm.hpp"
#include "async_ring.hpp"

namespace blockscale_static {

blockscale::cuda::status launch_async_ring(const blockscale_test::async_ring::ring_program& p,
                                           std::size_t ctas, cudaStream_t stream) {
  return blockscale::cuda::device_runner{stream}.run_specialized(p, ctas);
}

blockscale::cuda::status launch_async_gemm(const blockscale_test::async_gemm::gemm_program& p,
                                           std::size_t ctas, cudaStream_t stream) {
  return blockscale::cuda::device_runner{stream}.run_specialized(p, ctas);
}

} // namespace blockscale_static
