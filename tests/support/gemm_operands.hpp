// What the GEMM tests (test_cuda_gemm_host.cpp on the host, test_cuda_gemm.cu on a device) and
// the GEMM benchmark (bench/gpu/bench_gemm_cuda.cu) share: random operands, their quantization,
// the magnitudes of the decoded products and the bound that an output must keep to. No Catch2
// here, so that the benchmark can include it.
#pragma once

#include <blockscale/host/quantize.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

/// A rows × cols row-major matrix of N(0, 1) values, each row times its own 2^u, u uniform in
/// [-spread, spread] (rows of different magnitude); the same for the same seed.
inline std::vector<float> random_matrix(std::size_t rows, std::size_t cols, std::uint64_t seed,
                                        float spread) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> binade(-spread, spread);
  std::vector<float> x(rows * cols);
  for (std::size_t r = 0; r < rows; ++r) {
    const float row_scale = std::exp2(binade(gen));
    for (std::size_t c = 0; c < cols; ++c)
      x[r * cols + c] = normal(gen) * row_scale;
  }
  return x;
}

/// `x` (rows × cols, row-major) quantized along its rows to F with scales in `layout`, under a
/// tensor scale that is not a power of two.
template <class F>
blockscale::quantized_matrix<F> quantized(const std::vector<float>& x, std::size_t rows,
                                          std::size_t cols, blockscale::scale_layout layout) {
  blockscale::quantize_options options;
  options.layout = layout;
  options.encode_scale = 0.37f;
  return blockscale::quantize<F>(blockscale::matrix_view<const float>(x.data(), rows, cols),
                                 options);
}

/// |element · block scale| of the first `k` columns of each row of `q`, row-major, in double
/// (exact); the tensor scale is left out.
template <class F>
std::vector<double> magnitudes(const blockscale::quantized_matrix<F>& q, std::size_t k) {
  const auto v = q.view();
  std::vector<double> out(q.rows() * k);
  for (std::size_t r = 0; r < q.rows(); ++r)
    for (std::size_t c = 0; c < k; ++c)
      out[r * k + c] = std::fabs(static_cast<double>(static_cast<float>(v.element(r, c))) *
                                 static_cast<double>(static_cast<float>(v.block_scale(r, c))));
  return out;
}

/// How far an output of type Out of a GEMM over `k` may be from the reference (the derivation is
/// at the top of test_cuda_gemm_host.cpp): (11 · k/16 + 2) · 2^-23 · scale · magnitude, the
/// tensor cores' truncations on any architecture, plus two ulps of Out times `result`, the
/// epilogue's. `magnitude` is
/// Σ_k |a_k · b_k| and `scale` what multiplies it (|alpha|, and the tensor scales where
/// `magnitude` has none); `result` is |reference| + |beta · C|.
template <class Out>
double gemm_error_bound(std::size_t k, double scale, double magnitude, double result) {
  static_assert(std::is_same<Out, float>::value || std::is_same<Out, blockscale::bfloat16>::value,
                "outputs are float or bfloat16");
  const double ulp = std::is_same<Out, float>::value ? 0x1p-23 : 0x1p-7;
  return (11 * static_cast<double>(k) / 16 + 2) * 0x1p-23 * scale * magnitude + 2 * ulp * result;
}
