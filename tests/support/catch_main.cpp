// Catch2 v2's main(), compiled once and linked into every test (v3 has Catch2::Catch2WithMain).
#define CATCH_CONFIG_MAIN
#include "catch.hpp"
