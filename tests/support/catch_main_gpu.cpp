// main() for tests that need a CUDA device: exits with 77, which ctest reports as skipped, when
// the machine has none.
#include "catch_run.hpp"

#include <cuda_runtime_api.h>

#include <cstdio>

int main(int argc, char* argv[]) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("no CUDA device: skipped");
    return 77;
  }
  return blockscale_catch_run(argc, argv);
}
