/// \file cuda/kernels/amax.hpp
/// The tensor-amax kernel as a CTA program (cuda/warp.hpp): amax_t of a matrix as a quantization
/// sees it (after the Hadamard transform along K when it has one), and optionally the amax of every
/// 16×16 tile of the input, in one pass. The result is the max of |x|'s bit patterns (codec::
/// amax_bits), added to device memory with atomicMax, so NaN anywhere gives a NaN pattern and the
/// value equals the host's `measure_amax` bit for bit.
///
/// Work is split into units of 16 input rows, taken grid-stride by warps. Without a transform
/// down the columns a lane owns 16 consecutive columns (a warp reads 32 · 16 consecutive values
/// of each row) and walks the 16 rows, so its running max is the amax of one 16×16 tile; with the
/// transform down the columns a lane owns one column and transforms its 16 values.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../../block/codec.hpp"
#include "../../block/hadamard.hpp"
#include "../../block/matrix_view.hpp"
#include "../../config.hpp"
#include "../memory.hpp"
#include "../warp.hpp"
#include "quantize.hpp"

namespace blockscale {
inline namespace v0 {
namespace cuda {

/// A gate that always lets the amax pass run.
struct always_measure {
  BLOCKSCALE_HOST_DEVICE bool operator()() const noexcept { return true; }
};

/// The amax program over T (float, bfloat16, float16). `Gate` says, on the device, whether this
/// launch measures at all (a periodic policy's decision, read from device memory); `Completion`
/// runs in the last CTA when `done` is set.
template <class T, class Gate = always_measure, class Completion = no_completion>
struct amax_program {
  static constexpr int warps = 8;
  static constexpr int threads = warps * warp_size;
  static constexpr int phases = 2;
  static constexpr int tile = hadamard16::size; ///< rows of a unit, and the side of a tile

  struct shared_storage {
    int unused;
  };

  matrix_view<const T> x;
  bool columnwise = false; ///< the quantization runs K down the columns
  bool hadamard = false;   ///< ... and transforms along K
  hadamard16 transform = hadamard16::te_default();
  std::uint32_t* amax_bits = nullptr; ///< atomicMax target (device memory)
  float* tile_amax = nullptr;         ///< optional [ceil(rows / 16)][ceil(cols / 16)], row-major
  Gate gate{};
  std::uint32_t* done = nullptr;
  Completion completion{};

  /// Whether a lane owns one column (the transform runs down the columns) or 16.
  BLOCKSCALE_HOST_DEVICE bool by_column() const noexcept { return columnwise && hadamard; }
  BLOCKSCALE_HOST_DEVICE std::size_t units_across() const noexcept {
    const std::size_t width = by_column() ? warp_size : warp_size * tile;
    return (x.cols() + width - 1) / width;
  }
  BLOCKSCALE_HOST_DEVICE std::size_t units() const noexcept {
    return (x.rows() + tile - 1) / tile * units_across();
  }
  /// The tiles across a row of tile_amax.
  BLOCKSCALE_HOST_DEVICE std::size_t tiles_across() const noexcept {
    return (x.cols() + tile - 1) / tile;
  }

  template <int Phase, class Warp>
  BLOCKSCALE_HOST_DEVICE void run(Warp& warp, cta_coord cta, shared_storage&) const {
    if constexpr (Phase == 0) {
      if (amax_bits == nullptr || !gate())
        return;
      lanes<Warp, std::uint32_t> acc;
      warp.each([&](int lane) { acc[lane] = 0; });
      const std::size_t total = units(), across = units_across();
      for (std::size_t unit = static_cast<std::size_t>(cta.index) * warps + warp.index();
           unit < total; unit += static_cast<std::size_t>(cta.count) * warps) {
        // 32-bit division: the launcher keeps the unit count below 2^32.
        const auto u = static_cast<std::uint32_t>(unit), a = static_cast<std::uint32_t>(across);
        const std::size_t r0 = static_cast<std::size_t>(u / a) * tile;
        const std::size_t first = static_cast<std::size_t>(u % a) * warp_size;
        warp.each([&](int lane) {
          if (by_column())
            acc[lane] = column_amax(acc[lane], r0, first + lane);
          else
            acc[lane] = row_amax(acc[lane], r0, (first + lane) * tile);
        });
      }
      warp.max_over(acc, warp_size);
      warp.each([&](int lane) {
        if (lane == 0) {
          warp.atomic_max(amax_bits, acc[lane]);
          warp.fence();
        }
      });
    } else {
      detail::complete_last_cta(warp, cta, done, completion);
    }
  }

private:
  /// 16 rows × 16 columns from (r0, c0), transformed along the rows when asked; writes the tile's
  /// amax when tile_amax is set.
  BLOCKSCALE_HOST_DEVICE std::uint32_t row_amax(std::uint32_t acc, std::size_t r0,
                                                std::size_t c0) const noexcept {
    if (c0 >= x.cols())
      return acc;
    const int valid = x.cols() - c0 < tile ? static_cast<int>(x.cols() - c0) : tile;
    std::uint32_t tile_acc = 0;
    if (hadamard) {
      tile_acc = transformed_tile_amax(r0, c0, valid);
    } else if (packs(r0, c0, valid)) {
      tile_acc = packed_tile_amax(x.row(r0) + c0);
    } else {
      for (int r = 0; r < tile && r0 + r < x.rows(); ++r) {
        float values[tile];
        detail::load_floats<tile>(x.row(r0 + r) + c0, valid, values);
        const std::uint32_t row = codec::block_amax_bits(values, tile);
        tile_acc = row > tile_acc ? row : tile_acc;
      }
    }
    if (tile_amax != nullptr)
      tile_amax[r0 / tile * tiles_across() + c0 / tile] = codec::amax_value(tile_acc);
    return tile_acc > acc ? tile_acc : acc;
  }

  /// Whether the tile at (r0, c0) is a whole aligned 16×16 tile of 16-bit values.
  BLOCKSCALE_HOST_DEVICE bool packs(std::size_t r0, std::size_t c0, int valid) const noexcept {
    return sizeof(T) == 2 && valid == tile && r0 + tile <= x.rows() &&
           detail::is_aligned(x.row(r0) + c0, 16) && x.ld() % 8 == 0;
  }

  /// A tile that packs(): its 128 words (16 bytes per load) into one amax of packed maxima and
  /// minima (detail::packed_amax), no value widened first.
  BLOCKSCALE_HOST_DEVICE std::uint32_t packed_tile_amax(const T* first) const noexcept {
    if constexpr (sizeof(T) == 2) {
      detail::packed_amax<T> packed;
      BLOCKSCALE_UNROLL
      for (int i = 0; i < tile; ++i) {
        alignas(16) std::uint32_t w[8];
        const auto* from = reinterpret_cast<const unsigned char*>(first + i * x.ld());
        detail::copy16(w, from);
        detail::copy16(w + 4, from + 16);
        BLOCKSCALE_UNROLL
        for (int k = 0; k < 8; ++k)
          packed.add(w[k]);
      }
      return packed.bits();
    } else {
      (void)first;
      return 0; // never called: packs() is false
    }
  }

  /// The amax of the tile's rows after the transform along them (zeros past the last column).
  BLOCKSCALE_HOST_DEVICE std::uint32_t transformed_tile_amax(std::size_t r0, std::size_t c0,
                                                             int valid) const noexcept {
    std::uint32_t tile_acc = 0;
    for (int i = 0; i < tile && r0 + i < x.rows(); ++i) {
      float values[tile];
      detail::load_floats<tile>(x.row(r0 + i) + c0, valid, values);
      transform.forward(values, values);
      const std::uint32_t row = codec::block_amax_bits(values, tile);
      tile_acc = row > tile_acc ? row : tile_acc;
    }
    return tile_acc;
  }

  /// Column c of rows r0..r0 + 15 (zeros past the end), transformed down the column.
  BLOCKSCALE_HOST_DEVICE std::uint32_t column_amax(std::uint32_t acc, std::size_t r0,
                                                   std::size_t c) const noexcept {
    if (c >= x.cols())
      return acc;
    float values[tile];
    for (int i = 0; i < tile; ++i)
      values[i] = r0 + i < x.rows() ? static_cast<float>(x(r0 + i, c)) : 0.0f;
    transform.forward(values, values);
    const std::uint32_t column = codec::block_amax_bits(values, tile);
    return column > acc ? column : acc;
  }
};

} // namespace cuda
} // namespace v0
} // namespace blockscale
