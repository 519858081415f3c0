// What blockscale-inspect and blockscale-convert share: command-line errors, a progress bar,
// folders and files, and a checkpoint tensor as a matrix_view of its own element type.
#pragma once

#include <blockscale/blockscale.hpp>
#include <blockscale/io/safetensors.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <climits>
#include <cstdlib>
#include <sys/stat.h>
#include <unistd.h>

namespace tools {

/// A mistake in the command line: printed with the usage hint, exit code 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Reads a command line one argument at a time; `--help` or `-h` prints the usage and exits 0.
class argument_reader {
public:
  argument_reader(int argc, char** argv, const char* usage)
      : argc_(argc), argv_(argv), usage_(usage) {}
  /// Moves to the next argument; false after the last.
  bool next() {
    if (++index_ >= argc_)
      return false;
    current_ = argv_[index_];
    if (current_ == "-h" || current_ == "--help") {
      std::fputs(usage_, stdout);
      std::exit(0);
    }
    return true;
  }
  const std::string& current() const noexcept { return current_; }
  /// The value of the current option (the next argument), consumed.
  std::string value() {
    if (index_ + 1 >= argc_)
      throw usage_error(current_ + " needs a value");
    return argv_[++index_];
  }

private:
  int argc_;
  char** argv_;
  const char* usage_;
  int index_ = 0;
  std::string current_;
};

/// The pieces of `text` between `separator`s.
inline std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::size_t begin = 0;
  for (;;) {
    const std::size_t end = text.find(separator, begin);
    parts.push_back(text.substr(begin, end - begin));
    if (end == std::string::npos)
      return parts;
    begin = end + 1;
  }
}

/// A tool's main(): runs `body`, and turns its exceptions into one line on stderr and the exit
/// status (2 for a usage error, 1 for anything else).
template <class Body>
int run_main(const char* tool, Body&& body) {
  try {
    return body();
  } catch (const usage_error& error) {
    std::fprintf(stderr, "%s: %s\n(%s --help for usage)\n", tool, error.what(), tool);
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s: %s\n", tool, error.what());
    return 1;
  }
}

inline unsigned parse_unsigned(const std::string& text, const char* option) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 9)
    throw usage_error(std::string(option) + " takes a non-negative integer, not '" + text + "'");
  return static_cast<unsigned>(std::stoul(text));
}

/// A progress bar on stderr, drawn only when stderr is a terminal; thread safe.
class progress_bar {
public:
  progress_bar(std::string what, std::size_t total)
      : what_(std::move(what)), total_(total), enabled_(::isatty(2) != 0),
        start_(std::chrono::steady_clock::now()) {
    draw();
  }
  ~progress_bar() {
    if (enabled_)
      std::fprintf(stderr, "\r\033[K");
  }
  void advance(std::size_t n = 1) {
    done_ += n;
    draw();
  }

private:
  void draw() {
    if (!enabled_)
      return;
    std::lock_guard<std::mutex> lock(mutex_);
    constexpr int width = 30;
    const std::size_t done = done_.load();
    const int filled = total_ == 0 ? width : static_cast<int>(width * done / total_);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::fprintf(stderr, "\r%s [%.*s%*s] %zu/%zu  %.0f s", what_.c_str(), filled,
                 "==============================", width - filled, "", done, total_, seconds);
    std::fflush(stderr);
  }

  std::string what_;
  std::size_t total_;
  std::atomic<std::size_t> done_{0};
  bool enabled_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
};

inline bool is_directory(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}
inline bool exists(const std::string& path) {
  struct stat info {};
  return ::lstat(path.c_str(), &info) == 0;
}

/// `path` made absolute and free of "." and ".." and symbolic links, as far as it exists (the part
/// that does not exist yet is appended as written).
inline std::string absolute(const std::string& path) {
  std::string existing = path, rest;
  for (int depth = 0;; ++depth) {
    if (depth > 4096)
      throw std::runtime_error("cannot resolve '" + path + "'");
    char resolved[PATH_MAX];
    if (::realpath(existing.empty() ? "." : existing.c_str(), resolved) != nullptr)
      return std::string(resolved) + rest;
    const auto slash = existing.find_last_of('/');
    const std::string last = slash == std::string::npos ? existing : existing.substr(slash + 1);
    rest = "/" + last + rest;
    existing = slash == std::string::npos ? "" : existing.substr(0, slash);
    if (slash == 0)
      existing = "/";
  }
}

/// Whether absolute path `inner` is `outer` or inside it.
inline bool contains(const std::string& outer, const std::string& inner) {
  return inner == outer ||
         (inner.size() > outer.size() && inner.compare(0, outer.size(), outer) == 0 &&
          (outer == "/" || inner[outer.size()] == '/'));
}

inline void make_directory(const std::string& path) {
  if (::mkdir(path.c_str(), 0777) != 0)
    throw std::runtime_error("cannot create '" + path + "': " + std::strerror(errno));
}

/// Removes a file or a folder and everything in it; quiet when it does not exist.
inline void remove_tree(const std::string& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0)
    return;
  if (S_ISDIR(info.st_mode)) {
    for (const std::string& name : blockscale::io::safetensors_checkpoint::list_folder(path))
      remove_tree(path + "/" + name);
    ::rmdir(path.c_str());
  } else {
    ::unlink(path.c_str());
  }
}

/// Copies a regular file byte for byte.
inline void copy_file(const std::string& from, const std::string& to) {
  std::FILE* in = std::fopen(from.c_str(), "rb");
  if (in == nullptr)
    throw std::runtime_error("cannot read '" + from + "': " + std::strerror(errno));
  std::FILE* out = std::fopen(to.c_str(), "wb");
  if (out == nullptr) {
    std::fclose(in);
    throw std::runtime_error("cannot create '" + to + "': " + std::strerror(errno));
  }
  std::vector<char> buffer(1 << 20);
  bool ok = true;
  for (;;) {
    const std::size_t n = std::fread(buffer.data(), 1, buffer.size(), in);
    if (n != 0 && std::fwrite(buffer.data(), 1, n, out) != n)
      ok = false;
    if (n < buffer.size())
      break;
  }
  ok = ok && std::ferror(in) == 0;
  std::fclose(in);
  ok = std::fclose(out) == 0 && ok;
  if (!ok)
    throw std::runtime_error("cannot copy '" + from + "' to '" + to + "'");
}

/// Copies a folder's contents recursively, leaving out the top-level names `skip` says to. Regular
/// files are copied, symbolic links to regular files as the files they point to (a model cache's
/// snapshot folders are made of such links); links to folders and special files (pipes,
/// devices, sockets) are left out with a warning, so no link can make the copy loop or reach
/// outside the folder.
inline void copy_tree(const std::string& from, const std::string& to,
                      const std::function<bool(const std::string&)>& skip) {
  for (const std::string& name : blockscale::io::safetensors_checkpoint::list_folder(from)) {
    if (skip(name))
      continue;
    const std::string source = from + "/" + name, target = to + "/" + name;
    struct stat link {
    }, info{};
    if (::lstat(source.c_str(), &link) != 0)
      throw std::runtime_error("cannot read '" + source + "': " + std::strerror(errno));
    if (S_ISDIR(link.st_mode)) {
      make_directory(target);
      copy_tree(source, target, [](const std::string&) { return false; });
    } else if (S_ISREG(link.st_mode) ||
               (S_ISLNK(link.st_mode) && ::stat(source.c_str(), &info) == 0 &&
                S_ISREG(info.st_mode))) {
      copy_file(source, target);
    } else {
      std::fprintf(stderr, "warning: '%s' is not a regular file or a link to one: not copied\n",
                   source.c_str());
    }
  }
}

/// The whole contents of a small file.
inline std::string read_text(const std::string& path) {
  const blockscale::io::mapped_file file(path);
  return std::string(reinterpret_cast<const char*>(file.data()), file.size());
}

/// Writes a small file.
inline void write_text(const std::string& path, const std::string& text) {
  std::FILE* out = std::fopen(path.c_str(), "wb");
  if (out == nullptr)
    throw std::runtime_error("cannot create '" + path + "': " + std::strerror(errno));
  const bool ok = std::fwrite(text.data(), 1, text.size(), out) == text.size();
  if (std::fclose(out) != 0 || !ok)
    throw std::runtime_error("cannot write '" + path + "'");
}

/// Names a type as a value.
template <class T>
struct type_tag {
  using type = T;
};

/// `text` with the characters XML gives a meaning escaped.
inline std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += static_cast<unsigned char>(c) < 0x20 ? '?' : c;
    }
  }
  return out;
}

/// `text` as one CSV field: quoted, inner quotes doubled.
inline std::string csv_field(const std::string& text) {
  std::string out = "\"";
  for (char c : text)
    out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

/// `text` with control characters replaced, for a terminal.
inline std::string printable(const std::string& text) {
  std::string out;
  for (char c : text)
    out += static_cast<unsigned char>(c) < 0x20 || c == 0x7F ? '?' : c;
  return out;
}

/// Calls f(matrix_view<const T>) for a 2-D F32, F16 or BF16 tensor whose bytes start at `data`,
/// viewed in place when aligned for T, else through an aligned copy.
template <class F>
decltype(auto) with_matrix(const blockscale::io::tensor_info& tensor, const std::uint8_t* data,
                           F&& f) {
  using blockscale::io::tensor_dtype;
  const auto rows = static_cast<std::size_t>(tensor.shape.at(0));
  const auto cols = static_cast<std::size_t>(tensor.shape.at(1));
  const auto view = [&](auto type) -> decltype(auto) {
    using T = typename decltype(type)::type;
    std::vector<T> copy;
    const T* pointer = reinterpret_cast<const T*>(data);
    if (reinterpret_cast<std::uintptr_t>(data) % alignof(T) != 0) {
      copy.resize(rows * cols);
      std::memcpy(static_cast<void*>(copy.data()), data, rows * cols * sizeof(T));
      pointer = copy.data();
    }
    return f(blockscale::matrix_view<const T>(pointer, rows, cols));
  };
  switch (tensor.dtype) {
  case tensor_dtype::f32:
    return view(type_tag<float>{});
  case tensor_dtype::f16:
    return view(type_tag<blockscale::float16>{});
  case tensor_dtype::bf16:
    return view(type_tag<blockscale::bfloat16>{});
  default:
    throw std::runtime_error("tensor '" + tensor.name + "' is " + tensor.dtype_name +
                             ", not F32, F16 or BF16");
  }
}

/// Whether a tensor is a matrix of F32, F16 or BF16 values.
inline bool is_float_matrix(const blockscale::io::tensor_info& tensor) {
  using blockscale::io::tensor_dtype;
  return tensor.shape.size() == 2 &&
         (tensor.dtype == tensor_dtype::f32 || tensor.dtype == tensor_dtype::f16 ||
          tensor.dtype == tensor_dtype::bf16);
}

/// A byte count as people read it: "512 bytes", "61.4 KB", "1.5 GB" (powers of 1000, one
/// decimal), in the largest unit that keeps the number at least 1, so that a small output is
/// never shown as "0.0 MB".
inline std::string format_bytes(std::uint64_t bytes) {
  if (bytes < 1000)
    return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
  const char* const units[] = {"KB", "MB", "GB", "TB", "PB", "EB"};
  double value = static_cast<double>(bytes) / 1e3;
  std::size_t unit = 0;
  // 999.95 and above would print as 1000.0 in this unit: the next one shows 1.0.
  while (value >= 999.95 && unit + 1 < sizeof units / sizeof units[0]) {
    value /= 1e3;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", value, units[unit]);
  return text;
}

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

} // namespace tools
