/// \file cuda/buffer.cuh
/// `device_quantized_matrix<BlockFormat>`: a quantized matrix in device memory — elements, block
/// scales and the decode scale in one stream-ordered allocation (`cudaMallocAsync`, freed with
/// `cudaFreeAsync` on the same stream) — that hands out the same `quantized_view` the host's
/// `quantized_matrix` does, and stream-ordered copies to and from a quantized matrix in host
/// memory (a `quantized_view` of it, or a host `quantized_matrix`, without including host/).
/// Move-only. Allocation failures throw `cuda::error`; copies return a status.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "../block/quantized_view.hpp"
#include "runner.cuh"
#include "status.hpp"

namespace blockscale {
inline namespace v0 {
namespace cuda {

/// A CUDA runtime error thrown by a constructor (which cannot return a status).
class error : public std::runtime_error {
public:
  explicit error(const status& s) : std::runtime_error(s.message()), status_(s) {}
  const status& why() const noexcept { return status_; }

private:
  status status_;
};

/// Owns `bytes` of device memory, allocated and freed in the order of `stream`.
class device_allocation {
public:
  device_allocation() = default;
  device_allocation(std::size_t bytes, cudaStream_t stream) : stream_(stream) {
    if (bytes == 0)
      return;
    void* data = nullptr;
    if (status s = detail::cuda_status(cudaMallocAsync(&data, bytes, stream), "cudaMallocAsync");
        !s)
      throw error(s);
    data_ = static_cast<std::uint8_t*>(data);
    bytes_ = bytes;
  }
  device_allocation(const device_allocation&) = delete;
  device_allocation& operator=(const device_allocation&) = delete;
  device_allocation(device_allocation&& other) noexcept { swap(other); }
  device_allocation& operator=(device_allocation&& other) noexcept {
    device_allocation(std::move(other)).swap(*this);
    return *this;
  }
  /// Frees in stream order: work queued before on the stream still sees the memory.
  ~device_allocation() {
    if (data_ != nullptr)
      (void)cudaFreeAsync(data_, stream_);
  }
  void swap(device_allocation& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    std::swap(stream_, other.stream_);
  }

  std::uint8_t* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return bytes_; }
  cudaStream_t stream() const noexcept { return stream_; }

private:
  std::uint8_t* data_ = nullptr;
  std::size_t bytes_ = 0;
  cudaStream_t stream_ = nullptr;
};

/// A quantized matrix in device memory.
template <class BlockFormat>
class device_quantized_matrix {
public:
  /// An empty matrix (0 × 0, no memory).
  device_quantized_matrix() = default;

  /// Storage for `shape`, allocated on `stream`; the elements and scales are not initialised
  /// (quantize into it), the decode scale is. Throws std::invalid_argument when a size overflows
  /// and cuda::error when the allocation fails.
  device_quantized_matrix(const quantized_shape& shape, cudaStream_t stream)
      : shape_(shape), storage_(storage_for<BlockFormat>(shape)),
        memory_(total_bytes(storage_), stream) {
    const float one = 1.0f;
    if (status s = detail::cuda_status(
            cudaMemcpyAsync(decode_scale(), &one, sizeof one, cudaMemcpyHostToDevice, stream),
            "device_quantized_matrix: cudaMemcpyAsync");
        !s)
      throw error(s);
    // The source lives on this stack frame: wait for the copy before it goes.
    if (status s = detail::cuda_status(cudaStreamSynchronize(stream),
                                       "device_quantized_matrix: cudaStreamSynchronize");
        !s)
      throw error(s);
  }

  const quantized_shape& shape() const noexcept { return shape_; }
  const quantized_storage& storage() const noexcept { return storage_; }
  /// The stream the memory is allocated and freed on.
  cudaStream_t stream() const noexcept { return memory_.stream(); }

  /// A view to quantize into (device pointers).
  quantized_view<BlockFormat> view() noexcept {
    return quantized_view<BlockFormat>::unchecked(shape_, elements(), scales(), decode_scale());
  }
  /// A view to read (dequantize, GEMM).
  const_quantized_view<BlockFormat> view() const noexcept {
    return const_quantized_view<BlockFormat>::unchecked(shape_, elements(), scales(),
                                                        decode_scale());
  }

  /// Copies the host matrix `host` views (same shape) into this matrix, in the order of `stream`.
  /// Its memory must stay alive and unchanged until the stream reaches the copy.
  [[nodiscard]] status copy_from(const_quantized_view<BlockFormat> host, cudaStream_t stream) {
    if (host.shape() != shape_)
      return {errc::invalid_argument, "device_quantized_matrix::copy_from: the host matrix has "
                                      "another shape"};
    return copy(elements(), host.elements(), scales(), host.scales(), decode_scale(),
                host.decode_scale_data(), cudaMemcpyHostToDevice, stream);
  }
  /// copy_from for a host container that hands out views (a host `quantized_matrix`).
  template <class Host, class View = decltype(std::declval<const Host&>().view())>
  [[nodiscard]] status copy_from(const Host& host, cudaStream_t stream) {
    return copy_from(const_quantized_view<BlockFormat>(host.view()), stream);
  }

  /// Copies this matrix into the host matrix `host` views (same shape), in the order of
  /// `stream`: synchronise the stream before reading it.
  [[nodiscard]] status copy_to(quantized_view<BlockFormat> host, cudaStream_t stream) const {
    if (host.shape() != shape_)
      return {errc::invalid_argument, "device_quantized_matrix::copy_to: the host matrix has "
                                      "another shape"};
    return copy(host.elements(), elements(), host.scales(), scales(), host.decode_scale_data(),
                decode_scale(), cudaMemcpyDeviceToHost, stream);
  }
  /// copy_to for a host container that hands out views (a host `quantized_matrix`).
  template <class Host, class View = decltype(std::declval<Host&>().view())>
  [[nodiscard]] status copy_to(Host& host, cudaStream_t stream) const {
    return copy_to(quantized_view<BlockFormat>(host.view()), stream);
  }

private:
  static constexpr std::size_t alignment = 256;

  static std::size_t round_up(std::size_t n) { return (n + alignment - 1) / alignment * alignment; }
  static std::size_t total_bytes(const quantized_storage& s) {
    return round_up(s.element_bytes) + round_up(s.scale_bytes) + sizeof(float);
  }
  std::uint8_t* elements() const noexcept { return memory_.data(); }
  std::uint8_t* scales() const noexcept {
    return memory_.data() == nullptr ? nullptr : memory_.data() + round_up(storage_.element_bytes);
  }
  float* decode_scale() const noexcept {
    return memory_.data() == nullptr
               ? nullptr
               : reinterpret_cast<float*>(memory_.data() + round_up(storage_.element_bytes) +
                                          round_up(storage_.scale_bytes));
  }

  template <class To, class From>
  status copy(To* elements_to, From* elements_from, To* scales_to, From* scales_from,
              float* scale_to, const float* scale_from, cudaMemcpyKind kind,
              cudaStream_t stream) const {
    if (storage_.element_bytes != 0)
      if (status s = detail::cuda_status(
              cudaMemcpyAsync(elements_to, elements_from, storage_.element_bytes, kind, stream),
              "cudaMemcpyAsync (elements)");
          !s)
        return s;
    if (storage_.scale_bytes != 0)
      if (status s = detail::cuda_status(
              cudaMemcpyAsync(scales_to, scales_from, storage_.scale_bytes, kind, stream),
              "cudaMemcpyAsync (scales)");
          !s)
        return s;
    return detail::cuda_status(cudaMemcpyAsync(scale_to, scale_from, sizeof(float), kind, stream),
                               "cudaMemcpyAsync (decode scale)");
  }

  quantized_shape shape_{};
  quantized_storage storage_{};
  device_allocation memory_;
};

} // namespace cuda
} // namespace v0
} // namespace blockscale
