// thread_pool: how run() splits [0, items), jobs in a row, exceptions from any range, the limits
// on the thread count, and quantization on a pool matching the single-threaded result.
#include <blockscale/blockscale.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "catch.hpp"
#include "same_stats.hpp"

#if defined(__linux__)
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BLOCKSCALE_TEST_HAS_ASAN 1
#endif
#endif
#if !defined(BLOCKSCALE_TEST_HAS_ASAN)
#define BLOCKSCALE_TEST_HAS_ASAN 0
#endif
#include "quantized_bytes.hpp"
#include "splitmix64.hpp"

using namespace blockscale;

namespace {

constexpr std::size_t size_max = std::numeric_limits<std::size_t>::max();

std::uint32_t float_bits(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

struct range_call {
  unsigned worker;
  std::size_t begin, end;
  std::thread::id thread;
};

// Runs one job on `pool` and returns the calls of body, sorted by worker.
std::vector<range_call> record_job(thread_pool& pool, std::size_t items,
                                   std::atomic<int>* hits = nullptr) {
  std::mutex lock;
  std::vector<range_call> calls;
  calls.reserve(pool.size());
  pool.run(items, [&](unsigned worker, std::size_t begin, std::size_t end) {
    if (hits != nullptr)
      for (std::size_t i = begin; i < end; ++i)
        hits[i].fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> guard(lock);
    calls.push_back({worker, begin, end, std::this_thread::get_id()});
  });
  std::sort(calls.begin(), calls.end(),
            [](const range_call& a, const range_call& b) { return a.worker < b.worker; });
  return calls;
}

} // namespace

TEST_CASE("run covers [0, items) once, in contiguous ranges", "[thread_pool]") {
  for (unsigned size : {1u, 2u, 3u, 8u}) {
    thread_pool pool(size);
    REQUIRE(pool.size() == size);
    for (std::size_t items : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000}}) {
      INFO("pool " << size << ", items " << items);
      std::unique_ptr<std::atomic<int>[]> hits(new std::atomic<int>[items + 1]);
      for (std::size_t i = 0; i <= items; ++i)
        hits[i].store(0);
      const auto calls = record_job(pool, items, hits.get());
      // One call per worker, distinct ids 0 .. size-1.
      REQUIRE(calls.size() == size);
      for (unsigned w = 0; w < size; ++w)
        CHECK(calls[w].worker == w);
      // The caller runs range 0.
      CHECK(calls[0].thread == std::this_thread::get_id());
      // Workers run on distinct threads.
      for (unsigned a = 0; a < size; ++a)
        for (unsigned b = a + 1; b < size; ++b)
          CHECK(calls[a].thread != calls[b].thread);
      // Contiguous, in order, covering [0, items), sizes within one of each other, as range_begin.
      CHECK(calls.front().begin == 0);
      CHECK(calls.back().end == items);
      std::size_t smallest = size_max, largest = 0;
      for (unsigned w = 0; w < size; ++w) {
        CHECK(calls[w].begin <= calls[w].end);
        if (w + 1 < size)
          CHECK(calls[w].end == calls[w + 1].begin);
        CHECK(calls[w].begin == thread_pool::range_begin(items, w, size));
        CHECK(calls[w].end == thread_pool::range_begin(items, w + 1, size));
        smallest = std::min(smallest, calls[w].end - calls[w].begin);
        largest = std::max(largest, calls[w].end - calls[w].begin);
      }
      CHECK(largest - smallest <= 1);
      int wrong = 0;
      for (std::size_t i = 0; i < items; ++i)
        wrong += hits[i].load() != 1;
      CHECK(wrong == 0);
      CHECK(hits[items].load() == 0);
      // The same split for the same (items, size).
      const auto again = record_job(pool, items);
      for (unsigned w = 0; w < size; ++w) {
        CHECK(again[w].begin == calls[w].begin);
        CHECK(again[w].end == calls[w].end);
      }
    }
  }
}

TEST_CASE("range_begin splits without overflow near SIZE_MAX", "[thread_pool]") {
  __extension__ typedef unsigned __int128 u128;
  for (std::size_t items : {size_max, size_max - 1, size_max / 2 + 3, size_max - 1000}) {
    for (unsigned workers : {1u, 2u, 3u, 7u, 1000u, thread_pool::max_threads}) {
      INFO("items " << items << ", workers " << workers);
      CHECK(thread_pool::range_begin(items, 0, workers) == 0);
      CHECK(thread_pool::range_begin(items, workers, workers) == items);
      std::size_t previous = 0, smallest = size_max, largest = 0;
      int wrong = 0;
      for (unsigned w = 0; w <= workers; ++w) {
        const std::size_t begin = thread_pool::range_begin(items, w, workers);
        // floor(items · w / workers), exactly.
        const auto exact = static_cast<std::size_t>(static_cast<u128>(items) * w / workers);
        wrong += begin != exact;
        if (w > 0) {
          wrong += begin < previous;
          smallest = std::min(smallest, begin - previous);
          largest = std::max(largest, begin - previous);
        }
        previous = begin;
      }
      CHECK(wrong == 0);
      CHECK(largest - smallest <= 1);
    }
  }
}

TEST_CASE("one pool runs many jobs in a row", "[thread_pool]") {
  thread_pool pool(3);
  std::atomic<std::uint64_t> sum{0};
  std::atomic<unsigned> calls{0};
  int wrong = 0;
  for (std::size_t job = 0; job < 1000; ++job) {
    const std::size_t items = job % 37;
    sum.store(0);
    calls.store(0);
    pool.run(items, [&](unsigned, std::size_t begin, std::size_t end) {
      std::uint64_t local = 0;
      for (std::size_t i = begin; i < end; ++i)
        local += i + 1;
      sum.fetch_add(local);
      calls.fetch_add(1);
    });
    // run returns only when every range is done.
    wrong += sum.load() != items * (items + 1) / 2;
    wrong += calls.load() != 3;
  }
  CHECK(wrong == 0);
}

TEST_CASE("an exception in any range is rethrown and the pool stays usable", "[thread_pool]") {
  for (unsigned size : {1u, 2u, 3u}) {
    thread_pool pool(size);
    const std::size_t items = 30;
    for (std::size_t bad : {std::size_t{0}, std::size_t{15}, std::size_t{29}}) {
      INFO("pool " << size << ", throwing at " << bad);
      std::atomic<unsigned> finished{0};
      std::string what;
      try {
        pool.run(items, [&](unsigned, std::size_t begin, std::size_t end) {
          if (begin <= bad && bad < end) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            throw std::runtime_error("range " + std::to_string(begin));
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
          finished.fetch_add(1);
        });
      } catch (const std::runtime_error& e) {
        what = e.what();
      }
      // The throwing range's exception, and only after every other range finished.
      unsigned owner = 0;
      while (owner + 1 < size && thread_pool::range_begin(items, owner + 1, size) <= bad)
        ++owner;
      CHECK(what == "range " + std::to_string(thread_pool::range_begin(items, owner, size)));
      CHECK(finished.load() == size - 1);
      // The pool runs the next job normally.
      std::atomic<std::size_t> covered{0};
      pool.run(items, [&](unsigned, std::size_t begin, std::size_t end) {
        covered.fetch_add(end - begin);
      });
      CHECK(covered.load() == items);
    }
    // Every range throwing: one of them is rethrown, the pool still works.
    CHECK_THROWS_AS(
        pool.run(items, [](unsigned, std::size_t, std::size_t) { throw std::logic_error("all"); }),
        std::logic_error);
    std::atomic<unsigned> ran{0};
    pool.run(1, [&](unsigned, std::size_t, std::size_t) { ran.fetch_add(1); });
    CHECK(ran.load() == size);
  }
}

TEST_CASE("thread counts are checked", "[thread_pool]") {
  CHECK_THROWS_AS(thread_pool(thread_pool::max_threads + 1), std::invalid_argument);
  try {
    thread_pool pool(thread_pool::max_threads + 1);
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("threads") != std::string::npos);
  }
  thread_pool hardware(0);
  CHECK(hardware.size() >= 1);
  CHECK(hardware.size() <= thread_pool::max_threads);
  const unsigned expected =
      std::max(1u, std::min(std::thread::hardware_concurrency(), thread_pool::max_threads));
  CHECK(hardware.size() == expected);
  CHECK(thread_pool::resolve(0) == expected);
  CHECK(thread_pool::resolve(5) == 5);
  CHECK(thread_pool::resolve(thread_pool::max_threads) == thread_pool::max_threads);
  CHECK_THROWS_AS(thread_pool::resolve(thread_pool::max_threads + 1), std::invalid_argument);
  std::atomic<std::size_t> covered{0};
  hardware.run(100, [&](unsigned, std::size_t b, std::size_t e) { covered.fetch_add(e - b); });
  CHECK(covered.load() == 100);
  // The default pool is the hardware's.
  thread_pool defaulted;
  CHECK(defaulted.size() == expected);
}

namespace {

std::vector<float> test_data(std::size_t rows, std::size_t cols, std::uint64_t seed) {
  splitmix64 rng{seed};
  std::vector<float> x(rows * cols);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] =
        static_cast<float>(rng.normal() * std::ldexp(1.0, static_cast<int>((i / cols) % 11) - 5));
  x[17] = std::numeric_limits<float>::quiet_NaN();
  return x;
}

template <class F>
void check_pools_match(const std::vector<float>& data, std::size_t rows, std::size_t cols) {
  const matrix_view<const float> x(data.data(), rows, cols);
  std::vector<bfloat16> half(data.size());
  for (std::size_t i = 0; i < data.size(); ++i)
    half[i] = bfloat16(data[i]);
  const matrix_view<const bfloat16> xb(half.data(), rows, cols);
  thread_pool one(1), two(2), three(3);
  for (int variant = 0; variant < 8; ++variant) {
    quantize_options o;
    o.columnwise = (variant & 1) != 0;
    o.rounding = (variant & 2) != 0 ? element_rounding::stochastic : element_rounding::nearest_even;
    o.seed = 3;
    o.hadamard = (variant & 4) != 0;
    o.encode_scale = 0.75f;
    o.layout = variant % 3 == 0 ? scale_layout::tensor_core : scale_layout::row_major;
    o.shape = variant == 5 ? block_shape::tile : block_shape::rowwise;
    INFO("variant " << variant);
    quantized_matrix<F> single(quantized_shape_for(rows, cols, o));
    const quantize_stats reference = quantize_into(x, single, o);
    for (thread_pool* pool : {&one, &two, &three}) {
      quantized_matrix<F> q(single.shape());
      const quantize_stats stats = quantize_into(x, q, o, pool);
      INFO("pool of " << pool->size());
      CHECK(q == single);
      check_same_stats(stats, reference);
      CHECK(float_bits(measure_amax<F>(x, o, pool)) == float_bits(measure_amax<F>(x, o)));
    }
    // options.threads without a pool (a temporary pool for the call).
    quantize_options threaded = o;
    threaded.threads = 3;
    quantized_matrix<F> t(single.shape());
    check_same_stats(quantize_into(x, t, threaded), reference);
    CHECK(t == single);
    // bfloat16 input on a pool.
    quantized_matrix<F> b1(single.shape()), b3(single.shape());
    check_same_stats(quantize_into(xb, b3, o, &three), quantize_into(xb, b1, o));
    CHECK(b3 == b1);
  }
}

} // namespace

TEMPLATE_TEST_CASE("quantize_into on a pool equals the single-threaded result", "[thread_pool]",
                   nvfp4, mxfp4, ue5m3_fp4, mxfp8) {
  // Enough rows and columns for several row groups and column strips per thread.
  const std::size_t rows = 300, cols = 520;
  check_pools_match<TestType>(test_data(rows, cols, 7), rows, cols);
  check_pools_match<TestType>(test_data(37, 83, 8), 37, 83);
}

TEST_CASE("two-output quantize_into and dequantize on pools match one thread", "[thread_pool]") {
  const std::size_t rows = 200, cols = 300;
  const auto data = test_data(rows, cols, 9);
  const matrix_view<const float> x(data.data(), rows, cols);
  quantize_options ro, co;
  co.columnwise = true;
  co.hadamard = true;
  ro.rounding = element_rounding::stochastic;
  thread_pool two(2), three(3);
  quantized_matrix<nvfp4> r1(quantized_shape_for(rows, cols, ro)),
      c1(quantized_shape_for(rows, cols, co));
  const auto reference = quantize_into(x, r1.view(), ro, c1.view(), co);
  for (thread_pool* pool : {&two, &three}) {
    quantized_matrix<nvfp4> r(r1.shape()), c(c1.shape());
    const auto stats = quantize_into(x, r.view(), ro, c.view(), co, pool);
    CHECK(r == r1);
    CHECK(c == c1);
    check_same_stats(stats.rowwise, reference.rowwise);
    check_same_stats(stats.columnwise, reference.columnwise);
    std::vector<float> d1(rows * cols), dp(rows * cols);
    dequantize(r1, matrix_view<float>(d1.data(), rows, cols));
    dequantize(r1, matrix_view<float>(dp.data(), rows, cols), *pool);
    CHECK(std::memcmp(d1.data(), dp.data(), d1.size() * sizeof(float)) == 0);
  }
}

#if defined(__linux__) && !defined(__SANITIZE_ADDRESS__) && !BLOCKSCALE_TEST_HAS_ASAN
TEST_CASE("a thread the system refuses to start is an exception, never std::terminate",
          "[thread_pool]") {
  // In a child process whose address space is capped a few MiB above what it uses, a thread
  // stack (8 MiB by default) cannot be mapped: the pool must throw and join what it started.
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    long pages = 0;
    if (std::FILE* statm = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(statm, "%ld", &pages) != 1)
        pages = 0;
      std::fclose(statm);
    }
    const auto used = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE));
    const rlimit cap{used + (4u << 20), used + (4u << 20)};
    int code = 3;
    if (pages > 0 && setrlimit(RLIMIT_AS, &cap) == 0) {
      try {
        thread_pool pool(8);
        code = 1; // started every thread: the cap did not bite
      } catch (const std::runtime_error& error) {
        code = std::strstr(error.what(), "could not start thread") != nullptr ? 0 : 2;
      } catch (...) {
        code = 4;
      }
    }
    std::_Exit(code);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
#endif
