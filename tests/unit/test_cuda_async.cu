// Warp-specialised programs on a Hopper GPU against their host emulation (skipped without a
// device; compiled for sm_90a only, and run only on a compute capability 9.0 device): the TMA
// ring (tests/support/async_ring.hpp) under every swizzle must store 3 · in + 1 exactly as the
// emulation does, and the TMA + wgmma GEMM (tests/support/async_gemm.hpp), SS and RS, must equal
// the emulation under the sm_90 model bit for bit. Tensor maps come from cuda::make_tensor_map_2d
// on the device and emulation::make_tensor_map_2d on the host, for the same shapes. The W4A16 GEMM
// (cuda/kernels/gemm_w4a16.hpp), every shape and three scale formats, must equal its emulation
// (emulation::host_runner, sm_90 model) bit for bit, through cuda::gemm_w4a16 and through the
// launcher with each shape.
#include <blockscale/block/block_format.hpp>
#include <blockscale/cuda/buffer.cuh>
#include <blockscale/cuda/gemm.cuh>
#include <blockscale/cuda/runner.cuh>
#include <blockscale/cuda/tensor_map.cuh>
#include <blockscale/emulation/host_async.hpp>
#include <blockscale/emulation/host_runner.hpp>
#include <blockscale/host/quantize.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "async_gemm.hpp"
#include "async_ring.hpp"
#include "catch.hpp"
#include "cuda_test.cuh"
#include "gemm_operands.hpp"

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

namespace {

/// The splits of K for a wgmma GEMM of shape `Shape` on C[m×n], K = k: `requested`, or where it
/// is 0, those gemm_w4a16 and gemm choose on this device.
template <class Shape>
std::uint32_t splits_for(std::uint32_t requested, std::size_t m, std::size_t n, std::size_t k) {
  if (requested == 0) {
    int device = 0, sms = 0;
    check(cudaGetDevice(&device));
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    const std::size_t tiles =
        ((m + Shape::tile_x - 1) / Shape::tile_x) * ((n + Shape::tile_w - 1) / Shape::tile_w);
    requested = cuda::wgmma_automatic_splits(tiles, k, static_cast<std::size_t>(sms));
  }
  return cuda::wgmma_splits(requested, k);
}

/// The wgmma_split_k of `splits` splits over a workspace of `size` floats at `workspace` (host or
/// device memory).
cuda::wgmma_split_k split_of(std::uint32_t splits, float* workspace, std::size_t size) {
  cuda::wgmma_split_k split;
  split.splits = splits;
  split.workspace = splits > 1 ? workspace : nullptr;
  split.workspace_size = splits > 1 ? size : 0;
  return split;
}

/// The device's C against the emulation's, bit for bit (C is rows of n).
void check_same_bits(const std::vector<float>& device, const std::vector<float>& emulated,
                     std::size_t n) {
  std::size_t differ = 0;
  for (std::size_t i = 0; i < device.size(); ++i)
    if (std::memcmp(&device[i], &emulated[i], sizeof(float)) != 0 && ++differ <= 5)
      FAIL_CHECK("C(" << i / n << ", " << i % n << "): device " << device[i] << ", emulation "
                      << emulated[i]);
  CHECK(differ == 0);
}

/// The W4A16 GEMM of shape `Shape` (or cuda::gemm_w4a16's choice, `automatic`) on the device and
/// on the host, FP32 out, beta 0.5 over the same C: equal bit for bit.
template <class Shape, class F>
void w4a16_device_equals_host(std::size_t m, std::size_t n, std::size_t k, bool automatic,
                              std::uint64_t seed, std::uint32_t requested_splits = 1) {
  // Through gemm_w4a16 the device splits K as it chooses: the emulation the same.
  const std::uint32_t splits = splits_for<Shape>(automatic ? 0u : requested_splits, m, n, k);
  INFO(m << "x" << n << "x" << k << (automatic ? ", automatic shape" : "") << ", " << splits
         << " splits");
  const std::size_t ld = (k + 7) / 8 * 8 + 8;
  const std::vector<float> xf = random_matrix(m, ld, seed, 4.0f);
  std::vector<std::uint16_t> x(m * ld);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = emulation::ptx::bf16_round(xf[i]);
  const std::vector<float> wf = random_matrix(n, k, seed + 1, 3.0f);
  const auto w = quantized<F>(wf, n, k, scale_layout::row_major);
  std::vector<float> host_c = random_matrix(m, n, seed + 2, 1.0f);
  device_array<std::uint16_t> device_x(x);
  device_array<float> device_c(host_c);
  cuda::device_quantized_matrix<F> device_w(w.shape(), test_stream());
  require_ok(device_w.copy_from(w, test_stream()));

  const auto xv = [](const std::uint16_t* p, std::size_t rows, std::size_t cols, std::size_t l) {
    return matrix_view<const bfloat16>::unchecked(reinterpret_cast<const bfloat16*>(p), rows, cols,
                                                  l);
  };
  emulation::host_runner host;
  host.mma = emulation::ptx::mma_model::sm90;
  std::vector<float> host_work(splits * m * n);
  require_ok(cuda::launch_gemm_w4a16<Shape>(host, xv(x.data(), m, k, ld), w.view(),
                                            matrix_view<float>(host_c.data(), m, n), 1.5f, 0.5f,
                                            split_of(splits, host_work.data(), host_work.size())));
  const auto dc = matrix_view<float>::unchecked(device_c.data(), m, n, n);
  const auto dw = std::as_const(device_w).view();
  if (automatic) {
    require_ok(cuda::gemm_w4a16(xv(device_x.data(), m, k, ld), dw, dc, 1.5f, 0.5f, test_stream()));
  } else {
    cuda::device_runner device{test_stream()};
    device_array<float> device_work(splits * m * n);
    require_ok(
        cuda::launch_gemm_w4a16<Shape>(device, xv(device_x.data(), m, k, ld), dw, dc, 1.5f, 0.5f,
                                       split_of(splits, device_work.data(), splits * m * n)));
  }
  check_same_bits(device_c.download(m * n), host_c, n);
}

} // namespace

TEST_CASE("the W4A16 GEMM on the device equals its emulation bit for bit",
          "[cuda][async][wgmma][w4a16]") {
  if (!hopper())
    return;
  const std::uint64_t seed = fresh_seed();
  // cuda::gemm_w4a16 picks the shape by M, so each of these runs the shape named with it.
  w4a16_device_equals_host<cuda::gemm_wgmma_small, nvfp4>(1, 200, 320, true, seed);
  w4a16_device_equals_host<cuda::gemm_wgmma_small, ue5m3_fp4>(16, 130, 96, false, seed + 1);
  w4a16_device_equals_host<cuda::gemm_wgmma_medium, mxfp4>(37, 70, 256, true, seed + 2);
  w4a16_device_equals_host<cuda::gemm_wgmma_medium, nvfp4>(64, 257, 512, false, seed + 3);
  w4a16_device_equals_host<cuda::gemm_wgmma_large, ue5m3_fp4>(130, 257, 512, true, seed + 4);
  w4a16_device_equals_host<cuda::gemm_wgmma_large, mxfp4>(300, 384, 1024, false, seed + 5);
  w4a16_device_equals_host<cuda::gemm_wgmma_large, nvfp4>(129, 129, 64, false, seed + 6);
  // Split-K, named and as gemm_w4a16 chooses it (a decode over few weight rows splits K).
  w4a16_device_equals_host<cuda::gemm_wgmma_small, nvfp4>(1, 200, 2048, false, seed + 7, 3);
  w4a16_device_equals_host<cuda::gemm_wgmma_small, ue5m3_fp4>(4, 300, 4096, true, seed + 8);
  w4a16_device_equals_host<cuda::gemm_wgmma_large, mxfp4>(200, 130, 1024, false, seed + 9, 4);
  // More tiles (18 × 8) than an H100 or H200 has multiprocessors: persistent CTAs take two.
  w4a16_device_equals_host<cuda::gemm_wgmma_large, nvfp4>(2304, 1024, 128, true, seed + 10);
}

namespace {

/// The FP4 × FP4 GEMM on wgmma, device against emulation, bit for bit; through cuda::gemm where
/// `automatic` (which takes that path on a Hopper device for TMA-aligned operands).
template <class Shape, class FA, class FB>
void fp4_device_equals_host(std::size_t m, std::size_t n, std::size_t k, bool automatic,
                            std::uint64_t seed, std::uint32_t requested_splits = 1) {
  const std::uint32_t splits = splits_for<Shape>(automatic ? 0u : requested_splits, m, n, k);
  INFO(m << "x" << n << "x" << k << (automatic ? ", through cuda::gemm" : "") << ", " << splits
         << " splits");
  const auto a = quantized<FA>(random_matrix(m, k, seed, 3.0f), m, k, scale_layout::tensor_core);
  const auto b = quantized<FB>(random_matrix(n, k, seed + 1, 3.0f), n, k, scale_layout::row_major);
  std::vector<float> host_c = random_matrix(m, n, seed + 2, 1.0f);
  device_array<float> device_c(host_c);
  cuda::device_quantized_matrix<FA> da(a.shape(), test_stream());
  cuda::device_quantized_matrix<FB> db(b.shape(), test_stream());
  require_ok(da.copy_from(a, test_stream()));
  require_ok(db.copy_from(b, test_stream()));
  emulation::host_runner host;
  host.mma = emulation::ptx::mma_model::sm90;
  std::vector<float> host_work(splits * m * n);
  require_ok(cuda::launch_gemm_wgmma<Shape>(host, a.view(), b.view(),
                                            matrix_view<float>(host_c.data(), m, n), -1.0f, 0.5f,
                                            split_of(splits, host_work.data(), host_work.size())));
  const auto dc = matrix_view<float>::unchecked(device_c.data(), m, n, n);
  if (automatic) {
    require_ok(cuda::gemm(std::as_const(da).view(), std::as_const(db).view(), dc, -1.0f, 0.5f,
                          test_stream()));
  } else {
    cuda::device_runner device{test_stream()};
    device_array<float> device_work(splits * m * n);
    require_ok(cuda::launch_gemm_wgmma<Shape>(
        device, std::as_const(da).view(), std::as_const(db).view(), dc, -1.0f, 0.5f,
        split_of(splits, device_work.data(), splits * m * n)));
  }
  check_same_bits(device_c.download(m * n), host_c, n);
}

} // namespace

TEST_CASE("the FP4 x FP4 GEMM on wgmma on the device equals its emulation bit for bit",
          "[cuda][async][wgmma]") {
  if (!hopper())
    return;
  const std::uint64_t seed = fresh_seed();
  fp4_device_equals_host<cuda::gemm_wgmma_small, nvfp4, nvfp4>(5, 200, 320, true, seed);
  fp4_device_equals_host<cuda::gemm_wgmma_medium, ue5m3_fp4, mxfp4>(40, 130, 256, false, seed + 1);
  fp4_device_equals_host<cuda::gemm_wgmma_large, nvfp4, nvfp4>(300, 257, 512, true, seed + 2);
  fp4_device_equals_host<cuda::gemm_wgmma_large, mxfp4, ue5m3_fp4>(129, 384, 1024, false, seed + 3);
  fp4_device_equals_host<cuda::gemm_wgmma_small, nvfp4, nvfp4>(2, 130, 4096, true, seed + 4);
  fp4_device_equals_host<cuda::gemm_wgmma_medium, nvfp4, ue5m3_fp4>(50, 70, 2048, false, seed + 5,
                                                                    5);
}
