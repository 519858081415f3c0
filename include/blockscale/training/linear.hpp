/// \file training/linear.hpp
/// A fake-quantized linear layer on the host, driven by a recipe (training/recipe.hpp): forward
/// Y = X · Wᵀ, backward dX = dY · W and dW = dYᵀ · X, each GEMM operand quantized and
/// dequantized as its operand recipe says (training/operand_quantizer.hpp). Each tensor is read
/// once for both of its uses: X rowwise (Fprop) and columnwise (Wgrad) in forward(), W rowwise
/// (Fprop) and columnwise (Dgrad) in forward(), dY rowwise (Dgrad) and columnwise (Wgrad) in
/// backward() — columnwise operands come from the original tensor, never from a quantized copy.
/// The GEMMs then run in float on the dequantized operands (gemm::float_tn): this equals the
/// block-scaled GEMM up to float accumulation order. With set_exact_gemm(true) they run as
/// gemm::reference on the quantized operands themselves, exact and slow: what a block-scaled
/// tensor-core GEMM computes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "../block/matrix_view.hpp"
#include "../config.hpp"
#include "../host/gemm_float.hpp"
#include "../host/gemm_reference.hpp"
#include "../host/thread_pool.hpp"
#include "operand_quantizer.hpp"
#include "recipe.hpp"

namespace blockscale {
inline namespace v0 {

/// The six GEMM operands of a linear layer.
enum class gemm_operand { fprop_x, fprop_w, dgrad_dy, dgrad_w, wgrad_dy, wgrad_x };
constexpr int gemm_operand_count = 6;

/// A short name: "Fprop X", "Dgrad W", ...
inline const char* to_string(gemm_operand operand) noexcept {
  constexpr const char* names[] = {"Fprop X", "Fprop W",  "Dgrad dY",
                                   "Dgrad W", "Wgrad dY", "Wgrad X"};
  return names[static_cast<int>(operand)];
}

/// The operand recipe of `operand` in `r`.
inline const operand_recipe& operand_of(const recipe& r, gemm_operand operand) noexcept {
  const operand_recipe* operands[] = {&r.fprop_x, &r.fprop_w,  &r.dgrad_dy,
                                      &r.dgrad_w, &r.wgrad_dy, &r.wgrad_x};
  return *operands[static_cast<int>(operand)];
}

/// The stochastic-rounding seed of `operand` in a layer keyed by `layer_seed`: a SplitMix64 step
/// of layer_seed · 8 + operand, so that the six operands' Philox streams differ.
constexpr std::uint64_t operand_seed(std::uint64_t layer_seed, gemm_operand operand) noexcept {
  std::uint64_t z = layer_seed * 8 + static_cast<std::uint64_t>(operand) + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// A linear layer without bias, y = x · Wᵀ, with W (out × in) in float, quantized per `recipe`.
/// Copies share the thread pool of set_threads().
class quantized_linear {
public:
  /// `high_precision` runs every operand in float (the recipe's exempt layers); `seed` keys the
  /// layer's stochastic-rounding streams (each operand gets its own).
  quantized_linear(std::size_t in_features, std::size_t out_features, const recipe& r,
                   bool high_precision, std::uint64_t seed)
      : in_(in_features), out_(out_features), weight_(in_features * out_features),
        weight_grad_(in_features * out_features) {
    const recipe& used = high_precision ? high_precision_recipe() : r;
    check_pair(used.fprop_x, used.fprop_w, "Fprop");
    check_pair(used.dgrad_dy, used.dgrad_w, "Dgrad");
    check_pair(used.wgrad_dy, used.wgrad_x, "Wgrad");
    constexpr bool columnwise[] = {false, false, false, true, true, true};
    for (int i = 0; i < gemm_operand_count; ++i)
      operands_[i] =
          operand_quantizer(operand_of(used, static_cast<gemm_operand>(i)), used.transform,
                            operand_seed(seed, static_cast<gemm_operand>(i)), columnwise[i]);
  }

  std::size_t in_features() const noexcept { return in_; }
  std::size_t out_features() const noexcept { return out_; }
  /// W, out × in, row-major.
  std::vector<float>& weight() noexcept { return weight_; }
  const std::vector<float>& weight() const noexcept { return weight_; }
  /// dL/dW from the last backward(), out × in.
  const std::vector<float>& weight_grad() const noexcept { return weight_grad_; }
  const operand_statistics& statistics(gemm_operand operand) const noexcept {
    return operands_[static_cast<int>(operand)].statistics();
  }
  /// Measure each operand's quantization error every `steps` steps (0: never).
  void set_error_tracking(std::uint64_t steps) noexcept { error_every_ = steps; }
  /// Threads for quantization and the GEMMs; above one, the layer keeps a thread pool for them.
  void set_threads(unsigned threads) {
    threads_ = thread_pool::resolve(threads, "quantized_linear::set_threads: threads");
    pool_ = threads_ > 1 ? std::make_shared<thread_pool>(threads_) : nullptr;
  }
  /// Run the GEMMs as gemm::reference on the quantized operands (exact; slow) instead of a float
  /// GEMM on the dequantized ones.
  void set_exact_gemm(bool exact) noexcept { exact_ = exact; }

  /// y (batch × out) = x (batch × in) · Wᵀ. Also quantizes what backward() needs of x and W.
  void forward(matrix_view<const float> x, matrix_view<float> y, std::uint64_t step) {
    if (x.cols() != in_)
      throw std::invalid_argument("quantized_linear::forward: x has " + std::to_string(x.cols()) +
                                  " columns, the layer " + std::to_string(in_) + " inputs");
    if (y.rows() != x.rows() || y.cols() != out_)
      throw std::invalid_argument("quantized_linear::forward: y must be " +
                                  std::to_string(x.rows()) + " x " + std::to_string(out_));
    batch_ = x.rows();
    const bool measure = measuring(step);
    const matrix_view<const float> w(weight_.data(), out_, in_);
    operand_quantizer::apply_pair(op(gemm_operand::fprop_x), op(gemm_operand::wgrad_x), x, step,
                                  measure, pool_.get());
    operand_quantizer::apply_pair(op(gemm_operand::fprop_w), op(gemm_operand::dgrad_w), w, step,
                                  measure, pool_.get());
    run_gemm(gemm_operand::fprop_x, gemm_operand::fprop_w, y);
  }

  /// dx (batch × in) = dy (batch × out) · W, and weight_grad() = dyᵀ · x for the x of the last
  /// forward().
  void backward(matrix_view<const float> dy, matrix_view<float> dx, std::uint64_t step) {
    if (dy.rows() != batch_ || dy.cols() != out_)
      throw std::invalid_argument("quantized_linear::backward: dy must be " +
                                  std::to_string(batch_) + " x " + std::to_string(out_));
    if (dx.rows() != batch_ || dx.cols() != in_)
      throw std::invalid_argument("quantized_linear::backward: dx must be " +
                                  std::to_string(batch_) + " x " + std::to_string(in_));
    operand_quantizer::apply_pair(op(gemm_operand::dgrad_dy), op(gemm_operand::wgrad_dy), dy, step,
                                  measuring(step), pool_.get());
    run_gemm(gemm_operand::dgrad_dy, gemm_operand::dgrad_w, dx);
    run_gemm(gemm_operand::wgrad_dy, gemm_operand::wgrad_x,
             matrix_view<float>(weight_grad_.data(), out_, in_));
  }

private:
  static const recipe& high_precision_recipe() {
    static const recipe r = recipes::high_precision();
    return r;
  }
  static void check_pair(const operand_recipe& a, const operand_recipe& b, const char* gemm) {
    if (a.hadamard != b.hadamard)
      throw std::invalid_argument(std::string("quantized_linear: the recipe's ") + gemm +
                                  " operands disagree on the Hadamard transform, which only "
                                  "cancels when both have it");
  }
  operand_quantizer& op(gemm_operand operand) noexcept {
    return operands_[static_cast<int>(operand)];
  }
  bool measuring(std::uint64_t step) const noexcept {
    return error_every_ != 0 && step % error_every_ == 0;
  }

  // c = fake(a) · fake(b)ᵀ over the shorter padded K (the rest of the longer is zero padding),
  // or in exact mode the reference GEMM of the quantized operands.
  void run_gemm(gemm_operand a_operand, gemm_operand b_operand, matrix_view<float> c) {
    const operand_quantizer& qa = op(a_operand);
    const operand_quantizer& qb = op(b_operand);
    const std::size_t k = std::min(qa.padded_cols(), qb.padded_cols());
    const matrix_view<const float> fa =
        matrix_view<const float>::unchecked(qa.values().data(), qa.rows(), k, qa.padded_cols());
    const matrix_view<const float> fb =
        matrix_view<const float>::unchecked(qb.values().data(), qb.rows(), k, qb.padded_cols());
    if (!exact_) {
      gemm::float_tn(fa, fb, c, 0.0f, threads_);
      return;
    }
    std::visit(
        [&](const auto& a, const auto& b) {
          constexpr bool a_float = std::is_same<std::decay_t<decltype(a)>, std::monostate>::value;
          constexpr bool b_float = std::is_same<std::decay_t<decltype(b)>, std::monostate>::value;
          if constexpr (a_float && b_float)
            gemm::float_tn(fa, fb, c, 0.0f, threads_);
          else if constexpr (a_float)
            gemm::reference(fa, b, c, 1.0f, 0.0f, threads_);
          else if constexpr (b_float)
            gemm::reference(a, fb, c, 1.0f, 0.0f, threads_);
          else
            gemm::reference(a, b, c, 1.0f, 0.0f, threads_);
        },
        qa.quantized(), qb.quantized());
  }

  std::size_t in_, out_, batch_ = 0;
  std::vector<float> weight_, weight_grad_;
  operand_quantizer operands_[gemm_operand_count];
  std::uint64_t error_every_ = 0;
  unsigned threads_ = 1;
  std::shared_ptr<thread_pool> pool_;
  bool exact_ = false;
};

} // namespace v0
} // namespace blockscale
