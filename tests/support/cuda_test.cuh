// What the device tests (tests/unit/test_cuda_*.cu) share: CUDA errors and launcher statuses as
// Catch2 requirements, one stream for the whole test program, device arrays on it, the seed of a
// run's random inputs and the quick mode.
#pragma once

#include <blockscale/cuda/buffer.cuh>
#include <blockscale/cuda/status.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "catch.hpp"

/// Requires a CUDA runtime call to have succeeded, naming its error otherwise.
inline void check(cudaError_t e) {
  INFO(cudaGetErrorName(e) << ": " << cudaGetErrorString(e));
  REQUIRE(e == cudaSuccess);
}

/// Requires a launcher's status to be ok, with its message otherwise.
inline void require_ok(const blockscale::cuda::status& s) {
  INFO(s.message());
  REQUIRE(s.ok());
}

/// One stream for the whole test program.
inline cudaStream_t test_stream() {
  static cudaStream_t stream = [] {
    cudaStream_t s = nullptr;
    check(cudaStreamCreate(&s));
    return s;
  }();
  return stream;
}

/// The seed of the run's random inputs: random each run, printed so that a failure can be
/// reproduced (BLOCKSCALE_TEST_SEED overrides it).
inline std::uint64_t fresh_seed() {
  static const std::uint64_t seed = [] {
    const char* forced = std::getenv("BLOCKSCALE_TEST_SEED");
    const std::uint64_t s =
        forced != nullptr ? std::strtoull(forced, nullptr, 10) : std::random_device{}();
    std::printf("random inputs: BLOCKSCALE_TEST_SEED=%llu\n", static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

/// Whether BLOCKSCALE_TEST_QUICK asks for fewer, smaller cases (bench/gpu/run.sh sets it under
/// compute-sanitizer).
inline bool quick() {
  const char* q = std::getenv("BLOCKSCALE_TEST_QUICK");
  return q != nullptr && q[0] != '\0' && q[0] != '0';
}

/// An array of `count` values of T (and 16 bytes of slack) in device memory, allocated on
/// test_stream(); its copies are queued on that stream too.
template <class T>
struct device_array {
  blockscale::cuda::device_allocation memory;

  explicit device_array(std::size_t count) : memory(count * sizeof(T) + 16, test_stream()) {}
  /// A copy of `host` (queued: it is complete when test_stream() is).
  explicit device_array(const std::vector<T>& host) : device_array(host.size()) { upload(host); }

  T* data() const { return reinterpret_cast<T*>(memory.data()); }
  void upload(const std::vector<T>& host) {
    check(cudaMemcpyAsync(memory.data(), host.data(), host.size() * sizeof(T),
                          cudaMemcpyHostToDevice, test_stream()));
  }
  /// The first `count` values, after what test_stream() has queued.
  std::vector<T> download(std::size_t count) const {
    std::vector<T> host(count);
    check(cudaMemcpyAsync(host.data(), memory.data(), count * sizeof(T), cudaMemcpyDeviceToHost,
                          test_stream()));
    check(cudaStreamSynchronize(test_stream()));
    return host;
  }
};
