/// \file emulation/host_cta.hpp
/// Runs a CTA program (cuda/warp.hpp) on the host: each CTA of the grid in turn (in index order or
/// a shuffled order, to show the result does not depend on it), its phases in order with every
/// warp finishing a phase before any starts the next — exactly what the kernel's barriers
/// guarantee — and each warp's lanes through `host_warp`. Shared memory is filled with a pattern
/// before each CTA, so a program that reads what it did not write fails its tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <utility>
#include <vector>

#include "../cuda/warp.hpp"
#include "host_warp.hpp"

namespace blockscale {
inline namespace v0 {
namespace emulation {

namespace detail {
/// CTA indices 0..ctas-1, shuffled when `order_seed` is nonzero.
inline std::vector<std::uint32_t> cta_order(std::size_t ctas, std::uint64_t order_seed) {
  if (ctas > UINT32_MAX)
    throw std::invalid_argument("run_grid: more than 2^32 - 1 CTAs");
  std::vector<std::uint32_t> order(ctas);
  std::iota(order.begin(), order.end(), 0u);
  if (order_seed != 0) {
    std::uint64_t state = order_seed;
    for (std::size_t i = ctas; i > 1; --i) { // Fisher–Yates with an LCG
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      std::swap(order[i - 1], order[(state >> 33) % i]);
    }
  }
  return order;
}

template <int Phase, class Program>
void run_phases(const Program& program, std::vector<host_warp>& warps, cuda::cta_coord cta,
                typename Program::shared_storage& shared) {
  for (host_warp& warp : warps)
    program.template run<Phase>(warp, cta, shared);
  if constexpr (Phase + 1 < Program::phases)
    run_phases<Phase + 1>(program, warps, cta, shared);
}

} // namespace detail

/// Runs `program` over a grid of `ctas` CTAs. With a nonzero `order_seed` the CTAs run in a
/// pseudo-random order (a completion action must then still run last, and run once). The warps'
/// MMAs follow `model`.
template <class Program>
void run_grid(const Program& program, std::size_t ctas, std::uint64_t order_seed = 0,
              ptx::mma_model model = ptx::default_mma_model) {
  std::vector<std::uint32_t> order = detail::cta_order(ctas, order_seed);
  auto shared = std::make_unique<typename Program::shared_storage>();
  std::vector<host_warp> warps;
  for (int w = 0; w < Program::warps; ++w)
    warps.emplace_back(w, async_copies::eager, model);
  for (const std::uint32_t index : order) {
    std::memset(static_cast<void*>(shared.get()), 0xA5, sizeof(typename Program::shared_storage));
    detail::run_phases<0>(program, warps, cuda::cta_coord{index, static_cast<std::uint32_t>(ctas)},
                          *shared);
  }
}

namespace detail {
template <int Phase, class Program, class State>
void run_loop_phases(const Program& program, std::vector<host_warp>& warps, cuda::cta_coord cta,
                     typename Program::shared_storage& shared, std::vector<State>& states,
                     int step) {
  for (std::size_t w = 0; w < warps.size(); ++w)
    program.template step<Phase>(warps[w], cta, shared, states[w], step);
  if constexpr (Phase + 1 < Program::loop_phases)
    run_loop_phases<Phase + 1>(program, warps, cta, shared, states, step);
}
} // namespace detail

/// Runs a *looped* program (cuda/runner.cuh: `begin`, then `steps(cta)` times the phases
/// `step<0..loop_phases-1>` with a barrier between phases, then `end`; each warp keeps a
/// `warp_state` across them) over a grid of `ctas` CTAs, in a shuffled order when `order_seed` is
/// nonzero, with asynchronous copies landing as `copies` says and the MMAs following `model`.
template <class Program>
void run_looped_grid(const Program& program, std::size_t ctas, std::uint64_t order_seed = 0,
                     async_copies copies = async_copies::eager,
                     ptx::mma_model model = ptx::default_mma_model) {
  using state = typename Program::template warp_state<host_warp>;
  std::vector<std::uint32_t> order = detail::cta_order(ctas, order_seed);
  auto shared = std::make_unique<typename Program::shared_storage>();
  for (const std::uint32_t index : order) {
    std::memset(static_cast<void*>(shared.get()), 0xA5, sizeof(typename Program::shared_storage));
    std::vector<host_warp> warps;
    for (int w = 0; w < Program::warps; ++w)
      warps.emplace_back(w, copies, model);
    std::vector<state> states(warps.size());
    const cuda::cta_coord cta{index, static_cast<std::uint32_t>(ctas)};
    for (std::size_t w = 0; w < warps.size(); ++w)
      program.begin(warps[w], cta, *shared, states[w]);
    const int steps = program.steps(cta);
    for (int step = 0; step < steps; ++step)
      detail::run_loop_phases<0>(program, warps, cta, *shared, states, step);
    for (std::size_t w = 0; w < warps.size(); ++w)
      program.end(warps[w], cta, *shared, states[w]);
  }
}

} // namespace emulation
} // namespace v0
} // namespace blockscale
