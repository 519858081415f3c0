// main() for tests that need a CUDA device: exits with 77, which ctest reports as skipped, when
// the machine has none.
#define CATCH_CONFIG_RUNNER
#include "catch.hpp"

#include <cuda_runtime_api.h>

#include <cstdio>

int main(int argc, char* argv[]) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("no CUDA device: skipped");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
