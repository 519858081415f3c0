/// \file linear.hpp
/// A fake-quantized linear layer on the host, driven by a recipe (recipe.hpp): forward
/// Y = X · Wᵀ, backward dX = dY · W and dW = dYᵀ · X, each GEMM operand quantized and
/// dequantized as its operand recipe says (columnwise operands from the original tensor, the
/// Hadamard transform where enabled, stochastic rounding with per-step streams, a tensor-scale
/// policy per operand kept across steps). The GEMMs then run in float on the dequantized
/// operands (gemm::float_tn): this equals the block-scaled GEMM up to float accumulation order.
/// With set_exact_gemm(true) they run as gemm::reference on the quantized operands themselves,
/// exact and slow: what a block-scaled tensor-core GEMM computes.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "../block/hadamard.hpp"
#include "../block/tensor_scale.hpp"
#include "../config.hpp"
#include "../host/gemm_float.hpp"
#include "../host/gemm_reference.hpp"
#include "../host/metrics.hpp"
#include "../host/quantize.hpp"
#include "../host/quantized_matrix.hpp"
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

/// One of the four tensor-scale policies, chosen at run time from a tensor_scale_config; it has
/// the policies' interface, so quantize<F>(x, policy, options) takes it.
class tensor_scale_policy {
public:
  tensor_scale_policy() = default;
  template <class BlockFormat>
  static tensor_scale_policy make(const tensor_scale_config& config) {
    tensor_scale_policy policy;
    switch (config.policy) {
    case tensor_scale_config::kind::current:
      policy.state_ = current_tensor_scale::make<BlockFormat>(config.headroom_binades);
      break;
    case tensor_scale_config::kind::periodic:
      policy.state_ =
          periodic_tensor_scale::make<BlockFormat>(config.interval, config.headroom_binades);
      break;
    case tensor_scale_config::kind::delayed:
      policy.state_ =
          delayed_tensor_scale::make<BlockFormat>(config.history, config.margin_binades);
      break;
    case tensor_scale_config::kind::none:
      break;
    }
    return policy;
  }
  bool needs_amax() const {
    return std::visit([](const auto& p) { return p.needs_amax(); }, state_);
  }
  void observe_amax(float amax) {
    std::visit([amax](auto& p) { p.observe_amax(amax); }, state_);
  }
  float encode_scale() const {
    return std::visit([](const auto& p) { return p.encode_scale(); }, state_);
  }
  void finish(std::uint64_t saturated) {
    std::visit([saturated](auto& p) { p.finish(saturated); }, state_);
  }
  std::uint64_t amax_measurements() const {
    return std::visit([](const auto& p) { return p.amax_measurements(); }, state_);
  }

private:
  std::variant<no_tensor_scale, current_tensor_scale, periodic_tensor_scale, delayed_tensor_scale>
      state_;
};

/// What happened to one operand over the calls so far.
struct operand_statistics {
  std::uint64_t calls = 0;
  std::uint64_t amax_measurements = 0; ///< calls that measured a tensor amax
  std::uint64_t error_samples = 0;     ///< calls whose quantization error was measured
  double sqnr_db_sum = 0.0;
  std::uint64_t saturated_scales = 0;
  std::uint64_t zero_scales = 0;
  std::uint64_t blocks = 0;

  double mean_sqnr_db() const noexcept {
    return error_samples == 0 ? NAN : sqnr_db_sum / static_cast<double>(error_samples);
  }
  double amax_fraction() const noexcept {
    return calls == 0 ? 0.0 : static_cast<double>(amax_measurements) / static_cast<double>(calls);
  }
};

/// The last quantized value of an operand: a quantized_matrix of the format `format` names
/// (type-erased, see `as`), or nothing for high precision.
struct quantized_operand {
  block_format_id format = block_format_id::high_precision;
  std::shared_ptr<const void> matrix;

  /// The matrix, as the type `format` names.
  template <class BlockFormat>
  const quantized_matrix<BlockFormat>& as() const noexcept {
    return *static_cast<const quantized_matrix<BlockFormat>*>(matrix.get());
  }
};

/// The fake quantization of one operand: quantize (rowwise or columnwise, as its GEMM needs),
/// then dequantize including the padding columns, so that a float GEMM over the padded K sees
/// what the block-scaled GEMM would.
class operand_quantizer {
public:
  operand_quantizer() = default;
  operand_quantizer(const operand_recipe& recipe, const hadamard16& transform, std::uint64_t seed,
                    bool columnwise)
      : recipe_(recipe), transform_(transform), seed_(seed), columnwise_(columnwise) {
    visit_block_format(recipe.format, [this](auto tag) {
      if constexpr (!std::is_same<decltype(tag), high_precision_tag>::value)
        policy_ = tensor_scale_policy::make<typename decltype(tag)::type>(recipe_.tensor_scale);
    });
  }

  /// Fake-quantizes `x` (or its transpose when columnwise) into `out`, resized to rows ×
  /// padded_cols(); `step` selects the stochastic-rounding stream. With `track_error`, the
  /// operand's SQNR is added to the statistics.
  void apply(matrix_view<const float> x, std::vector<float>& out, std::uint64_t step,
             bool track_error, unsigned threads, bool keep_quantized = false) {
    rows_ = columnwise_ ? x.cols() : x.rows();
    const std::size_t cols = columnwise_ ? x.rows() : x.cols();
    ++stats_.calls;
    visit_block_format(recipe_.format, [&](auto tag) {
      if constexpr (!std::is_same<decltype(tag), high_precision_tag>::value) {
        using block_format_type = typename decltype(tag)::type;
        quantize_options options;
        options.shape = recipe_.shape;
        options.columnwise = columnwise_;
        options.rule = recipe_.rule;
        options.rounding = recipe_.rounding;
        options.seed = seed_;
        options.offset = step;
        options.hadamard = recipe_.hadamard;
        options.transform = transform_;
        options.threads = threads;
        const std::uint64_t measured_before = policy_.amax_measurements();
        auto q = quantize<block_format_type>(x, policy_, options);
        stats_.amax_measurements += policy_.amax_measurements() - measured_before;
        stats_.saturated_scales += q.stats().saturated_scales;
        stats_.zero_scales += q.stats().zero_scales;
        stats_.blocks += q.stats().blocks;
        padded_cols_ = q.padded_cols();
        out.resize(rows_ * padded_cols_);
        dequantize_padded(q, matrix_view<float>(out.data(), rows_, padded_cols_), threads);
        if (track_error) {
          stats_.sqnr_db_sum += measure_error(x, q, options).sqnr_db;
          ++stats_.error_samples;
        }
        quantized_ = {};
        if (keep_quantized)
          quantized_ = {recipe_.format,
                        std::make_shared<const quantized_matrix<block_format_type>>(std::move(q))};
      } else {
        // High precision: a copy (transposed when columnwise), padded to 16 and transformed
        // when the Hadamard transform is on, so that it still cancels against its partner.
        quantized_ = {};
        padded_cols_ = recipe_.hadamard ? (cols + 15) / 16 * 16 : cols;
        out.assign(rows_ * padded_cols_, 0.0f);
        for (std::size_t r = 0; r < rows_; ++r)
          for (std::size_t c = 0; c < cols; ++c)
            out[r * padded_cols_ + c] = columnwise_ ? x(c, r) : x(r, c);
        if (recipe_.hadamard)
          transform_.forward_rows(out.data(), rows_, padded_cols_, padded_cols_);
      }
    });
  }

  std::size_t rows() const noexcept { return rows_; }
  std::size_t padded_cols() const noexcept { return padded_cols_; }
  const operand_statistics& statistics() const noexcept { return stats_; }
  const operand_recipe& operand() const noexcept { return recipe_; }
  /// The operand as last quantized by apply(..., keep_quantized = true).
  const quantized_operand& quantized() const noexcept { return quantized_; }

private:
  operand_recipe recipe_{};
  hadamard16 transform_ = hadamard16::te_default();
  std::uint64_t seed_ = 0;
  bool columnwise_ = false;
  tensor_scale_policy policy_{};
  operand_statistics stats_{};
  quantized_operand quantized_{};
  std::size_t rows_ = 0, padded_cols_ = 0;
};

/// A linear layer without bias, y = x · Wᵀ, with W (out × in) in float, quantized per `recipe`.
/// The layer keeps its input from forward() for backward().
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
                            mix(seed, static_cast<std::uint64_t>(i)), columnwise[i]);
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
  void set_threads(unsigned threads) noexcept { threads_ = threads; }
  /// Run the GEMMs as gemm::reference on the quantized operands (exact; slow) instead of a float
  /// GEMM on the dequantized ones.
  void set_exact_gemm(bool exact) noexcept { exact_ = exact; }

  /// y (batch × out) = x (batch × in) · Wᵀ.
  void forward(matrix_view<const float> x, matrix_view<float> y, std::uint64_t step) {
    if (x.cols() != in_)
      throw std::invalid_argument("quantized_linear::forward: x has " + std::to_string(x.cols()) +
                                  " columns, the layer " + std::to_string(in_) + " inputs");
    if (y.rows() != x.rows() || y.cols() != out_)
      throw std::invalid_argument("quantized_linear::forward: y must be " +
                                  std::to_string(x.rows()) + " x " + std::to_string(out_));
    input_.assign(x.rows() * in_, 0.0f);
    for (std::size_t r = 0; r < x.rows(); ++r)
      for (std::size_t c = 0; c < in_; ++c)
        input_[r * in_ + c] = x(r, c);
    batch_ = x.rows();
    const matrix_view<const float> w(weight_.data(), out_, in_);
    run_gemm(gemm_operand::fprop_x, x, gemm_operand::fprop_w, w, y, step);
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
    const matrix_view<const float> w(weight_.data(), out_, in_);
    const matrix_view<const float> x(input_.data(), batch_, in_);
    run_gemm(gemm_operand::dgrad_dy, dy, gemm_operand::dgrad_w, w, dx, step);
    run_gemm(gemm_operand::wgrad_dy, dy, gemm_operand::wgrad_x, x,
             matrix_view<float>(weight_grad_.data(), out_, in_), step);
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
  static std::uint64_t mix(std::uint64_t seed, std::uint64_t operand) noexcept {
    std::uint64_t z = seed * 8 + operand + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // c = fake(a) · fake(b)ᵀ over the shorter padded K (the rest of the longer is zero padding),
  // or in exact mode the reference GEMM of the quantized operands.
  void run_gemm(gemm_operand a_operand, matrix_view<const float> a, gemm_operand b_operand,
                matrix_view<const float> b, matrix_view<float> c, std::uint64_t step) {
    const bool measure = error_every_ != 0 && step % error_every_ == 0;
    operand_quantizer& qa = operands_[static_cast<int>(a_operand)];
    operand_quantizer& qb = operands_[static_cast<int>(b_operand)];
    qa.apply(a, buffer_a_, step, measure, threads_, exact_);
    qb.apply(b, buffer_b_, step, measure, threads_, exact_);
    const std::size_t k = std::min(qa.padded_cols(), qb.padded_cols());
    const matrix_view<const float> fa(buffer_a_.data(), qa.rows(), k, qa.padded_cols());
    const matrix_view<const float> fb(buffer_b_.data(), qb.rows(), k, qb.padded_cols());
    if (!exact_) {
      gemm::float_tn(fa, fb, c, 0.0f, threads_);
      return;
    }
    const quantized_operand& xa = qa.quantized();
    const quantized_operand& xb = qb.quantized();
    visit_block_format(xa.format, [&](auto tag_a) {
      visit_block_format(xb.format, [&](auto tag_b) {
        constexpr bool a_float = std::is_same<decltype(tag_a), high_precision_tag>::value;
        constexpr bool b_float = std::is_same<decltype(tag_b), high_precision_tag>::value;
        if constexpr (a_float && b_float) {
          gemm::float_tn(fa, fb, c, 0.0f, threads_);
        } else if constexpr (a_float) {
          gemm::reference(fa, xb.as<typename decltype(tag_b)::type>(), c, 1.0f, 0.0f, threads_);
        } else if constexpr (b_float) {
          gemm::reference(xa.as<typename decltype(tag_a)::type>(), fb, c, 1.0f, 0.0f, threads_);
        } else {
          gemm::reference(xa.as<typename decltype(tag_a)::type>(),
                          xb.as<typename decltype(tag_b)::type>(), c, 1.0f, 0.0f, threads_);
        }
      });
    });
  }

  std::size_t in_, out_, batch_ = 0;
  std::vector<float> weight_, weight_grad_, input_;
  std::vector<float> buffer_a_, buffer_b_;
  operand_quantizer operands_[gemm_operand_count];
  std::uint64_t error_every_ = 0;
  unsigned threads_ = 1;
  bool exact_ = false;
};

} // namespace v0
} // namespace blockscale
