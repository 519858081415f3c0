// test_cuda_quantize, bfloat16 input: device quantization against quantize_into for every preset
// (quantize_checks.cuh).
#include "quantize_checks.cuh"

using namespace device_quantize;

TEMPLATE_TEST_CASE("device quantization equals quantize_into byte for byte, bfloat16 input",
                   "[cuda]", nvfp4, mxfp4, ue5m3_fp4, mxfp8) {
  check_matrix_on_device<TestType, bfloat16>();
}
