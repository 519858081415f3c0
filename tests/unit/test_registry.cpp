// The closed lists of contract/registry.hpp: names and types agree, every visitor reaches every
// entry, unknown names are refused naming the choices; the headroom check of the tensor-scale
// policies; a scale format outside the presets (UE6M2) through the host quantizers; and the block
// formats' tables of operations (host/format_ops.hpp) against the typed calls.
#include <blockscale/blockscale.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "catch.hpp"
#include "float_bits.hpp"
#include "quantized_bytes.hpp"
#include "same_stats.hpp"
#include "splitmix64.hpp"
#include "ue6m2.hpp"

using namespace blockscale;

namespace {

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

/// The choices an unknown-name message lists after `head`: "<head>a, b, ... or z)" gives
/// {a, b, ..., z}; empty when the message has another form.
std::vector<std::string> choices_in(const std::string& message, const std::string& head) {
  if (message.rfind(head, 0) != 0 || message.back() != ')')
    return {};
  std::vector<std::string> choices;
  std::string rest = message.substr(head.size(), message.size() - head.size() - 1);
  for (std::size_t cut; (cut = rest.find(", ")) != std::string::npos; rest.erase(0, cut + 2))
    choices.push_back(rest.substr(0, cut));
  const std::size_t or_at = rest.find(" or ");
  if (or_at == std::string::npos)
    return {};
  choices.push_back(rest.substr(0, or_at));
  choices.push_back(rest.substr(or_at + 4));
  return choices;
}

} // namespace

TEST_CASE("registry: every scalar format name reaches its type and back", "[unit][registry]") {
  int visited = 0;
  for (const char* name : scalar_format_names) {
    visit_scalar_format(name, [&](auto tag) {
      using M = typename decltype(tag)::type;
      CHECK(std::string(scalar_format_name<M>()) == name);
      ++visited;
    });
  }
  CHECK(visited == static_cast<int>(std::extent_v<decltype(scalar_format_names)>));
  int listed = 0;
  for_each_type(scalar_formats{}, [&](auto tag) {
    CHECK(std::string(scalar_format_name<typename decltype(tag)::type>()) ==
          scalar_format_names[listed]);
    ++listed;
  });
  CHECK(listed == visited);
  // The message lists every choice in order: "unknown scalar format 'e9m9' (e2m1, e4m3, ... or
  // e3m2)".
  CHECK(choices_in(error_of([] { visit_scalar_format("e9m9", [](auto) {}); }),
                   "unknown scalar format 'e9m9' (") ==
        std::vector<std::string>(std::begin(scalar_format_names), std::end(scalar_format_names)));
}

TEST_CASE("registry: roundings, enumerations and conventions by name", "[unit][registry]") {
  // Each rounding name reaches the tag of the same name: 1.25 lies halfway between the E2M1
  // values 1 (code 2, even) and 1.5 (code 3, odd), so the six tags split on it.
  std::vector<std::uint8_t> codes;
  for (const char* name : convert_rounding_names)
    visit_convert_rounding(name,
                           [&](auto tag) { codes.push_back(convert<e2m1>(1.25f, tag).bits()); });
  // nearest_even, nearest_away, toward_zero, up, down, to_odd
  CHECK(codes == std::vector<std::uint8_t>{0x2, 0x3, 0x2, 0x3, 0x2, 0x3});
  CHECK(error_of([] {
          visit_convert_rounding("sideways", [](auto) {});
        }).find("unknown rounding 'sideways' (nearest_even") == 0);

  CHECK(element_rounding_named("stochastic") == element_rounding::stochastic);
  CHECK(scale_rounding_named("down") == scale_rounding::down);
  CHECK(block_shape_named("tile") == block_shape::tile);
  CHECK(scale_layout_named("tensor_core") == scale_layout::tensor_core);
  CHECK(error_of([] { scale_layout_named("swizzled"); }) ==
        "unknown scale layout 'swizzled' (row_major or tensor_core)");

  for (const char* name : global_scale_convention_names)
    CHECK(std::string(to_string(global_scale_convention_named(name))) == name);
  CHECK(stores_divisor(global_scale_convention_named("compressed_tensors")));
  CHECK_FALSE(stores_divisor(global_scale_convention_named("modelopt")));
  CHECK(error_of([] { global_scale_convention_named("vllm"); }).find("unknown convention") == 0);
}

TEST_CASE("registry: block formats and scale rules by name", "[unit][registry]") {
  for (std::size_t id = 1; id < sizeof(preset_names) / sizeof(preset_names[0]); ++id) {
    const char* name = preset_names[id];
    CHECK(block_format_named(name) == static_cast<block_format_id>(id));
    visit_preset_named(name, [&](auto tag) {
      using F = typename decltype(tag)::type;
      CHECK(preset_id<F>() == static_cast<block_format_id>(id));
    });
  }
  CHECK(error_of([] { block_format_named("high_precision"); }) ==
        "unknown block format 'high_precision' (nvfp4, mxfp4, ue5m3_fp4 or mxfp8)");
  CHECK(
      choices_in(error_of([] { block_format_named("nvfp5"); }), "unknown block format 'nvfp5' (") ==
      std::vector<std::string>(std::begin(preset_names) + 1, std::end(preset_names)));

  const auto same = [](scale_rule a, scale_rule b) {
    return a.target == b.target && a.rounding == b.rounding;
  };
  CHECK(same(scale_rule_named<nvfp4>("nvfp4"), scale_rules::nvfp4()));
  CHECK(same(scale_rule_named<mxfp4>("ocp_floor"), scale_rules::ocp_floor()));
  CHECK(same(scale_rule_named<mxfp4>("rceil"), scale_rules::rceil()));
  CHECK(same(scale_rule_named<ue5m3_fp4>("ue5m3_up"), scale_rules::ue5m3_up()));
  CHECK(same(scale_rule_named<ue5m3_fp4>("ue5m3_nearest"), scale_rules::ue5m3_nearest()));
  // Resolved for E4M3 elements: 2^8 and 448.
  CHECK(scale_rule_named<mxfp8>("ocp_floor").target == 256.0f);
  CHECK(scale_rule_named<mxfp8>("rceil").target == 448.0f);
  // The default rule of a UE8M0 format is the OCP floor rule by name.
  CHECK(same(scale_rule_named<mxfp8>("ocp_floor"), default_scale_rule<mxfp8>()));
  CHECK(error_of([] { scale_rule_named<nvfp4>("best"); }) ==
        "unknown scale rule 'best' (nvfp4, ocp_floor, rceil, ue5m3_nearest or ue5m3_up)");
}

TEST_CASE("tensor-scale headroom: the scale format's span, checked by name", "[unit][registry]") {
  CHECK(max_headroom_binades<nvfp4>() == 17);     // 448 = 1.75 · 2^8 down to 2^-9
  CHECK(max_headroom_binades<ue5m3_fp4>() == 33); // 1.75 · 2^16 down to 2^-17
  CHECK(max_headroom_binades<mxfp4>() == 254);    // 2^127 down to 2^-127
  CHECK(max_headroom_binades<ue6m2_fp4>() == 64); // 1.5 · 2^32 down to 2^-32
  CHECK_NOTHROW(check_headroom_binades<nvfp4>(0, "headroom"));
  CHECK_NOTHROW(check_headroom_binades<nvfp4>(17, "headroom"));
  CHECK(error_of([] { check_headroom_binades<nvfp4>(-3, "headroom_binades"); }) ==
        "headroom_binades must be between 0 and 17 binades for this block format, not -3");
  CHECK(error_of([] { check_headroom_binades<nvfp4>(60, "headroom"); }).find("not 60") !=
        std::string::npos);
  // The run-time policy checks the configuration it is made from.
  tensor_scale_config config;
  config.policy = tensor_scale_config::kind::periodic;
  config.headroom_binades = 34;
  CHECK(error_of([&] {
          tensor_scale_policy::make<ue5m3_fp4>(config);
        }).find("headroom_binades must be between 0 and 33") == 0);
  config.headroom_binades = 8;
  CHECK_NOTHROW(tensor_scale_policy::make<ue5m3_fp4>(config));
  config.policy = tensor_scale_config::kind::delayed;
  config.margin_binades = -1;
  CHECK(error_of([&] { tensor_scale_policy::make<nvfp4>(config); }).find("margin_binades") == 0);
}

TEST_CASE("a scale format outside the presets: UE6M2 through the host quantizers",
          "[unit][registry]") {
  // Rows 2^-27 .. 2^35 in magnitude: 62 binades, beyond UE4M3 (17) and UE5M3 (33), inside UE6M2.
  const std::size_t rows = 32, cols = 96;
  std::vector<float> x(rows * cols);
  splitmix64 rng{6};
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) {
      const double unit = static_cast<double>(rng.next() >> 11) * 0x1.0p-53 - 0.5;
      x[r * cols + c] = static_cast<float>(unit * std::ldexp(1.0, static_cast<int>(r) * 2 - 26));
    }
  const matrix_view<const float> view(x.data(), rows, cols, cols);
  for (bool stochastic : {false, true})
    for (bool columnwise : {false, true}) {
      INFO((stochastic ? "stochastic" : "nearest") << (columnwise ? ", columnwise" : ""));
      quantize_options options;
      options.rounding = stochastic ? element_rounding::stochastic : element_rounding::nearest_even;
      options.seed = 42;
      options.columnwise = columnwise;
      const auto fast = quantize<ue6m2_fp4>(view, options);
      CHECK(fast == quantize_reference<ue6m2_fp4>(view, options));
      // Decoded, every element is q · S with S a UE6M2 value: no scale saturated or flushed.
      CHECK(fast.stats().saturated_scales == 0);
      CHECK(fast.stats().zero_scales == 0);
      std::vector<float> back(rows * cols);
      const std::size_t out_rows = columnwise ? cols : rows, out_cols = columnwise ? rows : cols;
      dequantize(fast.view(), matrix_view<float>(back.data(), out_rows, out_cols, out_cols));
      // Each error against its block's largest magnitude: the scale is amax / 6 within UE6M2's
      // relative half-ulp (1/8), an E2M1 step at most 2 scales, so an error is at most
      // 1.125 / 6 of amax to nearest and twice that under stochastic rounding.
      const auto input = [&](std::size_t r, std::size_t c) {
        return static_cast<double>(columnwise ? x[c * cols + r] : x[r * cols + c]);
      };
      double worst = 0;
      for (std::size_t r = 0; r < out_rows; ++r)
        for (std::size_t c0 = 0; c0 < out_cols; c0 += 16) {
          double amax = 0;
          for (std::size_t c = c0; c < c0 + 16; ++c)
            amax = std::fmax(amax, std::fabs(input(r, c)));
          for (std::size_t c = c0; c < c0 + 16; ++c) {
            const double error = std::fabs(back[r * out_cols + c] - input(r, c));
            worst = std::fmax(worst, error / amax);
          }
        }
      CHECK(worst <= (stochastic ? 2.0 : 1.0) * 1.125 / 6.0);
    }
}

namespace {

/// The bytes of an erased quantization through `ops`, with the storage its layout asks for.
struct erased_result {
  std::vector<std::uint8_t> elements, scales;
  float decode_scale = 0.0f;
  quantize_stats stats;
};

erased_result quantize_through(const block_format_ops& ops, const std::vector<float>& x,
                               std::size_t rows, std::size_t cols, const quantize_options& options,
                               any_policy policy = {}) {
  const quantized_shape shape = quantized_shape_for(rows, cols, options);
  const quantized_layout layout = ops.layout(shape);
  erased_result r;
  r.elements.assign(layout.storage.element_bytes, 0xAA);
  r.scales.assign(layout.storage.scale_bytes, 0xAA);
  const any_const_matrix in{x.data(), element_type::float32, rows, cols, cols};
  r.stats = ops.quantize_into(in,
                              {shape, r.elements.data(), r.elements.size(), r.scales.data(),
                               r.scales.size(), &r.decode_scale},
                              options, policy);
  return r;
}

/// Every operation of `ops` against the typed call on block format F, bit for bit.
template <class F>
void check_table(const block_format_ops& ops, std::uint64_t seed) {
  INFO(ops.name);
  CHECK(ops.block_size == F::block_size);
  CHECK(ops.element_bits == F::element_bits);
  CHECK(std::string(ops.element_format) == scalar_format_label<typename F::element_type>());
  CHECK(std::string(ops.scale_format) == scalar_format_label<typename F::scale_type>());
  const std::size_t rows = 6, cols = 72; // a partial last block for every block size
  std::vector<float> x(rows * cols);
  splitmix64 rng{seed};
  for (float& v : x)
    v = static_cast<float>(rng.normal() * std::ldexp(1.0, static_cast<int>(rng.next() % 12) - 6));
  const matrix_view<const float> view(x.data(), rows, cols, cols);

  for (bool columnwise : {false, true}) {
    INFO("columnwise " << columnwise);
    quantize_options options;
    options.columnwise = columnwise;
    options.layout = columnwise ? scale_layout::tensor_core : scale_layout::row_major;
    const quantized_matrix<F> typed = quantize<F>(view, options);
    const erased_result erased = quantize_through(ops, x, rows, cols, options);
    CHECK(erased.elements == element_bytes(typed));
    CHECK(erased.scales == scale_bytes(typed));
    CHECK(erased.decode_scale == typed.decode_scale());
    check_same_stats(erased.stats, typed.stats());
    CHECK(float_bits(ops.measure_amax({x.data(), element_type::float32, rows, cols, cols},
                                      options)) == float_bits(measure_amax<F>(view, options)));

    // Dequantized into each output type, padded or not.
    const any_const_quantized q{typed.shape(),          erased.elements.data(),
                                erased.elements.size(), erased.scales.data(),
                                erased.scales.size(),   &erased.decode_scale};
    for (bool padded : {false, true}) {
      const std::size_t out_cols = padded ? typed.padded_cols() : typed.cols();
      std::vector<bfloat16> want(typed.rows() * out_cols), got(want.size());
      const matrix_view<bfloat16> want_view(want.data(), typed.rows(), out_cols, out_cols);
      if (padded)
        dequantize_padded(typed, want_view);
      else
        dequantize(typed, want_view);
      ops.dequantize(q, {got.data(), element_type::bfloat16, typed.rows(), out_cols, out_cols},
                     padded, 2);
      CHECK(std::memcmp(want.data(), got.data(), want.size() * sizeof(bfloat16)) == 0);
    }
  }

  // Under a policy made through the table: the same numerator, bytes and state.
  current_tensor_scale typed_policy = current_tensor_scale::make<F>(3);
  current_tensor_scale erased_policy = ops.make_current(3, "headroom");
  CHECK(erased_policy.numerator == typed_policy.numerator);
  const quantized_matrix<F> typed = quantize<F>(view, typed_policy);
  const erased_result erased =
      quantize_through(ops, x, rows, cols, {}, {any_policy::kind::current, &erased_policy});
  CHECK(erased.elements == element_bytes(typed));
  CHECK(erased.decode_scale == typed.decode_scale());
  CHECK(erased_policy.encode_scale() == typed_policy.encode_scale());
  CHECK(erased_policy.calls == typed_policy.calls);
  CHECK(ops.make_periodic(5, 1, "headroom").numerator ==
        periodic_tensor_scale::make<F>(5, 1).numerator);
  CHECK(ops.make_delayed(7, 2, "margin").history == delayed_tensor_scale::make<F>(7, 2).history);
  CHECK(error_of([&] { ops.make_current(max_headroom_binades<F>() + 1, "headroom"); }) ==
        error_of([&] { check_headroom_binades<F>(max_headroom_binades<F>() + 1, "headroom"); }));
  CHECK(ops.default_rule().target == default_scale_rule<F>().target);
  CHECK(ops.rule_named("rceil").target == scale_rule_named<F>("rceil").target);

  // The reference GEMM through two tables (this one and NVFP4's) and with a float operand.
  const quantized_matrix<nvfp4> other = quantize<nvfp4>(view);
  const block_format_ops& nv = preset_format_ops().tables[0];
  const any_const_quantized a{typed.shape(),        erased.elements.data(), erased.elements.size(),
                              erased.scales.data(), erased.scales.size(),   &erased.decode_scale};
  const float other_decode = other.decode_scale();
  const any_const_quantized b{
      other.shape(),      other.element_data(),        other.storage().element_bytes,
      other.scale_data(), other.storage().scale_bytes, &other_decode};
  std::vector<float> want(rows * rows), got(rows * rows);
  const matrix_view<float> want_view(want.data(), rows, rows, rows),
      got_view(got.data(), rows, rows, rows);
  gemm::reference(typed, other, want_view);
  gemm_reference(ops, a, nv, b, got_view);
  CHECK(want == got);
  gemm::reference(view, typed, want_view);
  gemm_reference(ops, a, view, false, got_view);
  CHECK(want == got);

  // A buffer too small is refused before anything is written.
  quantize_options options;
  const quantized_shape shape = quantized_shape_for(rows, cols, options);
  std::vector<std::uint8_t> small(ops.layout(shape).storage.element_bytes - 1), scales(4096);
  float decode = 0.0f;
  CHECK(error_of([&] {
          ops.quantize_into(
              {x.data(), element_type::float32, rows, cols, cols},
              {shape, small.data(), small.size(), scales.data(), scales.size(), &decode}, options,
              {});
        }).find("elements holds") != std::string::npos);
}

} // namespace

TEST_CASE("format tables: a call through a block format's table computes the typed call's bits",
          "[unit][registry]") {
  const block_format_ops_list& presets = preset_format_ops();
  REQUIRE(presets.count == detail::count_of(preset_formats{}));
  std::size_t i = 0;
  for_each_type(preset_formats{}, [&](auto tag) {
    const block_format_ops& ops = presets.tables[i];
    CHECK(std::string(ops.name) == preset_names[i + 1]);
    check_table<typename decltype(tag)::type>(ops, 100 + i);
    ++i;
  });
  // A format no list names: its scale's label is made from its traits.
  const block_format_ops ue6m2_ops = make_block_format_ops<ue6m2_fp4>("ue6m2_fp4");
  CHECK(std::string(ue6m2_ops.scale_format) == "ue6m2");
  check_table<ue6m2_fp4>(ue6m2_ops, 200);
}

TEST_CASE("format tables: lists from other headers are refused", "[unit][registry]") {
  const block_format_ops tables[] = {make_block_format_ops<ue6m2_fp4>("ue6m2_fp4")};
  block_format_ops_list list = make_block_format_ops_list(tables);
  check_block_format_ops_list(list); // these headers: accepted
  list.abi += 1;
  CHECK(error_of([&] { check_block_format_ops_list(list); }).find("rebuild the module") !=
        std::string::npos);
  list = make_block_format_ops_list(tables);
  list.table_size -= 8;
  CHECK(error_of([&] { check_block_format_ops_list(list); }).find("table size") !=
        std::string::npos);
}

TEST_CASE("format tables: a list must name each table, each name once", "[unit][registry]") {
  const block_format_ops twice[] = {make_block_format_ops<ue6m2_fp4>("ue6m2_fp4"),
                                    make_block_format_ops<nvfp4>("nvfp4_copy"),
                                    make_block_format_ops<ue6m2_fp4>("ue6m2_fp4")};
  const std::string error =
      error_of([&] { check_block_format_ops_list(make_block_format_ops_list(twice)); });
  CHECK(error.find("'ue6m2_fp4' is given to tables 0 and 2") != std::string::npos);
  const block_format_ops unnamed[] = {make_block_format_ops<ue6m2_fp4>("")};
  CHECK(error_of([&] {
          check_block_format_ops_list(make_block_format_ops_list(unnamed));
        }).find("table 0 has no name") != std::string::npos);
  block_format_ops_list missing = make_block_format_ops_list(unnamed);
  missing.tables = nullptr;
  CHECK(error_of([&] { check_block_format_ops_list(missing); }).find("null address") !=
        std::string::npos);
  const block_format_ops distinct[] = {make_block_format_ops<ue6m2_fp4>("ue6m2_fp4"),
                                       make_block_format_ops<nvfp4>("nvfp4_copy")};
  CHECK_NOTHROW(check_block_format_ops_list(make_block_format_ops_list(distinct)));
}
