// The fast path's per-row bodies (host/simd.hpp), whatever this build compiled into simd::,
// against the portable bodies, bit for bit; then the fast quantizer and dequantizer built on them
// against the reference path. This file is built twice: once for baseline x86-64 (simd:: is the
// portable code, so the end-to-end checks cover the portable fast path) and once with
// -march=native (simd:: is AVX-512 where the machine has it; the build then requires it).
#include <blockscale/blockscale.hpp>

#include <cfloat>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "catch.hpp"
#include "quantized_bytes.hpp"
#include "splitmix64.hpp"

using namespace blockscale;

namespace {

std::uint32_t bits_of(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

/// Values that probe every branch of the bodies: zeros, subnormals, the E2M1 decision points and
/// their neighbours, huge values, infinities, NaNs of both signs and several payloads, normal
/// data and random bit patterns.
std::vector<float> probe_values(std::size_t n, std::uint64_t seed) {
  splitmix64 rng{seed};
  const float specials[] = {0.0f,
                            -0.0f,
                            1e-45f,
                            -1e-45f,
                            FLT_MIN,
                            FLT_MAX,
                            -FLT_MAX,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN(),
                            0.25f,
                            0.75f,
                            1.25f,
                            1.75f,
                            2.5f,
                            3.5f,
                            5.0f,
                            6.0f,
                            7.99f,
                            8.0f};
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t pick = rng.next() % 8;
    if (pick == 0) {
      x[i] = specials[rng.next() % (sizeof specials / sizeof specials[0])];
    } else if (pick == 1) {
      const float s = specials[11 + rng.next() % 10];
      x[i] = std::nextafter(s, (rng.next() & 1) != 0 ? 0.0f : 16.0f) * ((rng.next() & 1) ? -1 : 1);
    } else if (pick == 2) {
      const std::uint32_t b = rng.next_u32();
      std::memcpy(&x[i], &b, sizeof b);
    } else {
      x[i] = static_cast<float>(rng.normal() * std::exp2(rng.uniform(-8.0, 8.0)));
    }
  }
  return x;
}

template <class F>
void compare_encode_bodies(std::uint64_t seed) {
  constexpr std::size_t b = F::block_size;
  splitmix64 rng{seed};
  for (int trial = 0; trial < 40; ++trial) {
    const std::size_t blocks = 1 + rng.next() % 64;
    const std::vector<float> row = probe_values(blocks * b, seed + 100u * trial);
    std::vector<std::uint8_t> codes(blocks);
    for (auto& c : codes) // any scale code: zero, NaN, saturated and ordinary scales alike
      c = static_cast<std::uint8_t>(rng.next() % 8 == 0 ? 0 : rng.next());
    detail::factor_table table;
    table.fill<F>(static_cast<float>(std::exp2(rng.uniform(-30.0, 30.0))));
    std::vector<std::uint32_t> random(blocks * b);
    for (auto& r : random)
      r = rng.next_u32();
    const std::size_t bytes = codec::element_bytes<F>(blocks * b);
    std::vector<std::uint8_t> portable(bytes, 0xAA), simd(bytes, 0x55);
    detail::portable::encode_row_nearest<F>(row.data(), blocks, codes.data(), table,
                                            portable.data());
    detail::simd::encode_row_nearest<F>(row.data(), blocks, codes.data(), table, simd.data());
    CHECK(portable == simd);
    detail::portable::encode_row_stochastic<F>(row.data(), blocks, codes.data(), table,
                                               random.data(), portable.data());
    detail::simd::encode_row_stochastic<F>(row.data(), blocks, codes.data(), table, random.data(),
                                           simd.data());
    CHECK(portable == simd);
  }
}

template <std::size_t B>
void compare_amax_bodies(std::uint64_t seed) {
  for (int trial = 0; trial < 40; ++trial) {
    const std::size_t blocks = 1 + static_cast<std::size_t>(trial) * 3 % 64;
    const std::vector<float> row = probe_values(blocks * B, seed + trial);
    std::vector<std::uint32_t> portable(blocks), simd(blocks);
    detail::portable::row_block_amax<B>(row.data(), blocks, portable.data());
    detail::simd::row_block_amax<B>(row.data(), blocks, simd.data());
    CHECK(portable == simd);
  }
}

template <class F, class T>
void compare_dequantize_bodies(std::uint64_t seed) {
  constexpr std::size_t b = F::block_size;
  splitmix64 rng{seed};
  for (int trial = 0; trial < 40; ++trial) {
    const std::size_t count = b * (1 + rng.next() % 40) - (trial % 3 == 0 ? rng.next() % b : 0);
    const std::size_t blocks = (count + b - 1) / b;
    std::vector<std::uint8_t> bytes(codec::element_bytes<F>(blocks * b));
    for (auto& byte : bytes)
      byte = static_cast<std::uint8_t>(rng.next());
    std::vector<float> scales(blocks);
    for (auto& s : scales)
      s = static_cast<float>(F::scale_type::from_bits(static_cast<std::uint8_t>(rng.next())));
    const auto s_dec = static_cast<float>(std::exp2(rng.uniform(-40.0, 40.0)));
    std::vector<T> portable(count), simd(count);
    detail::portable::dequantize_row<F>(bytes.data(), scales.data(), count, s_dec, portable.data());
    detail::simd::dequantize_row<F>(bytes.data(), scales.data(), count, s_dec, simd.data());
    CHECK(std::memcmp(portable.data(), simd.data(), count * sizeof(T)) == 0);
  }
}

using fp4_block8 = block_format<e2m1, 8, ue4m3>;
using fp4_block48 = block_format<e2m1, 48, ue5m3>; // not a fast-path size: the reference loop

} // namespace

TEST_CASE("this build has the SIMD bodies it was configured for", "[simd]") {
  INFO("BLOCKSCALE_SIMD_AVX512 = " << BLOCKSCALE_SIMD_AVX512);
#if defined(BLOCKSCALE_TEST_EXPECT_AVX512)
  CHECK(BLOCKSCALE_SIMD_AVX512 == BLOCKSCALE_TEST_EXPECT_AVX512);
#else
  SUCCEED("no expectation set for this build");
#endif
}

TEST_CASE("block amax bodies agree", "[simd]") {
  compare_amax_bodies<2>(1);
  compare_amax_bodies<8>(2);
  compare_amax_bodies<16>(3);
  compare_amax_bodies<32>(4);
  for (std::size_t count = 0; count < 300; count += 7) {
    const std::vector<float> x = probe_values(count, 5 + count);
    CHECK(detail::portable::amax_bits(x.data(), count) == detail::simd::amax_bits(x.data(), count));
  }
}

TEST_CASE("random-bit fill bodies agree, across block-index carries", "[simd]") {
  splitmix64 rng{15};
  // Block indices whose low word wraps inside a run of 16 blocks, and ordinary ones.
  const std::uint64_t starts[] = {0,
                                  1,
                                  3,
                                  4 * 0xFFFFFFF8ull,
                                  4 * 0xFFFFFFF8ull + 2,
                                  4 * 0x1FFFFFFF0ull + 1,
                                  rng.next() >> 3,
                                  rng.next() >> 3};
  for (std::uint64_t first : starts)
    for (std::size_t count : {0u, 1u, 3u, 63u, 64u, 65u, 67u, 200u, 1000u}) {
      const std::uint64_t seed = rng.next(), offset = rng.next();
      std::vector<std::uint32_t> portable(count + 1, 0xAAAAAAAAu), simd(count + 1, 0x55555555u);
      portable[count] = simd[count] = 7; // the word after the run must stay untouched
      detail::portable::fill_random_bits(seed, offset, first, count, portable.data());
      detail::simd::fill_random_bits(seed, offset, first, count, simd.data());
      INFO("first " << first << " count " << count);
      CHECK(portable == simd);
      if (count != 0)
        CHECK(simd[count - 1] == random_bits(seed, offset, first + count - 1));
    }
}

TEST_CASE("rounding-bit fills agree with rounding_bits", "[simd]") {
  splitmix64 rng{16};
  // Block indices whose low word wraps inside a run of 16 blocks, and ordinary ones.
  const std::uint64_t starts[] = {0,
                                  1,
                                  15,
                                  16 * 0xFFFFFFF8ull,
                                  16 * 0xFFFFFFF8ull + 5,
                                  16 * 0x1FFFFFFF0ull + 1,
                                  rng.next() >> 5,
                                  rng.next() >> 5};
  for (std::uint64_t first : starts)
    for (std::size_t count : {0u, 1u, 15u, 16u, 17u, 255u, 256u, 257u, 271u, 600u, 3000u}) {
      const std::uint64_t seed = rng.next(), offset = rng.next();
      std::vector<std::uint32_t> portable(count + 1, 0xAAAAAAAAu), simd(count + 1, 0x55555555u);
      portable[count] = simd[count] = 7; // the word after the run must stay untouched
      detail::portable::fill_rounding_bits(seed, offset, first, count, portable.data());
      detail::simd::fill_rounding_bits(seed, offset, first, count, simd.data());
      INFO("first " << first << " count " << count);
      CHECK(portable == simd);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < count; ++i)
        wrong += simd[i] != rounding_bits(seed, offset, first + i);
      CHECK(wrong == 0);
      CHECK(simd[count] == 7);
    }
}

TEST_CASE("element encode bodies agree, nearest-even and stochastic", "[simd]") {
  compare_encode_bodies<nvfp4>(10);
  compare_encode_bodies<ue5m3_fp4>(11);
  compare_encode_bodies<mxfp4>(12);
  compare_encode_bodies<mxfp8>(13);
  compare_encode_bodies<fp4_block8>(14);
}

TEST_CASE("transpose bodies agree", "[simd]") {
  splitmix64 rng{20};
  for (std::size_t rows : {16u, 32u, 64u, 256u})
    for (std::size_t cols : {1u, 15u, 16u, 17u, 31u, 32u, 100u, 128u}) {
      const std::size_t ld = cols + rng.next() % 5;
      std::vector<float> tile(rows * ld);
      for (auto& v : tile)
        v = static_cast<float>(rng.normal());
      std::vector<float> portable(rows * cols), simd(rows * cols);
      detail::portable::transpose_tile(tile.data(), ld, rows, cols, portable.data());
      detail::simd::transpose_tile(tile.data(), ld, rows, cols, simd.data());
      INFO(rows << " x " << cols);
      CHECK(std::memcmp(portable.data(), simd.data(), portable.size() * sizeof(float)) == 0);
      CHECK(bits_of(portable[(cols - 1) * rows + rows - 1]) ==
            bits_of(tile[(rows - 1) * ld + cols - 1]));
    }
}

TEST_CASE("dequantize bodies agree for float, bfloat16 and float16 outputs", "[simd]") {
  compare_dequantize_bodies<nvfp4, float>(30);
  compare_dequantize_bodies<nvfp4, bfloat16>(31);
  compare_dequantize_bodies<nvfp4, float16>(32);
  compare_dequantize_bodies<mxfp4, float>(33);
  compare_dequantize_bodies<mxfp4, bfloat16>(34);
  compare_dequantize_bodies<ue5m3_fp4, float>(35);
  compare_dequantize_bodies<mxfp8, float>(36);
  compare_dequantize_bodies<fp4_block8, bfloat16>(37);
}

TEMPLATE_TEST_CASE("the fast path equals the reference path on every option", "[simd]", nvfp4,
                   ue5m3_fp4, mxfp4, mxfp8, fp4_block8, fp4_block48) {
  const std::size_t rows = 70, cols = 133, ld = 140;
  std::vector<float> x = probe_values(rows * ld, 40);
  for (std::size_t i = 0; i < x.size(); i += 3) // mostly ordinary data, some specials
    x[i] = static_cast<float>(i % 17) - 8.0f;
  std::vector<bfloat16> xb(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    xb[i] = bfloat16(x[i]);
  const matrix_view<const float> view(x.data(), rows, cols, ld);
  const matrix_view<const bfloat16> view_b(xb.data(), rows, cols, ld);
  constexpr bool hadamard_allowed = TestType::block_size % 16 == 0;
  thread_pool pool(2);
  for (bool columnwise : {false, true})
    for (block_shape shape : {block_shape::rowwise, block_shape::tile})
      for (element_rounding rounding :
           {element_rounding::nearest_even, element_rounding::stochastic})
        for (bool hadamard : {false, true}) {
          if (hadamard && !hadamard_allowed)
            continue;
          quantize_options options;
          options.columnwise = columnwise;
          options.shape = shape;
          options.rounding = rounding;
          options.hadamard = hadamard;
          options.seed = 9;
          options.offset = 4;
          options.encode_scale = 37.0f;
          options.layout = columnwise ? scale_layout::tensor_core : scale_layout::row_major;
          INFO("columnwise " << columnwise << " tile " << (shape == block_shape::tile)
                             << " stochastic " << (rounding == element_rounding::stochastic)
                             << " hadamard " << hadamard);
          const auto expected = quantize_reference<TestType>(view, options);
          const auto fast = quantize<TestType>(view, options);
          CHECK(fast == expected);
          CHECK(fast.stats().saturated_scales == expected.stats().saturated_scales);
          CHECK(fast.stats().zero_scales == expected.stats().zero_scales);
          CHECK(fast.stats().nan_scales == expected.stats().nan_scales);
          CHECK(fast.stats().blocks == expected.stats().blocks);
          CHECK(bits_of(fast.stats().amax) == bits_of(expected.stats().amax));
          quantized_matrix<TestType> pooled(quantized_shape_for(rows, cols, options));
          quantize_into(view, pooled, options, &pool);
          CHECK(pooled == expected);
          CHECK(quantize<TestType>(view_b, options) ==
                quantize_reference<TestType>(view_b, options));
          // Dequantization: every value as the codec decodes it.
          std::vector<float> out(fast.rows() * fast.padded_cols());
          dequantize_padded(fast, matrix_view<float>(out.data(), fast.rows(), fast.padded_cols()));
          std::size_t wrong = 0;
          for (std::size_t r = 0; r < fast.rows(); ++r)
            for (std::size_t c = 0; c < fast.padded_cols(); ++c)
              wrong += bits_of(out[r * fast.padded_cols() + c]) != bits_of(fast.value(r, c));
          CHECK(wrong == 0);
        }
}
