/// \file host/gemm_reference.hpp
/// The exact host GEMM on block-scaled operands, C[M×N] = alpha · A[M×K] · B[N×K]ᵀ + beta · C
/// ("TN": both operands quantized along K, as cuBLASLt for FP4). It is the oracle for every other
/// GEMM in the project.
///
/// Operands. A quantized operand's rows are M (or N) and its columns are K: quantize the
/// activation X[M×K] rowwise and the weight W[N×K] rowwise; a columnwise-quantized matrix already
/// holds the transpose, so it is used as is. Row- and tile-shaped blocks are the same to the GEMM
/// (block_scale(r, k) gives the scale of each element). The two operands may have different
/// block sizes (NVFP4 16 with MXFP4 32): K is split into segments on which both scales are
/// constant. A plain float operand (rows × K, row-major view) has neither block scales nor a
/// tensor scale.
///
/// Summation range. Two quantized operands: k < min(a.padded_cols(), b.padded_cols()). The
/// padding is zero, except when both were quantized with the Hadamard transform
/// (quantize_options::hadamard, the same transform for both): then the transformed padding is
/// nonzero and must take part for the transform to cancel. One float operand: k < K (quantize
/// that pair without the transform, or transform the float operand yourself).
///
/// Arithmetic, for output (i, j), with S the block scales and s_dec the tensor scales:
///   1. Decoding is exact: element and scale values are exact doubles.
///   2. On each segment, Σ e_a · e_b is summed in double and multiplied by S_a · S_b. Exact: the
///      products of two minifloat elements are multiples of 2^(lsb_a + lsb_b), and a segment's
///      sum times S_a · S_b needs at most 53 significant bits for every preset (NVFP4 and
///      UE5M3-FP4: 20 bits, MXFP4: 15, MXFP8: 43, in units of 2^(lsb_a + lsb_b)). Where a
///      block_format combination could exceed 53 bits (E5M2 elements, say; decided at compile
///      time), and for a float operand, each product (e_a · S_a) · (e_b · S_b) (or (e_a · S_a) · b)
///      is formed instead: exact too (at most 32, or 40, significant bits; 16 or 30 for the
///      presets), and far inside double's exponent range.
///   3. The exact terms are added in an exact fixed-point accumulator (detail::exact_sum), so
///      acc = Σ_k is the exact sum, rounded to double once (nearest-even). The result therefore
///      does not depend on the summation order, the thread count, or floating-point contraction.
///   4. Epilogue: t = s_dec_a · s_dec_b (exact in double: two 24-bit significands);
///      p = t · acc (rounds once in double); beta == 0: r = alpha · p (rounds once);
///      else r = fma(alpha, p, beta · C) (beta · C is exact in double; the fma rounds once).
///      C = float(r), the single rounding to float (overflow gives ±inf).
///   So the result is within three double roundings of the exact alpha · s_a · s_b · Σ + beta · C
///   before the final float rounding; it can differ from the correctly rounded float only when
///   that value lies within about 2^-51 relative of a float rounding boundary.
///
/// Special values. beta == 0 means C is not read (NaN in C is ignored), as BLAS. A NaN block
/// scale (a block that held a NaN) or element makes every output that uses it NaN, even where
/// the elements it scales are zero (0 · NaN). With a float operand, ±Inf follows IEEE: an Inf
/// times a nonzero decoded element gives ±Inf in that output, times zero NaN, and +Inf with
/// -Inf NaN. alpha == 0 still computes the product (NaN and Inf still propagate). An exact zero
/// sum is +0.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "../block/block_format.hpp"
#include "../block/matrix_view.hpp"
#include "../block/quantized_view.hpp"
#include "../config.hpp"
#include "../detail/bits.hpp"
#include "../numeric/format.hpp"
#include "quantized_matrix.hpp"
#include "thread_pool.hpp"

namespace blockscale {
inline namespace v0 {
namespace gemm {
namespace detail {

using blockscale::detail::bit_cast;

/// An exact sum of doubles (a fixed-point "Kulisch" accumulator over the whole double range),
/// rounded to double once by round(). Chunk i holds bits [32 i, 32 i + 32) of the sum in units
/// of 2^-1074, as a signed 64-bit integer with carries kept lazily, so add() is three integer
/// additions; normalize() propagates the carries (two's complement, the sign in the top chunk).
/// Non-finite terms follow IEEE: NaN, or +Inf with -Inf, gives NaN; otherwise an Inf wins.
class exact_sum {
public:
  exact_sum() noexcept { clear(); }

  /// Resets to an exact zero.
  void clear() noexcept {
    for (int i = low_; i < chunks; ++i)
      chunk_[i] = 0;
    low_ = chunks;
    pending_ = 0;
    nan_ = positive_infinity_ = negative_infinity_ = false;
  }

  /// Adds `value` exactly.
  void add(double value) noexcept {
    const std::uint64_t bits = bit_cast<std::uint64_t>(value);
    int exponent = static_cast<int>((bits >> 52) & 0x7FF);
    std::uint64_t mantissa = bits & ((std::uint64_t{1} << 52) - 1);
    const bool negative = (bits >> 63) != 0;
    if (exponent == 0x7FF) {
      if (mantissa != 0)
        nan_ = true;
      else if (negative)
        negative_infinity_ = true;
      else
        positive_infinity_ = true;
      return;
    }
    if (exponent == 0) {
      if (mantissa == 0)
        return;
      exponent = 1; // subnormal: mantissa · 2^-1074
    } else {
      mantissa |= std::uint64_t{1} << 52;
    }
    // value = mantissa · 2^(position - 1074): split the 53-bit mantissa, shifted left by
    // position % 32, into three 32-bit pieces starting at chunk position / 32.
    const int position = exponent - 1;
    const int first = position / 32, shift = position % 32;
    const std::uint64_t mask = 0xFFFFFFFFu;
    const auto p0 = static_cast<std::int64_t>((mantissa << shift) & mask);
    const auto p1 = static_cast<std::int64_t>((mantissa >> (32 - shift)) & mask);
    const auto p2 = static_cast<std::int64_t>((mantissa >> 32) >> (32 - shift)); // shift 0: 0
    if (negative) {
      chunk_[first] -= p0;
      chunk_[first + 1] -= p1;
      chunk_[first + 2] -= p2;
    } else {
      chunk_[first] += p0;
      chunk_[first + 1] += p1;
      chunk_[first + 2] += p2;
    }
    low_ = first < low_ ? first : low_;
    // Each chunk moves by less than 2^32 per add: normalize before an int64 could overflow.
    if (++pending_ == (std::uint32_t{1} << 30))
      normalize();
  }

  /// The exact sum rounded to the nearest double (ties to even); ±inf past DBL_MAX.
  double round() noexcept {
    if (nan_ || (positive_infinity_ && negative_infinity_))
      return std::numeric_limits<double>::quiet_NaN();
    if (positive_infinity_)
      return std::numeric_limits<double>::infinity();
    if (negative_infinity_)
      return -std::numeric_limits<double>::infinity();
    normalize();
    const bool negative = chunk_[chunks - 1] < 0;
    if (negative) {
      for (int i = low_; i < chunks; ++i)
        chunk_[i] = -chunk_[i];
      normalize();
    }
    int top = chunks - 1;
    while (top >= low_ && chunk_[top] == 0)
      --top;
    if (top < low_)
      return 0.0;
    // Bits [32 (top - 1), 32 (top + 1)) of the magnitude; the top chunk is nonzero and < 2^32.
    const std::uint64_t window = (get(top) << 32) | get(top - 1);
    int msb = 63;
    while (((window >> msb) & 1u) == 0)
      --msb;
    const int position = 32 * (top - 1) + msb; // of the leading bit, in units of 2^-1074
    double magnitude;
    if (position <= 52) {
      // Below 2^-1021: the sum fits 53 bits at 2^-1074, exactly (top <= 1).
      magnitude = std::ldexp(static_cast<double>((get(1) << 32) | get(0)), -1074);
    } else {
      // A normal result: keep 64 bits from the leading one, round to 53 with a sticky bit.
      const int shift = 63 - msb; // in [0, 31]
      const std::uint64_t third = get(top - 2);
      const std::uint64_t top64 = (window << shift) | (third >> (32 - shift));
      bool sticky = (third & ((std::uint64_t{1} << (32 - shift)) - 1)) != 0;
      for (int i = low_; i < top - 2 && !sticky; ++i)
        sticky = chunk_[i] != 0;
      std::uint64_t kept = top64 >> 11;
      const std::uint64_t rest = top64 & 0x7FF;
      if (rest > 0x400 || (rest == 0x400 && (sticky || (kept & 1u) != 0)))
        ++kept; // may reach 2^53: still exact in double
      magnitude = std::ldexp(static_cast<double>(kept), position - 52 - 1074);
    }
    return negative ? -magnitude : magnitude;
  }

private:
  // 2^-1074 up to 2^(32 · 70 - 1074): the largest term (< 2^1024) times 2^64 terms, and a sign.
  static constexpr int chunks = 70;

  std::uint64_t get(int i) const noexcept {
    return i >= low_ && i >= 0 ? static_cast<std::uint64_t>(chunk_[i]) : 0;
  }

  /// Carries every chunk below the top into [0, 2^32); the top chunk keeps the sign.
  void normalize() noexcept {
    for (int i = low_; i < chunks - 1; ++i) {
      const std::int64_t value = chunk_[i];
      const auto low = static_cast<std::int64_t>(static_cast<std::uint64_t>(value) & 0xFFFFFFFFu);
      chunk_[i] = low;
      chunk_[i + 1] += (value - low) / (std::int64_t{1} << 32); // exact: a multiple of 2^32
    }
    pending_ = 0;
  }

  std::int64_t chunk_[chunks] = {};
  int low_ = 0; ///< the lowest chunk that may be nonzero
  std::uint32_t pending_ = 0;
  bool nan_ = false, positive_infinity_ = false, negative_infinity_ = false;
};

/// 2^e as a double, for constant expressions (|e| < 1000).
constexpr double power_of_two(int e) noexcept {
  double p = 1.0;
  for (; e > 0; --e)
    p *= 2.0;
  for (; e < 0; ++e)
    p /= 2.0;
  return p;
}

/// The exponent of the smallest nonzero magnitude of a minifloat format: every value of the
/// format is a multiple of 2^this.
template <class Minifloat>
constexpr int lsb_exponent() noexcept {
  using traits = format_traits<typename Minifloat::format>;
  return (traits::has_subnormals ? 1 : 0) - traits::bias - traits::mantissa_bits;
}

/// What the choice between segment sums and products (file comment, step 2) needs of a block
/// format: its block size, its largest element, the exponent of its elements' least significant
/// bit, and its scale's mantissa bits.
struct operand_facts {
  std::size_t block_size = 0;
  double element_max = 0.0;
  int element_lsb_exponent = 0;
  int scale_mantissa_bits = 0;
};

template <class Format>
constexpr operand_facts facts_of() noexcept {
  return {Format::block_size, static_cast<double>(Format::element_max()),
          lsb_exponent<typename Format::element_type>(),
          format_traits<typename Format::scale_type::format>::mantissa_bits};
}

/// Whether a segment sum Σ e_a · e_b times S_a · S_b is exact in double for operands of these
/// facts (see the file comment, step 2).
constexpr bool segment_sum_is_exact(const operand_facts& a, const operand_facts& b) noexcept {
  const int scale_bits = a.scale_mantissa_bits + b.scale_mantissa_bits + 2;
  const std::size_t segment = a.block_size < b.block_size ? a.block_size : b.block_size;
  // The largest segment sum, in units of its least significant bit.
  const double units = static_cast<double>(segment) * a.element_max * b.element_max /
                       power_of_two(a.element_lsb_exponent + b.element_lsb_exponent);
  return units <= power_of_two(53 - scale_bits);
}
template <class FormatA, class FormatB>
constexpr bool segment_sum_is_exact() noexcept {
  return segment_sum_is_exact(facts_of<FormatA>(), facts_of<FormatB>());
}

/// One operand decoded for the reference: `values` is rows × length (element values, or decoded
/// element · block-scale values when `block` is 0), `scales` is rows × blocks (blocks of
/// `block` columns, the last one possibly cut short by `length`).
struct decoded_operand {
  std::size_t rows = 0, length = 0, block = 0, blocks = 0;
  std::vector<double> values;
  std::vector<double> scales;
  double tensor_scale = 1.0;

  const double* row(std::size_t r) const noexcept { return values.data() + r * length; }
  const double* row_scales(std::size_t r) const noexcept { return scales.data() + r * blocks; }
};

/// Decodes the first `length` columns (at most padded_cols()) of `q`: elements and block scales
/// apart (`apply_scales` false), or their exact products.
template <class Format, class Byte>
decoded_operand decode(basic_quantized_view<Format, Byte> q, std::size_t length,
                       bool apply_scales) {
  constexpr std::size_t b = Format::block_size;
  decoded_operand d;
  d.rows = q.rows();
  d.length = length;
  d.block = apply_scales ? 0 : b;
  d.blocks = apply_scales ? 0 : (length + b - 1) / b;
  d.tensor_scale = static_cast<double>(q.decode_scale());
  d.values.resize(d.rows * length);
  d.scales.resize(d.rows * d.blocks);
  for (std::size_t r = 0; r < d.rows; ++r) {
    double* out = d.values.data() + r * length;
    for (std::size_t kb = 0; kb * b < length; ++kb) {
      const auto scale = static_cast<double>(static_cast<float>(q.block_scale(r, kb * b)));
      if (!apply_scales)
        d.scales[r * d.blocks + kb] = scale;
      for (std::size_t k = kb * b; k < std::min((kb + 1) * b, length); ++k) {
        const auto element = static_cast<double>(static_cast<float>(q.element(r, k)));
        out[k] = apply_scales ? element * scale : element; // exact: at most 16 significant bits
      }
    }
  }
  return d;
}

/// A float operand as decoded values (no scales, tensor scale 1).
inline decoded_operand decode(matrix_view<const float> x) {
  decoded_operand d;
  d.rows = x.rows();
  d.length = x.cols();
  d.values.resize(d.rows * d.length);
  for (std::size_t r = 0; r < d.rows; ++r)
    for (std::size_t k = 0; k < d.length; ++k)
      d.values[r * d.length + k] = static_cast<double>(x(r, k));
  return d;
}

/// Step 4 of the file comment.
inline float epilogue(double sum, double tensor_scales, float alpha, float beta,
                      const float& c) noexcept {
  const double scaled = tensor_scales * sum;
  if (beta == 0.0f)
    return static_cast<float>(static_cast<double>(alpha) * scaled);
  return static_cast<float>(std::fma(static_cast<double>(alpha), scaled,
                                     static_cast<double>(beta) * static_cast<double>(c)));
}

/// Runs body(row_begin, row_end) over [0, rows) on `threads` threads (0: all hardware threads).
template <class Body>
void for_rows(std::size_t rows, unsigned threads, const Body& body) {
  blockscale::detail::run_parallel(
      nullptr, threads, rows,
      [&](unsigned, std::size_t begin, std::size_t end) { body(begin, end); });
}

/// The product path: every term is one exact product of decoded values, k < length.
inline void gemm_products(const decoded_operand& a, const decoded_operand& b, std::size_t length,
                          matrix_view<float> c, float alpha, float beta, unsigned threads) {
  const double tensor_scales = a.tensor_scale * b.tensor_scale;
  for_rows(a.rows, threads, [&](std::size_t begin, std::size_t end) {
    exact_sum sum;
    for (std::size_t i = begin; i < end; ++i) {
      const double* x = a.row(i);
      for (std::size_t j = 0; j < b.rows; ++j) {
        const double* y = b.row(j);
        sum.clear();
        for (std::size_t k = 0; k < length; ++k)
          sum.add(x[k] * y[k]);
        c(i, j) = epilogue(sum.round(), tensor_scales, alpha, beta, c(i, j));
      }
    }
  });
}

/// The segment path: K split where either block scale changes, an exact double sum of element
/// products per segment, times both scales.
inline void gemm_segments(const decoded_operand& a, const decoded_operand& b, std::size_t length,
                          matrix_view<float> c, float alpha, float beta, unsigned threads) {
  struct segment {
    std::size_t begin, end, block_a, block_b;
  };
  std::vector<segment> segments;
  for (std::size_t k = 0; k < length;) {
    const std::size_t end =
        std::min({(k / a.block + 1) * a.block, (k / b.block + 1) * b.block, length});
    segments.push_back({k, end, k / a.block, k / b.block});
    k = end;
  }
  const double tensor_scales = a.tensor_scale * b.tensor_scale;
  for_rows(a.rows, threads, [&](std::size_t begin, std::size_t end) {
    exact_sum sum;
    for (std::size_t i = begin; i < end; ++i) {
      const double* x = a.row(i);
      const double* scale_x = a.row_scales(i);
      for (std::size_t j = 0; j < b.rows; ++j) {
        const double* y = b.row(j);
        const double* scale_y = b.row_scales(j);
        sum.clear();
        for (const segment& s : segments) {
          // Four partial sums for speed: each is exact, like the whole (file comment, step 2).
          double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
          std::size_t k = s.begin;
          for (; k + 4 <= s.end; k += 4) {
            s0 += x[k] * y[k];
            s1 += x[k + 1] * y[k + 1];
            s2 += x[k + 2] * y[k + 2];
            s3 += x[k + 3] * y[k + 3];
          }
          for (; k < s.end; ++k)
            s0 += x[k] * y[k];
          sum.add(((s0 + s1) + (s2 + s3)) * (scale_x[s.block_a] * scale_y[s.block_b]));
        }
        c(i, j) = epilogue(sum.round(), tensor_scales, alpha, beta, c(i, j));
      }
    }
  });
}

inline std::string shape(std::size_t rows, std::size_t cols) {
  return std::to_string(rows) + " x " + std::to_string(cols);
}

/// Throws std::invalid_argument naming the argument when K differs or c is not M × N.
inline void check_shapes(std::size_t a_rows, std::size_t a_cols, std::size_t b_rows,
                         std::size_t b_cols, matrix_view<float> c) {
  if (a_cols != b_cols)
    throw std::invalid_argument("gemm::reference: b has K = " + std::to_string(b_cols) +
                                " columns but a has K = " + std::to_string(a_cols) +
                                " (a is M x K = " + shape(a_rows, a_cols) +
                                ", b is N x K = " + shape(b_rows, b_cols) + ")");
  if (c.rows() != a_rows || c.cols() != b_rows)
    throw std::invalid_argument("gemm::reference: c is " + shape(c.rows(), c.cols()) +
                                " but must be M x N = " + shape(a_rows, b_rows) + " (a is " +
                                shape(a_rows, a_cols) + ", b is " + shape(b_rows, b_cols) + ")");
}

/// A quantized operand as the GEMM sees it before decoding, whatever its block format.
struct operand_summary {
  std::size_t rows = 0, cols = 0, padded_cols = 0;
  bool hadamard = false;
  std::uint16_t hadamard_signs = 0;
  operand_facts facts;
};

template <class Format, class Byte>
operand_summary summary_of(basic_quantized_view<Format, Byte> q) noexcept {
  return {q.rows(),     q.cols(),           q.padded_cols(),
          q.hadamard(), q.hadamard_signs(), facts_of<Format>()};
}

/// The GEMM on two quantized operands of any formats: decode_a(length, apply_scales) and decode_b
/// decode them (detail::decode on their views). The typed reference() below runs this, and so
/// does host/format_ops.hpp's run-time dispatch: one routine whatever knows the formats.
template <class DecodeA, class DecodeB>
void reference_pair(const operand_summary& a, DecodeA&& decode_a, const operand_summary& b,
                    DecodeB&& decode_b, matrix_view<float> c, float alpha, float beta,
                    unsigned threads) {
  check_shapes(a.rows, a.cols, b.rows, b.cols, c);
  if (a.hadamard != b.hadamard || a.hadamard_signs != b.hadamard_signs)
    throw std::invalid_argument("gemm::reference: a and b disagree on the Hadamard transform "
                                "(applied: " +
                                std::to_string(a.hadamard) + " and " + std::to_string(b.hadamard) +
                                "), so it would not cancel");
  const std::size_t length = std::min(a.padded_cols, b.padded_cols);
  const bool segments = segment_sum_is_exact(a.facts, b.facts);
  const decoded_operand x = decode_a(length, !segments);
  const decoded_operand y = decode_b(length, !segments);
  if (segments)
    gemm_segments(x, y, length, c, alpha, beta, threads);
  else
    gemm_products(x, y, length, c, alpha, beta, threads);
}

/// The GEMM with one quantized operand (decoded by `decode`) and one float operand: the quantized
/// one is a when `quantized_first`, else b. The sum runs over k < K (the padding takes no part).
template <class Decode>
void reference_with_float(const operand_summary& q, Decode&& decode, matrix_view<const float> f,
                          bool quantized_first, matrix_view<float> c, float alpha, float beta,
                          unsigned threads) {
  if (quantized_first) {
    check_shapes(q.rows, q.cols, f.rows(), f.cols(), c);
    gemm_products(decode(q.padded_cols, true), detail::decode(f), q.cols, c, alpha, beta, threads);
  } else {
    check_shapes(f.rows(), f.cols(), q.rows, q.cols, c);
    gemm_products(detail::decode(f), decode(q.padded_cols, true), q.cols, c, alpha, beta, threads);
  }
}

/// The decoder of a typed view, for the two routines above.
template <class Format, class Byte>
auto decoder_of(basic_quantized_view<Format, Byte> q) noexcept {
  return [q](std::size_t length, bool apply_scales) { return decode(q, length, apply_scales); };
}

} // namespace detail

/// C[M×N] = alpha · A[M×K] · B[N×K]ᵀ + beta · C, exactly summed (file comment): a is M × K and
/// b is N × K, both quantized along K; the sum runs over k < min(a.padded_cols(),
/// b.padded_cols()). beta == 0: C is not read. `threads` splits the rows of C (0: all hardware
/// threads); the result is bit-identical for every thread count. Throws std::invalid_argument
/// naming the argument when a.cols() != b.cols(), c is not M × N, or a and b disagree on the
/// Hadamard transform (applied to one only, or with other signs: it would not cancel).
template <class FormatA, class ByteA, class FormatB, class ByteB>
void reference(basic_quantized_view<FormatA, ByteA> a, basic_quantized_view<FormatB, ByteB> b,
               matrix_view<float> c, float alpha = 1.0f, float beta = 0.0f, unsigned threads = 1) {
  detail::reference_pair(detail::summary_of(a), detail::decoder_of(a), detail::summary_of(b),
                         detail::decoder_of(b), c, alpha, beta, threads);
}

/// C = alpha · A · Bᵀ + beta · C with a quantized a (M × K) and a float b (N × K, row-major
/// view); the sum runs over k < K (a's padding takes no part). Otherwise as above.
template <class FormatA, class ByteA>
void reference(basic_quantized_view<FormatA, ByteA> a, matrix_view<const float> b,
               matrix_view<float> c, float alpha = 1.0f, float beta = 0.0f, unsigned threads = 1) {
  detail::reference_with_float(detail::summary_of(a), detail::decoder_of(a), b, true, c, alpha,
                               beta, threads);
}

/// C = alpha · A · Bᵀ + beta · C with a float a (M × K, row-major view) and a quantized b
/// (N × K); the sum runs over k < K (b's padding takes no part). Otherwise as above.
template <class FormatB, class ByteB>
void reference(matrix_view<const float> a, basic_quantized_view<FormatB, ByteB> b,
               matrix_view<float> c, float alpha = 1.0f, float beta = 0.0f, unsigned threads = 1) {
  detail::reference_with_float(detail::summary_of(b), detail::decoder_of(b), a, false, c, alpha,
                               beta, threads);
}

/// The same on owning matrices.
template <class FormatA, class FormatB>
void reference(const quantized_matrix<FormatA>& a, const quantized_matrix<FormatB>& b,
               matrix_view<float> c, float alpha = 1.0f, float beta = 0.0f, unsigned threads = 1) {
  reference(a.view(), b.view(), c, alpha, beta, threads);
}
template <class FormatA>
void reference(const quantized_matrix<FormatA>& a, matrix_view<const float> b, matrix_view<float> c,
               float alpha = 1.0f, float beta = 0.0f, unsigned threads = 1) {
  reference(a.view(), b, c, alpha, beta, threads);
}
template <class FormatB>
void reference(matrix_view<const float> a, const quantized_matrix<FormatB>& b, matrix_view<float> c,
               float alpha = 1.0f, float beta = 0.0f, unsigned threads = 1) {
  reference(a, b.view(), c, alpha, beta, threads);
}

} // namespace gemm
} // namespace v0
} // namespace blockscale
