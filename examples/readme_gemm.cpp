// The GEMM example of README.md, compiled and run as a test.
#include <algorithm>
#include <blockscale/blockscale.hpp>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

int main() {
  using namespace blockscale;
  const std::size_t m = 64, n = 32, k = 256; // C[m×n] = A[m×k] · B[n×k]ᵀ
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> a(m * k), b(n * k), c(m * n);
  std::generate(a.begin(), a.end(), [&] { return normal(rng); });
  std::generate(b.begin(), b.end(), [&] { return normal(rng); });
  const matrix_view<const float> av(a.data(), m, k), bv(b.data(), n, k);

  // A in NVFP4 with Transformer Engine's tensor scale, B in UE5M3-FP4 (its block scales span
  // 2^-17..114688: these values need none); both quantized along k, in blocks of 16.
  quantize_options options;
  options.encode_scale = encode_scale_from_amax(6.0f * 448.0f, measure_amax<nvfp4>(av));
  const quantized_matrix<nvfp4> qa = quantize<nvfp4>(av, options);
  const quantized_matrix<ue5m3_fp4> qb = quantize<ue5m3_fp4>(bv);
  gemm::reference(qa, qb, matrix_view<float>(c.data(), m, n)); // exact sum, rounded once

  // Against the product of the unquantized floats: what 4 bits cost.
  double signal = 0.0, noise = 0.0;
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double product = 0.0;
      for (std::size_t p = 0; p < k; ++p)
        product += static_cast<double>(a[i * k + p]) * b[j * k + p];
      signal += product * product;
      noise += (c[i * n + j] - product) * (c[i * n + j] - product);
    }
  const double sqnr_db = 10.0 * std::log10(signal / noise);
  std::printf("SQNR of A %.1f dB, of B %.1f dB, of C = A·Bᵀ %.1f dB\n",
              measure_error(av, qa).sqnr_db, measure_error(bv, qb).sqnr_db, sqnr_db);
  return sqnr_db > 15.0 ? 0 : 1;
}
