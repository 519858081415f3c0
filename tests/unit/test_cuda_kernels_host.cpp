// The CUDA kernels' code run on the host: each launcher of cuda/launch.hpp with the host runner,
// which executes the kernels' CTA programs thread block by thread block, phase by phase, lanes
// through host_warp. Every output is compared byte for byte with the host quantizer
// (quantize_into) for every preset, input type, direction (rowwise, columnwise, both from one
// read), block shape (1×B, B×B), scale layout, element rounding, scale rule, the Hadamard
// transform, on ragged shapes with padded leading dimensions and with NaN, Inf and zero blocks;
// then the amax, the dequantizer, the device tensor-scale policies over several steps, and the
// launchers' argument checks.
#include <blockscale/blockscale.hpp>
#include <blockscale/cuda/launch.hpp>
#include <blockscale/emulation/host_runner.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "catch.hpp"
#include "quantized_bytes.hpp"
#include "same_stats.hpp"
#include "splitmix64.hpp"

using namespace blockscale;

namespace {

const float qnan = std::numeric_limits<float>::quiet_NaN();
const float inf = std::numeric_limits<float>::infinity();

std::uint32_t float_bits(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

struct shape_case {
  std::size_t rows, cols, ld;
};

// Ragged and aligned shapes, some with a padded leading dimension (an odd ld defeats the vector
// loads, so both load paths run).
const shape_case shapes[] = {{1, 1, 1},     {5, 37, 37},    {64, 64, 64}, {70, 130, 131},
                             {129, 33, 40}, {33, 200, 208}, {0, 16, 16},  {16, 0, 0}};

// An input of T, rows × cols with leading dimension ld, values of mixed magnitude; the gap
// beyond cols holds NaN, so a read past the view would show. With `specials`, whole 16-blocks of
// zeros, a NaN, Infs and tiny values are planted.
template <class T>
std::vector<T> make_input(const shape_case& s, std::uint64_t seed, bool specials) {
  splitmix64 rng{seed};
  std::vector<T> x(s.rows * s.ld + 1, T(qnan));
  for (std::size_t r = 0; r < s.rows; ++r)
    for (std::size_t c = 0; c < s.cols; ++c) {
      const double magnitude = std::ldexp(1.0, static_cast<int>(rng.next() % 24) - 12);
      x[r * s.ld + c] = T(static_cast<float>(rng.normal() * magnitude));
    }
  if (specials && s.rows > 2 && s.cols > 20) {
    for (std::size_t c = 0; c < 16; ++c)
      x[c] = T(0.0f);          // a zero block (row 0, block 0)
    x[1 * s.ld + 3] = T(qnan); // a NaN block
    x[2 * s.ld + 17] = T(inf); // an Inf
    x[2 * s.ld + 18] = T(-inf);
    for (std::size_t c = 0; c < 16 && c < s.cols; ++c)
      x[(s.rows - 1) * s.ld + c] = T(1e-30f); // a block whose scale underflows
  }
  return x;
}

template <class F>
quantized_matrix<F> garbage_matrix(const quantized_shape& shape) {
  quantized_matrix<F> q(shape);
  const quantized_view<F> view = q.view();
  std::memset(view.elements(), 0xCD, q.storage().element_bytes);
  std::memset(view.scales(), 0xCD, q.storage().scale_bytes);
  return q;
}

template <class F>
void check_same_matrix(const quantized_matrix<F>& device, const quantized_matrix<F>& host) {
  CHECK(element_bytes(device) == element_bytes(host));
  CHECK(scale_bytes(device) == scale_bytes(host));
  CHECK(float_bits(device.view().decode_scale()) == float_bits(host.view().decode_scale()));
}

quantize_stats stats_of(const cuda::device_quantize_stats& s) {
  return s.value();
}

// The options of one case of the matrix.
struct option_case {
  block_shape blocks;
  scale_layout layout;
  element_rounding rounding;
  bool hadamard;
};

std::vector<option_case> option_cases() {
  std::vector<option_case> cases;
  for (block_shape b : {block_shape::rowwise, block_shape::tile})
    for (scale_layout l : {scale_layout::row_major, scale_layout::tensor_core})
      for (element_rounding e : {element_rounding::nearest_even, element_rounding::stochastic})
        for (bool h : {false, true})
          cases.push_back({b, l, e, h});
  return cases;
}

// The scale rules worth trying for a format: its default and the others of its family.
template <class F>
std::vector<scale_rule> rules_for() {
  std::vector<scale_rule> rules{default_scale_rule<F>()};
  if constexpr (std::is_same<typename F::scale_type, ue8m0>::value) {
    rules.push_back(scale_rules::ocp_floor());
    rules.push_back(scale_rules::rceil());
  } else {
    rules.push_back(scale_rule{6.0f, scale_rounding::up});
  }
  return rules;
}

quantize_options make_options(const option_case& c, const scale_rule& rule, bool columnwise,
                              float encode_scale, std::uint64_t seed) {
  quantize_options o;
  o.shape = c.blocks;
  o.layout = c.layout;
  o.rounding = c.rounding;
  o.hadamard = c.hadamard;
  o.transform = seed % 2 ? hadamard16::te_default() : hadamard16::from_seed(seed);
  o.columnwise = columnwise;
  o.rule = rule;
  o.seed = seed;
  o.offset = seed * 3 + 1;
  o.encode_scale = encode_scale;
  return o;
}

template <class F, class T>
void check_one_direction(const shape_case& s, const std::vector<T>& data,
                         const quantize_options& options, emulation::host_runner& runner) {
  const matrix_view<const T> x(data.data(), s.rows, s.cols, s.ld);
  quantized_matrix<F> host(quantized_shape_for(s.rows, s.cols, options));
  const quantize_stats host_stats = quantize_into(x, host, options);
  quantized_matrix<F> device = garbage_matrix<F>(host.shape());
  cuda::device_quantize_stats counters;
  const cuda::status status = cuda::launch_quantize(runner, x, device.view(), options, &counters);
  REQUIRE(status.ok());
  check_same_matrix(device, host);
  check_same_stats(stats_of(counters), host_stats);
}

template <class F, class T>
void check_pair(const shape_case& s, const std::vector<T>& data,
                const quantize_options& row_options, const quantize_options& column_options,
                emulation::host_runner& runner) {
  const matrix_view<const T> x(data.data(), s.rows, s.cols, s.ld);
  quantized_matrix<F> host_row(quantized_shape_for(s.rows, s.cols, row_options));
  quantized_matrix<F> host_column(quantized_shape_for(s.rows, s.cols, column_options));
  const quantize_pair_stats host_stats =
      quantize_into(x, host_row.view(), row_options, host_column.view(), column_options);
  quantized_matrix<F> row = garbage_matrix<F>(host_row.shape());
  quantized_matrix<F> column = garbage_matrix<F>(host_column.shape());
  cuda::device_quantize_stats row_counters, column_counters;
  const cuda::status status =
      cuda::launch_quantize(runner, x, row.view(), row_options, column.view(), column_options,
                            &row_counters, &column_counters);
  REQUIRE(status.ok());
  check_same_matrix(row, host_row);
  check_same_matrix(column, host_column);
  check_same_stats(stats_of(row_counters), host_stats.rowwise);
  check_same_stats(stats_of(column_counters), host_stats.columnwise);
}

template <class F, class T>
void check_format_and_type() {
  emulation::host_runner runner;
  std::uint64_t seed = 1;
  for (const shape_case& s : shapes) {
    for (bool specials : {false, true}) {
      const std::vector<T> data = make_input<T>(s, seed * 7919 + 1, specials);
      for (const scale_rule& rule : rules_for<F>()) {
        for (const option_case& c : option_cases()) {
          ++seed;
          runner.order_seed = seed % 3 == 0 ? seed : 0;
          INFO("shape " << s.rows << " x " << s.cols << " ld " << s.ld << ", specials " << specials
                        << ", rule " << rule.target << "/" << static_cast<int>(rule.rounding)
                        << ", tile " << (c.blocks == block_shape::tile) << ", tensor-core "
                        << (c.layout == scale_layout::tensor_core) << ", stochastic "
                        << (c.rounding == element_rounding::stochastic) << ", hadamard "
                        << c.hadamard);
          // s_enc: 1, and a TE-like tensor scale, which moves every block scale.
          const float s_enc = seed % 2 ? 1.0f : 6.0f * 448.0f / 3.5f;
          const quantize_options row = make_options(c, rule, false, s_enc, seed);
          const quantize_options column = make_options(c, rule, true, s_enc, seed + 1);
          check_one_direction<F>(s, data, row, runner);
          check_one_direction<F>(s, data, column, runner);
          check_pair<F>(s, data, row, column, runner);
        }
      }
    }
  }
}

} // namespace

TEMPLATE_TEST_CASE("the quantize kernel equals quantize_into byte for byte", "[cuda][emulation]",
                   nvfp4, mxfp4, ue5m3_fp4, mxfp8) {
  SECTION("float input") {
    check_format_and_type<TestType, float>();
  }
  SECTION("bfloat16 input") {
    check_format_and_type<TestType, bfloat16>();
  }
  SECTION("float16 input") {
    check_format_and_type<TestType, float16>();
  }
}
