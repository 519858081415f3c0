/// \file cuda/kernels/epilogue.hpp
/// The GEMM kernels' epilogue rule, one place for all of them (cuda/kernels/gemm.hpp and
/// gemm_w4a16.hpp), in double as the reference GEMM (host/gemm_reference.hpp): given the scaled
/// product p = t · acc, r = alpha · p (beta == 0: C is not read) or fma(alpha, p, beta · C),
/// rounded once to the output type.
#pragma once

#include <cmath>

#include "../../config.hpp"

namespace blockscale {
inline namespace v0 {
namespace cuda {
namespace kernels {

/// C's new value from the scaled product `p` and C's old value `c` (read only when beta != 0).
template <class Out>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE Out epilogue_value(double p, float alpha, float beta,
                                                                 const Out& c) {
  const double r =
      beta == 0.0f
          ? static_cast<double>(alpha) * p
          : std::fma(static_cast<double>(alpha), p,
                     static_cast<double>(beta) * static_cast<double>(static_cast<float>(c)));
  return Out(r);
}

} // namespace kernels
} // namespace cuda
} // namespace v0
} // namespace blockscale
