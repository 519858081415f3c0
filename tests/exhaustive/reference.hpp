/// \file reference.hpp
/// An independent, exact reference for `blockscale::convert`, written from docs/conversion.md and
/// nothing else. It never calls the library's encoder or decoder: it reads only the six members of
/// a format descriptor, lists the format's finite values by decoding each code's sign, exponent and
/// mantissa fields in double, and rounds by comparing against those values (a table lookup and
/// exact double arithmetic, not bit shifting).
///
/// Why the double arithmetic is exact: with lo <= a < hi neighbours in the format's value set V,
/// a - lo is exact by Sterbenz's lemma (lo >= a / 2 whenever lo > 0, since hi - lo <= lo there);
/// the midpoint (lo + hi) / 2 has one more significant bit than the format, so it is a double; the
/// gap hi - lo is a power of two, so (a - lo) / (hi - lo) * 2^32 is exact, and so is its floor.
/// This holds for float and for double inputs.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace blockscale_test {

/// The rounding modes of docs/conversion.md, as plain values (the reference does not use the
/// library's tags).
enum class ref_mode {
  nearest_even,
  nearest_away,
  toward_zero,
  up,
  down,
  to_odd,
  stochastic,
};
inline constexpr int ref_mode_count = 7;

enum class ref_overflow { saturate, nonfinite };

inline const char* ref_mode_name(ref_mode m) {
  switch (m) {
  case ref_mode::nearest_even:
    return "nearest_even";
  case ref_mode::nearest_away:
    return "nearest_away";
  case ref_mode::toward_zero:
    return "toward_zero";
  case ref_mode::up:
    return "up";
  case ref_mode::down:
    return "down";
  case ref_mode::to_odd:
    return "to_odd";
  case ref_mode::stochastic:
    return "stochastic";
  }
  return "?";
}

inline const char* ref_overflow_name(ref_overflow o) {
  return o == ref_overflow::saturate ? "saturate_finite" : "to_nonfinite";
}

/// The value table of a format, built from its descriptor's fields.
template <class Format>
class reference_format {
public:
  static constexpr int E = Format::exponent_bits;
  static constexpr int M = Format::mantissa_bits;
  static constexpr int bias = Format::bias;
  static constexpr bool is_signed = Format::is_signed;
  static constexpr bool has_subnormals = Format::has_subnormals;
  static constexpr int nonfinite_kind =
      static_cast<int>(Format::nonfinite); // 0 none, 1 NaN, 2 IEEE

  /// One entry of the table: a non-negative value, its magnitude code and the parity of its last
  /// mantissa bit (of the last code bit when the format has no mantissa bits: UE8M0).
  struct entry {
    double value;
    unsigned code;
    bool odd;
  };

  reference_format() {
    const unsigned magnitude_codes = 1u << (E + M);
    const unsigned exponent_all_ones = (1u << E) - 1;
    unsigned next_code = 0; // the code one past the largest finite magnitude
    for (unsigned code = 0; code < magnitude_codes; ++code) {
      const unsigned field = code >> M;
      if (nonfinite_kind == 1 && code == magnitude_codes - 1)
        continue; // NaN
      if (nonfinite_kind == 2 && field == exponent_all_ones)
        continue; // Inf, NaN
      entries_.push_back({value_of(code), code, parity_of(code)});
      next_code = std::max(next_code, code + 1);
    }
    std::sort(entries_.begin(), entries_.end(),
              [](const entry& a, const entry& b) { return a.value < b.value; });
    finite_count_ = static_cast<int>(entries_.size());
    // The next value above the largest, as if the exponent were unbounded: decoding the code one
    // past the largest finite one with the same formula carries into the exponent naturally.
    entries_.push_back({value_of(next_code), next_code, parity_of(next_code)});
    // A sentinel so that a lookup never runs off the end.
    entries_.push_back({std::numeric_limits<double>::infinity(), 0, false});

    const unsigned magnitude_mask = magnitude_codes - 1;
    sign_bit_ = is_signed ? (1u << (E + M)) : 0u;
    max_code_ = entries_[static_cast<std::size_t>(finite_count_ - 1)].code;
    nan_code_ = magnitude_mask; // all exponent and mantissa bits set, sign 0
    infinity_code_ = exponent_all_ones << M;
  }

  /// Exact value of a non-negative magnitude code (the exponent field may exceed E bits).
  static double value_of(unsigned code) {
    const int field = static_cast<int>(code >> M);
    const int mantissa = static_cast<int>(code & ((1u << M) - 1));
    if (has_subnormals && field == 0)
      return std::ldexp(static_cast<double>(mantissa), 1 - bias - M);
    const double significand = 1.0 + std::ldexp(static_cast<double>(mantissa), -M);
    return std::ldexp(significand, field - bias);
  }
  static bool parity_of(unsigned code) { return (code & 1u) != 0; }

  /// Non-negative finite values in increasing order, then the next value above the largest
  /// ("overflow" entry, index finite_count()), then +infinity.
  const std::vector<entry>& entries() const { return entries_; }
  int finite_count() const { return finite_count_; }
  double smallest() const { return entries_[0].value; }
  double largest() const { return entries_[static_cast<std::size_t>(finite_count_ - 1)].value; }
  double overflow_threshold() const {
    return entries_[static_cast<std::size_t>(finite_count_)].value;
  }

  unsigned sign_bit() const { return sign_bit_; }
  unsigned max_code() const { return max_code_; }
  unsigned nan_code() const { return nan_code_; }
  unsigned infinity_code() const { return infinity_code_; }
  bool has_nan() const { return nonfinite_kind != 0; }
  bool has_infinity() const { return nonfinite_kind == 2; }
  bool has_zero() const { return entries_[0].value == 0.0; }

  /// Index i with entries[i].value <= a < entries[i + 1].value, or -1 when a < smallest()
  /// (formats without zero). a must be a non-negative, non-NaN number.
  int lookup(double a) const {
    if (a < entries_[0].value)
      return -1;
    // upper_bound over [0, finite_count] (the sentinel is never <= a for finite a).
    int lo = 0, hi = finite_count_ + 1; // entries[lo] <= a < entries[hi] (hi may be the sentinel)
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      if (entries_[static_cast<std::size_t>(mid)].value <= a)
        lo = mid;
      else
        hi = mid;
    }
    return lo;
  }

  /// The non-NaN result for the code `magnitude_index` (an index into entries(); finite_count()
  /// means "rounded past the largest value") of an input with sign `negative`.
  unsigned finish(int magnitude_index, bool negative, ref_mode mode, ref_overflow overflow) const {
    const unsigned sign = negative ? sign_bit_ : 0u;
    if (magnitude_index < finite_count_)
      return sign | entries_[static_cast<std::size_t>(magnitude_index)].code;
    return sign | overflow_code(negative, mode, overflow);
  }

  /// The magnitude code of an overflowing finite input (docs/conversion.md, rule 2).
  unsigned overflow_code(bool negative, ref_mode mode, ref_overflow overflow) const {
    if (overflow == ref_overflow::saturate)
      return max_code_;
    bool to_nonfinite = true;
    if (mode == ref_mode::toward_zero)
      to_nonfinite = false;
    if (mode == ref_mode::up && negative)
      to_nonfinite = false;
    if (mode == ref_mode::down && !negative)
      to_nonfinite = false;
    if (!to_nonfinite)
      return max_code_;
    return nonfinite_kind == 2 ? infinity_code_ : nan_code_;
  }

  /// The neighbours of a finite magnitude a: everything the rounding modes need.
  struct position {
    int index;          ///< lookup(a)
    bool exact;         ///< a is in V (or a >= the overflow threshold, where nothing matters)
    int nearest_cmp;    ///< sign of a - midpoint(lo, hi)
    std::uint32_t frac; ///< floor(2^32 (a - lo) / (hi - lo))
  };

  position locate(double a, int index) const {
    position p{index, true, 0, 0};
    if (index < 0 || index >= finite_count_)
      return p; // below the smallest, or overflow
    const entry& lo = entries_[static_cast<std::size_t>(index)];
    const entry& hi = entries_[static_cast<std::size_t>(index) + 1];
    if (a == lo.value)
      return p;
    p.exact = false;
    const double mid = 0.5 * (lo.value + hi.value); // exact: one more bit than the format
    p.nearest_cmp = a < mid ? -1 : a > mid ? 1 : 0;
    const double gap = hi.value - lo.value; // a power of two
    const double scaled = (a - lo.value) / gap * 4294967296.0;
    p.frac = static_cast<std::uint32_t>(std::floor(scaled));
    return p;
  }

  /// Index of the rounded magnitude (finite_count() if it overflows), for a finite input at
  /// position p. Returns -1 when the result is below the smallest value (UE8M0 only).
  int round_index(const position& p, bool negative, ref_mode mode, std::uint32_t sr_bits) const {
    if (p.index < 0)
      return -1;
    if (p.index >= finite_count_)
      return finite_count_;
    if (p.exact)
      return p.index;
    const int lo = p.index, hi = p.index + 1;
    switch (mode) {
    case ref_mode::nearest_even:
      if (p.nearest_cmp != 0)
        return p.nearest_cmp < 0 ? lo : hi;
      return entries_[static_cast<std::size_t>(lo)].odd ? hi : lo;
    case ref_mode::nearest_away:
      return p.nearest_cmp < 0 ? lo : hi;
    case ref_mode::toward_zero:
      return lo;
    case ref_mode::up:
      return negative ? lo : hi;
    case ref_mode::down:
      return negative ? hi : lo;
    case ref_mode::to_odd:
      return entries_[static_cast<std::size_t>(lo)].odd ? lo : hi;
    case ref_mode::stochastic:
      return std::uint64_t{p.frac} + std::uint64_t{sr_bits} >= (std::uint64_t{1} << 32) ? hi : lo;
    }
    return lo;
  }

  /// The full conversion, for any double (so any float) x.
  unsigned convert(double x, ref_mode mode, ref_overflow overflow, std::uint32_t sr_bits) const {
    if (std::isnan(x))
      return has_nan() ? nan_code_ : max_code_;
    const bool negative = std::signbit(x);
    if (negative && !is_signed)
      return 0; // includes -0 and -Inf; UE8M0's code 0 is 2^-127
    const double a = std::fabs(x);
    const unsigned sign = negative ? sign_bit_ : 0u;
    if (std::isinf(a)) {
      if (overflow == ref_overflow::saturate)
        return sign | max_code_;
      return sign | (has_infinity() ? infinity_code_ : nan_code_);
    }
    const int index = lookup(a);
    const position p = locate(a, index);
    const int rounded = round_index(p, negative, mode, sr_bits);
    if (rounded < 0)
      return 0; // below the smallest value of a format without zero
    return finish(rounded, negative, mode, overflow);
  }

private:
  std::vector<entry> entries_;
  int finite_count_ = 0;
  unsigned sign_bit_ = 0, max_code_ = 0, nan_code_ = 0, infinity_code_ = 0;
};

/// The table of `Format`, built once.
template <class Format>
const reference_format<Format>& reference_table() {
  static const reference_format<Format> table;
  return table;
}

/// The code `convert<minifloat<Format>>(x, mode, overflow)` must return under docs/conversion.md.
/// `sr_bits` is used by `ref_mode::stochastic` only.
template <class Format>
std::uint8_t reference_convert(double x, ref_mode mode, ref_overflow overflow,
                               std::uint32_t sr_bits = 0) {
  return static_cast<std::uint8_t>(reference_table<Format>().convert(x, mode, overflow, sr_bits));
}

inline float float_from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline std::uint32_t bits_from_float(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

/// murmur3's 32-bit finalizer: a bijective, well-mixed hash for stochastic-rounding bits.
inline std::uint32_t mix32(std::uint32_t h) {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

} // namespace blockscale_test
