/// \file io/mapped_file.hpp
/// A file mapped read-only into memory (POSIX mmap), for reading checkpoints many times the size
/// of memory: bytes are read from disk when touched, and `release` hands pages back, so a stream
/// over a large file keeps only a few hundred MB resident. Errors are `safetensors_error`s naming
/// the file and the system's reason.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../config.hpp"
#include "safetensors_error.hpp"

namespace blockscale {
inline namespace v0 {
namespace io {

/// A file mapped read-only into memory (POSIX mmap). Move-only; unmapped on destruction.
class mapped_file {
public:
  mapped_file() = default;
  /// Maps `path`; throws safetensors_error with the system's reason when it cannot. An empty file
  /// maps to a null pointer and size 0.
  explicit mapped_file(const std::string& path) : path_(path) {
    // Non-blocking, so that a named pipe is refused below instead of waiting for a writer.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
      fail_errno("cannot open");
    struct stat info {};
    if (::fstat(fd, &info) != 0) {
      const int error = errno;
      ::close(fd);
      errno = error;
      fail_errno("cannot stat");
    }
    if (!S_ISREG(info.st_mode)) {
      ::close(fd);
      detail::safetensors_fail(path, "not a regular file");
    }
    size_ = static_cast<std::uint64_t>(info.st_size);
    if (size_ != 0) {
      void* address = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (address == MAP_FAILED) {
        const int error = errno;
        ::close(fd);
        errno = error;
        fail_errno("cannot map");
      }
      data_ = static_cast<const std::uint8_t*>(address);
      ::madvise(address, size_, MADV_SEQUENTIAL);
    }
    ::close(fd);
  }
  mapped_file(mapped_file&& other) noexcept { swap(other); }
  mapped_file& operator=(mapped_file&& other) noexcept {
    mapped_file(std::move(other)).swap(*this);
    return *this;
  }
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  ~mapped_file() {
    if (data_ != nullptr)
      ::munmap(const_cast<std::uint8_t*>(data_), size_);
  }
  void swap(mapped_file& other) noexcept {
    std::swap(path_, other.path_);
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
  }

  const std::string& path() const noexcept { return path_; }
  const std::uint8_t* data() const noexcept { return data_; }
  std::uint64_t size() const noexcept { return size_; }

  /// Hands the pages wholly inside [offset, offset + bytes) back to the system: they are read
  /// from disk again if touched. Keeps the memory a stream over a large file needs small.
  void release(std::uint64_t offset, std::uint64_t bytes) const noexcept {
    if (data_ == nullptr || bytes == 0 || offset >= size_)
      return;
    const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    const std::uint64_t first = (offset + page - 1) / page * page;
    const std::uint64_t last = std::min(offset + bytes, size_) / page * page;
    if (last > first)
      ::madvise(const_cast<std::uint8_t*>(data_) + first, last - first, MADV_DONTNEED);
  }

private:
  [[noreturn]] void fail_errno(const char* what) const {
    detail::safetensors_fail(path_, std::string(what) + ": " + std::strerror(errno));
  }

  std::string path_;
  const std::uint8_t* data_ = nullptr;
  std::uint64_t size_ = 0;
};

} // namespace io
} // namespace v0
} // namespace blockscale
