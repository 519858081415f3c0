// Quantization quality of the FP4 block formats on synthetic data: relative MSE and SQNR of
// NVFP4, MXFP4 (OCP floor and cuBLAS rceil) and UE5M3-FP4 on N(0,1), Laplace and Student-t(3)
// samples, nearest-even, rowwise blocks. docs/performance.md lists its output.
//   blockscale_example_quality_table [--log2-samples N]   (default 24: 2^24 samples)
#include <blockscale/blockscale.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace blockscale;

namespace {

std::vector<float> samples(const std::string& distribution, std::size_t count) {
  std::mt19937_64 rng(2026);
  std::vector<float> x(count);
  if (distribution == "N(0,1)") {
    std::normal_distribution<double> normal(0.0, 1.0);
    for (auto& v : x)
      v = static_cast<float>(normal(rng));
  } else if (distribution == "Laplace") {
    std::exponential_distribution<double> exponential(1.0);
    std::bernoulli_distribution sign(0.5);
    for (auto& v : x)
      v = static_cast<float>(sign(rng) ? exponential(rng) : -exponential(rng));
  } else {
    std::student_t_distribution<double> student(3.0);
    for (auto& v : x)
      v = static_cast<float>(student(rng));
  }
  return x;
}

template <class Format>
quantization_error run(const std::vector<float>& x, std::size_t cols, quantize_options options) {
  const matrix_view<const float> view(x.data(), x.size() / cols, cols);
  options.threads = 0;
  return measure_error(view, quantize<Format>(view, options));
}

} // namespace

int main(int argc, char** argv) {
  int log2_samples = 24;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--log2-samples") == 0 && i + 1 < argc) {
      log2_samples = std::atoi(argv[++i]);
    } else {
      std::printf("usage: %s [--log2-samples N]  (N in 10..28, default 24)\n", argv[0]);
      return std::strcmp(argv[i], "--help") == 0 ? 0 : 2;
    }
  }
  if (log2_samples < 10 || log2_samples > 28) {
    std::fprintf(stderr, "--log2-samples must be in 10..28\n");
    return 2;
  }
  const std::size_t count = std::size_t{1} << log2_samples, cols = 4096;
  std::printf("relative MSE (SQNR dB), 2^%d samples, nearest-even, 1x16 / 1x32 blocks\n\n",
              log2_samples);
  std::printf("| distribution | NVFP4 | MXFP4 floor | MXFP4 rceil | UE5M3-FP4 | UE5M3-FP4, no "
              "tensor scale |\n|---|---|---|---|---|---|\n");
  for (const std::string distribution : {"N(0,1)", "Laplace", "Student-t(3)"}) {
    const auto x = samples(distribution, count);
    const float amax = measure_amax<nvfp4>(matrix_view<const float>(x.data(), count / cols, cols));
    quantize_options two_level;
    two_level.encode_scale = encode_scale_from_amax(6.0f * 448.0f, amax); // TE's 6·448 / amax
    quantize_options floor_rule, rceil_rule;
    floor_rule.rule = scale_rules::ocp_floor();
    rceil_rule.rule = scale_rules::rceil();
    quantize_options ue5m3_periodic; // the periodic policy's s_enc at 8 binades of headroom
    ue5m3_periodic.encode_scale =
        encode_scale_from_amax(tensor_scale_numerator<ue5m3_fp4>(8), amax);
    const quantization_error errors[] = {
        run<nvfp4>(x, cols, two_level), run<mxfp4>(x, cols, floor_rule),
        run<mxfp4>(x, cols, rceil_rule), run<ue5m3_fp4>(x, cols, ue5m3_periodic),
        run<ue5m3_fp4>(x, cols, quantize_options{})};
    std::printf("| %s |", distribution.c_str());
    for (const auto& e : errors)
      std::printf(" %.5f (%.2f dB) |", e.relative_mse, e.sqnr_db);
    std::printf("\n");
  }
  return 0;
}
