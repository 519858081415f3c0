// A CUDA consumer of blockscale: the library compiles in device code (no GPU needed to build), and
// the host part runs.
#include <blockscale/blockscale.hpp>

#include <cstdint>

__global__ void encode(const float* in, std::uint8_t* out) {
  out[threadIdx.x] = blockscale::e2m1(in[threadIdx.x]).bits();
}

int main() {
  const blockscale::e2m1 x(3.0f);
  return x.bits() == 0x5 && static_cast<float>(x) == 3.0f ? 0 : 1;
}
