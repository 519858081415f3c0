// Two warp-specialised programs compiled through the specialised kernel of cuda/runner.cuh for
// sm_90a, for the static check wgmma_static.py: the ring (tests/support/async_ring.hpp: a TMA
// producer warp, mbarriers, two consumer warps storing by TMA) must hold the mbarrier, TMA, proxy
// fence and setmaxnreg instructions, the GEMM (tests/support/async_gemm.hpp) the warpgroup MMA
// with A by descriptor and in registers, and neither local memory. The host test runs the same
// programs.
#include <blockscale/block/block_format.hpp>
#include <blockscale/cuda/gemm.hpp>
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

// The W4A16 GEMM (cuda/kernels/gemm_w4a16.hpp) through its launcher, one instantiation per shape
// and a scale format each: UE4M3 (NVFP4), UE5M3 and UE8M0 (MXFP4, two multiplies) multipliers.
namespace bs = blockscale;
template <class Shape, class Format, class Out>
bs::cuda::status launch_w4a16(bs::matrix_view<const bs::bfloat16> x,
                              bs::const_quantized_view<Format> w, bs::matrix_view<Out> c,
                              cudaStream_t stream) {
  bs::cuda::device_runner runner{stream};
  return bs::cuda::launch_gemm_w4a16<Shape>(runner, x, w, c, 1.0f, 0.0f);
}
template bs::cuda::status launch_w4a16<bs::cuda::gemm_wgmma_small, bs::nvfp4, float>(
    bs::matrix_view<const bs::bfloat16>, bs::const_quantized_view<bs::nvfp4>,
    bs::matrix_view<float>, cudaStream_t);
template bs::cuda::status launch_w4a16<bs::cuda::gemm_wgmma_medium, bs::ue5m3_fp4, bs::bfloat16>(
    bs::matrix_view<const bs::bfloat16>, bs::const_quantized_view<bs::ue5m3_fp4>,
    bs::matrix_view<bs::bfloat16>, cudaStream_t);
template bs::cuda::status launch_w4a16<bs::cuda::gemm_wgmma_large, bs::nvfp4, float>(
    bs::matrix_view<const bs::bfloat16>, bs::const_quantized_view<bs::nvfp4>,
    bs::matrix_view<float>, cudaStream_t);
template bs::cuda::status launch_w4a16<bs::cuda::gemm_wgmma_large, bs::mxfp4, float>(
    bs::matrix_view<const bs::bfloat16>, bs::const_quantized_view<bs::mxfp4>,
    bs::matrix_view<float>, cudaStream_t);

// The FP4 × FP4 GEMM on wgmma: the producer dequantizes A into the swizzled buffer.
template <class Shape, class FA, class FB, class Out>
bs::cuda::status launch_fp4(bs::const_quantized_view<FA> a, bs::const_quantized_view<FB> b,
                            bs::matrix_view<Out> c, cudaStream_t stream) {
  bs::cuda::device_runner runner{stream};
  return bs::cuda::launch_gemm_wgmma<Shape>(runner, a, b, c, 1.0f, 0.0f);
}
template bs::cuda::status launch_fp4<bs::cuda::gemm_wgmma_large, bs::nvfp4, bs::nvfp4, float>(
    bs::const_quantized_view<bs::nvfp4>, bs::const_quantized_view<bs::nvfp4>,
    bs::matrix_view<float>, cudaStream_t);
template bs::cuda::status
    launch_fp4<bs::cuda::gemm_wgmma_small, bs::ue5m3_fp4, bs::ue5m3_fp4, bs::bfloat16>(
        bs::const_quantized_view<bs::ue5m3_fp4>, bs::const_quantized_view<bs::ue5m3_fp4>,
        bs::matrix_view<bs::bfloat16>, cudaStream_t);

} // namespace blockscale_static
