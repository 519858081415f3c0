// A scale format outside the presets and the registry: unsigned E6M2 (bias 31, NaN 0xFF only),
// 2^-32 .. 1.5 · 2^32, wider than any preset's but UE8M0's. Nothing in the library names it: the
// descriptor is all it takes, on the host (test_registry.cpp), in the warp dequantizer and the warp
// GEMM (test_warp_gemm_host.cpp), and through the Python bindings (tests/package/python_extension).
#pragma once

#include <blockscale/numeric/format.hpp>
#include <blockscale/numeric/minifloat.hpp>

#include <blockscale/block/block_format.hpp>

struct ue6m2_format {
  static constexpr int exponent_bits = 6;
  static constexpr int mantissa_bits = 2;
  static constexpr int bias = 31;
  static constexpr bool is_signed = false;
  static constexpr bool has_subnormals = true;
  static constexpr blockscale::nonfinite_encoding nonfinite =
      blockscale::nonfinite_encoding::nan_only;
};
using ue6m2 = blockscale::minifloat<ue6m2_format>;
using ue6m2_fp4 = blockscale::block_format<blockscale::e2m1, 16, ue6m2>;
