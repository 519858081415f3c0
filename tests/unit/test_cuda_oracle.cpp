// blockscale::convert against CUDA's host-callable converters (cuda_fp4.h, cuda_fp6.h,
// cuda_fp8.h) on sampled inputs: the special values, every float within a few ulps of every value
// and midpoint of E2M1, E4M3, E5M2, E8M0 and FP6, and random bit patterns from a fixed seed.
// tests/exhaustive/exhaustive_cuda.cpp runs the same comparison over all 2^32 floats.
#include "catch.hpp"

#if BLOCKSCALE_HAVE_CUDA_HEADERS

#include <cuda_fp4.h>
#include <cuda_fp6.h>
#include <cuda_fp8.h>

#include <blockscale/numeric/convert.hpp>
#include <blockscale/numeric/minifloat.hpp>
#include <blockscale/numeric/rounding.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../exhaustive/reference.hpp"

namespace {

namespace bs = blockscale;
using blockscale_test::bits_from_float;
using blockscale_test::float_from_bits;

constexpr float inf = std::numeric_limits<float>::infinity();

template <class Format>
void add_points(std::vector<float>& out) {
  const auto& entries = blockscale_test::reference_table<Format>().entries();
  auto around = [&](double v) {
    float x = static_cast<float>(v);
    if (!(x < inf))
      x = std::numeric_limits<float>::max();
    float lo = x, hi = x;
    out.push_back(x);
    for (int k = 0; k < 3; ++k) {
      lo = std::nextafter(lo, -inf);
      hi = std::nextafter(hi, inf);
      out.push_back(lo);
      out.push_back(hi);
    }
  };
  for (std::size_t i = 0; i + 1 < entries.size(); ++i) {
    around(entries[i].value);
    if (i + 2 < entries.size())
      around(0.5 * (entries[i].value + entries[i + 1].value));
  }
  around(entries[entries.size() - 2].value * 1.5);
}

std::vector<float> samples() {
  std::vector<float> out;
  add_points<bs::e2m1_format>(out);
  add_points<bs::e4m3_format>(out);
  add_points<bs::e5m2_format>(out);
  add_points<bs::ue8m0_format>(out);
  add_points<bs::e2m3_format>(out);
  add_points<bs::e3m2_format>(out);
  for (float v : {0.0f, std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(),
                  std::numeric_limits<float>::max(), inf, 1.0f})
    out.push_back(v);
  for (std::uint32_t nan : {0x7FC00000u, 0x7F800001u, 0x7FFFFFFFu, 0x7FA5A5A5u})
    out.push_back(float_from_bits(nan));
  std::mt19937 rng(0xC0DA0A1Eu);
  for (int i = 0; i < 1000000; ++i)
    out.push_back(float_from_bits(static_cast<std::uint32_t>(rng())));
  const std::size_t n = out.size();
  for (std::size_t i = 0; i < n; ++i)
    out.push_back(-out[i]);
  return out;
}

struct tally {
  std::uint64_t checks = 0, mismatches = 0;
  std::string first;

  void compare(const char* what, float x, unsigned cuda, unsigned ours) {
    ++checks;
    if (cuda == ours)
      return;
    if (++mismatches <= 10) {
      std::ostringstream line;
      line << "\n  " << what << ": x = " << x << " (0x" << std::hex << bits_from_float(x)
           << ") CUDA 0x" << cuda << " blockscale 0x" << ours;
      first += line.str();
    }
  }
  void require_clean(const char* what) const {
    INFO(what << ": " << checks << " inputs, " << mismatches << " mismatches" << first);
    CHECK(mismatches == 0);
    CHECK(checks > 0);
  }
};

} // namespace

TEST_CASE("E2M1 matches __nv_cvt_float_to_fp4", "[convert][cuda-oracle]") {
  tally nearest, zero;
  for (const float x : samples()) {
    nearest.compare("nearest", x, __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest),
                    bs::convert<bs::e2m1>(x).bits());
    zero.compare("toward zero", x, __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundZero),
                 bs::convert<bs::e2m1>(x, bs::round_toward_zero{}).bits());
  }
  nearest.require_clean("e2m1 cudaRoundNearest");
  zero.require_clean("e2m1 cudaRoundZero");
}

TEST_CASE("E4M3 and E5M2 match __nv_cvt_float_to_fp8", "[convert][cuda-oracle]") {
  tally e4_sat, e4_nosat, e5_sat, e5_nosat;
  for (const float x : samples()) {
    e4_sat.compare("e4m3 satfinite", x, __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3),
                   bs::convert<bs::e4m3>(x).bits());
    e4_nosat.compare("e4m3 nosat", x, __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E4M3),
                     bs::convert<bs::e4m3>(x, bs::round_nearest_even{}, bs::to_nonfinite{}).bits());
    e5_sat.compare("e5m2 satfinite", x, __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2),
                   bs::convert<bs::e5m2>(x).bits());
    e5_nosat.compare("e5m2 nosat", x, __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2),
                     bs::convert<bs::e5m2>(x, bs::round_nearest_even{}, bs::to_nonfinite{}).bits());
  }
  e4_sat.require_clean("e4m3 __NV_SATFINITE");
  e4_nosat.require_clean("e4m3 __NV_NOSAT");
  e5_sat.require_clean("e5m2 __NV_SATFINITE");
  e5_nosat.require_clean("e5m2 __NV_NOSAT");
}

TEST_CASE("UE8M0 matches __nv_cvt_float_to_e8m0 on x >= +0 and NaN", "[convert][cuda-oracle]") {
  tally zs, zn, us, un, negative;
  std::uint64_t compared = 0, skipped_negative = 0;
  for (const float x : samples()) {
    const unsigned ours_zs = bs::convert<bs::ue8m0>(x, bs::round_toward_zero{}).bits();
    const unsigned ours_zn =
        bs::convert<bs::ue8m0>(x, bs::round_toward_zero{}, bs::to_nonfinite{}).bits();
    const unsigned ours_us = bs::convert<bs::ue8m0>(x, bs::round_up{}).bits();
    const unsigned ours_un = bs::convert<bs::ue8m0>(x, bs::round_up{}, bs::to_nonfinite{}).bits();
    if (!std::isnan(x) && std::signbit(x)) {
      // The deliberate difference (docs/conversion.md): negative input gives code 0, where CUDA
      // converts |x|.
      ++skipped_negative;
      negative.compare("negative -> 0", x, 0, ours_zs | ours_zn | ours_us | ours_un);
      continue;
    }
    ++compared;
    zs.compare("zero satfinite", x, __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundZero),
               ours_zs);
    zn.compare("zero nosat", x, __nv_cvt_float_to_e8m0(x, __NV_NOSAT, cudaRoundZero), ours_zn);
    us.compare("posinf satfinite", x, __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf),
               ours_us);
    un.compare("posinf nosat", x, __nv_cvt_float_to_e8m0(x, __NV_NOSAT, cudaRoundPosInf), ours_un);
  }
  INFO(compared << " inputs compared with CUDA, " << skipped_negative << " negative inputs");
  zs.require_clean("e8m0 cudaRoundZero __NV_SATFINITE");
  zn.require_clean("e8m0 cudaRoundZero __NV_NOSAT");
  us.require_clean("e8m0 cudaRoundPosInf __NV_SATFINITE");
  un.require_clean("e8m0 cudaRoundPosInf __NV_NOSAT");
  negative.require_clean("ue8m0 negative input gives code 0");
}

TEST_CASE("FP6 matches __nv_cvt_float_to_fp6", "[convert][cuda-oracle]") {
  tally e2n, e2z, e3n, e3z;
  for (const float x : samples()) {
    e2n.compare("e2m3 nearest", x, __nv_cvt_float_to_fp6(x, __NV_E2M3, cudaRoundNearest),
                bs::convert<bs::e2m3>(x).bits());
    e2z.compare("e2m3 zero", x, __nv_cvt_float_to_fp6(x, __NV_E2M3, cudaRoundZero),
                bs::convert<bs::e2m3>(x, bs::round_toward_zero{}).bits());
    e3n.compare("e3m2 nearest", x, __nv_cvt_float_to_fp6(x, __NV_E3M2, cudaRoundNearest),
                bs::convert<bs::e3m2>(x).bits());
    e3z.compare("e3m2 zero", x, __nv_cvt_float_to_fp6(x, __NV_E3M2, cudaRoundZero),
                bs::convert<bs::e3m2>(x, bs::round_toward_zero{}).bits());
  }
  e2n.require_clean("e2m3 cudaRoundNearest");
  e2z.require_clean("e2m3 cudaRoundZero");
  e3n.require_clean("e3m2 cudaRoundNearest");
  e3z.require_clean("e3m2 cudaRoundZero");
}

#else // !BLOCKSCALE_HAVE_CUDA_HEADERS

TEST_CASE("CUDA converter oracle", "[convert][cuda-oracle]") {
  WARN("skipped: CUDA headers (cuda_fp4.h, cuda_fp8.h) not found");
  SUCCEED();
}

#endif
