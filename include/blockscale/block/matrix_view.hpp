/// \file block/matrix_view.hpp
/// `matrix_view<T>`: a row-major matrix that someone else owns, for float, bfloat16 and float16
/// data (const for inputs). Trivially copyable, with `__host__ __device__` accessors, so the same
/// value is a kernel parameter on the device and a loop bound on the host. The constructors check
/// their arguments on the host; `unchecked` builds one anywhere, for code that has checked already.
#pragma once

#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "../config.hpp"

namespace blockscale {
inline namespace v0 {

/// Element (r, c) is data[r · ld + c]. `T` is float, bfloat16 or float16 (const for inputs);
/// CUDA's `__nv_bfloat16` and `__half` arrays are viewed through their bit-identical blockscale
/// types (`reinterpret_cast<const bfloat16*>`).
template <class T>
class matrix_view {
public:
  using value_type = T;

  /// An empty view (0 × 0, null data).
  matrix_view() = default;

  /// Checks the arguments and throws std::invalid_argument naming the one that is wrong: `ld`
  /// smaller than `cols`, null `data` with a nonzero size, or rows · ld elements beyond the
  /// address space. Host only.
  matrix_view(T* data, std::size_t rows, std::size_t cols, std::size_t ld)
      : data_(data), rows_(rows), cols_(cols), ld_(ld) {
    if (ld < cols)
      throw std::invalid_argument("matrix_view: ld (" + std::to_string(ld) +
                                  ") is smaller than cols (" + std::to_string(cols) + ")");
    if (data == nullptr && rows != 0 && cols != 0)
      throw std::invalid_argument("matrix_view: data is null but the matrix has " +
                                  std::to_string(rows) + " x " + std::to_string(cols) +
                                  " elements");
    if (rows != 0 && ld > std::numeric_limits<std::size_t>::max() / sizeof(T) / rows)
      throw std::invalid_argument("matrix_view: rows (" + std::to_string(rows) + ") x ld (" +
                                  std::to_string(ld) + ") elements overflow the address space");
  }
  /// A dense matrix (ld = cols), checked as above.
  matrix_view(T* data, std::size_t rows, std::size_t cols) : matrix_view(data, rows, cols, cols) {}

  /// A view built without checks, on the host or the device: the caller guarantees what the
  /// checking constructor would verify.
  [[nodiscard]] BLOCKSCALE_HOST_DEVICE static constexpr matrix_view
  unchecked(T* data, std::size_t rows, std::size_t cols, std::size_t ld) noexcept {
    matrix_view view;
    view.data_ = data;
    view.rows_ = rows;
    view.cols_ = cols;
    view.ld_ = ld;
    return view;
  }

  /// A view of mutable data converts to a view of const data.
  template <class U, std::enable_if_t<std::is_same<const U, T>::value, int> = 0>
  BLOCKSCALE_HOST_DEVICE constexpr matrix_view(matrix_view<U> other) noexcept
      : data_(other.data()), rows_(other.rows()), cols_(other.cols()), ld_(other.ld()) {}

  BLOCKSCALE_HOST_DEVICE constexpr T* data() const noexcept { return data_; }
  BLOCKSCALE_HOST_DEVICE constexpr std::size_t rows() const noexcept { return rows_; }
  BLOCKSCALE_HOST_DEVICE constexpr std::size_t cols() const noexcept { return cols_; }
  /// Elements from the start of one row to the start of the next.
  BLOCKSCALE_HOST_DEVICE constexpr std::size_t ld() const noexcept { return ld_; }
  /// Whether the view holds no element.
  BLOCKSCALE_HOST_DEVICE constexpr bool empty() const noexcept { return rows_ == 0 || cols_ == 0; }
  /// Element (r, c), unchecked.
  BLOCKSCALE_HOST_DEVICE constexpr T& operator()(std::size_t r, std::size_t c) const noexcept {
    return data_[r * ld_ + c];
  }
  /// The first element of row `r`, unchecked.
  BLOCKSCALE_HOST_DEVICE constexpr T* row(std::size_t r) const noexcept { return data_ + r * ld_; }

private:
  T* data_ = nullptr;
  std::size_t rows_ = 0, cols_ = 0, ld_ = 0;
};

static_assert(std::is_trivially_copyable<matrix_view<const float>>::value,
              "a matrix_view is passed to kernels by value");

} // namespace v0
} // namespace blockscale
