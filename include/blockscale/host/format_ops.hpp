/// \file host/format_ops.hpp
/// A block format's host operations behind plain function pointers: run-time dispatch over block
/// formats that the dispatching code was not compiled with. `make_block_format_ops<F>(name)` fills
/// one table from the templates a typed call reaches (make_quantize_params, measure_amax,
/// quantize_into with or without a tensor-scale policy, dequantize, the policies' make, the scale
/// rules, the reference GEMM's decoder), so a call through the table computes the bits the typed
/// call computes. `gemm_reference` multiplies two operands whose tables may come from different
/// places: the pair routine is the typed reference's own (host/gemm_reference.hpp).
///
/// The Python bindings keep one table per block-format name: the presets' (`preset_format_ops`),
/// and those a separately compiled extension module hands over as a `block_format_ops_list`
/// (docs/python.md, "Block formats outside the presets"). Such a crossing between two builds is
/// guarded by `block_format_ops_list::abi` and the table's size: tables made from another version
/// of these headers are refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "../block/block_format.hpp"
#include "../block/matrix_view.hpp"
#include "../block/quantized_shape.hpp"
#include "../block/quantized_view.hpp"
#include "../block/scale_rule.hpp"
#include "../block/scale_shift.hpp"
#include "../block/tensor_scale.hpp"
#include "../config.hpp"
#include "../contract/erased.hpp"
#include "../contract/quantize_options.hpp"
#include "../contract/registry.hpp"
#include "../numeric/half.hpp"
#include "dequantize.hpp"
#include "gemm_reference.hpp"
#include "quantize.hpp"

namespace blockscale {
inline namespace v0 {

/// What a quantized matrix of a shape occupies (storage_for and the view's geometry).
struct quantized_layout {
  quantized_storage storage;
  std::size_t row_bytes = 0, padded_cols = 0, blocks_per_row = 0;
};

/// One block format's operations. Every function throws std::invalid_argument naming the argument
/// on bad input, as the typed call does.
struct block_format_ops {
  const char* name;           ///< the name callers use ("nvfp4", "ue6m2_fp4", ...)
  const char* element_format; ///< scalar_format_label of the element and scale types
  const char* scale_format;
  std::size_t block_size;
  int element_bits;
  gemm::detail::operand_facts facts; ///< what the reference GEMM's choice of sums needs

  quantized_layout (*layout)(const quantized_shape& shape);
  /// make_quantize_params<F>: the argument checks of a quantization of a rows × cols matrix.
  void (*check_options)(std::size_t rows, std::size_t cols, const quantize_options& options);
  scale_rule (*default_rule)();
  scale_rule (*rule_named)(std::string_view name);
  /// The policies' make<F>, after check_headroom_binades<F>(binades, binades_name).
  current_tensor_scale (*make_current)(int headroom, const char* binades_name);
  periodic_tensor_scale (*make_periodic)(std::uint32_t interval, int headroom,
                                         const char* binades_name);
  delayed_tensor_scale (*make_delayed)(std::uint32_t history, int margin, const char* binades_name);
  float (*measure_amax)(const any_const_matrix& x, const quantize_options& options);
  quantize_stats (*quantize_into)(const any_const_matrix& x, const any_quantized& out,
                                  const quantize_options& options, any_policy policy);
  void (*dequantize)(const any_const_quantized& q, const any_matrix& out, bool padded,
                     unsigned threads);
  gemm::detail::operand_summary (*summary)(const any_const_quantized& q);
  gemm::detail::decoded_operand (*decode)(const any_const_quantized& q, std::size_t length,
                                          bool apply_scales);
  /// census_of_shifts<ue4m3_format> (block/scale_shift.hpp): the rows and tiles of `tile_rows`
  /// rows whose block scales shift onto UE4M3 exactly for `target`; for scale formats with UE4M3's
  /// mantissa (UE4M3, UE5M3), std::invalid_argument for the others.
  scale_shift_census (*ue4m3_shift_census)(const any_const_quantized& q, std::size_t tile_rows,
                                           shift_target target);
};

/// A list of tables as one module hands it to another, with what guards the crossing.
struct block_format_ops_list {
  std::uint32_t abi;      ///< block_format_ops_abi of the headers that made the tables
  std::size_t table_size; ///< sizeof(block_format_ops) there
  std::size_t count;
  const block_format_ops* tables;
};

/// The headers' version as one number: tables cross only between builds of the same version.
inline constexpr std::uint32_t block_format_ops_abi = BLOCKSCALE_VERSION_MAJOR * 1000000u +
                                                      BLOCKSCALE_VERSION_MINOR * 1000u +
                                                      BLOCKSCALE_VERSION_PATCH;

template <std::size_t N>
constexpr block_format_ops_list make_block_format_ops_list(const block_format_ops (&tables)[N]) {
  return {block_format_ops_abi, sizeof(block_format_ops), N, tables};
}

/// Throws std::invalid_argument unless `list` was made by these headers' version and names each
/// of its tables, each name once.
inline void check_block_format_ops_list(const block_format_ops_list& list) {
  if (list.abi != block_format_ops_abi || list.table_size != sizeof(block_format_ops))
    throw std::invalid_argument(
        "block format tables: made by blockscale " + std::to_string(list.abi / 1000000u) + "." +
        std::to_string(list.abi / 1000u % 1000u) + "." + std::to_string(list.abi % 1000u) +
        " (table size " + std::to_string(list.table_size) + "), these headers are " +
        std::to_string(BLOCKSCALE_VERSION_MAJOR) + "." + std::to_string(BLOCKSCALE_VERSION_MINOR) +
        "." + std::to_string(BLOCKSCALE_VERSION_PATCH) + " (" +
        std::to_string(sizeof(block_format_ops)) + "): rebuild the module against them");
  if (list.count != 0 && list.tables == nullptr)
    throw std::invalid_argument("block format tables: " + std::to_string(list.count) +
                                " tables at a null address");
  for (std::size_t i = 0; i < list.count; ++i) {
    const char* name = list.tables[i].name;
    if (name == nullptr || *name == '\0')
      throw std::invalid_argument("block format tables: table " + std::to_string(i) +
                                  " has no name");
    for (std::size_t j = 0; j < i; ++j)
      if (std::string(name) == list.tables[j].name)
        throw std::invalid_argument("block format tables: the name '" + std::string(name) +
                                    "' is given to tables " + std::to_string(j) + " and " +
                                    std::to_string(i));
  }
}

namespace detail {

template <class Format>
struct format_ops_impl {
  static quantized_layout layout(const quantized_shape& shape) {
    const auto view = const_quantized_view<Format>::unchecked(shape, nullptr, nullptr, nullptr);
    return {storage_for<Format>(shape), view.row_bytes(), view.padded_cols(),
            view.blocks_per_row()};
  }
  static void check_options(std::size_t rows, std::size_t cols, const quantize_options& options) {
    (void)make_quantize_params<Format>(rows, cols, options);
  }
  static scale_rule default_rule() { return default_scale_rule<Format>(); }
  static scale_rule rule_named(std::string_view name) { return scale_rule_named<Format>(name); }
  static current_tensor_scale make_current(int headroom, const char* name) {
    check_headroom_binades<Format>(headroom, name);
    return current_tensor_scale::make<Format>(headroom);
  }
  static periodic_tensor_scale make_periodic(std::uint32_t interval, int headroom,
                                             const char* name) {
    check_headroom_binades<Format>(headroom, name);
    return periodic_tensor_scale::make<Format>(interval, headroom);
  }
  static delayed_tensor_scale make_delayed(std::uint32_t history, int margin, const char* name) {
    check_headroom_binades<Format>(margin, name);
    return delayed_tensor_scale::make<Format>(history, margin);
  }
  static float measure_amax(const any_const_matrix& x, const quantize_options& options) {
    return with_matrix(x, [&](auto in) { return blockscale::measure_amax<Format>(in, options); });
  }
  static quantize_stats quantize_into(const any_const_matrix& x, const any_quantized& out,
                                      const quantize_options& options, any_policy policy) {
    const auto view = view_of<Format>(out);
    return with_matrix(x, [&](auto in) {
      if (policy.policy == nullptr || policy.type == any_policy::kind::none)
        return blockscale::quantize_into(in, view, options);
      return visit_policy_kind(policy.type, [&](auto tag) {
        using P = typename decltype(tag)::type;
        return blockscale::quantize_into(in, view, *static_cast<P*>(policy.policy), options);
      });
    });
  }
  static void dequantize(const any_const_quantized& q, const any_matrix& out, bool padded,
                         unsigned threads) {
    const auto view = view_of<Format>(q);
    with_matrix(out, [&](auto o) {
      if (padded)
        blockscale::dequantize_padded(view, o, threads);
      else
        blockscale::dequantize(view, o, threads);
    });
  }
  static gemm::detail::operand_summary summary(const any_const_quantized& q) {
    return gemm::detail::summary_of(view_of<Format>(q));
  }
  static gemm::detail::decoded_operand decode(const any_const_quantized& q, std::size_t length,
                                              bool apply_scales) {
    return gemm::detail::decode(view_of<Format>(q), length, apply_scales);
  }
  static scale_shift_census ue4m3_shift_census(const any_const_quantized& q, std::size_t tile_rows,
                                               shift_target target) {
    using scale_format = typename Format::scale_type::format;
    if constexpr (detail::shiftable_scale_formats<scale_format, ue4m3_format>())
      return census_of_shifts<ue4m3_format>(view_of<Format>(q), tile_rows, target);
    else
      throw std::invalid_argument(std::string("ue4m3_shift_census: ") +
                                  scalar_format_label<typename Format::scale_type>() +
                                  " scales do not shift onto UE4M3 (3 mantissa bits, unsigned)");
  }
};

/// The part names, made once per format.
template <class Minifloat>
const char* scalar_label_storage() {
  static const std::string label = scalar_format_label<Minifloat>();
  return label.c_str();
}

} // namespace detail

/// The table of block format F, named `name` (a string that outlives the table).
template <class Format>
block_format_ops make_block_format_ops(const char* name) {
  using impl = detail::format_ops_impl<Format>;
  return {name,
          detail::scalar_label_storage<typename Format::element_type>(),
          detail::scalar_label_storage<typename Format::scale_type>(),
          Format::block_size,
          Format::element_bits,
          gemm::detail::facts_of<Format>(),
          &impl::layout,
          &impl::check_options,
          &impl::default_rule,
          &impl::rule_named,
          &impl::make_current,
          &impl::make_periodic,
          &impl::make_delayed,
          &impl::measure_amax,
          &impl::quantize_into,
          &impl::dequantize,
          &impl::summary,
          &impl::decode,
          &impl::ue4m3_shift_census};
}

/// The presets' tables, in the order of `preset_formats` (their names from `preset_names`).
inline const block_format_ops_list& preset_format_ops() {
  static const auto tables = [] {
    struct holder {
      block_format_ops ops[detail::count_of(preset_formats{})];
    } h{};
    std::size_t i = 0;
    for_each_type(preset_formats{}, [&](auto tag) {
      h.ops[i] = make_block_format_ops<typename decltype(tag)::type>(preset_names[i + 1]);
      ++i;
    });
    return h;
  }();
  static const block_format_ops_list list = make_block_format_ops_list(tables.ops);
  return list;
}

/// The reference GEMM (host/gemm_reference.hpp) on two quantized operands, each with its table:
/// the typed reference's pair routine, whatever compiled the tables.
inline void gemm_reference(const block_format_ops& format_a, const any_const_quantized& a,
                           const block_format_ops& format_b, const any_const_quantized& b,
                           matrix_view<float> c, float alpha = 1.0f, float beta = 0.0f,
                           unsigned threads = 1) {
  const auto decoder = [](const block_format_ops& ops, const any_const_quantized& q) {
    return [&ops, &q](std::size_t length, bool apply_scales) {
      return ops.decode(q, length, apply_scales);
    };
  };
  gemm::detail::reference_pair(format_a.summary(a), decoder(format_a, a), format_b.summary(b),
                               decoder(format_b, b), c, alpha, beta, threads);
}

/// The same with one float operand: the quantized one is a when `quantized_first`, else b.
inline void gemm_reference(const block_format_ops& format, const any_const_quantized& q,
                           matrix_view<const float> f, bool quantized_first, matrix_view<float> c,
                           float alpha = 1.0f, float beta = 0.0f, unsigned threads = 1) {
  gemm::detail::reference_with_float(
      format.summary(q),
      [&](std::size_t length, bool apply_scales) { return format.decode(q, length, apply_scales); },
      f, quantized_first, c, alpha, beta, threads);
}

} // namespace v0
} // namespace blockscale
