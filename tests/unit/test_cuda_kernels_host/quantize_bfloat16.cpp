// test_cuda_kernels_host, bfloat16 input: the quantize kernel run on the host against quantize_into
// for every preset (quantize_checks.hpp).
#include "quantize_checks.hpp"

using namespace kernels_host;

TEMPLATE_TEST_CASE("the quantize kernel equals quantize_into byte for byte, bfloat16 input",
                   "[cuda][emulation]", nvfp4, mxfp4, ue5m3_fp4, mxfp8) {
  check_format_and_type<TestType, bfloat16>();
}

TEST_CASE("a pair whose outputs round differently is two launches, still equal to the host",
          "[cuda][emulation]") {
  emulation::host_runner runner;
  const shape_case s{70, 130, 131};
  const std::vector<bfloat16> data = make_input<bfloat16>(s, 99, true);
  quantize_options row;
  row.rounding = element_rounding::stochastic;
  row.seed = 5;
  quantize_options column;
  column.columnwise = true;
  column.rule = scale_rule{6.0f, scale_rounding::up};
  column.hadamard = true;
  check_pair<ue5m3_fp4>(s, data, row, column, runner);
  CHECK(runner.launches == 2);
  runner.launches = 0;
  column = row;
  column.columnwise = true;
  check_pair<ue5m3_fp4>(s, data, row, column, runner);
  CHECK(runner.launches == 1);
}

namespace {

template <class F, class T>
void check_amax(const shape_case& s, const std::vector<T>& data, const quantize_options& options,
                std::size_t persistent) {
  emulation::host_runner runner;
  runner.persistent = persistent;
  const matrix_view<const T> x(data.data(), s.rows, s.cols, s.ld);
  std::uint32_t bits = 0;
  const bool tiles = !options.hadamard;
  const std::size_t tile_rows = (s.rows + 15) / 16, tile_cols = (s.cols + 15) / 16;
  std::vector<float> tile_amax(tile_rows * tile_cols, -1.0f);
  REQUIRE(cuda::launch_amax(runner, x, &bits, options, tiles ? tile_amax.data() : nullptr).ok());
  CHECK(bits == float_bits(measure_amax<F>(x, options)));
  if (!tiles)
    return;
  for (std::size_t tr = 0; tr < tile_rows; ++tr)
    for (std::size_t tc = 0; tc < tile_cols; ++tc) {
      std::uint32_t want = 0;
      for (std::size_t r = tr * 16; r < s.rows && r < tr * 16 + 16; ++r)
        for (std::size_t c = tc * 16; c < s.cols && c < tc * 16 + 16; ++c)
          want = codec::amax_bits(want, static_cast<float>(x(r, c)));
      CHECK(float_bits(tile_amax[tr * tile_cols + tc]) == float_bits(codec::amax_value(want)));
    }
}

} // namespace

TEMPLATE_TEST_CASE("the amax kernel equals measure_amax, and its tile amaxes the tiles'",
                   "[cuda][emulation]", float, bfloat16, float16) {
  std::uint64_t seed = 3;
  for (const shape_case& s : shapes)
    for (bool specials : {false, true})
      for (bool columnwise : {false, true})
        for (bool hadamard : {false, true})
          for (std::size_t persistent : {1u, 2u, 7u}) {
            INFO("shape " << s.rows << " x " << s.cols << ", specials " << specials
                          << ", columnwise " << columnwise << ", hadamard " << hadamard << ", grid "
                          << persistent);
            const std::vector<TestType> data = make_input<TestType>(s, ++seed, specials);
            quantize_options options;
            options.columnwise = columnwise;
            options.hadamard = hadamard;
            options.transform = hadamard16::from_seed(seed);
            check_amax<nvfp4>(s, data, options, persistent);
          }
}
