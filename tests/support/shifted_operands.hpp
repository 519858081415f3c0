// What the shifted GEMM's tests (test_gemm_shifted.cpp on the host, test_cuda_gemm.cu on a
// device) share: operands whose rows' block scales spread over a chosen number of binades, an
// operand's shifted scales in host memory, and the model a fitting tile must equal. No Catch2
// here.
#pragma once

#include <blockscale/block/scale_shift.hpp>
#include <blockscale/cuda/kernels/epilogue.hpp>
#include <blockscale/emulation/ptx.hpp>
#include <blockscale/host/quantize.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

#include "gemm_operands.hpp"

/// An operand's shifted scales in host memory.
template <class F>
struct host_shifted {
  std::vector<std::uint8_t> codes, tiles;
  std::vector<std::int8_t> shifts;
  /// Every byte starts as `sentinel`: two passes started from different sentinels agree only
  /// on the bytes both write.
  explicit host_shifted(const blockscale::quantized_shape& shape, std::uint8_t sentinel = 0xEE) {
    const blockscale::shifted_storage n = blockscale::shifted_storage_for<F>(shape);
    codes.assign(n.code_bytes, sentinel);
    shifts.assign(n.shift_bytes, static_cast<std::int8_t>(sentinel));
    tiles.assign(n.tile_bytes, sentinel);
  }
  blockscale::shifted_scales view() { return {codes.data(), shifts.data(), tiles.data()}; }
};

/// rows × k values whose 16-element blocks each get their own power of two 2^u, u uniform in
/// [-spread(row) / 2, spread(row) / 2], the first two blocks the ends of that range: the spread
/// of a row's block scales, in binades, is about spread(row).
template <class Spread>
std::vector<float> spread_matrix(std::size_t rows, std::size_t k, std::uint64_t seed,
                                 Spread spread) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(rows * k);
  for (std::size_t r = 0; r < rows; ++r) {
    std::uniform_real_distribution<float> binade(-spread(r) / 2, spread(r) / 2);
    float block = 1.0f;
    for (std::size_t c = 0; c < k; ++c) {
      if (c % 16 == 0)
        block = std::exp2(c == 0 ? -spread(r) / 2 : c == 16 ? spread(r) / 2 : binade(gen));
      x[r * k + c] = normal(gen) * block;
    }
  }
  return x;
}

/// An operand whose rows spread over `narrow` binades, row `wide_row` over `wide`. NVFP4 operands
/// are lifted by 2^4, so that their narrow rows' block scales are UE4M3 normals (a subnormal
/// scale refuses its row).
template <class F>
blockscale::quantized_matrix<F>
quantized_spread(std::size_t rows, std::size_t k, std::uint64_t seed,
                 blockscale::scale_layout layout, float narrow, float wide, std::size_t wide_row) {
  auto x =
      spread_matrix(rows, k, seed, [&](std::size_t r) { return r == wide_row ? wide : narrow; });
  if (std::is_same<F, blockscale::nvfp4>::value)
    for (float& v : x)
      v *= 16.0f;
  return quantized<F>(x, rows, k, layout);
}

/// C[i][j] as the block-scaled MMA computes it on the operands' own scales: k64 steps chained in
/// k order, each output by dot_add_e2m1 with every scale aligned by its exponent, then the
/// kernels' epilogue.
template <class FA, class FB, class Out>
Out native_mma_output(const blockscale::quantized_matrix<FA>& a,
                      const blockscale::quantized_matrix<FB>& b, std::size_t i, std::size_t j,
                      float alpha, float beta, Out c0,
                      blockscale::emulation::ptx::mma_model model) {
  const auto va = a.view();
  const auto vb = b.view();
  float acc = 0.0f;
  for (std::size_t k0 = 0; k0 < a.cols(); k0 += 64) {
    double av[64] = {}, bv[64] = {}, sa[4] = {}, sb[4] = {};
    for (std::size_t k = 0; k < 64 && k0 + k < a.cols(); ++k) {
      av[k] = static_cast<double>(static_cast<float>(va.element(i, k0 + k)));
      bv[k] = static_cast<double>(static_cast<float>(vb.element(j, k0 + k)));
    }
    for (std::size_t g = 0; g < 4 && k0 + 16 * g < a.cols(); ++g) {
      sa[g] = static_cast<double>(static_cast<float>(va.block_scale(i, k0 + 16 * g)));
      sb[g] = static_cast<double>(static_cast<float>(vb.block_scale(j, k0 + 16 * g)));
    }
    // ue8m0's alignment: a scale's own exponent (every scale of a fitting row is normal).
    acc = blockscale::emulation::ptx::dot_add_e2m1(
        model, blockscale::emulation::ptx::scale_kind::ue8m0, av, bv, sa, sb, acc);
  }
  const double t = static_cast<double>(va.decode_scale()) * static_cast<double>(vb.decode_scale());
  return blockscale::cuda::kernels::epilogue_value(t * static_cast<double>(acc), alpha, beta, c0);
}
