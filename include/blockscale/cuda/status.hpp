/// \file cuda/status.hpp
/// `cuda::status`: what a launcher returns. Launchers check every argument before anything is
/// queued, so a bad argument is a status with a message and nothing written; a CUDA error (from the
/// launch or an allocation) is a status carrying the `cudaError_t` and its name. Host code; no CUDA
/// header is needed to hold or read one.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace blockscale {
inline namespace v0 {
namespace cuda {

/// What went wrong.
enum class errc {
  success = 0,
  invalid_argument, ///< a shape, an option or a pointer is wrong (the message says which)
  misaligned,       ///< a buffer is not aligned as the kernel's vector stores need
  too_large,        ///< the launch needs more CTAs than a grid holds
  cuda_error,       ///< the CUDA runtime reported an error (cuda_error() holds it)
  unsupported,      ///< the device, or the code built for it, lacks what the operation needs
};

/// The outcome of a launcher: success, or an error with a message. The launchers are
/// [[nodiscard]]: a status is meant to be looked at.
class status {
public:
  status() = default;
  status(errc code, std::string message, int cuda_error = 0)
      : code_(code), cuda_error_(cuda_error), message_(std::move(message)) {}

  bool ok() const noexcept { return code_ == errc::success; }
  explicit operator bool() const noexcept { return ok(); }
  errc code() const noexcept { return code_; }
  /// The `cudaError_t` value for errc::cuda_error, else 0.
  int cuda_error() const noexcept { return cuda_error_; }
  /// Empty on success.
  const std::string& message() const noexcept { return message_; }

  /// Throws std::runtime_error with the message unless ok() (for callers who prefer exceptions).
  void throw_if_error() const {
    if (!ok())
      throw std::runtime_error(message_);
  }

private:
  errc code_ = errc::success;
  int cuda_error_ = 0;
  std::string message_;
};

} // namespace cuda
} // namespace v0
} // namespace blockscale
