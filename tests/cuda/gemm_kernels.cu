// The GEMM kernels of cuda/gemm.cuh, instantiated through the public entry points for the static
// checks of tests/cuda (no GPU needed). Compiled like kernels.cu, for every architecture in
// CMAKE_CUDA_ARCHITECTURES with warnings as errors, into the same object library; the ctest
// (cuda_static.py check) then reads the SASS of these kernels as well: no spills or local memory
// (as for every kernel), and per k-tile of the main loop the expected number of HMMA (bf16 path),
// of OMMA (block-scaled path, sm_120a), and no QMMA.
//
// Nothing here runs. `cuda::gemm` chooses its shape at run time, so each call below instantiates
// every shape it can choose: gemm_small_m (in-register dequantization, bf16_path), gemm_large_m
// (each k-tile dequantized once into shared memory, bf16_staged_path), gemm_large_m_in_register
// (the same tiles dequantized in registers by every warp, bf16_path: where a block's shared
// memory is too small for gemm_large_m) and, for NVFP4 × NVFP4 and MXFP4 × MXFP4,
// gemm_block_scaled. With float out that is 14 kernels for the four format pairs, plus the probe
// kernel that tells whether the device code has the block-scaled MMA; gemm_with_shape adds one
// bfloat16-out kernel. gemm_block_scaled is compiled for every architecture: outside sm_120a (and
// sm_121a) its MMA is a trap, which the check accepts there (and only there).
#include <blockscale/blockscale.hpp>
#include <blockscale/cuda/gemm.cuh>

#include <cuda_runtime_api.h>

namespace blockscale_static {

using namespace blockscale;

/// The kernels `cuda::gemm` can choose for these formats, float or bfloat16 out.
template <class FormatA, class FormatB, class Out>
cuda::status gemm(const_quantized_view<FormatA> a, const_quantized_view<FormatB> b,
                  matrix_view<Out> c, cudaStream_t stream) {
  return cuda::gemm(a, b, c, 1.0f, 0.0f, stream);
}

/// One shape only.
template <class Shape, class FormatA, class FormatB, class Out>
cuda::status gemm_with_shape(const_quantized_view<FormatA> a, const_quantized_view<FormatB> b,
                             matrix_view<Out> c, cudaStream_t stream) {
  return cuda::gemm_with_shape<Shape>(a, b, c, 1.0f, 0.0f, stream);
}

// ---- the instantiations -----------------------------------------------------------------------

#define BLOCKSCALE_STATIC_GEMM(FA, FB)                                                             \
  template cuda::status gemm<FA, FB, float>(const_quantized_view<FA>, const_quantized_view<FB>,    \
                                            matrix_view<float>, cudaStream_t);

BLOCKSCALE_STATIC_GEMM(nvfp4, nvfp4)         // small_m, large_m, large_m_in_register, block_scaled
BLOCKSCALE_STATIC_GEMM(ue5m3_fp4, ue5m3_fp4) // small_m, large_m, large_m_in_register
BLOCKSCALE_STATIC_GEMM(mxfp4, mxfp4)         // small_m, large_m, large_m_in_register, block_scaled
BLOCKSCALE_STATIC_GEMM(nvfp4, mxfp4)         // small_m, large_m, large_m_in_register

#define BLOCKSCALE_STATIC_GEMM_SHAPE(Shape, FA, FB, Out)                                           \
  template cuda::status gemm_with_shape<Shape, FA, FB, Out>(                                       \
      const_quantized_view<FA>, const_quantized_view<FB>, matrix_view<Out>, cudaStream_t);

BLOCKSCALE_STATIC_GEMM_SHAPE(cuda::gemm_large_m, nvfp4, nvfp4, bfloat16)

#undef BLOCKSCALE_STATIC_GEMM
#undef BLOCKSCALE_STATIC_GEMM_SHAPE

} // namespace blockscale_static
