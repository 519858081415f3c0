// The GEMM example of docs/cuda.md, compiled for every CUDA architecture and run as a test.
// Two matrices quantized to NVFP4 on the device, multiplied there by cuda::gemm, and checked on the
// host against gemm::reference on the same bytes. Exits 77 (skipped) without a device.
#include <algorithm>
#include <blockscale/blockscale.hpp>
#include <blockscale/cuda/gemm.cuh>
#include <blockscale/cuda/quantize.cuh>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <vector>

using namespace blockscale;

void check(cudaError_t e) {
  if (e != cudaSuccess)
    throw std::runtime_error(cudaGetErrorString(e));
}

// rows × cols values spread over 13 binades, so that the FP32 sums round.
std::vector<float> values(std::size_t rows, std::size_t cols, float seed) {
  std::vector<float> x(rows * cols);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(seed * static_cast<float>(i)) * std::exp2(static_cast<float>(i % 13) - 6.0f);
  return x;
}

// `host` copied to the device and quantized there to NVFP4 along K, its tensor scale from the amax
// measured on the device (current scaling); s_dec stays in device memory, where the GEMM reads it.
cuda::device_quantized_matrix<nvfp4> to_device(const std::vector<float>& host, std::size_t rows,
                                               std::size_t cols, cudaStream_t stream) {
  cuda::device_allocation memory(host.size() * sizeof(float), stream);
  check(cudaMemcpyAsync(memory.data(), host.data(), memory.size(), cudaMemcpyHostToDevice, stream));
  const auto x = matrix_view<const float>::unchecked(reinterpret_cast<const float*>(memory.data()),
                                                     rows, cols, cols);
  quantize_options options;
  options.layout = scale_layout::tensor_core;
  cuda::device_quantized_matrix<nvfp4> q(quantized_shape_for(rows, cols, options), stream);
  cuda::device_tensor_scale<current_tensor_scale> policy(current_tensor_scale::make<nvfp4>(),
                                                         stream);
  cuda::quantize_into(x, q.view(), policy, options, stream).throw_if_error();
  return q;
}

// C[M×N] = A · Bᵀ on the device against gemm::reference on the same quantized bytes.
bool check_gemm(std::size_t m, std::size_t n, std::size_t k, cudaStream_t stream) {
  const std::vector<float> x = values(m, k, 0.37f), w = values(n, k, 0.11f);
  const cuda::device_quantized_matrix<nvfp4> a = to_device(x, m, k, stream);
  const cuda::device_quantized_matrix<nvfp4> b = to_device(w, n, k, stream);
  cuda::device_allocation memory(m * n * sizeof(float), stream);
  const auto c = matrix_view<float>::unchecked(reinterpret_cast<float*>(memory.data()), m, n, n);
  cuda::gemm(a.view(), b.view(), c, 1.0f, 0.0f, stream).throw_if_error();

  // The operands and C back on the host; the reference from the same bytes.
  quantized_matrix<nvfp4> qa(a.shape()), qb(b.shape());
  a.copy_to(qa, stream).throw_if_error();
  b.copy_to(qb, stream).throw_if_error();
  std::vector<float> got(m * n), want(m * n);
  check(cudaMemcpyAsync(got.data(), c.data(), memory.size(), cudaMemcpyDeviceToHost, stream));
  check(cudaStreamSynchronize(stream));
  gemm::reference(qa, qb, matrix_view<float>(want.data(), m, n));

  // The bound: what the tensor cores' truncations lose per k16 MMA on any architecture (at most
  // 11 · 2^-23 of sum_k |a_ik · b_jk|, on sm_80; docs/cuda.md), and two ulps of the result.
  const double bound = (11 * static_cast<double>(k) / 16 + 2) * 0x1p-23;
  double worst = 0.0;
  bool within = true;
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double magnitude = 0.0;
      for (std::size_t p = 0; p < k; ++p)
        magnitude += std::fabs(static_cast<double>(qa.value(i, p)) * qb.value(j, p));
      const double want_ij = want[i * n + j];
      const double error = std::fabs(got[i * n + j] - want_ij);
      worst = std::max(worst, error / magnitude);
      within = within && error <= bound * magnitude + 0x1p-22 * std::fabs(want_ij);
    }
  std::printf("M = %zu, N = %zu, K = %zu: max |C - reference| / sum |a b| = %.3g, bound %.3g: %s\n",
              m, n, k, worst, bound, within ? "ok" : "BEYOND THE BOUND");
  return within;
}

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    return 77;
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  bool ok = false;
  try {
    // M = 32: gemm_small_m. M = 300: the sm_120a block-scaled MMA where the device's code has it,
    // else gemm_large_m. K a multiple of the block size (16), not of the k-tile (128).
    const bool small = check_gemm(32, 192, 1024, stream);
    const bool large = check_gemm(300, 192, 1040, stream);
    ok = small && large;
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
  }
  cudaStreamDestroy(stream);
  return ok ? 0 : 1;
}
