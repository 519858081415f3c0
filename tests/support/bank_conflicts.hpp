// Shared-memory bank conflicts of one warp-wide access, counted from the byte offsets its lanes
// use: the check behind the GEMM tiles' and the quantize kernels' shared layouts.
#pragma once

#include <algorithm>
#include <array>
#include <set>

/// Byte offsets of one warp-wide shared-memory access, one per lane.
using lane_offsets = std::array<int, 32>;

/// The worst number of distinct 4-byte words one bank must serve in one phase of a warp-wide
/// shared access of `access_bytes` per lane (32 banks of 4-byte words, bank = (byte / 4) % 32;
/// 8-byte accesses are served in phases of 16 lanes, 16-byte ones in phases of 8, narrower ones
/// in one phase of 32). 1 means conflict-free (lanes reading the same word share it). Returns a
/// large value for a misaligned access (a fault on the device).
inline int worst_bank_load(const lane_offsets& offsets, int access_bytes) {
  const int phase_lanes = access_bytes == 16 ? 8 : access_bytes == 8 ? 16 : 32;
  int worst = 0;
  for (int phase = 0; phase < 32; phase += phase_lanes) {
    std::set<int> words[32];
    for (int lane = phase; lane < phase + phase_lanes; ++lane) {
      const int offset = offsets[static_cast<std::size_t>(lane)];
      if (offset < 0 || offset % access_bytes != 0)
        return 1000;
      for (int byte = offset; byte < offset + std::max(access_bytes, 1); byte += 4)
        words[(byte / 4) % 32].insert(byte / 4);
    }
    for (const auto& bank : words)
      worst = std::max(worst, static_cast<int>(bank.size()));
  }
  return worst;
}
