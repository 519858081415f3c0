// The usage example of docs/npy.md, compiled and run as a test.
#include <blockscale/blockscale.hpp>
#include <blockscale/io/npy.hpp>
#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  using namespace blockscale;
  const std::string path = argc > 1 ? argv[1] : "weights.npy";
  std::vector<float> w(16 * 48);
  for (std::size_t i = 0; i < w.size(); ++i)
    w[i] = static_cast<float>(i % 29) / 7.0f - 2.0f;
  io::write_npy(path, w.data(), {16, 48}); // np.load(path) gives a float32 (16, 48) array

  const io::npy_array loaded = io::read_npy(path); // throws io::npy_error on malformed files
  const std::vector<float> values = loaded.to_float();
  const matrix_view<const float> view(values.data(), loaded.shape[0], loaded.shape[1]);
  const auto q = quantize<ue5m3_fp4>(view);

  // The packed E2M1 codes as a uint8 array, two per byte (element 2i in the low nibble).
  io::write_npy(path, q.element_data(), {q.rows(), q.row_bytes()});
  std::printf("%zu x %zu -> %zu x %zu bytes, %.1f dB\n", loaded.shape[0], loaded.shape[1], q.rows(),
              q.row_bytes(), measure_error(view, q).sqnr_db);
  return io::read_npy(path).bytes.size() == q.rows() * q.row_bytes() ? 0 : 1;
}
