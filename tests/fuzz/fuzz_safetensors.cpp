// libFuzzer target for the safetensors reader (io/safetensors.hpp): parse_safetensors_header must
// either throw safetensors_error or return tensors that cover the data exactly, each within it and
// with a byte size that matches its dtype and shape; the header it returns must serialize (through
// the writer's header code) to a file that parses back to the same tensors. Anything else aborts.
//
// Build and run (Clang with libFuzzer):
//   clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude \
//     tests/fuzz/fuzz_safetensors.cpp -o fuzz_safetensors && \
//     ./fuzz_safetensors -dict=tests/fuzz/safetensors.dict corpus/ tests/fuzz/corpus_safetensors/
#include <blockscale/io/safetensors.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_safetensors: %s\n", what);
  std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace blockscale::io;
  safetensors_header header;
  try {
    header = parse_safetensors_header(data, size, "fuzz");
  } catch (const safetensors_error&) {
    return 0; // the documented way to reject input
  }
  const std::uint64_t data_size = size - header.data_offset;
  std::uint64_t covered = 0;
  std::vector<tensor_source> sources;
  for (const tensor_info& tensor : header.tensors) {
    if (tensor.begin != covered || tensor.end < tensor.begin || tensor.end > data_size)
      fail("tensors do not cover the data exactly");
    covered = tensor.end;
    if (tensor.dtype != tensor_dtype::unknown &&
        tensor.elements() * static_cast<std::uint64_t>(dtype_bits(tensor.dtype)) !=
            tensor.bytes() * 8)
      fail("a tensor's byte size disagrees with its dtype and shape");
    tensor_source source{tensor.name,
                         tensor.dtype_name,
                         tensor.shape,
                         tensor.bytes(),
                         data + header.data_offset + tensor.begin,
                         nullptr,
                         nullptr};
    sources.push_back(source);
  }
  if (covered != data_size)
    fail("bytes after the last tensor were accepted");

  // Write the same tensors with the writer's header and parse the result again.
  std::string text;
  try {
    text = safetensors_header_json(sources, header.metadata);
  } catch (const safetensors_error& error) {
    std::fprintf(stderr, "fuzz_safetensors: %s\n", error.what());
    fail("a parsed header did not serialize");
  }
  std::vector<std::uint8_t> file(8);
  for (int b = 0; b < 8; ++b)
    file[b] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(text.size()) >> (8 * b));
  file.insert(file.end(), text.begin(), text.end());
  file.insert(file.end(), data + header.data_offset, data + size);
  safetensors_header again;
  try {
    again = parse_safetensors_header(file.data(), file.size(), "fuzz");
  } catch (const safetensors_error& error) {
    std::fprintf(stderr, "fuzz_safetensors: %s\n", error.what());
    fail("a serialized header did not parse back");
  }
  if (again.tensors.size() != header.tensors.size() || again.metadata != header.metadata)
    fail("serialize -> parse changed the header");
  for (std::size_t i = 0; i < again.tensors.size(); ++i) {
    const tensor_info &a = header.tensors[i], &b = again.tensors[i];
    if (a.name != b.name || a.dtype_name != b.dtype_name || a.shape != b.shape ||
        a.begin != b.begin || a.end != b.end)
      fail("serialize -> parse changed a tensor");
  }
  return 0;
}
