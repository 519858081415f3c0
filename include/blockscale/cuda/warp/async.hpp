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
/// On the device a `tensor_map` holds a `CUtensorMap` (made by the driver's
/// `cuTensorMapEncodeTiled`) and must reach the kernel as a `const __grid_constant__` parameter:
/// keep it inside the program object, which the specialised kernel takes that way. On the host
/// `emulation::make_tensor_map_2d` fills the same 128 bytes with the emulation's description.
#pragma once

#include <cstdint>

#include "../../config.hpp"

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

} // namespace warp
} // namespace cuda
} // namespace v0
} // namespace blockscale
