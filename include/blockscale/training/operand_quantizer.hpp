/// \file training/operand_quantizer.hpp
/// The fake quantization of one GEMM operand of a linear layer under its operand recipe: a
/// tensor-scale policy chosen at run time (`tensor_scale_policy`), storage reused from call to
/// call (quantize_into: no allocation once the shapes settle), the dequantized values a float GEMM
/// runs on, and statistics. `operand_quantizer::apply_pair` quantizes an operand's rowwise and
/// columnwise uses from one read of the tensor.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <variant>
#include <vector>

#include "../block/block_format.hpp"
#include "../block/hadamard.hpp"
#include "../block/matrix_view.hpp"
#include "../block/scale_shift.hpp"
#include "../block/tensor_scale.hpp"
#include "../config.hpp"
#include "../contract/registry.hpp"
#include "../host/dequantize.hpp"
#include "../host/hadamard_rows.hpp"
#include "../host/metrics.hpp"
#include "../host/quantize.hpp"
#include "../host/quantized_matrix.hpp"
#include "../host/thread_pool.hpp"
#include "recipe.hpp"

namespace blockscale {
inline namespace v0 {

/// One of the four tensor-scale policies, chosen at run time from a tensor_scale_config; it has
/// the policies' interface, so quantize<F>(x, policy, options) takes it.
class tensor_scale_policy {
public:
  tensor_scale_policy() = default;
  template <class BlockFormat>
  static tensor_scale_policy make(const tensor_scale_config& config) {
    tensor_scale_policy policy;
    if (config.policy == tensor_scale_config::kind::delayed)
      check_headroom_binades<BlockFormat>(config.margin_binades, "margin_binades");
    else if (config.policy != tensor_scale_config::kind::none)
      check_headroom_binades<BlockFormat>(config.headroom_binades, "headroom_binades");
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
  bool records_amax() const {
    return std::visit([](const auto& p) { return p.records_amax(); }, state_);
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
  /// For formats whose block scales shift onto UE4M3 (UE5M3; zero for the others, UE4M3's own
  /// included), summed over the calls: the quantized rows, those whose scales one power of two
  /// turns into normal UE4M3 codes exactly, and the same for tiles of 128 rows
  /// (census_of_shifts, block/scale_shift.hpp).
  scale_shift_census ue4m3_shifts;

  double mean_sqnr_db() const noexcept {
    return error_samples == 0 ? NAN : sqnr_db_sum / static_cast<double>(error_samples);
  }
  double amax_fraction() const noexcept {
    return calls == 0 ? 0.0 : static_cast<double>(amax_measurements) / static_cast<double>(calls);
  }
};

namespace detail {
template <class List>
struct quantized_variant;
template <class... Formats>
struct quantized_variant<type_list<Formats...>> {
  using type = std::variant<std::monostate, quantized_matrix<Formats>...>;
};
} // namespace detail

/// A quantized matrix of any preset format, or nothing (std::monostate) for high precision.
using quantized_operand = detail::quantized_variant<preset_formats>::type;

/// The fake quantization of one operand: quantize (rowwise or columnwise, as its GEMM needs),
/// then dequantize including the padding columns, so that a float GEMM over the padded K sees
/// what the block-scaled GEMM would.
class operand_quantizer {
public:
  operand_quantizer() = default;
  /// `seed` keys the operand's stochastic rounding; the step of each call is the stream offset.
  operand_quantizer(const operand_recipe& recipe, const hadamard16& transform, std::uint64_t seed,
                    bool columnwise)
      : recipe_(recipe), transform_(transform), seed_(seed), columnwise_(columnwise) {
    visit_block_format(recipe.format, [this](auto tag) {
      if constexpr (!std::is_same<decltype(tag), high_precision_tag>::value)
        policy_ = tensor_scale_policy::make<typename decltype(tag)::type>(recipe_.tensor_scale);
    });
  }

  const operand_recipe& operand() const noexcept { return recipe_; }
  bool columnwise() const noexcept { return columnwise_; }
  /// The options of the call at `step`.
  quantize_options options(std::uint64_t step, unsigned threads) const {
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
    return options;
  }

  /// Fake-quantizes `x` (or its transpose when columnwise) into values(). With `track_error`, the
  /// operand's SQNR is added to the statistics. `pool` may be null.
  void apply(matrix_view<const float> x, std::uint64_t step, bool track_error, thread_pool* pool) {
    visit_block_format(recipe_.format, [&](auto tag) {
      if constexpr (std::is_same<decltype(tag), high_precision_tag>::value) {
        copy_high_precision(x);
      } else {
        using format = typename decltype(tag)::type;
        const quantize_options opts = options(step, 1);
        quantized_matrix<format>& q = storage<format>(x, opts);
        const std::uint64_t measured_before = policy_.amax_measurements();
        quantize_into(x, q, policy_, opts, identity_amax{}, pool);
        finish(x, q, measured_before, track_error, pool);
      }
    });
  }

  /// Fake-quantizes `x` for a rowwise and a columnwise operand: from one read of x when both are
  /// quantized in the same format, else one at a time.
  static void apply_pair(operand_quantizer& rowwise, operand_quantizer& columnwise,
                         matrix_view<const float> x, std::uint64_t step, bool track_error,
                         thread_pool* pool) {
    if (rowwise.columnwise_ || !columnwise.columnwise_ || !rowwise.recipe_.quantized() ||
        rowwise.recipe_.format != columnwise.recipe_.format) {
      rowwise.apply(x, step, track_error, pool);
      columnwise.apply(x, step, track_error, pool);
      return;
    }
    visit_block_format(rowwise.recipe_.format, [&](auto tag) {
      if constexpr (!std::is_same<decltype(tag), high_precision_tag>::value) {
        using format = typename decltype(tag)::type;
        const quantize_options row_options = rowwise.options(step, 1);
        const quantize_options column_options = columnwise.options(step, 1);
        quantized_matrix<format>& row_q = rowwise.storage<format>(x, row_options);
        quantized_matrix<format>& column_q = columnwise.storage<format>(x, column_options);
        const std::uint64_t row_before = rowwise.policy_.amax_measurements();
        const std::uint64_t column_before = columnwise.policy_.amax_measurements();
        const quantize_pair_stats stats =
            quantize_into(x, row_q.view(), rowwise.policy_, row_options, column_q.view(),
                          columnwise.policy_, column_options, identity_amax{}, pool);
        row_q.set_stats(stats.rowwise);
        column_q.set_stats(stats.columnwise);
        rowwise.finish(x, row_q, row_before, track_error, pool);
        columnwise.finish(x, column_q, column_before, track_error, pool);
      }
    });
  }

  /// The fake-quantized operand of the last call: rows() × padded_cols() floats.
  matrix_view<const float> values() const noexcept {
    return matrix_view<const float>::unchecked(values_.data(), rows_, padded_cols_, padded_cols_);
  }
  std::size_t rows() const noexcept { return rows_; }
  std::size_t padded_cols() const noexcept { return padded_cols_; }
  const operand_statistics& statistics() const noexcept { return stats_; }
  /// The operand as last quantized (std::monostate for high precision).
  const quantized_operand& quantized() const noexcept { return quantized_; }

private:
  /// The storage for quantizing x with `options`, reused when the shape has not changed.
  template <class BlockFormat>
  quantized_matrix<BlockFormat>& storage(matrix_view<const float> x,
                                         const quantize_options& options) {
    const quantized_shape shape =
        make_quantize_params<BlockFormat>(x.rows(), x.cols(), options).shape;
    auto* q = std::get_if<quantized_matrix<BlockFormat>>(&quantized_);
    if (q == nullptr || q->shape() != shape)
      q = &quantized_.emplace<quantized_matrix<BlockFormat>>(shape);
    return *q;
  }

  /// After a quantization into q: statistics, the dequantized values, the error.
  template <class BlockFormat>
  void finish(matrix_view<const float> x, const quantized_matrix<BlockFormat>& q,
              std::uint64_t measured_before, bool track_error, thread_pool* pool) {
    ++stats_.calls;
    stats_.amax_measurements += policy_.amax_measurements() - measured_before;
    stats_.saturated_scales += q.stats().saturated_scales;
    stats_.zero_scales += q.stats().zero_scales;
    stats_.blocks += q.stats().blocks;
    using scale_format = typename BlockFormat::scale_type::format;
    if constexpr (detail::shiftable_scale_formats<scale_format, ue4m3_format>() &&
                  !std::is_same<scale_format, ue4m3_format>::value) {
      const scale_shift_census c = census_of_shifts<ue4m3_format>(q.view());
      stats_.ue4m3_shifts.rows += c.rows;
      stats_.ue4m3_shifts.fitting_rows += c.fitting_rows;
      stats_.ue4m3_shifts.tiles += c.tiles;
      stats_.ue4m3_shifts.fitting_tiles += c.fitting_tiles;
    }
    rows_ = q.rows();
    padded_cols_ = q.padded_cols();
    values_.resize(rows_ * padded_cols_);
    const auto out =
        matrix_view<float>::unchecked(values_.data(), rows_, padded_cols_, padded_cols_);
    if (pool != nullptr)
      dequantize_padded(q, out, *pool);
    else
      dequantize_padded(q, out);
    if (track_error) {
      stats_.sqnr_db_sum += measure_error(x, q).sqnr_db;
      ++stats_.error_samples;
    }
  }

  /// High precision: a copy (transposed when columnwise), padded to 16 and transformed when the
  /// Hadamard transform is on, so that it still cancels against its partner.
  void copy_high_precision(matrix_view<const float> x) {
    ++stats_.calls;
    quantized_ = std::monostate{};
    rows_ = columnwise_ ? x.cols() : x.rows();
    const std::size_t cols = columnwise_ ? x.rows() : x.cols();
    padded_cols_ = recipe_.hadamard ? (cols + 15) / 16 * 16 : cols;
    values_.assign(rows_ * padded_cols_, 0.0f);
    for (std::size_t r = 0; r < rows_; ++r)
      for (std::size_t c = 0; c < cols; ++c)
        values_[r * padded_cols_ + c] = columnwise_ ? x(c, r) : x(r, c);
    if (recipe_.hadamard)
      hadamard_forward_rows(transform_, matrix_view<float>(values_.data(), rows_, padded_cols_));
  }

  operand_recipe recipe_{};
  hadamard16 transform_ = hadamard16::te_default();
  std::uint64_t seed_ = 0;
  bool columnwise_ = false;
  tensor_scale_policy policy_{};
  operand_statistics stats_{};
  quantized_operand quantized_{};
  std::vector<float> values_;
  std::size_t rows_ = 0, padded_cols_ = 0;
};

} // namespace v0
} // namespace blockscale
