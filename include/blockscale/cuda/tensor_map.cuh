/// \file cuda/tensor_map.cuh
/// `make_tensor_map_2d`: the TMA descriptor (`CUtensorMap`) of a 2-D tensor and its box, made by
/// the driver's `cuTensorMapEncodeTiled`, for the warp-specialised programs of cuda/warp/async.hpp.
/// The driver function is reached through the runtime (`cudaGetDriverEntryPointByVersion`), so
/// nothing links against libcuda.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <string>

#include "status.hpp"
#include "warp/async.hpp"

namespace blockscale {
inline namespace v0 {
namespace cuda {

/// Fills `map` with the tensor map of `shape` (zeros outside the tensor, no L2 promotion, no
/// interleave). Refuses what `warp::tensor_map_2d_problem` names (errc::invalid_argument, `map`
/// untouched), and reports the driver's refusal as errc::cuda_error.
inline status make_tensor_map_2d(const warp::tensor_map_2d_shape& shape, warp::tensor_map& map) {
  const std::string problem = warp::tensor_map_2d_problem(shape);
  if (!problem.empty())
    return {errc::invalid_argument, "make_tensor_map_2d: " + problem};
  static_assert(sizeof(CUtensorMap) == sizeof(warp::tensor_map), "a tensor map is 128 bytes");
  using encode_fn =
      CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t got = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &entry, 12000,
                                                           cudaEnableDefault, &found);
  if (got != cudaSuccess || found != cudaDriverEntryPointSuccess || entry == nullptr) {
    (void)cudaGetLastError();
    return {errc::cuda_error,
            "make_tensor_map_2d: the driver has no cuTensorMapEncodeTiled (CUDA 12 or later)",
            static_cast<int>(got)};
  }
  const CUtensorMapDataType type = shape.element_bytes == 1   ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                   : shape.element_bytes == 2 ? CU_TENSOR_MAP_DATA_TYPE_UINT16
                                   : shape.element_bytes == 4 ? CU_TENSOR_MAP_DATA_TYPE_UINT32
                                                              : CU_TENSOR_MAP_DATA_TYPE_UINT64;
  const CUtensorMapSwizzle swizzle =
      shape.swizzle == warp::smem_swizzle::bytes32    ? CU_TENSOR_MAP_SWIZZLE_32B
      : shape.swizzle == warp::smem_swizzle::bytes64  ? CU_TENSOR_MAP_SWIZZLE_64B
      : shape.swizzle == warp::smem_swizzle::bytes128 ? CU_TENSOR_MAP_SWIZZLE_128B
                                                      : CU_TENSOR_MAP_SWIZZLE_NONE;
  const cuuint64_t dims[2] = {shape.cols, shape.rows};
  const cuuint64_t strides[1] = {shape.row_stride};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(shape.box_cols),
                             static_cast<cuuint32_t>(shape.box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  CUtensorMap encoded;
  const CUresult r = reinterpret_cast<encode_fn>(entry)(
      &encoded, type, 2, const_cast<void*>(shape.base), dims, strides, box, element_strides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_NONE,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return {errc::cuda_error,
            "make_tensor_map_2d: cuTensorMapEncodeTiled failed (CUresult " + std::to_string(r) +
                ")",
            static_cast<int>(r)};
  static_assert(alignof(warp::tensor_map) >= 64, "a tensor map is 64-byte aligned");
  std::memcpy(map.bytes, &encoded, sizeof encoded);
  return {};
}

} // namespace cuda
} // namespace v0
} // namespace blockscale
