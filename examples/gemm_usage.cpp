// The usage example of docs/gemm.md, compiled and run as a test.
#include <blockscale/blockscale.hpp>
#include <cstdio>
#include <vector>

int main() {
  using namespace blockscale;
  const std::size_t m = 32, n = 24, k = 64;
  std::vector<float> a(m * k), b(n * k), c(m * n), exact(m * n);
  for (std::size_t i = 0; i < a.size(); ++i)
    a[i] = static_cast<float>((i * 7) % 13) - 6.0f;
  for (std::size_t i = 0; i < b.size(); ++i)
    b[i] = static_cast<float>((i * 5) % 11) - 5.0f;

  // C = A · Bᵀ, both operands quantized along K (rowwise); the formats may differ.
  const auto qa = quantize<nvfp4>(matrix_view<const float>(a.data(), m, k));
  const auto qb = quantize<mxfp4>(matrix_view<const float>(b.data(), n, k));
  gemm::reference(qa, qb, matrix_view<float>(c.data(), m, n)); // exact, then rounded once

  // The same product of the dequantized operands in double: what the reference computes exactly.
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (std::size_t p = 0; p < k; ++p)
        sum += static_cast<double>(qa.value(i, p)) * static_cast<double>(qb.value(j, p));
      mismatches += static_cast<float>(sum) != c[i * n + j];
    }
  std::printf("C[0][0] = %g, %zu of %zu outputs differ from the double sum\n", c[0], mismatches,
              m * n);
  return mismatches == 0 ? 0 : 1;
}
