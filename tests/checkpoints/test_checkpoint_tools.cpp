// blockscale-convert and blockscale-inspect run on small checkpoints written here, and their output
// checked against the library called directly: every quantized module's codes, scales and global
// scale, the fused groups' shared scales, the copied tensors, the index and config.json, each of
// the four output formats; the inspector's numbers; and the tools' errors, which leave nothing
// half-written and never touch the input.
#include <blockscale/blockscale.hpp>
#include <blockscale/io/npy.hpp>
#include <blockscale/io/safetensors.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "catch.hpp"

#if defined(BLOCKSCALE_CATCH2_V3)
#define TOOLS_CONTAINS(text) Catch::Matchers::ContainsSubstring(text)
#else
#define TOOLS_CONTAINS(text) Catch::Contains(text)
#endif

namespace fs = std::filesystem;
using namespace blockscale;
using io::safetensors_checkpoint;
using io::tensor_source;
using json = nlohmann::json;

namespace {

/// A fresh, empty folder for one test.
fs::path scratch(const std::string& name) {
  const fs::path path = fs::temp_directory_path() / ("blockscale_test_tools_" + name);
  fs::remove_all(path);
  fs::create_directories(path);
  return path;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// Runs a command line; returns its exit status and its stderr.
std::pair<int, std::string> run(const std::string& command, const fs::path& folder) {
  const fs::path err = folder / "stderr.txt";
  const int status = std::system(
      (command + " > " + (folder / "stdout.txt").string() + " 2> " + err.string()).c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_text(err)};
}

/// A weight: rows x cols values, scaled, with a few outliers.
std::vector<float> weight(std::size_t rows, std::size_t cols, float scale, std::uint32_t seed) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> w(rows * cols);
  for (float& v : w)
    v = normal(generator);
  w[seed % w.size()] = 40.0f * scale; // an outlier
  if (w.size() > 40)
    w[7] = -0.0f;
  return w;
}

/// Stores `values` in dtype "F32", "F16" or "BF16", little-endian.
std::vector<std::uint8_t> encode(const std::vector<float>& values, const std::string& dtype) {
  std::vector<std::uint8_t> out;
  for (float v : values) {
    std::uint32_t bits = 0;
    int bytes = 2;
    if (dtype == "F32") {
      bits = detail::bit_cast<std::uint32_t>(v);
      bytes = 4;
    } else if (dtype == "F16") {
      bits = float16(v).bits();
    } else {
      bits = bfloat16(v).bits();
    }
    for (int b = 0; b < bytes; ++b)
      out.push_back(static_cast<std::uint8_t>(bits >> (8 * b)));
  }
  return out;
}

struct stored_tensor {
  std::string dtype;
  std::vector<std::uint64_t> shape;
  std::vector<std::uint8_t> bytes;
};

/// A Llama-like checkpoint in two shards with an index, config.json and other files. Returns the
/// tensors written, by name.
std::map<std::string, stored_tensor> write_llama(const fs::path& dir, const std::string& dtype) {
  fs::create_directories(dir);
  std::map<std::string, stored_tensor> tensors;
  const auto add = [&](const std::string& name, std::size_t rows, std::size_t cols, float scale,
                       std::uint32_t seed, const std::string& type) {
    tensors[name] = {type, {rows, cols}, encode(weight(rows, cols, scale, seed), type)};
  };
  std::uint32_t seed = 1;
  for (int layer = 0; layer < 2; ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    add(p + "self_attn.q_proj.weight", 64, 64, 0.02f, seed++, dtype);
    add(p + "self_attn.k_proj.weight", 32, 64, 0.08f, seed++, dtype); // the group's largest
    add(p + "self_attn.v_proj.weight", 32, 64, 0.01f, seed++, dtype);
    add(p + "self_attn.o_proj.weight", 64, 64, 0.03f, seed++, dtype);
    add(p + "mlp.gate_proj.weight", 96, 64, 0.02f, seed++, dtype);
    add(p + "mlp.up_proj.weight", 96, 64, 0.05f, seed++, dtype);
    add(p + "mlp.down_proj.weight", 64, 96, 0.02f, seed++, dtype);
    tensors[p + "input_layernorm.weight"] = {dtype, {64}, encode(std::vector<float>(64, 1), dtype)};
  }
  add("model.embed_tokens.weight", 50, 64, 1.0f, seed++, dtype);
  add("lm_head.weight", 50, 64, 0.1f, seed++, dtype);
  add("model.layers.1.mlp.odd_proj.weight", 8, 24, 0.1f, seed++, dtype); // K not a multiple of 16
  add("model.layers.0.self_attn.zero_proj.weight", 16, 32, 0.0f, seed++, "F32");
  std::fill(tensors["model.layers.0.self_attn.zero_proj.weight"].bytes.begin(),
            tensors["model.layers.0.self_attn.zero_proj.weight"].bytes.end(), 0);
  tensors["model.rotary.inv_freq"] = {"I64", {2}, std::vector<std::uint8_t>(16, 7)};

  std::vector<tensor_source> first, second;
  json weight_map;
  std::size_t i = 0;
  for (const auto& [name, t] : tensors) {
    const bool in_first = i++ % 2 == 0;
    (in_first ? first : second)
        .push_back({name, t.dtype, t.shape, t.bytes.size(), t.bytes.data(), nullptr, nullptr});
    weight_map[name] =
        in_first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  io::write_safetensors((dir / "model-00001-of-00002.safetensors").string(), first,
                        {{"format", "pt"}});
  io::write_safetensors((dir / "model-00002-of-00002.safetensors").string(), second,
                        {{"format", "pt"}});
  std::ofstream(dir / "model.safetensors.index.json")
      << json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump(2);
  std::ofstream(dir / "config.json")
      << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64})";
  std::ofstream(dir / "tokenizer.json") << "{\"tokens\": []}";
  fs::create_directories(dir / "extra");
  std::ofstream(dir / "extra" / "notes.txt") << "copied as is";
  return tensors;
}

/// Every file of a folder and its bytes.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.is_regular_file())
      files[fs::relative(entry.path(), dir).string()] = read_text(entry.path());
  return files;
}

/// Widens a stored F32 / F16 / BF16 tensor to floats.
std::vector<float> widen(const stored_tensor& t) {
  const io::tensor_dtype dtype = io::parse_dtype(t.dtype);
  io::tensor_info info{"t", t.dtype, dtype, t.shape, 0, t.bytes.size()};
  std::vector<float> out(info.elements());
  io::widen_to_float(info, t.bytes.data(), 0, out.size(), out.data());
  return out;
}

float amax_of(const std::vector<float>& values) {
  float most = 0.0f;
  for (float v : values)
    most = std::max(most, std::fabs(v));
  return most;
}

std::vector<std::uint8_t> bytes_of(const safetensors_checkpoint& checkpoint,
                                   const std::string& name) {
  const auto entry = checkpoint.find(name);
  REQUIRE(entry.tensor != nullptr);
  const std::uint8_t* data = entry.file->data(*entry.tensor);
  return std::vector<std::uint8_t>(data, data + entry.tensor->bytes());
}

float float_of(const safetensors_checkpoint& checkpoint, const std::string& name) {
  const auto bytes = bytes_of(checkpoint, name);
  REQUIRE(bytes.size() == 4);
  float value;
  std::memcpy(&value, bytes.data(), 4);
  return value;
}

const std::vector<std::string> linears = {
    "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
    "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};

/// The module names a fused group of `module` holds (the module alone when not fused).
std::vector<std::string> group_of(const std::string& module) {
  const std::string parent = module.substr(0, module.find_last_of('.'));
  const std::string prefix = parent.substr(0, parent.find_last_of('.') + 1);
  if (module.find("_proj") != std::string::npos) {
    for (const std::vector<std::string>& group :
         {std::vector<std::string>{"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"},
          std::vector<std::string>{"mlp.gate_proj", "mlp.up_proj"}})
      for (const std::string& member : group)
        if (prefix + member == module) {
          std::vector<std::string> names;
          for (const std::string& m : group)
            names.push_back(prefix + m);
          return names;
        }
  }
  return {module};
}

} // namespace

TEST_CASE("blockscale-convert writes compressed-tensors NVFP4 that the library reproduces") {
  for (const std::string dtype : {"BF16", "F32", "F16"}) {
    INFO(dtype);
    const fs::path dir = scratch("convert_" + dtype);
    const auto tensors = write_llama(dir / "in", dtype);
    const auto before = snapshot(dir / "in");
    const auto [status, err] = run(std::string(BLOCKSCALE_CONVERT) + " " + (dir / "in").string() +
                                       " " + (dir / "out").string(),
                                   dir);
    INFO(err);
    REQUIRE(status == 0);
    CHECK(snapshot(dir / "in") == before); // the input is never modified
    CHECK(read_text(dir / "out" / "tokenizer.json") == read_text(dir / "in" / "tokenizer.json"));
    CHECK(read_text(dir / "out" / "extra" / "notes.txt") == "copied as is");
    for (const auto& entry : fs::directory_iterator(dir))
      CHECK(entry.path().filename().string().find("partial") == std::string::npos);

    const safetensors_checkpoint out((dir / "out").string());
    for (int layer = 0; layer < 2; ++layer)
      for (const std::string& linear : linears) {
        const std::string module = "model.layers." + std::to_string(layer) + "." + linear;
        INFO(module);
        float group_amax = 0.0f;
        for (const std::string& member : group_of(module))
          group_amax = std::max(group_amax, amax_of(widen(tensors.at(member + ".weight"))));
        const float g = global_scale(group_amax, global_scale_convention::compressed_tensors);
        CHECK(float_of(out, module + ".weight_global_scale") == g);
        const stored_tensor& w = tensors.at(module + ".weight");
        const std::vector<float> values = widen(w);
        quantize_options options;
        options.encode_scale = g;
        const auto q = quantize<nvfp4>(
            matrix_view<const float>(values.data(), w.shape[0], w.shape[1]), options);
        const auto packed = bytes_of(out, module + ".weight_packed");
        const auto scales = bytes_of(out, module + ".weight_scale");
        REQUIRE(packed.size() == q.storage().element_bytes);
        REQUIRE(scales.size() == q.storage().scale_bytes);
        CHECK(std::memcmp(packed.data(), q.element_data(), packed.size()) == 0);
        CHECK(std::memcmp(scales.data(), q.scale_data(), scales.size()) == 0);
        const auto entry = out.find(module + ".weight_packed");
        CHECK(entry.tensor->dtype_name == "U8");
        CHECK(entry.tensor->shape == std::vector<std::uint64_t>{w.shape[0], w.shape[1] / 2});
        CHECK(out.find(module + ".weight_scale").tensor->dtype_name == "F8_E4M3");
        CHECK(out.find(module + ".weight_scale").tensor->shape ==
              std::vector<std::uint64_t>{w.shape[0], w.shape[1] / 16});
        CHECK(out.find(module + ".weight").tensor == nullptr);
      }
    // Fused groups share one scale; other modules have their own.
    CHECK(float_of(out, "model.layers.0.self_attn.q_proj.weight_global_scale") ==
          float_of(out, "model.layers.0.self_attn.v_proj.weight_global_scale"));
    CHECK(float_of(out, "model.layers.0.mlp.gate_proj.weight_global_scale") ==
          float_of(out, "model.layers.0.mlp.up_proj.weight_global_scale"));
    CHECK(float_of(out, "model.layers.0.mlp.gate_proj.weight_global_scale") !=
          float_of(out, "model.layers.0.mlp.down_proj.weight_global_scale"));
    // An all-zero weight: global scale 1, zero scales and codes.
    CHECK(float_of(out, "model.layers.0.self_attn.zero_proj.weight_global_scale") == 1.0f);
    for (std::uint8_t b : bytes_of(out, "model.layers.0.self_attn.zero_proj.weight_scale"))
      CHECK(b == 0);
    // Copied unchanged: embeddings, norms, lm_head (ignored), K not a multiple of 16, I64.
    for (const std::string name :
         {"model.embed_tokens.weight", "lm_head.weight", "model.layers.1.mlp.odd_proj.weight",
          "model.layers.0.input_layernorm.weight", "model.rotary.inv_freq"}) {
      INFO(name);
      CHECK(bytes_of(out, name) == tensors.at(name).bytes);
      CHECK(out.find(name).tensor->dtype_name == tensors.at(name).dtype);
    }
    // config.json keeps its keys and gains the quantization config.
    const json config = json::parse(read_text(dir / "out" / "config.json"));
    CHECK(config["model_type"] == "llama");
    const json& q = config["quantization_config"];
    CHECK(q["quant_method"] == "compressed-tensors");
    CHECK(q["format"] == "nvfp4-pack-quantized");
    CHECK(q["quantization_status"] == "compressed");
    CHECK(q["ignore"] == json({"lm_head", "model.layers.1.mlp.odd_proj"}));
    const json& weights = q["config_groups"]["group_0"]["weights"];
    CHECK(weights["group_size"] == 16);
    CHECK(weights["strategy"] == "tensor_group");
    CHECK(weights["num_bits"] == 4);
    CHECK(q["config_groups"]["group_0"]["input_activations"].is_null());
    // The index lists every tensor of the output, in the shard that holds it.
    const json index = json::parse(read_text(dir / "out" / "model.safetensors.index.json"));
    std::uint64_t total = 0;
    std::size_t listed = 0;
    for (const auto& entry : out.tensors()) {
      const std::string shard = entry.file->path().substr(entry.file->path().rfind('/') + 1);
      CHECK(index["weight_map"][entry.tensor->name] == shard);
      total += entry.tensor->bytes();
      ++listed;
    }
    CHECK(index["weight_map"].size() == listed);
    CHECK(index["metadata"]["total_size"] == total);
    for (const auto* file : out.files())
      CHECK(file->metadata().at("format") == "pt");
  }
}

TEST_CASE("blockscale-convert: ModelOpt, MXFP4 and UE5M3-FP4 outputs") {
  const fs::path dir = scratch("formats");
  const auto tensors = write_llama(dir / "in", "BF16");
  const std::string module = "model.layers.1.mlp.down_proj";
  const stored_tensor& w = tensors.at(module + ".weight");
  const std::vector<float> values = widen(w);
  const matrix_view<const float> x(values.data(), w.shape[0], w.shape[1]);
  const float amax = amax_of(values);

  SECTION("modelopt") {
    REQUIRE(run(std::string(BLOCKSCALE_CONVERT) + " " + (dir / "in").string() + " " +
                    (dir / "out").string() + " --format modelopt",
                dir)
                .first == 0);
    const safetensors_checkpoint out((dir / "out").string());
    const float s_enc = global_scale(amax, global_scale_convention::transformer_engine);
    // The stored multiplier is blockscale's s_dec, so (q * S) * weight_scale_2 decodes exactly.
    const auto scale_2 = out.find(module + ".weight_scale_2");
    REQUIRE(scale_2.tensor != nullptr);
    CHECK(scale_2.tensor->shape.empty());
    quantize_options options;
    options.encode_scale = s_enc;
    const auto q = quantize<nvfp4>(x, options);
    CHECK(float_of(out, module + ".weight_scale_2") == q.decode_scale());
    const auto packed = bytes_of(out, module + ".weight");
    CHECK(std::memcmp(packed.data(), q.element_data(), packed.size()) == 0);
    const auto scales = bytes_of(out, module + ".weight_scale");
    CHECK(std::memcmp(scales.data(), q.scale_data(), scales.size()) == 0);
    const json hf = json::parse(read_text(dir / "out" / "hf_quant_config.json"));
    CHECK(hf["quantization"]["quant_algo"] == "W4A16_NVFP4");
    CHECK(hf["quantization"]["group_size"] == 16);
    CHECK(hf["quantization"]["exclude_modules"] ==
          json({"lm_head", "model.layers.1.mlp.odd_proj"}));
    const json config = json::parse(read_text(dir / "out" / "config.json"));
    CHECK(config["quantization_config"]["quant_method"] == "modelopt");
  }
  SECTION("mxfp4, floor and rceil") {
    for (const std::string rule : {"floor", "rceil"}) {
      INFO(rule);
      fs::remove_all(dir / "out");
      REQUIRE(run(std::string(BLOCKSCALE_CONVERT) + " " + (dir / "in").string() + " " +
                      (dir / "out").string() + " --format mxfp4 --mx-rule " + rule,
                  dir)
                  .first == 0);
      const safetensors_checkpoint out((dir / "out").string());
      quantize_options options;
      options.rule = rule == "floor" ? scale_rules::ocp_floor() : scale_rules::rceil();
      const auto q = quantize<mxfp4>(x, options);
      const auto packed = bytes_of(out, module + ".weight_packed");
      const auto scales = bytes_of(out, module + ".weight_scale");
      CHECK(std::memcmp(packed.data(), q.element_data(), packed.size()) == 0);
      CHECK(std::memcmp(scales.data(), q.scale_data(), scales.size()) == 0);
      CHECK(out.find(module + ".weight_scale").tensor->shape ==
            std::vector<std::uint64_t>{w.shape[0], w.shape[1] / 32});
      CHECK(out.find(module + ".weight_global_scale").tensor == nullptr);
      const json config = json::parse(read_text(dir / "out" / "config.json"));
      CHECK(config["quantization_config"]["format"] == "mxfp4-pack-quantized");
      CHECK(config["quantization_config"]["config_groups"]["group_0"]["weights"]["group_size"] ==
            32);
    }
  }
  SECTION("ue5m3_fp4") {
    REQUIRE(run(std::string(BLOCKSCALE_CONVERT) + " " + (dir / "in").string() + " " +
                    (dir / "out").string() + " --format ue5m3_fp4",
                dir)
                .first == 0);
    const safetensors_checkpoint out((dir / "out").string());
    quantize_options options;
    options.encode_scale = encode_scale_from_amax(tensor_scale_numerator<ue5m3_fp4>(0), amax);
    const auto q = quantize<ue5m3_fp4>(x, options);
    CHECK(float_of(out, module + ".weight_global_scale") == options.encode_scale);
    const auto scales = bytes_of(out, module + ".weight_scale");
    CHECK(out.find(module + ".weight_scale").tensor->dtype_name == "U8");
    CHECK(std::memcmp(scales.data(), q.scale_data(), scales.size()) == 0);
    const json config = json::parse(read_text(dir / "out" / "config.json"));
    CHECK(config["quantization_config"]["quant_method"] == "blockscale");
  }
}

TEST_CASE("blockscale-convert: options, and errors that leave nothing behind") {
  const fs::path dir = scratch("errors");
  write_llama(dir / "in", "BF16");
  const std::string tool = BLOCKSCALE_CONVERT;
  const std::string in = (dir / "in").string(), out = (dir / "out").string();

  int status = 0;
  std::string err;
  // --ignore adds names and patterns; --no-default-ignore quantizes lm_head.
  REQUIRE(run(tool + " " + in + " " + out + " --ignore 're:.*\\.o_proj$' --no-default-ignore", dir)
              .first == 0);
  {
    const safetensors_checkpoint converted(out);
    CHECK(converted.find("lm_head.weight_packed").tensor != nullptr);
    CHECK(converted.find("model.layers.0.self_attn.o_proj.weight").tensor != nullptr);
    const json config = json::parse(read_text(dir / "out" / "config.json"));
    CHECK(config["quantization_config"]["ignore"] ==
          json({"model.layers.0.self_attn.o_proj", "model.layers.1.mlp.odd_proj",
                "model.layers.1.self_attn.o_proj"}));
  }
  // Links: a link to a file is copied as the file; links to folders and special files are left out.
  fs::create_symlink(dir / "in" / "tokenizer.json", dir / "in" / "linked.json");
  fs::create_directory_symlink(dir / "in", dir / "in" / "loop");
  REQUIRE(::mkfifo((dir / "in" / "pipe").c_str(), 0600) == 0);
  std::tie(status, err) = run(tool + " " + in + " " + out + "_links", dir);
  CHECK(status == 0);
  CHECK(read_text(dir / "out_links" / "linked.json") == read_text(dir / "in" / "tokenizer.json"));
  CHECK_FALSE(fs::is_symlink(dir / "out_links" / "linked.json"));
  CHECK_FALSE(fs::exists(dir / "out_links" / "loop"));
  CHECK_FALSE(fs::exists(dir / "out_links" / "pipe"));
  CHECK_THAT(err, TOOLS_CONTAINS("not copied"));
  fs::remove(dir / "in" / "linked.json");
  fs::remove(dir / "in" / "loop");
  fs::remove(dir / "in" / "pipe");

  // The output exists: refused, then replaced with --force.
  std::tie(status, err) = run(tool + " " + in + " " + out, dir);
  CHECK(status == 1);
  CHECK_THAT(err, TOOLS_CONTAINS("exists"));
  CHECK(run(tool + " " + in + " " + out + " --force", dir).first == 0);
  CHECK(json::parse(read_text(dir / "out" / "config.json"))["quantization_config"]["ignore"] ==
        json({"lm_head", "model.layers.1.mlp.odd_proj"}));

  // The input is never replaced or written into, even with --force.
  for (const std::string& target :
       {in, in + "/sub", in + "/./", (dir / "in" / ".." / "in").string(), dir.string()}) {
    INFO(target);
    std::tie(status, err) = run(tool + " " + in + " " + target + " --force", dir);
    CHECK(status == 1);
    CHECK_THAT(err, TOOLS_CONTAINS("separate folders"));
  }
  CHECK(fs::exists(dir / "in" / "config.json"));
  CHECK_FALSE(fs::exists(dir / "in" / "sub"));
  std::tie(status, err) = run(tool + " " + in, dir);
  CHECK(status == 2);
  CHECK_THAT(err, TOOLS_CONTAINS("INPUT_DIR and OUTPUT_DIR"));
  std::tie(status, err) = run(tool + " " + in + " " + out + "2 --format fp3", dir);
  CHECK(status == 2);
  CHECK_THAT(err, TOOLS_CONTAINS("unknown --format"));
  std::tie(status, err) = run(tool + " " + in + " " + out + "2 --ignore 're:('", dir);
  CHECK(status == 2);
  CHECK_THAT(err, TOOLS_CONTAINS("regular expression"));
  std::tie(status, err) = run(tool + " " + (dir / "nowhere").string() + " " + out + "2", dir);
  CHECK(status == 1);
  CHECK_THAT(err, TOOLS_CONTAINS("not a folder"));

  // A name the quantized module would write, already in the input, is refused.
  {
    const fs::path clash = dir / "clash";
    fs::create_directories(clash);
    const std::vector<std::uint8_t> w = encode(weight(16, 32, 0.1f, 5), "BF16");
    const std::vector<std::uint8_t> s(32, 1);
    io::write_safetensors((clash / "model.safetensors").string(),
                          {{"m.weight", "BF16", {16, 32}, w.size(), w.data(), nullptr, nullptr},
                           {"m.weight_scale", "U8", {32}, s.size(), s.data(), nullptr, nullptr}});
    std::tie(status, err) = run(tool + " " + clash.string() + " " + out + "4", dir);
    CHECK(status == 1);
    CHECK_THAT(err, TOOLS_CONTAINS("m.weight_scale"));
    CHECK_FALSE(fs::exists(out + "4"));
  }

  // A shard that is cut short fails the run: no output, no partial folder.
  const fs::path shard = dir / "in" / "model-00002-of-00002.safetensors";
  fs::resize_file(shard, fs::file_size(shard) - 3);
  std::tie(status, err) = run(tool + " " + in + " " + out + "3", dir);
  CHECK(status == 1);
  CHECK_THAT(err, TOOLS_CONTAINS("model-00002-of-00002.safetensors"));
  CHECK_FALSE(fs::exists(out + "3"));
  for (const auto& entry : fs::directory_iterator(dir))
    CHECK(entry.path().filename().string().find("partial") == std::string::npos);
}

TEST_CASE("blockscale-inspect reports what the library measures") {
  const fs::path dir = scratch("inspect");
  auto tensors = write_llama(dir / "in", "BF16");
  const std::vector<float> npy = weight(48, 80, 0.3f, 99);
  io::write_npy((dir / "extra.npy").string(), npy.data(), {48, 80});
  // An FP8 checkpoint's weight: inspected from its values widened to float.
  std::vector<std::uint8_t> fp8_codes(32 * 48);
  std::vector<float> fp8_values(fp8_codes.size());
  for (std::size_t i = 0; i < fp8_codes.size(); ++i) {
    fp8_codes[i] = static_cast<std::uint8_t>((i * 37) % 0x7F) | (i % 3 == 0 ? 0x80 : 0);
    fp8_values[i] = static_cast<float>(e4m3::from_bits(fp8_codes[i]));
  }
  tensors["model.fp8_proj.weight"] = {"F8_E4M3", {32, 48}, fp8_codes};
  io::write_safetensors((dir / "in" / "fp8.safetensors").string(), {{"model.fp8_proj.weight",
                                                                     "F8_E4M3",
                                                                     {32, 48},
                                                                     fp8_codes.size(),
                                                                     fp8_codes.data(),
                                                                     nullptr,
                                                                     nullptr}});
  {
    // The index lists the shards; the FP8 file is a checkpoint of its own, given separately.
    fs::create_directories(dir / "fp8");
    fs::rename(dir / "in" / "fp8.safetensors", dir / "fp8" / "model.safetensors");
  }
  const auto [status, err] =
      run(std::string(BLOCKSCALE_INSPECT) + " " + (dir / "in").string() + " " +
              (dir / "extra.npy").string() + " " + (dir / "fp8").string() + " --json " +
              (dir / "r.json").string() + " --csv " + (dir / "r.csv").string() + " --svg " +
              (dir / "r.svg").string(),
          dir);
  INFO(err);
  REQUIRE(status == 0);
  const json report = json::parse(read_text(dir / "r.json"));
  // Every 2-D float tensor, each with 4 formats x 2 transforms.
  std::size_t matrices = 0;
  for (const auto& [name, t] : tensors)
    matrices += t.shape.size() == 2 && t.dtype != "I64";
  REQUIRE(report["tensors"].size() == matrices + 1); // the .npy; the FP8 one is in `tensors`

  const auto check_tensor = [&](const json& item, const std::vector<float>& values,
                                std::size_t rows, std::size_t cols) {
    INFO(item["name"].get<std::string>());
    REQUIRE(item["results"].size() == 8);
    const matrix_view<const float> x(values.data(), rows, cols);
    for (const json& r : item["results"]) {
      const std::string format = r["format"];
      INFO(format << (r["hadamard"].get<bool>() ? " + RHT" : ""));
      quantize_options options;
      options.hadamard = r["hadamard"];
      quantization_error e;
      if (format == "nvfp4") {
        options.encode_scale = encode_scale_from_amax(tensor_scale_numerator<nvfp4>(0),
                                                      measure_amax<nvfp4>(x, options));
        e = measure_error(x, quantize<nvfp4>(x, options));
      } else if (format == "ue5m3_fp4") {
        options.encode_scale = encode_scale_from_amax(tensor_scale_numerator<ue5m3_fp4>(8),
                                                      measure_amax<ue5m3_fp4>(x, options));
        e = measure_error(x, quantize<ue5m3_fp4>(x, options));
      } else {
        options.rule = format == "mxfp4_floor" ? scale_rules::ocp_floor() : scale_rules::rceil();
        e = measure_error(x, quantize<mxfp4>(x, options));
      }
      CHECK(r["encode_scale"].get<float>() == options.encode_scale);
      CHECK(r["sqnr_db"].get<double>() == e.sqnr_db);
      CHECK(r["relative_mse"].get<double>() == e.relative_mse);
      CHECK(r["clipped_fraction"].get<double>() == e.clipped_fraction);
      CHECK(r["flushed_fraction"].get<double>() == e.flushed_fraction);
      CHECK(r["saturated_scales"].get<std::uint64_t>() == e.saturated_scales);
      CHECK(r["zero_scales"].get<std::uint64_t>() == e.zero_scales);
      CHECK(r["elements"].get<std::uint64_t>() == e.elements);
    }
  };
  for (const json& item : report["tensors"]) {
    const std::string name = item["name"];
    if (name == "extra.npy") {
      check_tensor(item, npy, 48, 80);
      continue;
    }
    if (name == "model.fp8_proj.weight") {
      check_tensor(item, fp8_values, 32, 48);
      continue;
    }
    const stored_tensor& t = tensors.at(name);
    CHECK(item["dtype"] == t.dtype);
    if (name == "model.layers.0.self_attn.zero_proj.weight") {
      for (const json& r : item["results"]) {
        CHECK(r["sqnr_db"].is_null()); // 0 / 0: no signal and no error
        // UE8M0 has no zero: an all-zero block gets its smallest code, 2^-127.
        if (r["format"].get<std::string>().rfind("mxfp4", 0) == 0)
          CHECK(r["scale_binades"] == json({-127, -127}));
        else
          CHECK(r["scale_binades"].is_null());
      }
      continue;
    }
    check_tensor(item, widen(t), t.shape[0], t.shape[1]);
  }
  // The binades of the block scales NVFP4 used for one tensor, from the library.
  {
    const stored_tensor& t = tensors.at("model.layers.0.mlp.up_proj.weight");
    const std::vector<float> values = widen(t);
    const matrix_view<const float> x(values.data(), t.shape[0], t.shape[1]);
    quantize_options options;
    options.encode_scale =
        encode_scale_from_amax(tensor_scale_numerator<nvfp4>(0), measure_amax<nvfp4>(x, options));
    const auto q = quantize<nvfp4>(x, options);
    int lo = 1000, hi = -1000;
    for (std::size_t i = 0; i < q.storage().scale_bytes; ++i) {
      const float s = static_cast<float>(ue4m3::from_bits(q.scale_data()[i]));
      if (s > 0.0f) {
        lo = std::min(lo, std::ilogb(s));
        hi = std::max(hi, std::ilogb(s));
      }
    }
    for (const json& item : report["tensors"])
      if (item["name"] == "model.layers.0.mlp.up_proj.weight")
        for (const json& r : item["results"])
          if (r["format"] == "nvfp4" && r["hadamard"] == false)
            CHECK(r["scale_binades"] == json({lo, hi}));
  }
  // Names are escaped: XML in the chart, quotes in the CSV, control characters in the table.
  {
    fs::create_directories(dir / "odd");
    const std::vector<std::uint8_t> w = encode(weight(16, 32, 0.1f, 6), "F32");
    const std::string name = "a<b>&\"c\"\x01.weight";
    io::write_safetensors((dir / "odd" / "model.safetensors").string(),
                          {{name, "F32", {16, 32}, w.size(), w.data(), nullptr, nullptr}});
    REQUIRE(run(std::string(BLOCKSCALE_INSPECT) + " " + (dir / "odd").string() + " --svg " +
                    (dir / "odd.svg").string() + " --csv " + (dir / "odd.csv").string(),
                dir / "odd")
                .first == 0);
    const std::string odd_svg = read_text(dir / "odd.svg");
    CHECK(odd_svg.find("a&lt;b&gt;&amp;&quot;c&quot;?.weight") != std::string::npos);
    CHECK(odd_svg.find("a<b>") == std::string::npos);
    CHECK(read_text(dir / "odd.csv").find("\"a<b>&\"\"c\"\"\x01.weight\"") != std::string::npos);
    CHECK(read_text(dir / "odd" / "stdout.txt").find("a<b>&\"c\"?.weight") != std::string::npos);
  }
  const std::string csv = read_text(dir / "r.csv");
  CHECK(csv.rfind("tensor,rows,cols,dtype,format,hadamard,sqnr_db", 0) == 0);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == static_cast<long>(1 + 8 * (matrices + 1)));
  const std::string svg = read_text(dir / "r.svg");
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("model.layers.1.mlp.down_proj.weight") != std::string::npos);
  CHECK(svg.find("mxfp4_rceil + RHT") != std::string::npos);
  const std::string table = read_text(dir / "stdout.txt");
  CHECK(table.find("SQNR dB") != std::string::npos);
  CHECK(table.find("model.layers.0.self_attn.k_proj.weight") != std::string::npos);

  // Formats chosen, no transform; errors.
  REQUIRE(run(std::string(BLOCKSCALE_INSPECT) + " " + (dir / "extra.npy").string() +
                  " --formats nvfp4,mxfp4_rceil --no-hadamard --json -",
              dir)
              .first == 0);
  CHECK(json::parse(read_text(dir / "stdout.txt"))["tensors"][0]["results"].size() == 2);
  auto [code, message] = run(std::string(BLOCKSCALE_INSPECT) + " " + (dir / "x").string(), dir);
  CHECK(code == 1);
  CHECK_THAT(message, TOOLS_CONTAINS("cannot open"));
  std::tie(code, message) = run(
      std::string(BLOCKSCALE_INSPECT) + " " + (dir / "extra.npy").string() + " --formats fp8", dir);
  CHECK(code == 2);
  CHECK_THAT(message, TOOLS_CONTAINS("unknown format"));
}
