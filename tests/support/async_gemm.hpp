// A warp-specialised GEMM small enough to read (emulation/host_async.hpp, cuda/runner.cuh): a
// producer warp loads 64 × 16 tiles of A and 32 × 16 tiles of B by TMA, with the 32-byte swizzle,
// into two stages; one consumer warpgroup multiplies them with the warpgroup MMA — both operands
// in shared memory (SS), or A from registers (RS) — and writes C = A · Bᵀ in FP32. The bugs the
// host test plants in it, one at a time, are named here. tests/unit/test_async_host.cpp runs it
// on the host; tests/cuda/async_kernels.cu compiles it for sm_90a.
#pragma once

#include <blockscale/config.hpp>
#include <blockscale/cuda/warp.hpp>
#include <blockscale/cuda/warp/async.hpp>
#include <blockscale/cuda/warp/wgmma.hpp>

#include <cstdint>
#include <cstring>

namespace blockscale_test {
namespace async_gemm {

using blockscale::cuda::cta_coord;
using blockscale::cuda::warp::mbarrier;
using blockscale::cuda::warp::smem_descriptor;
using blockscale::cuda::warp::smem_swizzle;
using blockscale::cuda::warp::tensor_map;
namespace warp = blockscale::cuda::warp;

constexpr int tile_m = 64, tile_n = 32, k_step = 16, stages = 2;
constexpr int row_bytes = k_step * 2; ///< a tile's row: 16 bf16, one 32-byte swizzle row

enum class form { ss, rs };

enum class bug {
  none,
  no_wgmma_fence,   // a wgmma with no wgmma_fence before it
  read_before_wait, // the epilogue reads the accumulators before the last wgmma_wait
  missing_warp,     // warp 3 of the warpgroup does not issue its wgmma
  disagree,         // warp 1 passes another `accumulate` than the others
  scribble_b,       // an ordinary store into B's stage, no fence_proxy_async, before the wgmma
  mixed_setmaxnreg, // warp 5 asks setmaxnreg for another count than its warpgroup
};

struct gemm_program {
  /// Warps 0–3: the consumer warpgroup; 4–7: the producer warpgroup, whose warp 4 alone issues
  /// the loads. Each warpgroup sets its registers (`setmaxnreg`, warpgroup-wide) to its role's.
  static constexpr int warps = 8;
  struct shared_storage {
    alignas(1024) unsigned char a[stages][tile_m * row_bytes];
    alignas(1024) unsigned char b[stages][tile_n * row_bytes];
    mbarrier full[stages];
    mbarrier empty[stages];
  };

  tensor_map a_map, b_map; ///< A: m × k, B: n × k, bf16, boxes 64 × 16 and 32 × 16
  float* c;                ///< m × n, row-major
  int m, n, k;
  form f = form::ss;
  bug planted = bug::none;

  BLOCKSCALE_HOST_DEVICE int tiles_n() const { return (n + tile_n - 1) / tile_n; }
  BLOCKSCALE_HOST_DEVICE int k_steps() const { return (k + k_step - 1) / k_step; }

  /// A K-major operand in a stage: rows of 32 bytes, groups of 8 rows 256 bytes apart.
  BLOCKSCALE_HD_TEMPLATE
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE static smem_descriptor descriptor(Warp& w, const unsigned char* stage) {
    return smem_descriptor::make(w.shared_address(stage), 16, 8 * row_bytes, smem_swizzle::bytes32);
  }

  BLOCKSCALE_HD_TEMPLATE
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE void run(Warp& w, cta_coord cta, shared_storage& shared) const {
    if (w.index() == 4)
      for (int s = 0; s < stages; ++s) {
        w.mbarrier_init(shared.full[s], 1);
        w.mbarrier_init(shared.empty[s], 4);
      }
    w.sync_cta();
    const int m0 = static_cast<int>(cta.index) / tiles_n() * tile_m;
    const int n0 = static_cast<int>(cta.index) % tiles_n() * tile_n;
    if (w.index() >= 4) {
      if (planted == bug::mixed_setmaxnreg && w.index() == 5)
        w.template setmaxnreg_dec<48>();
      else
        w.template setmaxnreg_dec<40>();
    }
    if (w.index() == 4) {
      for (int step = 0; step < k_steps(); ++step) {
        const int s = step % stages;
        const auto parity = static_cast<std::uint32_t>((step / stages) & 1);
        w.mbarrier_wait(shared.empty[s], parity ^ 1);
        w.mbarrier_arrive_expect_tx(shared.full[s], (tile_m + tile_n) * row_bytes);
        w.tma_load_2d(shared.a[s], a_map, step * k_step, m0, shared.full[s]);
        w.tma_load_2d(shared.b[s], b_map, step * k_step, n0, shared.full[s]);
      }
    } else if (w.index() < 4) {
      w.template setmaxnreg_inc<232>();
      consume(w, m0, n0, shared);
    }
    w.sync_cta();
  }

  BLOCKSCALE_HD_TEMPLATE
  template <class Warp>
  BLOCKSCALE_HOST_DEVICE void consume(Warp& w, int m0, int n0, shared_storage& shared) const {
    using traits =
        blockscale::cuda::warp::mma_traits<warp::sm90_wgmma_m64nNk16_f32_bf16_ss<tile_n>>;
    blockscale::cuda::lanes<Warp, warp::wgmma_accumulator<tile_n>> acc{};
    const int warp_index = w.index(); // (lane lambdas call no Warp member: nvcc makes them HD)
    for (int step = 0; step < k_steps(); ++step) {
      const int s = step % stages;
      w.mbarrier_wait(shared.full[s], static_cast<std::uint32_t>((step / stages) & 1));
      if (planted == bug::scribble_b && warp_index == 0 && step == 0)
        w.each([&](int lane) {
          if (lane == 0)
            shared.b[s][0] ^= 1;
        });
      if (planted != bug::no_wgmma_fence)
        w.wgmma_fence();
      const smem_descriptor a = descriptor(w, shared.a[s]);
      const smem_descriptor b = descriptor(w, shared.b[s]);
      const bool accumulate = (step > 0) != (planted == bug::disagree && w.index() == 1);
      if (!(planted == bug::missing_warp && w.index() == 3)) {
        if (f == form::ss) {
          w.wgmma(warp::wgmma_bf16_ss<tile_n>{}, acc, a, b, accumulate);
        } else {
          blockscale::cuda::lanes<Warp, warp::a_fragment> fragment;
          w.each([&](int lane) {
            const int thread = 32 * warp_index + lane;
            for (int r = 0; r < 4; ++r) {
              std::uint16_t half[2];
              for (int h = 0; h < 2; ++h) {
                const warp::coord mk = traits::a_coord(thread, r, h);
                const std::uint32_t at =
                    warp::kmajor_address(a, mk.row, 2 * mk.col) - a.start_address();
                std::memcpy(&half[h], shared.a[s] + at, 2);
              }
              fragment[lane].r[r] =
                  static_cast<std::uint32_t>(half[0]) | (static_cast<std::uint32_t>(half[1]) << 16);
            }
          });
          w.wgmma(warp::wgmma_bf16_rs<tile_n>{}, acc, fragment, b, accumulate);
        }
      }
      w.wgmma_commit();
      if (!(planted == bug::read_before_wait && step + 1 == k_steps()))
        w.template wgmma_wait<0>();
      w.mbarrier_arrive(shared.empty[s]);
    }
    w.each([&](int lane) {
      const int thread = 32 * warp_index + lane;
      for (int i = 0; i < tile_n / 2; ++i) {
        const warp::coord mn = traits::c_coord(thread, i);
        const int row = m0 + mn.row, col = n0 + mn.col;
        if (row < m && col < n)
          c[static_cast<long long>(row) * n + col] = acc[lane].r[i];
      }
    });
  }
};

} // namespace async_gemm
} // namespace blockscale_test
