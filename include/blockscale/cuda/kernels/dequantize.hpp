/// \file cuda/kernels/dequantize.hpp
/// The dequantize kernel as a CTA program (cuda/warp.hpp): every value is the codec's
/// (q · S_b) · s_dec in float (codec::decode_value), rounded to the output type — what the host's
/// `dequantize` writes, bit for bit. A lane owns one block: one vector load of its packed bytes, B
/// decodes, and vector stores of the block's outputs where the address allows; a warp covers 32
/// consecutive blocks of a row. Units of 32 blocks are taken grid-stride.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../../block/codec.hpp"
#include "../../block/matrix_view.hpp"
#include "../../block/quantized_view.hpp"
#include "../../config.hpp"
#include "../memory.hpp"
#include "../warp.hpp"

namespace blockscale {
inline namespace v0 {
namespace cuda {

/// Decodes the first `cols` columns of `q` (q.cols(), or q.padded_cols() to include the padding)
/// into `out` (float, bfloat16 or float16).
template <class BlockFormat, class T>
struct dequantize_program {
  static constexpr int warps = 8;
  static constexpr int threads = warps * warp_size;
  static constexpr int phases = 1;
  static constexpr int b = BlockFormat::block_size;
  static constexpr int element_bytes = static_cast<int>(codec::element_bytes<BlockFormat>(b));

  struct shared_storage {
    int unused;
  };

  const_quantized_view<BlockFormat> q;
  matrix_view<T> out;
  std::size_t cols = 0;

  BLOCKSCALE_HOST_DEVICE std::size_t blocks() const noexcept { return (cols + b - 1) / b; }
  BLOCKSCALE_HOST_DEVICE std::size_t units_across() const noexcept {
    return (blocks() + warp_size - 1) / warp_size;
  }
  BLOCKSCALE_HOST_DEVICE std::size_t units() const noexcept { return q.rows() * units_across(); }

  template <int Phase, class Warp>
  BLOCKSCALE_HOST_DEVICE void run(Warp& warp, cta_coord cta, shared_storage&) const {
    using scale_type = typename BlockFormat::scale_type;
    const std::size_t total = units(), across = units_across();
    const float s_dec = total == 0 ? 0.0f : q.decode_scale();
    for (std::size_t unit = static_cast<std::size_t>(cta.index) * warps + warp.index();
         unit < total; unit += static_cast<std::size_t>(cta.count) * warps) {
      // 32-bit division: the launcher keeps the unit count below 2^32.
      const auto u = static_cast<std::uint32_t>(unit), a = static_cast<std::uint32_t>(across);
      const std::size_t r = u / a;
      warp.each([&](int lane) {
        const std::size_t kb =
            static_cast<std::size_t>(u % a) * warp_size + static_cast<std::size_t>(lane);
        const std::size_t c0 = kb * b;
        if (c0 >= cols)
          return;
        const float scale =
            static_cast<float>(scale_type::from_bits(q.scales()[q.scale_index(r, kb)]));
        alignas(16) std::uint8_t bytes[element_bytes];
        detail::store_bytes<element_bytes>(bytes, q.row(r) + codec::element_bytes<BlockFormat>(c0));
        alignas(16) T values[b];
        for (int j = 0; j < b; ++j)
          values[j] = static_cast<T>(codec::decode_value<BlockFormat>(
              codec::load_code<BlockFormat>(bytes, static_cast<std::size_t>(j)), scale, s_dec));
        const int valid = cols - c0 < static_cast<std::size_t>(b) ? static_cast<int>(cols - c0) : b;
        T* to = out.row(r) + c0;
        constexpr int bytes_out = b * static_cast<int>(sizeof(T));
        if (bytes_out % 16 == 0 && valid == b && detail::is_aligned(to, 16)) {
          for (int i = 0; i < bytes_out; i += 16)
            detail::copy16(reinterpret_cast<unsigned char*>(to) + i,
                           reinterpret_cast<const unsigned char*>(values) + i);
        } else {
          for (int j = 0; j < b; ++j) // unrolled and predicated: values[] stays in registers
            if (j < valid)
              to[j] = values[j];
        }
      });
    }
  }
};

} // namespace cuda
} // namespace v0
} // namespace blockscale
