// The host API around views: matrix_view and quantized_view construction and checks,
// storage_for, quantized_matrix ownership, quantize_into over caller storage (one and two
// outputs, with tensor-scale policies and amax hooks), the checks on mismatched outputs,
// dequantization to bfloat16/float16, measure_error with direction and transform, and the option
// checks of make_quantize_params.
#include <blockscale/blockscale.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "catch.hpp"
#include "quantized_bytes.hpp"
#include "same_stats.hpp"
#include "splitmix64.hpp"

using namespace blockscale;

namespace {

constexpr std::size_t size_max = std::numeric_limits<std::size_t>::max();
const float qnan = std::numeric_limits<float>::quiet_NaN();
const float inf = std::numeric_limits<float>::infinity();

std::uint32_t float_bits(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

bool contains(const std::string& text, const char* part) {
  return text.find(part) != std::string::npos;
}

// The what() of the exception of type E that `f` throws ("<none>" if it throws nothing).
template <class E = std::invalid_argument, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "<none>";
}

// Element type T from a float (rounded to nearest-even for bfloat16/float16).
template <class T>
T to(float v) {
  return T(v);
}

// An input matrix of T with leading dimension ld; the ld - cols gap holds NaN, so any read past
// the view would show up as a NaN scale.
template <class T>
struct input {
  std::size_t rows = 0, cols = 0, ld = 0;
  std::vector<T> data;
  matrix_view<const T> view() const { return {data.data(), rows, cols, ld}; }
};

// N(0,1) scaled by 2^(r % 9 - 4) per row (different block scales), with an occasional zero.
template <class T>
input<T> make_input(std::size_t rows, std::size_t cols, std::size_t ld, std::uint64_t seed,
                    float scale = 1.0f) {
  input<T> in;
  in.rows = rows;
  in.cols = cols;
  in.ld = ld;
  in.data.assign(rows * ld, to<T>(qnan));
  splitmix64 rng{seed};
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) {
      const double v = rng.normal() * std::ldexp(1.0, static_cast<int>(r % 9) - 4);
      in.data[r * ld + c] = to<T>(rng.next() % 61 == 0 ? 0.0f : static_cast<float>(v) * scale);
    }
  return in;
}

// Storage for a quantized matrix in caller vectors, pre-filled with `fill`.
template <class F>
struct caller_storage {
  std::vector<std::uint8_t> elements, scales;
  float decode = -123.0f;
  quantized_view<F> view;

  explicit caller_storage(const quantized_shape& shape, std::uint8_t fill = 0) {
    const quantized_storage need = storage_for<F>(shape);
    elements.assign(need.element_bytes, fill);
    scales.assign(need.scale_bytes, fill);
    view = quantized_view<F>::make(shape, elements.data(), elements.size(), scales.data(),
                                   scales.size(), &decode);
  }
};

template <class F>
void check_same_bytes(const caller_storage<F>& s, const quantized_matrix<F>& q) {
  REQUIRE(s.elements.size() == q.storage().element_bytes);
  REQUIRE(s.scales.size() == q.storage().scale_bytes);
  CHECK(s.elements == element_bytes(q));
  CHECK(s.scales == scale_bytes(q));
  CHECK(float_bits(s.decode) == float_bits(q.decode_scale()));
}

template <class F>
constexpr bool has_zero_scale() {
  return format_traits<typename F::scale_type::format>::has_zero;
}

template <class F>
constexpr bool hadamard_allowed() {
  return F::block_size % hadamard16::size == 0;
}

// A block size that does not divide 32: quantized by the reference loop, not the panels.
using fp4_b48 = block_format<e2m1, 48, ue4m3>;

const char* type_name(float*) {
  return "float";
}
const char* type_name(bfloat16*) {
  return "bfloat16";
}
const char* type_name(float16*) {
  return "float16";
}

} // namespace

// ---- matrix_view
// ---------------------------------------------------------------------------------

static_assert(std::is_trivially_copyable<matrix_view<float>>::value &&
                  std::is_trivially_copyable<matrix_view<const float>>::value &&
                  std::is_trivially_copyable<matrix_view<bfloat16>>::value &&
                  std::is_trivially_copyable<matrix_view<const bfloat16>>::value &&
                  std::is_trivially_copyable<matrix_view<float16>>::value &&
                  std::is_trivially_copyable<matrix_view<const float16>>::value,
              "matrix views are passed to kernels by value");
static_assert(std::is_convertible<matrix_view<float>, matrix_view<const float>>::value,
              "a mutable view converts to a const one");
static_assert(!std::is_convertible<matrix_view<const float>, matrix_view<float>>::value,
              "a const view does not convert to a mutable one");
static_assert(!std::is_convertible<matrix_view<float>, matrix_view<const bfloat16>>::value,
              "views of different element types do not convert");
static_assert(matrix_view<const float>::unchecked(nullptr, 3, 5, 2).ld() == 2,
              "unchecked is constexpr and checks nothing");

TEST_CASE("matrix_view's checked constructor names the wrong argument", "[views][matrix_view]") {
  std::vector<float> storage(64, 0.0f);
  float* p = storage.data();

  SECTION("null data with a nonzero size") {
    const std::string m = message_of([] { matrix_view<const float>(nullptr, 2, 3); });
    CHECK(contains(m, "data is null"));
    CHECK(contains(m, "2 x 3"));
    CHECK(contains(message_of([] { matrix_view<float>(nullptr, 1, 1, 4); }), "data"));
    // Null data is fine when there is no element.
    CHECK_NOTHROW(matrix_view<const float>(nullptr, 0, 3));
    CHECK_NOTHROW(matrix_view<const float>(nullptr, 5, 0));
    CHECK_NOTHROW(matrix_view<const float>(nullptr, 0, 0, 0));
    CHECK(matrix_view<const float>(nullptr, 5, 0).empty());
  }
  SECTION("ld smaller than cols") {
    const std::string m = message_of([&] { matrix_view<float>(p, 2, 4, 3); });
    CHECK(contains(m, "ld (3)"));
    CHECK(contains(m, "cols (4)"));
    // Checked before the data: ld is reported even with null data.
    CHECK(contains(message_of([] { matrix_view<const float>(nullptr, 2, 4, 3); }), "ld (3)"));
    CHECK_NOTHROW(matrix_view<float>(p, 2, 4, 4));
    CHECK_NOTHROW(matrix_view<float>(p, 2, 4, 100));
  }
  SECTION("rows x ld beyond the address space") {
    // float: 4 bytes, so rows · ld may be at most SIZE_MAX / 4.
    const std::string m = message_of([&] { matrix_view<float>(p, size_max / 2, 4, 4); });
    CHECK(contains(m, "rows ("));
    CHECK(contains(m, "ld (4)"));
    CHECK(contains(m, "overflow"));
    CHECK(contains(message_of([&] { matrix_view<float>(p, 1, 1, size_max / 4 + 1); }), "overflow"));
    auto* b = reinterpret_cast<const bfloat16*>(p);
    CHECK(contains(message_of([&] { matrix_view<const bfloat16>(b, 2, 1, size_max / 4 + 1); }),
                   "overflow"));
    // Exactly at the limit is fine (nothing is dereferenced).
    CHECK_NOTHROW(matrix_view<float>(p, 1, 1, size_max / 4));
    CHECK_NOTHROW(matrix_view<const bfloat16>(b, 1, 1, size_max / 2));
    CHECK_NOTHROW(matrix_view<const bfloat16>(b, 2, 1, size_max / 4));
    // The overflow check applies to the dense constructor too.
    CHECK(contains(message_of([&] { matrix_view<float>(p, size_max / 8, 8); }), "overflow"));
  }
}

TEST_CASE("matrix_view::unchecked, conversion and accessors", "[views][matrix_view]") {
  std::vector<float> storage(4 * 7);
  for (std::size_t i = 0; i < storage.size(); ++i)
    storage[i] = static_cast<float>(i);

  // unchecked accepts what the checked constructor refuses.
  const auto bad = matrix_view<float>::unchecked(nullptr, 3, 5, 2);
  CHECK(bad.data() == nullptr);
  CHECK(bad.rows() == 3);
  CHECK(bad.cols() == 5);
  CHECK(bad.ld() == 2);
  CHECK_FALSE(bad.empty());

  const matrix_view<float> m(storage.data(), 4, 5, 7);
  CHECK(m.rows() == 4);
  CHECK(m.cols() == 5);
  CHECK(m.ld() == 7);
  CHECK(m.data() == storage.data());
  CHECK_FALSE(m.empty());
  for (std::size_t r = 0; r < 4; ++r) {
    CHECK(m.row(r) == storage.data() + r * 7);
    for (std::size_t c = 0; c < 5; ++c) {
      CHECK(&m(r, c) == &storage[r * 7 + c]);
      CHECK(m(r, c) == static_cast<float>(r * 7 + c));
    }
  }
  // Writes go through a mutable view.
  m(2, 3) = -1.5f;
  CHECK(storage[2 * 7 + 3] == -1.5f);
  *m.row(3) = 42.0f;
  CHECK(storage[3 * 7] == 42.0f);

  // Mutable converts to const, keeping everything.
  const matrix_view<const float> c = m;
  CHECK(c.data() == m.data());
  CHECK(c.rows() == 4);
  CHECK(c.cols() == 5);
  CHECK(c.ld() == 7);
  CHECK(c(2, 3) == -1.5f);

  // Copies are plain values.
  matrix_view<const float> copy;
  CHECK(copy.empty());
  CHECK(copy.data() == nullptr);
  std::memcpy(static_cast<void*>(&copy), &c, sizeof copy);
  CHECK(copy.data() == c.data());
  CHECK(copy(1, 1) == 8.0f);

  // The dense constructor sets ld = cols.
  const matrix_view<const float> dense(storage.data(), 2, 6);
  CHECK(dense.ld() == 6);
  CHECK(dense(1, 0) == storage[6]);
  CHECK(matrix_view<const float>(storage.data(), 0, 6).empty());
}

// ---- storage_for -------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("storage_for sizes both layouts", "[views][storage]", nvfp4, mxfp4, ue5m3_fp4,
                   mxfp8) {
  using F = TestType;
  constexpr std::size_t b = F::block_size;
  const std::size_t shapes[][2] = {{0, 0},     {0, 17},   {5, 0},    {1, 1},    {37, 83},
                                   {128, 128}, {129, 64}, {300, 33}, {256, 257}};
  for (const auto& s : shapes) {
    const std::size_t rows = s[0], cols = s[1];
    const std::size_t padded = (cols + b - 1) / b * b;
    const std::size_t row_bytes = F::element_bits == 4 ? padded / 2 : padded;
    const std::size_t blocks = padded / b;
    quantized_shape shape;
    shape.rows = rows;
    shape.cols = cols;
    INFO(rows << " x " << cols);
    const quantized_storage rm = storage_for<F>(shape);
    CHECK(rm.element_bytes == rows * row_bytes);
    CHECK(rm.scale_bytes == rows * blocks);
    shape.layout = scale_layout::tensor_core;
    const quantized_storage tc = storage_for<F>(shape);
    CHECK(tc.element_bytes == rows * row_bytes);
    CHECK(tc.scale_bytes == (rows + 127) / 128 * 128 * ((blocks + 3) / 4 * 4));
    CHECK(tc.scale_bytes == scale_storage_size(scale_layout::tensor_core, rows, blocks));
    // The block shape, direction and transform do not change the storage.
    shape.blocks = block_shape::tile;
    shape.columnwise = true;
    shape.hadamard = true;
    CHECK(storage_for<F>(shape).scale_bytes == tc.scale_bytes);
    CHECK(storage_for<F>(shape).element_bytes == tc.element_bytes);
  }
}

TEST_CASE("storage_for: a few sizes written out", "[views][storage]") {
  quantized_shape shape;
  shape.rows = 37;
  shape.cols = 83;
  CHECK(storage_for<nvfp4>(shape).element_bytes == 37 * 48); // 96 columns, 2 per byte
  CHECK(storage_for<nvfp4>(shape).scale_bytes == 37 * 6);
  CHECK(storage_for<mxfp8>(shape).element_bytes == 37 * 96);
  CHECK(storage_for<mxfp8>(shape).scale_bytes == 37 * 3);
  shape.layout = scale_layout::tensor_core;
  CHECK(storage_for<nvfp4>(shape).scale_bytes == 128 * 8);
  CHECK(storage_for<mxfp4>(shape).scale_bytes == 128 * 4);
  shape.rows = 129;
  CHECK(storage_for<ue5m3_fp4>(shape).scale_bytes == 256 * 8);
}

TEST_CASE("storage_for throws when a size overflows std::size_t", "[views][storage]") {
  const std::size_t big = std::size_t{1} << 34;
  quantized_shape shape;
  shape.rows = big;
  shape.cols = big;
  for (scale_layout layout : {scale_layout::row_major, scale_layout::tensor_core}) {
    shape.layout = layout;
    CHECK(contains(message_of([&] { (void)storage_for<nvfp4>(shape); }), "overflows std::size_t"));
    CHECK(contains(message_of([&] { (void)storage_for<mxfp4>(shape); }), "element bytes"));
    CHECK(contains(message_of([&] { (void)storage_for<mxfp8>(shape); }), "element bytes"));
    CHECK(contains(message_of([&] { (void)storage_for<ue5m3_fp4>(shape); }), "overflows"));
  }

  // Columns near SIZE_MAX: the padding to a multiple of B overflows.
  shape = {};
  shape.rows = 1;
  for (std::size_t cols : {size_max, size_max - 1, size_max - 14}) {
    shape.cols = cols;
    CHECK(contains(message_of([&] { (void)storage_for<nvfp4>(shape); }), "padded column count"));
  }
  shape.cols = size_max - 30;
  CHECK(contains(message_of([&] { (void)storage_for<mxfp8>(shape); }), "padded column count"));
  // The largest column count that pads without overflow: 2^64 - 16 columns.
  shape.cols = size_max - 15;
  const quantized_storage s = storage_for<nvfp4>(shape);
  CHECK(s.element_bytes == (size_max - 15) / 2);
  CHECK(s.scale_bytes == (size_max - 15) / 16);
  // Two such rows fit exactly (2^64 - 16 bytes), three do not.
  shape.rows = 2;
  CHECK(storage_for<nvfp4>(shape).element_bytes == size_max - 15);
  shape.rows = 3;
  CHECK(contains(message_of([&] { (void)storage_for<nvfp4>(shape); }), "element bytes"));
  // FP8 elements: one row of them already needs more than SIZE_MAX / 2 bytes; rows · row_bytes
  // overflows at 2 rows.
  shape.rows = 2;
  shape.cols = size_max / 2 + 64;
  CHECK(contains(message_of([&] { (void)storage_for<mxfp8>(shape); }), "element bytes"));
  // The tensor-core padding of the scale tiles overflows where row-major scales still fit.
  shape.rows = 1;
  shape.cols = size_max - 15;
  shape.layout = scale_layout::tensor_core;
  CHECK(contains(message_of([&] { (void)storage_for<nvfp4>(shape); }), "scale bytes"));
  // Rows near SIZE_MAX with no column: row-major needs nothing, tensor-core cannot pad the rows.
  shape.rows = size_max;
  shape.cols = 0;
  shape.layout = scale_layout::row_major;
  CHECK(storage_for<nvfp4>(shape).element_bytes == 0);
  CHECK(storage_for<nvfp4>(shape).scale_bytes == 0);
  shape.layout = scale_layout::tensor_core;
  CHECK(contains(message_of([&] { (void)storage_for<nvfp4>(shape); }), "padded scale tiles"));
}

// ---- quantized_matrix -------------------------------------------------------------------------

TEST_CASE("quantized_matrix refuses shapes whose storage overflows", "[views][quantized_matrix]") {
  quantized_shape shape;
  shape.rows = std::size_t{1} << 34;
  shape.cols = std::size_t{1} << 34;
  CHECK(contains(message_of([&] { quantized_matrix<nvfp4> q(shape); }), "overflows"));
  CHECK(contains(message_of([&] { quantized_matrix<mxfp8> q(shape); }), "overflows"));
  shape.layout = scale_layout::tensor_core;
  CHECK(contains(message_of([&] { quantized_matrix<ue5m3_fp4> q(shape); }), "overflows"));
  shape = {};
  shape.rows = 3;
  shape.cols = size_max;
  CHECK(contains(message_of([&] { quantized_matrix<mxfp4> q(shape); }), "padded column count"));
  // quantize() sizes its result the same way.
  std::vector<float> one(1, 1.0f);
  CHECK(contains(message_of([&] {
                   (void)quantize<nvfp4>(matrix_view<const float>::unchecked(
                       one.data(), std::size_t{1} << 34, std::size_t{1} << 34, 0));
                 }),
                 "overflows"));
}

TEST_CASE("quantized_matrix copies and moves", "[views][quantized_matrix]") {
  const auto x = make_input<float>(37, 83, 83, 1);
  const auto y = make_input<float>(37, 83, 83, 2);
  quantize_options options;
  options.encode_scale = 3.0f;
  options.layout = scale_layout::tensor_core;
  quantized_matrix<nvfp4> q = quantize<nvfp4>(x.view(), options);
  const auto q_elements = element_bytes(q);
  const auto q_scales = scale_bytes(q);
  REQUIRE(q.rows() == 37);
  REQUIRE(q.stats().blocks == 37 * 6);

  SECTION("copies are equal and independent") {
    quantized_matrix<nvfp4> c(q);
    CHECK(c == q);
    CHECK_FALSE(c != q);
    CHECK(c.element_data() != q.element_data());
    CHECK(c.scale_data() != q.scale_data());
    CHECK(c.stats().blocks == q.stats().blocks);
    CHECK(float_bits(c.decode_scale()) == float_bits(q.decode_scale()));
    // Requantizing the copy leaves the original alone.
    quantize_into(y.view(), c, options);
    CHECK(c != q);
    CHECK(element_bytes(q) == q_elements);
    CHECK(scale_bytes(q) == q_scales);
    CHECK(c == quantize<nvfp4>(y.view(), options));
    // Copy assignment.
    quantized_matrix<nvfp4> d;
    d = q;
    CHECK(d == q);
    CHECK(d.element_data() != q.element_data());
    d = c;
    CHECK(d == c);
    CHECK(d != q);
    // Self-assignment keeps the value.
    const quantized_matrix<nvfp4>& alias = d;
    d = alias;
    CHECK(d == c);
  }
  SECTION("moved-from matrices are empty") {
    const std::uint8_t* data = q.element_data();
    quantized_matrix<nvfp4> m(std::move(q));
    CHECK(m.element_data() == data); // the storage moved, not copied
    CHECK(element_bytes(m) == q_elements);
    CHECK(scale_bytes(m) == q_scales);
    CHECK(m.layout() == scale_layout::tensor_core);
    CHECK(m.decode_scale() == 1.0f / 3.0f);
    CHECK(q.rows() == 0); // NOLINT(bugprone-use-after-move): the documented moved-from state
    CHECK(q.cols() == 0);
    CHECK(q.element_data() == nullptr);
    CHECK(q.scale_data() == nullptr);
    CHECK(q.storage().element_bytes == 0);
    CHECK(q.storage().scale_bytes == 0);
    CHECK(q.view().elements() == nullptr);
    CHECK(q == quantized_matrix<nvfp4>());
    // Move assignment.
    quantized_matrix<nvfp4> n;
    n = std::move(m);
    CHECK(element_bytes(n) == q_elements);
    CHECK(m.rows() == 0); // NOLINT(bugprone-use-after-move)
    CHECK(m.element_data() == nullptr);
    // A moved-from matrix can be assigned again.
    q = quantize<nvfp4>(y.view(), options);
    CHECK(q == quantize<nvfp4>(y.view(), options));
    // Copying an empty matrix gives an empty matrix.
    const quantized_matrix<nvfp4> e(m);
    CHECK(e.rows() == 0);
    CHECK(e == m);
  }
}

TEST_CASE("quantized_matrix accessors check rows x padded_cols", "[views][quantized_matrix]") {
  const auto x = make_input<float>(37, 83, 83, 3);
  const auto q = quantize<nvfp4>(x.view());
  REQUIRE(q.padded_cols() == 96);
  CHECK_NOTHROW(q.element(36, 95));
  CHECK_NOTHROW(q.block_scale(36, 95));
  CHECK(q.value(36, 95) == 0.0f); // padding
  CHECK(q.value(0, 0) == q.view().value(0, 0));
  CHECK(q.block_scale(5, 40).bits() == q.view().block_scale(5, 40).bits());
  CHECK(q.element(5, 40).bits() == q.view().element(5, 40).bits());
  CHECK_THROWS_AS(q.element(37, 0), std::out_of_range);
  CHECK_THROWS_AS(q.element(0, 96), std::out_of_range);
  CHECK_THROWS_AS(q.block_scale(37, 0), std::out_of_range);
  CHECK_THROWS_AS(q.block_scale(0, 96), std::out_of_range);
  CHECK_THROWS_AS(q.value(37, 0), std::out_of_range);
  CHECK_THROWS_AS(q.value(0, 96), std::out_of_range);
  CHECK_THROWS_AS(q.value(size_max, size_max), std::out_of_range);
  const std::string m = message_of<std::out_of_range>([&] { (void)q.value(40, 2); });
  CHECK(contains(m, "(40, 2)"));
  CHECK(contains(m, "37 x 96"));
  // An empty matrix has no element at all.
  const quantized_matrix<mxfp8> empty;
  CHECK_THROWS_AS(empty.value(0, 0), std::out_of_range);
}

TEST_CASE("quantized_matrix::operator== compares shape, decode scale bits and bytes",
          "[views][quantized_matrix]") {
  const auto x = make_input<float>(20, 40, 40, 4);
  quantize_options options;
  options.hadamard = true;
  const auto q = quantize<nvfp4>(x.view(), options);

  quantized_matrix<nvfp4> c = q;
  REQUIRE(c == q);
  // Statistics are not compared.
  c.set_stats(quantize_stats{});
  CHECK(c == q);
  // One element byte, one scale byte.
  c = q;
  c.view().elements()[7] ^= 0x10;
  CHECK(c != q);
  c = q;
  c.view().scales()[3] ^= 0x01;
  CHECK(c != q);
  // The decode scale, bit for bit: -0 differs from +0, a NaN equals the same NaN.
  c = q;
  *c.view().decode_scale_data() = std::nextafter(q.decode_scale(), 2.0f);
  CHECK(c != q);
  quantized_matrix<nvfp4> z1 = q, z2 = q;
  *z1.view().decode_scale_data() = 0.0f;
  *z2.view().decode_scale_data() = -0.0f;
  CHECK(z1 != z2);
  *z1.view().decode_scale_data() = qnan;
  *z2.view().decode_scale_data() = qnan;
  CHECK(z1 == z2);

  // Shapes: zero matrices that differ only in one field of the shape.
  quantized_shape base;
  base.rows = 4;
  base.cols = 32;
  const quantized_matrix<nvfp4> a(base);
  CHECK(a == quantized_matrix<nvfp4>(base));
  auto differs = [&](quantized_shape s) { return quantized_matrix<nvfp4>(s) != a; };
  quantized_shape s = base;
  s.cols = 31; // same storage size, other shape
  CHECK(differs(s));
  s = base;
  s.blocks = block_shape::tile;
  CHECK(differs(s));
  s = base;
  s.columnwise = true;
  CHECK(differs(s));
  s = base;
  s.hadamard = true;
  CHECK(differs(s));
  s = base;
  s.layout = scale_layout::tensor_core;
  CHECK(differs(s));
  // The transform's signs count only when the transform is on.
  s = base;
  s.transform = hadamard16::from_sign_mask(0x1234);
  CHECK_FALSE(differs(s));
  quantized_shape h = base;
  h.hadamard = true;
  quantized_shape h2 = h;
  h2.transform = hadamard16::from_sign_mask(0x1234);
  CHECK(quantized_matrix<nvfp4>(h) != quantized_matrix<nvfp4>(h2));
  CHECK(quantized_matrix<nvfp4>(h) == quantized_matrix<nvfp4>(h));
}

// ---- quantized_view::make -----------------------------------------------------------------------

static_assert(std::is_convertible<quantized_view<nvfp4>, const_quantized_view<nvfp4>>::value,
              "a writable view converts to a read-only one");
static_assert(!std::is_convertible<const_quantized_view<nvfp4>, quantized_view<nvfp4>>::value,
              "a read-only view does not convert to a writable one");
static_assert(!std::is_convertible<quantized_view<nvfp4>, const_quantized_view<mxfp4>>::value,
              "views of different formats do not convert");

TEST_CASE("quantized_view::make checks the caller's buffers", "[views][quantized_view]") {
  quantized_shape shape;
  shape.rows = 37;
  shape.cols = 83;
  const quantized_storage need = storage_for<nvfp4>(shape);
  REQUIRE(need.element_bytes == 1776);
  REQUIRE(need.scale_bytes == 222);
  std::vector<std::uint8_t> e(need.element_bytes), s(need.scale_bytes);
  float d = 0.0f;
  using view = quantized_view<nvfp4>;

  CHECK_NOTHROW(view::make(shape, e.data(), e.size(), s.data(), s.size(), &d));
  // Larger buffers are fine.
  std::vector<std::uint8_t> e_big(need.element_bytes + 100), s_big(need.scale_bytes + 1);
  CHECK_NOTHROW(view::make(shape, e_big.data(), e_big.size(), s_big.data(), s_big.size(), &d));

  std::string m = message_of([&] { view::make(shape, nullptr, e.size(), s.data(), s.size(), &d); });
  CHECK(contains(m, "elements"));
  CHECK(contains(m, "null"));
  m = message_of([&] { view::make(shape, e.data(), e.size() - 1, s.data(), s.size(), &d); });
  CHECK(contains(m, "elements"));
  CHECK(contains(m, "1775"));
  CHECK(contains(m, "1776"));
  m = message_of([&] { view::make(shape, nullptr, 0, s.data(), s.size(), &d); });
  CHECK(contains(m, "elements"));
  m = message_of([&] { view::make(shape, e.data(), e.size(), nullptr, s.size(), &d); });
  CHECK(contains(m, "scales"));
  CHECK(contains(m, "null"));
  m = message_of([&] { view::make(shape, e.data(), e.size(), s.data(), s.size() - 1, &d); });
  CHECK(contains(m, "scales"));
  CHECK(contains(m, "221"));
  m = message_of([&] { view::make(shape, e.data(), e.size(), s.data(), s.size(), nullptr); });
  CHECK(contains(m, "decode_scale"));
  // The tensor-core layout needs its padded tiles.
  shape.layout = scale_layout::tensor_core;
  m = message_of([&] { view::make(shape, e.data(), e.size(), s.data(), s.size(), &d); });
  CHECK(contains(m, "scales"));
  CHECK(contains(m, "1024"));
  // Sizes that overflow are refused before any buffer is looked at.
  shape.rows = std::size_t{1} << 34;
  shape.cols = std::size_t{1} << 34;
  CHECK(contains(message_of([&] { view::make(shape, e.data(), size_max, s.data(), size_max, &d); }),
                 "overflows"));
  // An empty matrix needs no element or scale storage, but a decode scale.
  shape = {};
  shape.rows = 0;
  shape.cols = 83;
  CHECK_NOTHROW(view::make(shape, nullptr, 0, nullptr, 0, &d));
  CHECK(contains(message_of([&] { view::make(shape, nullptr, 0, nullptr, 0, nullptr); }),
                 "decode_scale"));

  // The read-only view is made over const buffers; its accessors see the same memory.
  shape = {};
  shape.rows = 37;
  shape.cols = 83;
  const std::vector<std::uint8_t>& ce = e;
  const std::vector<std::uint8_t>& cs = s;
  const float cd = 0.5f;
  const auto r =
      const_quantized_view<nvfp4>::make(shape, ce.data(), ce.size(), cs.data(), cs.size(), &cd);
  CHECK(r.elements() == ce.data());
  CHECK(r.scales() == cs.data());
  CHECK(r.decode_scale() == 0.5f);
  CHECK(r.rows() == 37);
  CHECK(r.padded_cols() == 96);
  CHECK(r.row_bytes() == 48);
  CHECK(r.blocks_per_row() == 6);
  CHECK(r.row(2) == ce.data() + 96);
  CHECK(contains(message_of([&] {
                   const_quantized_view<nvfp4>::make(shape, ce.data(), ce.size(), cs.data(),
                                                     cs.size(), nullptr);
                 }),
                 "decode_scale"));
  // A writable view converts, keeping the shape and pointers.
  const auto w = view::make(shape, e.data(), e.size(), s.data(), s.size(), &d);
  const const_quantized_view<nvfp4> cw = w;
  CHECK(cw.elements() == e.data());
  CHECK(cw.scales() == s.data());
  CHECK(cw.decode_scale_data() == &d);
  CHECK(cw.cols() == 83);
}

namespace {

// Quantizes in(T) with `options` into caller storage and checks it against quantize<F>. Caller
// storage is zeroed, as quantized_matrix's is.
template <class F, class T>
void check_view_matches_quantize(const input<T>& in, const quantize_options& options) {
  const quantized_shape shape = quantized_shape_for(in.rows, in.cols, options);
  caller_storage<F> s(shape);
  const quantize_stats stats = quantize_into(in.view(), s.view, options);
  const quantized_matrix<F> q = quantize<F>(in.view(), options);
  check_same_bytes(s, q);
  check_same_stats(stats, q.stats());
  // The same through a mutable input view.
  std::vector<T> copy = in.data;
  caller_storage<F> s2(shape);
  (void)quantize_into(matrix_view<T>(copy.data(), in.rows, in.cols, in.ld), s2.view, options);
  CHECK(s2.elements == s.elements);
  CHECK(s2.scales == s.scales);
}

template <class F, class T>
void view_matches_quantize_for_type() {
  const std::size_t shapes[][3] = {{37, 83, 83}, {37, 83, 101}, {150, 45, 50}, {1, 1, 1},
                                   {64, 64, 64}, {0, 5, 5},     {5, 0, 3}};
  std::uint64_t seed = 100;
  for (const auto& sz : shapes) {
    const auto in = make_input<T>(sz[0], sz[1], sz[2], seed++);
    for (int variant = 0; variant < 32; ++variant) {
      quantize_options o;
      o.columnwise = (variant & 1) != 0;
      o.shape = (variant & 2) != 0 ? block_shape::tile : block_shape::rowwise;
      o.layout = (variant & 4) != 0 ? scale_layout::tensor_core : scale_layout::row_major;
      o.rounding =
          (variant & 8) != 0 ? element_rounding::stochastic : element_rounding::nearest_even;
      o.seed = 0x1234 + static_cast<std::uint64_t>(variant);
      o.offset = 7;
      o.hadamard = (variant & 16) != 0;
      if (o.hadamard && !hadamard_allowed<F>())
        continue;
      if (o.hadamard && variant % 3 == 0)
        o.transform = hadamard16::from_seed(static_cast<std::uint64_t>(variant));
      o.encode_scale = variant % 5 == 0 ? 1.0f : 37.5f;
      INFO(type_name(static_cast<T*>(nullptr))
           << " " << sz[0] << " x " << sz[1] << " ld " << sz[2] << " variant " << variant);
      check_view_matches_quantize<F>(in, o);
    }
  }
}

} // namespace

TEMPLATE_TEST_CASE("quantize_into a caller view gives what quantize gives",
                   "[views][quantize_into]", nvfp4, mxfp4, ue5m3_fp4, mxfp8, fp4_b48) {
  view_matches_quantize_for_type<TestType, float>();
  view_matches_quantize_for_type<TestType, bfloat16>();
  view_matches_quantize_for_type<TestType, float16>();
}

TEMPLATE_TEST_CASE("quantize_into writes every byte of the caller's storage",
                   "[views][quantize_into]", nvfp4, mxfp4, ue5m3_fp4, mxfp8, fp4_b48) {
  // Caller storage that is not zeroed (a reused buffer, a fresh allocation): the result must not
  // depend on what the buffers held before, padding included.
  using F = TestType;
  const auto in = make_input<float>(37, 83, 83, 77);
  for (int variant = 0; variant < 8; ++variant) {
    quantize_options o;
    o.columnwise = (variant & 1) != 0;
    o.layout = (variant & 2) != 0 ? scale_layout::tensor_core : scale_layout::row_major;
    o.hadamard = (variant & 4) != 0;
    const quantized_shape shape = quantized_shape_for(in.rows, in.cols, o);
    caller_storage<F> dirty(shape, 0xA5);
    const quantize_stats stats = quantize_into(in.view(), dirty.view, o);
    const auto q = quantize<F>(in.view(), o);
    INFO("variant " << variant);
    // Elements, including the zero padding of each row to a multiple of B.
    CHECK(dirty.elements == element_bytes(q));
    check_same_stats(stats, q.stats());
    CHECK(float_bits(dirty.decode) == float_bits(q.decode_scale()));
    // Scales: those of the matrix's rows and blocks, then the layout's padding.
    const auto clean = q.view();
    std::vector<bool> used(dirty.scales.size(), false);
    std::size_t logical_mismatches = 0;
    for (std::size_t r = 0; r < clean.rows(); ++r)
      for (std::size_t kb = 0; kb < clean.blocks_per_row(); ++kb) {
        const std::size_t i = clean.scale_index(r, kb);
        used[i] = true;
        logical_mismatches += dirty.scales[i] != q.scale_data()[i];
      }
    std::size_t padding_bytes = 0, padding_mismatches = 0;
    for (std::size_t i = 0; i < used.size(); ++i)
      if (!used[i]) {
        ++padding_bytes;
        CHECK(q.scale_data()[i] == 0); // quantized_matrix's padding is zero scales
        padding_mismatches += dirty.scales[i] != 0;
      }
    CHECK(logical_mismatches == 0);
    CHECK((o.layout == scale_layout::row_major) == (padding_bytes == 0));
    // The tensor-core layout's padding (rows up to a multiple of 128, blocks up to 4) is zero
    // scales whatever the caller's buffer held before (0xA5 here): quantize_into writes it.
    CHECK(padding_mismatches == 0);
  }
}

// ---- mismatched outputs -------------------------------------------------------------------------

TEST_CASE("quantize_into names what differs between the view and the options",
          "[views][quantize_into]") {
  const auto in = make_input<float>(37, 83, 83, 5);
  const matrix_view<const float> x = in.view();
  quantize_options o;
  const quantized_shape right = quantized_shape_for(37, 83, o);
  auto message_for = [&](const quantized_shape& shape, const quantize_options& options) {
    caller_storage<nvfp4> s(shape);
    return message_of([&] { (void)quantize_into(x, s.view, options); });
  };
  REQUIRE(message_for(right, o) == "<none>");

  quantized_shape s = right;
  s.rows = 36;
  std::string m = message_for(s, o);
  CHECK(contains(m, "out"));
  CHECK(contains(m, "36 x 83"));
  CHECK(contains(m, "37 x 83"));
  s = right;
  s.cols = 84;
  CHECK(contains(message_for(s, o), "37 x 84"));
  // The transpose's shape, but a rowwise view for columnwise options.
  quantize_options col = o;
  col.columnwise = true;
  s = right;
  s.rows = 83;
  s.cols = 37;
  m = message_for(s, col);
  CHECK(contains(m, "rowwise"));
  CHECK(contains(m, "columnwise"));
  s.columnwise = true;
  CHECK(message_for(s, col) == "<none>");
  // A columnwise view of the right size for rowwise options (a square input).
  const auto sq = make_input<float>(32, 32, 32, 6);
  {
    quantized_shape cs = quantized_shape_for(32, 32, col);
    caller_storage<nvfp4> st(cs);
    m = message_of([&] { (void)quantize_into(sq.view(), st.view, o); });
    CHECK(contains(m, "is columnwise but the options say rowwise"));
  }
  s = right;
  s.blocks = block_shape::tile;
  CHECK(contains(message_for(s, o), "options.shape"));
  s = right;
  s.layout = scale_layout::tensor_core;
  CHECK(contains(message_for(s, o), "options.layout"));
  s = right;
  s.hadamard = true;
  CHECK(contains(message_for(s, o), "options.hadamard"));
  quantize_options h = o;
  h.hadamard = true;
  CHECK(contains(message_for(right, h), "options.hadamard"));
  // The same transform on both sides, but other signs.
  s = quantized_shape_for(37, 83, h);
  s.transform = hadamard16::from_sign_mask(0x0001);
  CHECK(contains(message_for(s, h), "options.transform"));
  // Without the transform its signs do not matter.
  s = right;
  s.transform = hadamard16::from_sign_mask(0x0001);
  CHECK(message_for(s, o) == "<none>");
}

// ---- two outputs --------------------------------------------------------------------------------

namespace {

// The pair overload against two single quantize_into calls: bytes, scales, decode scales, stats.
template <class R, class C, class T>
quantize_pair_stats check_pair(const input<T>& in, const quantize_options& ro,
                               const quantize_options& co, thread_pool* pool) {
  const quantized_shape rs = quantized_shape_for(in.rows, in.cols, ro);
  const quantized_shape cs = quantized_shape_for(in.rows, in.cols, co);
  caller_storage<R> pr(rs), sr(rs);
  caller_storage<C> pc(cs), sc(cs);
  const quantize_pair_stats pair = quantize_into(in.view(), pr.view, ro, pc.view, co, pool);
  const quantize_stats row = quantize_into(in.view(), sr.view, ro);
  const quantize_stats column = quantize_into(in.view(), sc.view, co);
  CHECK(pr.elements == sr.elements);
  CHECK(pr.scales == sr.scales);
  CHECK(float_bits(pr.decode) == float_bits(sr.decode));
  CHECK(pc.elements == sc.elements);
  CHECK(pc.scales == sc.scales);
  CHECK(float_bits(pc.decode) == float_bits(sc.decode));
  check_same_stats(pair.rowwise, row);
  check_same_stats(pair.columnwise, column);
  return pair;
}

// Inputs for the pair tests: random data, one with a NaN, an Inf and a zero block.
template <class T>
std::vector<input<T>> pair_inputs() {
  std::vector<input<T>> inputs;
  inputs.push_back(make_input<T>(70, 45, 45, 11));
  inputs.push_back(make_input<T>(1, 1, 1, 12));
  inputs.push_back(make_input<T>(0, 5, 5, 13));
  inputs.push_back(make_input<T>(5, 0, 2, 13));
  inputs.push_back(make_input<T>(130, 200, 211, 14));
  auto special = make_input<T>(66, 70, 72, 15);
  special.data[3 * 72 + 5] = to<T>(qnan);
  special.data[40 * 72 + 64] = to<T>(inf);
  for (std::size_t c = 0; c < 48; ++c) // a zero block for every block size up to 48
    special.data[10 * 72 + c] = to<T>(0.0f);
  for (std::size_t r = 0; r < 48; ++r)
    special.data[r * 72 + 69] = to<T>(0.0f);
  inputs.push_back(special);
  inputs.push_back(make_input<T>(64, 128, 128, 16, 1e4f)); // saturates at s_enc = 1e3
  return inputs;
}

template <class R, class C, class T>
void pair_cases(thread_pool* pool) {
  const auto inputs = pair_inputs<T>();
  quantize_pair_stats seen; // what the cases covered, summed
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    for (int variant = 0; variant < 24; ++variant) {
      quantize_options ro, co;
      co.columnwise = true;
      ro.encode_scale = variant % 3 == 0 ? 1.0f : 448.0f;
      co.encode_scale = variant % 4 == 0 ? 1e3f : 0.25f;
      ro.rounding = (variant & 1) ? element_rounding::stochastic : element_rounding::nearest_even;
      co.rounding = (variant & 2) ? element_rounding::stochastic : element_rounding::nearest_even;
      ro.seed = 99;
      co.seed = 100;
      co.offset = static_cast<std::uint64_t>(variant);
      ro.layout = (variant & 4) ? scale_layout::tensor_core : scale_layout::row_major;
      co.layout = (variant & 8) ? scale_layout::tensor_core : scale_layout::row_major;
      ro.shape = variant % 5 == 1 ? block_shape::tile : block_shape::rowwise;
      co.shape = variant % 7 == 2 ? block_shape::tile : block_shape::rowwise;
      if (hadamard_allowed<C>() && variant % 3 == 1) {
        co.hadamard = true; // one side only
        co.transform = hadamard16::from_seed(static_cast<std::uint64_t>(variant));
      }
      if (hadamard_allowed<R>() && variant % 6 == 5)
        ro.hadamard = true;
      if (variant == 23)
        ro.rule = scale_rule{4.0f, scale_rounding::up};
      if (variant == 22)
        co.rule = scale_rule{6.0f, scale_rounding::down};
      INFO("input " << i << " (" << inputs[i].rows << " x " << inputs[i].cols << ") variant "
                    << variant);
      const quantize_pair_stats stats = check_pair<R, C>(inputs[i], ro, co, pool);
      seen.rowwise.merge(stats.rowwise);
      seen.columnwise.merge(stats.columnwise);
    }
  }
  // The cases reached NaN, zero and (where the scale format can) saturated blocks on both sides.
  CHECK(seen.rowwise.nan_scales > 0);
  CHECK(seen.columnwise.nan_scales > 0);
  // (UE8M0 has no zero: its blocks of zeros get the smallest scale instead.)
  CHECK((seen.rowwise.zero_scales > 0) == has_zero_scale<R>());
  CHECK((seen.columnwise.zero_scales > 0) == has_zero_scale<C>());
  if (C::scale_max() < 1e30f)
    CHECK(seen.columnwise.saturated_scales > 0);
}

} // namespace

TEST_CASE("the two-output quantize_into equals two single calls", "[views][pair]") {
  thread_pool two(2);
  SECTION("nvfp4 / nvfp4") {
    pair_cases<nvfp4, nvfp4, float>(nullptr);
    pair_cases<nvfp4, nvfp4, bfloat16>(nullptr);
    pair_cases<nvfp4, nvfp4, float>(&two);
  }
  SECTION("mxfp4 / mxfp4") {
    pair_cases<mxfp4, mxfp4, float>(nullptr);
    pair_cases<mxfp4, mxfp4, float16>(&two);
  }
  SECTION("ue5m3_fp4 / nvfp4") {
    pair_cases<ue5m3_fp4, nvfp4, float>(nullptr);
    pair_cases<ue5m3_fp4, nvfp4, bfloat16>(&two);
  }
  SECTION("mxfp8 / mxfp8") {
    pair_cases<mxfp8, mxfp8, float>(nullptr);
    pair_cases<mxfp8, mxfp8, bfloat16>(&two);
  }
  SECTION("a block size on the reference path") {
    pair_cases<fp4_b48, fp4_b48, float>(nullptr);
    pair_cases<nvfp4, fp4_b48, bfloat16>(&two);
  }
  SECTION("nvfp4 / mxfp8 and mxfp4 / ue5m3_fp4") {
    pair_cases<nvfp4, mxfp8, float>(&two);
    pair_cases<mxfp4, ue5m3_fp4, bfloat16>(nullptr);
  }
}

TEST_CASE("the two-output quantize_into checks its directions and outputs", "[views][pair]") {
  const auto in = make_input<float>(20, 48, 48, 21);
  quantize_options ro, co;
  co.columnwise = true;
  caller_storage<nvfp4> r(quantized_shape_for(20, 48, ro)), c(quantized_shape_for(20, 48, co));
  CHECK_NOTHROW(quantize_into(in.view(), r.view, ro, c.view, co));
  quantize_options bad_ro = ro;
  bad_ro.columnwise = true;
  std::string m = message_of([&] { (void)quantize_into(in.view(), r.view, bad_ro, c.view, co); });
  CHECK(contains(m, "rowwise_options.columnwise"));
  quantize_options bad_co = co;
  bad_co.columnwise = false;
  m = message_of([&] { (void)quantize_into(in.view(), r.view, ro, c.view, bad_co); });
  CHECK(contains(m, "columnwise_options.columnwise"));
  // Outputs are checked and named.
  m = message_of([&] { (void)quantize_into(in.view(), c.view, ro, c.view, co); });
  CHECK(contains(m, "rowwise"));
  quantize_options h = co;
  h.hadamard = true;
  m = message_of([&] { (void)quantize_into(in.view(), r.view, ro, c.view, h); });
  CHECK(contains(m, "columnwise disagrees with options.hadamard"));
  // Options are checked too.
  quantize_options bad_scale = co;
  bad_scale.encode_scale = 0.0f;
  m = message_of([&] { (void)quantize_into(in.view(), r.view, ro, c.view, bad_scale); });
  CHECK(contains(m, "encode_scale"));
}

// ---- tensor-scale policies ----------------------------------------------------------------------

TEST_CASE("policy quantize_into: current scaling measures once per call, through the hook",
          "[views][policy]") {
  thread_pool pool(2);
  const auto in = make_input<bfloat16>(70, 96, 100, 31, 3.0f);
  for (bool hadamard : {false, true})
    for (bool columnwise : {false, true})
      for (thread_pool* p : {static_cast<thread_pool*>(nullptr), &pool}) {
        quantize_options o;
        o.hadamard = hadamard;
        o.columnwise = columnwise;
        o.encode_scale = 5.0f; // replaced by the policy's
        const float amax = measure_amax<nvfp4>(in.view(), o);
        REQUIRE(amax > 0.0f);
        current_tensor_scale policy = current_tensor_scale::make<nvfp4>();
        caller_storage<nvfp4> s(quantized_shape_for(in.rows, in.cols, o));
        std::vector<float> seen;
        for (int call = 0; call < 3; ++call) {
          const quantize_stats stats = quantize_into(
              in.view(), s.view, policy, o,
              [&](float a) {
                seen.push_back(a);
                return a;
              },
              p);
          CHECK(stats.blocks > 0);
        }
        INFO("hadamard " << hadamard << " columnwise " << columnwise << " pool " << (p != nullptr));
        REQUIRE(seen.size() == 3);
        for (float a : seen)
          CHECK(float_bits(a) == float_bits(amax));
        CHECK(policy.calls == 3);
        const float s_enc = encode_scale_from_amax(policy.numerator, amax);
        CHECK(float_bits(policy.encode_scale()) == float_bits(s_enc));
        quantize_options plain = o;
        plain.encode_scale = s_enc;
        check_same_bytes(s, quantize<nvfp4>(in.view(), plain));
      }
}

TEST_CASE("policy quantize_into: the hook's value is what the policy uses", "[views][policy]") {
  const auto in = make_input<float>(16, 64, 64, 32);
  quantize_options o;
  current_tensor_scale policy = current_tensor_scale::make<ue5m3_fp4>(8);
  caller_storage<ue5m3_fp4> s(quantized_shape_for(16, 64, o));
  const float amax = measure_amax<ue5m3_fp4>(in.view(), o);
  (void)quantize_into(in.view(), s.view, policy, o, [](float a) { return 4.0f * a; });
  const float s_enc = encode_scale_from_amax(policy.numerator, 4.0f * amax);
  CHECK(float_bits(policy.encode_scale()) == float_bits(s_enc));
  CHECK(float_bits(s.decode) == float_bits(1.0f / s_enc));
  // The default hook is the identity.
  (void)quantize_into(in.view(), s.view, policy, o);
  CHECK(float_bits(policy.encode_scale()) ==
        float_bits(encode_scale_from_amax(policy.numerator, amax)));
  identity_amax identity;
  CHECK(identity(2.5f) == 2.5f);
}

TEST_CASE("policy quantize_into: delayed scaling hooks the quantizing pass's amax after it",
          "[views][policy]") {
  thread_pool pool(2);
  const auto in = make_input<float>(40, 80, 80, 33, 2.0f);
  for (thread_pool* p : {static_cast<thread_pool*>(nullptr), &pool}) {
    quantize_options o;
    o.columnwise = p != nullptr;
    delayed_tensor_scale policy = delayed_tensor_scale::make<nvfp4>(4, 0);
    caller_storage<nvfp4> s(quantized_shape_for(in.rows, in.cols, o));
    int calls = 0;
    float seen = -1.0f, decode_when_hooked = 0.0f;
    s.decode = -7.0f; // overwritten by the quantization, which must come before the hook
    const quantize_stats stats = quantize_into(
        in.view(), s.view, policy, o,
        [&](float a) {
          ++calls;
          seen = a;
          decode_when_hooked = s.decode;
          return 2.0f * a;
        },
        p);
    CHECK(calls == 1);
    CHECK(float_bits(seen) == float_bits(stats.amax));
    CHECK(float_bits(seen) == float_bits(measure_amax<nvfp4>(in.view(), o)));
    CHECK(decode_when_hooked == 1.0f); // quantized with the initial s_enc = 1, before the hook
    // The next call's scale comes from the hook's value.
    CHECK(float_bits(policy.encode_scale()) ==
          float_bits(encode_scale_from_amax(policy.numerator, 2.0f * stats.amax)));
    CHECK(policy.calls == 1);
  }
}

TEST_CASE("policy quantize_into: a bad hook value throws naming the hook", "[views][policy]") {
  const auto in = make_input<float>(8, 32, 32, 34);
  quantize_options o;
  caller_storage<nvfp4> s(quantized_shape_for(8, 32, o));
  {
    current_tensor_scale policy = current_tensor_scale::make<nvfp4>();
    CHECK(contains(message_of([&] {
                     (void)quantize_into(in.view(), s.view, policy, o, [](float) { return -1.0f; });
                   }),
                   "hook"));
    CHECK(contains(message_of([&] {
                     (void)quantize_into(in.view(), s.view, policy, o, [](float) { return qnan; });
                   }),
                   "hook"));
    CHECK(contains(message_of([&] {
                     (void)quantize_into(in.view(), s.view, policy, o,
                                         [](float) { return -1e-30f; });
                   }),
                   "hook"));
    // Inf and zero are amaxes; a NaN answer to a NaN measurement is fine.
    CHECK_NOTHROW(quantize_into(in.view(), s.view, policy, o, [](float) { return inf; }));
    CHECK_NOTHROW(quantize_into(in.view(), s.view, policy, o, [](float) { return 0.0f; }));
    auto nan_in = in;
    nan_in.data[5] = qnan;
    CHECK_NOTHROW(quantize_into(nan_in.view(), s.view, policy, o, [](float a) { return a; }));
    // No call counts for a throwing hook.
    current_tensor_scale fresh = current_tensor_scale::make<nvfp4>();
    (void)message_of(
        [&] { (void)quantize_into(in.view(), s.view, fresh, o, [](float) { return -2.0f; }); });
    CHECK(fresh.calls == 0);
  }
  {
    delayed_tensor_scale policy = delayed_tensor_scale::make<nvfp4>(4, 0);
    CHECK(contains(message_of([&] {
                     (void)quantize_into(in.view(), s.view, policy, o, [](float) { return -1.0f; });
                   }),
                   "hook"));
    CHECK(contains(message_of([&] {
                     (void)quantize_into(in.view(), s.view, policy, o, [](float) { return qnan; });
                   }),
                   "hook"));
  }
}

TEST_CASE("pair policy quantize_into shares one measurement unless a transform differs",
          "[views][policy][pair]") {
  thread_pool pool(2);
  const auto in = make_input<float>(70, 45, 45, 35, 3.0f);
  for (thread_pool* p : {static_cast<thread_pool*>(nullptr), &pool}) {
    INFO("pool " << (p != nullptr));
    quantize_options ro, co;
    co.columnwise = true;
    std::vector<float> seen;
    const auto hook = [&](float a) {
      seen.push_back(a);
      return a;
    };
    {
      // No transform: one measurement for both outputs, even of different formats.
      caller_storage<nvfp4> r(quantized_shape_for(70, 45, ro));
      caller_storage<mxfp8> c(quantized_shape_for(70, 45, co));
      current_tensor_scale rp = current_tensor_scale::make<nvfp4>();
      current_tensor_scale cp = current_tensor_scale::make<mxfp8>();
      const auto stats = quantize_into(in.view(), r.view, rp, ro, c.view, cp, co, hook, p);
      const float amax = measure_amax<nvfp4>(in.view(), ro);
      REQUIRE(seen.size() == 1);
      CHECK(float_bits(seen[0]) == float_bits(amax));
      CHECK(float_bits(stats.rowwise.amax) == float_bits(amax));
      CHECK(float_bits(stats.columnwise.amax) == float_bits(amax));
      CHECK(rp.calls == 1);
      CHECK(cp.calls == 1);
      quantize_options pr = ro, pc = co;
      pr.encode_scale = encode_scale_from_amax(rp.numerator, amax);
      pc.encode_scale = encode_scale_from_amax(cp.numerator, amax);
      check_same_bytes(r, quantize<nvfp4>(in.view(), pr));
      check_same_bytes(c, quantize<mxfp8>(in.view(), pc));
    }
    seen.clear();
    {
      // A transform on the columnwise side: two measurements, each of what its side sees.
      quantize_options ch = co;
      ch.hadamard = true;
      caller_storage<nvfp4> r(quantized_shape_for(70, 45, ro));
      caller_storage<nvfp4> c(quantized_shape_for(70, 45, ch));
      current_tensor_scale rp = current_tensor_scale::make<nvfp4>();
      current_tensor_scale cp = current_tensor_scale::make<nvfp4>();
      (void)quantize_into(in.view(), r.view, rp, ro, c.view, cp, ch, hook, p);
      REQUIRE(seen.size() == 2);
      CHECK(float_bits(seen[0]) == float_bits(measure_amax<nvfp4>(in.view(), ro)));
      CHECK(float_bits(seen[1]) == float_bits(measure_amax<nvfp4>(in.view(), ch)));
      CHECK(seen[0] != seen[1]);
      quantize_options pr = ro, pc = ch;
      pr.encode_scale = encode_scale_from_amax(rp.numerator, seen[0]);
      pc.encode_scale = encode_scale_from_amax(cp.numerator, seen[1]);
      check_same_bytes(r, quantize<nvfp4>(in.view(), pr));
      check_same_bytes(c, quantize<nvfp4>(in.view(), pc));
    }
    seen.clear();
    {
      // Current rowwise, delayed columnwise: once before quantizing, once after.
      caller_storage<nvfp4> r(quantized_shape_for(70, 45, ro));
      caller_storage<nvfp4> c(quantized_shape_for(70, 45, co));
      current_tensor_scale rp = current_tensor_scale::make<nvfp4>();
      delayed_tensor_scale cp = delayed_tensor_scale::make<nvfp4>(2, 0);
      const auto stats = quantize_into(in.view(), r.view, rp, ro, c.view, cp, co, hook, p);
      REQUIRE(seen.size() == 2);
      CHECK(float_bits(seen[0]) == float_bits(measure_amax<nvfp4>(in.view(), ro)));
      CHECK(float_bits(seen[1]) == float_bits(stats.columnwise.amax));
      CHECK(c.decode == 1.0f); // the delayed side's first call uses s_enc = 1
      CHECK(cp.calls == 1);
    }
    {
      // A bad hook value throws naming the hook.
      caller_storage<nvfp4> r(quantized_shape_for(70, 45, ro));
      caller_storage<nvfp4> c(quantized_shape_for(70, 45, co));
      current_tensor_scale rp = current_tensor_scale::make<nvfp4>();
      current_tensor_scale cp = current_tensor_scale::make<nvfp4>();
      CHECK(contains(message_of([&] {
                       (void)quantize_into(
                           in.view(), r.view, rp, ro, c.view, cp, co, [](float) { return -3.0f; },
                           p);
                     }),
                     "hook"));
    }
  }
}

namespace {

// max |v| over the quantized matrix (x, or its transpose when columnwise), each row padded with
// zeros to a multiple of 16 and Hadamard-transformed per 16-group when `hadamard`: written here
// from the documentation, not from the library's amax code.
float expected_amax(const std::vector<float>& x, std::size_t rows, std::size_t cols,
                    bool columnwise, bool hadamard, hadamard16 transform) {
  const std::size_t q_rows = columnwise ? cols : rows, q_cols = columnwise ? rows : cols;
  float amax = 0.0f;
  for (std::size_t r = 0; r < q_rows; ++r)
    for (std::size_t g = 0; g < q_cols; g += 16) {
      float in[16], out[16];
      for (std::size_t j = 0; j < 16; ++j) {
        const std::size_t c = g + j;
        in[j] = c >= q_cols ? 0.0f : columnwise ? x[c * cols + r] : x[r * cols + c];
      }
      if (hadamard)
        transform.forward(in, out);
      else
        std::memcpy(out, in, sizeof out);
      for (float v : out)
        amax = std::fmax(amax, std::fabs(v));
    }
  return amax;
}

} // namespace

TEST_CASE("measure_amax is the amax of the data as quantized", "[views][policy]") {
  thread_pool pool(3);
  const std::size_t shapes[][2] = {{70, 45}, {3, 10000}, {9000, 3}, {131, 257}, {1, 1}};
  for (const auto& sz : shapes) {
    const std::size_t rows = sz[0], cols = sz[1];
    auto in = make_input<float>(rows, cols, cols, rows * 7 + cols);
    in.data.back() = 50.0f; // the largest value, in the last partial strip and group
    for (int variant = 0; variant < 4; ++variant) {
      quantize_options o;
      o.columnwise = (variant & 1) != 0;
      o.hadamard = (variant & 2) != 0;
      o.transform = hadamard16::from_seed(static_cast<std::uint64_t>(variant));
      const float expected =
          expected_amax(in.data, rows, cols, o.columnwise, o.hadamard, o.transform);
      INFO(rows << " x " << cols << " variant " << variant);
      CHECK(float_bits(measure_amax<nvfp4>(in.view(), o)) == float_bits(expected));
      CHECK(float_bits(measure_amax<mxfp8>(in.view(), o, &pool)) == float_bits(expected));
      // The quantizing pass reports the same amax.
      CHECK(float_bits(quantize<ue5m3_fp4>(in.view(), o).stats().amax) == float_bits(expected));
    }
  }
  // Empty inputs have amax 0; a NaN anywhere makes it NaN.
  CHECK(measure_amax<nvfp4>(matrix_view<const float>(nullptr, 0, 7)) == 0.0f);
  auto nan_in = make_input<float>(20, 20, 20, 44);
  nan_in.data[399] = qnan;
  CHECK(std::isnan(measure_amax<nvfp4>(nan_in.view())));
}

TEST_CASE("tensor_scale_numerator is exact where E_max · S_max · 2^-headroom is a float",
          "[views][policy]") {
  CHECK(tensor_scale_numerator<nvfp4>(0) == 2688.0f);
  CHECK(tensor_scale_numerator<nvfp4>(3) == 336.0f);
  CHECK(tensor_scale_numerator<ue5m3_fp4>(8) == 2688.0f);
  // For UE8M0 scales E_max · S_max exceeds float's range before the headroom brings it back:
  // the numerator is computed in double, exactly.
  CHECK(tensor_scale_numerator<mxfp8>(8) == std::ldexp(448.0f, 119));
  CHECK(tensor_scale_numerator<mxfp4>(3) == std::ldexp(6.0f, 124));
  CHECK(std::isfinite(current_tensor_scale::make<mxfp8>(8).numerator));
}

// ---- dequantize ---------------------------------------------------------------------------------

namespace {

template <class F>
void check_dequantize_types(const quantized_matrix<F>& q, thread_pool& pool) {
  const std::size_t rows = q.rows(), cols = q.cols(), padded = q.padded_cols();
  std::vector<float> f(rows * cols, qnan);
  dequantize(q, matrix_view<float>(f.data(), rows, cols));
  // Output with ld > cols: the gap is left alone.
  const std::size_t ld = cols + 3;
  std::vector<bfloat16> b(rows * ld, bfloat16::from_bits(0x1234));
  std::vector<float16> h(rows * ld, float16::from_bits(0x4321));
  dequantize(q.view(), matrix_view<bfloat16>(b.data(), rows, cols, ld));
  dequantize(q.view(), matrix_view<float16>(h.data(), rows, cols, ld), pool);
  std::size_t mismatches = 0, gap_writes = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      const float v = f[r * cols + c];
      mismatches += float_bits(v) != float_bits(q.value(r, c));
      mismatches += b[r * ld + c].bits() != bfloat16(v).bits();
      mismatches += h[r * ld + c].bits() != float16(v).bits();
    }
    for (std::size_t c = cols; c < ld; ++c)
      gap_writes += b[r * ld + c].bits() != 0x1234 || h[r * ld + c].bits() != 0x4321;
  }
  CHECK(mismatches == 0);
  CHECK(gap_writes == 0);

  // The padded decode: padded_cols columns, the first cols as above.
  std::vector<float> fp(rows * padded, qnan);
  std::vector<bfloat16> bp(rows * padded);
  dequantize_padded(q, matrix_view<float>(fp.data(), rows, padded), pool);
  dequantize_padded(q.view(), matrix_view<bfloat16>(bp.data(), rows, padded));
  mismatches = 0;
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < padded; ++c) {
      const float v = fp[r * padded + c];
      mismatches += float_bits(v) != float_bits(q.value(r, c));
      mismatches += bp[r * padded + c].bits() != bfloat16(v).bits();
      if (c < cols)
        mismatches += float_bits(v) != float_bits(f[r * cols + c]);
    }
  CHECK(mismatches == 0);
}

} // namespace

TEMPLATE_TEST_CASE("dequantize to bfloat16 and float16 rounds the float decode",
                   "[views][dequantize]", nvfp4, mxfp4, ue5m3_fp4, mxfp8) {
  using F = TestType;
  thread_pool pool(2);
  // Rows 2^-30 .. 2^20 apart: float16 subnormals, underflow and overflow, bfloat16 rounding.
  input<float> in = make_input<float>(45, 70, 70, 41);
  for (std::size_t r = 0; r < in.rows; ++r)
    for (std::size_t c = 0; c < in.cols; ++c)
      in.data[r * in.ld + c] = std::ldexp(in.data[r * in.ld + c], static_cast<int>(r % 51) - 30);
  for (int variant = 0; variant < 4; ++variant) {
    quantize_options o;
    o.columnwise = (variant & 1) != 0;
    o.hadamard = (variant & 2) != 0;
    o.layout = variant == 3 ? scale_layout::tensor_core : scale_layout::row_major;
    o.encode_scale = variant == 2 ? 0.01f : 1.0f;
    INFO("variant " << variant);
    check_dequantize_types(quantize<F>(in.view(), o), pool);
  }
  // Rows longer than one decode step (256 blocks).
  const auto wide = make_input<float>(3, 9000, 9000, 43);
  quantize_options o;
  o.hadamard = true;
  check_dequantize_types(quantize<F>(wide.view(), o), pool);
}

TEST_CASE("dequantize checks the output shape, naming out", "[views][dequantize]") {
  const auto in = make_input<float>(10, 20, 20, 42);
  const auto q = quantize<nvfp4>(in.view());
  std::vector<float> f(11 * 32);
  std::vector<bfloat16> b(11 * 32);
  thread_pool pool(2);
  const std::string m = message_of([&] { dequantize(q, matrix_view<float>(f.data(), 10, 19)); });
  CHECK(contains(m, "out"));
  CHECK(contains(m, "10 x 19"));
  CHECK(contains(m, "10 x 20"));
  CHECK(contains(message_of([&] { dequantize(q, matrix_view<float>(f.data(), 11, 20)); }), "out"));
  CHECK(contains(
      message_of([&] { dequantize(q.view(), matrix_view<bfloat16>(b.data(), 9, 20), pool); }),
      "out"));
  // dequantize_padded wants padded_cols (32) columns, not cols.
  const std::string p =
      message_of([&] { dequantize_padded(q, matrix_view<float>(f.data(), 10, 20)); });
  CHECK(contains(p, "dequantize_padded"));
  CHECK(contains(p, "out"));
  CHECK(contains(p, "10 x 32"));
  CHECK_NOTHROW(dequantize_padded(q, matrix_view<float>(f.data(), 10, 32)));
  CHECK(contains(message_of([&] { dequantize(q, matrix_view<float>(f.data(), 10, 32)); }), "out"));
  // An empty matrix decodes into an empty view with no data.
  const auto e = quantize<nvfp4>(matrix_view<const float>(nullptr, 0, 5));
  CHECK_NOTHROW(dequantize(e, matrix_view<float>(nullptr, 0, 5)));
  CHECK_NOTHROW(dequantize_padded(e, matrix_view<float16>(nullptr, 0, 16), pool));
}

// ---- measure_error ------------------------------------------------------------------------------

TEST_CASE("measure_error compares where quantization happened", "[views][metrics]") {
  input<float> in;
  in.rows = 64;
  in.cols = 256;
  in.ld = 256;
  in.data.resize(64 * 256);
  splitmix64 rng{51};
  for (float& v : in.data)
    v = static_cast<float>(rng.normal());
  for (bool columnwise : {false, true}) {
    quantize_options o;
    o.hadamard = true;
    o.columnwise = columnwise;
    o.encode_scale =
        encode_scale_from_amax(tensor_scale_numerator<nvfp4>(0), measure_amax<nvfp4>(in.view(), o));
    const auto q = quantize<nvfp4>(in.view(), o);
    const quantization_error e = measure_error(in.view(), q);
    INFO("columnwise " << columnwise);
    CHECK(e.elements == 64 * 256);
    CHECK(e.sqnr_db > 15.0);
    CHECK(e.relative_mse < 0.05);
    CHECK(e.blocks == q.stats().blocks);
    CHECK(e.saturated_scales == 0);
    // The same through the view (no stats).
    const quantization_error v = measure_error(in.view(), q.view());
    CHECK(v.sqnr_db == e.sqnr_db);
    CHECK(v.blocks == 0);
    // Against the untransformed data (what the old API compared) the error is as large as the
    // signal.
    quantized_shape plain = q.shape();
    plain.hadamard = false;
    const auto wrong = const_quantized_view<nvfp4>::unchecked(
        plain, q.element_data(), q.scale_data(), q.view().decode_scale_data());
    CHECK(measure_error(in.view(), wrong).sqnr_db < 0.0);
  }
  // Without the transform, columnwise and rowwise compare the right elements too.
  quantize_options col;
  col.columnwise = true;
  col.encode_scale = 100.0f;
  CHECK(measure_error(in.view(), quantize<nvfp4>(in.view(), col)).sqnr_db > 15.0);
  // The shape is checked (transposed when columnwise).
  const auto q = quantize<nvfp4>(in.view(), col);
  const std::string m = message_of(
      [&] { (void)measure_error(matrix_view<const float>(in.data.data(), 256, 64), q); });
  CHECK(contains(m, "measure_error"));
}

TEST_CASE("measure_error of an all-NaN input compares nothing", "[views][metrics]") {
  std::vector<float> x(4 * 32, qnan);
  const matrix_view<const float> view(x.data(), 4, 32);
  const auto q = quantize<nvfp4>(view);
  const quantization_error e = measure_error(view, q);
  CHECK(e.elements == 0);
  CHECK(std::isnan(e.relative_mse));
  CHECK(std::isnan(e.sqnr_db));
  CHECK(e.nan_scales == 8);
  CHECK(e.blocks == 8);
  // An all-zero input is exact.
  std::vector<float> zeros(4 * 32, 0.0f);
  const matrix_view<const float> z(zeros.data(), 4, 32);
  const quantization_error ez = measure_error(z, quantize<nvfp4>(z));
  CHECK(ez.elements == 128);
  CHECK(ez.relative_mse == 0.0);
  CHECK(std::isinf(ez.sqnr_db));
}

// ---- make_quantize_params -----------------------------------------------------------------------

TEST_CASE("make_quantize_params names the wrong option", "[views][options]") {
  const auto check_encode_scale = [](float s) {
    quantize_options o;
    o.encode_scale = s;
    INFO("encode_scale " << s);
    CHECK(contains(message_of([&] { (void)make_quantize_params<nvfp4>(4, 16, o); }),
                   "options.encode_scale"));
    // quantize_into and measure_amax check through it.
    std::vector<float> x(64, 1.0f);
    CHECK(contains(message_of([&] {
                     (void)measure_amax<nvfp4>(matrix_view<const float>(x.data(), 4, 16), o);
                   }),
                   "encode_scale"));
  };
  for (float s : {1e-40f, 1.4e-45f, 0.0f, -0.0f, -1.0f, qnan, inf, -inf})
    check_encode_scale(s);
  // The smallest s_enc with a finite reciprocal is accepted.
  quantize_options ok;
  ok.encode_scale = 3e-39f;
  CHECK_NOTHROW(make_quantize_params<nvfp4>(4, 16, ok));
  ok.encode_scale = std::numeric_limits<float>::max();
  CHECK_NOTHROW(make_quantize_params<nvfp4>(4, 16, ok));

  quantize_options t;
  t.threads = thread_pool::max_threads + 1;
  std::string m = message_of([&] { (void)make_quantize_params<nvfp4>(4, 16, t); });
  CHECK(contains(m, "threads"));
  CHECK(contains(m, "1025"));
  t.threads = thread_pool::max_threads;
  CHECK_NOTHROW(make_quantize_params<nvfp4>(4, 16, t));
  t.threads = 0;
  CHECK_NOTHROW(make_quantize_params<nvfp4>(4, 16, t));

  // Enumerations cast from out-of-range integers.
  quantize_options e;
  e.rounding = static_cast<element_rounding>(7);
  CHECK(contains(message_of([&] { (void)make_quantize_params<nvfp4>(4, 16, e); }), "rounding"));
  e = {};
  e.shape = static_cast<block_shape>(-1);
  CHECK(contains(message_of([&] { (void)make_quantize_params<nvfp4>(4, 16, e); }), "shape"));
  e = {};
  e.layout = static_cast<scale_layout>(2);
  CHECK(contains(message_of([&] { (void)make_quantize_params<nvfp4>(4, 16, e); }), "layout"));
  e = {};
  e.rule = scale_rule{6.0f, static_cast<scale_rounding>(9)};
  CHECK(
      contains(message_of([&] { (void)make_quantize_params<nvfp4>(4, 16, e); }), "rule->rounding"));
  e.rule = scale_rule{0.0f, scale_rounding::up};
  CHECK(contains(message_of([&] { (void)make_quantize_params<nvfp4>(4, 16, e); }), "rule->target"));
  e.rule = scale_rule{qnan, scale_rounding::up};
  CHECK(contains(message_of([&] { (void)make_quantize_params<nvfp4>(4, 16, e); }), "rule->target"));
  // s_enc / target overflowing float.
  e.rule = scale_rule{1e-30f, scale_rounding::up};
  e.encode_scale = 1e30f;
  CHECK(contains(message_of([&] { (void)make_quantize_params<nvfp4>(4, 16, e); }), "overflows"));

  // The parameters themselves.
  quantize_options g;
  g.encode_scale = 4.0f;
  g.columnwise = true;
  g.seed = 5;
  g.offset = 6;
  const quantize_params p = make_quantize_params<mxfp8>(3, 7, g);
  CHECK(p.shape.rows == 7);
  CHECK(p.shape.cols == 3);
  CHECK(p.shape.columnwise);
  CHECK(p.decode_scale == 0.25f);
  CHECK(p.scale_multiplier == 4.0f * (1.0f / p.rule.target));
  CHECK(p.seed == 5);
  CHECK(p.offset == 6);
}
