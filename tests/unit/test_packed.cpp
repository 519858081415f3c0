// Packed E2M1: element 0 in the low nibble, pack/unpack of 2, 8 and 16 values.
#include <blockscale/blockscale.hpp>

#include <cstdint>

#include "catch.hpp"

using namespace blockscale;

TEST_CASE("e2m1x2 keeps element 0 in the low nibble", "[packed]") {
  const float values[2] = {1.0f, -6.0f}; // codes 0x2 and 0xF
  const auto packed = e2m1x2::pack(values);
  CHECK(packed.bits() == 0xF2);
  CHECK(packed.get(0).bits() == 0x2);
  CHECK(packed.get(1).bits() == 0xF);
  float out[2];
  packed.unpack(out);
  CHECK(out[0] == 1.0f);
  CHECK(out[1] == -6.0f);
}

TEST_CASE("e2m1x8 and e2m1x16 round-trip every code in every position", "[packed]") {
  float values[16];
  for (int i = 0; i < 16; ++i)
    values[i] = static_cast<float>(e2m1::from_bits(static_cast<std::uint8_t>(i)));
  const auto x16 = e2m1x16::pack(values);
  CHECK(x16.bits() == 0xFEDCBA9876543210ull);
  float out16[16];
  x16.unpack(out16);
  for (int i = 0; i < 16; ++i) {
    CHECK(out16[i] == values[i]);
    CHECK(x16.get(i).bits() == i);
  }
  const auto x8 = e2m1x8::pack(values + 8);
  CHECK(x8.bits() == 0xFEDCBA98u);
  float out8[8];
  x8.unpack(out8);
  for (int i = 0; i < 8; ++i)
    CHECK(out8[i] == values[8 + i]);
}

TEST_CASE("pack rounds with the given mode; set replaces one element", "[packed]") {
  const float values[8] = {0.3f, 2.6f, 2.5f, -0.1f, 5.5f, 7.0f, 1.1f, -3.9f};
  const auto nearest = e2m1x8::pack(values);
  const auto truncated = e2m1x8::pack(values, round_toward_zero{});
  for (int i = 0; i < 8; ++i) {
    CHECK(nearest.get(i).bits() == convert<e2m1>(values[i]).bits());
    CHECK(truncated.get(i).bits() == convert<e2m1>(values[i], round_toward_zero{}).bits());
  }
  auto edited = nearest;
  edited.set(3, e2m1(4.0f));
  CHECK(edited.get(3).bits() == 0x6);
  for (int i = 0; i < 8; ++i)
    if (i != 3)
      CHECK(edited.get(i) == nearest.get(i));
}

TEST_CASE("pack_stochastic uses one random word per element", "[packed]") {
  const float values[2] = {2.25f, 2.25f}; // a quarter of the way from 2 to 3
  const std::uint32_t bits[2] = {0xBFFFFFFFu, 0xC0000000u};
  const auto packed = e2m1x2::pack_stochastic(values, bits);
  CHECK(static_cast<float>(packed.get(0)) == 2.0f);
  CHECK(static_cast<float>(packed.get(1)) == 3.0f);
}
