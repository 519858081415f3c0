// CHECKs that two quantize_stats are equal field by field, the amax bit for bit.
#pragma once

#include <blockscale/block/codec.hpp>

#include <cstdint>
#include <cstring>

#include "catch.hpp"

inline void check_same_stats(const blockscale::quantize_stats& a,
                             const blockscale::quantize_stats& b) {
  std::uint32_t a_amax, b_amax;
  std::memcpy(&a_amax, &a.amax, sizeof a_amax);
  std::memcpy(&b_amax, &b.amax, sizeof b_amax);
  CHECK(a.blocks == b.blocks);
  CHECK(a.saturated_scales == b.saturated_scales);
  CHECK(a.zero_scales == b.zero_scales);
  CHECK(a.nan_scales == b.nan_scales);
  CHECK(a_amax == b_amax);
}
