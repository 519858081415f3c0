// A consumer of the blockscale::safetensors component: writes a one-tensor safetensors file and
// reads it back through the installed (or vendored) headers and nlohmann_json.
#include <blockscale/io/safetensors.hpp>

#include <cstdint>
#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  namespace io = blockscale::io;
  const std::string path = std::string(argc > 1 ? argv[1] : ".") + "/consumer.safetensors";
  const std::uint8_t bytes[4] = {0x00, 0x3F, 0x80, 0xBF}; // bf16 0.5, -1
  io::write_safetensors(path, {{"w", "BF16", {2}, 4, bytes, {}, {}}}, {{"format", "pt"}});
  const io::safetensors_file file(path);
  float values[2];
  io::widen_to_float(*file.find("w"), file.data(*file.find("w")), 0, 2, values);
  std::remove(path.c_str());
  return values[0] == 0.5f && values[1] == -1.0f && file.metadata().at("format") == "pt" ? 0 : 1;
}
