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
  const matrix_view<const float> view(x.data(), rows, cols); // also bfloat16, float16; ld >= cols

  // One call: NVFP4 with Transformer Engine's encode scale 6·448 / amax, 1×16 blocks.
  quantize_options options;
  options.encode_scale = encode_scale_from_amax(6.0f * 448.0f, measure_amax<nvfp4>(view));
  const quantized_matrix<nvfp4> q = quantize<nvfp4>(view, options);

  // A training loop: storage and threads made once, then every step quantizes into them without
  // allocating. UE5M3-FP4 under the periodic policy measures amax on step 0 and every 100th.
  thread_pool pool(2);
  auto policy = periodic_tensor_scale::make<ue5m3_fp4>(/*interval=*/100, /*headroom=*/8);
  quantize_options rowwise, columnwise;
  columnwise.columnwise = true;
  quantized_matrix<ue5m3_fp4> u(quantized_shape_for(rows, cols, rowwise));
  quantized_matrix<ue5m3_fp4> ut(quantized_shape_for(rows, cols, columnwise));
  for (std::uint64_t step = 0; step < 3; ++step) {
    rowwise.offset = columnwise.offset = step; // the stochastic-rounding stream, if any
    quantize_into(view, u, policy, rowwise, identity_amax{}, &pool);
    // Both directions from one read (no policy here: the encode scale the policy chose).
    columnwise.encode_scale = rowwise.encode_scale = policy.encode_scale();
    quantize_into(view, u.view(), rowwise, ut.view(), columnwise, &pool);
  }

  std::vector<float> y(rows * cols);
  dequantize(q, matrix_view<float>(y.data(), rows, cols));
  const quantization_error e = measure_error(view, q);
  const quantization_error f = measure_error(view, ut); // ut knows it holds the transpose
  std::printf("NVFP4 %.2f dB, UE5M3-FP4 (columnwise) %.2f dB, y[1] = %g (x[1] = %g), s_dec %g\n",
              e.sqnr_db, f.sqnr_db, y[1], x[1], q.decode_scale());
  return e.sqnr_db > 15 && f.sqnr_db > 15 && policy.amax_measurements() == 1 ? 0 : 1;
}
