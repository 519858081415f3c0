// The warp-tile example of docs/cuda.md, built and run as two tests (device, and host emulation).
// A GEMM kernel of your own on the library's warp tile: one warp per CTA computes a 16 × 8 tile of
// C = A · Bᵀ, A in NVFP4 and B in UE5M3-FP4 (the bf16 path: in-register dequantization, any pair
// of scale formats, sm_80 and later), one k-step of both staged at a time in shared memory. The
// warp's code is written once over the Warp type: cuda::device_warp in the kernel (a lane is a
// thread), emulation::host_warp on the host (the 32 lanes in turn, the MMA emulated). nvcc builds
// the kernel (exit 77, skipped, without a device); cuda_warp_tile_host.cpp compiles this same file
// as plain C++, which runs the warp code on the host on every machine.
#include <blockscale/blockscale.hpp>
#include <blockscale/cuda/warp/tile.hpp>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>
#if defined(__CUDACC__)
#include <blockscale/cuda/buffer.cuh>
#else
#include <blockscale/emulation/host_warp.hpp>
#endif

using namespace blockscale;
namespace warp = cuda::warp;

using tile = warp::warp_tile<warp::bf16_path, 16, 8, nvfp4, ue5m3_fp4>;
constexpr int k_bytes = tile::k_step / 2;   // a row's packed E2M1 codes for one step (64 of K)
constexpr int k_blocks = tile::k_step / 16; // and its scale codes (both formats: blocks of 16)

// One k-step of the warp's rows of A and B as the loaders read them: rows of packed elements
// (8-byte aligned), then one scale code per block, row by row.
struct shared_tiles {
  alignas(16) std::uint8_t a[16][k_bytes];
  alignas(16) std::uint8_t b[8][k_bytes];
  std::uint8_t a_scales[16][k_blocks];
  std::uint8_t b_scales[8][k_blocks];
};

// Lane `lane`'s share of copying rows [row0, row0 + Rows), columns [k0, k0 + 64) of q.
template <int Rows, class F>
BLOCKSCALE_HOST_DEVICE void stage(int lane, const_quantized_view<F> q, std::size_t row0,
                                  std::size_t k0, std::uint8_t (&elements)[Rows][k_bytes],
                                  std::uint8_t (&scales)[Rows][k_blocks]) {
  for (int i = lane; i < Rows * k_bytes; i += 32)
    elements[i / k_bytes][i % k_bytes] = q.row(row0 + i / k_bytes)[k0 / 2 + i % k_bytes];
  for (int i = lane; i < Rows * k_blocks; i += 32)
    scales[i / k_blocks][i % k_blocks] =
        q.scales()[q.scale_index(row0 + i / k_blocks, k0 / 16 + i % k_blocks)];
}

BLOCKSCALE_HOST_DEVICE inline void sync_warp() {
#if defined(__CUDA_ARCH__)
  __syncwarp(); // on the host the lanes run one after another: nothing to wait for
#endif
}

// The warp's work: C[m0, m0 + 16) × [n0, n0 + 8) = A[m0 ...] · B[n0 ...]ᵀ.
template <class Warp>
BLOCKSCALE_HOST_DEVICE void
warp_gemm(const Warp& warp, shared_tiles& s, const_quantized_view<nvfp4> a,
          const_quantized_view<ue5m3_fp4> b, matrix_view<float> c, std::size_t m0, std::size_t n0) {
  tile::accumulators<Warp> acc;
  tile::clear(warp, acc);
  const warp::shared_operand sa{&s.a[0][0], k_bytes, &s.a_scales[0][0], k_blocks};
  const warp::shared_operand sb{&s.b[0][0], k_bytes, &s.b_scales[0][0], k_blocks};
  for (std::size_t k0 = 0; k0 < a.cols(); k0 += tile::k_step) {
    warp.each([&](int lane) {
      stage(lane, a, m0, k0, s.a, s.a_scales);
      stage(lane, b, n0, k0, s.b, s.b_scales);
    });
    sync_warp();                      // every lane's copies are seen by every lane
    tile::step(warp, acc, sa, sb, 0); // the staged columns [0, 64)
    sync_warp();                      // and read by all before the next copies
  }
  // The accumulators are the products times 2^-accumulator_exponent, before the tensor scales.
  const double scale = std::ldexp(static_cast<double>(a.decode_scale()) * b.decode_scale(),
                                  tile::accumulator_exponent);
  warp.each([&](int lane) {
    for (int i = 0; i < tile::tiles_m; ++i)
      for (int j = 0; j < tile::tiles_n; ++j)
        for (int r = 0; r < 4; ++r) {
          const warp::coord at = tile::coord_of(lane, i, j, r);
          c(m0 + at.row, n0 + at.col) = static_cast<float>(scale * acc.tile[i][j][lane].r[r]);
        }
  });
}

// The operands and the reference. E2M1 values with each block's largest 6 · 2^r: every partial sum
// is exact, so the reference, the emulation and the tensor cores agree bit for bit, whatever order
// the hardware adds in.
struct problem {
  static constexpr std::size_t m = 48, n = 32, k = 256; // multiples of 16, 8 and the k-step
  quantized_matrix<nvfp4> a;
  quantized_matrix<ue5m3_fp4> b;
  std::vector<float> want;
};

inline problem make_problem() {
  const std::size_t m = problem::m, n = problem::n, k = problem::k;
  const auto values = [&](std::size_t rows, std::size_t step) {
    const float grid[] = {0.0f, 0.5f, -1.0f, 1.5f, -2.0f, 3.0f, -4.0f, 6.0f};
    std::vector<float> x(rows * k);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t j = 0; j < k; ++j)
        x[r * k + j] = std::ldexp(j % 16 == 0 ? 6.0f : grid[(step * j + r) % 8], int(r % 3) - 1);
    return x;
  };
  const std::vector<float> x = values(m, 5), w = values(n, 3);
  std::vector<float> want(m * n);
  auto a = quantize<nvfp4>(matrix_view<const float>(x.data(), m, k));
  auto b = quantize<ue5m3_fp4>(matrix_view<const float>(w.data(), n, k));
  gemm::reference(a, b, matrix_view<float>(want.data(), m, n));
  return {std::move(a), std::move(b), std::move(want)};
}

#if defined(__CUDACC__) // the kernel, one CTA of one warp per tile
__global__ void gemm_kernel(const_quantized_view<nvfp4> a, const_quantized_view<ue5m3_fp4> b,
                            matrix_view<float> c) {
  __shared__ shared_tiles s;
  warp_gemm(cuda::device_warp{}, s, a, b, c, 16 * blockIdx.y, 8 * blockIdx.x);
}

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    return 77;
  const problem p = make_problem();
  cuda::device_quantized_matrix<nvfp4> a(p.a.shape(), nullptr);
  cuda::device_quantized_matrix<ue5m3_fp4> b(p.b.shape(), nullptr);
  cuda::device_allocation memory(p.m * p.n * sizeof(float), nullptr);
  float* c = reinterpret_cast<float*>(memory.data());
  std::vector<float> got(p.m * p.n);
  bool ok = a.copy_from(p.a, nullptr) && b.copy_from(p.b, nullptr);
  if (ok)
    gemm_kernel<<<dim3(p.n / 8, p.m / 16), 32>>>(a.view(), b.view(),
                                                 matrix_view<float>::unchecked(c, p.m, p.n, p.n));
  ok = ok && cudaMemcpy(got.data(), c, memory.size(), cudaMemcpyDeviceToHost) == cudaSuccess;
  std::printf("device_warp == reference: %s\n", ok && got == p.want ? "yes" : "no");
  return ok && got == p.want ? 0 : 1;
}
#else // the same warp code on the host, one warp per tile
int main() {
  const problem p = make_problem();
  std::vector<float> got(p.m * p.n);
  shared_tiles s;
  for (std::size_t m0 = 0; m0 < p.m; m0 += 16)
    for (std::size_t n0 = 0; n0 < p.n; n0 += 8)
      warp_gemm(emulation::host_warp{0}, s, p.a.view(), p.b.view(),
                matrix_view<float>(got.data(), p.m, p.n), m0, n0);
  std::printf("host_warp == reference: %s\n", got == p.want ? "yes" : "no");
  return got == p.want ? 0 : 1;
}
#endif
