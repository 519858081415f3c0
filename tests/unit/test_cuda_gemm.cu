// The tiled GEMM on a device (cuda/gemm.cuh; skipped without one): operands quantized on the host
// (blockscale::quantize), copied to the device (device_quantized_matrix::copy_from), multiplied
// there and compared on the host with gemm::reference on the same quantized operands, within the
// bound of test_cuda_gemm_host.cpp. Ragged M and N, K with a partial last k-tile, both scale
// layouts, NVFP4 × NVFP4, UE5M3-FP4 × UE5M3-FP4, MXFP4 × MXFP4 and NVFP4 × MXFP4, FP32 and BF16
// out, alpha and beta variants (beta == 0 with NaN in C: C must not be read), C with a leading
// dimension past N (the gap must stay untouched); the shapes gemm_small_m, gemm_large_m (staged
// dequantization) and gemm_large_m_in_register on every device whose shared memory per block
// holds them (else the launch must fail with a status: gemm_large_m on sm_120), gemm_block_scaled
// where the device's code has the block-scaled MMA; the automatic cuda::gemm on both sides of
// M = 64; bad arguments, which return a status and queue nothing.
//
// Each kernel instantiation costs compile time on every architecture, so the cases share eleven:
// every format pair on gemm_small_m and gemm_large_m, NVFP4 × MXFP4 (mixed block sizes) on
// gemm_large_m_in_register, the two native pairs on gemm_block_scaled, with the output type
// varied across them (the epilogue is the only code it changes), and the automatic cuda::gemm on
// NVFP4 × NVFP4 → FP32 and UE5M3-FP4 × UE5M3-FP4 → BF16, whose shapes are among the eleven.
//
// N, K, ldc, alpha and beta are drawn from a seed that is random each run and printed
// (BLOCKSCALE_TEST_SEED overrides it); every M of the list runs on every instantiation, with
// both scale layouts. BLOCKSCALE_TEST_QUICK=1 (bench/gpu/run.sh sets it under compute-sanitizer)
// runs two small shapes per instantiation instead: 37 × 70 × 160 (row-major scales) and
// 130 × 129 × 384 (tensor-core).
//
// Bound (test_cuda_gemm_host.cpp): |C - reference| <= (11 · K/16 + 2) · 2^-23 · t · Σ_k |a_k b_k|
// + 2 ulp(Out) · (|reference| + |beta · C|), t = |alpha| · s_dec_a · s_dec_b and a_k, b_k the
// decoded elements times their block scales (the tensor scales are in t, once).
#include <blockscale/blockscale.hpp>
#include <blockscale/cuda/buffer.cuh>
#include <blockscale/cuda/gemm.cuh>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "catch.hpp"
#include "cuda_test.cuh"
#include "gemm_operands.hpp"
#include "shifted_operands.hpp"

using namespace blockscale;

namespace {

template <class F>
cuda::device_quantized_matrix<F> on_device(const quantized_matrix<F>& host) {
  cuda::device_quantized_matrix<F> device(host.shape(), test_stream());
  require_ok(device.copy_from(host, test_stream()));
  return device;
}

template <class Out>
bool same_bits(Out x, Out y) {
  return std::memcmp(&x, &y, sizeof(Out)) == 0;
}

struct gemm_case {
  std::size_t m, n, k;
  std::size_t ld; ///< of C, at least n
  scale_layout layout;
  float alpha, beta;
};

std::string describe(const gemm_case& s) {
  return "M = " + std::to_string(s.m) + ", N = " + std::to_string(s.n) +
         ", K = " + std::to_string(s.k) + ", ldc = " + std::to_string(s.ld) + ", " +
         (s.layout == scale_layout::tensor_core ? "tensor-core" : "row-major") +
         " scales, alpha = " + std::to_string(s.alpha) + ", beta = " + std::to_string(s.beta);
}

/// In place of a shape: the product runs through the automatic cuda::gemm, on read-only views or
/// on writable ones (the overload that converts them).
struct automatic {};
struct automatic_writable {};

/// Runs one case on the device and compares every output with the reference, and the gap between
/// rows of C (ld > n) with what was there.
template <class Shape, class FA, class FB, class Out>
void check_case(const gemm_case& s, std::uint64_t seed) {
  INFO(describe(s) << ", data seed " << seed);
  const cudaStream_t stream = test_stream();
  const auto a = quantized<FA>(random_matrix(s.m, s.k, seed, 3.0f), s.m, s.k, s.layout);
  const auto b = quantized<FB>(random_matrix(s.n, s.k, seed + 1, 3.0f), s.n, s.k, s.layout);
  auto da = on_device(a);
  auto db = on_device(b);

  // C before: the drawn values where beta reads them, NaN where C must not be read (beta == 0),
  // and a sentinel in the gap past column n of each row.
  const std::vector<float> drawn = random_matrix(s.m, s.n, seed + 2, 1.0f);
  const Out sentinel = Out(-12345.0f);
  std::vector<Out> before(s.m * s.ld, sentinel);
  for (std::size_t i = 0; i < s.m; ++i)
    for (std::size_t j = 0; j < s.n; ++j)
      before[i * s.ld + j] =
          s.beta == 0.0f ? Out(std::numeric_limits<float>::quiet_NaN()) : Out(drawn[i * s.n + j]);
  device_array<Out> c(before.size());
  c.upload(before);
  const auto c_view = matrix_view<Out>::unchecked(c.data(), s.m, s.n, s.ld);

  cuda::status st;
  if constexpr (std::is_same<Shape, automatic>::value)
    st = cuda::gemm(std::as_const(da).view(), std::as_const(db).view(), c_view, s.alpha, s.beta,
                    stream);
  else if constexpr (std::is_same<Shape, automatic_writable>::value)
    st = cuda::gemm(da.view(), db.view(), c_view, s.alpha, s.beta, stream);
  else
    st = cuda::gemm_with_shape<Shape>(std::as_const(da).view(), std::as_const(db).view(), c_view,
                                      s.alpha, s.beta, stream);
  require_ok(st);
  check(cudaGetLastError());
  check(cudaStreamSynchronize(stream)); // a kernel fault shows here
  const std::vector<Out> after = c.download(before.size());

  // The reference reads the C the kernel read: the Out values, as float.
  std::vector<float> ref(s.m * s.n);
  for (std::size_t i = 0; i < s.m; ++i)
    for (std::size_t j = 0; j < s.n; ++j)
      ref[i * s.n + j] = static_cast<float>(before[i * s.ld + j]);
  gemm::reference(a, b, matrix_view<float>(ref.data(), s.m, s.n), s.alpha, s.beta, 0);

  const std::size_t length = std::min(a.padded_cols(), b.padded_cols());
  const std::vector<double> abs_a = magnitudes(a, length), abs_b = magnitudes(b, length);
  const double t = std::fabs(static_cast<double>(s.alpha)) * static_cast<double>(a.decode_scale()) *
                   static_cast<double>(b.decode_scale());
  int bad = 0, touched = 0;
  for (std::size_t i = 0; i < s.m; ++i) {
    for (std::size_t j = 0; j < s.n; ++j) {
      double magnitude = 0.0;
      const double* x = abs_a.data() + i * length;
      const double* y = abs_b.data() + j * length;
      for (std::size_t k = 0; k < length; ++k)
        magnitude += x[k] * y[k];
      const double want = static_cast<double>(static_cast<float>(Out(ref[i * s.n + j])));
      const double got = static_cast<double>(static_cast<float>(after[i * s.ld + j]));
      const double c_in = s.beta == 0.0f
                              ? 0.0
                              : static_cast<double>(s.beta) *
                                    static_cast<double>(static_cast<float>(before[i * s.ld + j]));
      const double bound =
          gemm_error_bound<Out>(s.k, t, magnitude, std::fabs(want) + std::fabs(c_in));
      if (!(std::fabs(got - want) <= bound) && ++bad <= 5)
        FAIL_CHECK("C(" << i << ", " << j << ") = " << got << ", reference " << want << ", bound "
                        << bound);
    }
    for (std::size_t j = s.n; j < s.ld; ++j)
      if (!same_bits(after[i * s.ld + j], sentinel) && ++touched <= 5)
        FAIL_CHECK("C(" << i << ", " << j << ") past N was written");
  }
  CHECK(bad == 0);
  CHECK(touched == 0);
}

constexpr std::size_t ms[] = {1, 16, 37, 130, 257};
constexpr std::size_t ns[] = {8, 70, 129, 300};
constexpr std::size_t ks[] = {128, 160, 384, 1024};
struct scalars {
  float alpha, beta;
};
constexpr scalars alpha_beta[] = {{1.0f, 0.0f}, {-0.5f, 1.25f}, {2.0f, 0.0f}, {0.75f, -1.0f}};

/// Whether the kernel of `Shape` fits this device's shared memory per block (gemm_large_m's
/// staged dequantization needs about 122 KiB: more than the 99 KiB of sm_120 or sm_86/89).
template <class Shape, class FA, class FB, class Out>
bool fits_this_device() {
  using program = cuda::kernels::gemm_program<FA, FB, Out, Shape>;
  int device = 0, optin = 0;
  check(cudaGetDevice(&device));
  check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return sizeof(typename program::shared_storage) <= static_cast<std::size_t>(optin);
}

/// A shape whose kernel does not fit the device must say so with a status, and leave no error
/// behind for the next launch.
template <class Shape, class FA, class FB, class Out>
void check_does_not_fit() {
  using program = cuda::kernels::gemm_program<FA, FB, Out, Shape>;
  WARN("this shape's " << sizeof(typename program::shared_storage)
                       << " bytes of shared memory exceed the device's per-block limit: only its "
                          "error status is checked");
  const auto a =
      on_device(quantized<FA>(random_matrix(130, 128, 1, 1.0f), 130, 128, scale_layout::row_major));
  const auto b =
      on_device(quantized<FB>(random_matrix(8, 128, 2, 1.0f), 8, 128, scale_layout::row_major));
  device_array<Out> c(130 * 8);
  const cuda::status st = cuda::gemm_with_shape<Shape>(
      a.view(), b.view(), matrix_view<Out>::unchecked(c.data(), 130, 8, 8), 1.0f, 0.0f,
      test_stream());
  INFO(st.message());
  CHECK(st.code() == cuda::errc::cuda_error);
  check(cudaStreamSynchronize(test_stream()));
  // A failed cudaFuncSetAttribute is not sticky, but it stays the last error until read: a later
  // launch must not be blamed for it.
  CHECK(cudaPeekAtLastError() == cudaSuccess);
  (void)cudaGetLastError();
}

/// Every M of the list on both layouts, each with N, K, ldc, alpha and beta drawn; in quick mode
/// two small shapes, one per layout, alpha, beta and ldc drawn.
template <class Shape, class FA, class FB, class Out>
void check_shape() {
  if (!fits_this_device<Shape, FA, FB, Out>()) {
    check_does_not_fit<Shape, FA, FB, Out>();
    return;
  }
  std::mt19937_64 draw(fresh_seed() ^ 0x5DEECE66Dull);
  const auto pick = [&](std::size_t count) {
    return static_cast<std::size_t>(draw() % static_cast<std::uint64_t>(count));
  };
  std::uint64_t data_seed = draw();
  const auto run = [&](std::size_t m, std::size_t n, std::size_t k, scale_layout layout) {
    const scalars ab = alpha_beta[pick(std::size(alpha_beta))];
    const std::size_t ld = n + (draw() % 2 == 0 ? 0 : 5);
    check_case<Shape, FA, FB, Out>({m, n, k, ld, layout, ab.alpha, ab.beta}, data_seed);
    data_seed += 3;
  };
  if (quick()) {
    run(37, 70, 160, scale_layout::row_major);
    run(130, 129, 384, scale_layout::tensor_core);
    return;
  }
  for (const std::size_t m : ms)
    for (const scale_layout layout : {scale_layout::row_major, scale_layout::tensor_core})
      run(m, ns[pick(std::size(ns))], ks[pick(std::size(ks))], layout);
}

} // namespace

TEST_CASE("the small-M GEMM shape on the device equals the reference within the bound",
          "[cuda][gemm]") {
  SECTION("NVFP4 x NVFP4 -> float") {
    check_shape<cuda::gemm_small_m, nvfp4, nvfp4, float>();
  }
  SECTION("UE5M3-FP4 x UE5M3-FP4 -> bfloat16") {
    check_shape<cuda::gemm_small_m, ue5m3_fp4, ue5m3_fp4, bfloat16>();
  }
  SECTION("MXFP4 x MXFP4 -> bfloat16") {
    check_shape<cuda::gemm_small_m, mxfp4, mxfp4, bfloat16>();
  }
  SECTION("NVFP4 x MXFP4 -> float") {
    check_shape<cuda::gemm_small_m, nvfp4, mxfp4, float>();
  }
}

TEST_CASE("the large-M GEMM shape on the device equals the reference within the bound",
          "[cuda][gemm]") {
  SECTION("NVFP4 x NVFP4 -> float") {
    check_shape<cuda::gemm_large_m, nvfp4, nvfp4, float>();
  }
  SECTION("UE5M3-FP4 x UE5M3-FP4 -> bfloat16") {
    check_shape<cuda::gemm_large_m, ue5m3_fp4, ue5m3_fp4, bfloat16>();
  }
  SECTION("MXFP4 x MXFP4 -> float") {
    check_shape<cuda::gemm_large_m, mxfp4, mxfp4, float>();
  }
  SECTION("NVFP4 x MXFP4 -> bfloat16") {
    check_shape<cuda::gemm_large_m, nvfp4, mxfp4, bfloat16>();
  }
}

TEST_CASE("the large-M GEMM shape dequantizing in registers equals the reference", "[cuda][gemm]") {
  check_shape<cuda::gemm_large_m_in_register, nvfp4, mxfp4, bfloat16>();
}

TEST_CASE("the block-scaled MMA GEMM shape equals the reference where the device has it",
          "[cuda][gemm]") {
  if (!cuda::detail::device_has_block_scaled_mma()) {
    WARN("this device's code has no block-scaled MMA (sm_120a): gemm_block_scaled not run");
    return;
  }
  SECTION("NVFP4 x NVFP4 -> float") {
    check_shape<cuda::gemm_block_scaled, nvfp4, nvfp4, float>();
  }
  SECTION("MXFP4 x MXFP4 -> bfloat16") {
    check_shape<cuda::gemm_block_scaled, mxfp4, mxfp4, bfloat16>();
  }
}

TEST_CASE("the automatic cuda::gemm equals the reference on either side of M = 64",
          "[cuda][gemm]") {
  // Small M (gemm_small_m), then large M (gemm_block_scaled or gemm_large_m), through both
  // overloads (read-only and writable views).
  const std::uint64_t seed = fresh_seed() * 7 + 1;
  check_case<automatic, nvfp4, nvfp4, float>(
      {37, 129, 160, 129, scale_layout::tensor_core, 1.0f, 0.0f}, seed);
  check_case<automatic_writable, nvfp4, nvfp4, float>(
      {64, 70, 384, 73, scale_layout::row_major, -0.5f, 1.25f}, seed + 3);
  check_case<automatic_writable, nvfp4, nvfp4, float>(
      {65, 300, 384, 300, scale_layout::tensor_core, 0.75f, -1.0f}, seed + 6);
  check_case<automatic, nvfp4, nvfp4, float>({257, 8, 1024, 8, scale_layout::row_major, 2.0f, 0.0f},
                                             seed + 9);
  // A format pair without the block-scaled MMA: gemm_small_m, then gemm_large_m (or what
  // cuda::gemm chooses where that does not fit the device).
  check_case<automatic, ue5m3_fp4, ue5m3_fp4, bfloat16>(
      {16, 300, 160, 305, scale_layout::row_major, -0.5f, 1.25f}, seed + 12);
  check_case<automatic, ue5m3_fp4, ue5m3_fp4, bfloat16>(
      {130, 129, 384, 129, scale_layout::tensor_core, 1.0f, 0.0f}, seed + 15);
}

TEST_CASE("the shift pass on the device equals the host's, and the shifted GEMM the MMA model",
          "[cuda][gemm][scale_shift]") {
  // A: 256 rows, row 200 spread beyond UE4M3's normals (A's second tile falls back); B: 136 rows
  // that all fit. On every device the shift pass equals the host's byte for byte; where the
  // device's code has the block-scaled MMA, gemm_shifted's fitting tiles equal the sm_120 model
  // of the MMA on the operands' own scales bit for bit (test_gemm_shifted.cpp) and the others the
  // fallback shape's GEMM, else it is refused.
  const cudaStream_t stream = test_stream();
  const std::size_t m = 256, n = 136, k = 320;
  const std::uint64_t seed = fresh_seed() * 5 + 2;
  const auto a =
      quantized_spread<ue5m3_fp4>(m, k, seed, scale_layout::tensor_core, 9.0f, 22.0f, 200);
  const auto b = quantized_spread<nvfp4>(n, k, seed + 1, scale_layout::tensor_core, 5.0f, 5.0f, n);
  const auto da = on_device(a);
  const auto db = on_device(b);

  host_shifted<ue5m3_fp4> ha(a.view().shape());
  host_shifted<nvfp4> hb(b.view().shape());
  shift_scales<nvfp4>(a.view(), ha.view());
  shift_scales<nvfp4>(b.view(), hb.view());
  CHECK(ha.tiles == std::vector<std::uint8_t>{1, 0});

  device_array<std::uint8_t> codes_a(ha.codes.size()), tiles_a(ha.tiles.size());
  device_array<std::int8_t> shifts_a(ha.shifts.size());
  device_array<std::uint8_t> codes_b(hb.codes.size()), tiles_b(hb.tiles.size());
  device_array<std::int8_t> shifts_b(hb.shifts.size());
  // A sentinel the host's (0xEE) is not: the bytes compare equal only where the pass writes them.
  check(cudaMemsetAsync(codes_a.data(), 0x11, ha.codes.size(), stream));
  check(cudaMemsetAsync(codes_b.data(), 0x11, hb.codes.size(), stream));
  const shifted_scales sa{codes_a.data(), shifts_a.data(), tiles_a.data()};
  const shifted_scales sb{codes_b.data(), shifts_b.data(), tiles_b.data()};
  require_ok(cuda::shift_scales(da.view(), sa, stream));
  require_ok(cuda::shift_scales(db.view(), sb, stream));
  CHECK(codes_a.download(ha.codes.size()) == ha.codes);
  CHECK(shifts_a.download(ha.shifts.size()) == ha.shifts);
  CHECK(tiles_a.download(ha.tiles.size()) == ha.tiles);
  CHECK(codes_b.download(hb.codes.size()) == hb.codes);
  CHECK(shifts_b.download(hb.shifts.size()) == hb.shifts);
  CHECK(tiles_b.download(hb.tiles.size()) == hb.tiles);

  device_array<float> c(m * n);
  const auto c_view = matrix_view<float>::unchecked(c.data(), m, n, n);
  const cuda::status st = cuda::gemm_shifted(da.view(), const_shifted_scales(sa), db.view(),
                                             const_shifted_scales(sb), c_view, 1.0f, 0.0f, stream);
  // cuda::gemm takes the shifted route exactly where gemm_shifted runs.
  const cuda::gemm_route route = cuda::choose_gemm<float>(da.view(), db.view(), stream);
  CHECK((route == cuda::gemm_route::shifted) == cuda::detail::device_has_block_scaled_mma());
  CHECK(route != cuda::gemm_route::block_scaled);
  if (!cuda::detail::device_has_block_scaled_mma()) {
    CHECK(st.code() == cuda::errc::unsupported);
    WARN("this device's code has no block-scaled MMA (sm_120a): gemm_shifted not run");
    return;
  }
  require_ok(st);
  // Fitting tiles: the block-scaled MMA chain on the own scales (the host model); the others:
  // the fallback shape gemm_shifted chose, on the device, from the original operands.
  device_array<float> fallback(m * n);
  const auto fallback_view = matrix_view<float>::unchecked(fallback.data(), m, n, n);
  require_ok(cuda::detail::fits_shared_memory<
                 cuda::kernels::gemm_program<ue5m3_fp4, nvfp4, float, cuda::gemm_large_m>>()
                 ? cuda::gemm_with_shape<cuda::gemm_large_m>(da.view(), db.view(), fallback_view,
                                                             1.0f, 0.0f, stream)
                 : cuda::gemm_with_shape<cuda::gemm_large_m_in_register>(
                       da.view(), db.view(), fallback_view, 1.0f, 0.0f, stream));
  std::vector<float> want = fallback.download(m * n);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j)
      if (ha.tiles[i / shift_tile_rows] != 0 && hb.tiles[j / shift_tile_rows] != 0)
        want[i * n + j] =
            native_mma_output(a, b, i, j, 1.0f, 0.0f, 0.0f, emulation::ptx::mma_model::sm120);
  const std::vector<float> got = c.download(m * n);
  CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
}

namespace {

// Runs `call` (which returns a status) on C filled with a sentinel and requires the error `code`
// with `text` in its message, no CUDA error, and C untouched: nothing was queued.
template <class Call>
void check_rejected(Call&& call, cuda::errc code, const char* text) {
  const cudaStream_t stream = test_stream();
  constexpr std::size_t cells = 64;
  std::vector<float> sentinel(cells, 777.0f);
  device_array<float> c(cells);
  c.upload(sentinel);
  check(cudaStreamSynchronize(stream));
  const cuda::status st = call(c.data());
  INFO(st.message());
  CHECK(st.code() == code);
  CHECK(st.message().find(text) != std::string::npos);
  check(cudaGetLastError());
  check(cudaStreamSynchronize(stream));
  const std::vector<float> after = c.download(cells);
  CHECK(std::memcmp(after.data(), sentinel.data(), cells * sizeof(float)) == 0);
}

} // namespace

TEST_CASE("device GEMMs with bad arguments return a status and queue nothing", "[cuda][gemm]") {
  const cudaStream_t stream = test_stream();
  const auto layout = scale_layout::row_major;
  // K = 48: a multiple of NVFP4's 16 but not of MXFP4's 32.
  const auto a48 = on_device(quantized<nvfp4>(random_matrix(4, 48, 1, 1.0f), 4, 48, layout));
  const auto m48 = on_device(quantized<mxfp4>(random_matrix(3, 48, 2, 1.0f), 3, 48, layout));
  // K = 40: a multiple of neither.
  const auto a40 = on_device(quantized<nvfp4>(random_matrix(4, 40, 3, 1.0f), 4, 40, layout));
  const auto b40 = on_device(quantized<nvfp4>(random_matrix(3, 40, 4, 1.0f), 3, 40, layout));
  const auto a64 = on_device(quantized<nvfp4>(random_matrix(4, 64, 5, 1.0f), 4, 64, layout));
  const auto b64 = on_device(quantized<nvfp4>(random_matrix(3, 64, 6, 1.0f), 3, 64, layout));
  check(cudaStreamSynchronize(stream));

  check_rejected(
      [&](float* c) {
        return cuda::gemm_with_shape<cuda::gemm_small_m>(
            a48.view(), m48.view(), matrix_view<float>::unchecked(c, 4, 3, 3), 1.0f, 0.0f, stream);
      },
      cuda::errc::invalid_argument, "not a multiple of the block sizes (16, 32)");
  check_rejected(
      [&](float* c) {
        return cuda::gemm(a40.view(), b40.view(), matrix_view<float>::unchecked(c, 4, 3, 3), 1.0f,
                          0.0f, stream);
      },
      cuda::errc::invalid_argument, "K = 40 is not a multiple of the block sizes");
  check_rejected(
      [&](float* c) {
        return cuda::gemm(a40.view(), b64.view(), matrix_view<float>::unchecked(c, 4, 3, 3), 1.0f,
                          0.0f, stream);
      },
      cuda::errc::invalid_argument, "same K");
  check_rejected(
      [&](float* c) {
        return cuda::gemm(a40.view(), b40.view(), matrix_view<float>::unchecked(c, 4, 4, 4), 1.0f,
                          0.0f, stream);
      },
      cuda::errc::invalid_argument, "c is 4 x 4");
  check_rejected(
      [&](float*) {
        return cuda::gemm(a64.view(), b64.view(), matrix_view<float>::unchecked(nullptr, 4, 3, 3),
                          1.0f, 0.0f, stream);
      },
      cuda::errc::invalid_argument, "c is null");
}
