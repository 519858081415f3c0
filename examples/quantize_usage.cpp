// The usage example of docs/quantization.md, compiled and run as a test.
#include <blockscale/blockscale.hpp>
#include <cstdio>
#include <vector>

int main() {
  using namespace blockscale;
  const std::size_t rows = 64, cols = 80;
  std::vector<float> x(rows * cols);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>((i * 37) % 101) - 50.0f;
  matrix_view<const float> view(x.data(), rows, cols); // also bfloat16, float16; ld >= cols

  // NVFP4 with Transformer Engine's tensor scale 6·448 / amax, rowwise 1×16 blocks.
  quantize_options options;
  options.encode_scale = encode_scale_from_amax(6.0f * 448.0f, measure_amax<nvfp4>(view));
  quantized_matrix<nvfp4> q = quantize<nvfp4>(view, options);

  // UE5M3-FP4 under the periodic policy: amax measured on the first call and every 100th.
  auto policy = periodic_tensor_scale::make<ue5m3_fp4>(/*interval=*/100, /*headroom=*/8);
  quantized_matrix<ue5m3_fp4> u = quantize<ue5m3_fp4>(view, policy, quantize_options{});

  std::vector<float> y(rows * cols);
  dequantize(q, matrix_view<float>(y.data(), rows, cols));
  const quantization_error e = measure_error(view, q);
  const quantization_error f = measure_error(view, u);
  std::printf("NVFP4 %.2f dB, UE5M3-FP4 %.2f dB, y[1] = %g (x[1] = %g)\n", e.sqnr_db, f.sqnr_db,
              y[1], x[1]);
  return e.sqnr_db > 15 && f.sqnr_db > 15 ? 0 : 1;
}
