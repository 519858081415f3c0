// libFuzzer target for the .npy reader (io/npy.hpp): parse_npy must either throw npy_error or
// return an array whose bytes match its shape, which serializes to a file that parses back to the
// same array (and serializes to the same bytes again). Anything else aborts.
//
// Build and run (Clang with libFuzzer):
//   clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude \
//     tests/fuzz/fuzz_npy.cpp -o fuzz_npy && ./fuzz_npy -max_total_time=60 corpus/
#include <blockscale/io/npy.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_npy: %s\n", what);
  std::abort();
}

bool same(const blockscale::io::npy_array& a, const blockscale::io::npy_array& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.bytes == b.bytes;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace blockscale::io;
  npy_array array;
  try {
    array = parse_npy(data, size);
  } catch (const npy_error&) {
    return 0; // the documented way to reject input
  }
  if (array.bytes.size() != array.size() * npy_itemsize(array.dtype)) {
    fail("parsed array's bytes disagree with its shape");
  }
  if (array.to_float().size() != array.size())
    fail("to_float returned the wrong count");

  std::vector<std::uint8_t> file;
  npy_array again;
  try {
    file = serialize_npy(array);
    again = parse_npy(file.data(), file.size());
  } catch (const npy_error& error) {
    std::fprintf(stderr, "fuzz_npy: %s\n", error.what());
    fail("a parsed array did not serialize and parse back");
  }
  if (!same(array, again))
    fail("serialize -> parse changed the array");
  if (serialize_npy(again) != file)
    fail("serialization is not deterministic");
  return 0;
}
