// Interop with CUDA's storage types: available when cuda_fp4.h / cuda_fp8.h come first.
#if BLOCKSCALE_HAVE_CUDA_HEADERS
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#endif

#include <blockscale/blockscale.hpp>

#include <cstdint>
#include <vector>

#include "catch.hpp"

using namespace blockscale;

#if BLOCKSCALE_HAVE_CUDA_HEADERS
TEST_CASE("CUDA storage types carry the same code both ways", "[cuda-interop]") {
  for (unsigned code = 0; code < 256; ++code) {
    const auto byte = static_cast<std::uint8_t>(code);
    __nv_fp8_e4m3 cuda_e4m3;
    cuda_e4m3.__x = byte;
    CHECK(e4m3(cuda_e4m3).bits() == byte);
    CHECK(static_cast<__nv_fp8_e4m3>(e4m3::from_bits(byte)).__x == byte);
    __nv_fp8_e5m2 cuda_e5m2;
    cuda_e5m2.__x = byte;
    CHECK(e5m2(cuda_e5m2).bits() == byte);
    __nv_fp8_e8m0 cuda_e8m0;
    cuda_e8m0.__x = byte;
    CHECK(ue8m0(cuda_e8m0).bits() == byte);
    CHECK(static_cast<__nv_fp8_e8m0>(ue8m0::from_bits(byte)).__x == byte);
  }
  for (unsigned code = 0; code < 16; ++code) {
    __nv_fp4_e2m1 cuda_e2m1;
    cuda_e2m1.__x = static_cast<__nv_fp4_storage_t>(code);
    CHECK(e2m1(cuda_e2m1).bits() == code);
    CHECK(static_cast<__nv_fp4_e2m1>(e2m1::from_bits(static_cast<std::uint8_t>(code))).__x == code);
  }
}

TEST_CASE("values agree with CUDA's own decoding of the same code", "[cuda-interop]") {
  for (unsigned code = 0; code < 256; ++code) {
    const auto byte = static_cast<std::uint8_t>(code);
    __nv_fp8_e4m3 cuda_e4m3;
    cuda_e4m3.__x = byte;
    const float from_cuda = static_cast<float>(cuda_e4m3);
    const float ours = static_cast<float>(e4m3(cuda_e4m3));
    INFO("code " << code);
    if (from_cuda != from_cuda)
      CHECK(ours != ours);
    else
      CHECK(ours == from_cuda);
  }
  __nv_fp4_e2m1 six(6.0f);
  CHECK(static_cast<float>(e2m1(six)) == 6.0f);
  __nv_fp8_e8m0 eight(8.0f);
  CHECK(static_cast<float>(ue8m0(eight)) == 8.0f);
}

TEST_CASE("matrices of CUDA's __nv_bfloat16 and __half quantize like blockscale's own",
          "[cuda-interop]") {
  const std::size_t rows = 8, cols = 40;
  std::vector<__nv_bfloat16> cuda_bf16;
  std::vector<__half> cuda_half;
  std::vector<bfloat16> ours_bf16;
  std::vector<float16> ours_half;
  for (std::size_t i = 0; i < rows * cols; ++i) {
    const float x = static_cast<float>(static_cast<int>(i * 7919 % 211) - 105) / 8.0f;
    cuda_bf16.push_back(__float2bfloat16_rn(x));
    cuda_half.push_back(__float2half_rn(x));
    ours_bf16.push_back(bfloat16(cuda_bf16.back()));
    ours_half.push_back(float16(cuda_half.back()));
  }
  const auto a = quantize<nvfp4>(matrix_view<const __nv_bfloat16>(cuda_bf16.data(), rows, cols));
  const auto b = quantize<nvfp4>(matrix_view<const bfloat16>(ours_bf16.data(), rows, cols));
  CHECK(a == b);
  const auto c = quantize<ue5m3_fp4>(matrix_view<const __half>(cuda_half.data(), rows, cols));
  const auto d = quantize<ue5m3_fp4>(matrix_view<const float16>(ours_half.data(), rows, cols));
  CHECK(c == d);
}
#else
TEST_CASE("CUDA storage interop", "[cuda-interop]") {
  WARN("CUDA headers not found: interop with __nv_fp8_e4m3 and friends is not tested here");
  CHECK(convert<e4m3>(1.0f).bits() == 0x38);
}
#endif
