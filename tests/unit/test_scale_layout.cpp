// Scale layouts: the tensor-core 128×4 swizzle against its published check values, as a
// bijection onto its padded storage, and as a round trip through quantization.
#include <blockscale/blockscale.hpp>

#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "catch.hpp"
#include "quantized_bytes.hpp"

using namespace blockscale;

TEST_CASE("tensor-core scale offsets match the published check values", "[scale-layout]") {
  // nvmath-python's documentation, M = K = 128 with NVFP4 (8 blocks per row): (5, 2) -> 82 and
  // (5, 5) -> 593 (check values from the nvmath-python docs).
  CHECK(tensor_core_scale_offset(5, 2, 8) == 82);
  CHECK(tensor_core_scale_offset(5, 5, 8) == 593);
  CHECK(scale_offset(scale_layout::tensor_core, 5, 2, 8) == 82);
  CHECK(scale_offset(scale_layout::row_major, 5, 2, 8) == 5 * 8 + 2);
}

TEST_CASE("the tensor-core layout is a bijection onto its padded storage", "[scale-layout]") {
  for (std::size_t rows : {1u, 100u, 128u, 129u, 300u}) {
    for (std::size_t blocks : {1u, 3u, 4u, 5u, 8u, 13u}) {
      const std::size_t size = scale_storage_size(scale_layout::tensor_core, rows, blocks);
      CHECK(size == (rows + 127) / 128 * 128 * ((blocks + 3) / 4 * 4));
      std::set<std::size_t> seen;
      // Every logical (m, kb) of the padded shape lands on its own byte inside the storage.
      for (std::size_t m = 0; m < (rows + 127) / 128 * 128; ++m)
        for (std::size_t kb = 0; kb < (blocks + 3) / 4 * 4; ++kb) {
          const std::size_t offset = tensor_core_scale_offset(m, kb, blocks);
          REQUIRE(offset < size);
          seen.insert(offset);
        }
      CHECK(seen.size() == size);
    }
  }
}

TEST_CASE("quantization writes the same scales in both layouts", "[scale-layout]") {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::size_t rows = 130, cols = 100; // 7 blocks per row: padding in both directions
  std::vector<float> x(rows * cols);
  for (auto& v : x)
    v = normal(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 20) - 10);
  const matrix_view<const float> view(x.data(), rows, cols);
  quantize_options options;
  const auto row_major = quantize<nvfp4>(view, options);
  options.layout = scale_layout::tensor_core;
  const auto swizzled = quantize<nvfp4>(view, options);
  CHECK(element_bytes(swizzled) == element_bytes(row_major));
  REQUIRE(scale_bytes(swizzled).size() == 256 * 8);
  std::vector<std::uint8_t> unswizzled(rows * 7);
  for (std::size_t m = 0; m < rows; ++m)
    for (std::size_t kb = 0; kb < 7; ++kb) {
      CHECK(swizzled.block_scale(m, kb * 16).bits() == row_major.block_scale(m, kb * 16).bits());
      unswizzled[m * 7 + kb] = scale_bytes(swizzled)[tensor_core_scale_offset(m, kb, 7)];
    }
  CHECK(unswizzled == scale_bytes(row_major));
  // The padding of the swizzled storage holds zero scales.
  std::size_t nonzero_padding = 0;
  for (std::size_t m = 0; m < 256; ++m)
    for (std::size_t kb = 0; kb < 8; ++kb)
      if ((m >= rows || kb >= 7) && scale_bytes(swizzled)[tensor_core_scale_offset(m, kb, 7)] != 0)
        ++nonzero_padding;
  CHECK(nonzero_padding == 0);
}
