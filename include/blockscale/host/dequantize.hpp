/// \file host/dequantize.hpp
/// Decoding a block-scaled matrix back to float, bfloat16 or float16: every value is the codec's
/// (q · S_b) · s_dec (codec::decode_value) in float, rounded to the output type. One body serves
/// 4-bit and 8-bit elements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "../block/codec.hpp"
#include "../block/matrix_view.hpp"
#include "../block/quantized_view.hpp"
#include "../config.hpp"
#include "../numeric/half.hpp"
#include "quantized_matrix.hpp"
#include "simd.hpp"
#include "thread_pool.hpp"

namespace blockscale {
inline namespace v0 {
namespace detail {

template <class T>
struct is_dequantize_output : std::integral_constant<bool, std::is_same<T, float>::value ||
                                                               std::is_same<T, bfloat16>::value ||
                                                               std::is_same<T, float16>::value> {};

/// Decodes the first `cols` columns of rows [begin, end) of q into out.
template <class BlockFormat, class Byte, class T>
void dequantize_rows(basic_quantized_view<BlockFormat, Byte> q, matrix_view<T> out,
                     std::size_t cols, std::size_t begin, std::size_t end) noexcept {
  using scale_type = typename BlockFormat::scale_type;
  constexpr std::size_t b = BlockFormat::block_size;
  constexpr std::size_t chunk = 256; // blocks per step
  const float s_dec = q.decode_scale();
  float scales[chunk];
  for (std::size_t r = begin; r < end; ++r) {
    for (std::size_t kb0 = 0; kb0 * b < cols; kb0 += chunk) {
      const std::size_t c0 = kb0 * b;
      const std::size_t count = cols - c0 < chunk * b ? cols - c0 : chunk * b;
      const std::size_t blocks = (count + b - 1) / b;
      for (std::size_t kb = 0; kb < blocks; ++kb)
        scales[kb] =
            static_cast<float>(scale_type::from_bits(q.scales()[q.scale_index(r, kb0 + kb)]));
      simd::dequantize_row<BlockFormat>(q.row(r) + codec::element_bytes<BlockFormat>(c0), scales,
                                        count, s_dec, out.row(r) + c0);
    }
  }
}

template <class BlockFormat, class Byte, class T>
void dequantize_checked(const char* function, basic_quantized_view<BlockFormat, Byte> q,
                        matrix_view<T> out, std::size_t cols, unsigned threads, thread_pool* pool) {
  static_assert(is_dequantize_output<T>::value,
                "dequantize writes float, bfloat16 or float16 (non-const)");
  if (out.rows() != q.rows() || out.cols() != cols)
    throw std::invalid_argument(std::string(function) + ": out is " + std::to_string(out.rows()) +
                                " x " + std::to_string(out.cols()) + ", expected " +
                                std::to_string(q.rows()) + " x " + std::to_string(cols));
  if (q.rows() == 0 || cols == 0)
    return; // nothing to write: out.data() may be null
  run_parallel(pool, threads, q.rows(), [&](unsigned, std::size_t begin, std::size_t end) {
    dequantize_rows(q, out, cols, begin, end);
  });
}

} // namespace detail

/// Decodes `q` into `out` (q.rows() × q.cols(), float, bfloat16 or float16): each value is
/// (element · block scale) · s_dec in float, exactly as `value(r, c)`, then rounded to the output
/// type (nearest-even). Throws std::invalid_argument if `out` has another shape.
template <class BlockFormat, class Byte, class T>
void dequantize(basic_quantized_view<BlockFormat, Byte> q, matrix_view<T> out,
                unsigned threads = 1) {
  detail::dequantize_checked("dequantize", q, out, q.cols(), threads, nullptr);
}
/// As above, on a caller's thread pool.
template <class BlockFormat, class Byte, class T>
void dequantize(basic_quantized_view<BlockFormat, Byte> q, matrix_view<T> out, thread_pool& pool) {
  detail::dequantize_checked("dequantize", q, out, q.cols(), 1, &pool);
}
template <class BlockFormat, class T>
void dequantize(const quantized_matrix<BlockFormat>& q, matrix_view<T> out, unsigned threads = 1) {
  dequantize(q.view(), out, threads);
}
template <class BlockFormat, class T>
void dequantize(const quantized_matrix<BlockFormat>& q, matrix_view<T> out, thread_pool& pool) {
  dequantize(q.view(), out, pool);
}

/// Decodes `q` including its padding columns into `out` (q.rows() × q.padded_cols()): what a GEMM
/// over the padded K sees (nonzero padding only after the Hadamard transform).
template <class BlockFormat, class Byte, class T>
void dequantize_padded(basic_quantized_view<BlockFormat, Byte> q, matrix_view<T> out,
                       unsigned threads = 1) {
  detail::dequantize_checked("dequantize_padded", q, out, q.padded_cols(), threads, nullptr);
}
/// As above, on a caller's thread pool.
template <class BlockFormat, class Byte, class T>
void dequantize_padded(basic_quantized_view<BlockFormat, Byte> q, matrix_view<T> out,
                       thread_pool& pool) {
  detail::dequantize_checked("dequantize_padded", q, out, q.padded_cols(), 1, &pool);
}
template <class BlockFormat, class T>
void dequantize_padded(const quantized_matrix<BlockFormat>& q, matrix_view<T> out,
                       unsigned threads = 1) {
  dequantize_padded(q.view(), out, threads);
}
template <class BlockFormat, class T>
void dequantize_padded(const quantized_matrix<BlockFormat>& q, matrix_view<T> out,
                       thread_pool& pool) {
  dequantize_padded(q.view(), out, pool);
}

} // namespace v0
} // namespace blockscale
