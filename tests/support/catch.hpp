/// \file catch.hpp
/// Catch2 for blockscale's tests, v3 or v2 (the build defines BLOCKSCALE_CATCH2_V3 for v3).
#pragma once

#if defined(BLOCKSCALE_CATCH2_V3)
#include <catch2/catch_all.hpp>
#else
#include <catch2/catch.hpp>
#endif
