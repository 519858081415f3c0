// Recipes (field by field against the published recipes, docs/training.md) and the fake-quantized
// linear layer: gradients against finite differences in high precision, the fake-quantized GEMMs
// against the block-scaled reference GEMM, and a short training run per recipe that must lower the
// loss.
#include <blockscale/blockscale.hpp>
#include <blockscale/training/linear.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "catch.hpp"

using namespace blockscale;

namespace {

std::vector<float> random_vector(std::size_t n, std::uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v)
    x = normal(rng);
  return v;
}

void check_operand(const operand_recipe& o, block_format_id format, block_shape shape,
                   element_rounding rounding, bool hadamard, tensor_scale_config::kind policy) {
  CHECK(o.format == format);
  CHECK(o.shape == shape);
  CHECK(o.rounding == rounding);
  CHECK(o.hadamard == hadamard);
  CHECK(o.tensor_scale.policy == policy);
}

} // namespace

TEST_CASE("NVFP4 recipe: Transformer Engine's defaults", "[recipe]") {
  // Transformer Engine's NVFP4BlockScaling: W 2D 16x16 for Fprop and Dgrad, RNE, no RHT; X rowwise
  // 1x16 RNE; X columnwise (Wgrad) RHT, RNE; dY rowwise (Dgrad) SR; dY columnwise (Wgrad) RHT, SR;
  // current scaling.
  const recipe r = recipes::nvfp4();
  constexpr auto nvfp4 = block_format_id::nvfp4;
  constexpr auto current = tensor_scale_config::kind::current;
  check_operand(r.fprop_x, nvfp4, block_shape::rowwise, element_rounding::nearest_even, false,
                current);
  check_operand(r.fprop_w, nvfp4, block_shape::tile, element_rounding::nearest_even, false,
                current);
  check_operand(r.dgrad_dy, nvfp4, block_shape::rowwise, element_rounding::stochastic, false,
                current);
  check_operand(r.dgrad_w, nvfp4, block_shape::tile, element_rounding::nearest_even, false,
                current);
  check_operand(r.wgrad_dy, nvfp4, block_shape::rowwise, element_rounding::stochastic, true,
                current);
  check_operand(r.wgrad_x, nvfp4, block_shape::rowwise, element_rounding::nearest_even, true,
                current);
  CHECK(r.fprop_x.tensor_scale.headroom_binades == 0);
  CHECK(r.transform.sign_mask() == hadamard16::te_default().sign_mask());
  CHECK(r.high_precision_first_layers == 0);
  CHECK(r.high_precision_last_layers == 0);
  const recipe exempt = recipes::nvfp4(2);
  CHECK(exempt.high_precision_last_layers == 2);
  CHECK(!exempt.layer_in_high_precision(5, 8));
  CHECK(exempt.layer_in_high_precision(6, 8));
  CHECK(exempt.layer_in_high_precision(7, 8));
}

TEST_CASE("UE5M3 recipe: block 16, periodic scaling, SR on dY only, no RHT, no exemptions",
          "[recipe]") {
  const recipe r = recipes::ue5m3(50);
  constexpr auto ue5m3 = block_format_id::ue5m3_fp4;
  constexpr auto periodic = tensor_scale_config::kind::periodic;
  for (const auto* o : {&r.fprop_x, &r.fprop_w, &r.dgrad_w, &r.wgrad_x})
    check_operand(*o, ue5m3, block_shape::rowwise, element_rounding::nearest_even, false, periodic);
  for (const auto* o : {&r.dgrad_dy, &r.wgrad_dy})
    check_operand(*o, ue5m3, block_shape::rowwise, element_rounding::stochastic, false, periodic);
  CHECK(r.fprop_x.tensor_scale.interval == 50);
  CHECK(r.fprop_x.tensor_scale.headroom_binades == 8);
  CHECK(r.high_precision_first_layers == 0);
  CHECK(r.high_precision_last_layers == 0);
}

TEST_CASE("MXFP4 recipe: OCP floor, block 32, no tensor scale", "[recipe]") {
  const recipe r = recipes::mxfp4();
  for (const auto* o : {&r.fprop_x, &r.fprop_w, &r.dgrad_dy, &r.dgrad_w, &r.wgrad_dy, &r.wgrad_x}) {
    check_operand(*o, block_format_id::mxfp4, block_shape::rowwise, element_rounding::nearest_even,
                  false, tensor_scale_config::kind::none);
    REQUIRE(o->rule.has_value());
    CHECK(o->rule->target == 4.0f);
    CHECK(o->rule->rounding == scale_rounding::down);
  }
  CHECK(mxfp4::block_size == 32);
  const recipe hp = recipes::high_precision();
  CHECK(!hp.fprop_x.quantized());
  CHECK(!hp.wgrad_dy.quantized());
}

TEST_CASE("presets by name: the functions' recipes, unknown names refused", "[recipe]") {
  recipes::parameters p;
  p.interval = 37;
  p.high_precision_last_layers = 2;
  const auto same = [](const recipe& a, const recipe& b) {
    CHECK(a.name == b.name);
    const operand_recipe* x[] = {&a.fprop_x, &a.fprop_w,  &a.dgrad_dy,
                                 &a.dgrad_w, &a.wgrad_dy, &a.wgrad_x};
    const operand_recipe* y[] = {&b.fprop_x, &b.fprop_w,  &b.dgrad_dy,
                                 &b.dgrad_w, &b.wgrad_dy, &b.wgrad_x};
    for (int i = 0; i < gemm_operand_count; ++i) {
      CHECK(x[i]->format == y[i]->format);
      CHECK(x[i]->shape == y[i]->shape);
      CHECK(x[i]->rounding == y[i]->rounding);
      CHECK(x[i]->hadamard == y[i]->hadamard);
      CHECK(x[i]->rule.has_value() == y[i]->rule.has_value());
      CHECK(x[i]->tensor_scale == y[i]->tensor_scale);
    }
    CHECK(a.high_precision_last_layers == b.high_precision_last_layers);
  };
  same(recipes::named("high_precision", p), recipes::high_precision());
  same(recipes::named("nvfp4", p), recipes::nvfp4(2));
  same(recipes::named("ue5m3_fp4", p), recipes::ue5m3(37));
  same(recipes::named("mxfp4", p), recipes::mxfp4());
  CHECK(recipes::named("ue5m3_fp4").fprop_x.tensor_scale.interval == 100);
  CHECK_THROWS_WITH(recipes::named("fp3"),
                    "unknown recipe 'fp3' (one of high_precision, nvfp4, ue5m3_fp4, mxfp4)");
}

TEST_CASE("operand seeds: distinct per operand and layer, the SplitMix64 rule", "[recipe]") {
  std::vector<std::uint64_t> seeds;
  for (std::uint64_t layer = 0; layer < 64; ++layer)
    for (int i = 0; i < gemm_operand_count; ++i)
      seeds.push_back(operand_seed(layer, static_cast<gemm_operand>(i)));
  std::sort(seeds.begin(), seeds.end());
  CHECK(std::adjacent_find(seeds.begin(), seeds.end()) == seeds.end());
  // SplitMix64's first output for state 0x9E3779B97F4A7C15 (layer 0, Fprop X): the published
  // generator's first value from seed 0.
  CHECK(operand_seed(0, gemm_operand::fprop_x) == 0xE220A8397B1DCDAFull);
}

TEST_CASE("high-precision gradients match finite differences", "[linear]") {
  // L = Σ G ⊙ Y with Y = X · Wᵀ, so dL/dY = G; backward(G) must give dL/dX and dL/dW. Central
  // differences in double on the layer's float forward: the error is the float rounding of Y
  // (about 1e-6 relative) divided by the step, so a 1e-3 relative tolerance is ample.
  const std::size_t batch = 5, in = 7, out = 3;
  quantized_linear layer(in, out, recipes::high_precision(), false, 1);
  layer.weight() = random_vector(in * out, 1);
  std::vector<float> x = random_vector(batch * in, 2), g = random_vector(batch * out, 3);
  std::vector<float> y(batch * out), dx(batch * in);
  auto loss = [&](quantized_linear& l, std::vector<float>& input) {
    std::vector<float> output(batch * out);
    l.forward(matrix_view<const float>(input.data(), batch, in),
              matrix_view<float>(output.data(), batch, out), 0);
    double sum = 0;
    for (std::size_t i = 0; i < output.size(); ++i)
      sum += static_cast<double>(output[i]) * g[i];
    return sum;
  };
  (void)loss(layer, x);
  layer.backward(matrix_view<const float>(g.data(), batch, out),
                 matrix_view<float>(dx.data(), batch, in), 0);
  const std::vector<float> dw = layer.weight_grad();
  const float h = 1e-2f;
  for (std::size_t i = 0; i < in * out; ++i) {
    const float saved = layer.weight()[i];
    layer.weight()[i] = saved + h;
    const double plus = loss(layer, x);
    layer.weight()[i] = saved - h;
    const double minus = loss(layer, x);
    layer.weight()[i] = saved;
    CHECK(dw[i] == Approx((plus - minus) / (2 * h)).epsilon(1e-3).margin(1e-4));
  }
  for (std::size_t i = 0; i < batch * in; ++i) {
    const float saved = x[i];
    x[i] = saved + h;
    const double plus = loss(layer, x);
    x[i] = saved - h;
    const double minus = loss(layer, x);
    x[i] = saved;
    CHECK(dx[i] == Approx((plus - minus) / (2 * h)).epsilon(1e-3).margin(1e-4));
  }
}

TEST_CASE("a short training run lowers the loss under every recipe", "[linear]") {
  // A two-layer student (ReLU) learns a fixed random linear teacher; 80 steps of SGD with
  // momentum from the same start for every recipe. The loss must fall below half its start.
  const std::size_t batch = 64, in = 32, hidden = 64, out = 16;
  const std::vector<float> teacher = random_vector(in * out, 10, 0.3f);
  for (const recipe& r :
       {recipes::high_precision(), recipes::nvfp4(), recipes::ue5m3(10), recipes::mxfp4()}) {
    INFO(r.name);
    quantized_linear first(in, hidden, r, false, 11), second(hidden, out, r, false, 12);
    first.weight() = random_vector(in * hidden, 20, 1.0f / std::sqrt(static_cast<float>(in)));
    second.weight() = random_vector(hidden * out, 21, 1.0f / std::sqrt(static_cast<float>(hidden)));
    std::vector<float> v1(first.weight().size()), v2(second.weight().size());
    std::vector<float> h(batch * hidden), y(batch * out), target(batch * out), dy(batch * out),
        dh(batch * hidden), dx(batch * in);
    double first_loss = 0, last_loss = 0;
    for (std::uint64_t step = 0; step < 80; ++step) {
      std::vector<float> x = random_vector(batch * in, 100 + static_cast<std::uint32_t>(step));
      gemm::float_tn(matrix_view<const float>(x.data(), batch, in),
                     matrix_view<const float>(teacher.data(), out, in),
                     matrix_view<float>(target.data(), batch, out));
      first.forward(matrix_view<const float>(x.data(), batch, in),
                    matrix_view<float>(h.data(), batch, hidden), step);
      for (auto& v : h)
        v = v > 0 ? v : 0;
      second.forward(matrix_view<const float>(h.data(), batch, hidden),
                     matrix_view<float>(y.data(), batch, out), step);
      double loss = 0;
      for (std::size_t i = 0; i < y.size(); ++i) {
        const float d = y[i] - target[i];
        loss += static_cast<double>(d) * d;
        dy[i] = 2 * d / static_cast<float>(batch * out);
      }
      loss /= static_cast<double>(batch * out);
      if (step == 0)
        first_loss = loss;
      last_loss = loss;
      second.backward(matrix_view<const float>(dy.data(), batch, out),
                      matrix_view<float>(dh.data(), batch, hidden), step);
      for (std::size_t i = 0; i < h.size(); ++i)
        dh[i] = h[i] > 0 ? dh[i] : 0;
      first.backward(matrix_view<const float>(dh.data(), batch, hidden),
                     matrix_view<float>(dx.data(), batch, in), step);
      auto sgd = [](quantized_linear& layer, std::vector<float>& velocity) {
        for (std::size_t i = 0; i < velocity.size(); ++i) {
          velocity[i] = 0.9f * velocity[i] + layer.weight_grad()[i];
          layer.weight()[i] -= 0.05f * velocity[i];
        }
      };
      sgd(first, v1);
      sgd(second, v2);
    }
    INFO("loss " << first_loss << " -> " << last_loss);
    CHECK(last_loss < 0.5 * first_loss);
    if (r.fprop_x.tensor_scale.policy == tensor_scale_config::kind::periodic) {
      // Periodic scaling measured amax on far fewer than all calls.
      CHECK(first.statistics(gemm_operand::fprop_x).amax_fraction() < 0.5);
    }
  }
}

TEST_CASE("exact mode is the reference GEMM of the recipe's quantized operands", "[linear]") {
  // Fprop under NVFP4 at step 0: X rowwise with its current tensor scale, W in 16x16 tiles with
  // its own; the layer in exact mode must give gemm::reference of exactly those, bit for bit.
  const std::size_t batch = 24, in = 40, out = 20; // 40: not a multiple of the block
  const std::vector<float> x = random_vector(batch * in, 30);
  quantized_linear layer(in, out, recipes::nvfp4(), false, 5);
  layer.weight() = random_vector(in * out, 31, 0.2f);
  layer.set_exact_gemm(true);
  std::vector<float> y(batch * out), expected(batch * out);
  layer.forward(matrix_view<const float>(x.data(), batch, in),
                matrix_view<float>(y.data(), batch, out), 0);

  auto x_policy = current_tensor_scale::make<nvfp4>();
  auto w_policy = current_tensor_scale::make<nvfp4>();
  quantize_options x_options, w_options;
  w_options.shape = block_shape::tile;
  const auto qx =
      quantize<nvfp4>(matrix_view<const float>(x.data(), batch, in), x_policy, x_options);
  const auto qw = quantize<nvfp4>(matrix_view<const float>(layer.weight().data(), out, in),
                                  w_policy, w_options);
  gemm::reference(qx, qw, matrix_view<float>(expected.data(), batch, out));
  for (std::size_t i = 0; i < y.size(); ++i)
    CHECK(y[i] == expected[i]);
}

TEST_CASE("fake quantization equals the exact GEMM up to float accumulation order", "[linear]") {
  // Same seeds, same quantized operands (SR and the Hadamard transform included): the float GEMM
  // on dequantized operands differs from the exact one only by float rounding, bounded by
  // K · 2^-23 · Σ|a||b| per output (plus the dequantized operands' own rounding, 2^-24 each).
  const std::size_t batch = 48, in = 64, out = 32;
  const std::vector<float> x = random_vector(batch * in, 40);
  const std::vector<float> dy = random_vector(batch * out, 41);
  for (const recipe& r : {recipes::nvfp4(), recipes::ue5m3(), recipes::mxfp4()}) {
    INFO(r.name);
    quantized_linear fake(in, out, r, false, 9), exact(in, out, r, false, 9);
    fake.weight() = exact.weight() = random_vector(in * out, 42, 0.2f);
    exact.set_exact_gemm(true);
    std::vector<float> y_fake(batch * out), y_exact(batch * out), dx_fake(batch * in),
        dx_exact(batch * in);
    fake.forward(matrix_view<const float>(x.data(), batch, in),
                 matrix_view<float>(y_fake.data(), batch, out), 3);
    exact.forward(matrix_view<const float>(x.data(), batch, in),
                  matrix_view<float>(y_exact.data(), batch, out), 3);
    fake.backward(matrix_view<const float>(dy.data(), batch, out),
                  matrix_view<float>(dx_fake.data(), batch, in), 3);
    exact.backward(matrix_view<const float>(dy.data(), batch, out),
                   matrix_view<float>(dx_exact.data(), batch, in), 3);
    auto close = [](const std::vector<float>& a, const std::vector<float>& b, double scale) {
      double worst = 0;
      for (std::size_t i = 0; i < a.size(); ++i)
        worst = std::fmax(worst, std::fabs(static_cast<double>(a[i]) - b[i]) / scale);
      return worst;
    };
    // Σ|a||b| is at most about K · max|a| · max|b|; with unit-normal data a generous scale is
    // K · 16 (|x| rarely exceeds 4 at these sizes), so the bound is K² · 16 · 2^-22.
    CHECK(close(y_fake, y_exact, 1.0) <= in * in * 16 * 0x1p-22);
    CHECK(close(dx_fake, dx_exact, 1.0) <= out * out * 16 * 0x1p-22);
    CHECK(close(fake.weight_grad(), exact.weight_grad(), 1.0) <= batch * batch * 16 * 0x1p-22);
  }
}
