// The device usage example of docs/cuda.md, compiled for every CUDA architecture and run as a
// test on a machine with a device (exit 77, skipped, without one).
#include <blockscale/blockscale.hpp>
#include <blockscale/cuda/quantize.cuh>
#include <cstdio>
#include <vector>

int main() {
  using namespace blockscale;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    return 77;
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  const std::size_t rows = 256, cols = 1024;
  std::vector<bfloat16> host_x(rows * cols);
  for (std::size_t i = 0; i < host_x.size(); ++i)
    host_x[i] = bfloat16(static_cast<float>((i * 37) % 101) - 50.0f);

  // The input in device memory: a matrix_view of device pointers (unchecked: the host cannot
  // look at them). __nv_bfloat16 data is viewed the same way, through reinterpret_cast.
  cuda::device_allocation x_memory(host_x.size() * sizeof(bfloat16), stream);
  cudaMemcpyAsync(x_memory.data(), host_x.data(), x_memory.size(), cudaMemcpyHostToDevice, stream);
  const auto x = matrix_view<const bfloat16>::unchecked(
      reinterpret_cast<const bfloat16*>(x_memory.data()), rows, cols, cols);

  // Rowwise and columnwise NVFP4 from one read, scales in the tensor-core layout.
  quantize_options rowwise, columnwise;
  rowwise.layout = columnwise.layout = scale_layout::tensor_core;
  columnwise.columnwise = true;
  cuda::device_quantized_matrix<nvfp4> q(quantized_shape_for(rows, cols, rowwise), stream);
  cuda::device_quantized_matrix<nvfp4> qt(quantized_shape_for(rows, cols, columnwise), stream);
  cuda::status s = cuda::quantize_into(x, q.view(), rowwise, qt.view(), columnwise, stream);
  if (!s) { // a bad argument: nothing was queued, and the message says what is wrong
    std::printf("%s\n", s.message().c_str());
    return 1;
  }

  // A training step under the UE5M3 recipe's periodic tensor scale, its state on the device.
  cuda::device_tensor_scale<periodic_tensor_scale> policy(
      periodic_tensor_scale::make<ue5m3_fp4>(100, 8), stream);
  cuda::device_quantized_matrix<ue5m3_fp4> u(quantized_shape_for(rows, cols, {}), stream);
  s = cuda::quantize_into(x, u.view(), policy, {}, stream);

  // Back on the host: the same bytes as host quantize_into.
  quantized_matrix<nvfp4> back(q.shape());
  if (s)
    s = q.copy_to(back, stream);
  cudaStreamSynchronize(stream);
  const quantized_matrix<nvfp4> expected =
      quantize<nvfp4>(matrix_view<const bfloat16>(host_x.data(), rows, cols), rowwise);
  std::printf("device == host: %s\n", s && back == expected ? "yes" : "no");
  cudaStreamDestroy(stream);
  return s && back == expected ? 0 : 1;
}
