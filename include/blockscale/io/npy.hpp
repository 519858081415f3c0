/// \file io/npy.hpp
/// Reading and writing NumPy .npy files, for exchanging tensors with Python users.
///
/// Format: numpy.lib.format
/// (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html). A file is the magic
/// "\x93NUMPY", a major and a minor version byte, the header length (little-endian u16 in
/// version 1.0, u32 in 2.0 and 3.0), the header (a Python dict literal with the keys 'descr',
/// 'fortran_order' and 'shape', padded with spaces and ended by '\n'), then the array data in C
/// order.
///
/// Supported element types (`npy_dtype`) and their descr strings:
///   - float32: '<f4' (also '>f4' on read, byte-swapped),
///   - float16: '<f2' (also '>f2' on read, byte-swapped),
///   - bfloat16: '<V2'. NumPy has no bfloat16; `np.save` writes an `ml_dtypes.bfloat16` array with
///     the descr '<V2' (a two-byte void), and `np.load` gives it back as 'V2', which
///     `.view(ml_dtypes.bfloat16)` reinterprets. This library follows that convention: it writes
///     '<V2' for bfloat16 and reads every '<V2' or '|V2' array as bfloat16 (the file cannot say).
///   - uint8: '|u1' (also '<u1' and '>u1' on read).
///
/// Reading is strict, and never undefined behaviour or an allocation sized by an unchecked field:
/// the data length is checked against the shape before anything is allocated. Every problem
/// throws `npy_error` (a `std::runtime_error`) naming it: a bad magic string, an unknown version,
/// a truncated header, a header that is not a well-formed dict literal with exactly the three keys,
/// an unsupported descr, `fortran_order: True` (C order only), a negative or malformed dimension, a
/// shape whose byte size overflows `std::size_t` (zero dimensions are ignored for this check, as
/// NumPy does), data shorter than the shape says, and bytes after the data (NumPy ignores them;
/// here they are an error, as they mean the header and the data disagree). The header's padding is
/// not checked (older NumPy aligned to 16 bytes, newer to 64); trailing whitespace is allowed.
///
/// Writing produces what NumPy 1.x `np.save` produces: version 1.0 when the header fits in 65535
/// bytes (else 2.0), the header `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`
/// padded with spaces so that the data starts at a multiple of 64 bytes.
#pragma once

#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../detail/bits.hpp"
#include "../numeric/half.hpp"

namespace blockscale {
inline namespace v0 {
namespace io {

/// The element types an .npy file may hold here (see the file comment for their descr strings).
enum class npy_dtype { float32, float16, bfloat16, uint8 };

/// Bytes per element of `dtype`.
constexpr std::size_t npy_itemsize(npy_dtype dtype) noexcept {
  return dtype == npy_dtype::float32 ? 4 : dtype == npy_dtype::uint8 ? 1 : 2;
}

/// The descr string written for `dtype`: '<f4', '<f2', '<V2' or '|u1'.
constexpr const char* npy_descr(npy_dtype dtype) noexcept {
  return dtype == npy_dtype::float32    ? "<f4"
         : dtype == npy_dtype::float16  ? "<f2"
         : dtype == npy_dtype::bfloat16 ? "<V2"
                                        : "|u1";
}

/// Every error of this header: malformed or unsupported input, or a file that cannot be read or
/// written. The message names the problem and, for files, the path.
class npy_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// An n-dimensional array as stored in an .npy file: element type, shape (empty for a scalar) and
/// the elements in C order as little-endian bytes (`size() * npy_itemsize(dtype)` of them).
struct npy_array {
  npy_dtype dtype = npy_dtype::float32; ///< element type
  std::vector<std::size_t> shape;       ///< dimensions, outermost first; {} is a 0-d scalar
  std::vector<std::uint8_t> bytes;      ///< elements, C order, little-endian

  /// The element count, the product of `shape` (1 for a scalar); throws `npy_error` if it
  /// overflows `std::size_t`.
  std::size_t size() const;
  /// Every element widened to float exactly (float32, float16, bfloat16 and uint8 all fit);
  /// throws `npy_error` if `bytes` does not hold `size()` elements.
  std::vector<float> to_float() const;
};

/// Parses the contents of an .npy file (versions 1.0, 2.0, 3.0). Pure: no I/O, no global state.
/// Throws `npy_error` on anything malformed or unsupported.
inline npy_array parse_npy(const std::uint8_t* data, std::size_t size);

/// Reads an .npy file; throws `npy_error` naming the path on an I/O error or malformed contents.
inline npy_array read_npy(const std::string& path);

/// The bytes of an .npy file holding `array` (version 1.0 unless the header needs 2.0). Throws
/// `npy_error` if `array.bytes` does not hold exactly `array.size()` elements.
inline std::vector<std::uint8_t> serialize_npy(const npy_array& array);

/// Writes `array` to an .npy file, replacing it; throws `npy_error` with the path and the system's
/// reason when the file cannot be written.
inline void write_npy(const std::string& path, const npy_array& array);

/// Writes `product(shape)` floats from `data` as '<f4'.
inline void write_npy(const std::string& path, const float* data, std::vector<std::size_t> shape);
/// Writes `product(shape)` bfloat16 values from `data` as '<V2' (see the file comment).
inline void write_npy(const std::string& path, const bfloat16* data,
                      std::vector<std::size_t> shape);
/// Writes `product(shape)` float16 values from `data` as '<f2'.
inline void write_npy(const std::string& path, const float16* data, std::vector<std::size_t> shape);
/// Writes `product(shape)` bytes from `data` as '|u1'.
inline void write_npy(const std::string& path, const std::uint8_t* data,
                      std::vector<std::size_t> shape);

// ------------------------------------------------------------------------------------------------
// Implementation

namespace detail {

[[noreturn]] inline void npy_fail(const std::string& problem) {
  throw npy_error("npy: " + problem);
}

/// a * b, or false if it overflows.
inline bool npy_multiply(std::size_t a, std::size_t b, std::size_t& product) noexcept {
  if (a != 0 && b > std::numeric_limits<std::size_t>::max() / a)
    return false;
  product = a * b;
  return true;
}

/// Element count and byte count of `shape` for `itemsize`-byte elements. Zero dimensions are left
/// out of the overflow check (as NumPy does), so every dimension of an accepted shape is bounded.
/// The byte count must also fit `std::ptrdiff_t`, the largest a std::vector can hold.
inline std::pair<std::size_t, std::size_t> npy_counts(const std::vector<std::size_t>& shape,
                                                      std::size_t itemsize) {
  std::size_t nonzero_bytes = itemsize;
  bool empty = false;
  for (std::size_t dim : shape) {
    if (dim == 0) {
      empty = true;
    } else if (!npy_multiply(nonzero_bytes, dim, nonzero_bytes) ||
               nonzero_bytes >
                   static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max())) {
      npy_fail("shape overflows: its byte size does not fit in memory");
    }
  }
  if (empty)
    return {0, 0};
  return {nonzero_bytes / itemsize, nonzero_bytes};
}

inline std::uint32_t npy_load_u32(const std::uint8_t* p) noexcept {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}
inline std::uint16_t npy_load_u16(const std::uint8_t* p) noexcept {
  return static_cast<std::uint16_t>(p[0] | p[1] << 8);
}

/// A recursive-descent reader of the header dict: the subset of Python literal syntax that
/// NumPy's headers use (strings without escapes, True/False, tuples of non-negative integers).
class npy_header_parser {
public:
  npy_header_parser(const std::uint8_t* begin, const std::uint8_t* end) noexcept
      : p_(begin), end_(end) {}

  struct result {
    npy_dtype dtype;
    bool byteswap;
    std::vector<std::size_t> shape;
  };

  result parse() {
    result out{npy_dtype::float32, false, {}};
    bool have_descr = false, have_order = false, have_shape = false;
    skip_space();
    expect('{', "header is not a dict literal: expected '{'");
    skip_space();
    if (!consume('}')) {
      for (;;) {
        const std::string key = parse_string("header dict key");
        skip_space();
        expect(':', "header dict: expected ':' after key '" + key + "'");
        skip_space();
        if (key == "descr") {
          check_duplicate(have_descr, key);
          parse_descr(out);
        } else if (key == "fortran_order") {
          check_duplicate(have_order, key);
          if (parse_bool("fortran_order")) {
            npy_fail("fortran_order True is not supported (C order only)");
          }
        } else if (key == "shape") {
          check_duplicate(have_shape, key);
          out.shape = parse_shape();
        } else {
          npy_fail("header dict: unexpected key '" + key + "'");
        }
        skip_space();
        if (consume('}'))
          break;
        expect(',', "header dict: expected ',' or '}' after the value of '" + key + "'");
        skip_space();
        if (consume('}'))
          break; // trailing comma
      }
    }
    skip_space();
    if (p_ != end_)
      npy_fail("header: unexpected characters after the dict");
    if (!have_descr)
      npy_fail("header dict: missing key 'descr'");
    if (!have_order)
      npy_fail("header dict: missing key 'fortran_order'");
    if (!have_shape)
      npy_fail("header dict: missing key 'shape'");
    return out;
  }

private:
  void skip_space() noexcept {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r'))
      ++p_;
  }
  bool consume(char c) noexcept {
    if (p_ != end_ && *p_ == static_cast<std::uint8_t>(c)) {
      ++p_;
      return true;
    }
    return false;
  }
  void expect(char c, const std::string& problem) {
    if (!consume(c))
      npy_fail(p_ == end_ ? problem + " (header ends early)" : problem);
  }
  static void check_duplicate(bool& seen, const std::string& key) {
    if (seen)
      npy_fail("header dict: duplicate key '" + key + "'");
    seen = true;
  }
  bool at_word(const char* word) const noexcept {
    const std::size_t n = std::strlen(word);
    if (static_cast<std::size_t>(end_ - p_) < n || std::memcmp(p_, word, n) != 0)
      return false;
    // Not the prefix of a longer name ("Truex").
    const std::uint8_t* after = p_ + n;
    return after == end_ || !(std::isalnum(*after) || *after == '_');
  }

  std::string parse_string(const char* what) {
    if (p_ == end_)
      npy_fail(std::string("header dict ends early: expected the ") + what);
    if (*p_ != '\'' && *p_ != '"') {
      npy_fail(std::string("header dict: expected a quoted string for the ") + what);
    }
    const std::uint8_t quote = *p_++;
    const std::uint8_t* start = p_;
    while (p_ != end_ && *p_ != quote) {
      if (*p_ == '\\')
        npy_fail("header dict: escape sequences in strings are not supported");
      if (*p_ == '\n')
        npy_fail("header dict: unterminated string");
      ++p_;
    }
    if (p_ == end_)
      npy_fail("header dict: unterminated string");
    std::string text(start, p_);
    ++p_;
    return text;
  }

  bool parse_bool(const char* key) {
    if (at_word("True")) {
      p_ += 4;
      return true;
    }
    if (at_word("False")) {
      p_ += 5;
      return false;
    }
    npy_fail(std::string("header dict: '") + key + "' must be True or False");
  }

  void parse_descr(result& out) {
    if (p_ != end_ && *p_ == '[')
      npy_fail("descr: structured dtypes are not supported");
    const std::string descr = parse_string("descr");
    if (descr == "<f4") {
      out.dtype = npy_dtype::float32;
    } else if (descr == ">f4") {
      out.dtype = npy_dtype::float32;
      out.byteswap = true;
    } else if (descr == "<f2") {
      out.dtype = npy_dtype::float16;
    } else if (descr == ">f2") {
      out.dtype = npy_dtype::float16;
      out.byteswap = true;
    } else if (descr == "<V2" || descr == "|V2") {
      out.dtype = npy_dtype::bfloat16;
    } else if (descr == "|u1" || descr == "<u1" || descr == ">u1") {
      out.dtype = npy_dtype::uint8;
    } else {
      // Keep the message short and printable whatever the descr holds.
      std::string shown;
      for (char c : descr.substr(0, 32))
        shown += (c >= 0x20 && c < 0x7F) ? c : '?';
      npy_fail("unsupported descr '" + shown +
               "' (supported: '<f4', '>f4', '<f2', '>f2', '<V2' (bfloat16), '|u1')");
    }
  }

  std::size_t parse_dimension() {
    if (p_ != end_ && *p_ == '-')
      npy_fail("shape: negative dimension");
    if (p_ == end_ || *p_ < '0' || *p_ > '9')
      npy_fail("shape: expected a dimension (an integer)");
    if (*p_ == '0' && p_ + 1 != end_ && p_[1] >= '0' && p_[1] <= '9') {
      npy_fail("shape: malformed dimension (leading zero)");
    }
    std::size_t value = 0;
    while (p_ != end_ && *p_ >= '0' && *p_ <= '9') {
      const auto digit = static_cast<std::size_t>(*p_ - '0');
      if (value > (std::numeric_limits<std::size_t>::max() - digit) / 10) {
        npy_fail("shape: dimension overflows std::size_t");
      }
      value = value * 10 + digit;
      ++p_;
    }
    if (p_ != end_ && (*p_ == 'L' || *p_ == 'l'))
      ++p_; // Python 2 NumPy wrote longs as 3L
    return value;
  }

  std::vector<std::size_t> parse_shape() {
    expect('(', "shape must be a tuple: expected '('");
    std::vector<std::size_t> shape;
    skip_space();
    if (consume(')'))
      return shape;
    for (;;) {
      shape.push_back(parse_dimension());
      skip_space();
      if (consume(')')) {
        // (5) is an int in Python, not a tuple.
        if (shape.size() == 1)
          npy_fail("shape must be a tuple: (n) needs a comma, (n,)");
        return shape;
      }
      expect(',', "shape: expected ',' or ')'");
      skip_space();
      if (consume(')'))
        return shape;
    }
  }

  const std::uint8_t* p_;
  const std::uint8_t* end_;
};

/// Appends `text` to `out`.
inline void npy_append(std::vector<std::uint8_t>& out, const std::string& text) {
  out.insert(out.end(), text.begin(), text.end());
}

/// The bytes of a file; throws `npy_error` with the path and errno's text on failure.
inline std::vector<std::uint8_t> npy_read_file(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    const int error = errno;
    throw npy_error("npy: cannot open '" + path + "' for reading: " + std::strerror(error));
  }
  std::vector<std::uint8_t> contents;
  std::uint8_t buffer[1 << 16];
  for (;;) {
    const std::size_t n = std::fread(buffer, 1, sizeof buffer, file);
    contents.insert(contents.end(), buffer, buffer + n);
    if (n < sizeof buffer)
      break;
  }
  const bool failed = std::ferror(file) != 0;
  const int error = errno;
  std::fclose(file);
  if (failed)
    throw npy_error("npy: cannot read '" + path + "': " + std::strerror(error));
  return contents;
}

/// Copies `count` elements of `T` into little-endian bytes.
template <class T>
npy_array npy_from_bits(npy_dtype dtype, const T* data, std::vector<std::size_t> shape) {
  npy_array array;
  array.dtype = dtype;
  array.shape = std::move(shape);
  const std::size_t count = array.size();
  if (data == nullptr && count != 0)
    npy_fail("write_npy: null data for a non-empty shape");
  (void)npy_counts(array.shape, npy_itemsize(dtype)); // the byte size must be representable
  array.bytes.resize(count * npy_itemsize(dtype));
  for (std::size_t i = 0; i < count; ++i) {
    std::uint32_t bits = 0;
    if constexpr (std::is_same<T, float>::value) {
      bits = blockscale::detail::bit_cast<std::uint32_t>(data[i]);
    } else if constexpr (std::is_same<T, std::uint8_t>::value) {
      bits = data[i];
    } else {
      bits = data[i].bits();
    }
    for (std::size_t b = 0; b < npy_itemsize(dtype); ++b) {
      array.bytes[i * npy_itemsize(dtype) + b] = static_cast<std::uint8_t>(bits >> (8 * b));
    }
  }
  return array;
}

} // namespace detail

inline std::size_t npy_array::size() const {
  std::size_t count = 1;
  for (std::size_t dim : shape) {
    if (!detail::npy_multiply(count, dim, count))
      detail::npy_fail("shape overflows std::size_t");
  }
  return count;
}

inline std::vector<float> npy_array::to_float() const {
  const std::size_t count = size();
  const std::size_t itemsize = npy_itemsize(dtype);
  if (count > bytes.size() / itemsize || bytes.size() != count * itemsize) {
    detail::npy_fail("to_float: the array holds " + std::to_string(bytes.size()) +
                     " bytes of data, its shape needs " + std::to_string(count) + " elements of " +
                     std::to_string(itemsize) + " bytes");
  }
  std::vector<float> values(count);
  const std::uint8_t* p = bytes.data();
  for (std::size_t i = 0; i < count; ++i) {
    switch (dtype) {
    case npy_dtype::float32:
      values[i] = blockscale::detail::bit_cast<float>(detail::npy_load_u32(p + 4 * i));
      break;
    case npy_dtype::float16:
      values[i] = static_cast<float>(float16::from_bits(detail::npy_load_u16(p + 2 * i)));
      break;
    case npy_dtype::bfloat16:
      values[i] = static_cast<float>(bfloat16::from_bits(detail::npy_load_u16(p + 2 * i)));
      break;
    case npy_dtype::uint8:
      values[i] = static_cast<float>(p[i]);
      break;
    }
  }
  return values;
}

inline npy_array parse_npy(const std::uint8_t* data, std::size_t size) {
  static constexpr std::uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (size < 8 || data == nullptr) {
    detail::npy_fail("truncated: " + std::to_string(size) +
                     " bytes cannot hold the magic string and version");
  }
  if (std::memcmp(data, magic, sizeof magic) != 0) {
    detail::npy_fail("bad magic string: not an .npy file");
  }
  const int major = data[6], minor = data[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    detail::npy_fail("unsupported version " + std::to_string(major) + "." + std::to_string(minor) +
                     " (supported: 1.0, 2.0, 3.0)");
  }
  const std::size_t prefix = major == 1 ? 10 : 12;
  if (size < prefix)
    detail::npy_fail("truncated: the file ends inside the header length");
  const std::size_t header_length =
      major == 1 ? detail::npy_load_u16(data + 8) : detail::npy_load_u32(data + 8);
  if (header_length > size - prefix) {
    detail::npy_fail("truncated header: it needs " + std::to_string(header_length) +
                     " bytes, the file has " + std::to_string(size - prefix) + " after the prefix");
  }
  const std::uint8_t* header = data + prefix;
  auto parsed = detail::npy_header_parser(header, header + header_length).parse();

  npy_array array;
  array.dtype = parsed.dtype;
  array.shape = std::move(parsed.shape);
  const std::size_t byte_count = detail::npy_counts(array.shape, npy_itemsize(array.dtype)).second;
  const std::size_t available = size - prefix - header_length;
  if (available < byte_count) {
    detail::npy_fail("data truncated: the shape needs " + std::to_string(byte_count) +
                     " bytes, the file has " + std::to_string(available));
  }
  if (available > byte_count) {
    detail::npy_fail("trailing bytes: " + std::to_string(available - byte_count) +
                     " bytes after the data the shape describes");
  }
  const std::uint8_t* payload = header + header_length;
  array.bytes.assign(payload, payload + byte_count);
  if (parsed.byteswap) {
    const std::size_t itemsize = npy_itemsize(array.dtype);
    for (std::size_t i = 0; i < byte_count; i += itemsize) {
      for (std::size_t b = 0; b < itemsize / 2; ++b) {
        std::swap(array.bytes[i + b], array.bytes[i + itemsize - 1 - b]);
      }
    }
  }
  return array;
}

inline npy_array read_npy(const std::string& path) {
  const std::vector<std::uint8_t> contents = detail::npy_read_file(path);
  try {
    return parse_npy(contents.data(), contents.size());
  } catch (const npy_error& error) {
    // "npy: problem" -> "npy: 'path': problem"
    const char* problem = error.what();
    if (std::strncmp(problem, "npy: ", 5) == 0)
      problem += 5;
    throw npy_error("npy: '" + path + "': " + problem);
  }
}

inline std::vector<std::uint8_t> serialize_npy(const npy_array& array) {
  const std::size_t byte_count = detail::npy_counts(array.shape, npy_itemsize(array.dtype)).second;
  if (array.bytes.size() != byte_count) {
    detail::npy_fail("serialize: the array holds " + std::to_string(array.bytes.size()) +
                     " bytes of data, its shape needs " + std::to_string(byte_count));
  }
  std::string header = "{'descr': '";
  header += npy_descr(array.dtype);
  header += "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < array.shape.size(); ++i) {
    if (i != 0)
      header += ", ";
    header += std::to_string(array.shape[i]);
  }
  header += array.shape.size() == 1 ? ",), }" : "), }";
  // As NumPy's _wrap_header: pad with spaces, then '\n', so that magic (6) + version (2) + length
  // field + header is a multiple of 64 (1 to 64 spaces).
  const auto padded_length = [&header](std::size_t length_field) {
    const std::size_t unpadded = 8 + length_field + header.size() + 1;
    return header.size() + (64 - unpadded % 64) + 1;
  };
  const bool version1 = padded_length(2) <= 0xFFFF;
  const std::size_t length_field = version1 ? 2 : 4;
  const std::size_t header_length = padded_length(length_field);
  if (header_length > 0xFFFFFFFFu)
    detail::npy_fail("serialize: header too long");

  std::vector<std::uint8_t> out;
  out.reserve(8 + length_field + header_length + byte_count);
  detail::npy_append(out, std::string("\x93NUMPY", 6));
  out.push_back(version1 ? 1 : 2);
  out.push_back(0);
  for (std::size_t b = 0; b < length_field; ++b) {
    out.push_back(static_cast<std::uint8_t>(header_length >> (8 * b)));
  }
  detail::npy_append(out, header);
  out.insert(out.end(), header_length - header.size() - 1, ' ');
  out.push_back('\n');
  out.insert(out.end(), array.bytes.begin(), array.bytes.end());
  return out;
}

inline void write_npy(const std::string& path, const npy_array& array) {
  const std::vector<std::uint8_t> contents = serialize_npy(array);
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    const int error = errno;
    throw npy_error("npy: cannot open '" + path + "' for writing: " + std::strerror(error));
  }
  const std::size_t written = std::fwrite(contents.data(), 1, contents.size(), file);
  int error = errno;
  bool failed = written != contents.size();
  if (std::fclose(file) != 0 && !failed) {
    error = errno;
    failed = true;
  }
  if (failed)
    throw npy_error("npy: cannot write '" + path + "': " + std::strerror(error));
}

inline void write_npy(const std::string& path, const float* data, std::vector<std::size_t> shape) {
  write_npy(path, detail::npy_from_bits(npy_dtype::float32, data, std::move(shape)));
}
inline void write_npy(const std::string& path, const bfloat16* data,
                      std::vector<std::size_t> shape) {
  write_npy(path, detail::npy_from_bits(npy_dtype::bfloat16, data, std::move(shape)));
}
inline void write_npy(const std::string& path, const float16* data,
                      std::vector<std::size_t> shape) {
  write_npy(path, detail::npy_from_bits(npy_dtype::float16, data, std::move(shape)));
}
inline void write_npy(const std::string& path, const std::uint8_t* data,
                      std::vector<std::size_t> shape) {
  write_npy(path, detail::npy_from_bits(npy_dtype::uint8, data, std::move(shape)));
}

} // namespace io
} // namespace v0
} // namespace blockscale
