// safetensors reading and writing (io/safetensors.hpp): round trips of every dtype the format
// names, sub-byte and unknown dtypes, zero-size tensors and metadata; a table of malformed files
// that must each throw safetensors_error naming the problem; checkpoints as folders, sharded
// through an index, and the index's own errors (on thousands of names too); the writer's checks and
// its all-or-nothing file.
#include <blockscale/io/safetensors.hpp>
#include <blockscale/numeric/convert.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "catch.hpp"

#if defined(BLOCKSCALE_CATCH2_V3)
#define SAFETENSORS_CONTAINS(text) Catch::Matchers::ContainsSubstring(text)
#else
#define SAFETENSORS_CONTAINS(text) Catch::Contains(text)
#endif

namespace fs = std::filesystem;
using namespace blockscale::io;

namespace {

/// A fresh, empty folder for one test.
fs::path scratch(const std::string& name) {
  const fs::path path = fs::temp_directory_path() / ("blockscale_test_safetensors_" + name);
  fs::remove_all(path);
  fs::create_directories(path);
  return path;
}

std::vector<std::uint8_t> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

/// A file of the given header text (not padded) and data.
std::vector<std::uint8_t> file_of(const std::string& header, const std::vector<std::uint8_t>& data,
                                  std::uint64_t length_field) {
  std::string text;
  for (int b = 0; b < 8; ++b)
    text += static_cast<char>(length_field >> (8 * b));
  text += header;
  text.append(data.begin(), data.end());
  return std::vector<std::uint8_t>(text.begin(), text.end());
}
std::vector<std::uint8_t> file_of(const std::string& header,
                                  const std::vector<std::uint8_t>& data = {}) {
  return file_of(header, data, header.size());
}

tensor_source bytes_source(const std::string& name, const std::string& dtype,
                           std::vector<std::uint64_t> shape,
                           const std::vector<std::uint8_t>& data) {
  return tensor_source{name, dtype, std::move(shape), data.size(), data.data(), nullptr, nullptr};
}

} // namespace

TEST_CASE("dtype names, sizes and widening") {
  CHECK(parse_dtype("BF16") == tensor_dtype::bf16);
  CHECK(parse_dtype("F8_E4M3") == tensor_dtype::f8_e4m3);
  CHECK(parse_dtype("bf16") == tensor_dtype::unknown); // names are case-sensitive
  CHECK(std::string(dtype_name(tensor_dtype::u8)) == "U8");
  CHECK(dtype_bits(tensor_dtype::f4) == 4);
  CHECK(dtype_bits(tensor_dtype::f6_e3m2) == 6);
  CHECK(dtype_bits(tensor_dtype::c64) == 64);
  CHECK(dtype_bits(tensor_dtype::unknown) == 0);
  CHECK(is_float_input(tensor_dtype::f8_e4m3));
  CHECK_FALSE(is_float_input(tensor_dtype::u8));

  // Every F8_E4M3 and BF16 code widens to the value blockscale's own types give.
  tensor_info e4m3{"x", "F8_E4M3", tensor_dtype::f8_e4m3, {256}, 0, 256};
  std::vector<std::uint8_t> codes(256);
  for (int i = 0; i < 256; ++i)
    codes[i] = static_cast<std::uint8_t>(i);
  std::vector<float> out(256);
  widen_to_float(e4m3, codes.data(), 0, 256, out.data());
  for (int i = 0; i < 256; ++i) {
    const float want =
        static_cast<float>(blockscale::e4m3::from_bits(static_cast<std::uint8_t>(i)));
    CHECK((out[i] == want || (out[i] != out[i] && want != want)));
  }
  tensor_info bf16{"y", "BF16", tensor_dtype::bf16, {3}, 0, 6};
  const std::uint8_t bits[7] = {0xEE, 0x80, 0x3F, 0x00, 0xC0, 0x00, 0x7F}; // unaligned from +1
  widen_to_float(bf16, bits + 1, 0, 3, out.data());
  CHECK(out[0] == 1.0f);
  CHECK(out[1] == -2.0f);
  CHECK(out[2] == static_cast<float>(blockscale::bfloat16::from_bits(0x7F00)));
  tensor_info u8{"z", "U8", tensor_dtype::u8, {1}, 0, 1};
  CHECK_THROWS_AS(widen_to_float(u8, codes.data(), 0, 1, out.data()), safetensors_error);
}

TEST_CASE("write and read back every dtype, metadata and odd shapes") {
  const fs::path dir = scratch("round_trip");
  std::vector<std::vector<std::uint8_t>> buffers;
  std::vector<tensor_source> sources;
  std::uint8_t next = 1;
  const auto add = [&](const std::string& name, const std::string& dtype,
                       std::vector<std::uint64_t> shape, std::size_t bytes) {
    std::vector<std::uint8_t> data(bytes);
    for (auto& b : data)
      b = next++;
    buffers.push_back(data);
    sources.push_back(bytes_source(name, dtype, std::move(shape), buffers.back()));
  };
  buffers.reserve(32);
  add("f64", "F64", {3}, 24);
  add("f32 matrix", "F32", {2, 3}, 24);
  add("bf16", "BF16", {5}, 10);
  add("f16", "F16", {1, 1, 2}, 4);
  add("e4m3", "F8_E4M3", {7}, 7);
  add("f4", "F4", {6}, 3);
  add("f6", "F6_E2M3", {4}, 3);
  add("scalar", "F32", {}, 4);
  add("empty", "BF16", {0, 4}, 0);
  add("unknown", "Q5_K", {9}, 5);
  add("ünïcödé", "U8", {2}, 2);
  // A fill callback instead of a pointer.
  tensor_source filled{"filled", "U8", {4}, 4, nullptr, nullptr, nullptr};
  filled.fill = [](std::uint8_t* out) {
    for (int i = 0; i < 4; ++i)
      out[i] = static_cast<std::uint8_t>(200 + i);
  };
  int written = 0;
  filled.written = [&written] { ++written; };
  sources.push_back(filled);
  const fs::path path = dir / "model.safetensors";
  write_safetensors(path.string(), sources, {{"format", "pt"}, {"note", "round trip"}});
  CHECK(written == 1);
  CHECK_FALSE(fs::exists(path.string() + ".partial"));

  const std::vector<std::uint8_t> raw = read_bytes(path);
  std::uint64_t length = 0;
  for (int b = 7; b >= 0; --b)
    length = length << 8 | raw[b];
  CHECK(length % 8 == 0); // padded, so that the data starts aligned

  const safetensors_file file(path.string());
  CHECK(file.metadata().at("format") == "pt");
  CHECK(file.metadata().at("note") == "round trip");
  REQUIRE(file.tensors().size() == sources.size());
  REQUIRE(file.warnings().size() == 1);
  CHECK_THAT(file.warnings()[0], SAFETENSORS_CONTAINS("Q5_K"));
  for (const tensor_source& source : sources) {
    const tensor_info* info = file.find(source.name);
    REQUIRE(info != nullptr);
    CHECK(info->dtype_name == source.dtype_name);
    CHECK(info->shape == source.shape);
    REQUIRE(info->bytes() == source.bytes);
    std::vector<std::uint8_t> want(source.bytes);
    if (source.data != nullptr && source.bytes != 0)
      std::memcpy(want.data(), source.data, source.bytes);
    else if (source.fill)
      source.fill(want.data());
    if (want.empty())
      continue;
    CHECK(std::memcmp(file.data(*info), want.data(), want.size()) == 0);
    // Releasing the pages loses nothing: touched again, they are read from the file.
    file.release(*info);
    CHECK(std::memcmp(file.data(*info), want.data(), want.size()) == 0);
  }
  CHECK(file.find("absent") == nullptr);
}

TEST_CASE("malformed files are one clear error each") {
  struct bad {
    const char* what;
    std::vector<std::uint8_t> bytes;
    const char* message;
  };
  const std::vector<std::uint8_t> sixteen(16, 0);
  const std::string good_entry = R"("t":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})";
  const std::vector<bad> cases = {
      {"empty", {}, "empty file"},
      {"short", {1, 2, 3, 4, 5}, "truncated"},
      {"length beyond the file", file_of("{}", {}, 1000), "beyond the file"},
      {"length above the limit", file_of("{}", {}, 200'000'000), "limit"},
      {"not an object", file_of("[1,2]"), "not a JSON object"},
      {"zero length", file_of("", {}, 0), "not a JSON object"},
      {"invalid JSON", file_of("{\"t\":"), "not valid JSON"},
      {"not UTF-8", file_of("{\"\xff\":1}"), "not valid JSON"},
      {"trailing garbage", file_of("{} x"), "not valid JSON"},
      {"entry not an object", file_of(R"({"t":5})"), "not an object"},
      {"no dtype", file_of(R"({"t":{"shape":[1],"data_offsets":[0,4]}})"), "dtype"},
      {"dtype not a string", file_of(R"({"t":{"dtype":3,"shape":[1],"data_offsets":[0,4]}})"),
       "dtype"},
      {"no shape", file_of(R"({"t":{"dtype":"F32","data_offsets":[0,4]}})"), "shape"},
      {"no offsets", file_of(R"({"t":{"dtype":"F32","shape":[1]}})"), "data_offsets"},
      {"three offsets", file_of(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})"),
       "data_offsets"},
      {"negative dimension",
       file_of(R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", sixteen),
       "non-negative"},
      {"fractional dimension",
       file_of(R"({"t":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", sixteen),
       "non-negative integer"},
      {"offsets reversed",
       file_of(R"({"t":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})", sixteen),
       "end before they begin"},
      {"shape and size disagree",
       file_of(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", sixteen),
       "need 12 bytes"},
      {"sub-byte remainder",
       file_of(R"({"t":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", {0, 0}),
       "fraction of a byte"},
      {"shape overflows",
       file_of(R"({"t":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,1]}})", {0}),
       "overflows"},
      {"beyond the data", file_of("{" + good_entry + "}", std::vector<std::uint8_t>(8)),
       "ends at byte 16"},
      {"hole at the end", file_of("{" + good_entry + "}", std::vector<std::uint8_t>(20)),
       "belong to no tensor"},
      {"hole at the start",
       file_of(R"({"t":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})", {0, 0, 0, 0}),
       "belong to no tensor"},
      {"overlap",
       file_of(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
               R"("b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})",
               {0, 0, 0, 0}),
       "overlaps"},
      {"duplicate name",
       file_of(R"({"t":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
               R"("t":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})",
               {0, 0, 0, 0}),
       "twice"},
      {"metadata not an object", file_of(R"({"__metadata__":[1]})"), "__metadata__"},
      {"nested too deeply", file_of("{\"t\":{\"shape\":" + std::string(100000, '[')),
       "deeper than"},
      {"a nested dimension",
       file_of(R"({"t":{"dtype":"U8","shape":[[[1]]],"data_offsets":[0,1]}})", {0}), "not array"},
      {"metadata value not a string", file_of(R"({"__metadata__":{"a":1}})"), "not a string"},
  };
  const fs::path dir = scratch("malformed");
  for (const bad& c : cases) {
    INFO(c.what);
    CHECK_THROWS_WITH(parse_safetensors_header(c.bytes.data(), c.bytes.size(), "x.safetensors"),
                      SAFETENSORS_CONTAINS(c.message));
    // Through the file reader too, which names the file.
    const fs::path path = dir / "bad.safetensors";
    write_bytes(path, c.bytes);
    CHECK_THROWS_WITH(safetensors_file(path.string()), SAFETENSORS_CONTAINS(path.string()));
  }
  CHECK_THROWS_WITH(safetensors_file((dir / "missing.safetensors").string()),
                    SAFETENSORS_CONTAINS("cannot open"));
  CHECK_THROWS_WITH(safetensors_file(dir.string()), SAFETENSORS_CONTAINS("not a regular file"));
  // A named pipe is refused at once, not waited on.
  const fs::path fifo = dir / "pipe.safetensors";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(safetensors_file(fifo.string()), SAFETENSORS_CONTAINS("not a regular file"));
}

TEST_CASE("well-formed oddities are accepted") {
  // No tensors at all, whitespace padding, zero-size tensors anywhere, extra keys in an entry.
  const auto no_tensors = file_of("{}   ");
  CHECK(parse_safetensors_header(no_tensors.data(), no_tensors.size()).tensors.empty());
  const auto bytes = file_of(R"({"e":{"dtype":"BF16","shape":[0],"data_offsets":[0,0]},)"
                             R"("a":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"extra":true},)"
                             R"("z":{"dtype":"F32","shape":[0,7],"data_offsets":[2,2]}}   )",
                             {9, 8});
  const safetensors_header header = parse_safetensors_header(bytes.data(), bytes.size());
  REQUIRE(header.tensors.size() == 3);
  CHECK(header.tensors.back().name == "z");
  CHECK(header.tensors[0].elements() == 0);
}

TEST_CASE("the writer refuses what it cannot write, and leaves nothing behind") {
  const fs::path dir = scratch("writer");
  const std::vector<std::uint8_t> four(4, 1);
  const std::string path = (dir / "w.safetensors").string();
  CHECK_THROWS_WITH(write_safetensors(path, {bytes_source("a", "U8", {4}, four),
                                             bytes_source("a", "U8", {4}, four)}),
                    SAFETENSORS_CONTAINS("used twice"));
  CHECK_THROWS_WITH(write_safetensors(path, {bytes_source("__metadata__", "U8", {4}, four)}),
                    SAFETENSORS_CONTAINS("reserved"));
  CHECK_THROWS_WITH(write_safetensors(path, {bytes_source("a", "F32", {2}, four)}),
                    SAFETENSORS_CONTAINS("need 8"));
  CHECK_THROWS_WITH(write_safetensors(path, {bytes_source("a\xff", "U8", {4}, four)}),
                    SAFETENSORS_CONTAINS("UTF-8"));
  CHECK_FALSE(fs::exists(path));

  // A failure while streaming: an existing file stays as it was, and no partial file remains.
  write_safetensors(path, {bytes_source("kept", "U8", {4}, four)});
  const auto before = read_bytes(path);
  tensor_source failing{"b", "U8", {4}, 4, nullptr, nullptr, nullptr};
  failing.fill = [](std::uint8_t*) { throw std::runtime_error("fill failed"); };
  CHECK_THROWS_WITH(write_safetensors(path, {bytes_source("a", "U8", {4}, four), failing}),
                    SAFETENSORS_CONTAINS("fill failed"));
  CHECK(read_bytes(path) == before);
  CHECK_FALSE(fs::exists(path + ".partial"));
  tensor_source neither{"c", "U8", {4}, 4, nullptr, nullptr, nullptr};
  CHECK_THROWS_WITH(write_safetensors(path, {neither}), SAFETENSORS_CONTAINS("neither"));
  CHECK_THROWS_WITH(write_safetensors((dir / "no" / "such" / "dir.safetensors").string(), {}),
                    SAFETENSORS_CONTAINS("cannot create"));
}

TEST_CASE("checkpoints: a file, a folder, shards through an index") {
  const fs::path dir = scratch("checkpoint");
  const std::vector<std::uint8_t> a(8, 1), b(4, 2), c(2, 3);
  write_safetensors((dir / "model-00001-of-00002.safetensors").string(),
                    {bytes_source("x.weight", "F32", {2}, a), bytes_source("y", "U8", {4}, b)});
  write_safetensors((dir / "model-00002-of-00002.safetensors").string(),
                    {bytes_source("z.bias", "BF16", {1}, c)});
  const auto write_index = [&](const std::string& weight_map) {
    std::ofstream(dir / "model.safetensors.index.json")
        << R"({"metadata": {"total_size": 14}, "weight_map": )" << weight_map << "}";
  };
  write_index(R"({"x.weight": "model-00001-of-00002.safetensors",
                  "y": "model-00001-of-00002.safetensors",
                  "z.bias": "model-00002-of-00002.safetensors"})");
  {
    const safetensors_checkpoint checkpoint(dir.string());
    CHECK(checkpoint.tensors().size() == 3);
    CHECK(checkpoint.files().size() == 2);
    CHECK_FALSE(checkpoint.index_path().empty());
    REQUIRE(checkpoint.find("z.bias").tensor != nullptr);
    CHECK(std::memcmp(checkpoint.find("z.bias").file->data(*checkpoint.find("z.bias").tensor),
                      c.data(), 2) == 0);
    CHECK(checkpoint.find("nothing").tensor == nullptr);
    // The index file itself opens the same checkpoint; one shard alone is a checkpoint too.
    CHECK(
        safetensors_checkpoint((dir / "model.safetensors.index.json").string()).tensors().size() ==
        3);
    CHECK(safetensors_checkpoint((dir / "model-00002-of-00002.safetensors").string())
              .tensors()
              .size() == 1);
  }
  write_index(R"({"x.weight": "model-00001-of-00002.safetensors",
                  "y": "model-00002-of-00002.safetensors",
                  "z.bias": "model-00002-of-00002.safetensors"})");
  CHECK_THROWS_WITH(safetensors_checkpoint(dir.string()), SAFETENSORS_CONTAINS("no such tensor"));
  write_index(R"({"x.weight": "model-00001-of-00002.safetensors",
                  "z.bias": "model-00002-of-00002.safetensors"})");
  CHECK_THROWS_WITH(safetensors_checkpoint(dir.string()),
                    SAFETENSORS_CONTAINS("does not list there"));
  write_index(R"({"x.weight": "../elsewhere.safetensors"})");
  CHECK_THROWS_WITH(safetensors_checkpoint(dir.string()),
                    SAFETENSORS_CONTAINS("not a file in the folder"));
  write_index(R"({"x.weight": "missing.safetensors"})");
  CHECK_THROWS_WITH(safetensors_checkpoint(dir.string()), SAFETENSORS_CONTAINS("cannot open"));
  write_index(R"([1, 2])");
  CHECK_THROWS_WITH(safetensors_checkpoint(dir.string()), SAFETENSORS_CONTAINS("weight_map"));
  std::ofstream(dir / "model.safetensors.index.json") << "{ not json";
  CHECK_THROWS_WITH(safetensors_checkpoint(dir.string()), SAFETENSORS_CONTAINS("not valid JSON"));
  fs::remove(dir / "model.safetensors.index.json");

  // Without an index, every .safetensors file; a name in two files is an error.
  CHECK(safetensors_checkpoint(dir.string()).tensors().size() == 3);
  write_safetensors((dir / "extra.safetensors").string(), {bytes_source("y", "U8", {4}, b)});
  CHECK_THROWS_WITH(safetensors_checkpoint(dir.string()), SAFETENSORS_CONTAINS("is in both"));

  const fs::path empty = scratch("checkpoint_empty");
  std::ofstream(empty / "README.md") << "no tensors here";
  CHECK_THROWS_WITH(safetensors_checkpoint(empty.string()), SAFETENSORS_CONTAINS("no tensors"));
  write_safetensors((empty / "nothing.safetensors").string(), {});
  CHECK_THROWS_WITH(safetensors_checkpoint(empty.string()), SAFETENSORS_CONTAINS("no tensors"));
  CHECK_THROWS_WITH(safetensors_checkpoint((empty / "absent").string()),
                    SAFETENSORS_CONTAINS("cannot open"));
}

TEST_CASE("checkpoints: a large index finds every name in its shard") {
  // Names whose text order differs from their data order ("t.10" sorts before "t.2"), spread over
  // three shards; each tensor's two bytes are its number.
  const fs::path dir = scratch("large_index");
  constexpr int shards = 3;
  constexpr int per_shard = 1500;
  const auto name_of = [](int i) { return "model.layers." + std::to_string(i) + ".weight"; };
  const auto shard_of = [](int s) {
    return "model-0000" + std::to_string(s + 1) + "-of-0000" + std::to_string(shards) +
           ".safetensors";
  };
  std::vector<std::vector<std::uint8_t>> bytes(shards * per_shard);
  for (int s = 0; s < shards; ++s) {
    std::vector<tensor_source> sources;
    for (int k = 0; k < per_shard; ++k) {
      const int i = s * per_shard + k;
      bytes[i] = {static_cast<std::uint8_t>(i), static_cast<std::uint8_t>(i >> 8)};
      sources.push_back(bytes_source(name_of(i), "U8", {2}, bytes[i]));
    }
    write_safetensors((dir / shard_of(s)).string(), sources);
  }
  // The index lists every name; `extra` adds one entry, `skipped` leaves one name out.
  const auto write_index = [&](const std::string& extra, int skipped) {
    std::ofstream out(dir / "model.safetensors.index.json");
    out << R"({"metadata": {}, "weight_map": {)";
    const char* separator = "";
    for (int i = 0; i < shards * per_shard; ++i) {
      if (i == skipped)
        continue;
      out << separator << '"' << name_of(i) << "\": \"" << shard_of(i / per_shard) << '"';
      separator = ",";
    }
    out << extra << "}}";
  };

  write_index("", -1);
  {
    const safetensors_checkpoint checkpoint(dir.string());
    REQUIRE(checkpoint.tensors().size() == static_cast<std::size_t>(shards * per_shard));
    for (int i = 0; i < shards * per_shard; ++i) {
      const auto found = checkpoint.find(name_of(i));
      REQUIRE(found.tensor != nullptr);
      CHECK(found.tensor->name == name_of(i));
      CHECK(fs::path(found.file->path()).filename().string() == shard_of(i / per_shard));
      CHECK(found.file->find(name_of(i)) == found.tensor);
      CHECK(std::memcmp(found.file->data(*found.tensor), bytes[i].data(), 2) == 0);
    }
    // Names next to real ones in sort order, and names of the right shape, are not there.
    for (const std::string& absent :
         {std::string(""), std::string("model.layers."), std::string("model.layers.1"),
          std::string("model.layers.1.weigh"), std::string("model.layers.1.weight "),
          std::string("model.layers.4500.weight"), std::string("zzz")}) {
      INFO(absent);
      CHECK(checkpoint.find(absent).tensor == nullptr);
      CHECK(checkpoint.find(absent).file == nullptr);
      for (const safetensors_file* file : checkpoint.files())
        CHECK(file->find(absent) == nullptr);
    }
  }

  // A name the index puts in a shard that lacks it is refused, naming it and the shard.
  const std::string unknown = R"(,"model.layers.9999.weight": ")" + shard_of(1) + '"';
  write_index(unknown, -1);
  CHECK_THROWS_WITH(safetensors_checkpoint(dir.string()),
                    SAFETENSORS_CONTAINS("weight_map puts 'model.layers.9999.weight' in " +
                                         shard_of(1) + ", which has no such tensor"));
  // A real name the index puts in the wrong shard too.
  write_index(R"(,"model.layers.0.weight": ")" + shard_of(2) + '"', 0);
  CHECK_THROWS_WITH(safetensors_checkpoint(dir.string()),
                    SAFETENSORS_CONTAINS("weight_map puts 'model.layers.0.weight' in " +
                                         shard_of(2) + ", which has no such tensor"));
  // A name a shard holds that the index leaves out.
  write_index("", 2 * per_shard + 7);
  CHECK_THROWS_WITH(safetensors_checkpoint(dir.string()),
                    SAFETENSORS_CONTAINS(shard_of(2) + " holds 'model.layers." +
                                         std::to_string(2 * per_shard + 7) +
                                         ".weight', which weight_map does not list there"));
  // Both at once: every listed name is checked in every shard before any shard's extra names, so
  // the unknown name in the second shard wins over the name the first shard holds unlisted.
  write_index(unknown, 3);
  CHECK_THROWS_WITH(safetensors_checkpoint(dir.string()),
                    SAFETENSORS_CONTAINS("'model.layers.9999.weight' in " + shard_of(1)));
}
