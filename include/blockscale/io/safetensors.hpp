/// \file io/safetensors.hpp
/// Reading and writing safetensors files and checkpoints (folders of them, sharded through a
/// `model.safetensors.index.json`), for turning Hugging Face checkpoints into block-scaled ones.
///
/// Format (https://huggingface.co/docs/safetensors): an unsigned little-endian 64-bit header
/// length N, N bytes of UTF-8 JSON, then the data. The JSON is an object mapping each tensor name
/// to {"dtype": "BF16", "shape": [rows, cols], "data_offsets": [begin, end]} (offsets into the
/// data, which starts right after the header), plus an optional "__metadata__" object of strings.
///
/// Reading maps the file into memory (POSIX mmap): a tensor's bytes are a pointer into the
/// mapping, read from disk when touched, and `release` hands them back, so a checkpoint many
/// times the size of memory streams through a few hundred MB. Every malformed input is one
/// `safetensors_error` naming the file and the problem, and nothing is read out of bounds: an
/// empty or truncated file, a header length beyond the file (or above 100 MB, the reference
/// implementation's limit), a header that is not a JSON object or not UTF-8, a tensor entry
/// without its dtype, shape or offsets, offsets out of the data, overlapping or leaving a hole
/// (the format requires the data to be covered exactly), a shape whose byte size does not match
/// its offsets or overflows, duplicate names. A dtype this library does not know is kept with its
/// name and reported in `warnings()`: its bytes can be copied, never interpreted.
///
/// Writing (`write_safetensors`) streams each tensor's bytes from a pointer or a callback, in the
/// order given, with the header padded by spaces to a multiple of 8 bytes; the file appears
/// under its name only once it is complete (written beside it, then renamed).
///
/// The JSON is parsed by nlohmann/json: this header belongs to the optional
/// `blockscale::safetensors` CMake component, which brings that dependency; the core library has
/// none.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dirent.h>

#include <nlohmann/json.hpp>

#include "../config.hpp"
#include "../detail/bits.hpp"
#include "../numeric/half.hpp"
#include "../numeric/minifloat.hpp"

namespace blockscale {
inline namespace v0 {
namespace io {

/// Every error of this header; the message names the file (where there is one) and the problem.
class safetensors_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// The element types of the safetensors format. `unknown` stands for a dtype name this library
/// does not know (kept as written in `tensor_info::dtype_name`).
enum class tensor_dtype {
  f64,
  f32,
  f16,
  bf16,
  f8_e4m3,
  f8_e5m2,
  f8_e8m0,
  f6_e2m3,
  f6_e3m2,
  f4,
  i64,
  i32,
  i16,
  i8,
  u64,
  u32,
  u16,
  u8,
  boolean,
  c64,
  unknown
};

namespace detail {
struct dtype_entry {
  const char* name;
  tensor_dtype dtype;
  int bits;
};
// clang-format off
inline constexpr dtype_entry dtype_table[] = {
    {"F64", tensor_dtype::f64, 64},         {"F32", tensor_dtype::f32, 32},
    {"F16", tensor_dtype::f16, 16},         {"BF16", tensor_dtype::bf16, 16},
    {"F8_E4M3", tensor_dtype::f8_e4m3, 8},  {"F8_E5M2", tensor_dtype::f8_e5m2, 8},
    {"F8_E8M0", tensor_dtype::f8_e8m0, 8},  {"F6_E2M3", tensor_dtype::f6_e2m3, 6},
    {"F6_E3M2", tensor_dtype::f6_e3m2, 6},  {"F4", tensor_dtype::f4, 4},
    {"I64", tensor_dtype::i64, 64},         {"I32", tensor_dtype::i32, 32},
    {"I16", tensor_dtype::i16, 16},         {"I8", tensor_dtype::i8, 8},
    {"U64", tensor_dtype::u64, 64},         {"U32", tensor_dtype::u32, 32},
    {"U16", tensor_dtype::u16, 16},         {"U8", tensor_dtype::u8, 8},
    {"BOOL", tensor_dtype::boolean, 8},     {"C64", tensor_dtype::c64, 64},
};
// clang-format on
} // namespace detail

/// The dtype a name stands for ("BF16" -> bf16), `unknown` for any other name.
inline tensor_dtype parse_dtype(const std::string& name) noexcept {
  for (const auto& entry : detail::dtype_table)
    if (name == entry.name)
      return entry.dtype;
  return tensor_dtype::unknown;
}

/// The name the format uses for `dtype` ("BF16"); "unknown" for `unknown`.
inline const char* dtype_name(tensor_dtype dtype) noexcept {
  for (const auto& entry : detail::dtype_table)
    if (entry.dtype == dtype)
      return entry.name;
  return "unknown";
}

/// Bits per element (4 for F4, 6 for the FP6 types); 0 for `unknown`.
inline int dtype_bits(tensor_dtype dtype) noexcept {
  for (const auto& entry : detail::dtype_table)
    if (entry.dtype == dtype)
      return entry.bits;
  return 0;
}

/// Whether elements of `dtype` widen exactly to float: F32, F16, BF16, F8_E4M3.
inline bool is_float_input(tensor_dtype dtype) noexcept {
  return dtype == tensor_dtype::f32 || dtype == tensor_dtype::f16 || dtype == tensor_dtype::bf16 ||
         dtype == tensor_dtype::f8_e4m3;
}

/// One tensor of a safetensors file, as its header describes it.
struct tensor_info {
  std::string name;
  std::string dtype_name; ///< as written in the file ("BF16")
  tensor_dtype dtype = tensor_dtype::unknown;
  std::vector<std::uint64_t> shape; ///< outermost first; {} is a scalar
  std::uint64_t begin = 0;          ///< offset of the first byte, from the start of the data
  std::uint64_t end = 0;            ///< offset past the last byte

  /// Bytes the tensor occupies.
  std::uint64_t bytes() const noexcept { return end - begin; }
  /// The element count, the product of the shape (1 for a scalar).
  std::uint64_t elements() const noexcept {
    std::uint64_t n = 1;
    for (std::uint64_t d : shape)
      n *= d; // checked for overflow when the header was parsed
    return n;
  }
};

/// What a safetensors header says: the tensors in data order, the metadata, where the data
/// starts in the file, and warnings (unknown dtypes).
struct safetensors_header {
  std::vector<tensor_info> tensors;            ///< sorted by offset
  std::map<std::string, std::string> metadata; ///< "__metadata__"
  std::uint64_t data_offset = 0;               ///< 8 + header length
  std::vector<std::string> warnings;
};

/// The largest header accepted (the reference implementation's limit).
inline constexpr std::uint64_t safetensors_max_header = 100'000'000;
/// The deepest nesting a header may have (a valid one has 3 levels): deeper input is refused while
/// it is parsed, so no recursion over it can exhaust the stack.
inline constexpr int safetensors_max_depth = 16;

namespace detail {

[[noreturn]] inline void safetensors_fail(const std::string& where, const std::string& problem) {
  throw safetensors_error("safetensors: " + (where.empty() ? "" : "'" + where + "': ") + problem);
}

inline std::string printable(const std::string& text, std::size_t limit = 64) {
  std::string shown;
  for (char c : text.substr(0, limit))
    shown += (c >= 0x20 && c < 0x7F) ? c : '?';
  return text.size() > limit ? shown + "..." : shown;
}

/// A non-negative JSON integer that fits 64 bits, or a failure naming `what`.
inline std::uint64_t json_count(const nlohmann::json& value, const std::string& where,
                                const std::string& what) {
  if (value.is_number_unsigned())
    return value.get<std::uint64_t>();
  if (value.is_number_integer() && value.get<std::int64_t>() >= 0)
    return static_cast<std::uint64_t>(value.get<std::int64_t>());
  // The value is named by its type, never dumped: a dump recurses once per nesting level.
  safetensors_fail(where, what + " must be a non-negative integer, not " +
                              (value.is_number() ? printable(value.dump()) : value.type_name()));
}

inline tensor_info parse_tensor_entry(const std::string& name, const nlohmann::json& entry,
                                      const std::string& where) {
  const std::string label = "tensor '" + printable(name) + "'";
  if (!entry.is_object())
    safetensors_fail(where, label + ": its entry is not an object");
  const auto dtype = entry.find("dtype");
  const auto shape = entry.find("shape");
  const auto offsets = entry.find("data_offsets");
  if (dtype == entry.end() || !dtype->is_string())
    safetensors_fail(where, label + ": no \"dtype\" string");
  if (shape == entry.end() || !shape->is_array())
    safetensors_fail(where, label + ": no \"shape\" array");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2)
    safetensors_fail(where, label + ": \"data_offsets\" must be [begin, end]");
  tensor_info info;
  info.name = name;
  info.dtype_name = dtype->get<std::string>();
  info.dtype = parse_dtype(info.dtype_name);
  // The element count; a zero dimension makes it zero, but the other dimensions must still
  // multiply without overflow for the shape to mean anything.
  std::uint64_t nonzero = 1;
  bool empty = false;
  for (const auto& dim : *shape) {
    const std::uint64_t d = json_count(dim, where, label + ": a dimension");
    info.shape.push_back(d);
    if (d == 0) {
      empty = true;
      continue;
    }
    if (nonzero > std::numeric_limits<std::uint64_t>::max() / d)
      safetensors_fail(where, label + ": its shape's element count overflows 64 bits");
    nonzero *= d;
  }
  const std::uint64_t elements = empty ? 0 : nonzero;
  info.begin = json_count((*offsets)[0], where, label + ": data_offsets[0]");
  info.end = json_count((*offsets)[1], where, label + ": data_offsets[1]");
  if (info.end < info.begin)
    safetensors_fail(where, label + ": data_offsets end before they begin");
  if (info.dtype != tensor_dtype::unknown) {
    const auto bits = static_cast<std::uint64_t>(dtype_bits(info.dtype));
    if (elements > std::numeric_limits<std::uint64_t>::max() / bits)
      safetensors_fail(where, label + ": its byte size overflows 64 bits");
    if (elements * bits % 8 != 0 || elements * bits / 8 != info.bytes())
      safetensors_fail(where, label + ": shape and dtype need " +
                                  std::to_string(elements * bits / 8) +
                                  (elements * bits % 8 != 0 ? " and a fraction of a byte" : "") +
                                  " bytes, data_offsets hold " + std::to_string(info.bytes()));
  }
  return info;
}

inline std::uint64_t load_u64(const std::uint8_t* p) noexcept {
  std::uint64_t value = 0;
  for (int b = 7; b >= 0; --b)
    value = value << 8 | p[b];
  return value;
}

} // namespace detail

/// Parses the header of a safetensors file whose first `size` bytes are at `data` (the whole file:
/// the offsets are checked against its length). `where` names the file in messages. Pure: no
/// I/O. Throws safetensors_error on anything malformed (see the file comment).
inline safetensors_header parse_safetensors_header(const std::uint8_t* data, std::uint64_t size,
                                                   const std::string& where = "") {
  using detail::safetensors_fail;
  if (size == 0)
    safetensors_fail(where, "empty file");
  if (size < 8 || data == nullptr)
    safetensors_fail(where, "truncated: " + std::to_string(size) +
                                " bytes cannot hold the 8-byte header length");
  const std::uint64_t length = detail::load_u64(data);
  if (length > safetensors_max_header)
    safetensors_fail(where, "header length " + std::to_string(length) + " exceeds the " +
                                std::to_string(safetensors_max_header) + "-byte limit");
  if (length > size - 8)
    safetensors_fail(where, "header length " + std::to_string(length) + " is beyond the file (" +
                                std::to_string(size - 8) + " bytes after the length)");
  const auto* begin = reinterpret_cast<const char*>(data + 8);
  if (length == 0 || *begin != '{')
    safetensors_fail(where, "the header is not a JSON object (it must start with '{')");

  // Names seen at the top level, to refuse duplicates (JSON parsers keep the last silently).
  std::set<std::string> names;
  std::string duplicate;
  const nlohmann::json::parser_callback_t callback =
      [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        if (depth > safetensors_max_depth)
          throw safetensors_error("safetensors: " + (where.empty() ? "" : "'" + where + "': ") +
                                  "the header nests deeper than " +
                                  std::to_string(safetensors_max_depth) + " levels");
        if (event == nlohmann::json::parse_event_t::key && depth == 1 && parsed.is_string() &&
            !names.insert(parsed.get<std::string>()).second && duplicate.empty())
          duplicate = parsed.get<std::string>();
        return true;
      };
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(begin, begin + length, callback);
  } catch (const nlohmann::json::exception& error) {
    safetensors_fail(where, std::string("the header is not valid JSON: ") + error.what());
  }
  if (!header.is_object())
    safetensors_fail(where, "the header is not a JSON object");
  if (!duplicate.empty())
    safetensors_fail(where, "the header names '" + detail::printable(duplicate) + "' twice");

  safetensors_header result;
  result.data_offset = 8 + length;
  for (auto item = header.begin(); item != header.end(); ++item) {
    if (item.key() == "__metadata__") {
      if (!item.value().is_object())
        safetensors_fail(where, "\"__metadata__\" is not an object");
      for (auto m = item.value().begin(); m != item.value().end(); ++m) {
        if (!m.value().is_string())
          safetensors_fail(where, "\"__metadata__\" value of '" + detail::printable(m.key()) +
                                      "' is not a string");
        result.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    result.tensors.push_back(detail::parse_tensor_entry(item.key(), item.value(), where));
    if (result.tensors.back().dtype == tensor_dtype::unknown)
      result.warnings.push_back("tensor '" + detail::printable(item.key()) + "' has dtype '" +
                                detail::printable(result.tensors.back().dtype_name) +
                                "', which this library does not know: its bytes are opaque");
  }
  // The data must be covered exactly: sorted by offset, each tensor starts where the last ended.
  std::sort(result.tensors.begin(), result.tensors.end(),
            [](const tensor_info& a, const tensor_info& b) {
              return a.begin != b.begin ? a.begin < b.begin
                     : a.end != b.end   ? a.end < b.end
                                        : a.name < b.name;
            });
  const std::uint64_t data_size = size - result.data_offset;
  std::uint64_t covered = 0;
  for (const tensor_info& tensor : result.tensors) {
    if (tensor.end > data_size)
      safetensors_fail(where, "tensor '" + detail::printable(tensor.name) + "' ends at byte " +
                                  std::to_string(tensor.end) + " of the data, which has " +
                                  std::to_string(data_size));
    if (tensor.begin < covered)
      safetensors_fail(where, "tensor '" + detail::printable(tensor.name) +
                                  "' overlaps the tensor before it");
    if (tensor.begin > covered)
      safetensors_fail(where, "bytes " + std::to_string(covered) + " to " +
                                  std::to_string(tensor.begin) +
                                  " of the data belong to no tensor");
    covered = tensor.end;
  }
  if (covered != data_size)
    safetensors_fail(where, "the last " + std::to_string(data_size - covered) +
                                " bytes of the data belong to no tensor");
  return result;
}

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

/// A safetensors file, mapped and with its header parsed.
class safetensors_file {
public:
  /// Maps and parses `path`; throws safetensors_error naming it on any problem.
  explicit safetensors_file(const std::string& path) : file_(path) {
    header_ = parse_safetensors_header(file_.data(), file_.size(), path);
  }

  const std::string& path() const noexcept { return file_.path(); }
  const std::vector<tensor_info>& tensors() const noexcept { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const noexcept { return header_.metadata; }
  const std::vector<std::string>& warnings() const noexcept { return header_.warnings; }
  /// The tensor called `name`, or null.
  const tensor_info* find(const std::string& name) const noexcept {
    for (const tensor_info& tensor : header_.tensors)
      if (tensor.name == name)
        return &tensor;
    return nullptr;
  }
  /// The first byte of a tensor of this file, inside the mapping (valid while the file lives).
  const std::uint8_t* data(const tensor_info& tensor) const noexcept {
    return file_.data() + header_.data_offset + tensor.begin;
  }
  /// Drops the tensor's pages from memory (see mapped_file::release).
  void release(const tensor_info& tensor) const noexcept {
    file_.release(header_.data_offset + tensor.begin, tensor.bytes());
  }
  /// Bytes of the whole file.
  std::uint64_t size() const noexcept { return file_.size(); }

private:
  mapped_file file_;
  safetensors_header header_;
};

/// Widens elements [first, first + count) of a F32, F16, BF16 or F8_E4M3 tensor whose bytes start
/// at `data` to float, exactly (unaligned data is fine). Throws safetensors_error for other
/// dtypes.
inline void widen_to_float(const tensor_info& tensor, const std::uint8_t* data, std::uint64_t first,
                           std::uint64_t count, float* out) {
  switch (tensor.dtype) {
  case tensor_dtype::f32:
    for (std::uint64_t i = 0; i < count; ++i) {
      const std::uint8_t* p = data + 4 * (first + i);
      out[i] = blockscale::detail::bit_cast<float>(
          static_cast<std::uint32_t>(p[0] | p[1] << 8 | p[2] << 16) |
          static_cast<std::uint32_t>(p[3]) << 24);
    }
    return;
  case tensor_dtype::f16:
  case tensor_dtype::bf16:
    for (std::uint64_t i = 0; i < count; ++i) {
      const std::uint8_t* p = data + 2 * (first + i);
      const auto bits = static_cast<std::uint16_t>(p[0] | p[1] << 8);
      out[i] = tensor.dtype == tensor_dtype::f16 ? static_cast<float>(float16::from_bits(bits))
                                                 : static_cast<float>(bfloat16::from_bits(bits));
    }
    return;
  case tensor_dtype::f8_e4m3:
    for (std::uint64_t i = 0; i < count; ++i)
      out[i] = static_cast<float>(e4m3::from_bits(data[first + i]));
    return;
  default:
    detail::safetensors_fail("", "tensor '" + detail::printable(tensor.name) + "' of dtype " +
                                     detail::printable(tensor.dtype_name) +
                                     " does not widen to float");
  }
}

// ---- checkpoints --------------------------------------------------------------------------------

/// A checkpoint: one safetensors file, or a folder of them — the shards an index
/// (`*.safetensors.index.json`) lists, else every `*.safetensors` file in it — read as one set of
/// tensors with unique names.
class safetensors_checkpoint {
public:
  /// One tensor and the file that holds it.
  struct entry {
    const safetensors_file* file;
    const tensor_info* tensor;
  };

  /// Opens `path`: a .safetensors file, an index .json, or a folder. Throws safetensors_error for
  /// a folder without tensors, an index that is malformed, names a shard outside the folder, or
  /// disagrees with its shards, and a name that two files hold.
  explicit safetensors_checkpoint(const std::string& path) {
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0)
      detail::safetensors_fail(path, std::string("cannot open: ") + std::strerror(errno));
    if (S_ISDIR(info.st_mode)) {
      folder_ = path;
      const std::vector<std::string> names = list_folder(path);
      std::vector<std::string> indexes;
      for (const std::string& name : names)
        if (ends_with(name, ".safetensors.index.json"))
          indexes.push_back(name);
      if (indexes.size() > 1)
        detail::safetensors_fail(path, "more than one *.safetensors.index.json");
      if (indexes.size() == 1) {
        open_index(path + "/" + indexes.front());
      } else {
        for (const std::string& name : names)
          if (ends_with(name, ".safetensors"))
            files_.push_back(std::make_unique<safetensors_file>(path + "/" + name));
      }
    } else if (ends_with(path, ".json")) {
      const auto slash = path.find_last_of('/');
      folder_ = slash == std::string::npos ? "." : path.substr(0, slash);
      open_index(path);
    } else {
      const auto slash = path.find_last_of('/');
      folder_ = slash == std::string::npos ? "." : path.substr(0, slash);
      files_.push_back(std::make_unique<safetensors_file>(path));
    }
    std::map<std::string, const safetensors_file*> owner;
    for (const auto& file : files_) {
      for (const tensor_info& tensor : file->tensors()) {
        const auto inserted = owner.emplace(tensor.name, file.get());
        if (!inserted.second)
          detail::safetensors_fail(path, "tensor '" + detail::printable(tensor.name) +
                                             "' is in both " + inserted.first->second->path() +
                                             " and " + file->path());
        entries_.push_back({file.get(), &tensor});
      }
      for (const std::string& warning : file->warnings())
        warnings_.push_back(file->path() + ": " + warning);
    }
    if (entries_.empty())
      detail::safetensors_fail(path, "no tensors (no .safetensors file, or only empty ones)");
  }

  /// The folder the checkpoint lives in.
  const std::string& folder() const noexcept { return folder_; }
  /// The index file, or "" when there is none.
  const std::string& index_path() const noexcept { return index_; }
  /// Every tensor, file by file, in data order within a file.
  const std::vector<entry>& tensors() const noexcept { return entries_; }
  /// The files, in the order their tensors are listed.
  std::vector<const safetensors_file*> files() const {
    std::vector<const safetensors_file*> out;
    for (const auto& file : files_)
      out.push_back(file.get());
    return out;
  }
  /// Unknown dtypes, prefixed with their file.
  const std::vector<std::string>& warnings() const noexcept { return warnings_; }
  /// The tensor called `name`, or {null, null}.
  entry find(const std::string& name) const noexcept {
    for (const entry& e : entries_)
      if (e.tensor->name == name)
        return e;
    return {nullptr, nullptr};
  }

  /// Whether `text` ends with `suffix`.
  static bool ends_with(const std::string& text, const std::string& suffix) {
    return text.size() >= suffix.size() &&
           text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
  }
  /// The names in a folder (not "." or ".."), sorted; throws safetensors_error when unreadable.
  static std::vector<std::string> list_folder(const std::string& path) {
    DIR* dir = ::opendir(path.c_str());
    if (dir == nullptr)
      detail::safetensors_fail(path, std::string("cannot list: ") + std::strerror(errno));
    std::vector<std::string> names;
    while (const dirent* item = ::readdir(dir)) {
      const std::string name = item->d_name;
      if (name != "." && name != "..")
        names.push_back(name);
    }
    ::closedir(dir);
    std::sort(names.begin(), names.end());
    return names;
  }

private:
  void open_index(const std::string& index_path) {
    index_ = index_path;
    const mapped_file file(index_path);
    nlohmann::json index;
    try {
      const auto* text = reinterpret_cast<const char*>(file.data());
      index = nlohmann::json::parse(text, text + file.size());
    } catch (const nlohmann::json::exception& error) {
      detail::safetensors_fail(index_path, std::string("not valid JSON: ") + error.what());
    }
    const auto map = index.is_object() ? index.find("weight_map") : index.end();
    if (map == index.end() || !map->is_object())
      detail::safetensors_fail(index_path, "no \"weight_map\" object");
    std::map<std::string, std::set<std::string>> by_shard;
    for (auto item = map->begin(); item != map->end(); ++item) {
      if (!item.value().is_string())
        detail::safetensors_fail(index_path, "weight_map value of '" +
                                                 detail::printable(item.key()) +
                                                 "' is not a file name");
      const std::string shard = item.value().get<std::string>();
      if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
        detail::safetensors_fail(index_path, "weight_map names '" + detail::printable(shard) +
                                                 "', which is not a file in the folder");
      by_shard[shard].insert(item.key());
    }
    // First every name the index lists must be where it says, then no shard may hold more.
    for (const auto& [shard, names] : by_shard) {
      files_.push_back(std::make_unique<safetensors_file>(folder_ + "/" + shard));
      for (const std::string& name : names)
        if (files_.back()->find(name) == nullptr)
          detail::safetensors_fail(index_path, "weight_map puts '" + detail::printable(name) +
                                                   "' in " + shard + ", which has no such tensor");
    }
    auto opened = files_.begin();
    for (const auto& [shard, names] : by_shard) {
      for (const tensor_info& tensor : (*opened)->tensors())
        if (names.count(tensor.name) == 0)
          detail::safetensors_fail(index_path, shard + " holds '" + detail::printable(tensor.name) +
                                                   "', which weight_map does not list there");
      ++opened;
    }
  }

  std::string folder_;
  std::string index_;
  std::vector<std::unique_ptr<safetensors_file>> files_;
  std::vector<entry> entries_;
  std::vector<std::string> warnings_;
};

// ---- writing ------------------------------------------------------------------------------------

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
