// Warp-specialised programs on a Hopper GPU against their host emulation (skipped without a
// device; compiled for sm_90a only, and run only on a compute capability 9.0 device): the TMA
// ring (tests/support/async_ring.hpp) under every swizzle must store 3 · in + 1 exactly as the
// emulation does, and the TMA + wgmma GEMM (tests/support/async_gemm.hpp), SS and RS, must equal
// the emulation under the sm_90 model bit for bit. Tensor maps come from cuda::make_tensor_map_2d
// on the device and emulation::make_tensor_map_2d on the host, for the same shapes.
#include <blockscale/cuda/runner.cuh>
#include <blockscale/cuda/tensor_map.cuh>
#include <blockscale/emulation/host_async.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "async_gemm.hpp"
#include "async_ring.hpp"
#include "catch.hpp"
#include "cuda_test.cuh"

using namespace blockscale;
namespace ring = blockscale_test::async_ring;
namespace ag = blockscale_test::async_gemm;
using cuda::warp::smem_swizzle;
using cuda::warp::tensor_map_2d_shape;

namespace {

/// Whether the device can run the programs (TMA and the warpgroup MMA: sm_90 exactly).
bool hopper() {
  int device = 0, major = 0, minor = 0;
  check(cudaGetDevice(&device));
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major == 9 && minor == 0)
    return true;
  WARN("compute capability " << major << "." << minor
                             << ": the warpgroup MMA needs 9.0; nothing checked");
  return false;
}

cuda::warp::tensor_map device_map(const tensor_map_2d_shape& s) {
  cuda::warp::tensor_map map{};
  require_ok(cuda::make_tensor_map_2d(s, map));
  return map;
}

} // namespace

TEST_CASE("the TMA ring on the device equals its emulation", "[cuda][async]") {
  if (!hopper())
    return;
  struct shape {
    int rows, cols, box_cols;
    smem_swizzle swizzle;
  };
  for (const shape& sh : {shape{40, 72, 32, smem_swizzle::none},
                          {33, 48, 16, smem_swizzle::bytes32},
                          {64, 64, 32, smem_swizzle::bytes64},
                          {200, 130, 64, smem_swizzle::bytes128}}) {
    INFO(sh.rows << "x" << sh.cols << ", swizzle " << cuda::warp::swizzle_bytes(sh.swizzle));
    const std::size_t stride = (static_cast<std::size_t>(sh.cols) * 2 + 15) / 16 * 16;
    std::vector<std::uint16_t> in(stride / 2 * static_cast<std::size_t>(sh.rows));
    std::mt19937_64 random(fresh_seed());
    for (std::uint16_t& v : in)
      v = static_cast<std::uint16_t>(random());
    std::vector<std::uint16_t> host_out(in.size(), 0x5A5A);
    device_array<std::uint16_t> device_in(in), device_out(host_out);

    ring::ring_program p;
    p.tiles_x = (sh.cols + sh.box_cols - 1) / sh.box_cols;
    p.tiles_y = (sh.rows + ring::box_rows - 1) / ring::box_rows;
    p.box_cols = sh.box_cols;
    p.swizzle = sh.swizzle;
    const auto rows = static_cast<std::uint64_t>(sh.rows),
               cols = static_cast<std::uint64_t>(sh.cols);
    for (const bool device : {false, true}) {
      const void* from = device ? static_cast<const void*>(device_in.data()) : in.data();
      void* to = device ? static_cast<void*>(device_out.data()) : host_out.data();
      const tensor_map_2d_shape in_shape{from,           2,           rows,      cols, stride,
                                         ring::box_rows, sh.box_cols, sh.swizzle};
      const tensor_map_2d_shape out_shape{to,          2,
                                          rows,        cols,
                                          stride,      ring::box_rows / ring::consumers,
                                          sh.box_cols, smem_swizzle::none};
      if (device) {
        p.in = device_map(in_shape);
        p.out = device_map(out_shape);
        require_ok(cuda::device_runner{test_stream()}.run_specialized(p, 3));
      } else {
        p.in = emulation::make_tensor_map_2d(in_shape);
        p.out = emulation::make_tensor_map_2d(out_shape);
        emulation::run_specialized_grid(p, 3);
      }
    }
    check(cudaStreamSynchronize(test_stream()));
    CHECK(device_out.download(in.size()) == host_out);
  }
}

TEST_CASE("the TMA + wgmma GEMM on the device equals its emulation bit for bit",
          "[cuda][async][wgmma]") {
  if (!hopper())
    return;
  struct shape {
    int m, n, k;
  };
  for (const shape& g : {shape{64, 32, 16}, {100, 48, 40}, {257, 96, 200}})
    for (const ag::form f : {ag::form::ss, ag::form::rs}) {
      INFO(g.m << "x" << g.n << "x" << g.k << (f == ag::form::ss ? " SS" : " RS"));
      const int lda = (g.k + 7) / 8 * 8;
      std::vector<std::uint16_t> a(static_cast<std::size_t>(g.m) * lda),
          b(static_cast<std::size_t>(g.n) * lda);
      std::mt19937_64 random(fresh_seed() + static_cast<std::uint64_t>(g.k));
      std::uniform_real_distribution<double> value(-4, 4);
      for (auto* v : {&a, &b})
        for (std::uint16_t& x : *v)
          x = emulation::ptx::bf16_round(value(random));
      std::vector<float> host_c(static_cast<std::size_t>(g.m) * g.n, -1.0f);
      device_array<std::uint16_t> device_a(a), device_b(b);
      device_array<float> device_c(host_c);
      ag::gemm_program p;
      p.m = g.m;
      p.n = g.n;
      p.k = g.k;
      p.f = f;
      const std::size_t ctas = static_cast<std::size_t>((g.m + ag::tile_m - 1) / ag::tile_m) *
                               static_cast<std::size_t>(p.tiles_n());
      const auto stride = static_cast<std::uint64_t>(lda) * 2;
      for (const bool device : {false, true}) {
        const void* pa = device ? static_cast<const void*>(device_a.data()) : a.data();
        const void* pb = device ? static_cast<const void*>(device_b.data()) : b.data();
        const tensor_map_2d_shape a_shape{pa,
                                          2,
                                          static_cast<std::uint64_t>(g.m),
                                          static_cast<std::uint64_t>(g.k),
                                          stride,
                                          ag::tile_m,
                                          ag::k_step,
                                          smem_swizzle::bytes32};
        const tensor_map_2d_shape b_shape{pb,
                                          2,
                                          static_cast<std::uint64_t>(g.n),
                                          static_cast<std::uint64_t>(g.k),
                                          stride,
                                          ag::tile_n,
                                          ag::k_step,
                                          smem_swizzle::bytes32};
        if (device) {
          p.a_map = device_map(a_shape);
          p.b_map = device_map(b_shape);
          p.c = device_c.data();
          require_ok(cuda::device_runner{test_stream()}.run_specialized(p, ctas));
        } else {
          p.a_map = emulation::make_tensor_map_2d(a_shape);
          p.b_map = emulation::make_tensor_map_2d(b_shape);
          p.c = host_c.data();
          emulation::run_specialized_grid(p, ctas, 0, emulation::ptx::mma_model::sm90);
        }
      }
      const std::vector<float> got = device_c.download(host_c.size());
      CHECK(std::memcmp(got.data(), host_c.data(), got.size() * sizeof(float)) == 0);
    }
}

TEST_CASE("make_tensor_map_2d refuses what the emulation refuses", "[cuda][async]") {
  device_array<std::uint16_t> t(4096);
  cuda::warp::tensor_map map{};
  const cuda::status s =
      cuda::make_tensor_map_2d({t.data(), 2, 8, 64, 128, 8, 32, smem_swizzle::bytes128}, map);
  CHECK(s.code() == cuda::errc::invalid_argument);
  CHECK(s.message().find("exactly as wide") != std::string::npos);
  require_ok(
      cuda::make_tensor_map_2d({t.data(), 2, 8, 64, 128, 8, 64, smem_swizzle::bytes128}, map));
}
