// main() for Catch2 v2 tests (v3 has Catch2::Catch2WithMain); the implementation is
// catch_impl.cpp.
#include "catch_run.hpp"

int main(int argc, char* argv[]) {
  return blockscale_catch_run(argc, argv);
}
