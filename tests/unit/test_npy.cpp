// .npy reading and writing (io/npy.hpp): round trips of every dtype and shape rank, headers of
// versions 1.0, 2.0 and 3.0, files laid out byte for byte as NumPy writes them, and a table of
// malformed inputs that must each throw npy_error with a message naming the problem.
#include <blockscale/io/npy.hpp>
#include <blockscale/numeric/half.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "catch.hpp"

#if defined(BLOCKSCALE_CATCH2_V3)
#define NPY_CONTAINS(text) Catch::Matchers::ContainsSubstring(text)
#else
#define NPY_CONTAINS(text) Catch::Contains(text)
#endif

using blockscale::bfloat16;
using blockscale::float16;
using blockscale::io::npy_array;
using blockscale::io::npy_dtype;
using blockscale::io::npy_error;
using blockscale::io::parse_npy;
using blockscale::io::read_npy;
using blockscale::io::serialize_npy;
using blockscale::io::write_npy;

namespace {

std::vector<std::uint8_t> to_bytes(const std::string& text) {
  return std::vector<std::uint8_t>(text.begin(), text.end());
}

npy_array parse(const std::vector<std::uint8_t>& bytes) {
  return parse_npy(bytes.data(), bytes.size());
}
npy_array parse(const std::string& text) {
  return parse(to_bytes(text));
}

// A file with the given version and header text, padded as NumPy pads (data at a multiple of 64),
// followed by `data`.
std::string npy_file(int major, int minor, const std::string& header, const std::string& data) {
  const std::size_t length_field = major == 1 ? 2 : 4;
  std::string padded = header;
  padded += std::string(64 - (8 + length_field + header.size() + 1) % 64, ' ');
  padded += '\n';
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += static_cast<char>(minor);
  for (std::size_t b = 0; b < length_field; ++b) {
    out += static_cast<char>((padded.size() >> (8 * b)) & 0xFF);
  }
  return out + padded + data;
}

std::string dict(const std::string& descr, const std::string& shape) {
  return "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
}

// A unique path in the temporary directory, removed when the guard goes.
struct temp_path {
  std::string path;
  explicit temp_path(const char* stem) {
    const auto ticks = std::chrono::steady_clock::now().time_since_epoch().count();
    path = (std::filesystem::temp_directory_path() /
            (std::string("blockscale_test_npy_") + stem + "_" + std::to_string(ticks) + ".npy"))
               .string();
  }
  ~temp_path() { std::remove(path.c_str()); }
};

npy_array patterned(npy_dtype dtype, std::vector<std::size_t> shape) {
  npy_array array;
  array.dtype = dtype;
  array.shape = std::move(shape);
  array.bytes.resize(array.size() * blockscale::io::npy_itemsize(dtype));
  // Bytes that make finite, distinct values of every type: float32 / float16 / bfloat16 codes
  // with a small exponent field.
  for (std::size_t i = 0; i < array.bytes.size(); ++i) {
    const std::size_t itemsize = blockscale::io::npy_itemsize(dtype);
    const bool top = i % itemsize == itemsize - 1;
    array.bytes[i] = static_cast<std::uint8_t>(top ? 0x3C + (i / itemsize) % 3 : 17 * i + 5);
  }
  return array;
}

void check_same(const npy_array& a, const npy_array& b) {
  CHECK(a.dtype == b.dtype);
  CHECK(a.shape == b.shape);
  CHECK(a.bytes == b.bytes);
}

} // namespace

TEST_CASE("every dtype and shape rank round-trips", "[npy]") {
  const npy_dtype dtypes[] = {npy_dtype::float32, npy_dtype::float16, npy_dtype::bfloat16,
                              npy_dtype::uint8};
  const std::vector<std::vector<std::size_t>> shapes = {{}, {0}, {5}, {3, 4}, {2, 3, 4}};
  for (npy_dtype dtype : dtypes) {
    for (const auto& shape : shapes) {
      INFO("dtype " << blockscale::io::npy_descr(dtype) << ", rank " << shape.size());
      const npy_array array = patterned(dtype, shape);
      const std::vector<std::uint8_t> file = serialize_npy(array);
      // Version 1.0, and the data starts at a multiple of 64 after a '\n'-terminated header.
      REQUIRE(file.size() >= 10);
      CHECK(file[6] == 1);
      CHECK(file[7] == 0);
      const std::size_t data_start = 10 + (file[8] | file[9] << 8);
      CHECK(data_start % 64 == 0);
      CHECK(file[data_start - 1] == '\n');
      CHECK(file.size() == data_start + array.bytes.size());
      check_same(parse(file), array);

      const temp_path temp("roundtrip");
      write_npy(temp.path, array);
      check_same(read_npy(temp.path), array);
    }
  }
}

TEST_CASE("the header text is NumPy's", "[npy]") {
  const auto header_of = [](const npy_array& array) {
    const std::vector<std::uint8_t> file = serialize_npy(array);
    const std::string text(file.begin() + 10,
                           file.end() - static_cast<std::ptrdiff_t>(array.bytes.size()));
    return text.substr(0, text.find_last_not_of(" \n") + 1);
  };
  CHECK(header_of(patterned(npy_dtype::float32, {2, 3})) ==
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
  CHECK(header_of(patterned(npy_dtype::float16, {5})) ==
        "{'descr': '<f2', 'fortran_order': False, 'shape': (5,), }");
  CHECK(header_of(patterned(npy_dtype::bfloat16, {})) ==
        "{'descr': '<V2', 'fortran_order': False, 'shape': (), }");
  CHECK(header_of(patterned(npy_dtype::uint8, {0})) ==
        "{'descr': '|u1', 'fortran_order': False, 'shape': (0,), }");
}

TEST_CASE("typed writers and to_float", "[npy]") {
  SECTION("float") {
    const float values[] = {1.5f, -0.0f, 3e38f, 1e-45f, -2.25f, 7.0f};
    const temp_path temp("float");
    write_npy(temp.path, values, {2, 3});
    const npy_array array = read_npy(temp.path);
    CHECK(array.dtype == npy_dtype::float32);
    CHECK(array.shape == std::vector<std::size_t>{2, 3});
    const std::vector<float> back = array.to_float();
    REQUIRE(back.size() == 6);
    CHECK(std::memcmp(back.data(), values, sizeof values) == 0);
  }
  SECTION("float16") {
    // A vector, not an array: GCC 12 at -O3 misreports the array as maybe-uninitialized.
    const std::vector<float16> values = {float16::from_bits(0x3C00), float16::from_bits(0x0001),
                                         float16::from_bits(0xFBFF), float16::from_bits(0x7C00)};
    const temp_path temp("float16");
    write_npy(temp.path, values.data(), {4});
    const npy_array array = read_npy(temp.path);
    CHECK(array.dtype == npy_dtype::float16);
    CHECK(array.bytes == std::vector<std::uint8_t>{0x00, 0x3C, 0x01, 0x00, 0xFF, 0xFB, 0x00, 0x7C});
    const std::vector<float> back = array.to_float();
    REQUIRE(back.size() == 4);
    CHECK(back[0] == 1.0f);
    CHECK(back[1] == 0x1p-24f);
    CHECK(back[2] == -65504.0f);
    CHECK(back[3] == std::numeric_limits<float>::infinity());
  }
  SECTION("bfloat16") {
    const std::vector<bfloat16> values = {bfloat16(1.0f), bfloat16(-3.0f), bfloat16(0x1p-130f)};
    const temp_path temp("bfloat16");
    write_npy(temp.path, values.data(), {3, 1});
    const npy_array array = read_npy(temp.path);
    CHECK(array.dtype == npy_dtype::bfloat16);
    CHECK(array.shape == std::vector<std::size_t>{3, 1});
    const std::vector<float> back = array.to_float();
    REQUIRE(back.size() == 3);
    CHECK(back[0] == 1.0f);
    CHECK(back[1] == -3.0f);
    CHECK(back[2] == 0x1p-130f);
  }
  SECTION("uint8") {
    const std::uint8_t values[] = {0, 1, 128, 255};
    const temp_path temp("uint8");
    write_npy(temp.path, values, {2, 2});
    const npy_array array = read_npy(temp.path);
    CHECK(array.dtype == npy_dtype::uint8);
    CHECK(array.to_float() == std::vector<float>{0.0f, 1.0f, 128.0f, 255.0f});
  }
  SECTION("a scalar and an empty array") {
    const float scalar = 42.0f;
    const temp_path temp("scalar");
    write_npy(temp.path, &scalar, {});
    CHECK(read_npy(temp.path).to_float() == std::vector<float>{42.0f});
    write_npy(temp.path, static_cast<const float*>(nullptr), {3, 0});
    const npy_array empty = read_npy(temp.path);
    CHECK(empty.size() == 0);
    CHECK(empty.shape == std::vector<std::size_t>{3, 0});
    CHECK(empty.to_float().empty());
  }
  SECTION("null data with a non-empty shape") {
    const temp_path temp("null");
    CHECK_THROWS_AS(write_npy(temp.path, static_cast<const float*>(nullptr), {2}), npy_error);
  }
  SECTION("bytes that disagree with the shape") {
    npy_array array = patterned(npy_dtype::float32, {2, 2});
    array.bytes.pop_back();
    CHECK_THROWS_WITH(serialize_npy(array), NPY_CONTAINS("bytes"));
    CHECK_THROWS_WITH(array.to_float(), NPY_CONTAINS("bytes"));
  }
}

TEST_CASE("headers of versions 1.0, 2.0 and 3.0", "[npy]") {
  const std::string data("\x00\x00\x80\x3F\x00\x00\x00\x40", 8); // 1.0f, 2.0f
  for (int major : {1, 2, 3}) {
    INFO("version " << major << ".0");
    const npy_array array = parse(npy_file(major, 0, dict("<f4", "(2,)"), data));
    CHECK(array.dtype == npy_dtype::float32);
    CHECK(array.shape == std::vector<std::size_t>{2});
    CHECK(array.to_float() == std::vector<float>{1.0f, 2.0f});
  }
  SECTION("a header too long for 1.0 is written as 2.0") {
    // 40000 dimensions of 1 make a header of about 120 kB.
    const npy_array array = patterned(npy_dtype::uint8, std::vector<std::size_t>(40000, 1));
    const std::vector<std::uint8_t> file = serialize_npy(array);
    CHECK(file[6] == 2);
    const std::size_t header_length =
        file[8] | file[9] << 8 | file[10] << 16 | static_cast<std::size_t>(file[11]) << 24;
    CHECK(header_length > 0xFFFF);
    CHECK((12 + header_length) % 64 == 0);
    check_same(parse(file), array);
  }
  SECTION("layout variations NumPy's reader accepts") {
    const char* headers[] = {
        "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2,)}",
        "{'shape': (2,), 'fortran_order': False, 'descr': '<f4'}",
        "{ 'descr' : '<f4' ,\n 'fortran_order' : False , 'shape' : ( 2 , ) , }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2L,), }",
    };
    for (const char* header : headers) {
      INFO(header);
      const npy_array array = parse(npy_file(1, 0, header, data));
      CHECK(array.shape == std::vector<std::size_t>{2});
      CHECK(array.to_float() == std::vector<float>{1.0f, 2.0f});
    }
  }
}

TEST_CASE("files as NumPy writes them", "[npy]") {
  // Built by hand after numpy/lib/format.py: magic, version, u16 header length, the dict as
  // repr() prints it, spaces up to a 64-byte boundary less one, '\n', then the data. NumPy >= 1.24
  // inserts 21 - len(repr(shape[0])) extra spaces before padding; for headers this short the total
  // stays 128 bytes, so those files are these same bytes.
  SECTION("np.save(f, np.arange(6, dtype=np.float32).reshape(2, 3))") {
    const std::string file = std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                             "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" +
                             std::string(58, ' ') + "\n" +
                             std::string("\x00\x00\x00\x00"
                                         "\x00\x00\x80\x3F"
                                         "\x00\x00\x00\x40"
                                         "\x00\x00\x40\x40"
                                         "\x00\x00\x80\x40"
                                         "\x00\x00\xA0\x40",
                                         24);
    REQUIRE(file.size() == 128 + 24);
    const npy_array array = parse(file);
    CHECK(array.dtype == npy_dtype::float32);
    CHECK(array.shape == std::vector<std::size_t>{2, 3});
    CHECK(array.to_float() == std::vector<float>{0, 1, 2, 3, 4, 5});
    CHECK(serialize_npy(array) == to_bytes(file)); // and we write the same bytes
  }
  SECTION("np.save(f, np.array([1, -2, 0.5], dtype=np.float16))") {
    const std::string file = std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                             "{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }" +
                             std::string(60, ' ') + "\n" +
                             std::string("\x00\x3C\x00\xC0\x00\x38", 6);
    REQUIRE(file.size() == 128 + 6);
    const npy_array array = parse(file);
    CHECK(array.dtype == npy_dtype::float16);
    CHECK(array.to_float() == std::vector<float>{1.0f, -2.0f, 0.5f});
    CHECK(serialize_npy(array) == to_bytes(file));
  }
  SECTION("np.save(f, np.uint8(7))") {
    const std::string file = std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                             "{'descr': '|u1', 'fortran_order': False, 'shape': (), }" +
                             std::string(62, ' ') + "\n" + "\x07";
    REQUIRE(file.size() == 128 + 1);
    const npy_array array = parse(file);
    CHECK(array.dtype == npy_dtype::uint8);
    CHECK(array.shape.empty());
    CHECK(array.to_float() == std::vector<float>{7.0f});
    CHECK(serialize_npy(array) == to_bytes(file));
  }
  SECTION("np.save(f, np.array([1, -np.inf], dtype=ml_dtypes.bfloat16))") {
    const std::string file = std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                             "{'descr': '<V2', 'fortran_order': False, 'shape': (2,), }" +
                             std::string(60, ' ') + "\n" + std::string("\x80\x3F\x80\xFF", 4);
    REQUIRE(file.size() == 128 + 4);
    const npy_array array = parse(file);
    CHECK(array.dtype == npy_dtype::bfloat16);
    CHECK(array.to_float() == std::vector<float>{1.0f, -std::numeric_limits<float>::infinity()});
    CHECK(serialize_npy(array) == to_bytes(file));
  }
  SECTION("np.save(f, np.array([1, 2], dtype='>f4')) is byte-swapped on read") {
    const std::string file = std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                             "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }" +
                             std::string(60, ' ') + "\n" +
                             std::string("\x3F\x80\x00\x00\x40\x00\x00\x00", 8);
    const npy_array array = parse(file);
    CHECK(array.dtype == npy_dtype::float32);
    CHECK(array.bytes == std::vector<std::uint8_t>{0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00, 0x40});
    CHECK(array.to_float() == std::vector<float>{1.0f, 2.0f});
  }
  SECTION("np.save(f, np.array([1, 2], dtype='>f2')) is byte-swapped on read") {
    const std::string file = std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                             "{'descr': '>f2', 'fortran_order': False, 'shape': (2,), }" +
                             std::string(60, ' ') + "\n" + std::string("\x3C\x00\x40\x00", 4);
    CHECK(parse(file).to_float() == std::vector<float>{1.0f, 2.0f});
  }
  SECTION("Python 2 NumPy: 16-byte alignment, long dimensions") {
    const std::string file = std::string("\x93NUMPY\x01\x00\x46\x00", 10) +
                             "{'descr': '<f4', 'fortran_order': False, 'shape': (2L,), }" +
                             std::string(11, ' ') + "\n" +
                             std::string("\x00\x00\x80\x3F\x00\x00\x00\x40", 8);
    REQUIRE(file.size() == 80 + 8);
    CHECK(parse(file).to_float() == std::vector<float>{1.0f, 2.0f});
  }
  SECTION("np.lib.format.write_array(f, np.arange(6, dtype='<f4').reshape(2, 3), (2, 0))") {
    const std::string file = std::string("\x93NUMPY\x02\x00\x74\x00\x00\x00", 12) +
                             "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" +
                             std::string(56, ' ') + "\n" + std::string(24, '\0');
    REQUIRE(file.size() == 128 + 24);
    const npy_array array = parse(file);
    CHECK(array.shape == std::vector<std::size_t>{2, 3});
    CHECK(array.to_float() == std::vector<float>(6, 0.0f));
  }
}

TEST_CASE("malformed input throws npy_error naming the problem", "[npy]") {
  const std::string f4_2 = std::string("\x00\x00\x80\x3F\x00\x00\x00\x40", 8);
  struct row {
    const char* name;
    std::string input;
    const char* word;
  };
  std::string short_prefix = npy_file(1, 0, dict("<f4", "(2,)"), f4_2).substr(0, 9);
  std::string long_header = npy_file(1, 0, dict("<f4", "(2,)"), f4_2);
  long_header[8] = '\xFF'; // header length 0xFF76, beyond the file
  std::string huge_v2 = npy_file(2, 0, dict("<f4", "(2,)"), f4_2);
  huge_v2[8] = huge_v2[9] = huge_v2[10] = huge_v2[11] = '\xFF';
  const row rows[] = {
      {"empty input", "", "truncated"},
      {"only the magic", std::string("\x93NUMPY", 6), "truncated"},
      {"bad magic", "\x93NUMPZ" + npy_file(1, 0, dict("<f4", "(2,)"), f4_2).substr(6), "magic"},
      {"not an npy file", "PK\x03\x04 this is a zip file, not npy", "magic"},
      {"version 4.0", npy_file(4, 0, dict("<f4", "(2,)"), f4_2), "version"},
      {"version 1.1", npy_file(1, 1, dict("<f4", "(2,)"), f4_2), "version"},
      {"ends inside the header length", short_prefix, "truncated"},
      {"header length beyond the file", long_header, "truncated header"},
      {"v2 header length 4 GiB", huge_v2, "truncated header"},
      {"header is a list", npy_file(1, 0, "['descr', '<f4']", f4_2), "dict"},
      {"header ends early", npy_file(1, 0, "{'descr': '<f4', ", f4_2), "ends early"},
      {"missing shape", npy_file(1, 0, "{'descr': '<f4', 'fortran_order': False}", f4_2),
       "missing key 'shape'"},
      {"missing descr", npy_file(1, 0, "{'fortran_order': False, 'shape': (2,)}", f4_2),
       "missing key 'descr'"},
      {"missing fortran_order", npy_file(1, 0, "{'descr': '<f4', 'shape': (2,)}", f4_2),
       "missing key 'fortran_order'"},
      {"empty dict", npy_file(1, 0, "{}", f4_2), "missing key"},
      {"unexpected key",
       npy_file(1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", f4_2),
       "unexpected key 'x'"},
      {"duplicate key",
       npy_file(1, 0, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",
                f4_2),
       "duplicate key"},
      {"unknown descr", npy_file(1, 0, dict("<f8", "(1,)"), f4_2), "unsupported descr '<f8'"},
      {"big-endian bfloat16", npy_file(1, 0, dict(">V2", "(4,)"), f4_2), "unsupported descr"},
      {"structured descr",
       npy_file(1, 0, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}", f4_2),
       "structured"},
      {"fortran order",
       npy_file(1, 0, "{'descr': '<f4', 'fortran_order': True, 'shape': (2,)}", f4_2),
       "fortran_order True is not supported"},
      {"fortran_order not a bool",
       npy_file(1, 0, "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", f4_2),
       "True or False"},
      {"fortran_order Truex",
       npy_file(1, 0, "{'descr': '<f4', 'fortran_order': Truex, 'shape': (2,)}", f4_2),
       "True or False"},
      {"negative dimension", npy_file(1, 0, dict("<f4", "(-2,)"), f4_2), "negative"},
      {"shape (2) is not a tuple", npy_file(1, 0, dict("<f4", "(2)"), f4_2), "tuple"},
      {"shape is a list", npy_file(1, 0, dict("<f4", "[2]"), f4_2), "tuple"},
      {"shape holds a float", npy_file(1, 0, dict("<f4", "(2.0,)"), f4_2), "shape"},
      {"shape holds a name", npy_file(1, 0, dict("<f4", "(n,)"), f4_2), "dimension"},
      {"leading zero", npy_file(1, 0, dict("<f4", "(02,)"), f4_2), "leading zero"},
      {"dimension beyond size_t", npy_file(1, 0, dict("<f4", "(99999999999999999999999,)"), f4_2),
       "overflows"},
      {"shape product overflows", npy_file(1, 0, dict("<f4", "(4294967296, 4294967296)"), f4_2),
       "overflows"},
      {"byte size overflows", npy_file(1, 0, dict("<f4", "(4611686018427387904,)"), f4_2),
       "overflows"},
      {"overflow hidden by a zero", npy_file(1, 0, dict("<f4", "(0, 4294967296, 4294967296)"), ""),
       "overflows"},
      {"data truncated", npy_file(1, 0, dict("<f4", "(3,)"), f4_2), "data truncated"},
      {"no data", npy_file(1, 0, dict("<f4", "(2,)"), ""), "data truncated"},
      {"trailing bytes", npy_file(1, 0, dict("<f4", "(1,)"), f4_2), "trailing bytes"},
      {"characters after the dict", npy_file(1, 0, dict("<f4", "(2,)") + " x", f4_2),
       "after the dict"},
      {"unterminated string", npy_file(1, 0, "{'descr': '<f4}", f4_2), "unterminated"},
      {"escape in a string", npy_file(1, 0, dict("<f\\x34", "(2,)"), f4_2), "escape"},
      {"unquoted key", npy_file(1, 0, "{descr: '<f4'}", f4_2), "quoted"},
      {"missing colon", npy_file(1, 0, "{'descr' '<f4'}", f4_2), "':'"},
      {"missing comma", npy_file(1, 0, "{'descr': '<f4' 'shape': (2,)}", f4_2), "','"},
  };
  STATIC_REQUIRE(sizeof(std::size_t) == 8); // the overflow rows assume a 64-bit size_t
  for (const row& r : rows) {
    INFO(r.name);
    CHECK_THROWS_AS(parse(r.input), npy_error);
    CHECK_THROWS_WITH(parse(r.input), NPY_CONTAINS(r.word));
  }
  // Every prefix of a valid file is truncated somewhere.
  const std::string valid = npy_file(1, 0, dict("<f4", "(2,)"), f4_2);
  for (std::size_t n = 0; n < valid.size(); ++n) {
    INFO("prefix of " << n << " bytes");
    CHECK_THROWS_AS(parse(valid.substr(0, n)), npy_error);
  }
  CHECK_THROWS_AS(parse_npy(nullptr, 0), npy_error);
}

TEST_CASE("file errors name the path", "[npy]") {
  const std::string missing = "/nonexistent-blockscale-dir/array.npy";
  CHECK_THROWS_AS(read_npy(missing), npy_error);
  CHECK_THROWS_WITH(read_npy(missing), NPY_CONTAINS(missing) && NPY_CONTAINS("No such file"));
  const float x = 1.0f;
  CHECK_THROWS_WITH(write_npy(missing, &x, {1}),
                    NPY_CONTAINS(missing) && NPY_CONTAINS("No such file"));
  CHECK_THROWS_WITH(read_npy(std::filesystem::temp_directory_path().string()),
                    NPY_CONTAINS(std::filesystem::temp_directory_path().string()));

  const temp_path temp("malformed");
  {
    std::FILE* file = std::fopen(temp.path.c_str(), "wb");
    REQUIRE(file != nullptr);
    const char contents[] = "\x93NUMPY\x09\x00 nonsense";
    REQUIRE(std::fwrite(contents, 1, sizeof contents - 1, file) == sizeof contents - 1);
    std::fclose(file);
  }
  CHECK_THROWS_WITH(read_npy(temp.path), NPY_CONTAINS(temp.path) && NPY_CONTAINS("version"));
}
