/// \file cuda/kernels/quantize.hpp
/// The quantize kernels as CTA programs (cuda/warp.hpp), written for memory bandwidth: a thread
/// owns whole blocks, reads them with 16-byte loads straight into registers, decides each block's
/// scale once and encodes its elements with branch-free bodies (block/codec_e2m1.hpp), one vector
/// store per block. A columnwise output (the transpose) goes through a shared-memory tile; both
/// outputs come from one read. Every decision is the codec's (block/codec.hpp), so the bytes
/// equal host `quantize_into`'s; the tests run these programs on the host and compare.
///
/// The common case (1×B blocks, row-major scales, no transform, no counters, aligned rows) is its
/// own instantiation with no run-time test for any of those (`common_case`); anything else runs
/// `general_case`, which tests them per tile or block. `quantize_program` below says how a tile
/// is split among threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

#include "../../block/codec.hpp"
#include "../../block/codec_e2m1.hpp"
#include "../../block/hadamard.hpp"
#include "../../block/matrix_view.hpp"
#include "../../block/quantize_params.hpp"
#include "../../block/quantized_view.hpp"
#include "../../block/scale_layout.hpp"
#include "../../config.hpp"
#include "../../numeric/half.hpp"
#include "../../numeric/random.hpp"
#include "../memory.hpp"
#include "../warp.hpp"

namespace blockscale {
inline namespace v0 {
namespace cuda {

/// The three numbers a tensor scale decides, as the kernels read them: s_enc, s_dec = 1 / s_enc
/// and m = s_enc · fp32(1 / target). Lives in device memory when a device policy chooses it.
struct tensor_scales {
  float encode_scale = 1.0f;
  float decode_scale = 1.0f;
  float scale_multiplier = 1.0f;

  /// The scales for s_enc under a rule whose fp32(1 / target) is `inverse_target`, computed as
  /// make_quantize_params computes them.
  BLOCKSCALE_HOST_DEVICE static tensor_scales make(float s_enc, float inverse_target) noexcept {
    return {s_enc, 1.0f / s_enc, s_enc * inverse_target};
  }
};

/// Quantization counters in device memory, added to with atomics (a tile counts once).
struct device_quantize_stats {
  unsigned long long blocks = 0;
  unsigned long long saturated_scales = 0;
  unsigned long long zero_scales = 0;
  unsigned long long nan_scales = 0;
  std::uint32_t amax_bits = 0; ///< max of |x|'s bit patterns (NaN patterns above Inf's)

  /// The counters as the host's quantize_stats.
  BLOCKSCALE_HOST_DEVICE quantize_stats value() const noexcept {
    quantize_stats stats;
    stats.blocks = blocks;
    stats.saturated_scales = saturated_scales;
    stats.zero_scales = zero_scales;
    stats.nan_scales = nan_scales;
    stats.amax = codec::amax_value(amax_bits);
    return stats;
  }
};

/// One output of a quantize program: the view it writes, its checked parameters, and the rounding
/// tags the launcher chose (`with_rounding_tags`). `scales`, when set, points at device memory
/// whose three scales replace the params' (a device policy's choice, made after the launch was
/// queued); `stats`, when set, receives the counters.
template <class BlockFormat, class ScaleRounding, class ElementRounding>
struct quantize_output {
  using format = BlockFormat;
  using scale_rounding = ScaleRounding;
  using element_rounding = ElementRounding;
  static constexpr bool enabled = true;
  static constexpr int block_size = BlockFormat::block_size;
  static_assert(64 % block_size == 0 && block_size <= warp_size,
                "device quantization takes blocks of 1, 2, 4, 8, 16 or 32 elements");

  quantized_view<BlockFormat> view;
  quantize_params params;
  const tensor_scales* scales = nullptr;
  device_quantize_stats* stats = nullptr;

  /// The parameters in force: params, with the scales read from `scales` when it is set.
  BLOCKSCALE_HOST_DEVICE quantize_params effective_params() const noexcept {
    quantize_params p = params;
    if (scales != nullptr) {
      p.encode_scale = scales->encode_scale;
      p.decode_scale = scales->decode_scale;
      p.scale_multiplier = scales->scale_multiplier;
    }
    return p;
  }
};

/// The absent output of a one-direction program.
struct no_quantize_output {
  static constexpr bool enabled = false;
  static constexpr int block_size = 1;
  using format = nvfp4; ///< never used: lets code written for either output name a format
};

/// The absent completion action.
struct no_completion {
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE void operator()(const Warp&) const noexcept {}
};

namespace detail {

/// Counters of one lane, summed over the warp before they go to memory.
struct lane_counts {
  std::uint32_t blocks = 0, saturated = 0, zero = 0, nan = 0, amax_bits = 0;
};

/// Sums the lanes' counters and lets lane 0 add them to `stats` (when set).
template <class Warp>
BLOCKSCALE_HOST_DEVICE void publish_counts(Warp& warp, lanes<Warp, lane_counts>& counts,
                                           device_quantize_stats* stats) {
  if (stats == nullptr)
    return;
  lanes<Warp, std::uint32_t> value;
  const auto reduce = [&](std::uint32_t lane_counts::*field, bool max) {
    warp.each([&](int lane) { value[lane] = counts[lane].*field; });
    if (max)
      warp.max_over(value, warp_size);
    else
      warp.sum_over(value, warp_size);
    warp.each([&](int lane) { counts[lane].*field = value[lane]; });
  };
  reduce(&lane_counts::blocks, false);
  reduce(&lane_counts::saturated, false);
  reduce(&lane_counts::zero, false);
  reduce(&lane_counts::nan, false);
  reduce(&lane_counts::amax_bits, true);
  warp.each([&](int lane) {
    if (lane != 0)
      return;
    const lane_counts& c = counts[lane];
    if (c.blocks != 0) {
      warp.atomic_add(&stats->blocks, c.blocks);
      warp.atomic_add(&stats->saturated_scales, c.saturated);
      warp.atomic_add(&stats->zero_scales, c.zero);
      warp.atomic_add(&stats->nan_scales, c.nan);
      warp.atomic_max(&stats->amax_bits, c.amax_bits);
    }
    warp.fence();
  });
}

/// The last phase of a program with a completion action: warp 0's lane 0 of each CTA counts the
/// CTA done in `*done` (when set); the CTA that counts last runs `completion` — every other CTA's
/// writes are then visible — and resets the counter for the next launch.
template <class Warp, class Completion>
BLOCKSCALE_HOST_DEVICE void complete_last_cta(Warp& warp, cta_coord cta, std::uint32_t* done,
                                              const Completion& completion) {
  if (done == nullptr || warp.index() != 0)
    return;
  warp.each([&](int lane) {
    if (lane != 0)
      return;
    warp.fence();
    if (warp.atomic_add(done, 1u) + 1 == cta.count) {
      warp.fence();
      completion(warp);
      *done = 0;
    }
  });
}

} // namespace detail

/// The variants a launch chooses among (the launcher decides, once per launch): the common case
/// compiled with no test for any feature it lacks, or every case with the features read from the
/// parameters at run time.
///  - `common_case`: 1×B blocks, row-major scales, no Hadamard transform, no counters, input rows
///    16-byte aligned. Ragged edge tiles still take their own predicated path, chosen per tile.
///  - `general_case`: anything else (B×B tiles, the tensor-core scale layout, the transform,
///    counters and a completion action, misaligned input), each a uniform test per tile or block.
struct common_case {
  static constexpr bool general = false;
};
/// See common_case.
struct general_case {
  static constexpr bool general = true;
};

namespace detail {

/// f_b and the keep mask of one scale code (codec::encode_factor, codec::keeps_elements), as a
/// CTA's table holds them.
struct factor_entry {
  float factor;
  std::uint32_t keep; ///< all ones when the block stores its elements, zero otherwise
};

/// Element j (0 or 1: the low or the high half) of a word of two 16-bit inputs, as a float.
template <class T>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE float widen_half(std::uint32_t word,
                                                               int half) noexcept {
  if constexpr (std::is_same<T, bfloat16>::value) {
    return blockscale::detail::bit_cast<float>(half == 0 ? word << 16 : word & 0xFFFF0000u);
  } else {
    static_assert(std::is_same<T, float16>::value, "16-bit inputs are bfloat16 or float16");
    const auto bits = static_cast<std::uint16_t>(half == 0 ? word : word >> 16);
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(bits)); // exact, one conversion
#else
    return static_cast<float>(float16::from_bits(bits));
#endif
  }
}

/// The amax patterns (codec::amax_bits: |x|'s float bits, a NaN pattern for NaN) of the low and
/// of the high halves of the N words w[0..N-1] (16-bit values). On the device a tree of
/// `max.NaN.xorsign.abs` on the packed words (both halves at once; sm_86 and later), or on sm_80 a
/// max and a min tree and max(max, -min): the NaN it gives may differ in payload from the
/// host's, never in being NaN.
template <class T, int N>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE void
amax_bits_of_halves(const std::uint32_t* w, std::uint32_t& low, std::uint32_t& high) noexcept {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 860
  // max.NaN.xorsign.abs: the larger magnitude of each half, NaN if either is (its sign, the
  // xor of the operands', is dropped below). A balanced tree of N - 1.
  std::uint32_t v[N];
  BLOCKSCALE_UNROLL
  for (int i = 0; i < N; ++i)
    v[i] = w[i];
  BLOCKSCALE_UNROLL
  for (int width = 1; width < N; width *= 2) {
    BLOCKSCALE_UNROLL
    for (int i = 0; i + width < N; i += 2 * width) {
      if constexpr (std::is_same<T, bfloat16>::value)
        asm("max.NaN.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(v[i]) : "r"(v[i]), "r"(v[i + width]));
      else
        asm("max.NaN.xorsign.abs.f16x2 %0, %1, %2;" : "=r"(v[i]) : "r"(v[i]), "r"(v[i + width]));
    }
  }
  low = codec::magnitude_bits(widen_half<T>(v[0], 0));
  high = codec::magnitude_bits(widen_half<T>(v[0], 1));
#elif defined(__CUDA_ARCH__)
  std::uint32_t most = w[0], least = w[0];
  BLOCKSCALE_UNROLL
  for (int i = 1; i < N; ++i) {
    if constexpr (std::is_same<T, bfloat16>::value) {
      asm("max.NaN.bf16x2 %0, %0, %1;" : "+r"(most) : "r"(w[i]));
      asm("min.NaN.bf16x2 %0, %0, %1;" : "+r"(least) : "r"(w[i]));
    } else {
      asm("max.NaN.f16x2 %0, %0, %1;" : "+r"(most) : "r"(w[i]));
      asm("min.NaN.f16x2 %0, %0, %1;" : "+r"(least) : "r"(w[i]));
    }
  }
  std::uint32_t top = 0;
  const std::uint32_t negated = least ^ 0x80008000u;
  if constexpr (std::is_same<T, bfloat16>::value)
    asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(top) : "r"(most), "r"(negated));
  else
    asm("max.NaN.f16x2 %0, %1, %2;" : "=r"(top) : "r"(most), "r"(negated));
  low = codec::magnitude_bits(widen_half<T>(top, 0));
  high = codec::magnitude_bits(widen_half<T>(top, 1));
#else
  low = 0;
  high = 0;
  for (int i = 0; i < N; ++i) {
    low = codec::amax_bits(low, widen_half<T>(w[i], 0));
    high = codec::amax_bits(high, widen_half<T>(w[i], 1));
  }
#endif
}

/// A running amax of packed 16-bit values (two per word), the same as amax_bits_of_halves over
/// everything added: on the device a packed maximum and minimum (NaN-propagating), reduced once.
template <class T>
struct packed_amax {
#if defined(__CUDA_ARCH__)
  std::uint32_t most = 0xFF80FF80u, least = 0x7F807F80u; // -Inf and +Inf in both halves (bf16)
  bool empty = true;
  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE void add(std::uint32_t w) noexcept {
    if (empty) { // the first word starts both (constant-folded in unrolled loops)
      most = least = w;
      empty = false;
      return;
    }
#if __CUDA_ARCH__ >= 860
    if constexpr (std::is_same<T, bfloat16>::value) // |most| only: `least` stays unused
      asm("max.NaN.xorsign.abs.bf16x2 %0, %0, %1;" : "+r"(most) : "r"(w));
    else
      asm("max.NaN.xorsign.abs.f16x2 %0, %0, %1;" : "+r"(most) : "r"(w));
    return;
#endif
    if constexpr (std::is_same<T, bfloat16>::value) {
      asm("max.NaN.bf16x2 %0, %0, %1;" : "+r"(most) : "r"(w));
      asm("min.NaN.bf16x2 %0, %0, %1;" : "+r"(least) : "r"(w));
    } else {
      asm("max.NaN.f16x2 %0, %0, %1;" : "+r"(most) : "r"(w));
      asm("min.NaN.f16x2 %0, %0, %1;" : "+r"(least) : "r"(w));
    }
  }
  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE std::uint32_t bits() const noexcept {
    std::uint32_t top = most;
#if __CUDA_ARCH__ < 860
    const std::uint32_t negated = least ^ 0x80008000u;
    if constexpr (std::is_same<T, bfloat16>::value)
      asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(top) : "r"(most), "r"(negated));
    else
      asm("max.NaN.f16x2 %0, %1, %2;" : "=r"(top) : "r"(most), "r"(negated));
#endif
    const std::uint32_t a = codec::magnitude_bits(widen_half<T>(top, 0));
    const std::uint32_t b = codec::magnitude_bits(widen_half<T>(top, 1));
    return empty ? 0u : (a > b ? a : b);
  }
#else
  std::uint32_t acc = 0;
  void add(std::uint32_t w) noexcept {
    acc = codec::amax_bits(acc, widen_half<T>(w, 0));
    acc = codec::amax_bits(acc, widen_half<T>(w, 1));
  }
  std::uint32_t bits() const noexcept {
    return acc;
  }
#endif
};

/// The amax pattern of the 2N 16-bit values in w[0..N-1].
template <class T, int N>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE std::uint32_t
amax_bits_16bit(const std::uint32_t* w) noexcept {
  std::uint32_t low = 0, high = 0;
  amax_bits_of_halves<T, N>(w, low, high);
  return low > high ? low : high; // a NaN pattern lies above every number's
}

/// N words of a lane, 16-byte aligned so that they can be filled by vector loads.
template <int N>
struct alignas(16) word_array {
  std::uint32_t w[N];
};

/// The stochastic-rounding byte of element j of a block whose first element is byte
/// `first_in_block` of Philox block blocks[0] (numeric/random.hpp, rounding_bits): blocks[] holds
/// the Philox blocks of the block's elements, one per 16 (word by selects, not by a variable
/// index, so that the blocks stay in registers).
template <int B>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE std::uint32_t
rounding_byte(const uint4x32* blocks, std::uint32_t first_in_block, int j) noexcept {
  if constexpr (B >= 16) { // a block starts a Philox block: every index is a constant
    return (blocks[j / 16][(j % 16) / 4] >> (8 * (j % 4))) & 0xFFu;
  } else {
    const std::uint32_t at = first_in_block + static_cast<std::uint32_t>(j); // < 16
    return (blockscale::detail::select_word(blocks[0], at / 4) >> (8 * (at % 4))) & 0xFFu;
  }
}

} // namespace detail

/// The quantize program over input element type T (float, bfloat16, float16) with a rowwise and a
/// columnwise output, either of which may be `no_quantize_output`, a completion action run by the
/// last CTA when `done` is set (a counter in device memory, zero before the launch; the last CTA
/// resets it), and the variant `Case` (common_case or general_case).
///
/// A looped program (cuda/runner.cuh): each CTA walks tiles of 64 input rows × 512 bytes (256
/// bfloat16 or 128 float columns) grid-stride, 256 threads. Per tile:
///  - the rows pass: a warp takes B rows × 32 / B blocks of B along the rows at a time, lane l the
///    block of row l % B and block l / B — its B values straight from global memory into
///    registers (16-byte loads, all in flight together), so the B rows of a B×B tile are B
///    consecutive lanes. With a rowwise output the lane quantizes its block where it stands;
///    with a columnwise output it also stores the raw words in shared memory;
///  - the columns pass (columnwise output only, after a barrier): a lane owns one 4-byte column of
///    the tile (two bfloat16 columns, one float) down 32 rows and quantizes each column's blocks
///    along them. The tile is stored row-major without padding, its 16-byte chunks swizzled by
///    row (tile_word): the rows pass's 16-byte stores (lanes of up to 8 rows at one column per
///    phase) and the columns pass's loads (32 consecutive words of one row per warp) are both
///    free of bank conflicts (tests/unit/test_cuda_kernels_host.cpp checks every warp's accesses
///    through tile_word and the lane maps below).
/// A lane's block: its amax (on the packed words for 16-bit input), the max over the B lanes of a
/// tile, the scale code (codec::scale_code), f_b and the keep mask from the CTA's table of all
/// 256 codes (made once per CTA with codec::encode_factor), the elements encoded (E2M1: the
/// branch-free bodies of block/codec_e2m1.hpp on eight elements at a time, their signs gathered
/// from the input words; other formats: codec::encode_block), one vector store per block and its
/// scale byte. Stochastic rounding takes one Philox block per 16 elements (rounding_bits).
template <class T, class RowOutput, class ColumnOutput, class Completion = no_completion,
          class Case = common_case>
struct quantize_program {
  static_assert(RowOutput::enabled || ColumnOutput::enabled, "a quantize program writes something");
  static constexpr bool general = Case::general;
  static constexpr int warps = 8;
  static constexpr int threads = warps * warp_size;
  /// Blocks of 16 in the common case are compiled for two CTAs (16 warps, 128 registers a
  /// thread) per SM: left to itself ptxas chose 80 registers for the NVFP4 pair on sm_100a and
  /// spilled. Blocks of 32 (a lane holds twice the values) and the general case (up to 255
  /// registers) keep the compiler's choice: capped at 128 they spill.
  static constexpr int min_ctas_per_sm =
      !general && RowOutput::block_size <= 16 && ColumnOutput::block_size <= 16 ? 2 : 0;
  static constexpr int tile_rows = 64;
  static constexpr int tile_row_bytes = 512;
  static constexpr int tile_words = tile_row_bytes / 4; ///< 4-byte words per tile row
  static constexpr int tile_cols = tile_row_bytes / static_cast<int>(sizeof(T));
  static constexpr int per_word = 4 / static_cast<int>(sizeof(T)); ///< input values per word
  static constexpr bool transposes = ColumnOutput::enabled;
  static constexpr int loop_phases = transposes ? 3 : 1;
  static constexpr int column_rows = 32; ///< rows of the tile one lane of the columns pass reads
  static constexpr int column_block = ColumnOutput::block_size; ///< B of the columns pass
  static_assert(sizeof(T) == 2 || sizeof(T) == 4, "inputs are float, bfloat16 or float16");
  static_assert(tile_words * (tile_rows / column_rows) == threads,
                "the columns pass gives each thread one 4-byte column of 32 rows");

  // The rows pass: units of `height` rows × 32 / height lanes, each lane `width` values (see
  // rows_pass). A warp takes units warp, warp + 8, ...; `parts` units span a tile row.
  static constexpr int height = RowOutput::enabled ? RowOutput::block_size : 1;
  static constexpr int width =
      RowOutput::enabled ? RowOutput::block_size : 16 / static_cast<int>(sizeof(T));
  static constexpr int unit_words = width * static_cast<int>(sizeof(T)) / 4;
  static constexpr int unit_cols = warp_size / height * width;
  static constexpr int parts = tile_cols / unit_cols;
  static constexpr int units_per_warp = tile_rows / height * parts / warps;
  static_assert(width * static_cast<int>(sizeof(T)) % 4 == 0 && warp_size % height == 0 &&
                    tile_cols % unit_cols == 0 && warps % parts == 0 &&
                    (tile_rows / height * parts) % warps == 0,
                "the rows pass's units tile the tile: blocks of whole words whose rows divide a "
                "warp, the same number of units for every warp");

  /// The shared tile's word index of word `word` of tile row `row`: rows of tile_words words,
  /// each 16-byte chunk's index XOR-ed with row % 8. The rows pass stores 16-byte chunks of up to
  /// 8 rows at one column in a phase (B×B units), the columns pass loads 32 consecutive words of
  /// one row: with the swizzle both fall in 32 distinct banks (the host test checks every warp's
  /// accesses with these functions).
  BLOCKSCALE_HOST_DEVICE static constexpr int tile_word(int row, int word) noexcept {
    return row * tile_words + (word ^ ((row % 8) << 2));
  }
  /// The rows pass: the tile row of lane `lane` of warp `w` in the warp's unit i, and its first
  /// column (a multiple of 16 bytes).
  BLOCKSCALE_HOST_DEVICE static constexpr int rows_pass_row(int w, int lane, int i) noexcept {
    return w / parts * height + i * (warps / parts * height) + lane % height;
  }
  BLOCKSCALE_HOST_DEVICE static constexpr int rows_pass_col(int w, int lane) noexcept {
    return w % parts * unit_cols + lane / height * width;
  }
  /// The columns pass: the tile word of lane `lane` of warp `w`, and the first tile row of its
  /// k-th block of B rows (B the columnwise output's block size).
  BLOCKSCALE_HOST_DEVICE static constexpr int columns_pass_word(int w, int lane) noexcept {
    return (w * warp_size + lane) % tile_words;
  }
  BLOCKSCALE_HOST_DEVICE static constexpr int columns_pass_row(int w, int lane, int k,
                                                               int b) noexcept {
    return (w * warp_size + lane) / tile_words * column_rows + k * b;
  }

  struct shared_storage {
    std::uint32_t tile[transposes ? tile_rows * tile_words : 1];
    detail::factor_entry row_factors[RowOutput::enabled ? 256 : 1];
    detail::factor_entry column_factors[ColumnOutput::enabled ? 256 : 1];
  };

  /// What each lane keeps across tiles: the tile it works on (the same in every lane) and its
  /// counters (the general case only).
  template <class Warp>
  struct warp_state {
    lanes<Warp, detail::lane_counts> row_counts;
    lanes<Warp, detail::lane_counts> column_counts;
    std::uint32_t tile_row = 0, tile_col = 0;   ///< this step's tile
    std::uint32_t step_rows = 0, step_cols = 0; ///< tiles from one step to the next: the grid
    bool full = false;                          ///< this step's tile is inside the matrix
  };

  matrix_view<const T> x;
  RowOutput rowwise{};
  ColumnOutput columnwise{};
  std::uint32_t* done = nullptr;
  Completion completion{};
  /// Whether x's rows start 16-byte aligned (data and ld): then full tiles take 16-byte loads.
  /// Always true in the common case (the launcher sends misaligned input to the general one).
  bool aligned = true;

  BLOCKSCALE_HOST_DEVICE std::size_t tiles_across() const noexcept {
    return (x.cols() + tile_cols - 1) / tile_cols;
  }
  BLOCKSCALE_HOST_DEVICE std::size_t tiles_down() const noexcept {
    return (x.rows() + tile_rows - 1) / tile_rows;
  }
  BLOCKSCALE_HOST_DEVICE std::size_t tiles() const noexcept {
    return tiles_across() * tiles_down();
  }
  /// Tiles CTA `cta` quantizes: cta.index, cta.index + cta.count, ... (32-bit: the launcher keeps
  /// the tile count below 2^31).
  BLOCKSCALE_HOST_DEVICE int steps(cta_coord cta) const noexcept {
    const auto total = static_cast<std::uint32_t>(tiles());
    return cta.index < total ? static_cast<int>((total - cta.index + cta.count - 1) / cta.count)
                             : 0;
  }

  template <class Warp>
  BLOCKSCALE_HOST_DEVICE void begin(Warp& warp, cta_coord cta, shared_storage& shared,
                                    warp_state<Warp>& state) const {
    warp.each([&](int lane) {
      const int code = warp.index() * warp_size + lane; // 256 threads: one code each
      if constexpr (RowOutput::enabled)
        shared.row_factors[code] = factor_of<typename RowOutput::format>(rowwise, code);
      if constexpr (ColumnOutput::enabled)
        shared.column_factors[code] = factor_of<typename ColumnOutput::format>(columnwise, code);
      state.row_counts[lane] = {};
      state.column_counts[lane] = {};
    });
    // The first tile, and the step between a CTA's tiles, in tile rows and columns: one division
    // per CTA rather than one per tile.
    const std::uint32_t across =
        tiles_across() == 0 ? 1u : static_cast<std::uint32_t>(tiles_across());
    state.tile_row = cta.index / across;
    state.tile_col = cta.index % across;
    state.step_rows = cta.count / across;
    state.step_cols = cta.count % across;
  }

  template <int Phase, class Warp>
  BLOCKSCALE_HOST_DEVICE void step(Warp& warp, cta_coord cta, shared_storage& shared,
                                   warp_state<Warp>& state, int step_index) const {
    const std::size_t r0 = static_cast<std::size_t>(state.tile_row) * tile_rows;
    const std::size_t c0 = static_cast<std::size_t>(state.tile_col) * tile_cols;
    if constexpr (Phase == 0) {
      state.full = (!general || aligned) && r0 + tile_rows <= x.rows() &&
                   c0 + static_cast<std::size_t>(tile_cols) <= x.cols();
      rows_pass(warp, shared, state, r0, c0, state.full);
    } else if constexpr (Phase == 1) {
      columns_pass(warp, shared, state, r0, c0, state.full);
    }
    if constexpr (Phase + 1 == loop_phases) { // the next tile of this CTA
      if constexpr (general) {
        // After its last tile each warp adds its counters to memory, so that they are all there
        // at the barrier before `end`, whose last CTA runs the completion action.
        if (step_index + 1 == steps(cta)) {
          if constexpr (RowOutput::enabled)
            detail::publish_counts(warp, state.row_counts, rowwise.stats);
          if constexpr (ColumnOutput::enabled)
            detail::publish_counts(warp, state.column_counts, columnwise.stats);
        }
      }
      const auto across = static_cast<std::uint32_t>(tiles_across());
      state.tile_row += state.step_rows;
      state.tile_col += state.step_cols;
      if (state.tile_col >= across) {
        state.tile_col -= across;
        state.tile_row += 1;
      }
    }
  }

  template <class Warp>
  BLOCKSCALE_HOST_DEVICE void end(Warp& warp, cta_coord cta, shared_storage&,
                                  warp_state<Warp>& state) const {
    (void)state;
    if constexpr (RowOutput::enabled)
      finish_output(warp, cta, rowwise);
    if constexpr (ColumnOutput::enabled)
      finish_output(warp, cta, columnwise);
    if constexpr (general)
      detail::complete_last_cta(warp, cta, done, completion);
  }

private:
  /// The scales in force: the params', or (general case) those a device policy published.
  template <class Output>
  BLOCKSCALE_HOST_DEVICE static float decode_scale_of(const Output& output) noexcept {
    if constexpr (general)
      if (output.scales != nullptr)
        return output.scales->decode_scale;
    return output.params.decode_scale;
  }
  template <class Output>
  BLOCKSCALE_HOST_DEVICE static float multiplier_of(const Output& output) noexcept {
    if constexpr (general)
      if (output.scales != nullptr)
        return output.scales->scale_multiplier;
    return output.params.scale_multiplier;
  }

  template <class Format, class Output>
  BLOCKSCALE_HOST_DEVICE static detail::factor_entry factor_of(const Output& output,
                                                               int code) noexcept {
    const auto scale =
        static_cast<float>(Format::scale_type::from_bits(static_cast<std::uint8_t>(code)));
    return {codec::encode_factor(scale, decode_scale_of(output)),
            codec::keeps_elements(scale) ? ~0u : 0u};
  }

  /// The decode scale (thread 0 of the grid) and the tensor-core layout's padding.
  template <class Output, class Warp>
  BLOCKSCALE_HOST_DEVICE void finish_output(Warp& warp, cta_coord cta, const Output& output) const {
    const quantize_params params = output.effective_params();
    const auto& out = output.view;
    const bool padded = general && params.shape.layout == scale_layout::tensor_core;
    warp.each([&](int lane) {
      const std::size_t thread =
          static_cast<std::size_t>(cta.index) * threads + warp.index() * warp_size + lane;
      if (thread == 0)
        *out.decode_scale_data() = params.decode_scale;
      if (!padded)
        return;
      // 32-bit offsets: the launcher keeps tensor-core scale storage below 2^32 bytes.
      const auto rows = static_cast<std::uint32_t>(out.rows());
      const auto blocks = static_cast<std::uint32_t>(out.blocks_per_row());
      const std::size_t count = tensor_core_padding_count(rows, blocks);
      for (std::size_t i = thread; i < count; i += static_cast<std::size_t>(cta.count) * threads)
        out.scales()[tensor_core_padding_offset<std::uint32_t>(static_cast<std::uint32_t>(i), rows,
                                                               blocks)] = 0;
    });
  }

  // ---- a lane's block ----------------------------------------------------------------------

  /// Where a lane's block goes: quantized row r and first column k, and (computed from the tile's
  /// origin once per tile) the addresses of its element bytes and row-major scale, and its first
  /// element's stochastic-rounding index.
  struct block_at {
    std::size_t r, k;
    std::uint8_t* elements;
    std::uint8_t* scale;
    std::uint64_t index;
  };

  /// Where the tile's block (r0 + i, k0 + j) of `out` goes, for its quantized rows and columns
  /// (i, j: offsets inside the tile; every address is the tile's plus an offset that does not
  /// change between tiles).
  template <class Format>
  struct tile_origin {
    std::size_t r0 = 0, k0 = 0;
    std::uint8_t* elements = nullptr; ///< of (r0, k0)
    std::uint8_t* scales = nullptr;   ///< row-major, of (r0, k0 / B)
    std::uint64_t index = 0;          ///< of (r0, k0)
    std::size_t row_bytes = 0, blocks_per_row = 0, padded_cols = 0;

    tile_origin() = default;
    BLOCKSCALE_HOST_DEVICE tile_origin(const quantized_view<Format>& out, std::size_t r,
                                       std::size_t k) noexcept
        : r0(r), k0(k), elements(out.row(r) + codec::element_bytes<Format>(k)),
          scales(out.scales() + r * out.blocks_per_row() + k / Format::block_size),
          index(codec::random_index(r, k, out.padded_cols())), row_bytes(out.row_bytes()),
          blocks_per_row(out.blocks_per_row()), padded_cols(out.padded_cols()) {}

    /// The offsets of the tile's block (i, j) from the origin, in element bytes, scales and
    /// stochastic-rounding indices. Offsets add up: a lane's block is the sum of a part that
    /// stays the same over its blocks and one that is the same in every lane (a loop's step), so
    /// that each block costs a few additions rather than multiplications.
    struct offsets {
      std::size_t elements, scale, index;
    };
    BLOCKSCALE_HOST_DEVICE offsets offsets_of(int i, int j) const noexcept {
      const auto row = static_cast<std::size_t>(i), col = static_cast<std::size_t>(j);
      return {row * row_bytes + codec::element_bytes<Format>(col),
              row * blocks_per_row + col / Format::block_size, row * padded_cols + col};
    }
    /// Block (i, j) of the tile.
    BLOCKSCALE_HOST_DEVICE block_at at(int i, int j) const noexcept {
      const offsets o = offsets_of(i, j);
      return {r0 + static_cast<std::size_t>(i), k0 + static_cast<std::size_t>(j),
              elements + o.elements, scales + o.scale, index + o.index};
    }
  };

  /// A lane's block moved by `step` rows and `columns` columns of the tile (the same in every
  /// lane: one addition per address).
  template <class Origin>
  BLOCKSCALE_HOST_DEVICE static block_at moved(const block_at& at, const Origin& origin, int rows,
                                               int columns) noexcept {
    const typename Origin::offsets o = origin.offsets_of(rows, columns);
    return {at.r + static_cast<std::size_t>(rows), at.k + static_cast<std::size_t>(columns),
            at.elements + o.elements, at.scale + o.scale, at.index + o.index};
  }

  /// The B values of a lane's block as floats, with the two things the packed words give cheaply:
  /// their amax pattern and (E2M1) their sign nibbles.
  template <int B>
  struct block_values {
    float value[B];
    std::uint32_t amax;
    std::uint32_t signs[(B + 7) / 8];

    /// Block values from the words of one input row (consecutive values, the first in the low
    /// half for 16-bit input).
    template <int N>
    BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE void
    from_row_words(const std::uint32_t (&w)[N]) noexcept {
      static_assert(N * per_word == B, "a block's words");
      if constexpr (sizeof(T) == 4) {
        std::uint32_t acc = 0;
        BLOCKSCALE_UNROLL
        for (int j = 0; j < B; ++j) {
          value[j] = blockscale::detail::bit_cast<float>(w[j]);
          acc = codec::amax_bits(acc, value[j]);
        }
        amax = acc;
        BLOCKSCALE_UNROLL
        for (int g = 0; g < B / 8; ++g)
          signs[g] = codec::e2m1_signs_32bit(w + 8 * g);
      } else {
        BLOCKSCALE_UNROLL
        for (int j = 0; j < B; ++j)
          value[j] = detail::widen_half<T>(w[j / 2], j % 2);
        amax = detail::amax_bits_16bit<T, N>(w);
        BLOCKSCALE_UNROLL
        for (int g = 0; g < B / 8; ++g)
          signs[g] = codec::e2m1_signs_16bit(w + 4 * g);
      }
    }

    /// Block values from B words down one column of the tile: word j holds row j of every column
    /// in it; this block is column h of them, whose amax pattern the caller gives.
    BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE void
    from_column_words(const std::uint32_t (&w)[B], int h, std::uint32_t column_amax) noexcept {
      if constexpr (sizeof(T) == 4) {
        (void)h;
        (void)column_amax;
        from_row_words(w);
      } else {
        BLOCKSCALE_UNROLL
        for (int j = 0; j < B; ++j)
          value[j] = detail::widen_half<T>(w[j], h);
        amax = column_amax;
        BLOCKSCALE_UNROLL
        for (int g = 0; g < B / 8; ++g) {
          // Sign of row j: bit 15 (h = 0) or 31 (h = 1) of word j; rows 8g .. 8g + 7.
          const std::uint32_t* r = w + 8 * g;
          const std::uint32_t pick = h == 0 ? 0x00D9u : 0x00FBu; // [row a, row b] repeated
          const std::uint32_t even = blockscale::detail::byte_permute(
              blockscale::detail::byte_permute(r[0], r[2], pick),
              blockscale::detail::byte_permute(r[4], r[6], pick), 0x5410u);
          const std::uint32_t odd = blockscale::detail::byte_permute(
              blockscale::detail::byte_permute(r[1], r[3], pick),
              blockscale::detail::byte_permute(r[5], r[7], pick), 0x5410u);
          signs[g] = blockscale::detail::interleave_signs(even, odd);
        }
      }
    }

    /// After the Hadamard transform the values change: amax and signs from them.
    BLOCKSCALE_HOST_DEVICE void transform(const hadamard16& h) noexcept {
      if constexpr (B % hadamard16::size == 0) {
        BLOCKSCALE_UNROLL
        for (int g = 0; g < B; g += hadamard16::size)
          h.forward(value + g, value + g);
        std::uint32_t bits[B];
        std::uint32_t acc = 0;
        BLOCKSCALE_UNROLL
        for (int j = 0; j < B; ++j) {
          bits[j] = blockscale::detail::bit_cast<std::uint32_t>(value[j]);
          acc = codec::amax_bits(acc, value[j]);
        }
        amax = acc;
        BLOCKSCALE_UNROLL
        for (int g = 0; g < B / 8; ++g)
          signs[g] = codec::e2m1_signs_32bit(bits + 8 * g);
      }
    }
  };

  // ---- the rows pass ----------------------------------------------------------------------

  /// The rows pass of one tile (see the class comment); `full`: inside the matrix and aligned,
  /// else ragged (loads value by value, with zeros past the matrix, and stores of the blocks that
  /// exist). A unit is `height` rows × 32 / height lanes per row, each lane `width` consecutive
  /// values: a rowwise output's B × B (a lane per block; the B rows of a B×B tile in B consecutive
  /// lanes), or, for a columnwise output alone, a whole tile row in 16-byte chunks. All of a
  /// warp's loads are issued before its first block is quantized.
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE void rows_pass(Warp& warp, shared_storage& shared, warp_state<Warp>& state,
                                        std::size_t r0, std::size_t c0, bool full) const {
    constexpr int unit_step = warps / parts * height; // rows from one of a warp's units to the next
    const int first_row = rows_pass_row(warp.index(), 0, 0);
    const int first_col = rows_pass_col(warp.index(), 0);
    // Every load of the tile first (one test of `full` for them all), then the blocks.
    lanes<Warp, detail::word_array<unit_words>> w[units_per_warp];
    if (full) {
      const T* tile = x.data() + (r0 * x.ld() + c0);
      warp.each([&](int lane) {
        const T* from = tile + (static_cast<std::size_t>(first_row + lane % height) * x.ld() +
                                static_cast<std::size_t>(first_col + lane / height * width));
        BLOCKSCALE_UNROLL
        for (int i = 0; i < units_per_warp; ++i)
          load_row_words(from + static_cast<std::size_t>(i * unit_step) * x.ld(), w[i][lane].w);
      });
    } else {
      warp.each([&](int lane) {
        BLOCKSCALE_UNROLL
        for (int i = 0; i < units_per_warp; ++i)
          load_words_checked(
              r0 + static_cast<std::size_t>(first_row + i * unit_step + lane % height),
              c0 + static_cast<std::size_t>(first_col + lane / height * width), w[i][lane].w);
      });
    }
    if constexpr (transposes) {
      warp.each([&](int lane) {
        BLOCKSCALE_UNROLL
        for (int i = 0; i < units_per_warp; ++i)
          store_words(shared.tile, rows_pass_row(warp.index(), lane, i),
                      rows_pass_col(warp.index(), lane) / per_word, w[i][lane].w);
      });
    }
    if constexpr (RowOutput::enabled) {
      constexpr int b = RowOutput::block_size;
      using row_origin = tile_origin<typename RowOutput::format>;
      const row_origin origin(rowwise.view, r0, c0);
      lanes<Warp, block_at> first_block; // the lane's block in the warp's first unit
      warp.each([&](int lane) {
        first_block[lane] = origin.at(first_row + lane % b, first_col + lane / b * b);
      });
      BLOCKSCALE_UNROLL
      for (int i = 0; i < units_per_warp; ++i) {
        const int unit_row = first_row + i * unit_step;
        lanes<Warp, block_values<b>> v;
        lanes<Warp, std::uint32_t> amax[1];
        warp.each([&](int lane) {
          v[lane].from_row_words(w[i][lane].w);
          if constexpr (general) {
            if (rowwise.params.shape.hadamard)
              v[lane].transform(rowwise.params.shape.transform);
          }
          amax[0][lane] = v[lane].amax;
        });
        tile_amax(warp, rowwise.params, amax, b); // a B×B tile's rows: B consecutive lanes
        quantize_blocks(
            warp, rowwise, shared.row_factors, state.row_counts, v, amax[0], full,
            [&](int lane) { return moved(first_block[lane], origin, unit_row - first_row, 0); });
      }
    }
  }

  /// N words into the shared tile's row `row` from word `word`, 16 bytes at a time where N
  /// allows (`word` is then a multiple of 4, and the swizzle keeps each 16-byte chunk whole).
  template <int N>
  BLOCKSCALE_HOST_DEVICE static void store_words(std::uint32_t* tile, int row, int word,
                                                 const std::uint32_t (&from)[N]) noexcept {
    if constexpr (N % 4 == 0) {
      BLOCKSCALE_UNROLL
      for (int k = 0; k < N; k += 4)
        detail::copy16(tile + tile_word(row, word + k), from + k);
    } else {
      BLOCKSCALE_UNROLL
      for (int k = 0; k < N; ++k)
        tile[tile_word(row, word + k)] = from[k];
    }
  }

  /// N words of input from `from` (16-byte aligned where N is a multiple of 4, else 4-byte).
  template <int N>
  BLOCKSCALE_HOST_DEVICE static void load_row_words(const T* from, std::uint32_t (&w)[N]) noexcept {
    if constexpr (N % 4 == 0) {
      const auto* bytes = reinterpret_cast<const unsigned char*>(from);
      BLOCKSCALE_UNROLL
      for (int k = 0; k < N; k += 4)
        detail::copy16(w + k, bytes + 4 * k);
    } else {
      const auto* words = reinterpret_cast<const std::uint32_t*>(from);
      BLOCKSCALE_UNROLL
      for (int k = 0; k < N; ++k)
        w[k] = words[k];
    }
  }

  /// The N words of x's row r from column c, value by value, zeros past the matrix.
  template <int N>
  BLOCKSCALE_HOST_DEVICE void load_words_checked(std::size_t r, std::size_t c,
                                                 std::uint32_t (&w)[N]) const noexcept {
    BLOCKSCALE_UNROLL
    for (int k = 0; k < N; ++k) {
      std::uint32_t word = 0;
      BLOCKSCALE_UNROLL
      for (int h = 0; h < per_word; ++h) {
        const std::size_t col = c + static_cast<std::size_t>(k * per_word + h);
        if (r < x.rows() && col < x.cols()) {
          std::uint32_t bits = 0;
          if constexpr (sizeof(T) == 4)
            bits = blockscale::detail::bit_cast<std::uint32_t>(x(r, col));
          else
            bits = x(r, col).bits();
          word |= bits << (16 * h);
        }
      }
      w[k] = word;
    }
  }

  // ---- the columns pass -------------------------------------------------------------------

  template <class Warp>
  BLOCKSCALE_HOST_DEVICE void columns_pass(Warp& warp, const shared_storage& shared,
                                           warp_state<Warp>& state, std::size_t r0, std::size_t c0,
                                           bool full) const {
    if constexpr (transposes) {
      constexpr int b = ColumnOutput::block_size;
      static_assert(column_rows % b == 0, "a column block lies inside the 32 rows a lane reads");
      static_assert(b % 8 == 0, "a column block starts on a row whose swizzle is zero");
      const quantize_params& params = columnwise.params;
      // Columnwise, quantized row i is input column c0 + i and its K runs down the rows.
      using column_origin = tile_origin<typename ColumnOutput::format>;
      const column_origin origin(columnwise.view, c0, r0);
      lanes<Warp, block_at> first_block; // the lane's first block: k = 0, h = 0
      warp.each([&](int lane) {
        first_block[lane] = origin.at(columns_pass_word(warp.index(), lane) * per_word,
                                      columns_pass_row(warp.index(), lane, 0, b));
      });
      BLOCKSCALE_UNROLL
      for (int k = 0; k < column_rows / b; ++k) {
        lanes<Warp, detail::word_array<b>> w; // word j: row j of the block, every column of it
        lanes<Warp, std::uint32_t> amax[per_word];
        warp.each([&](int lane) {
          const int word = columns_pass_word(warp.index(), lane);
          const int row = columns_pass_row(warp.index(), lane, k, b);
          // row is a multiple of 8 (of b), so row + j swizzles as j % 8 does: tile_word(row + j,
          // word) is a constant row offset from one of eight words, not b addresses to keep.
          int swizzled[8];
          BLOCKSCALE_UNROLL
          for (int s = 0; s < 8; ++s)
            swizzled[s] = row * tile_words + tile_word(s, word);
          BLOCKSCALE_UNROLL
          for (int j = 0; j < b; ++j)
            w[lane].w[j] = shared.tile[swizzled[j % 8] + (j - j % 8) * tile_words];
          if constexpr (per_word == 2) {
            detail::amax_bits_of_halves<T, b>(w[lane].w, amax[0][lane], amax[per_word - 1][lane]);
          } else {
            block_values<b> v;
            v.from_row_words(w[lane].w);
            amax[0][lane] = v.amax;
          }
          if constexpr (general) {
            // The amaxes of the transformed columns (unrolled: amax[h] stays in registers).
            if (params.shape.hadamard) {
              BLOCKSCALE_UNROLL
              for (int h = 0; h < per_word; ++h) {
                block_values<b> v;
                v.from_column_words(w[lane].w, h, 0);
                v.transform(params.shape.transform);
                amax[h][lane] = v.amax;
              }
            }
          }
        });
        // A B×B tile spans B columns: B / per_word lanes, every column of their words.
        tile_amax(warp, params, amax, b / per_word);
        BLOCKSCALE_UNROLL
        for (int h = 0; h < per_word; ++h) {
          lanes<Warp, block_values<b>> v;
          lanes<Warp, std::uint32_t> column_amax;
          warp.each([&](int lane) {
            column_amax[lane] = h == 0 ? amax[0][lane] : amax[per_word - 1][lane];
            v[lane].from_column_words(w[lane].w, h, column_amax[lane]);
            if constexpr (general) {
              if (params.shape.hadamard)
                v[lane].transform(params.shape.transform);
            }
          });
          quantize_blocks(warp, columnwise, shared.column_factors, state.column_counts, v,
                          column_amax, full,
                          [&](int lane) { return moved(first_block[lane], origin, h, k * b); });
        }
      }
    }
  }

  /// For B×B tiles (general case), every block's amax becomes the tile's: the max over the
  /// `tile_lanes` lanes that hold it and over the `Count` blocks each lane holds.
  template <class Warp, class Amax, int Count>
  BLOCKSCALE_HOST_DEVICE void tile_amax(Warp& warp, const quantize_params& params,
                                        Amax (&amax)[Count], int tile_lanes) const {
    if constexpr (general) {
      if (params.shape.blocks == block_shape::tile) {
        lanes<Warp, std::uint32_t> most;
        warp.each([&](int lane) {
          most[lane] = 0;
          BLOCKSCALE_UNROLL
          for (int h = 0; h < Count; ++h)
            most[lane] = amax[h][lane] > most[lane] ? amax[h][lane] : most[lane];
        });
        warp.max_over(most, tile_lanes);
        BLOCKSCALE_UNROLL
        for (int h = 0; h < Count; ++h)
          warp.each([&](int lane) { amax[h][lane] = most[lane]; });
      }
    } else {
      (void)warp;
      (void)params;
      (void)amax;
      (void)tile_lanes;
    }
  }

  // ---- quantizing the lanes' blocks -------------------------------------------------------

  /// Quantizes the lanes' blocks `v`, whose amaxes (a tile's, for B×B tiles) are `amax`, into
  /// `output` and stores them; `where(lane)` places a lane's block. `full`: every block lies
  /// inside the output.
  template <class Output, class Warp, class Counts, class Values, class Amax, class Where>
  BLOCKSCALE_HOST_DEVICE void
  quantize_blocks(Warp& warp, const Output& output, const detail::factor_entry* factors,
                  Counts& counts, const Values& v, const Amax& amax, bool full, Where where) const {
    using format = typename Output::format;
    using scale_rounding = typename Output::scale_rounding;
    using element_rounding = typename Output::element_rounding;
    constexpr int B = format::block_size;
    const quantize_params& params = output.params;
    const quantized_view<format>& out = output.view;
    const float m = multiplier_of(output);
    warp.each([&](int lane) {
      const block_at at = where(lane);
      if (!full) {
        if (at.r >= out.rows() || at.k >= out.cols())
          return; // no block here
      }
      const std::uint8_t code = codec::scale_code<typename format::scale_type>(
          codec::amax_value(amax[lane]) * m, scale_rounding{});
      const detail::factor_entry entry = factors[code];
      if constexpr (general)
        out.scales()[out.scale_index(at.r, at.k / B)] = code;
      else
        *at.scale = code;
      encode_and_store<format, element_rounding>(v[lane], entry, params, at.elements, at.index);
      if constexpr (general) {
        if (output.stats != nullptr &&
            (params.shape.blocks != block_shape::tile || at.r % B == 0)) {
          quantize_stats one;
          const std::uint32_t a = amax[lane];
          codec::count_blocks<format>(one, &a, &code, 1, m, scale_rounding{});
          detail::lane_counts& c = counts[lane];
          c.blocks += 1;
          c.saturated += static_cast<std::uint32_t>(one.saturated_scales);
          c.zero += static_cast<std::uint32_t>(one.zero_scales);
          c.nan += static_cast<std::uint32_t>(one.nan_scales);
          c.amax_bits = a > c.amax_bits ? a : c.amax_bits;
        }
      }
    });
  }

  /// Encodes a block with its factor and stores its packed bytes at `to` (aligned to
  /// min(16, block bytes)). `index` is the block's first element's stochastic-rounding index.
  template <class Format, class ElementRounding, int B>
  BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE static void
  encode_and_store(const block_values<B>& v, detail::factor_entry entry,
                   const quantize_params& params, std::uint8_t* to, std::uint64_t index) noexcept {
    constexpr bool stochastic = std::is_same<ElementRounding, round_stochastic>::value;
    constexpr bool e2m1 =
        std::is_same<typename Format::element_type::format, e2m1_format>::value && B % 8 == 0;
    constexpr int groups = B / 16 > 0 ? B / 16 : 1; // Philox blocks of the block's elements
    uint4x32 random[stochastic ? groups : 1];
    std::uint32_t first_in_block = 0;
    if constexpr (stochastic) {
      const uint2x32 key = blockscale::detail::philox_key(params.seed);
      first_in_block = B >= 16 ? 0u : static_cast<std::uint32_t>(index % 16);
      for (int g = 0; g < groups; ++g)
        random[g] =
            philox4x32_10::generate(blockscale::detail::philox_counter(
                                        index / 16 + static_cast<std::uint64_t>(g), params.offset),
                                    key);
    }
    if constexpr (e2m1) {
      alignas(16) std::uint32_t packed[B / 8];
      BLOCKSCALE_UNROLL
      for (int g = 0; g < B / 8; ++g) {
        std::uint32_t nibbles[8];
        BLOCKSCALE_UNROLL
        for (int j = 0; j < 8; ++j) {
          const float y = v.value[8 * g + j] * entry.factor;
          if constexpr (stochastic)
            nibbles[j] = codec::e2m1_magnitude_stochastic(
                y, detail::rounding_byte<B>(random, first_in_block, 8 * g + j));
          else
            nibbles[j] = codec::e2m1_nearest_biased(y);
        }
        const std::uint32_t magnitudes =
            stochastic ? codec::e2m1_pack(nibbles) : codec::e2m1_pack_biased(nibbles);
        packed[g] = (magnitudes + v.signs[g]) & entry.keep; // the sign bits are free in it
      }
      detail::store_bytes<B / 2>(to, reinterpret_cast<const std::uint8_t*>(packed));
    } else {
      std::uint8_t codes[B];
      if constexpr (stochastic) {
        std::uint32_t bits[B];
        for (int j = 0; j < B; ++j)
          bits[j] = detail::rounding_byte<B>(random, first_in_block, j) << 24;
        codec::encode_block<Format>(v.value, entry.factor, entry.keep != 0,
                                    codec::stochastic_rounding_from{bits}, codes);
      } else {
        codec::encode_block<Format>(v.value, entry.factor, entry.keep != 0,
                                    codec::same_rounding<ElementRounding>{{}}, codes);
      }
      alignas(16) std::uint8_t bytes[codec::element_bytes<Format>(B)];
      codec::store_block<Format>(codes, bytes);
      detail::store_bytes<static_cast<int>(codec::element_bytes<Format>(B))>(to, bytes);
    }
  }
};

} // namespace cuda
} // namespace v0
} // namespace blockscale
