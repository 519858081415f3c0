/// \file training/recipe.hpp
/// Training recipes as data: for each of the six GEMM operands of a linear layer (Fprop: X, W;
/// Dgrad: dY, W; Wgrad: X, dY) the block format, block shape, element rounding, Hadamard flag,
/// scale rule and tensor-scale policy, and which layers stay in high precision. The presets follow
/// the recipes as published (docs/training.md); users build their own by editing a copy.
///
/// GEMM convention: C = A · Bᵀ with both operands quantized along K.
///   Fprop  Y[T×O]  = X[T×I] · W[O×I]ᵀ       A = X rowwise,      B = W rowwise        (K = I)
///   Dgrad  dX[T×I] = dY[T×O] · (Wᵀ)[I×O]ᵀ   A = dY rowwise,     B = W columnwise     (K = O)
///   Wgrad  dW[O×I] = (dYᵀ)[O×T] · (Xᵀ)[I×T]ᵀ A = dY columnwise, B = X columnwise     (K = T)
/// Columnwise operands are quantized from the original high-precision tensor, never requantized.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "../block/block_format.hpp"
#include "../block/hadamard.hpp"
#include "../block/quantize_params.hpp"
#include "../block/quantized_view.hpp"
#include "../block/scale_rule.hpp"
#include "../config.hpp"

namespace blockscale {
inline namespace v0 {

/// Which tensor-scale policy an operand uses (tensor_scale.hpp), with its parameters.
struct tensor_scale_config {
  enum class kind { none, current, periodic, delayed };
  kind policy = kind::none;
  std::uint32_t interval = 100; ///< periodic: calls between amax measurements
  int headroom_binades = 0;     ///< current, periodic: largest block below the scale max
  std::uint32_t history = 16;   ///< delayed: amax history length
  int margin_binades = 0;       ///< delayed: margin

  friend bool operator==(const tensor_scale_config& a, const tensor_scale_config& b) noexcept {
    return a.policy == b.policy && a.interval == b.interval &&
           a.headroom_binades == b.headroom_binades && a.history == b.history &&
           a.margin_binades == b.margin_binades;
  }
};

/// How one GEMM operand is quantized.
struct operand_recipe {
  block_format_id format = block_format_id::high_precision;
  block_shape shape = block_shape::rowwise; ///< tile: B×B blocks (weights), same scales both ways
  element_rounding rounding = element_rounding::nearest_even;
  bool hadamard = false;
  std::optional<scale_rule> rule; ///< empty: the format's default rule
  tensor_scale_config tensor_scale{};

  bool quantized() const noexcept { return format != block_format_id::high_precision; }
};

/// A training recipe: the six operands and the layers that stay in high precision.
struct recipe {
  std::string name;
  operand_recipe fprop_x, fprop_w;  ///< Y = X · Wᵀ
  operand_recipe dgrad_dy, dgrad_w; ///< dX = dY · W
  operand_recipe wgrad_dy, wgrad_x; ///< dW = dYᵀ · X
  int high_precision_first_layers = 0;
  int high_precision_last_layers = 0;
  hadamard16 transform = hadamard16::te_default(); ///< the RHT signs, shared by all layers

  /// Whether layer `index` of `layer_count` runs in high precision under this recipe.
  bool layer_in_high_precision(int index, int layer_count) const noexcept {
    return index < high_precision_first_layers || index >= layer_count - high_precision_last_layers;
  }
};

namespace recipes {

/// Everything in float: the baseline.
inline recipe high_precision() {
  recipe r;
  r.name = "high precision";
  return r;
}

/// NVFP4 as Transformer Engine's NVFP4BlockScaling defaults: 16×16 weight
/// tiles (the same scales for Fprop and Dgrad), 1×16 activations and gradients, the randomized
/// Hadamard transform on both Wgrad operands, stochastic rounding on dY, a tensor scale measured
/// on every call. The NVFP4 paper also keeps the last layers in BF16: pass how many.
inline recipe nvfp4(int high_precision_last_layers = 0) {
  recipe r;
  r.name = "NVFP4";
  operand_recipe base;
  base.format = block_format_id::nvfp4;
  base.tensor_scale.policy = tensor_scale_config::kind::current;
  r.fprop_x = r.fprop_w = r.dgrad_dy = r.dgrad_w = r.wgrad_dy = r.wgrad_x = base;
  r.fprop_w.shape = r.dgrad_w.shape = block_shape::tile;
  r.dgrad_dy.rounding = r.wgrad_dy.rounding = element_rounding::stochastic;
  r.wgrad_dy.hadamard = r.wgrad_x.hadamard = true;
  r.high_precision_last_layers = high_precision_last_layers;
  return r;
}

/// UE5M3-FP4 (arXiv 2609.02846): E2M1 with UE5M3 scales in blocks of 16 for every operand, a
/// tensor scale refreshed every `interval` calls with 8 binades of headroom (and early after a
/// saturated block scale), stochastic rounding on dY only (Dgrad and Wgrad), no Hadamard
/// transform, no layer kept in high precision.
inline recipe ue5m3(std::uint32_t interval = 100) {
  recipe r;
  r.name = "UE5M3-FP4";
  operand_recipe base;
  base.format = block_format_id::ue5m3_fp4;
  base.tensor_scale.policy = tensor_scale_config::kind::periodic;
  base.tensor_scale.interval = interval;
  base.tensor_scale.headroom_binades = 8;
  r.fprop_x = r.fprop_w = r.dgrad_dy = r.dgrad_w = r.wgrad_dy = r.wgrad_x = base;
  r.dgrad_dy.rounding = r.wgrad_dy.rounding = element_rounding::stochastic;
  return r;
}

/// OCP MXFP4: E2M1 with UE8M0 scales in blocks of 32, the OCP floor rule, no tensor scale,
/// nearest-even everywhere, no Hadamard transform.
inline recipe mxfp4() {
  recipe r;
  r.name = "MXFP4";
  operand_recipe base;
  base.format = block_format_id::mxfp4;
  base.rule = scale_rules::ocp_floor();
  r.fprop_x = r.fprop_w = r.dgrad_dy = r.dgrad_w = r.wgrad_dy = r.wgrad_x = base;
  return r;
}

/// The presets' names, as callers that meet recipes by name (the Python package) spell them.
inline constexpr const char* names[] = {"high_precision", "nvfp4", "ue5m3_fp4", "mxfp4"};

/// What the presets take: the UE5M3 recipe's refresh interval, and how many last layers NVFP4
/// keeps in high precision.
struct parameters {
  std::uint32_t interval = 100;
  int high_precision_last_layers = 0;
};

/// The preset named `name` (one of `names`); std::invalid_argument naming the choices otherwise.
inline recipe named(std::string_view name, const parameters& p = {}) {
  if (name == names[0])
    return high_precision();
  if (name == names[1])
    return nvfp4(p.high_precision_last_layers);
  if (name == names[2])
    return ue5m3(p.interval);
  if (name == names[3])
    return mxfp4();
  std::string choices;
  for (const char* n : names)
    choices += (choices.empty() ? "" : ", ") + std::string(n);
  throw std::invalid_argument("unknown recipe '" + std::string(name) + "' (one of " + choices +
                              ")");
}

} // namespace recipes
} // namespace v0
} // namespace blockscale
