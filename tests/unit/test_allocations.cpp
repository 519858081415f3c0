// Steady-state calls allocate nothing: quantize_into (one and two outputs, with and without a
// caller thread_pool, under tensor-scale policies), measure_amax and dequantize into caller
// memory. This file replaces the global operator new and delete with versions that count the
// allocations made while a measurement is running (on any thread).
#include <blockscale/blockscale.hpp>

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

#include "catch.hpp"
#include "splitmix64.hpp"

namespace {

std::atomic<bool> counting{false};
std::atomic<long> allocations{0};

void* allocate(std::size_t size) {
  if (counting.load(std::memory_order_relaxed))
    allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size == 0 ? 1 : size);
}

void* allocate_aligned(std::size_t size, std::size_t alignment) {
  if (counting.load(std::memory_order_relaxed))
    allocations.fetch_add(1, std::memory_order_relaxed);
  if (alignment < sizeof(void*))
    alignment = sizeof(void*);
  void* p = nullptr;
  if (posix_memalign(&p, alignment, size == 0 ? 1 : size) != 0)
    return nullptr;
  return p;
}

// Out of line, so that the compiler does not pair a free() it sees with an operator new.
[[gnu::noinline]] void release(void* p) noexcept {
  std::free(p);
}

} // namespace

// The replaceable allocation functions ([new.delete]): every form forwards to malloc/free, so
// sized and unsized, aligned and unaligned forms pair up whatever the compiler calls.
void* operator new(std::size_t size) {
  if (void* p = allocate(size))
    return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) {
  if (void* p = allocate(size))
    return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  return allocate(size);
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  return allocate(size);
}
void* operator new(std::size_t size, std::align_val_t alignment) {
  if (void* p = allocate_aligned(size, static_cast<std::size_t>(alignment)))
    return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size, std::align_val_t alignment) {
  if (void* p = allocate_aligned(size, static_cast<std::size_t>(alignment)))
    return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t size, std::align_val_t alignment, const std::nothrow_t&) noexcept {
  return allocate_aligned(size, static_cast<std::size_t>(alignment));
}
void* operator new[](std::size_t size, std::align_val_t alignment, const std::nothrow_t&) noexcept {
  return allocate_aligned(size, static_cast<std::size_t>(alignment));
}
void operator delete(void* p) noexcept {
  release(p);
}
void operator delete[](void* p) noexcept {
  release(p);
}
void operator delete(void* p, std::size_t) noexcept {
  release(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  release(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  release(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  release(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  release(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  release(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  release(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  release(p);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  release(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  release(p);
}

using namespace blockscale;

namespace {

// Heap allocations made by f(), run `times` times after one warm-up call.
template <class F>
long allocations_of(F&& f, int times = 10) {
  f();
  allocations.store(0);
  counting.store(true);
  for (int i = 0; i < times; ++i)
    f();
  counting.store(false);
  return allocations.load();
}

std::vector<float> test_data(std::size_t rows, std::size_t cols, std::uint64_t seed) {
  splitmix64 rng{seed};
  std::vector<float> x(rows * cols);
  for (float& v : x)
    v = static_cast<float>(rng.normal());
  return x;
}

struct test_input {
  static constexpr std::size_t rows = 96, cols = 160;
  std::vector<float> f = test_data(rows, cols, 1);
  std::vector<bfloat16> b;
  test_input() {
    b.reserve(f.size());
    for (float v : f)
      b.push_back(bfloat16(v));
  }
  matrix_view<const float> view() const { return {f.data(), rows, cols}; }
  matrix_view<const bfloat16> bview() const { return {b.data(), rows, cols}; }
};

// The option sets of the single-output checks.
std::vector<quantize_options> option_sets(bool hadamard_ok) {
  std::vector<quantize_options> sets;
  for (int variant = 0; variant < 8; ++variant) {
    quantize_options o;
    o.columnwise = (variant & 1) != 0;
    o.rounding = (variant & 2) != 0 ? element_rounding::stochastic : element_rounding::nearest_even;
    o.hadamard = hadamard_ok && (variant & 4) != 0;
    o.layout = variant % 3 == 0 ? scale_layout::tensor_core : scale_layout::row_major;
    o.shape = variant == 6 ? block_shape::tile : block_shape::rowwise;
    o.encode_scale = 2.0f;
    sets.push_back(o);
  }
  return sets;
}

template <class F>
void check_single_output(thread_pool* pool) {
  const test_input in;
  for (const quantize_options& o : option_sets(F::block_size % 16 == 0)) {
    quantized_matrix<F> q(quantized_shape_for(in.rows, in.cols, o));
    const long f = allocations_of([&] { (void)quantize_into(in.view(), q.view(), o, pool); });
    const long b = allocations_of([&] { (void)quantize_into(in.bview(), q.view(), o, pool); });
    INFO("columnwise " << o.columnwise << " stochastic "
                       << (o.rounding == element_rounding::stochastic) << " hadamard " << o.hadamard
                       << " pool " << (pool != nullptr));
    CHECK(f == 0);
    CHECK(b == 0);
    // Into a quantized_matrix (which also records the stats).
    const long m = allocations_of([&] { (void)quantize_into(in.view(), q, o, pool); });
    CHECK(m == 0);
  }
}

} // namespace

TEST_CASE("the counting operator new counts", "[allocations]") {
  // The instrument works: a vector of one element is one allocation, in this thread or another.
  const long one = allocations_of([] { std::vector<int> v(1); }, 3);
  CHECK(one == 3);
  thread_pool pool(2);
  const long pooled = allocations_of([&] {
    pool.run(2, [](unsigned, std::size_t, std::size_t) {
      auto* p = new int(1);
      delete p;
    });
  });
  CHECK(pooled == 20);
  // A quantization that starts its own threads (options.threads without a pool) allocates.
  const test_input in;
  quantize_options threaded;
  threaded.threads = 2;
  quantized_matrix<nvfp4> q(quantized_shape_for(in.rows, in.cols, threaded));
  const long started = allocations_of([&] { (void)quantize_into(in.view(), q.view(), threaded); });
  CHECK(started > 0);
}

// A block size that does not divide 32 (the reference loop instead of the panels).
using fp4_b48 = block_format<e2m1, 48, ue4m3>;

TEMPLATE_TEST_CASE("steady-state quantize_into allocates nothing", "[allocations]", nvfp4, mxfp4,
                   ue5m3_fp4, mxfp8, fp4_b48) {
  SECTION("one thread") {
    check_single_output<TestType>(nullptr);
  }
  SECTION("a caller's pool of 2") {
    thread_pool pool(2);
    check_single_output<TestType>(&pool);
  }
}

TEST_CASE("steady-state policy quantize_into allocates nothing", "[allocations]") {
  const test_input in;
  thread_pool pool(2);
  float last = 0.0f;
  const auto hook = [&](float a) {
    last = a;
    return a;
  };
  for (thread_pool* p : {static_cast<thread_pool*>(nullptr), &pool}) {
    for (bool hadamard : {false, true}) {
      quantize_options o;
      o.hadamard = hadamard;
      o.columnwise = hadamard;
      quantized_matrix<nvfp4> q(quantized_shape_for(in.rows, in.cols, o));
      current_tensor_scale current = current_tensor_scale::make<nvfp4>();
      periodic_tensor_scale periodic = periodic_tensor_scale::make<ue5m3_fp4>(3, 8);
      delayed_tensor_scale delayed = delayed_tensor_scale::make<nvfp4>(16, 0);
      quantized_matrix<ue5m3_fp4> u(quantized_shape_for(in.rows, in.cols, o));
      const long a = allocations_of(
          [&] { (void)quantize_into(in.view(), q.view(), current, o, identity_amax{}, p); });
      const long b =
          allocations_of([&] { (void)quantize_into(in.view(), q.view(), current, o, hook, p); });
      const long c =
          allocations_of([&] { (void)quantize_into(in.bview(), u.view(), periodic, o, hook, p); });
      const long d = allocations_of(
          [&] { (void)quantize_into(in.view(), u.view(), periodic, o, identity_amax{}, p); });
      const long e =
          allocations_of([&] { (void)quantize_into(in.view(), q.view(), delayed, o, hook, p); });
      INFO("pool " << (p != nullptr) << " hadamard " << hadamard);
      CHECK(a == 0);
      CHECK(b == 0);
      CHECK(c == 0);
      CHECK(d == 0);
      CHECK(e == 0);
      // The policies really ran: the current one measured on every call.
      CHECK(current.calls == 22);
      CHECK(periodic.calls == 22);
      CHECK(last > 0.0f);
    }
  }
}

TEST_CASE("steady-state two-output quantize_into allocates nothing", "[allocations]") {
  const test_input in;
  thread_pool pool(2);
  for (thread_pool* p : {static_cast<thread_pool*>(nullptr), &pool}) {
    for (int variant = 0; variant < 4; ++variant) {
      quantize_options ro, co;
      co.columnwise = true;
      co.hadamard = (variant & 1) != 0;
      ro.rounding =
          (variant & 2) != 0 ? element_rounding::stochastic : element_rounding::nearest_even;
      co.layout = scale_layout::tensor_core;
      co.encode_scale = 3.0f;
      quantized_matrix<nvfp4> r(quantized_shape_for(in.rows, in.cols, ro));
      quantized_matrix<nvfp4> c(quantized_shape_for(in.rows, in.cols, co));
      quantize_options co8 = co;
      co8.hadamard = false;
      quantized_matrix<mxfp8> c8(quantized_shape_for(in.rows, in.cols, co8));
      const long a =
          allocations_of([&] { (void)quantize_into(in.view(), r.view(), ro, c.view(), co, p); });
      const long b =
          allocations_of([&] { (void)quantize_into(in.bview(), r.view(), ro, c.view(), co, p); });
      const long m =
          allocations_of([&] { (void)quantize_into(in.view(), r.view(), ro, c8.view(), co8, p); });
      current_tensor_scale rp = current_tensor_scale::make<nvfp4>();
      current_tensor_scale cp = current_tensor_scale::make<nvfp4>();
      const long policies = allocations_of([&] {
        (void)quantize_into(in.view(), r.view(), rp, ro, c.view(), cp, co, identity_amax{}, p);
      });
      INFO("pool " << (p != nullptr) << " variant " << variant);
      CHECK(a == 0);
      CHECK(b == 0);
      CHECK(m == 0);
      CHECK(policies == 0);
      CHECK(rp.calls == 11);
    }
  }
}

TEST_CASE("measure_amax and dequantize allocate nothing", "[allocations]") {
  const test_input in;
  thread_pool pool(2);
  float amax = 0.0f;
  for (thread_pool* p : {static_cast<thread_pool*>(nullptr), &pool}) {
    for (int variant = 0; variant < 4; ++variant) {
      quantize_options o;
      o.columnwise = (variant & 1) != 0;
      o.hadamard = (variant & 2) != 0;
      const long a = allocations_of([&] { amax = measure_amax<nvfp4>(in.view(), o, p); });
      const long b = allocations_of([&] { amax += measure_amax<mxfp8>(in.bview(), o, p); });
      INFO("pool " << (p != nullptr) << " variant " << variant);
      CHECK(a == 0);
      CHECK(b == 0);
      CHECK(amax > 0.0f);
    }
  }
  quantize_options o;
  o.layout = scale_layout::tensor_core;
  const auto q = quantize<nvfp4>(in.view(), o);
  const auto q8 = quantize<mxfp8>(in.view());
  std::vector<float> f(in.rows * in.cols);
  std::vector<bfloat16> b(in.rows * in.cols);
  std::vector<float16> h(in.rows * in.cols);
  const matrix_view<float> fv(f.data(), in.rows, in.cols);
  const matrix_view<bfloat16> bv(b.data(), in.rows, in.cols);
  const matrix_view<float16> hv(h.data(), in.rows, in.cols);
  const long df = allocations_of([&] { dequantize(q.view(), fv, pool); });
  const long db = allocations_of([&] { dequantize(q.view(), bv, pool); });
  const long dh = allocations_of([&] { dequantize(q8, hv, pool); });
  const long d1 = allocations_of([&] { dequantize(q8.view(), fv); });
  CHECK(df == 0);
  CHECK(db == 0);
  CHECK(dh == 0);
  CHECK(d1 == 0);
  // The decode happened.
  CHECK(f[0] == q8.value(0, 0));
  CHECK(b[5].bits() == bfloat16(q.value(0, 5)).bits());
}
