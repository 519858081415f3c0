/// \file io/checkpoint.hpp
/// Reading safetensors checkpoints: one file (`safetensors_file`: mapped, its header parsed), or a
/// folder of them (`safetensors_checkpoint`) — the shards a `*.safetensors.index.json` lists, else
/// every `*.safetensors` file in it — read as one set of tensors with unique names.
///
/// A tensor's bytes are a pointer into the file's read-only mapping (see mapped_file.hpp), read
/// from disk when touched and handed back with `release`. Every problem is one `safetensors_error`
/// naming the file: an index that is not JSON or has no "weight_map" object, a shard named outside
/// the folder, an index and its shards that disagree in either direction, a name in two files, a
/// folder without tensors.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <sys/stat.h>

#include <dirent.h>

#include <nlohmann/json.hpp>

#include "../config.hpp"
#include "mapped_file.hpp"
#include "safetensors_dtype.hpp"
#include "safetensors_error.hpp"
#include "safetensors_header.hpp"

namespace blockscale {
inline namespace v0 {
namespace io {

/// A safetensors file, mapped and with its header parsed.
class safetensors_file {
public:
  /// Maps and parses `path`; throws safetensors_error naming it on any problem.
  explicit safetensors_file(const std::string& path) : file_(path) {
    header_ = parse_safetensors_header(file_.data(), file_.size(), path);
    by_name_.resize(header_.tensors.size());
    for (std::size_t i = 0; i < by_name_.size(); ++i)
      by_name_[i] = i;
    std::sort(by_name_.begin(), by_name_.end(), [this](std::size_t a, std::size_t b) {
      return header_.tensors[a].name < header_.tensors[b].name;
    });
  }

  const std::string& path() const noexcept { return file_.path(); }
  const std::vector<tensor_info>& tensors() const noexcept { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const noexcept { return header_.metadata; }
  const std::vector<std::string>& warnings() const noexcept { return header_.warnings; }
  /// The tensor called `name`, or null. A binary search over the names.
  const tensor_info* find(const std::string& name) const noexcept {
    const auto found = std::lower_bound(
        by_name_.begin(), by_name_.end(), name,
        [this](std::size_t i, const std::string& key) { return header_.tensors[i].name < key; });
    if (found == by_name_.end() || header_.tensors[*found].name != name)
      return nullptr;
    return &header_.tensors[*found];
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
  std::vector<std::size_t> by_name_; ///< positions in header_.tensors, sorted by name (unique)
};

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
    for (const auto& file : files_) {
      for (const tensor_info& tensor : file->tensors()) {
        const auto inserted = by_name_.emplace(tensor.name, entries_.size());
        if (!inserted.second)
          detail::safetensors_fail(
              path, "tensor '" + detail::printable(tensor.name) + "' is in both " +
                        entries_[inserted.first->second].file->path() + " and " + file->path());
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
  /// The tensor called `name`, or {null, null}. A hash lookup.
  entry find(const std::string& name) const noexcept {
    const auto found = by_name_.find(name);
    return found == by_name_.end() ? entry{nullptr, nullptr} : entries_[found->second];
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
  std::unordered_map<std::string, std::size_t> by_name_; ///< name -> position in entries_
  std::vector<std::string> warnings_;
};

} // namespace io
} // namespace v0
} // namespace blockscale
