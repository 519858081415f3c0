// Inputs and options shared by the kernel tests that run on the host (test_cuda_kernels_host.cpp)
// and on a device (test_cuda_quantize.cu): ragged shapes, inputs with NaN, Inf and zero blocks,
// the option matrix, and whole-matrix comparisons.
#pragma once

#include <blockscale/blockscale.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "catch.hpp"
#include "float_bits.hpp"
#include "quantized_bytes.hpp"
#include "splitmix64.hpp"

namespace kernel_cases {

using namespace blockscale;

inline const float qnan = std::numeric_limits<float>::quiet_NaN();
inline const float inf = std::numeric_limits<float>::infinity();

struct shape_case {
  std::size_t rows, cols, ld;
};

// Ragged and aligned shapes, some with a padded leading dimension (an odd ld defeats the vector
// loads, so both load paths run).
inline const shape_case shapes[] = {{1, 1, 1},     {5, 37, 37},    {64, 64, 64}, {70, 130, 131},
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

// The options of one case of the matrix.
struct option_case {
  block_shape blocks;
  scale_layout layout;
  element_rounding rounding;
  bool hadamard;
};

inline std::vector<option_case> option_cases() {
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

inline quantize_options make_options(const option_case& c, const scale_rule& rule, bool columnwise,
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

// The input of step `step`: it grows by 2^(step / 2), so a periodic policy's block scales
// saturate now and then and it refreshes early.
inline std::vector<float> step_input(const shape_case& s, int step, std::uint64_t seed) {
  std::vector<float> x = make_input<float>(s, seed + static_cast<std::uint64_t>(step), step == 3);
  const float growth = std::ldexp(1.0f, step * 3);
  for (float& v : x)
    v *= growth;
  return x;
}

} // namespace kernel_cases
