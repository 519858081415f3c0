// blockscale-convert: a BF16 / FP16 / FP32 Hugging Face checkpoint folder -> a block-scaled FP4
// checkpoint folder in one of the layouts of checkpoint_layouts.hpp: compressed-tensors NVFP4
// (nvfp4-pack-quantized, weights-only NVFP4A16; the default), ModelOpt NVFP4, compressed-tensors
// MXFP4 (mxfp4-pack-quantized), or UE5M3-FP4 for research (loadable by no serving stack yet). What
// differs between layouts is looked up in that table; nothing here is written for one layout.
// docs/checkpoints.md has the formats, the conventions and the measurements.
#include "checkpoint_layouts.hpp"
#include "tool_support.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include <unistd.h>

namespace {

using namespace blockscale;
using io::safetensors_file;
using io::tensor_dtype;
using io::tensor_info;
using io::tensor_source;
using json = nlohmann::ordered_json;

const char* const usage_head = R"(usage: blockscale-convert INPUT_DIR OUTPUT_DIR [options]

Quantizes the Linear weights of a BF16 / FP16 / FP32 safetensors checkpoint folder (sharded or
not) into a block-scaled FP4 checkpoint folder. OUTPUT_DIR must not exist (see --force); it is
written as OUTPUT_DIR.partial-<pid> and renamed when complete, and INPUT_DIR is only read.

options:
)";
// The --format lines come between the two, one per layout.
const char* const usage_tail =
    R"(  --mx-rule R      MXFP4 block-scale rule: floor (OCP, the default) or rceil
  --ignore NAME    leave a module unquantized: its exact name, or re:REGEX matched against the
                   whole module name (repeatable; adds to the defaults lm_head, re:.*mlp\.gate$,
                   re:.*block_sparse_moe\.gate$)
  --no-default-ignore   drop those defaults
  --fuse A,B,...   module-name endings whose siblings share one global scale (repeatable; adds to
                   q_proj,k_proj,v_proj  gate_proj,up_proj  q_a_proj,kv_a_proj_with_mqa  w1,w3)
  --threads N      threads (default: all cores)
  --force          replace OUTPUT_DIR if it exists
  --quiet          no summary on stdout
)";

/// The usage text: its --format lines are the layouts' names and help lines, the first marked as
/// the default.
std::string usage() {
  std::size_t width = 0;
  for (const tools::checkpoint_layout& layout : tools::checkpoint_layouts)
    width = std::max(width, std::strlen(layout.name));
  std::string text = usage_head;
  for (const tools::checkpoint_layout& layout : tools::checkpoint_layouts) {
    const bool first = &layout == &tools::checkpoint_layouts[0];
    text += first ? "  --format F       " : std::string(19, ' ');
    text += layout.name + std::string(width + 2 - std::strlen(layout.name), ' ') + layout.help +
            (first ? ", the default\n" : "\n");
  }
  return text + usage_tail;
}

/// The layout --format names (by its name or its alias).
const tools::checkpoint_layout& layout_named(const std::string& name) {
  std::string names;
  for (const tools::checkpoint_layout& layout : tools::checkpoint_layouts) {
    if (name == layout.name || (layout.alias != nullptr && name == layout.alias))
      return layout;
    names += (names.empty() ? "" : ", ") + std::string(layout.name);
  }
  throw tools::usage_error("unknown --format '" + name + "' (" + names + ")");
}

/// The block-scale rule --mx-rule names.
scale_rule mx_rule_named(const std::string& name) {
  std::string names;
  for (const tools::named_scale_rule& rule : tools::mx_rules) {
    if (name == rule.name)
      return rule.rule;
    names += (names.empty() ? "" : ", ") + std::string(rule.name);
  }
  throw tools::usage_error("unknown --mx-rule '" + name + "' (" + names + ")");
}

struct options {
  std::string input, output;
  const tools::checkpoint_layout* layout = &tools::checkpoint_layouts[0];
  scale_rule mx_rule = tools::mx_rules[0].rule;
  std::vector<std::string> ignore = {"lm_head", "re:.*mlp\\.gate$",
                                     "re:.*block_sparse_moe\\.gate$"};
  std::vector<std::vector<std::string>> fused = {{"q_proj", "k_proj", "v_proj"},
                                                 {"gate_proj", "up_proj"},
                                                 {"q_a_proj", "kv_a_proj_with_mqa"},
                                                 {"w1", "w3"}};
  unsigned threads = 0;
  bool force = false;
  bool quiet = false;
};

options parse_arguments(int argc, char** argv) {
  options o;
  std::vector<std::string> positional;
  bool default_ignore = true;
  std::vector<std::string> extra_ignore;
  const std::string usage_text = usage();
  tools::argument_reader arguments(argc, argv, usage_text.c_str());
  while (arguments.next()) {
    const std::string& arg = arguments.current();
    const auto value = [&] { return arguments.value(); };
    if (arg == "--format") {
      o.layout = &layout_named(value());
    } else if (arg == "--mx-rule") {
      o.mx_rule = mx_rule_named(value());
    } else if (arg == "--ignore") {
      extra_ignore.push_back(value());
    } else if (arg == "--no-default-ignore") {
      default_ignore = false;
    } else if (arg == "--fuse") {
      const auto names = tools::split(value(), ',');
      if (names.size() < 2 || std::count(names.begin(), names.end(), "") != 0)
        throw tools::usage_error("--fuse takes two or more comma-separated names");
      o.fused.push_back(names);
    } else if (arg == "--threads") {
      o.threads = tools::parse_unsigned(value(), "--threads");
    } else if (arg == "--force") {
      o.force = true;
    } else if (arg == "--quiet") {
      o.quiet = true;
    } else if (!arg.empty() && arg[0] == '-') {
      throw tools::usage_error("unknown option '" + arg + "'");
    } else {
      positional.push_back(arg);
    }
  }
  if (positional.size() != 2)
    throw tools::usage_error("expected INPUT_DIR and OUTPUT_DIR");
  o.input = positional[0];
  o.output = positional[1];
  while (o.output.size() > 1 && o.output.back() == '/')
    o.output.pop_back();
  if (!default_ignore)
    o.ignore.clear();
  o.ignore.insert(o.ignore.end(), extra_ignore.begin(), extra_ignore.end());
  return o;
}

/// compressed-tensors' matching of a module name against an ignore entry: the exact name, or
/// "re:" and a regular expression that matches the whole name.
class name_matcher {
public:
  explicit name_matcher(const std::vector<std::string>& entries) {
    for (const std::string& entry : entries) {
      if (entry.rfind("re:", 0) == 0) {
        try {
          patterns_.emplace_back(entry.substr(3), std::regex::ECMAScript);
        } catch (const std::regex_error& error) {
          throw tools::usage_error("--ignore '" + entry +
                                   "' is not a valid regular expression: " + error.what());
        }
      } else {
        names_.insert(entry);
      }
    }
  }
  bool operator()(const std::string& module) const {
    if (names_.count(module) != 0)
      return true;
    for (const std::regex& pattern : patterns_)
      if (std::regex_match(module, pattern))
        return true;
    return false;
  }

private:
  std::set<std::string> names_;
  std::vector<std::regex> patterns_;
};

/// Weights that are matrices but not Linear layers: embeddings (never quantized, never listed),
/// known by the last component of the module name.
bool is_embedding(const std::string& module) {
  static const std::set<std::string> names = {
      "embed_tokens",        "embed_positions",       "embeddings", "embedding", "word_embeddings",
      "position_embeddings", "token_type_embeddings", "wte",        "wpe",       "shared"};
  const std::size_t dot = module.find_last_of('.');
  return names.count(dot == std::string::npos ? module : module.substr(dot + 1)) != 0;
}

/// Module names longer than this are refused: regular expressions are matched against them, and
/// the standard library's matcher recurses once per character.
constexpr std::size_t max_module_name = 4096;

/// One input tensor and what becomes of it.
struct planned {
  const safetensors_file* file;
  const tensor_info* tensor;
  bool quantize = false;
  std::string module; ///< name without ".weight"
  std::string group;  ///< fused-group key (the module itself when not fused)
};

struct quantized_result {
  std::vector<std::uint8_t> packed, scales;
  int pending = 2; ///< tensors still to be written from it
};

class converter {
public:
  explicit converter(options o)
      : o_(std::move(o)), layout_(*o_.layout), format_(tools::properties_of(layout_.format)),
        pool_(o_.threads) {}

  int run() {
    const auto start = std::chrono::steady_clock::now();
    if (!tools::is_directory(o_.input))
      throw std::runtime_error("'" + o_.input + "' is not a folder");
    if (tools::exists(o_.output) && !o_.force)
      throw std::runtime_error("'" + o_.output + "' exists (--force replaces it)");
    // Neither folder may hold the other: the input is only ever read, never replaced or copied
    // into itself.
    const std::string input = tools::absolute(o_.input), output = tools::absolute(o_.output);
    if (tools::contains(input, output) || tools::contains(output, input))
      throw std::runtime_error("'" + o_.output + "' and '" + o_.input +
                               "' must be separate folders, neither inside the other");
    const io::safetensors_checkpoint checkpoint(o_.input);
    for (const std::string& warning : checkpoint.warnings())
      std::fprintf(stderr, "warning: %s (copied unchanged)\n", warning.c_str());
    plan(checkpoint);
    measure_group_amaxes();

    const std::string temporary = o_.output + ".partial-" + std::to_string(::getpid());
    tools::make_directory(temporary); // fails if it exists: nothing is removed that we did not make
    try {
      write_shards(checkpoint, temporary);
      write_config(temporary);
      tools::copy_tree(o_.input, temporary, written_here);
      // With --force the old output is moved aside first and removed only once the new one is
      // in place; if that rename fails, the old output is put back.
      const std::string old = o_.output + ".old-" + std::to_string(::getpid());
      const bool replacing = tools::exists(o_.output);
      if (replacing && std::rename(o_.output.c_str(), old.c_str()) != 0)
        throw std::runtime_error("cannot move '" + o_.output + "' aside: " + std::strerror(errno));
      if (std::rename(temporary.c_str(), o_.output.c_str()) != 0) {
        const int error = errno;
        if (replacing)
          std::rename(old.c_str(), o_.output.c_str());
        throw std::runtime_error("cannot rename '" + temporary + "' to '" + o_.output +
                                 "': " + std::strerror(error));
      }
      if (replacing)
        tools::remove_tree(old);
    } catch (...) {
      tools::remove_tree(temporary);
      throw;
    }
    if (!o_.quiet)
      summary(tools::seconds_since(start));
    return 0;
  }

private:
  /// Whether a top-level file of the input is one the converter writes anew rather than copies:
  /// the shards, the index and the configs of every layout (an input converted before carries no
  /// stale config along).
  static bool written_here(const std::string& name) {
    if (name == "config.json" || name == "quantization_config.json")
      return true;
    for (const tools::checkpoint_layout& layout : tools::checkpoint_layouts)
      if (layout.extra_file != nullptr && name == layout.extra_file)
        return true;
    return io::safetensors_checkpoint::ends_with(name, ".safetensors") ||
           io::safetensors_checkpoint::ends_with(name, ".safetensors.index.json");
  }

  /// Calls body(block_format_tag<F>{}) with the layout's block format F.
  template <class Body>
  void with_block_format(Body&& body) const {
    visit_block_format(layout_.format, [&](auto tag) {
      if constexpr (!std::is_same<decltype(tag), high_precision_tag>::value)
        body(tag);
    });
  }

  void plan(const io::safetensors_checkpoint& checkpoint) {
    const name_matcher ignored(o_.ignore);
    for (const auto& entry : checkpoint.tensors()) {
      planned p{entry.file, entry.tensor, false, {}, {}};
      const std::string& name = entry.tensor->name;
      const bool linear = tools::is_float_matrix(*entry.tensor) &&
                          io::safetensors_checkpoint::ends_with(name, ".weight") &&
                          !is_embedding(name.substr(0, name.size() - 7));
      bytes_in_ += entry.tensor->bytes();
      if (linear) {
        p.module = name.substr(0, name.size() - 7);
        if (p.module.size() > max_module_name)
          throw std::runtime_error("a tensor name of " + std::to_string(name.size()) +
                                   " characters is longer than this tool accepts");
        const bool fits =
            entry.tensor->shape[1] % static_cast<std::uint64_t>(format_.block_size) == 0 &&
            entry.tensor->shape[1] != 0 && entry.tensor->shape[0] != 0;
        p.quantize = fits && !ignored(p.module);
        if (!p.quantize)
          ignore_list_.push_back(p.module);
        if (!fits && !ignored(p.module))
          std::fprintf(stderr, "note: %s stays unquantized: K = %llu is not a multiple of %d\n",
                       p.module.c_str(), static_cast<unsigned long long>(entry.tensor->shape[1]),
                       format_.block_size);
      }
      if (p.quantize) {
        p.group = group_key(p.module);
        ++quantized_;
      }
      plan_.push_back(p);
    }
    // The names written must not collide with a tensor kept as it is (an input that already holds
    // `m.weight_scale` beside a plain `m.weight`, say).
    std::set<std::string> kept;
    for (const planned& p : plan_)
      if (!p.quantize)
        kept.insert(p.tensor->name);
    for (const planned& p : plan_)
      if (p.quantize)
        for (const char* suffix :
             {layout_.packed_suffix, layout_.scales_suffix, layout_.global.suffix})
          if (suffix != nullptr && kept.count(p.module + "." + suffix) != 0)
            throw std::runtime_error("the input holds '" + p.module + "." + suffix +
                                     "' already; quantizing '" + p.tensor->name +
                                     "' would write a second tensor of that name");
  }

  /// The fused group a module belongs to: its parent and the group's index when its last name
  /// component is one of a group's names, else the module itself.
  std::string group_key(const std::string& module) const {
    const std::size_t dot = module.find_last_of('.');
    const std::string parent = dot == std::string::npos ? "" : module.substr(0, dot);
    const std::string last = dot == std::string::npos ? module : module.substr(dot + 1);
    for (std::size_t g = 0; g < o_.fused.size(); ++g)
      for (const std::string& member : o_.fused[g])
        if (member == last)
          return parent + "\x1f" + std::to_string(g);
    return module;
  }

  void measure_group_amaxes() {
    if (layout_.global.suffix == nullptr)
      return;
    tools::progress_bar progress("amax   ", quantized_);
    for (const planned& p : plan_) {
      if (!p.quantize)
        continue;
      float amax = 0.0f;
      with_block_format([&](auto tag) {
        using F = typename decltype(tag)::type;
        amax = tools::with_matrix(*p.tensor, p.file->data(*p.tensor), [&](auto x) {
          return measure_amax<F>(x, quantize_options{}, &pool_);
        });
      });
      p.file->release(*p.tensor);
      float& group = group_amax_[p.group];
      group = codec::amax_value(codec::amax_bits(codec::magnitude_bits(group), amax));
      progress.advance();
    }
  }

  /// s_enc for a module, from its group's amax (1 for a layout without a global scale).
  float encode_scale_for(const planned& p) const {
    if (layout_.global.suffix == nullptr)
      return 1.0f;
    const auto found = group_amax_.find(p.group);
    const float amax = found == group_amax_.end() ? 0.0f : found->second;
    if (!(amax > 0.0f)) // all zeros (or NaN): every block stores zeros whatever s_enc is; 1
      return 1.0f;      // keeps the stored global scale a plain number for every loader
    return global_scale(amax, layout_.global.computed_with, format_.tensor_scale_numerator);
  }

  quantized_result quantize_module(const planned& p) {
    quantize_options options;
    options.encode_scale = encode_scale_for(p);
    options.layout = layout_.scales_layout;
    if (layout_.takes_mx_rule)
      options.rule = o_.mx_rule;
    quantized_result result;
    with_block_format([&](auto tag) {
      using F = typename decltype(tag)::type;
      tools::with_matrix(*p.tensor, p.file->data(*p.tensor), [&](auto x) {
        const quantized_shape shape = quantized_shape_for(x.rows(), x.cols(), options);
        const quantized_storage storage = storage_for<F>(shape);
        result.packed.resize(storage.element_bytes);
        result.scales.resize(storage.scale_bytes);
        float decode = 0.0f;
        const auto out =
            quantized_view<F>::make(shape, result.packed.data(), result.packed.size(),
                                    result.scales.data(), result.scales.size(), &decode);
        const quantize_stats stats = quantize_into(x, out, options, &pool_);
        std::lock_guard<std::mutex> lock(stats_mutex_);
        totals_.merge(stats);
        return 0;
      });
    });
    p.file->release(*p.tensor);
    return result;
  }

  /// The bytes of one of a module's two quantized tensors, quantizing it on first use.
  void fill_from(const planned& p, bool packed, std::uint8_t* out) {
    auto found = cache_.find(p.module);
    if (found == cache_.end())
      found = cache_.emplace(p.module, quantize_module(p)).first;
    const std::vector<std::uint8_t>& bytes = packed ? found->second.packed : found->second.scales;
    std::copy(bytes.begin(), bytes.end(), out);
    if (--found->second.pending == 0)
      cache_.erase(found);
  }

  void write_shards(const io::safetensors_checkpoint& checkpoint, const std::string& folder) {
    tools::progress_bar progress("convert", plan_.size());
    std::map<std::string, std::string> weight_map;
    for (const safetensors_file* file : checkpoint.files()) {
      std::vector<tensor_source> sources;
      for (const planned& p : plan_) {
        if (p.file != file)
          continue;
        const tensor_info& t = *p.tensor;
        if (!p.quantize) {
          tensor_source s{t.name,        t.dtype_name, t.shape, t.bytes(),
                          file->data(t), nullptr,      nullptr};
          s.written = [&progress, file, &t] {
            file->release(t);
            progress.advance();
          };
          sources.push_back(std::move(s));
          continue;
        }
        const std::uint64_t rows = t.shape[0], cols = t.shape[1];
        const std::uint64_t packed_cols =
            cols * static_cast<std::uint64_t>(format_.element_bits) / 8;
        const std::vector<std::uint64_t> scale_shape = tools::scale_tensor_shape(
            layout_.scales_layout, rows, cols / static_cast<std::uint64_t>(format_.block_size));
        tensor_source packed{p.module + "." + layout_.packed_suffix,
                             "U8",
                             {rows, packed_cols},
                             rows * packed_cols,
                             nullptr,
                             nullptr,
                             nullptr};
        packed.fill = [this, &p](std::uint8_t* out) { fill_from(p, true, out); };
        packed.written = [&progress] { progress.advance(); };
        tensor_source scales{p.module + "." + layout_.scales_suffix,
                             io::dtype_name(layout_.scales_dtype),
                             scale_shape,
                             scale_shape[0] * scale_shape[1],
                             nullptr,
                             nullptr,
                             nullptr};
        scales.fill = [this, &p](std::uint8_t* out) { fill_from(p, false, out); };
        sources.push_back(std::move(packed));
        sources.push_back(std::move(scales));
        if (layout_.global.suffix != nullptr) {
          const float value =
              global_scale_from_encode(encode_scale_for(p), layout_.global.stored_as);
          const auto bits = detail::bit_cast<std::uint32_t>(value);
          std::vector<std::uint8_t> bytes(4);
          for (int b = 0; b < 4; ++b)
            bytes[b] = static_cast<std::uint8_t>(bits >> (8 * b));
          sources.push_back(tensor_source::owning(
              p.module + "." + layout_.global.suffix, tensor_dtype::f32,
              layout_.global.scalar ? std::vector<std::uint64_t>{} : std::vector<std::uint64_t>{1},
              std::move(bytes)));
        }
      }
      // Widest elements first, then by name (as the safetensors reference writer orders them), so
      // every tensor starts aligned for its type.
      std::stable_sort(sources.begin(), sources.end(),
                       [](const tensor_source& a, const tensor_source& b) {
                         const int wa = io::dtype_bits(io::parse_dtype(a.dtype_name));
                         const int wb = io::dtype_bits(io::parse_dtype(b.dtype_name));
                         return wa != wb ? wa > wb : a.name < b.name;
                       });
      std::map<std::string, std::string> metadata = file->metadata();
      metadata.emplace("format", "pt");
      const std::string name = file->path().substr(file->path().find_last_of('/') + 1);
      for (const tensor_source& s : sources) {
        weight_map[s.name] = name;
        bytes_out_ += s.bytes;
      }
      io::write_safetensors(folder + "/" + name, sources, metadata);
    }
    if (!checkpoint.index_path().empty() || checkpoint.files().size() > 1) {
      json index;
      index["metadata"]["total_size"] = bytes_out_;
      index["weight_map"] = weight_map;
      tools::write_text(folder + "/model.safetensors.index.json", index.dump(2) + "\n");
    }
  }

  json quantization_config() const {
    std::vector<std::string> ignore = ignore_list_;
    std::sort(ignore.begin(), ignore.end());
    return layout_.quantization_config(layout_, ignore);
  }

  void write_config(const std::string& folder) const {
    const std::string path = o_.input + "/config.json";
    if (tools::exists(path)) {
      json config;
      try {
        config = json::parse(tools::read_text(path));
      } catch (const json::exception& error) {
        throw std::runtime_error("'" + path + "' is not valid JSON: " + error.what());
      }
      if (!config.is_object())
        throw std::runtime_error("'" + path + "' is not a JSON object");
      config["quantization_config"] = quantization_config();
      tools::write_text(folder + "/config.json", config.dump(2) + "\n");
    } else {
      std::fprintf(stderr,
                   "warning: %s has no config.json; the quantization config is written "
                   "to quantization_config.json instead\n",
                   o_.input.c_str());
      tools::write_text(folder + "/quantization_config.json", quantization_config().dump(2) + "\n");
    }
    if (layout_.extra_file != nullptr)
      tools::write_text(folder + "/" + layout_.extra_file,
                        layout_.extra_file_contents(quantization_config()).dump(2) + "\n");
  }

  void summary(double seconds) const {
    std::printf("%s -> %s\n", o_.input.c_str(), o_.output.c_str());
    std::printf("  quantized modules  %zu\n", quantized_);
    std::printf("  left unquantized   %zu Linear-like (listed in ignore)\n", ignore_list_.size());
    std::printf("  block scales       %llu, %llu saturated, %llu zero\n",
                static_cast<unsigned long long>(totals_.blocks),
                static_cast<unsigned long long>(totals_.saturated_scales),
                static_cast<unsigned long long>(totals_.zero_scales));
    std::printf("  bytes              %s in, %s out\n", tools::format_bytes(bytes_in_).c_str(),
                tools::format_bytes(bytes_out_).c_str());
    std::printf("  time               %.2f s (%.0f MB/s of input, %u threads)\n", seconds,
                static_cast<double>(bytes_in_) / 1e6 / seconds, pool_.size());
  }

  options o_;
  const tools::checkpoint_layout& layout_;
  tools::block_format_properties format_;
  thread_pool pool_;
  std::vector<planned> plan_;
  std::vector<std::string> ignore_list_;
  std::map<std::string, float> group_amax_;
  std::map<std::string, quantized_result> cache_;
  std::mutex stats_mutex_;
  quantize_stats totals_;
  std::size_t quantized_ = 0;
  std::uint64_t bytes_in_ = 0;
  std::uint64_t bytes_out_ = 0;
};

} // namespace

int main(int argc, char** argv) {
  return tools::run_main("blockscale-convert",
                         [&] { return converter(parse_arguments(argc, argv)).run(); });
}
