/// \file numeric/random.hpp
/// Counter-based random bits for stochastic rounding: Philox4x32-10 (J. K. Salmon, M. A. Moraes,
/// R. O. Dror, D. E. Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC'11; reference code in
/// Random123, https://github.com/DEShawResearch/random123, include/Random123/philox.h). A pure
/// function of (counter, key), the same on the host and the device, so an element keyed by
/// (seed, offset, index) gets the same bits wherever and in whatever order it is computed.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../config.hpp"

namespace blockscale {
inline namespace v0 {

/// `N` 32-bit words: Philox's counter, key and output blocks. A plain aggregate rather than
/// `std::array`, whose accessors nvcc treats as host-only unless `--expt-relaxed-constexpr` is
/// given.
template <std::size_t N>
struct uint32_array {
  std::uint32_t words[N]; ///< the words, in Random123's order (word 0 first)

  /// Word `i`.
  BLOCKSCALE_HOST_DEVICE constexpr std::uint32_t& operator[](std::size_t i) noexcept {
    return words[i];
  }
  /// Word `i`.
  BLOCKSCALE_HOST_DEVICE constexpr const std::uint32_t& operator[](std::size_t i) const noexcept {
    return words[i];
  }
  /// The number of words, `N`.
  BLOCKSCALE_HOST_DEVICE static constexpr std::size_t size() noexcept { return N; }
  /// Iteration over the words (range-for; test frameworks print the array as a range).
  BLOCKSCALE_HOST_DEVICE constexpr const std::uint32_t* begin() const noexcept { return words; }
  /// One past the last word.
  BLOCKSCALE_HOST_DEVICE constexpr const std::uint32_t* end() const noexcept { return words + N; }

  /// Word-by-word equality.
  BLOCKSCALE_HOST_DEVICE friend constexpr bool operator==(const uint32_array& a,
                                                          const uint32_array& b) noexcept {
    bool equal = true;
    for (std::size_t i = 0; i < N; ++i)
      equal &= a.words[i] == b.words[i];
    return equal;
  }
  /// Word-by-word inequality.
  BLOCKSCALE_HOST_DEVICE friend constexpr bool operator!=(const uint32_array& a,
                                                          const uint32_array& b) noexcept {
    return !(a == b);
  }
};

/// Four 32-bit words: a Philox4x32 counter or output block.
using uint4x32 = uint32_array<4>;
/// Two 32-bit words: a Philox4x32 key.
using uint2x32 = uint32_array<2>;

namespace detail {

/// The high and low halves of a 64-bit product.
struct high_low {
  std::uint32_t high;
  std::uint32_t low;
};

/// The exact 32 x 32 -> 64-bit product of `a` and `b`, split into halves (Random123's mulhilo).
/// The same code on the host and the device: `__umulhi` gives the same high word but is not
/// constexpr in nvcc's device pass.
BLOCKSCALE_HOST_DEVICE constexpr high_low multiply_high_low(std::uint32_t a,
                                                            std::uint32_t b) noexcept {
  const std::uint64_t product = std::uint64_t{a} * b;
  return {static_cast<std::uint32_t>(product >> 32), static_cast<std::uint32_t>(product)};
}

/// Word `lane` (0..3) of `block`, by selects rather than a variable index: on the device a variable
/// index would move the block from registers to local memory.
BLOCKSCALE_HOST_DEVICE constexpr std::uint32_t select_word(const uint4x32& block,
                                                           std::uint32_t lane) noexcept {
  const std::uint32_t low_pair = (lane & 1u) != 0 ? block[1] : block[0];
  const std::uint32_t high_pair = (lane & 1u) != 0 ? block[3] : block[2];
  return (lane & 2u) != 0 ? high_pair : low_pair;
}

/// The low 32 bits of `x`.
BLOCKSCALE_HOST_DEVICE constexpr std::uint32_t low_word(std::uint64_t x) noexcept {
  return static_cast<std::uint32_t>(x);
}

/// The high 32 bits of `x`.
BLOCKSCALE_HOST_DEVICE constexpr std::uint32_t high_word(std::uint64_t x) noexcept {
  return static_cast<std::uint32_t>(x >> 32);
}

/// The Philox key for `seed`: {low word, high word}.
BLOCKSCALE_HOST_DEVICE constexpr uint2x32 philox_key(std::uint64_t seed) noexcept {
  return {{low_word(seed), high_word(seed)}};
}

/// The Philox counter of block `block` (= element index / 4) in the stream `offset`.
BLOCKSCALE_HOST_DEVICE constexpr uint4x32 philox_counter(std::uint64_t block,
                                                         std::uint64_t offset) noexcept {
  return {{low_word(block), high_word(block), low_word(offset), high_word(offset)}};
}

} // namespace detail

/// Philox4x32-10: a bijection of 128-bit counters for each 64-bit key, with Random123's constants
/// and round structure, so its output equals Random123's `philox4x32(ctr, key)` word for word.
struct philox4x32_10 {
  using counter_type = uint4x32; ///< the 128-bit input block
  using key_type = uint2x32;     ///< the 64-bit key
  /// Number of rounds.
  static constexpr int rounds = 10;
  /// Multiplier of counter word 0 (Random123's PHILOX_M4x32_0).
  static constexpr std::uint32_t multiplier0 = 0xD2511F53u;
  /// Multiplier of counter word 2 (PHILOX_M4x32_1).
  static constexpr std::uint32_t multiplier1 = 0xCD9E8D57u;
  /// Key word 0's increment per round (PHILOX_W32_0: the golden ratio's fraction, 2^32 / phi).
  static constexpr std::uint32_t weyl0 = 0x9E3779B9u;
  /// Key word 1's increment per round (PHILOX_W32_1: (sqrt(3) - 1) * 2^32).
  static constexpr std::uint32_t weyl1 = 0xBB67AE85u;

  /// The output block for `counter` under `key`. Branch-free and allocation-free.
  [[nodiscard]] BLOCKSCALE_HOST_DEVICE static constexpr counter_type
  generate(counter_type counter, key_type key) noexcept {
    // Random123 bumps the key before rounds 2..10; bumping after every round (the last bump
    // unused) is the same schedule and keeps the loop body uniform.
    for (int round = 0; round < rounds; ++round) {
      const detail::high_low product0 = detail::multiply_high_low(multiplier0, counter[0]);
      const detail::high_low product1 = detail::multiply_high_low(multiplier1, counter[2]);
      counter = {{product1.high ^ counter[1] ^ key[0], product1.low,
                  product0.high ^ counter[3] ^ key[1], product0.low}};
      key[0] += weyl0;
      key[1] += weyl1;
    }
    return counter;
  }
};

/// The random word for element `index` of the stream (seed, offset): Philox with key
/// {lo32(seed), hi32(seed)}, counter {lo32(index / 4), hi32(index / 4), lo32(offset),
/// hi32(offset)}, word index % 4 of the output. Computes a whole block for one word: use
/// `philox_stream` for consecutive indices.
[[nodiscard]] BLOCKSCALE_HOST_DEVICE constexpr std::uint32_t
random_bits(std::uint64_t seed, std::uint64_t offset, std::uint64_t index) noexcept {
  const auto block =
      philox4x32_10::generate(detail::philox_counter(index / 4, offset), detail::philox_key(seed));
  return detail::select_word(block, static_cast<std::uint32_t>(index % 4));
}

/// Writes `random_bits(seed, offset, first + i)` to `out[i]` for i < count: the stochastic-rounding
/// words of a run of consecutive elements, one Philox block per four words. The blocks are
/// independent, so the loop over them vectorizes.
BLOCKSCALE_HOST_DEVICE inline void fill_random_bits(std::uint64_t seed, std::uint64_t offset,
                                                    std::uint64_t first, std::size_t count,
                                                    std::uint32_t* out) noexcept {
  const uint2x32 key = detail::philox_key(seed);
  std::size_t i = 0;
  for (; i < count && (first + i) % 4 != 0; ++i) // up to the first whole block
    out[i] = random_bits(seed, offset, first + i);
  const std::uint64_t first_block = (first + i) / 4;
  const std::size_t whole = (count - i) / 4;
  std::uint32_t* words = out + i;
  for (std::size_t n = 0; n < whole; ++n) {
    const uint4x32 block =
        philox4x32_10::generate(detail::philox_counter(first_block + n, offset), key);
    for (std::size_t w = 0; w < 4; ++w)
      words[4 * n + w] = block[w];
  }
  for (i += 4 * whole; i < count; ++i) // the last partial block
    out[i] = random_bits(seed, offset, first + i);
}

/// Elements whose stochastic rounding one Philox block pays for: 16, 8 random bits each.
inline constexpr std::uint64_t rounding_elements_per_block = 16;

/// Philox block `block` expanded into the rounding words of its 16 elements:
/// out[4w + k] = byte k of word w, in the top byte of the word (the rest zero).
BLOCKSCALE_HOST_DEVICE constexpr void expand_rounding_block(const uint4x32& block,
                                                            std::uint32_t* out) noexcept {
  for (std::size_t w = 0; w < 4; ++w)
    for (std::size_t k = 0; k < 4; ++k)
      out[4 * w + k] = (block[w] << (24 - 8 * k)) & 0xFF000000u;
}

/// The stochastic-rounding word of element `index` of the stream (seed, offset): 8 random bits on
/// top, the rest zero. They are byte index % 16 of the Philox block of counter {lo32(index / 16),
/// hi32(index / 16), lo32(offset), hi32(offset)} under key {lo32(seed), hi32(seed)}: byte k of
/// word w serves element 16 · (index / 16) + 4w + k. One Philox call pays for 16 elements, and
/// `round_stochastic{rounding_bits(...)}` rounds as PTX's `cvt.rs` does with that byte: away from
/// zero with probability floor(256 · fraction) / 256, which is below the exact fraction by less
/// than 2^-8 of a quantum.
[[nodiscard]] BLOCKSCALE_HOST_DEVICE constexpr std::uint32_t
rounding_bits(std::uint64_t seed, std::uint64_t offset, std::uint64_t index) noexcept {
  const auto block =
      philox4x32_10::generate(detail::philox_counter(index / rounding_elements_per_block, offset),
                              detail::philox_key(seed));
  const auto byte = static_cast<std::uint32_t>(index % 4);
  const std::uint32_t word = detail::select_word(
      block, static_cast<std::uint32_t>(index % rounding_elements_per_block) / 4);
  return (word << (24 - 8 * byte)) & 0xFF000000u;
}

/// Writes `rounding_bits(seed, offset, first + i)` to `out[i]` for i < count, one Philox call per
/// whole block of 16 elements.
BLOCKSCALE_HOST_DEVICE inline void fill_rounding_bits(std::uint64_t seed, std::uint64_t offset,
                                                      std::uint64_t first, std::size_t count,
                                                      std::uint32_t* out) noexcept {
  constexpr std::uint64_t per_block = rounding_elements_per_block;
  const uint2x32 key = detail::philox_key(seed);
  std::size_t i = 0;
  for (; i < count && (first + i) % per_block != 0; ++i) // up to the first whole block
    out[i] = rounding_bits(seed, offset, first + i);
  const std::uint64_t first_block = (first + i) / per_block;
  const std::size_t whole = (count - i) / per_block;
  for (std::size_t n = 0; n < whole; ++n)
    expand_rounding_block(
        philox4x32_10::generate(detail::philox_counter(first_block + n, offset), key),
        out + i + per_block * n);
  for (i += per_block * whole; i < count; ++i) // the last partial block
    out[i] = rounding_bits(seed, offset, first + i);
}

/// The words `random_bits(seed, offset, i)` for i = first_index, first_index + 1, ..., in order,
/// calling Philox once per 4 words. Indices wrap modulo 2^64, as `random_bits`'s do.
class philox_stream {
public:
  /// A stream whose first `next()` is `random_bits(seed, offset, first_index)`.
  BLOCKSCALE_HOST_DEVICE constexpr philox_stream(std::uint64_t seed, std::uint64_t offset,
                                                 std::uint64_t first_index = 0) noexcept
      : key_(detail::philox_key(seed)), offset_(offset), block_index_(first_index / 4),
        block_(philox4x32_10::generate(detail::philox_counter(block_index_, offset), key_)),
        lane_(static_cast<std::uint32_t>(first_index % 4)) {}

  /// The next word of the stream.
  BLOCKSCALE_HOST_DEVICE constexpr std::uint32_t next() noexcept {
    if (lane_ == 4) {
      // index / 4 of a 64-bit index has 62 bits: wrap there, as the index itself wraps at 2^64.
      block_index_ = (block_index_ + 1) & (~std::uint64_t{0} >> 2);
      block_ = philox4x32_10::generate(detail::philox_counter(block_index_, offset_), key_);
      lane_ = 0;
    }
    return detail::select_word(block_, lane_++);
  }

  /// The element index of the word the next call to `next()` returns.
  BLOCKSCALE_HOST_DEVICE constexpr std::uint64_t index() const noexcept {
    return block_index_ * 4 + lane_;
  }

private:
  philox4x32_10::key_type key_;
  std::uint64_t offset_;
  std::uint64_t block_index_; // the block held in block_: element index / 4
  philox4x32_10::counter_type block_;
  std::uint32_t lane_; // the next word of block_ to return; 4 when it is used up
};

} // namespace v0
} // namespace blockscale
