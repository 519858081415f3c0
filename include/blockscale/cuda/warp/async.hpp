/// \file cuda/warp/async.hpp
/// The objects Hopper's asynchronous units work on, shared by the device and the host emulation:
/// an `mbarrier` (a 64-bit word in shared memory that counts a phase's arrivals and transaction
/// bytes) and a `tensor_map` (the 128-byte TMA descriptor of a 2-D global tensor and its box).
///
/// A warp-specialised program (cuda/runner.cuh, `run_specialized`) uses them through its Warp
/// (cuda/warp.hpp): `mbarrier_init`, `mbarrier_arrive`, `mbarrier_arrive_expect_tx`,
/// `mbarrier_wait`, `tma_load_2d`, `tma_store_2d` with `tma_store_commit` / `tma_store_wait<N>`,
/// `fence_proxy_async`, `sync_cta`, and `setmaxnreg_inc<N>` / `setmaxnreg_dec<N>`. On the device
/// each is its PTX instruction (sm_90; setmaxnreg sm_90a), issued by lane 0 where the instruction
/// is one thread's; on the host emulation/host_async.hpp runs them, and fails loudly on a missing
/// fence, an uninitialised or over-arrived barrier, and a deadlock.
///
/// On the device a `tensor_map` holds a `CUtensorMap` (made by `cuda::make_tensor_map_2d`,
/// cuda/tensor_map.cuh, through the driver's `cuTensorMapEncodeTiled`) and must reach the kernel
/// as a `const __grid_constant__` parameter: keep it inside the program object, which the
/// specialised kernel takes that way. On the host `emulation::make_tensor_map_2d` fills the same
/// 128 bytes with the emulation's description. Both take a `tensor_map_2d_shape` and refuse what
/// `tensor_map_2d_problem` names.
#pragma once

#include <cstdint>
#include <string>

#include "../../config.hpp"
#include "wgmma.hpp"

namespace blockscale {
inline namespace v0 {
namespace cuda {
namespace warp {

/// An mbarrier: keep it in the program's shared storage (8-byte aligned), initialise it with
/// `mbarrier_init` before any warp uses it (and `sync_cta` after), and wait on a phase by its
/// parity: `mbarrier_wait(b, p)` returns once the phase of parity p has completed, that is while
/// the current phase's parity is not p. A fresh barrier is in phase 0, so waiting for parity 1
/// returns at once (the producer's first pass over an empty ring).
struct alignas(8) mbarrier {
  std::uint64_t state;
};

/// A TMA descriptor of a 2-D tensor (128 bytes, 64-byte aligned): see the file comment.
struct alignas(64) tensor_map {
  unsigned char bytes[128];
};

/// A 2-D tensor in global memory and the box TMA moves: `rows` × `cols` elements of
/// `element_bytes` bytes at `base`, rows `row_stride` bytes apart; boxes of `box_rows` ×
/// `box_cols` landing in shared memory row after row under `swizzle`.
struct tensor_map_2d_shape {
  const void* base = nullptr;
  int element_bytes = 0;
  std::uint64_t rows = 0, cols = 0, row_stride = 0;
  int box_rows = 0, box_cols = 0;
  smem_swizzle swizzle = smem_swizzle::none;
};

/// Why `s` cannot be a tensor map, naming the argument; empty when it can. The checks of
/// cuTensorMapEncodeTiled (a 16-byte aligned base and stride, 1 to 2^32 elements per dimension,
/// boxes of 1 to 256 with rows a multiple of 16 bytes, a swizzled row no wider than its swizzle),
/// and one of ours: a swizzled box row exactly as wide as the swizzle, the only kind the
/// emulation models. Both encoders — `emulation::make_tensor_map_2d` on the host and
/// `cuda::make_tensor_map_2d` on the device — refuse what this refuses.
inline std::string tensor_map_2d_problem(const tensor_map_2d_shape& s) {
  if (s.base == nullptr || reinterpret_cast<std::uintptr_t>(s.base) % 16 != 0)
    return "base must be a 16-byte aligned address";
  if (s.element_bytes != 1 && s.element_bytes != 2 && s.element_bytes != 4 && s.element_bytes != 8)
    return "element_bytes must be 1, 2, 4 or 8, not " + std::to_string(s.element_bytes);
  if (s.rows == 0 || s.cols == 0 || s.rows > (std::uint64_t{1} << 32) ||
      s.cols > (std::uint64_t{1} << 32))
    return "rows and cols must be 1 to 2^32";
  if (s.row_stride % 16 != 0 || s.row_stride < s.cols * static_cast<std::uint64_t>(s.element_bytes))
    return "row_stride must be a multiple of 16 bytes holding a row, not " +
           std::to_string(s.row_stride);
  if (s.box_rows < 1 || s.box_rows > 256 || s.box_cols < 1 || s.box_cols > 256)
    return "box_rows and box_cols must be 1 to 256";
  const int row_bytes = s.box_cols * s.element_bytes;
  if (row_bytes % 16 != 0)
    return "a box row must be a multiple of 16 bytes, not " + std::to_string(row_bytes);
  if (s.swizzle != smem_swizzle::none && row_bytes != swizzle_bytes(s.swizzle))
    return "a box row of " + std::to_string(row_bytes) + " bytes under a " +
           std::to_string(swizzle_bytes(s.swizzle)) +
           "-byte swizzle: box rows must be exactly as wide as the swizzle";
  return {};
}

} // namespace warp
} // namespace cuda
} // namespace v0
} // namespace blockscale
