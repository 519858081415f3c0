/// \file cuda/kernels/scale_shift.hpp
/// The shift pass as a CTA program: an operand's block scales shifted onto the scale format of a
/// block-scaled MMA (block/scale_shift.hpp), for the shifted GEMM (cuda/gemm.hpp,
/// `launch_gemm_shifted`). It reads the scale codes only, never the elements.
///
/// One CTA per tile of `shift_tile_rows` rows, one thread per row: phase 0 runs
/// `shift_operand_row` (the host pass's rule) and writes the row's codes and shift; phase 1 has the
/// first warp AND the tile's 128 answers into its flag.
#pragma once

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

template <class Format, class Native>
struct shift_scales_program {
  static_assert(shifts_onto<Format, Native>, "shift_scales_program: see shifts_onto");
  static constexpr int rows_per_cta = static_cast<int>(shift_tile_rows);
  static constexpr int warps = rows_per_cta / warp_size;
  static constexpr int threads = rows_per_cta;
  static constexpr int phases = 2;
  struct shared_storage {
    std::uint8_t misfit[rows_per_cta]; ///< 1 where the row does not fit
  };

  const_quantized_view<Format> q;
  shifted_scales out;
  shift_target target = shift_target::normals;

  BLOCKSCALE_HD_TEMPLATE
  template <int Phase, class Warp>
  BLOCKSCALE_HOST_DEVICE void run(Warp& warp, cta_coord cta, shared_storage& shared) const {
    if constexpr (Phase == 0) {
      warp.each([&](int lane) {
        const int local = warp.index() * warp_size + lane;
        const std::size_t row =
            static_cast<std::size_t>(cta.index) * rows_per_cta + static_cast<std::size_t>(local);
        bool fits = true; // rows past the matrix do not hold the tile back
        if (row < q.rows()) {
          const std::int8_t shift = shift_operand_row<Native>(q, row, out.codes, target);
          out.shifts[row] = shift;
          fits = shift != no_row_shift;
        }
        shared.misfit[local] = fits ? 0 : 1;
      });
    } else {
      if (warp.index() != 0)
        return;
      lanes<Warp, unsigned> misfit;
      warp.each([&](int lane) {
        unsigned any = 0;
        BLOCKSCALE_UNROLL
        for (int i = 0; i < rows_per_cta / warp_size; ++i)
          any |= shared.misfit[lane * (rows_per_cta / warp_size) + i];
        misfit[lane] = any;
      });
      warp.max_over(misfit, warp_size);
      warp.each([&](int lane) {
        if (lane == 0)
          out.tiles[cta.index] = misfit[lane] == 0 ? 1 : 0;
      });
    }
  }
};

} // namespace kernels
} // namespace cuda
} // namespace v0
} // namespace blockscale
