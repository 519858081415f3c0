// Device conversion and quantization logic against the host, on a GPU (skipped without one):
// every format × rounding mode × overflow policy on sampled inputs, and the per-block scale
// arithmetic of quantization. The same translation unit is compiled for sm_80, sm_90, sm_100a
// and sm_120a in CI, which proves the headers' device paths compile everywhere.
#include <blockscale/blockscale.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "catch.hpp"
#include "splitmix64.hpp"

using namespace blockscale;

namespace {

constexpr int mode_count = 7;

template <class T, class Overflow>
__host__ __device__ std::uint8_t convert_mode(float x, int mode, std::uint32_t bits) {
  switch (mode) {
  case 0:
    return convert<T>(x, round_nearest_even{}, Overflow{}).bits();
  case 1:
    return convert<T>(x, round_nearest_away{}, Overflow{}).bits();
  case 2:
    return convert<T>(x, round_toward_zero{}, Overflow{}).bits();
  case 3:
    return convert<T>(x, round_up{}, Overflow{}).bits();
  case 4:
    return convert<T>(x, round_down{}, Overflow{}).bits();
  case 5:
    return convert<T>(x, round_to_odd{}, Overflow{}).bits();
  default:
    return convert<T>(x, round_stochastic{bits}, Overflow{}).bits();
  }
}

template <class T, class Overflow>
__global__ void convert_kernel(const float* x, const std::uint32_t* bits, std::uint8_t* out,
                               int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    for (int mode = 0; mode < mode_count; ++mode)
      out[i * mode_count + mode] = convert_mode<T, Overflow>(x[i], mode, bits[i]);
}

// The block-scale step of quantization on the device: the codec's decision per amax, with the
// rule's rounding mapped to its tag on the host.
template <class BlockFormat, class ScaleRounding>
__global__ void scale_kernel(const float* amax, quantize_params params, ScaleRounding rounding,
                             std::uint8_t* codes, float* factors, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const auto decision = codec::decide_scale<BlockFormat>(amax[i], params, rounding);
    codes[i] = decision.scale.bits();
    factors[i] = decision.factor;
  }
}

void check(cudaError_t status) {
  REQUIRE(status == cudaSuccess);
}

std::vector<float> sample_inputs(std::size_t n) {
  splitmix64 rng{2026};
  std::vector<float> x(n);
  for (auto& v : x) {
    const auto bits = static_cast<std::uint32_t>(rng.next());
    std::memcpy(&v, &bits, sizeof v);
  }
  // Values near the small formats' ranges, not only random bit patterns.
  for (std::size_t i = 0; i < n / 2; ++i)
    x[i] = static_cast<float>(rng.uniform(-600.0, 600.0));
  return x;
}

template <class T, class Overflow>
void compare_with_host() {
  const int n = 1 << 16;
  const std::vector<float> x = sample_inputs(n);
  std::vector<std::uint32_t> bits(n);
  splitmix64 rng{7};
  for (auto& b : bits)
    b = rng.next_u32();
  float* dx = nullptr;
  std::uint32_t* dbits = nullptr;
  std::uint8_t* dout = nullptr;
  check(cudaMalloc(&dx, n * sizeof(float)));
  check(cudaMalloc(&dbits, n * sizeof(std::uint32_t)));
  check(cudaMalloc(&dout, n * mode_count));
  check(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  check(cudaMemcpy(dbits, bits.data(), n * sizeof(std::uint32_t), cudaMemcpyHostToDevice));
  convert_kernel<T, Overflow><<<(n + 255) / 256, 256>>>(dx, dbits, dout, n);
  check(cudaGetLastError());
  std::vector<std::uint8_t> out(static_cast<std::size_t>(n) * mode_count);
  check(cudaMemcpy(out.data(), dout, out.size(), cudaMemcpyDeviceToHost));
  cudaFree(dx);
  cudaFree(dbits);
  cudaFree(dout);
  std::size_t mismatches = 0;
  for (int i = 0; i < n; ++i)
    for (int mode = 0; mode < mode_count; ++mode)
      mismatches += out[static_cast<std::size_t>(i) * mode_count + mode] !=
                    convert_mode<T, Overflow>(x[i], mode, bits[i]);
  CHECK(mismatches == 0);
}

template <class BlockFormat>
void compare_scales() {
  const int n = 1 << 14;
  splitmix64 rng{11};
  std::vector<float> amax(n);
  for (auto& a : amax)
    a = static_cast<float>(std::exp2(rng.uniform(-40.0, 40.0)));
  quantize_options options;
  options.encode_scale = 6.0f * 448.0f / 3.7f;
  const quantize_params params = make_quantize_params<BlockFormat>(1, 1, options);
  float *damax = nullptr, *dfactors = nullptr;
  std::uint8_t* dcodes = nullptr;
  check(cudaMalloc(&damax, n * sizeof(float)));
  check(cudaMalloc(&dfactors, n * sizeof(float)));
  check(cudaMalloc(&dcodes, n));
  check(cudaMemcpy(damax, amax.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  with_rounding_tags(params, [&](auto scale_rounding, auto) {
    scale_kernel<BlockFormat>
        <<<(n + 255) / 256, 256>>>(damax, params, scale_rounding, dcodes, dfactors, n);
  });
  check(cudaGetLastError());
  std::vector<std::uint8_t> codes(n);
  std::vector<float> factors(n);
  check(cudaMemcpy(codes.data(), dcodes, n, cudaMemcpyDeviceToHost));
  check(cudaMemcpy(factors.data(), dfactors, n * sizeof(float), cudaMemcpyDeviceToHost));
  cudaFree(damax);
  cudaFree(dfactors);
  cudaFree(dcodes);
  std::size_t mismatches = 0;
  for (int i = 0; i < n; ++i) {
    const auto decision = with_rounding_tags(params, [&](auto scale_rounding, auto) {
      return codec::decide_scale<BlockFormat>(amax[i], params, scale_rounding);
    });
    mismatches += codes[i] != decision.scale.bits() ||
                  std::memcmp(&factors[i], &decision.factor, sizeof(float)) != 0;
  }
  CHECK(mismatches == 0);
}

} // namespace

TEST_CASE("device convert equals host convert for every format, mode and overflow", "[cuda]") {
  for_each_type(scalar_formats{}, [](auto tag) {
    using T = typename decltype(tag)::type;
    compare_with_host<T, saturate_finite>();
    if constexpr (format_traits<typename T::format>::nonfinite != nonfinite_encoding::none)
      compare_with_host<T, to_nonfinite>();
  });
}

TEST_CASE("device block scales and factors equal the host's", "[cuda]") {
  compare_scales<nvfp4>();
  compare_scales<ue5m3_fp4>();
  compare_scales<mxfp4>();
}
