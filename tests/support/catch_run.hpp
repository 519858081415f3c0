// Runs the Catch2 session from a test program's main(). Catch2 v2 declares Catch::Session only
// where its implementation is compiled, so with v2 the function is defined once, beside the
// implementation (catch_impl.cpp); v3 declares it in a header.
#pragma once

#if defined(BLOCKSCALE_CATCH2_V3)
#include <catch2/catch_session.hpp>

inline int blockscale_catch_run(int argc, char* argv[]) {
  return Catch::Session().run(argc, argv);
}
#else
int blockscale_catch_run(int argc, char* argv[]);
#endif
