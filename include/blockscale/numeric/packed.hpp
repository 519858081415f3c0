/// \file numeric/packed.hpp
/// Packed 4-bit codes: the nibble order of packed FP4 storage (`nibble_at`, `pack_nibble_pair`,
/// `pack_nibbles`), and E2M1 vectors of 2, 8 or 16 values in one unsigned integer, element i in
/// bits [4i, 4i+4) (on a little-endian machine the same order as the bytes: element 0 is the low
/// nibble of the first byte, as in cuBLAS and PyTorch's float4_e2m1fn_x2).
#pragma once

#include <cstddef>
#include <cstdint>

#include "../config.hpp"
#include "convert.hpp"
#include "minifloat.hpp"
#include "rounding.hpp"

namespace blockscale {
inline namespace v0 {

/// Element `i` of a packed sequence of 4-bit codes: byte i / 2, the low nibble for even i, the high
/// nibble for odd i. The one statement of the nibble order; everything that packs or unpacks
/// 4-bit codes goes through these three functions.
BLOCKSCALE_HOST_DEVICE constexpr std::uint8_t nibble_at(const std::uint8_t* bytes,
                                                        std::size_t i) noexcept {
  return static_cast<std::uint8_t>((bytes[i / 2] >> (4 * (i % 2))) & 0xFu);
}
/// The byte holding codes `even` (low nibble) and `odd` (high nibble); both must be below 16.
BLOCKSCALE_HOST_DEVICE constexpr std::uint8_t pack_nibble_pair(std::uint8_t even,
                                                               std::uint8_t odd) noexcept {
  return static_cast<std::uint8_t>(even | (odd << 4));
}
/// Packs `count` (even) 4-bit codes into count / 2 bytes.
BLOCKSCALE_HOST_DEVICE constexpr void pack_nibbles(const std::uint8_t* codes, std::size_t count,
                                                   std::uint8_t* bytes) noexcept {
  for (std::size_t i = 0; i < count / 2; ++i)
    bytes[i] = pack_nibble_pair(codes[2 * i], codes[2 * i + 1]);
}

namespace detail {
template <int Count>
struct packed_storage;
template <>
struct packed_storage<2> {
  using type = std::uint8_t;
};
template <>
struct packed_storage<8> {
  using type = std::uint32_t;
};
template <>
struct packed_storage<16> {
  using type = std::uint64_t;
};
} // namespace detail

/// `Count` E2M1 values packed into one integer, element 0 in the low nibble.
template <int Count>
class packed_e2m1 {
public:
  using storage_type = typename detail::packed_storage<Count>::type;
  static constexpr int size = Count;

  packed_e2m1() = default;

  BLOCKSCALE_HOST_DEVICE static constexpr packed_e2m1 from_bits(storage_type bits) noexcept {
    packed_e2m1 result{};
    result.bits_ = bits;
    return result;
  }
  BLOCKSCALE_HOST_DEVICE constexpr storage_type bits() const noexcept { return bits_; }

  /// Element `i` (0 <= i < Count).
  BLOCKSCALE_HOST_DEVICE constexpr e2m1 get(int i) const noexcept {
    return e2m1::from_bits(static_cast<std::uint8_t>((bits_ >> (4 * i)) & 0xFu));
  }
  BLOCKSCALE_HOST_DEVICE constexpr void set(int i, e2m1 value) noexcept {
    const auto shift = 4 * i;
    bits_ = static_cast<storage_type>((bits_ & ~(storage_type{0xF} << shift)) |
                                      (storage_type{value.bits()} << shift));
  }

  /// Rounds `Count` floats with one rounding tag and packs them.
  template <class Rounding = round_nearest_even>
  BLOCKSCALE_HOST_DEVICE static BLOCKSCALE_BIT_CAST_CONSTEXPR packed_e2m1
  pack(const float* values, Rounding rounding = {}) noexcept {
    storage_type bits = 0;
    for (int i = 0; i < Count; ++i)
      bits |= storage_type{convert<e2m1>(values[i], rounding).bits()} << (4 * i);
    return from_bits(bits);
  }
  /// Rounds `Count` floats stochastically, element i with `random_bits[i]`, and packs them.
  BLOCKSCALE_HOST_DEVICE static BLOCKSCALE_BIT_CAST_CONSTEXPR packed_e2m1
  pack_stochastic(const float* values, const std::uint32_t* random_bits) noexcept {
    storage_type bits = 0;
    for (int i = 0; i < Count; ++i)
      bits |= storage_type{convert<e2m1>(values[i], round_stochastic{random_bits[i]}).bits()}
              << (4 * i);
    return from_bits(bits);
  }
  /// Writes the `Count` exact values to `out`.
  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_BIT_CAST_CONSTEXPR void unpack(float* out) const noexcept {
    for (int i = 0; i < Count; ++i)
      out[i] = static_cast<float>(get(i));
  }

  friend BLOCKSCALE_HOST_DEVICE constexpr bool operator==(packed_e2m1 a, packed_e2m1 b) noexcept {
    return a.bits_ == b.bits_;
  }
  friend BLOCKSCALE_HOST_DEVICE constexpr bool operator!=(packed_e2m1 a, packed_e2m1 b) noexcept {
    return a.bits_ != b.bits_;
  }

private:
  storage_type bits_;
};

using e2m1x2 = packed_e2m1<2>;   ///< one byte: the storage unit of packed FP4 tensors
using e2m1x8 = packed_e2m1<8>;   ///< 32 bits: one register of a GEMM fragment
using e2m1x16 = packed_e2m1<16>; ///< 64 bits: one NVFP4 block

} // namespace v0
} // namespace blockscale
