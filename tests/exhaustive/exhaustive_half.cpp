// Exhaustive check of blockscale::float16 and blockscale::bfloat16 narrowing against CUDA's host
// converters __float2half_rn and __float2bfloat16_rn: every one of the 2^32 float bit patterns.
// The one deliberate difference is NaN: CUDA returns the canonical NaN 0x7FFF, blockscale keeps
// the sign and upper payload bits and sets the quiet bit; NaN inputs are checked against that
// rule instead (and CUDA's result against 0x7FFF).
//
// Usage: exhaustive_half. Threads: std::thread::hardware_concurrency(), or BLOCKSCALE_THREADS.
// Exit status: 0 all agree, 1 a mismatch, 77 (skipped) when built without CUDA's headers.

#if BLOCKSCALE_HAVE_CUDA_HEADERS
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

#include <blockscale/numeric/half.hpp>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#if BLOCKSCALE_HAVE_CUDA_HEADERS
namespace {

struct counts {
  std::uint64_t inputs = 0;
  std::uint64_t nans = 0;
  std::uint64_t mismatches = 0;
};

float bits_float(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

std::uint16_t cuda_float16(float x) {
  return static_cast<__half_raw>(__float2half_rn(x)).x;
}
std::uint16_t cuda_bfloat16(float x) {
  return static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(x)).x;
}
std::uint16_t ours_float16(float x) {
  return blockscale::float16(x).bits();
}
std::uint16_t ours_bfloat16(float x) {
  return blockscale::bfloat16(x).bits();
}
// What blockscale makes of a NaN with bits u.
std::uint16_t nan_float16(std::uint32_t u) {
  return static_cast<std::uint16_t>(((u >> 16) & 0x8000u) | 0x7E00u | ((u >> 13) & 0x3FFu));
}
std::uint16_t nan_bfloat16(std::uint32_t u) {
  return static_cast<std::uint16_t>((u >> 16) | 0x40u);
}

constexpr int chunk_bits = 24; // 256 chunks of 2^24 inputs, handed out to threads in turn
std::mutex print_mutex;

template <class Ours, class Cuda, class Nan>
void run_chunk(std::uint64_t begin, std::uint64_t end, Ours ours, Cuda cuda, Nan nan,
               const char* name, counts& c) {
  for (std::uint64_t i = begin; i < end; ++i) {
    const auto u = static_cast<std::uint32_t>(i);
    const float x = bits_float(u);
    const std::uint16_t got = ours(x);
    const std::uint16_t expected = cuda(x);
    bool ok;
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
      ++c.nans;
      ok = expected == 0x7FFF && got == nan(u);
    } else {
      ok = got == expected;
    }
    if (!ok && ++c.mismatches <= 10) {
      const std::lock_guard<std::mutex> lock(print_mutex);
      std::printf("MISMATCH %s: x = 0x%08" PRIx32 " (%.9g) CUDA 0x%04x ours 0x%04x\n", name, u,
                  static_cast<double>(x), expected, got);
    }
  }
  c.inputs += end - begin;
}

struct result {
  counts total;
  double seconds;
};

template <class Ours, class Cuda, class Nan>
result run_all(unsigned threads, Ours ours, Cuda cuda, Nan nan, const char* name) {
  const auto start = std::chrono::steady_clock::now();
  std::atomic<std::uint64_t> next_chunk{0};
  constexpr std::uint64_t chunk_count = std::uint64_t{1} << (32 - chunk_bits);
  std::vector<counts> per_thread(threads);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (std::uint64_t chunk; (chunk = next_chunk.fetch_add(1)) < chunk_count;) {
        run_chunk(chunk << chunk_bits, (chunk + 1) << chunk_bits, ours, cuda, nan, name,
                  per_thread[t]);
      }
    });
  }
  for (auto& thread : pool)
    thread.join();
  result r{};
  for (const auto& c : per_thread) {
    r.total.inputs += c.inputs;
    r.total.nans += c.nans;
    r.total.mismatches += c.mismatches;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

} // namespace

int main() {
  unsigned threads = std::thread::hardware_concurrency();
  if (const char* env = std::getenv("BLOCKSCALE_THREADS")) {
    threads = static_cast<unsigned>(std::atoi(env));
  }
  if (threads == 0)
    threads = 1;
  std::printf("exhaustive_half: all 2^32 floats vs CUDA host converters, %u thread(s)\n", threads);

  const result f16 = run_all(threads, ours_float16, cuda_float16, nan_float16, "float16");
  std::printf("float16  %14" PRIu64 " inputs (%" PRIu64 " NaN)  %8.1f s  %" PRIu64
              " mismatch(es)\n",
              f16.total.inputs, f16.total.nans, f16.seconds, f16.total.mismatches);
  const result bf16 = run_all(threads, ours_bfloat16, cuda_bfloat16, nan_bfloat16, "bfloat16");
  std::printf("bfloat16 %14" PRIu64 " inputs (%" PRIu64 " NaN)  %8.1f s  %" PRIu64
              " mismatch(es)\n",
              bf16.total.inputs, bf16.total.nans, bf16.seconds, bf16.total.mismatches);

  const std::uint64_t mismatches = f16.total.mismatches + bf16.total.mismatches;
  const bool complete =
      f16.total.inputs == (std::uint64_t{1} << 32) && bf16.total.inputs == (std::uint64_t{1} << 32);
  std::printf("%s: %" PRIu64 " mismatch(es)%s\n", mismatches || !complete ? "FAILED" : "PASSED",
              mismatches, complete ? "" : ", incomplete sweep");
  return mismatches || !complete ? 1 : 0;
}

#else

int main() {
  std::printf("exhaustive_half: built without CUDA's headers (BLOCKSCALE_HAVE_CUDA_HEADERS), "
              "skipped\n");
  return 77;
}

#endif
