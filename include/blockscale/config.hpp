/// \file config.hpp
/// Build configuration: the version (the one place it is written; CMake reads it from here), the
/// language check, and the host/device macros every header uses.
#pragma once

#if !defined(__cplusplus) || (__cplusplus < 201703L && !defined(_MSVC_LANG))
#error "blockscale requires C++17 or later"
#endif

#define BLOCKSCALE_VERSION_MAJOR 0
#define BLOCKSCALE_VERSION_MINOR 2
#define BLOCKSCALE_VERSION_PATCH 0
/// The version as one number, major * 10000 + minor * 100 + patch.
#define BLOCKSCALE_VERSION                                                                         \
  (BLOCKSCALE_VERSION_MAJOR * 10000 + BLOCKSCALE_VERSION_MINOR * 100 + BLOCKSCALE_VERSION_PATCH)

/// `__host__ __device__` under a CUDA compiler, nothing otherwise.
#if defined(__CUDACC__) || defined(__HIPCC__)
#define BLOCKSCALE_HOST_DEVICE __host__ __device__
#else
#define BLOCKSCALE_HOST_DEVICE
#endif

/// Put before a `BLOCKSCALE_HOST_DEVICE` function template that one nvcc translation unit
/// instantiates both for the device Warp and for a host-only one (a warp-specialised program run
/// on the GPU and by emulation/host_async.hpp's warps, whose calls are host functions): nvcc's
/// `nv_exec_check_disable`, without which it refuses the host instantiation. Nothing elsewhere.
#if defined(__CUDACC__) && !defined(__HIPCC__)
#define BLOCKSCALE_HD_TEMPLATE _Pragma("nv_exec_check_disable")
#else
#define BLOCKSCALE_HD_TEMPLATE
#endif

/// Forces inlining of the per-element codec functions, whose call overhead would otherwise dominate
/// the loops that call them.
/// Full unrolling of a loop with a compile-time trip count in device code (register arrays stay
/// in registers only when every index is a constant); nothing in host passes.
#if defined(__CUDA_ARCH__)
#define BLOCKSCALE_UNROLL _Pragma("unroll")
#else
#define BLOCKSCALE_UNROLL
#endif

#if defined(__CUDACC__)
#define BLOCKSCALE_FORCEINLINE __forceinline__
#elif defined(__GNUC__) || defined(__clang__)
#define BLOCKSCALE_FORCEINLINE inline __attribute__((always_inline))
#elif defined(_MSC_VER)
#define BLOCKSCALE_FORCEINLINE __forceinline
#else
#define BLOCKSCALE_FORCEINLINE inline
#endif
