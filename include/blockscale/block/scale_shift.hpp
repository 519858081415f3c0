/// \file block/scale_shift.hpp
/// One row's block scales moved by a power of two onto a narrower scale format with the same
/// mantissa: UE5M3 onto UE4M3, so that a UE5M3-FP4 operand runs on tensor cores that take NVFP4's
/// UE4M3 scales, exactly (docs/scale_shift.md).
///
/// Why it is exact. Every term of C[m, n] = Σ_b S_A[m, b] · S_B[n, b] · Σ_k a · b carries the
/// product of one block scale of row m of A and one of row n of B. Dividing all block scales of row
/// m by 2^t_A[m] (and of row n of B by 2^t_B[n]) divides every term of C[m, n] by the same
/// 2^(t_A[m] + t_B[n]), which an epilogue multiplies back exactly.
///
/// Two targets:
/// - `shift_target::values`: every shifted scale is a `To` code. A UE5M3 scale S is S' · 2^t for a
///   UE4M3 code S' exactly when S · 2^-t has no set bit below UE4M3's smallest subnormal 2^-9 and
///   is at most 448, so a row fits when its largest scale is at most 448 · 2^9 times its smallest
///   set bit (about 17.8 binades).
/// - `shift_target::normals` (the default): moreover every nonzero scale is a normal number of
///   both formats. The block-scaled tensor cores align each group's term by its scales' exponents,
///   and a subnormal scale by the format's least normal exponent (docs/cuda.md): with normals on
///   both sides the shift moves every term's alignment by the same amount, so the MMA on the
///   shifted UE4M3 scales gives the bits of the same MMA on the UE5M3 scales, times 2^-(t_A + t_B)
///   (outside FP32 underflow and overflow). A row fits when its largest scale is at most
///   448 · 2^6 = 28672 times its smallest, all at least UE5M3's 2^-14 (about 14.8 binades).
///
///     scale_row_range<ue5m3_format> range;
///     for (std::size_t b = 0; b < blocks; ++b)
///       range.add(codes[b]);
///     const scale_row_shift s = row_shift<ue5m3_format, ue4m3_format>(range);
///     if (s.fits)
///       for (std::size_t b = 0; b < blocks; ++b)
///         shifted[b] = shift_scale_code<ue5m3_format, ue4m3_format>(codes[b], s.shift);
///
/// (`shift_scale_row` does both.) `scale_row_range` merges, so a warp can reduce a row's range
/// across lanes. A NaN or Inf scale refuses its row: such a block is not a number the shift can
/// carry, and the row takes the dequantizing path, which keeps the reference's NaN. The shift
/// chosen is the smallest that fits (the shifted scales as large as they can be); every larger
/// one up to the bound the target sets would be as exact.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <type_traits>

#include "../config.hpp"
#include "../numeric/format.hpp"
#include "quantized_view.hpp"

namespace blockscale {
inline namespace v0 {

namespace detail {

/// A finite nonzero code of an unsigned format with subnormals as sig · 2^exponent, sig the
/// integer significand (1 ... 2^(M + 1) - 1).
struct scale_significand {
  int sig = 0;
  int exponent = 0;
};

template <class Format>
BLOCKSCALE_HOST_DEVICE constexpr scale_significand significand_of(std::uint8_t code) noexcept {
  using traits = format_traits<Format>;
  const int field = code >> traits::mantissa_bits;
  const int mantissa = code & ((1 << traits::mantissa_bits) - 1);
  if (field == 0)
    return {mantissa, 1 - traits::bias - traits::mantissa_bits};
  return {(1 << traits::mantissa_bits) | mantissa, field - traits::bias - traits::mantissa_bits};
}

/// The exponent of the lowest set bit of sig · 2^exponent (sig > 0).
BLOCKSCALE_HOST_DEVICE constexpr int lowest_bit_exponent(scale_significand s) noexcept {
  int e = s.exponent;
  for (int sig = s.sig; (sig & 1) == 0; sig >>= 1)
    ++e;
  return e;
}

/// The exponent of the highest set bit of sig · 2^exponent (sig > 0).
BLOCKSCALE_HOST_DEVICE constexpr int highest_bit_exponent(scale_significand s) noexcept {
  int e = s.exponent;
  for (int sig = s.sig; sig > 1; sig >>= 1)
    ++e;
  return e;
}

template <class From, class To>
BLOCKSCALE_HOST_DEVICE constexpr bool shiftable_scale_formats() noexcept {
  using from = format_traits<From>;
  using to = format_traits<To>;
  return !from::is_signed && !to::is_signed && from::has_subnormals && to::has_subnormals &&
         from::mantissa_bits == to::mantissa_bits;
}

} // namespace detail

/// Which shifted scales count as fitting (the file's comment): `To` codes, or normal numbers of
/// both formats (what keeps the tensor cores' alignment, the default).
enum class shift_target { values, normals };

/// What decides a row's shift: its largest and smallest finite nonzero scale codes, the smallest
/// exponent of a set bit among its finite nonzero scales (codes of the unsigned format `From`,
/// whose codes order as their values), and whether it holds a NaN or Inf. Zero scales add nothing.
template <class From>
struct scale_row_range {
  static_assert(!format_traits<From>::is_signed && format_traits<From>::has_subnormals,
                "scale_row_range: block scales of an unsigned format with subnormals");
  std::uint8_t max_code = 0;    ///< 0: no nonzero scale yet
  std::uint8_t min_code = 0xFF; ///< 0xFF: no nonzero scale yet
  int min_lsb = INT_MAX;        ///< INT_MAX: no nonzero scale yet
  bool nonfinite = false;

  BLOCKSCALE_HOST_DEVICE constexpr void add(std::uint8_t code) noexcept {
    if (code > format_traits<From>::max_code) {
      nonfinite = true;
      return;
    }
    if (code == 0)
      return;
    if (code > max_code)
      max_code = code;
    if (code < min_code)
      min_code = code;
    const int lsb = detail::lowest_bit_exponent(detail::significand_of<From>(code));
    if (lsb < min_lsb)
      min_lsb = lsb;
  }

  /// The range of the union of two parts of a row.
  BLOCKSCALE_HOST_DEVICE constexpr void merge(const scale_row_range& other) noexcept {
    if (other.max_code > max_code)
      max_code = other.max_code;
    if (other.min_code < min_code)
      min_code = other.min_code;
    if (other.min_lsb < min_lsb)
      min_lsb = other.min_lsb;
    nonfinite = nonfinite || other.nonfinite;
  }
};

/// A row's shift: `fits` when every scale of the row divided by 2^shift is a `To` code.
struct scale_row_shift {
  bool fits = false;
  int shift = 0;
};

/// Whether From's finite `code` divided by 2^shift is a `To` code (zero always), and with
/// `shift_target::normals` a normal number of both formats.
template <class From, class To>
BLOCKSCALE_HOST_DEVICE constexpr bool
scale_code_fits(std::uint8_t code, int shift,
                shift_target target = shift_target::normals) noexcept {
  static_assert(detail::shiftable_scale_formats<From, To>(),
                "scale_code_fits: unsigned formats with subnormals and the same mantissa bits");
  using from = format_traits<From>;
  using to = format_traits<To>;
  if (code > from::max_code)
    return false;
  if (code == 0)
    return true;
  const detail::scale_significand s = detail::significand_of<From>(code);
  const detail::scale_significand top = detail::significand_of<To>(to::max_code);
  const int exponent = s.exponent - shift;
  const int high = detail::highest_bit_exponent({s.sig, exponent});
  if (target == shift_target::normals) {
    // normal in From (exponent field nonzero) and in To (top bit at or above 2^(1 - bias))
    if ((code >> from::mantissa_bits) == 0 || high < 1 - to::bias)
      return false;
  } else if (detail::lowest_bit_exponent(s) - shift < 1 - to::bias - to::mantissa_bits) {
    return false; // a set bit below To's smallest subnormal
  }
  // At most To's largest finite value: the significands have the same width, so compare the top
  // bits' exponents, then the significands at a common exponent.
  const int top_high = detail::highest_bit_exponent(top);
  if (high != top_high)
    return high < top_high;
  return s.sig << (to::mantissa_bits - (high - exponent)) <=
         top.sig << (to::mantissa_bits - (top_high - top.exponent));
}

/// The smallest shift that fits the row whose range is `range`, or fits = false (a NaN or Inf
/// scale, or more binades than `To` holds for `target`). An all-zero row fits with shift 0.
template <class From, class To>
BLOCKSCALE_HOST_DEVICE constexpr scale_row_shift
row_shift(const scale_row_range<From>& range,
          shift_target target = shift_target::normals) noexcept {
  static_assert(detail::shiftable_scale_formats<From, To>(),
                "row_shift: unsigned formats with subnormals and the same mantissa bits");
  using to = format_traits<To>;
  if (range.nonfinite)
    return {false, 0};
  if (range.max_code == 0)
    return {true, 0};
  // The largest scale fits from this shift up (the top binades must match, then the significands
  // compare); the smallest one (normals) or the smallest set bit (values) up to `highest`.
  const detail::scale_significand s = detail::significand_of<From>(range.max_code);
  const detail::scale_significand top = detail::significand_of<To>(to::max_code);
  int shift = detail::highest_bit_exponent(s) - detail::highest_bit_exponent(top);
  if (!scale_code_fits<From, To>(range.max_code, shift, shift_target::values))
    ++shift;
  int highest = range.min_lsb - (1 - to::bias - to::mantissa_bits);
  if (target == shift_target::normals) {
    if ((range.min_code >> format_traits<From>::mantissa_bits) == 0)
      return {false, 0}; // a From subnormal
    highest =
        detail::highest_bit_exponent(detail::significand_of<From>(range.min_code)) - (1 - to::bias);
  }
  if (shift > highest)
    return {false, 0};
  return {true, shift};
}

/// From's finite `code` divided by 2^shift as a `To` code; requires scale_code_fits (else the
/// result is meaningless).
template <class From, class To>
BLOCKSCALE_HOST_DEVICE constexpr std::uint8_t shift_scale_code(std::uint8_t code,
                                                               int shift) noexcept {
  static_assert(detail::shiftable_scale_formats<From, To>(),
                "shift_scale_code: unsigned formats with subnormals and the same mantissa bits");
  using to = format_traits<To>;
  constexpr int m = to::mantissa_bits;
  if (code == 0)
    return 0;
  const detail::scale_significand s = detail::significand_of<From>(code);
  const int exponent = s.exponent - shift;
  const int high = detail::highest_bit_exponent({s.sig, exponent});
  const int field = high + to::bias;
  if (field >= 1) { // normal: the significand's top bit becomes the implicit one
    const int sig = s.sig << (m - (high - exponent));
    return static_cast<std::uint8_t>((field << m) | (sig & ((1 << m) - 1)));
  }
  // subnormal: sig · 2^exponent = k · 2^(1 - bias - m), exact when the code fits (the bits
  // shifted out are zero); the range test keeps a code that does not fit from shifting by more
  // than a byte.
  const int d = exponent - (1 - to::bias - m);
  if (d >= 8 || d <= -8)
    return 0;
  return static_cast<std::uint8_t>(d >= 0 ? s.sig << d : s.sig >> -d);
}

/// Shifts one row's `count` block scales: out[i · out_stride] gets codes[i · stride] divided by
/// 2^shift as a `To` code when the row fits `target` (else out is untouched). Returns the shift.
template <class From, class To>
BLOCKSCALE_HOST_DEVICE scale_row_shift shift_scale_row(
    const std::uint8_t* codes, std::size_t count, std::uint8_t* out, std::size_t stride = 1,
    std::size_t out_stride = 1, shift_target target = shift_target::normals) noexcept {
  scale_row_range<From> range;
  for (std::size_t i = 0; i < count; ++i)
    range.add(codes[i * stride]);
  const scale_row_shift s = row_shift<From, To>(range, target);
  if (s.fits)
    for (std::size_t i = 0; i < count; ++i)
      out[i * out_stride] = shift_scale_code<From, To>(codes[i * stride], s.shift);
  return s;
}

/// How much of a quantized matrix takes the shifted scales: its rows, the rows that fit, and its
/// tiles of `tile_rows` consecutive rows (the last may be shorter) with the tiles whose rows all
/// fit — a GEMM tile whose A rows and B rows all fit can run on the narrower format's MMA.
struct scale_shift_census {
  std::size_t rows = 0, fitting_rows = 0;
  std::size_t tiles = 0, fitting_tiles = 0;
};

/// The census of q's rows shifted onto the scale format `To` for `target` (either scale layout).
template <class To, class Format, class Byte>
scale_shift_census census_of_shifts(basic_quantized_view<Format, Byte> q,
                                    std::size_t tile_rows = 128,
                                    shift_target target = shift_target::normals) {
  using from = typename Format::scale_type::format;
  if (tile_rows == 0)
    throw std::invalid_argument("census_of_shifts: tile_rows must be positive");
  scale_shift_census census;
  census.rows = q.rows();
  bool tile_fits = true;
  for (std::size_t r = 0; r < q.rows(); ++r) {
    scale_row_range<from> range;
    for (std::size_t kb = 0; kb < q.blocks_per_row(); ++kb)
      range.add(q.scales()[q.scale_index(r, kb)]);
    const bool fits = row_shift<from, To>(range, target).fits;
    census.fitting_rows += fits ? 1 : 0;
    tile_fits = tile_fits && fits;
    if ((r + 1) % tile_rows == 0 || r + 1 == q.rows()) {
      ++census.tiles;
      census.fitting_tiles += tile_fits ? 1 : 0;
      tile_fits = true;
    }
  }
  return census;
}

/// Rows per tile of a shifted operand's tile flags: the CTA tile (rows of A, rows of B) of the
/// GEMMs that read them.
inline constexpr std::size_t shift_tile_rows = 128;
/// The shift recorded for a row that does not fit.
inline constexpr std::int8_t no_row_shift = INT8_MIN;

/// Where one operand's shifted scales live, in caller memory on the host or the device (sizes:
/// `shifted_storage_for`):
/// - `codes`: the `To` codes, one per block in the operand's scale layout and storage (its
///   `scale_bytes`); a row that does not fit, and the tensor-core layout's padding (blocks and
///   rows), hold zeros;
/// - `shifts`: per row, its shift t (its scales are the codes times 2^t), or `no_row_shift`;
/// - `tiles`: per `shift_tile_rows` rows (the last tile may be shorter), 1 when every row of the
///   tile fits, else 0.
template <class Byte>
struct basic_shifted_scales {
  static_assert(std::is_same<std::remove_const_t<Byte>, std::uint8_t>::value,
                "Byte is std::uint8_t or const std::uint8_t");
  using shift_type = std::conditional_t<std::is_const<Byte>::value, const std::int8_t, std::int8_t>;
  Byte* codes = nullptr;
  shift_type* shifts = nullptr;
  Byte* tiles = nullptr;

  basic_shifted_scales() = default;
  BLOCKSCALE_HOST_DEVICE constexpr basic_shifted_scales(Byte* c, shift_type* s, Byte* t) noexcept
      : codes(c), shifts(s), tiles(t) {}
  /// A writable one converts to a read-only one.
  template <class Other, std::enable_if_t<std::is_same<const Other, Byte>::value &&
                                              !std::is_same<Other, Byte>::value,
                                          int> = 0>
  BLOCKSCALE_HOST_DEVICE constexpr basic_shifted_scales(basic_shifted_scales<Other> other) noexcept
      : codes(other.codes), shifts(other.shifts), tiles(other.tiles) {}
};
using shifted_scales = basic_shifted_scales<std::uint8_t>;
using const_shifted_scales = basic_shifted_scales<const std::uint8_t>;

/// The bytes of each array of `basic_shifted_scales` for an operand of `shape`.
struct shifted_storage {
  std::size_t code_bytes = 0, shift_bytes = 0, tile_bytes = 0;
};
template <class Format>
shifted_storage shifted_storage_for(const quantized_shape& shape) {
  return {storage_for<Format>(shape).scale_bytes, shape.rows,
          (shape.rows + shift_tile_rows - 1) / shift_tile_rows};
}

/// Whether an operand of block format `Format` shifts onto the block format `Native` (what a
/// block-scaled MMA takes): the same elements and block size, scale formats `shiftable`.
template <class Format, class Native>
inline constexpr bool shifts_onto =
    std::is_same<typename Format::element_type, typename Native::element_type>::value&&
        Format::block_size ==
    Native::block_size&& detail::shiftable_scale_formats<typename Format::scale_type::format,
                                                         typename Native::scale_type::format>();

/// The range of the scales of blocks kb = first, first + step, ... of row `r` of q: a part of
/// the row, which `scale_row_range::merge` joins (a warp's lanes each take every 32nd block).
template <class Format, class Byte>
BLOCKSCALE_HOST_DEVICE scale_row_range<typename Format::scale_type::format>
operand_row_range(basic_quantized_view<Format, Byte> q, std::size_t r, std::size_t first = 0,
                  std::size_t step = 1) noexcept {
  scale_row_range<typename Format::scale_type::format> range;
  for (std::size_t kb = first; kb < q.blocks_per_row(); kb += step)
    range.add(q.scales()[q.scale_index(r, kb)]);
  return range;
}

/// The shift recorded for a row of range `range` shifted onto `Native`'s scale format: its
/// `row_shift`, or `no_row_shift`.
template <class Native, class From>
BLOCKSCALE_HOST_DEVICE std::int8_t operand_row_shift(const scale_row_range<From>& range,
                                                     shift_target target) noexcept {
  const scale_row_shift s = row_shift<From, typename Native::scale_type::format>(range, target);
  // No pair of 8-bit formats shifts this far; kept out of the int8 all the same.
  return s.fits && s.shift > INT8_MIN && s.shift <= INT8_MAX ? static_cast<std::int8_t>(s.shift)
                                                             : no_row_shift;
}

/// Writes the shifted codes of blocks kb = first, first + step, ... of row `r` of q into `codes`
/// (q's layout) for the row's recorded `shift`: zeros where it is `no_row_shift`, and zeros in the
/// tensor-core layout's padding blocks (kb up to a multiple of 4). A padding row of that layout
/// (q.rows() <= r < the next multiple of 128) gets zeros with `no_row_shift`.
template <class Native, class Format, class Byte>
BLOCKSCALE_HOST_DEVICE void
write_shifted_codes(basic_quantized_view<Format, Byte> q, std::size_t r, std::int8_t shift,
                    std::uint8_t* codes, std::size_t first = 0, std::size_t step = 1) noexcept {
  using from = typename Format::scale_type::format;
  using to = typename Native::scale_type::format;
  const std::size_t blocks = q.blocks_per_row();
  const std::size_t padded =
      q.layout() == scale_layout::tensor_core ? (blocks + 3) / 4 * 4 : blocks;
  for (std::size_t kb = first; kb < padded; kb += step) {
    const std::size_t at = q.scale_index(r, kb);
    codes[at] = kb < blocks && shift != no_row_shift
                    ? shift_scale_code<from, to>(q.scales()[at], shift)
                    : std::uint8_t{0};
  }
}

/// Row `r` of q with its scales shifted onto `Native`'s scale format: writes the row's codes into
/// `codes` and returns its shift, or `no_row_shift` (operand_row_range, operand_row_shift and
/// write_shifted_codes over the whole row: the host pass; the device pass runs the same three
/// over a warp's lanes).
template <class Native, class Format, class Byte>
BLOCKSCALE_HOST_DEVICE std::int8_t shift_operand_row(basic_quantized_view<Format, Byte> q,
                                                     std::size_t r, std::uint8_t* codes,
                                                     shift_target target) noexcept {
  static_assert(shifts_onto<Format, Native>, "shift_operand_row: see shifts_onto");
  const std::int8_t shift = operand_row_shift<Native>(operand_row_range(q, r), target);
  write_shifted_codes<Native>(q, r, shift, codes);
  return shift;
}

/// q's scales shifted onto `Native`'s scale format, on the host: every row's codes and shift and
/// every tile's flag into `out` (arrays of `shifted_storage_for` sizes). Returns the census of
/// the rows and tiles that fit.
template <class Native, class Format, class Byte>
scale_shift_census shift_scales(basic_quantized_view<Format, Byte> q, shifted_scales out,
                                shift_target target = shift_target::normals) {
  if (q.rows() != 0 && (out.codes == nullptr || out.shifts == nullptr || out.tiles == nullptr))
    throw std::invalid_argument(
        "shift_scales: out.codes, out.shifts and out.tiles must not be null");
  scale_shift_census census;
  census.rows = q.rows();
  bool tile_fits = true;
  if (q.layout() == scale_layout::tensor_core) // the layout's padding rows hold zeros
    for (std::size_t r = q.rows(); r % shift_tile_rows != 0; ++r)
      write_shifted_codes<Native>(q, r, no_row_shift, out.codes);
  for (std::size_t r = 0; r < q.rows(); ++r) {
    out.shifts[r] = shift_operand_row<Native>(q, r, out.codes, target);
    const bool fits = out.shifts[r] != no_row_shift;
    census.fitting_rows += fits ? 1 : 0;
    tile_fits = tile_fits && fits;
    if ((r + 1) % shift_tile_rows == 0 || r + 1 == q.rows()) {
      out.tiles[census.tiles++] = tile_fits ? 1 : 0;
      census.fitting_tiles += tile_fits ? 1 : 0;
      tile_fits = true;
    }
  }
  return census;
}

/// The shifted operand: q's elements and decode scale with the shifted codes of `s`, a view in
/// `Native`'s block format. Row r of it is row r of q divided by 2^(s.shifts[r]) where that row
/// fits; the other rows are zeros.
template <class Native, class Format, class Byte>
BLOCKSCALE_HOST_DEVICE const_quantized_view<Native>
shifted_operand(basic_quantized_view<Format, Byte> q, const_shifted_scales s) noexcept {
  static_assert(shifts_onto<Format, Native>, "shifted_operand: see shifts_onto");
  return const_quantized_view<Native>::unchecked(q.shape(), q.elements(), s.codes,
                                                 q.decode_scale_data());
}

} // namespace v0
} // namespace blockscale
