// The warpgroup MMA ops of cuda/warp/wgmma.hpp in kernels, compiled for sm_90a only, for the
// static check wgmma_static.py: each kernel must hold one HGMMA.64xNx16.F32.BF16 with A from a
// descriptor (SS) and one with A from registers (RS), and no local memory. What the kernels
// compute is the device test's business; these only need to keep both forms alive.
#include <blockscale/cuda/warp/wgmma.hpp>

#include <cstdint>

namespace warp = blockscale::cuda::warp;

template <int N>
__global__ void wgmma_ss_then_rs(float* out, const std::uint32_t* a_words, std::uint64_t a_bits,
                                 std::uint64_t b_bits) {
  warp::wgmma_accumulator<N> acc{};
  const unsigned t = threadIdx.x;
  const warp::a_fragment a{
      {a_words[4 * t], a_words[4 * t + 1], a_words[4 * t + 2], a_words[4 * t + 3]}};
  warp::wgmma_fence();
  warp::wgmma_bf16_ss<N>::fma(acc, warp::smem_descriptor{a_bits}, warp::smem_descriptor{b_bits},
                              false);
  warp::wgmma_bf16_rs<N>::fma(acc, a, warp::smem_descriptor{b_bits}, true);
  warp::wgmma_commit_group();
  warp::wgmma_wait_group<0>();
  for (int i = 0; i < N / 2; ++i)
    out[t * (N / 2) + i] = acc.r[i];
}

template __global__ void wgmma_ss_then_rs<8>(float*, const std::uint32_t*, std::uint64_t,
                                             std::uint64_t);
template __global__ void wgmma_ss_then_rs<16>(float*, const std::uint32_t*, std::uint64_t,
                                              std::uint64_t);
template __global__ void wgmma_ss_then_rs<32>(float*, const std::uint32_t*, std::uint64_t,
                                              std::uint64_t);
template __global__ void wgmma_ss_then_rs<64>(float*, const std::uint32_t*, std::uint64_t,
                                              std::uint64_t);
template __global__ void wgmma_ss_then_rs<128>(float*, const std::uint32_t*, std::uint64_t,
                                               std::uint64_t);
template __global__ void wgmma_ss_then_rs<256>(float*, const std::uint32_t*, std::uint64_t,
                                               std::uint64_t);
