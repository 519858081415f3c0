// Catch2 v2's implementation, compiled once for every test program: the plain main()
// (catch_main.cpp) and the one that skips without a CUDA device (catch_main_gpu.cpp) both link it.
#define CATCH_CONFIG_RUNNER
#include "catch.hpp"
#include "catch_run.hpp"

int blockscale_catch_run(int argc, char* argv[]) {
  return Catch::Session().run(argc, argv);
}
