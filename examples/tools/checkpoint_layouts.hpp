// The checkpoint layouts blockscale-convert writes, as data: one record per layout, holding all
// the converter knows of it (the --format name and its help line, the tensors written for each
// quantized module, the block format, how the global scale is computed and stored, the config
// written). The converter has no code of its own for any layout. Adding a layout is adding its
// record to `checkpoint_layouts` below; the test that walks the table
// (tests/checkpoints/test_checkpoint_tools.cpp) then converts a checkpoint with it and reads the
// result back.
#pragma once

#include <blockscale/blockscale.hpp>
#include <blockscale/io/safetensors.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace tools {

using ordered_json = nlohmann::ordered_json;

/// What a preset block format brings to a layout, read off its type at run time.
struct block_format_properties {
  int block_size;   ///< elements per block scale
  int element_bits; ///< 4: two elements per byte, element 2j in the low nibble; 8: one per byte
  /// Element max × scale max (6 · 448 = 2688 for NVFP4): the numerator of the global scale that
  /// puts the largest block at the top of the scale format.
  float tensor_scale_numerator;
};

inline block_format_properties properties_of(blockscale::block_format_id id) {
  return blockscale::visit_block_format(id, [](auto tag) -> block_format_properties {
    if constexpr (std::is_same<decltype(tag), blockscale::high_precision_tag>::value) {
      throw std::logic_error("a checkpoint layout needs a block format, not high_precision");
    } else {
      using F = typename decltype(tag)::type;
      return {F::block_size, F::element_bits,
              static_cast<float>(blockscale::tensor_scale_numerator<F>(0))};
    }
  });
}

/// A layout's per-tensor ("global") scale. s_enc comes from the amax a of the module's fused group
/// as global_scale(a, computed_with, the format's tensor_scale_numerator), or is 1 when a is zero;
/// the value stored is global_scale_from_encode(s_enc, stored_as): s_enc itself for a divisor
/// convention, s_dec = fp32(1 / s_enc) for a multiplier (block/global_scale.hpp).
struct global_scale_record {
  /// The F32 tensor `m.<suffix>`; null when the layout has no global scale (s_enc = 1).
  const char* suffix = nullptr;
  blockscale::global_scale_convention computed_with =
      blockscale::global_scale_convention::compressed_tensors;
  blockscale::global_scale_convention stored_as =
      blockscale::global_scale_convention::compressed_tensors;
  bool scalar = false; ///< shape [] rather than [1]
};

/// One checkpoint layout. For each quantized module `m` (a Linear weight `m.weight` [out, in]) it
/// writes the elements, the block scales and, if it has one, the global scale; the config it
/// writes lists the modules left unquantized.
struct checkpoint_layout {
  const char* name = nullptr;  ///< the value of --format
  const char* alias = nullptr; ///< a second --format value that names it, or null
  const char* help = nullptr;  ///< its line in --help
  blockscale::block_format_id format = blockscale::block_format_id::nvfp4;
  const char* packed_suffix = nullptr; ///< elements: U8 [out, in · element_bits / 8]
  const char* scales_suffix = nullptr; ///< block scales: [out, in / block] codes, `scales_layout`
  /// The safetensors dtype the scale codes are stored as.
  blockscale::io::tensor_dtype scales_dtype = blockscale::io::tensor_dtype::u8;
  blockscale::scale_layout scales_layout = blockscale::scale_layout::row_major;
  /// Whether --mx-rule chooses the block-scale rule (else the format's default rule).
  bool takes_mx_rule = false;
  global_scale_record global;
  /// The name the config gives the layout (compressed-tensors' `format`, ModelOpt's `quant_algo`).
  const char* config_name = nullptr;
  /// The `quantization_config` written into config.json (quantization_config.json when the input
  /// has no config.json), given the modules left unquantized, sorted.
  ordered_json (*quantization_config)(const checkpoint_layout& layout,
                                      const std::vector<std::string>& ignore) = nullptr;
  /// A file written beside config.json, or null; its contents, from the quantization_config.
  const char* extra_file = nullptr;
  ordered_json (*extra_file_contents)(const ordered_json& quantization_config) = nullptr;
};

/// The torch dtype compressed-tensors names for a scale dtype.
inline const char* torch_dtype_name(blockscale::io::tensor_dtype dtype) {
  switch (dtype) {
  case blockscale::io::tensor_dtype::f8_e4m3:
    return "torch.float8_e4m3fn";
  case blockscale::io::tensor_dtype::u8:
    return "torch.uint8";
  default:
    throw std::logic_error(std::string("no torch dtype for scales stored as ") +
                           blockscale::io::dtype_name(dtype));
  }
}

/// compressed-tensors' quantization_config for weights-only FP4 of every Linear (one config group,
/// no activations): `strategy` tensor_group with a global scale, group without.
inline ordered_json compressed_tensors_config(const checkpoint_layout& layout,
                                              const std::vector<std::string>& ignore) {
  ordered_json weights;
  weights["num_bits"] = 4;
  weights["type"] = "float";
  weights["symmetric"] = true;
  weights["group_size"] = properties_of(layout.format).block_size;
  weights["strategy"] = layout.global.suffix != nullptr ? "tensor_group" : "group";
  weights["block_structure"] = nullptr;
  weights["dynamic"] = false;
  weights["actorder"] = nullptr;
  weights["scale_dtype"] = torch_dtype_name(layout.scales_dtype);
  weights["zp_dtype"] = nullptr;
  weights["observer"] = "memoryless_minmax";
  weights["observer_kwargs"] = ordered_json::object();
  ordered_json group;
  group["targets"] = {"Linear"};
  group["weights"] = weights;
  group["input_activations"] = nullptr;
  group["output_activations"] = nullptr;
  group["format"] = layout.config_name;
  ordered_json q;
  q["config_groups"] = {{"group_0", group}};
  q["format"] = layout.config_name;
  q["global_compression_ratio"] = nullptr;
  q["ignore"] = ignore;
  q["kv_cache_scheme"] = nullptr;
  q["quant_method"] = "compressed-tensors";
  q["quantization_status"] = "compressed";
  q["sparsity_config"] = ordered_json::object();
  q["transform_config"] = ordered_json::object();
  return q;
}

/// ModelOpt's quantization_config (the part of hf_quant_config.json that config.json carries).
inline ordered_json modelopt_config(const checkpoint_layout& layout,
                                    const std::vector<std::string>& ignore) {
  ordered_json q;
  q["quant_method"] = "modelopt";
  q["quant_algo"] = layout.config_name;
  q["group_size"] = properties_of(layout.format).block_size;
  q["exclude_modules"] = ignore;
  q["kv_cache_quant_algo"] = nullptr;
  return q;
}

/// ModelOpt's hf_quant_config.json: the producer, and the quantization of `modelopt_config`.
inline ordered_json modelopt_hf_quant_config(const ordered_json& quantization_config) {
  ordered_json hf;
  hf["producer"] = {{"name", "blockscale"},
                    {"version", std::to_string(BLOCKSCALE_VERSION_MAJOR) + "." +
                                    std::to_string(BLOCKSCALE_VERSION_MINOR) + "." +
                                    std::to_string(BLOCKSCALE_VERSION_PATCH)}};
  hf["quantization"] = {{"quant_algo", quantization_config.at("quant_algo")},
                        {"group_size", quantization_config.at("group_size")},
                        {"exclude_modules", quantization_config.at("exclude_modules")},
                        {"kv_cache_quant_algo", nullptr}};
  return hf;
}

/// The UE5M3-FP4 research layout's config: no serving stack reads one, so it describes itself.
inline ordered_json ue5m3_fp4_config(const checkpoint_layout& layout,
                                     const std::vector<std::string>& ignore) {
  ordered_json q;
  q["quant_method"] = "blockscale";
  q["format"] = layout.config_name;
  q["loadable_by"] = "no serving stack yet: research output of blockscale";
  q["weights"] = {{"element", "e2m1, two per byte, even element in the low nibble"},
                  {"block_size", properties_of(layout.format).block_size},
                  {"scale", "ue5m3 codes as uint8 (bias 15, subnormals, max 0xFE = 114688, "
                            "NaN 0xFF)"},
                  {"global_scale", "divisor: value = e2m1 * ue5m3 / weight_global_scale"}};
  q["ignore"] = ignore;
  return q;
}

/// Every layout blockscale-convert writes; the first is the default. docs/checkpoints.md
/// describes each.
inline constexpr checkpoint_layout checkpoint_layouts[] = {
    // compressed-tensors NVFP4A16 (nvfp4-pack-quantized), what vLLM loads and llm-compressor
    // writes. UE4M3 scale codes are E4M3's positive codes, so they are stored as F8_E4M3. The
    // global scale is compressed-tensors' own 2688 / amax, a divisor.
    [] {
      checkpoint_layout l{};
      l.name = "compressed-tensors";
      l.alias = "nvfp4";
      l.help = "NVFP4 weights-only (nvfp4-pack-quantized)";
      l.format = blockscale::block_format_id::nvfp4;
      l.packed_suffix = "weight_packed";
      l.scales_suffix = "weight_scale";
      l.scales_dtype = blockscale::io::tensor_dtype::f8_e4m3;
      l.global.suffix = "weight_global_scale";
      l.global.computed_with = blockscale::global_scale_convention::compressed_tensors;
      l.global.stored_as = blockscale::global_scale_convention::compressed_tensors;
      l.config_name = "nvfp4-pack-quantized";
      l.quantization_config = &compressed_tensors_config;
      return l;
    }(),
    // ModelOpt's NVFP4 weights-only layout (W4A16_NVFP4): the elements keep the name `weight`.
    // s_enc is Transformer Engine's correctly rounded 2688 / amax, and weight_scale_2, a scalar,
    // stores the multiplier s_dec, so a loader's (q · S) · weight_scale_2 decodes exactly what was
    // encoded. hf_quant_config.json repeats the config.
    [] {
      checkpoint_layout l{};
      l.name = "modelopt";
      l.help = "NVFP4 weights-only in ModelOpt's layout (W4A16_NVFP4)";
      l.format = blockscale::block_format_id::nvfp4;
      l.packed_suffix = "weight";
      l.scales_suffix = "weight_scale";
      l.scales_dtype = blockscale::io::tensor_dtype::f8_e4m3;
      l.global.suffix = "weight_scale_2";
      l.global.computed_with = blockscale::global_scale_convention::transformer_engine;
      l.global.stored_as = blockscale::global_scale_convention::modelopt;
      l.global.scalar = true;
      l.config_name = "W4A16_NVFP4";
      l.quantization_config = &modelopt_config;
      l.extra_file = "hf_quant_config.json";
      l.extra_file_contents = &modelopt_hf_quant_config;
      return l;
    }(),
    // compressed-tensors MXFP4 (mxfp4-pack-quantized): UE8M0 scale codes as U8, no global scale;
    // the block-scale rule is --mx-rule's.
    [] {
      checkpoint_layout l{};
      l.name = "mxfp4";
      l.help = "compressed-tensors mxfp4-pack-quantized (UE8M0, block 32)";
      l.format = blockscale::block_format_id::mxfp4;
      l.packed_suffix = "weight_packed";
      l.scales_suffix = "weight_scale";
      l.scales_dtype = blockscale::io::tensor_dtype::u8;
      l.takes_mx_rule = true;
      l.config_name = "mxfp4-pack-quantized";
      l.quantization_config = &compressed_tensors_config;
      return l;
    }(),
    // UE5M3-FP4, for research: UE5M3 scale codes as U8 and compressed-tensors' tensor names. s_enc
    // is the correctly rounded 6 · 114688 / amax (Transformer Engine's rule with UE5M3's
    // numerator: no headroom, as a checkpoint does not change), stored as a divisor.
    [] {
      checkpoint_layout l{};
      l.name = "ue5m3_fp4";
      l.help = "UE5M3 block scales (research; no serving stack loads it)";
      l.format = blockscale::block_format_id::ue5m3_fp4;
      l.packed_suffix = "weight_packed";
      l.scales_suffix = "weight_scale";
      l.scales_dtype = blockscale::io::tensor_dtype::u8;
      l.global.suffix = "weight_global_scale";
      l.global.computed_with = blockscale::global_scale_convention::transformer_engine;
      l.global.stored_as = blockscale::global_scale_convention::compressed_tensors;
      l.config_name = "ue5m3-fp4-pack-quantized";
      l.quantization_config = &ue5m3_fp4_config;
      return l;
    }(),
};

/// A block-scale rule --mx-rule offers.
struct named_scale_rule {
  const char* name;
  blockscale::scale_rule rule;
};

/// The choices of --mx-rule; the first is the default.
inline constexpr named_scale_rule mx_rules[] = {
    {"floor", blockscale::scale_rules::ocp_floor()}, // OCP MX v1.0
    {"rceil", blockscale::scale_rules::rceil()},     // cuBLAS; never clips
};

/// The shape of a module's block-scale tensor: [out, in / block], each padded as `layout` pads.
inline std::vector<std::uint64_t> scale_tensor_shape(blockscale::scale_layout layout,
                                                     std::uint64_t rows, std::uint64_t blocks) {
  if (layout == blockscale::scale_layout::row_major)
    return {rows, blocks};
  return {(rows + 127) / 128 * 128, (blocks + 3) / 4 * 4};
}

} // namespace tools
