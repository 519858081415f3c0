/// \file cuda/memory.hpp
/// The few memory accesses the CTA programs make that are not plain loads and stores: runs of
/// consecutive values read as floats (one 16-byte vector load per 16 bytes where the address
/// allows), and a block's bytes written with vector stores. `__host__ __device__`: on the host
/// the vector accesses are `memcpy`s of the same bytes, so the emulation takes the same branches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../config.hpp"

namespace blockscale {
inline namespace v0 {
namespace cuda {
namespace detail {

/// Whether `p` is aligned to `bytes` (a power of two).
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE bool is_aligned(const void* p,
                                                              std::size_t bytes) noexcept {
  return (reinterpret_cast<std::uintptr_t>(p) & (bytes - 1)) == 0;
}

/// Copies 16 bytes, both addresses 16-byte aligned.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE void copy16(void* to, const void* from) noexcept {
#if defined(__CUDA_ARCH__)
  *static_cast<uint4*>(to) = *static_cast<const uint4*>(from);
#else
  std::memcpy(to, from, 16);
#endif
}

/// Copies 8 bytes, both addresses 8-byte aligned.
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE void copy8(void* to, const void* from) noexcept {
#if defined(__CUDA_ARCH__)
  *static_cast<uint2*>(to) = *static_cast<const uint2*>(from);
#else
  std::memcpy(to, from, 8);
#endif
}

/// out[j] = float(p[j]) for j < valid, 0 for valid <= j < N. When all N are valid and `p` is
/// 16-byte aligned (N · sizeof(T) a multiple of 16), the values arrive in 16-byte loads.
template <int N, class T>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE void load_floats(const T* p, int valid,
                                                               float* out) noexcept {
  constexpr int bytes = N * static_cast<int>(sizeof(T));
  if (bytes % 16 == 0 && valid == N && is_aligned(p, 16)) {
    alignas(16) T staged[N];
    for (int i = 0; i < bytes / 16; ++i)
      copy16(reinterpret_cast<unsigned char*>(staged) + 16 * i,
             reinterpret_cast<const unsigned char*>(p) + 16 * i);
    for (int j = 0; j < N; ++j)
      out[j] = static_cast<float>(staged[j]);
    return;
  }
  for (int j = 0; j < N; ++j)
    out[j] = j < valid ? static_cast<float>(p[j]) : 0.0f;
}

/// Writes the N bytes of `from` (aligned to 16 where N >= 16) to `to`, which the caller has
/// aligned to min(N, 16).
template <int N>
BLOCKSCALE_HOST_DEVICE BLOCKSCALE_FORCEINLINE void store_bytes(std::uint8_t* to,
                                                               const std::uint8_t* from) noexcept {
  if constexpr (N % 16 == 0) {
    for (int i = 0; i < N; i += 16)
      copy16(to + i, from + i);
  } else if constexpr (N == 8) {
    copy8(to, from);
  } else {
    for (int i = 0; i < N; ++i)
      to[i] = from[i];
  }
}

} // namespace detail
} // namespace cuda
} // namespace v0
} // namespace blockscale
