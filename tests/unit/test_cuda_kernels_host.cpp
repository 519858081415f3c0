// The CUDA kernels' code run on the host: each launcher of cuda/launch.hpp with the host runner,
// which executes the kernels' CTA programs thread block by thread block, phase by phase, lanes
// through host_warp. Every output is compared byte for byte with the host quantizer
// (quantize_into) for every preset, input type, direction (rowwise, columnwise, both from one
// read), block shape (1×B, B×B), scale layout, element rounding, scale rule, the Hadamard
// transform, on ragged shapes with padded leading dimensions and with NaN, Inf and zero blocks;
// then the amax, the dequantizer, the device tensor-scale policies over several steps, and the
// launchers' argument checks. The quantize kernel's cases are in test_cuda_kernels_host/, one
// translation unit per input type, so that the build's cores share them.
#include <blockscale/blockscale.hpp>
#include <blockscale/cuda/launch.hpp>
#include <blockscale/emulation/host_runner.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "bank_conflicts.hpp"
#include "catch.hpp"
#include "kernel_cases.hpp"
#include "quantized_bytes.hpp"
#include "same_stats.hpp"
#include "splitmix64.hpp"

using namespace blockscale;
using namespace kernel_cases;

namespace {

// The quantize kernels' shared tile (cuda/kernels/quantize.hpp): every warp's 16-byte stores in
// the rows pass and 4-byte loads in the columns pass, through the program's own tile_word and lane
// maps, must be free of bank conflicts.
template <class Program>
void check_tile_banks() {
  if constexpr (Program::transposes) {
    constexpr int unit_words = Program::unit_words;
    for (int w = 0; w < Program::warps; ++w) {
      for (int i = 0; i < Program::units_per_warp; ++i)
        for (int chunk = 0; chunk < unit_words; chunk += 4) {
          lane_offsets stores{};
          for (int lane = 0; lane < 32; ++lane) {
            const int word = Program::rows_pass_col(w, lane) / Program::per_word + chunk;
            stores[static_cast<std::size_t>(lane)] =
                4 * Program::tile_word(Program::rows_pass_row(w, lane, i), word);
          }
          INFO("warp " << w << ", unit " << i << ", chunk " << chunk / 4);
          CHECK(worst_bank_load(stores, unit_words % 4 == 0 ? 16 : 4) == 1);
        }
      constexpr int b = Program::column_block;
      for (int k = 0; k < Program::column_rows / b; ++k)
        for (int j = 0; j < b; ++j) {
          lane_offsets loads{};
          for (int lane = 0; lane < 32; ++lane)
            loads[static_cast<std::size_t>(lane)] =
                4 * Program::tile_word(Program::columns_pass_row(w, lane, k, b) + j,
                                       Program::columns_pass_word(w, lane));
          INFO("warp " << w << ", block " << k << ", row " << j);
          CHECK(worst_bank_load(loads, 4) == 1);
        }
    }
  }
}

template <class T>
void check_tile_banks_for() {
  using none = cuda::no_quantize_output;
  using nv = cuda::quantize_output<nvfp4, round_nearest_even, round_nearest_even>;
  using mx = cuda::quantize_output<mxfp4, round_down, round_nearest_even>;
  using mx8 = cuda::quantize_output<mxfp8, round_down, round_nearest_even>;
  check_tile_banks<cuda::quantize_program<T, none, nv>>();
  check_tile_banks<cuda::quantize_program<T, none, mx>>();
  check_tile_banks<cuda::quantize_program<T, nv, nv>>();
  check_tile_banks<cuda::quantize_program<T, mx, mx>>();
  check_tile_banks<cuda::quantize_program<T, mx8, mx8>>();
}

} // namespace

TEST_CASE("the quantize kernels' shared tile is free of bank conflicts", "[cuda][emulation]") {
  check_tile_banks_for<bfloat16>();
  check_tile_banks_for<float16>();
  check_tile_banks_for<float>();
}

namespace {

template <class F, class T>
void check_dequantize(const quantized_matrix<F>& q, bool padded, std::size_t extra_ld) {
  emulation::host_runner runner;
  const std::size_t cols = padded ? q.padded_cols() : q.cols();
  const std::size_t ld = cols + extra_ld;
  std::vector<T> host(q.rows() * ld + 1, T(-7.0f)), device(q.rows() * ld + 1, T(-7.0f));
  const matrix_view<T> host_out(host.data(), q.rows(), cols, ld);
  const matrix_view<T> device_out(device.data(), q.rows(), cols, ld);
  if (padded)
    dequantize_padded(q, host_out);
  else
    dequantize(q, host_out);
  REQUIRE(cuda::launch_dequantize(runner, q.view(), device_out, padded).ok());
  CHECK(std::memcmp(host.data(), device.data(), host.size() * sizeof(T)) == 0);
}

template <class F>
void check_dequantize_format() {
  std::uint64_t seed = 11;
  for (const shape_case& s : shapes)
    for (bool hadamard : {false, true})
      for (scale_layout layout : {scale_layout::row_major, scale_layout::tensor_core}) {
        const std::vector<float> data = make_input<float>(s, ++seed, true);
        quantize_options options;
        options.hadamard = hadamard;
        options.layout = layout;
        options.encode_scale = 0.25f;
        const auto q =
            quantize<F>(matrix_view<const float>(data.data(), s.rows, s.cols, s.ld), options);
        INFO("shape " << s.rows << " x " << s.cols << ", hadamard " << hadamard);
        for (bool padded : {false, true})
          for (std::size_t extra : {0u, 3u}) {
            check_dequantize<F, float>(q, padded, extra);
            check_dequantize<F, bfloat16>(q, padded, extra);
            check_dequantize<F, float16>(q, padded, extra);
          }
      }
}

} // namespace

TEMPLATE_TEST_CASE("the dequantize kernel equals dequantize", "[cuda][emulation]", nvfp4, mxfp4,
                   ue5m3_fp4, mxfp8) {
  check_dequantize_format<TestType>();
}

// Every scale code with every element code, under decode scales that keep every product normal,
// push it to subnormals or past FLT_MAX, or leave the short body (s_dec · 2^d overflowing, NaN,
// Inf): the kernel's short body (E2M1) and its value-by-value path against the host's dequantize.
// UE8M0 codes from 253 up overflow v · S in the reference's float; the short body must not
// differ there.
TEMPLATE_TEST_CASE("the dequantize kernel equals dequantize for every scale and element code",
                   "[cuda][emulation]", nvfp4, mxfp4, ue5m3_fp4, mxfp8) {
  using F = TestType;
  constexpr std::size_t b = F::block_size;
  const float decode_scales[] = {1.0f,     0.25f,    0x1p-140f, 1e-30f,   3e30f,
                                 0x1p100f, 0x1p103f, 0.0f,      INFINITY, NAN};
  for (scale_layout layout : {scale_layout::row_major, scale_layout::tensor_core})
    for (std::size_t cols : {b * 64, b * 64 + 5}) {
      quantize_options options;
      options.layout = layout;
      quantized_matrix<F> q(quantized_shape_for(256, cols, options));
      const quantized_view<F> v = q.view();
      for (std::size_t r = 0; r < v.rows(); ++r) {
        for (std::size_t kb = 0; kb < v.blocks_per_row(); ++kb)
          v.scales()[v.scale_index(r, kb)] = static_cast<std::uint8_t>(r + 3 * kb);
        for (std::size_t i = 0; i < v.row_bytes(); ++i)
          v.row(r)[i] = static_cast<std::uint8_t>(7 * r + 13 * i);
      }
      for (float s_dec : decode_scales) {
        INFO("layout " << static_cast<int>(layout) << ", cols " << cols << ", s_dec " << s_dec);
        *v.decode_scale_data() = s_dec;
        check_dequantize<F, float>(q, false, 0);
        check_dequantize<F, bfloat16>(q, false, 0);
        check_dequantize<F, float16>(q, false, 3);
      }
    }
}

namespace {

// Policy fields that say where it stands, to compare a device-driven policy with the host's.
template <class Policy>
void check_same_policy(const Policy& device, const Policy& host) {
  CHECK(float_bits(device.encode_scale()) == float_bits(host.encode_scale()));
  CHECK(device.needs_amax() == host.needs_amax());
  CHECK(device.amax_measurements() == host.amax_measurements());
  CHECK(device.calls == host.calls);
}

template <class F, class Policy>
void check_policy_steps(Policy policy, quantize_options options, int steps) {
  const shape_case s{45, 70, 72};
  Policy host_policy = policy;
  cuda::tensor_scale_state<Policy> state{};
  state.policy = policy;
  emulation::host_runner runner;
  runner.order_seed = 17;
  for (int step = 0; step < steps; ++step) {
    INFO("step " << step);
    options.offset = static_cast<std::uint64_t>(step);
    const std::vector<float> data = step_input(s, step, 1234);
    const matrix_view<const float> x(data.data(), s.rows, s.cols, s.ld);
    quantized_matrix<F> host(quantized_shape_for(s.rows, s.cols, options));
    const quantize_stats host_stats = quantize_into(x, host.view(), host_policy, options);
    quantized_matrix<F> device = garbage_matrix<F>(host.shape());
    REQUIRE(cuda::launch_policy_step(runner, x, device.view(), &state, options).ok());
    check_same_matrix(device, host);
    check_same_stats(state.last, host_stats);
    check_same_policy(state.policy, host_policy);
    CHECK(state.quantize_done == 0);
    CHECK(state.amax_done == 0);
  }
}

} // namespace

TEST_CASE("device tensor-scale policies step as the host's", "[cuda][emulation]") {
  quantize_options options;
  SECTION("current, NVFP4") {
    check_policy_steps<nvfp4>(current_tensor_scale::make<nvfp4>(), options, 6);
  }
  SECTION("periodic, UE5M3: refreshes on schedule and after a saturated block") {
    check_policy_steps<ue5m3_fp4>(periodic_tensor_scale::make<ue5m3_fp4>(3, 8), options, 12);
  }
  SECTION("periodic, columnwise with the transform and stochastic rounding") {
    options.columnwise = true;
    options.hadamard = true;
    options.rounding = element_rounding::stochastic;
    check_policy_steps<ue5m3_fp4>(periodic_tensor_scale::make<ue5m3_fp4>(2, 4), options, 8);
  }
  SECTION("delayed, NVFP4: the amax from the quantizing pass") {
    check_policy_steps<nvfp4>(delayed_tensor_scale::make<nvfp4>(4, 0), options, 8);
  }
  SECTION("none, MXFP4") {
    check_policy_steps<mxfp4>(no_tensor_scale{}, options, 3);
  }
}

TEST_CASE("a periodic policy skips the amax pass on the device between refreshes",
          "[cuda][emulation]") {
  const shape_case s{64, 64, 64};
  const std::vector<float> data = make_input<float>(s, 5, false);
  const matrix_view<const float> x(data.data(), s.rows, s.cols, s.ld);
  cuda::tensor_scale_state<periodic_tensor_scale> state{};
  state.policy = periodic_tensor_scale::make<ue5m3_fp4>(4, 8);
  quantized_matrix<ue5m3_fp4> q(quantized_shape_for(s.rows, s.cols, {}));
  emulation::host_runner runner;
  std::vector<std::uint64_t> measurements;
  for (int step = 0; step < 9; ++step) {
    REQUIRE(cuda::launch_policy_step(runner, x, q.view(), &state, {}).ok());
    measurements.push_back(state.policy.amax_measurements());
  }
  CHECK(measurements == std::vector<std::uint64_t>{1, 1, 1, 1, 2, 2, 2, 2, 3});
}

TEST_CASE("a policy step split for an all-reduce of the amax equals the host's amax hook",
          "[cuda][emulation]") {
  const shape_case s{40, 48, 48};
  quantize_options options;
  const float other_rank_amax = 1000.0f; // the all-reduce's max over the other ranks
  current_tensor_scale host_policy = current_tensor_scale::make<nvfp4>();
  cuda::tensor_scale_state<current_tensor_scale> state{};
  state.policy = host_policy;
  emulation::host_runner runner;
  for (int step = 0; step < 3; ++step) {
    const std::vector<float> data = step_input(s, step, 77);
    const matrix_view<const float> x(data.data(), s.rows, s.cols, s.ld);
    quantized_matrix<nvfp4> host(quantized_shape_for(s.rows, s.cols, options));
    quantize_into(x, host.view(), host_policy, options,
                  [&](float amax) { return amax > other_rank_amax ? amax : other_rank_amax; });
    quantized_matrix<nvfp4> device = garbage_matrix<nvfp4>(host.shape());
    REQUIRE(cuda::launch_policy_measure<nvfp4>(runner, x, &state, options, false).ok());
    state.amax_bits = std::max(state.amax_bits, float_bits(other_rank_amax)); // the all-reduce
    REQUIRE(cuda::launch_policy_apply<nvfp4>(runner, &state, options).ok());
    REQUIRE(cuda::launch_policy_quantize(runner, x, device.view(), &state, options).ok());
    check_same_matrix(device, host);
    check_same_policy(state.policy, host_policy);
  }
}

TEST_CASE("pairs under two device policies step as the host's pair", "[cuda][emulation]") {
  const shape_case s{50, 66, 66};
  quantize_options row, column;
  column.columnwise = true;
  column.hadamard = true;
  column.rounding = element_rounding::stochastic;
  periodic_tensor_scale host_row = periodic_tensor_scale::make<ue5m3_fp4>(3, 8);
  current_tensor_scale host_column = current_tensor_scale::make<nvfp4>();
  cuda::tensor_scale_state<periodic_tensor_scale> row_state{};
  cuda::tensor_scale_state<current_tensor_scale> column_state{};
  row_state.policy = host_row;
  column_state.policy = host_column;
  emulation::host_runner runner;
  for (int step = 0; step < 7; ++step) {
    INFO("step " << step);
    row.offset = column.offset = static_cast<std::uint64_t>(step);
    const std::vector<float> data = step_input(s, step, 555);
    const matrix_view<const float> x(data.data(), s.rows, s.cols, s.ld);
    quantized_matrix<ue5m3_fp4> host_r(quantized_shape_for(s.rows, s.cols, row));
    quantized_matrix<nvfp4> host_c(quantized_shape_for(s.rows, s.cols, column));
    const quantize_pair_stats stats =
        quantize_into(x, host_r.view(), host_row, row, host_c.view(), host_column, column);
    quantized_matrix<ue5m3_fp4> device_r = garbage_matrix<ue5m3_fp4>(host_r.shape());
    quantized_matrix<nvfp4> device_c = garbage_matrix<nvfp4>(host_c.shape());
    REQUIRE(cuda::launch_policy_step(runner, x, device_r.view(), &row_state, row, device_c.view(),
                                     &column_state, column)
                .ok());
    check_same_matrix(device_r, host_r);
    check_same_matrix(device_c, host_c);
    check_same_stats(row_state.last, stats.rowwise);
    check_same_stats(column_state.last, stats.columnwise);
    check_same_policy(row_state.policy, host_row);
    check_same_policy(column_state.policy, host_column);
  }
}

TEST_CASE("launchers check their arguments before anything runs", "[cuda][emulation]") {
  emulation::host_runner runner;
  const shape_case s{8, 32, 32};
  const std::vector<float> data = make_input<float>(s, 1, false);
  const matrix_view<const float> x(data.data(), s.rows, s.cols, s.ld);
  quantized_matrix<nvfp4> q(quantized_shape_for(s.rows, s.cols, {}));
  const auto message = [](const cuda::status& st) { return st.message(); };
  const auto contains = [](const std::string& text, const char* part) {
    return text.find(part) != std::string::npos;
  };

  SECTION("a null input with elements") {
    const auto bad = matrix_view<const float>::unchecked(nullptr, 8, 32, 32);
    const cuda::status st = cuda::launch_quantize(runner, bad, q.view());
    CHECK(st.code() == cuda::errc::invalid_argument);
    CHECK(contains(message(st), "x is null"));
  }
  SECTION("an output of another shape") {
    quantized_matrix<nvfp4> other(quantized_shape_for(9, 32, {}));
    const cuda::status st = cuda::launch_quantize(runner, x, other.view());
    CHECK(st.code() == cuda::errc::invalid_argument);
    CHECK(contains(message(st), "is 9 x 32"));
  }
  SECTION("a rowwise output for a columnwise quantization") {
    quantize_options options;
    options.columnwise = true;
    const cuda::status st = cuda::launch_quantize(runner, x, q.view(), options);
    CHECK(contains(message(st), "rowwise but the options say columnwise"));
  }
  SECTION("bad options") {
    quantize_options options;
    options.encode_scale = -1.0f;
    CHECK(contains(message(cuda::launch_quantize(runner, x, q.view(), options)), "encode_scale"));
  }
  SECTION("null and misaligned buffers") {
    auto view = q.view();
    const auto null_elements = quantized_view<nvfp4>::unchecked(
        view.shape(), nullptr, view.scales(), view.decode_scale_data());
    CHECK(contains(message(cuda::launch_quantize(runner, x, null_elements)), "null elements"));
    const auto null_scale =
        quantized_view<nvfp4>::unchecked(view.shape(), view.elements(), view.scales(), nullptr);
    CHECK(contains(message(cuda::launch_quantize(runner, x, null_scale)), "null decode scale"));
    std::vector<std::uint8_t> bytes(q.storage().element_bytes + 16);
    std::uint8_t* odd = bytes.data() + (8 - reinterpret_cast<std::uintptr_t>(bytes.data()) % 8) + 1;
    const auto misaligned = quantized_view<nvfp4>::unchecked(view.shape(), odd, view.scales(),
                                                             view.decode_scale_data());
    const cuda::status st = cuda::launch_quantize(runner, x, misaligned);
    CHECK(st.code() == cuda::errc::misaligned);
    CHECK(contains(message(st), "aligned to 8 bytes"));
  }
  SECTION("a dequantize output of another shape") {
    std::vector<float> out(8 * 31);
    const cuda::status st =
        cuda::launch_dequantize(runner, q.view(), matrix_view<float>(out.data(), 8, 31));
    CHECK(contains(message(st), "expected 8 x 32"));
  }
  SECTION("amax without a destination, or tiles with the transform") {
    CHECK(contains(message(cuda::launch_amax(runner, x, nullptr)), "amax_bits is null"));
    std::uint32_t bits = 0;
    float tiles[4];
    quantize_options options;
    options.hadamard = true;
    CHECK(contains(message(cuda::launch_amax(runner, x, &bits, options, tiles)), "tile amaxes"));
  }
  SECTION("a policy whose rule target could overflow s_enc / target") {
    cuda::tensor_scale_state<current_tensor_scale> state{};
    quantize_options options;
    options.rule = scale_rule{0.5f, scale_rounding::nearest_even};
    CHECK(contains(message(cuda::launch_policy_step(runner, x, q.view(), &state, options)),
                   "target >= 1"));
    CHECK(contains(message(cuda::launch_policy_step<nvfp4, float, current_tensor_scale>(
                       runner, x, q.view(), nullptr, {})),
                   "policy state is null"));
  }
  CHECK(runner.launches == 0);
}
