/// \file detail/parallel.hpp
/// Splitting a range of rows over std::threads: the one place where the host code starts threads.
#pragma once

#include <algorithm>
#include <cstddef>
#include <thread>
#include <vector>

namespace blockscale {
inline namespace v0 {
namespace detail {

/// `requested` threads, or all hardware threads for 0.
inline unsigned resolve_threads(unsigned requested) noexcept {
  if (requested == 0) {
    const unsigned hardware = std::thread::hardware_concurrency();
    return hardware == 0 ? 1 : hardware;
  }
  return requested;
}

/// How many workers `requested` threads give for `items` items: at least 1, at most one per item.
inline unsigned worker_count(unsigned requested, std::size_t items) noexcept {
  return static_cast<unsigned>(
      std::min<std::size_t>(resolve_threads(requested), std::max<std::size_t>(items, 1)));
}

/// Runs body(worker, begin, end) on `workers` contiguous ranges that cover [0, items), each on its
/// own thread when there is more than one. The split depends only on `items` and `workers`.
template <class Body>
void run_in_ranges(std::size_t items, unsigned workers, const Body& body) {
  if (workers <= 1) {
    body(0u, std::size_t{0}, items);
    return;
  }
  std::vector<std::thread> threads;
  threads.reserve(workers);
  for (unsigned w = 0; w < workers; ++w)
    threads.emplace_back(body, w, items * w / workers, items * (w + 1) / workers);
  for (auto& thread : threads)
    thread.join();
}

} // namespace detail
} // namespace v0
} // namespace blockscale
