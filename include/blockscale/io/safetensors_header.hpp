/// \file io/safetensors_header.hpp
/// The header of a safetensors file, parsed and checked without any I/O.
///
/// Format (https://huggingface.co/docs/safetensors): an unsigned little-endian 64-bit header
/// length N, N bytes of UTF-8 JSON, then the data. The JSON is an object mapping each tensor name
/// to {"dtype": "BF16", "shape": [rows, cols], "data_offsets": [begin, end]} (offsets into the
/// data, which starts right after the header), plus an optional "__metadata__" object of strings.
///
/// Every malformed input is one `safetensors_error` naming the file and the problem, and nothing
/// is read out of bounds: an empty or truncated file, a header length beyond the file (or above
/// 100 MB, the reference implementation's limit), a header that is not a JSON object or not UTF-8,
/// a tensor entry without its dtype, shape or offsets, offsets out of the data, overlapping or
/// leaving a hole (the format requires the data to be covered exactly), a shape whose byte size
/// does not match its offsets or overflows, duplicate names. A dtype this library does not know is
/// kept with its name and reported in `warnings`.
///
/// The JSON is parsed by nlohmann/json (the `blockscale::safetensors` CMake component).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../config.hpp"
#include "safetensors_dtype.hpp"
#include "safetensors_error.hpp"

namespace blockscale {
inline namespace v0 {
namespace io {

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

} // namespace io
} // namespace v0
} // namespace blockscale
