/// \file numeric/rounding.hpp
/// Rounding and overflow tags for `convert`. A rounding tag decides, from the part of a value
/// that does not fit the target, whether the kept magnitude moves one unit away from zero. Users
/// can add their own tag with the same two members.
#pragma once

#include <cstdint>

#include "../config.hpp"

namespace blockscale {
inline namespace v0 {

/// What a conversion cut off: |x| = (kept + fraction / 2^32 + a sticky remainder) units.
struct discarded_bits {
  std::uint32_t fraction; ///< the first 32 discarded bits, as a fixed-point fraction of one unit
  bool sticky;            ///< whether any discarded bit below those 32 is set
  bool kept_is_odd;       ///< the last kept bit (the unit's parity)
  bool negative;          ///< the sign of the value being rounded

  BLOCKSCALE_HOST_DEVICE constexpr bool inexact() const noexcept {
    return (fraction != 0) | sticky;
  }
};

/// Round to nearest, ties to even: IEEE 754's default.
struct round_nearest_even {
  BLOCKSCALE_HOST_DEVICE constexpr bool rounds_away(discarded_bits d) const noexcept {
    // Bitwise operators on purpose: no branches on random data, and loops vectorize.
    return (d.fraction > 0x80000000u) | ((d.fraction == 0x80000000u) & (d.sticky | d.kept_is_odd));
  }
  BLOCKSCALE_HOST_DEVICE static constexpr bool overflows_to_nonfinite(bool) noexcept {
    return true;
  }
};

/// Round to nearest, ties away from zero.
struct round_nearest_away {
  BLOCKSCALE_HOST_DEVICE constexpr bool rounds_away(discarded_bits d) const noexcept {
    return d.fraction >= 0x80000000u;
  }
  BLOCKSCALE_HOST_DEVICE static constexpr bool overflows_to_nonfinite(bool) noexcept {
    return true;
  }
};

/// Truncate the magnitude.
struct round_toward_zero {
  BLOCKSCALE_HOST_DEVICE constexpr bool rounds_away(discarded_bits) const noexcept { return false; }
  BLOCKSCALE_HOST_DEVICE static constexpr bool overflows_to_nonfinite(bool) noexcept {
    return false;
  }
};

/// Round toward +infinity.
struct round_up {
  BLOCKSCALE_HOST_DEVICE constexpr bool rounds_away(discarded_bits d) const noexcept {
    return !d.negative & d.inexact();
  }
  BLOCKSCALE_HOST_DEVICE static constexpr bool overflows_to_nonfinite(bool negative) noexcept {
    return !negative;
  }
};

/// Round toward -infinity.
struct round_down {
  BLOCKSCALE_HOST_DEVICE constexpr bool rounds_away(discarded_bits d) const noexcept {
    return d.negative & d.inexact();
  }
  BLOCKSCALE_HOST_DEVICE static constexpr bool overflows_to_nonfinite(bool negative) noexcept {
    return negative;
  }
};

/// Round to odd: an inexact result takes the neighbour whose last bit is 1. Rounding to odd at
/// p + 2 bits and then to nearest at p bits equals rounding once to nearest (Boldo, Melquiond).
struct round_to_odd {
  BLOCKSCALE_HOST_DEVICE constexpr bool rounds_away(discarded_bits d) const noexcept {
    return d.inexact() & !d.kept_is_odd;
  }
  BLOCKSCALE_HOST_DEVICE static constexpr bool overflows_to_nonfinite(bool) noexcept {
    return true;
  }
};

/// Stochastic rounding: away from zero with probability equal to the discarded fraction. `bits`
/// are the caller's uniform random bits; the result rounds away iff fraction + bits >= 2^32.
/// Exact values never move; the expectation equals x up to the truncation of the fraction to 32
/// bits (at most 2^-32 of a unit).
struct round_stochastic {
  std::uint32_t bits;

  BLOCKSCALE_HOST_DEVICE constexpr bool rounds_away(discarded_bits d) const noexcept {
    return std::uint64_t{d.fraction} + bits >= (std::uint64_t{1} << 32);
  }
  BLOCKSCALE_HOST_DEVICE static constexpr bool overflows_to_nonfinite(bool) noexcept {
    return true;
  }
};

/// Values beyond the largest finite number become ±max finite (the default).
struct saturate_finite {};

/// Values beyond the largest finite number become ±Inf, or NaN where the format has no Inf, as in
/// IEEE 754 §7.4: toward-zero rounding, and directed rounding toward the other side, still give
/// ±max finite. Infinite input stays infinite (NaN without Inf). Formats with neither cannot use
/// it.
struct to_nonfinite {};

} // namespace v0
} // namespace blockscale
