// A consumer of blockscale: encodes 3.0 as E2M1 (code 0x5) and decodes it back.
#include <blockscale/blockscale.hpp>

#if defined(BLOCKSCALE_EXPECTED_VERSION)
static_assert(BLOCKSCALE_VERSION == BLOCKSCALE_EXPECTED_VERSION,
              "config.hpp and the CMake package disagree on the version");
#endif

int main() {
  const blockscale::e2m1 x(3.0f);
  return x.bits() == 0x5 && static_cast<float>(x) == 3.0f ? 0 : 1;
}
