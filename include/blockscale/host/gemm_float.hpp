/// \file host/gemm_float.hpp
/// A plain float GEMM for the host, C[M×N] = A[M×K] · B[N×K]ᵀ (+ beta·C), the arithmetic of the
/// fake-quantized linear layer. Not tuned like a BLAS: Bᵀ is formed once, then every row of C is
/// a sum of rows of Bᵀ scaled by A's elements, in k order, which vectorizes over N without
/// reassociating sums, so the result is the same for every thread count and SIMD width.
#pragma once

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "../block/matrix_view.hpp"
#include "../config.hpp"
#include "thread_pool.hpp"

namespace blockscale {
inline namespace v0 {
namespace gemm {

/// C = A · Bᵀ + beta · C for float matrices (beta = 0: C is not read), over `threads` threads
/// (0: all hardware threads). Throws std::invalid_argument naming the argument on a shape
/// mismatch.
inline void float_tn(matrix_view<const float> a, matrix_view<const float> b, matrix_view<float> c,
                     float beta = 0.0f, unsigned threads = 1) {
  if (a.cols() != b.cols())
    throw std::invalid_argument("gemm::float_tn: a has K = " + std::to_string(a.cols()) +
                                " columns but b has " + std::to_string(b.cols()));
  if (c.rows() != a.rows() || c.cols() != b.rows())
    throw std::invalid_argument("gemm::float_tn: c is " + std::to_string(c.rows()) + " x " +
                                std::to_string(c.cols()) + ", expected " +
                                std::to_string(a.rows()) + " x " + std::to_string(b.rows()));
  const std::size_t m = a.rows(), n = b.rows(), k = a.cols();
  if (m == 0 || n == 0)
    return;
  std::vector<float> bt(k * n); // Bᵀ, K × N
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t p = 0; p < k; ++p)
      bt[p * n + j] = b(j, p);
  auto rows = [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      float* out = &c(i, 0);
      if (beta == 0.0f)
        std::fill(out, out + n, 0.0f);
      else
        for (std::size_t j = 0; j < n; ++j)
          out[j] *= beta;
      for (std::size_t p = 0; p < k; ++p) {
        const float scale = a(i, p);
        const float* row = bt.data() + p * n;
        for (std::size_t j = 0; j < n; ++j)
          out[j] += scale * row[j];
      }
    }
  };
  blockscale::detail::run_parallel(
      nullptr, threads, m, [&](unsigned, std::size_t begin, std::size_t end) { rows(begin, end); });
}

} // namespace gemm
} // namespace v0
} // namespace blockscale
