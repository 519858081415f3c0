// test_cuda_kernels_host, float16 input: the quantize kernel run on the host against quantize_into
// for every preset (quantize_checks.hpp).
#include "quantize_checks.hpp"

using namespace kernels_host;

TEMPLATE_TEST_CASE("the quantize kernel equals quantize_into byte for byte, float16 input",
                   "[cuda][emulation]", nvfp4, mxfp4, ue5m3_fp4, mxfp8) {
  check_format_and_type<TestType, float16>();
}
