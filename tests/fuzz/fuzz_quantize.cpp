// libFuzzer target: quantization of fuzzer-chosen matrices (any float bits, NaN and Inf
// included, any small shape and option set) never crashes, the fast path equals the reference
// path bit for bit, both directions from one read equal two single quantizations, the reported
// amax is the measured one, and dequantization (float and bfloat16) decodes as value() does,
// giving NaN only from NaN scales or NaN element codes; the CUDA quantize kernel, run on the host
// by the host runner, writes the same bytes and the same counters.
//   bytes: rows, cols, option flags, seed byte, tensor-scale exponent, then the float data.
#include <blockscale/blockscale.hpp>
#include <blockscale/cuda/launch.hpp>
#include <blockscale/emulation/host_runner.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

using namespace blockscale;

namespace {

void require(bool condition) {
  if (!condition)
    std::abort();
}

template <class Format>
void run(const std::vector<float>& x, std::size_t rows, std::size_t cols,
         const quantize_options& options) {
  const matrix_view<const float> view(x.data(), rows, cols);
  quantized_matrix<Format> fast, reference;
  try {
    fast = quantize<Format>(view, options);
  } catch (const std::invalid_argument&) {
    // Options the format cannot do must be rejected by both paths alike.
    bool rejected = false;
    try {
      (void)quantize_reference<Format>(view, options);
    } catch (const std::invalid_argument&) {
      rejected = true;
    }
    require(rejected);
    return;
  }
  reference = quantize_reference<Format>(view, options);
  require(fast == reference);
  // The device kernel's code, on the host; its scale bytes start as garbage.
  quantized_matrix<Format> kernel(fast.shape());
  std::memset(kernel.view().scales(), 0xCD, kernel.storage().scale_bytes);
  cuda::device_quantize_stats counters;
  emulation::host_runner runner;
  runner.order_seed = options.seed;
  require(cuda::launch_quantize(runner, view, kernel.view(), options, &counters).ok());
  require(kernel == fast);
  const quantize_stats counted = counters.value();
  require(counted.blocks == fast.stats().blocks &&
          counted.saturated_scales == fast.stats().saturated_scales &&
          counted.zero_scales == fast.stats().zero_scales &&
          counted.nan_scales == fast.stats().nan_scales &&
          std::memcmp(&counted.amax, &fast.stats().amax, sizeof counted.amax) == 0);
  const float measured = measure_amax<Format>(view, options);
  require(std::memcmp(&measured, &fast.stats().amax, sizeof measured) == 0);
  // Both directions from one read.
  quantize_options row = options, column = options;
  row.columnwise = false;
  column.columnwise = true;
  column.encode_scale = options.encode_scale * 2.0f <= 1e30f ? options.encode_scale * 2.0f : 1.0f;
  quantized_matrix<Format> both_row(quantized_shape_for(rows, cols, row));
  quantized_matrix<Format> both_column(quantized_shape_for(rows, cols, column));
  quantize_into(view, both_row.view(), row, both_column.view(), column);
  require(both_row == quantize<Format>(view, row));
  require(both_column == quantize<Format>(view, column));
  std::vector<bfloat16> half(fast.rows() * fast.cols());
  dequantize(fast, matrix_view<bfloat16>(half.data(), fast.rows(), fast.cols()));
  std::vector<float> out(fast.rows() * fast.cols());
  dequantize(fast, matrix_view<float>(out.data(), fast.rows(), fast.cols()));
  for (std::size_t r = 0; r < fast.rows(); ++r)
    for (std::size_t c = 0; c < fast.cols(); ++c) {
      // dequantize() and value() decode in the same order, so they agree to the bit.
      const float value = out[r * fast.cols() + c], single = fast.value(r, c);
      require(std::memcmp(&value, &single, sizeof value) == 0);
      require(half[r * fast.cols() + c].bits() == bfloat16(single).bits());
      // NaN only from a NaN scale or a NaN element code (E4M3 from Inf · 0 when the factor
      // underflowed): finite codes times finite scales never make one.
      const float scale = static_cast<float>(fast.block_scale(r, c));
      if (std::isfinite(scale) && std::isfinite(fast.decode_scale()) &&
          !fast.element(r, c).is_nan())
        require(!std::isnan(value));
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 5)
    return 0;
  const std::size_t rows = data[0] % 40, cols = data[1] % 70;
  const std::uint8_t flags = data[2];
  quantize_options options;
  options.columnwise = (flags & 1) != 0;
  options.shape = (flags & 2) != 0 ? block_shape::tile : block_shape::rowwise;
  options.rounding =
      (flags & 4) != 0 ? element_rounding::stochastic : element_rounding::nearest_even;
  options.hadamard = (flags & 8) != 0;
  options.layout = (flags & 16) != 0 ? scale_layout::tensor_core : scale_layout::row_major;
  options.threads = (flags & 32) != 0 ? 2 : 1;
  options.seed = data[3];
  options.encode_scale = std::ldexp(1.0f, static_cast<int>(data[4]) - 128);
  if ((flags & 64) != 0)
    options.rule = scale_rules::rceil();
  std::vector<float> x(rows * cols, 0.0f);
  const std::size_t available = (size - 5) / 4;
  for (std::size_t i = 0; i < x.size() && i < available; ++i)
    std::memcpy(&x[i], data + 5 + 4 * i, 4);
  run<nvfp4>(x, rows, cols, options);
  run<ue5m3_fp4>(x, rows, cols, options);
  run<mxfp4>(x, rows, cols, options);
  run<mxfp8>(x, rows, cols, options);
  return 0;
}
