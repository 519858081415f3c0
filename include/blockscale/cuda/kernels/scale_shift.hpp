/// \file cuda/kernels/scale_shift.hpp
/// The shift pass as a CTA program: an operand's block scales shifted onto the scale format of a
/// block-scaled MMA (block/scale_shift.hpp), for the shifted GEMM (cuda/gemm.hpp,
/// `launch_gemm_shifted`). It reads the scale codes only, never the elements.
///
/// One CTA of 8 warps per tile of `shift_tile_rows` rows, one warp per row at a time (16 rows
/// a warp): phase 0 has each lane take every 32nd block of the row (`operand_row_range`), merges
/// the lanes' ranges with warp maxima, decides the row's shift (`operand_row_shift`) and has each
/// lane write its blocks' codes (`write_shifted_codes`): the host pass's rule, split over lanes.
/// Phase 1 has the first warp AND the warps' answers into the tile's flag. The tensor-core
/// layout's padding rows of the last tile get zero codes. A warp reads 32 consecutive codes of a
/// row-major row at a time; of a tensor-core one, eight groups of four, 512 bytes apart.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>

#include "../../block/quantized_view.hpp"
#include "../../block/scale_shift.hpp"
#include "../../config.hpp"
#include "../warp.hpp"

namespace blockscale {
inline namespace v0 {
namespace cuda {
namespace kernels {

namespace detail {
/// The union of the ranges of a warp's lanes, in every lane: warp maxima of the range's parts,
/// each mapped to an unsigned key that orders as the merge wants (the largest code; the smallest
/// code and the smallest set bit, negated; whether any scale is NaN or Inf).
template <class Warp, class From>
BLOCKSCALE_HOST_DEVICE void merge_over_warp(const Warp& warp,
                                            lanes<Warp, scale_row_range<From>>& range) {
  constexpr unsigned lsb_origin = 0x40000000u; // far above any exponent of an 8-bit format
  lanes<Warp, unsigned> largest, smallest, lsb, nonfinite;
  warp.each([&](int lane) {
    const scale_row_range<From>& r = range[lane];
    largest[lane] = r.max_code;
    smallest[lane] = 0xFFu - r.min_code; // 0 when the part has no nonzero scale
    lsb[lane] = r.min_lsb == INT_MAX ? 0u : lsb_origin - static_cast<unsigned>(r.min_lsb);
    nonfinite[lane] = r.nonfinite ? 1u : 0u;
  });
  warp.max_over(largest, warp_size);
  warp.max_over(smallest, warp_size);
  warp.max_over(lsb, warp_size);
  warp.max_over(nonfinite, warp_size);
  warp.each([&](int lane) {
    scale_row_range<From>& r = range[lane];
    r.max_code = static_cast<std::uint8_t>(largest[lane]);
    r.min_code = static_cast<std::uint8_t>(0xFFu - smallest[lane]);
    r.min_lsb = lsb[lane] == 0u
                    ? INT_MAX
                    : static_cast<int>(lsb_origin) - static_cast<int>(lsb[lane]); // both < 2^31
    r.nonfinite = nonfinite[lane] != 0u;
  });
}
} // namespace detail

template <class Format, class Native>
struct shift_scales_program {
  static_assert(shifts_onto<Format, Native>, "shift_scales_program: see shifts_onto");
  using from = typename Format::scale_type::format;
  static constexpr int rows_per_cta = static_cast<int>(shift_tile_rows);
  static constexpr int warps = 8;
  static constexpr int threads = warps * warp_size;
  static constexpr int phases = 2;
  struct shared_storage {
    std::uint8_t misfit[warps]; ///< 1 where a row of the warp's does not fit
  };

  const_quantized_view<Format> q;
  shifted_scales out;
  shift_target target = shift_target::normals;

  BLOCKSCALE_HD_TEMPLATE
  template <int Phase, class Warp>
  BLOCKSCALE_HOST_DEVICE void run(Warp& warp, cta_coord cta, shared_storage& shared) const {
    if constexpr (Phase == 0) {
      bool misfit = false; // the same in every lane
      for (int i = warp.index(); i < rows_per_cta; i += warps) {
        const std::size_t row =
            static_cast<std::size_t>(cta.index) * rows_per_cta + static_cast<std::size_t>(i);
        if (row >= q.rows()) { // rows past the matrix do not hold the tile back
          if (q.layout() == scale_layout::tensor_core) // the layout's padding rows hold zeros
            warp.each([&](int lane) {
              write_shifted_codes<Native>(q, row, no_row_shift, out.codes,
                                          static_cast<std::size_t>(lane), warp_size);
            });
          continue;
        }
        lanes<Warp, scale_row_range<from>> range;
        warp.each([&](int lane) {
          range[lane] = operand_row_range(q, row, static_cast<std::size_t>(lane), warp_size);
        });
        detail::merge_over_warp<Warp, from>(warp, range);
        warp.each([&](int lane) {
          const std::int8_t shift = operand_row_shift<Native>(range[lane], target);
          write_shifted_codes<Native>(q, row, shift, out.codes, static_cast<std::size_t>(lane),
                                      warp_size);
          if (lane == 0)
            out.shifts[row] = shift;
          misfit = misfit || shift == no_row_shift;
        });
      }
      warp.each([&](int lane) {
        if (lane == 0)
          shared.misfit[warp.index()] = misfit ? 1 : 0;
      });
    } else {
      if (warp.index() != 0)
        return;
      warp.each([&](int lane) {
        if (lane != 0)
          return;
        bool fits = true;
        for (int w = 0; w < warps; ++w)
          fits = fits && shared.misfit[w] == 0;
        out.tiles[cta.index] = fits ? 1 : 0;
      });
    }
  }
};

} // namespace kernels
} // namespace cuda
} // namespace v0
} // namespace blockscale
