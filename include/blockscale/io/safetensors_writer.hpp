/// \file io/safetensors_writer.hpp
/// Writing safetensors files: each tensor's bytes stream from a pointer or a callback, in the
/// order given, after a header padded by spaces to a multiple of 8 bytes (so the data starts
/// aligned). The file appears under its name only once it is complete (written beside it as
/// `*.partial`, then renamed); on any error nothing is left behind.
///
/// The header JSON is written by nlohmann/json (the `blockscale::safetensors` CMake component).
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "../config.hpp"
#include "safetensors_dtype.hpp"
#include "safetensors_error.hpp"

namespace blockscale {
inline namespace v0 {
namespace io {

/// One tensor to write: its name, dtype name, shape and byte count, and where its bytes come
/// from — `data` (bytes() of them), or else `fill`, called once with a buffer of bytes() bytes.
struct tensor_source {
  std::string name;
  std::string dtype_name;
  std::vector<std::uint64_t> shape;
  std::uint64_t bytes = 0;
  const std::uint8_t* data = nullptr;
  std::function<void(std::uint8_t* out)> fill;
  /// Called once the tensor's bytes are written (to release the memory they came from, say).
  std::function<void()> written;

  /// A tensor whose bytes are held by the source itself.
  static tensor_source owning(std::string name, tensor_dtype dtype,
                              std::vector<std::uint64_t> shape, std::vector<std::uint8_t> bytes) {
    auto held = std::make_shared<std::vector<std::uint8_t>>(std::move(bytes));
    tensor_source source{
        std::move(name), io::dtype_name(dtype), std::move(shape), held->size(), nullptr, nullptr,
        nullptr};
    source.fill = [held](std::uint8_t* out) { std::copy(held->begin(), held->end(), out); };
    return source;
  }
};

/// The header JSON that `write_safetensors` writes for `tensors` (in that order) and `metadata`,
/// padded with spaces to a multiple of 8 bytes. Throws safetensors_error for a duplicate name, the
/// name "__metadata__", or a byte count that disagrees with a known dtype and the shape.
inline std::string safetensors_header_json(const std::vector<tensor_source>& tensors,
                                           const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty())
    header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const tensor_source& tensor : tensors) {
    if (tensor.name == "__metadata__" || header.contains(tensor.name))
      detail::safetensors_fail("", "write: tensor name '" + detail::printable(tensor.name) +
                                       "' is reserved or used twice");
    const tensor_dtype dtype = parse_dtype(tensor.dtype_name);
    if (dtype != tensor_dtype::unknown) {
      tensor_info check{tensor.name, tensor.dtype_name, dtype, tensor.shape, 0, 0};
      const std::uint64_t bits = check.elements() * static_cast<std::uint64_t>(dtype_bits(dtype));
      if (bits % 8 != 0 || bits / 8 != tensor.bytes)
        detail::safetensors_fail("", "write: tensor '" + detail::printable(tensor.name) + "' has " +
                                         std::to_string(tensor.bytes) +
                                         " bytes, its shape and dtype need " +
                                         std::to_string(bits / 8));
    }
    header[tensor.name] = {{"dtype", tensor.dtype_name},
                           {"shape", tensor.shape},
                           {"data_offsets", {offset, offset + tensor.bytes}}};
    offset += tensor.bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& error) {
    detail::safetensors_fail("", std::string("write: a name is not valid UTF-8: ") + error.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

/// Writes a safetensors file at `path`: the tensors in the order given, each streamed from its
/// data or its fill callback. The file is written as `path` + ".partial" and renamed when
/// complete; on any error (including one thrown by a fill callback) it is removed and the error
/// rethrown, so `path` is either the whole new file or untouched.
inline void write_safetensors(const std::string& path, const std::vector<tensor_source>& tensors,
                              const std::map<std::string, std::string>& metadata = {}) {
  const std::string header = safetensors_header_json(tensors, metadata);
  const std::string partial = path + ".partial";
  std::FILE* file = std::fopen(partial.c_str(), "wb");
  if (file == nullptr)
    detail::safetensors_fail(partial, std::string("cannot create: ") + std::strerror(errno));
  const auto write = [&](const void* bytes, std::size_t count) {
    if (count != 0 && std::fwrite(bytes, 1, count, file) != count)
      detail::safetensors_fail(partial, std::string("cannot write: ") + std::strerror(errno));
  };
  try {
    std::uint8_t length[8];
    for (int b = 0; b < 8; ++b)
      length[b] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(header.size()) >> (8 * b));
    write(length, 8);
    write(header.data(), header.size());
    std::vector<std::uint8_t> buffer;
    for (const tensor_source& tensor : tensors) {
      if (tensor.data != nullptr || tensor.bytes == 0) {
        write(tensor.data, tensor.bytes);
      } else {
        if (!tensor.fill)
          detail::safetensors_fail(partial, "write: tensor '" + detail::printable(tensor.name) +
                                                "' has neither data nor a fill callback");
        buffer.assign(tensor.bytes, 0);
        tensor.fill(buffer.data());
        write(buffer.data(), buffer.size());
        std::vector<std::uint8_t>().swap(buffer);
      }
      if (tensor.written)
        tensor.written();
    }
    if (std::fflush(file) != 0)
      detail::safetensors_fail(partial, std::string("cannot write: ") + std::strerror(errno));
  } catch (...) {
    std::fclose(file);
    std::remove(partial.c_str());
    throw;
  }
  if (std::fclose(file) != 0) {
    const int error = errno;
    std::remove(partial.c_str());
    detail::safetensors_fail(partial, std::string("cannot write: ") + std::strerror(error));
  }
  if (std::rename(partial.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(partial.c_str());
    detail::safetensors_fail(path,
                             std::string("cannot rename into place: ") + std::strerror(error));
  }
}

} // namespace io
} // namespace v0
} // namespace blockscale
