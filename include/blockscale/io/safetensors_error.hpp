/// \file io/safetensors_error.hpp
/// The one error type of the safetensors headers, and how their messages are worded: every
/// message starts "safetensors: ", then names the file (where there is one), then the problem.
/// Names taken from a file are shown printable and cut short, so a hostile name cannot flood or
/// garble a message.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

#include "../config.hpp"

namespace blockscale {
inline namespace v0 {
namespace io {

/// Every error of the safetensors headers; the message names the file (where there is one) and the
/// problem.
class safetensors_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

namespace detail {

/// Throws safetensors_error for `problem`, naming `where` (a file) when it is not empty.
[[noreturn]] inline void safetensors_fail(const std::string& where, const std::string& problem) {
  throw safetensors_error("safetensors: " + (where.empty() ? "" : "'" + where + "': ") + problem);
}

/// `text` with every byte outside printable ASCII shown as '?', cut to `limit` bytes ("..." after).
inline std::string printable(const std::string& text, std::size_t limit = 64) {
  std::string shown;
  for (char c : text.substr(0, limit))
    shown += (c >= 0x20 && c < 0x7F) ? c : '?';
  return text.size() > limit ? shown + "..." : shown;
}

} // namespace detail

} // namespace io
} // namespace v0
} // namespace blockscale
