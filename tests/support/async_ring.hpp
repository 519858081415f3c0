// A warp-specialised test program (emulation/host_async.hpp, cuda/runner.cuh): a producer warp
// feeding a ring of shared-memory stages by TMA under mbarriers, two consumer warps transforming
// the tiles and storing them by TMA, and the bugs the host test plants in it one at a time. The
// host test runs it through the emulation (tests/unit/test_async_host.cpp); tests/cuda/
// async_kernels.cu compiles it for sm_90a for the static check.
#pragma once

#include <blockscale/config.hpp>
#include <blockscale/cuda/warp.hpp>
#include <blockscale/cuda/warp/async.hpp>
#include <blockscale/cuda/warp/wgmma.hpp>

#include <cstdint>
#include <cstring>

namespace blockscale_test {
namespace async_ring {

using blockscale::cuda::cta_coord;
using blockscale::cuda::warp::mbarrier;
using blockscale::cuda::warp::smem_swizzle;
using blockscale::cuda::warp::tensor_map;
namespace cuda = blockscale::cuda;

constexpr int stages = 3;
constexpr int consumers = 2;
constexpr int box_rows = 16; // consumer c takes rows [8c, 8c + 8) of each tile
constexpr int max_row_bytes = 128;

/// The bugs the tests plant, one at a time.
enum class bug {
  none,
  consumer_skips_full_wait,  // reads a stage before its load has landed
  consumer_wrong_parity,     // waits for the phase before the one it needs
  producer_skips_empty_wait, // refills a stage the consumers may still read
  producer_wrong_parity,     // waits for an empty phase that never comes
  missing_proxy_fence,       // TMA-stores bytes written by ordinary stores, unpublished
  no_init,                   // uses the barriers uninitialised
  return_before_barrier,     // a consumer returns while the others wait at sync_cta
};

/// out = 3 · in + 1 on 16-bit elements, tile by tile: warp 0 loads each tile into the next stage
/// of the ring, warps 1 and 2 transform their halves into their own buffers and TMA-store them.
struct ring_program {
  static constexpr int warps = 1 + consumers;
  struct shared_storage {
    alignas(1024) unsigned char stage[stages][box_rows * max_row_bytes];
    alignas(1024) unsigned char out[consumers][(box_rows / consumers) * max_row_bytes];
    mbarrier full[stages];
    mbarrier empty[stages];
  };

  tensor_map in, out;
  int tiles_x, tiles_y, box_cols;
  smem_swizzle swizzle;
  bug planted = bug::none;

  BLOCKSCALE_HOST_DEVICE int tiles() const { return tiles_x * tiles_y; }
  /// Where element (row, col) of a stage lies.
  BLOCKSCALE_HOST_DEVICE int stage_offset(int row, int col) const {
    const int logical = row * box_cols * 2 + col * 2;
    return static_cast<int>(
        cuda::warp::swizzle_address(swizzle, static_cast<std::uint32_t>(logical)));
  }

  BLOCKSCALE_HD_TEMPLATE
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE void run(Warp& warp, cta_coord cta, shared_storage& shared) const {
    if (warp.index() == 0 && planted != bug::no_init)
      for (int s = 0; s < stages; ++s) {
        warp.mbarrier_init(shared.full[s], 1);
        warp.mbarrier_init(shared.empty[s], consumers);
      }
    warp.sync_cta();
    const int box_bytes = box_rows * box_cols * 2;
    if (warp.index() == 0) {
      int k = 0; // this CTA's tile count so far
      for (int t = static_cast<int>(cta.index); t < tiles();
           t += static_cast<int>(cta.count), ++k) {
        const int s = k % stages;
        const auto parity = static_cast<std::uint32_t>((k / stages) & 1);
        if (planted == bug::producer_wrong_parity)
          warp.mbarrier_wait(shared.empty[s], parity);
        else if (planted != bug::producer_skips_empty_wait)
          warp.mbarrier_wait(shared.empty[s], parity ^ 1);
        warp.mbarrier_arrive_expect_tx(shared.full[s], static_cast<std::uint32_t>(box_bytes));
        warp.tma_load_2d(shared.stage[s], in, (t % tiles_x) * box_cols, (t / tiles_x) * box_rows,
                         shared.full[s]);
      }
    } else {
      if (planted == bug::return_before_barrier && warp.index() == 2)
        return;
      consume(warp, cta, shared);
    }
    warp.sync_cta();
  }

  BLOCKSCALE_HD_TEMPLATE
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE void consume(Warp& warp, cta_coord cta, shared_storage& shared) const {
    const int c = warp.index() - 1;
    int k = 0;
    unsigned char* out_buffer = shared.out[c];
    for (int t = static_cast<int>(cta.index); t < tiles(); t += static_cast<int>(cta.count), ++k) {
      const int s = k % stages;
      const auto parity = static_cast<std::uint32_t>((k / stages) & 1);
      if (planted == bug::consumer_wrong_parity)
        warp.mbarrier_wait(shared.full[s], parity ^ 1);
      else if (planted != bug::consumer_skips_full_wait)
        warp.mbarrier_wait(shared.full[s], parity);
      warp.template tma_store_wait<0>(); // the last store has read out_buffer
      warp.each([&](int lane) {
        for (int i = lane; i < (box_rows / consumers) * box_cols; i += cuda::warp_size) {
          const int row = i / box_cols, col = i % box_cols;
          std::uint16_t v;
          std::memcpy(&v, shared.stage[s] + stage_offset(c * (box_rows / consumers) + row, col), 2);
          v = static_cast<std::uint16_t>(3 * v + 1);
          std::memcpy(out_buffer + 2 * i, &v, 2);
        }
      });
      warp.mbarrier_arrive(shared.empty[s]);
      if (planted != bug::missing_proxy_fence)
        warp.fence_proxy_async();
      warp.tma_store_2d(out, (t % tiles_x) * box_cols,
                        (t / tiles_x) * box_rows + c * (box_rows / consumers), out_buffer);
      warp.tma_store_commit();
    }
    warp.template tma_store_wait<0>();
  }
};

} // namespace async_ring
} // namespace blockscale_test
