// Global-scale conventions (block/global_scale.hpp): each library's value computed as that library
// computes it in float32, over every bfloat16 amax and a sweep of float ones; the divisor and
// multiplier round trips; and each convention's decode.
#include <blockscale/block/global_scale.hpp>
#include <blockscale/block/tensor_scale.hpp>
#include <blockscale/detail/bits.hpp>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "catch.hpp"

using namespace blockscale;

namespace {

/// Positive amaxes: every finite positive bfloat16 value, and float32 values stepping through
/// every binade with odd mantissas, plus 0, Inf and NaN.
std::vector<float> amaxes() {
  std::vector<float> out = {0.0f,
                            std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            FLT_MAX,
                            FLT_MIN,
                            std::numeric_limits<float>::denorm_min()};
  for (std::uint32_t bits = 1; bits < 0x7F80u; ++bits)
    out.push_back(detail::bit_cast<float>(bits << 16));
  for (std::uint32_t bits = 1; bits < 0x7F800000u; bits += 0x3FFFu)
    out.push_back(detail::bit_cast<float>(bits));
  return out;
}

bool same(float a, float b) {
  return detail::bit_cast<std::uint32_t>(a) == detail::bit_cast<std::uint32_t>(b);
}

} // namespace

TEST_CASE("global_scale: each convention's float32 arithmetic") {
  volatile float numerator = 2688.0f; // keeps the compiler from folding the reference
  for (float amax : amaxes()) {
    INFO(amax);
    // compressed-tensors / FlashInfer: torch evaluates 2688 / amax as reciprocal then multiply.
    const float reciprocal = 1.0f / amax;
    float ct = reciprocal * numerator;
    if (!(ct > 0.0f && ct <= FLT_MAX))
      ct = 1.0f;
    CHECK(same(global_scale(amax, global_scale_convention::compressed_tensors), ct));
    CHECK(same(global_scale(amax, global_scale_convention::flashinfer), ct));
    // Transformer Engine: blockscale's own encode_scale_from_amax, the correctly rounded quotient.
    CHECK(same(global_scale(amax, global_scale_convention::transformer_engine),
               encode_scale_from_amax(2688.0, amax)));
    // ModelOpt / torchao: the multiplier amax / 2688.
    float mo = amax / numerator;
    if (!(mo > 0.0f && mo <= FLT_MAX))
      mo = 1.0f;
    CHECK(same(global_scale(amax, global_scale_convention::modelopt), mo));
    CHECK(same(global_scale(amax, global_scale_convention::torchao), mo));
  }
  // The two divisors differ, by an ulp, for a good share of amaxes: the conventions are not
  // interchangeable bit for bit.
  std::size_t differ = 0, compared = 0;
  for (std::uint32_t bits = 0x3F80u; bits < 0x4000u; ++bits) { // bfloat16 values in [1, 2)
    const float amax = detail::bit_cast<float>(bits << 16);
    const float te = global_scale(amax, global_scale_convention::transformer_engine);
    const float ct = global_scale(amax, global_scale_convention::compressed_tensors);
    differ += te != ct;
    ++compared;
    CHECK(std::fabs(te - ct) <= std::nextafter(te, FLT_MAX) - te);
  }
  CHECK(differ > compared / 10);
  CHECK(global_scale(0.0f, global_scale_convention::transformer_engine) == FLT_MAX);
  CHECK(global_scale(-0.0f, global_scale_convention::transformer_engine) == FLT_MAX);
  CHECK(global_scale(0.0f, global_scale_convention::compressed_tensors) == 1.0f);
}

TEST_CASE("global_scale: stored values and decodes") {
  CHECK(stores_divisor(global_scale_convention::compressed_tensors));
  CHECK(stores_divisor(global_scale_convention::transformer_engine));
  CHECK_FALSE(stores_divisor(global_scale_convention::modelopt));
  CHECK_FALSE(stores_divisor(global_scale_convention::torchao));
  for (float amax : {0.37f, 3.0f, 1e-20f, 5e30f}) {
    const float s_enc = global_scale(amax, global_scale_convention::transformer_engine);
    const float s_dec = 1.0f / s_enc; // what quantize_params stores
    // A divisor stores s_enc, a multiplier blockscale's s_dec bit for bit.
    CHECK(
        same(global_scale_from_encode(s_enc, global_scale_convention::compressed_tensors), s_enc));
    CHECK(same(global_scale_from_encode(s_enc, global_scale_convention::modelopt), s_dec));
    CHECK(
        same(encode_scale_from_global(s_enc, global_scale_convention::compressed_tensors), s_enc));
    CHECK(same(encode_scale_from_global(s_dec, global_scale_convention::modelopt), 1.0f / s_dec));
    // Decodes: the multiplier form is blockscale's (q * S) * s_dec; the divisor form q * (S / G).
    for (float q : {-6.0f, -0.5f, 1.5f, 4.0f})
      for (float scale : {0.001953125f, 1.125f, 448.0f}) {
        CHECK(same(decode_with_global(q, scale, s_dec, global_scale_convention::modelopt),
                   (q * scale) * s_dec));
        CHECK(same(decode_with_global(q, scale, s_enc, global_scale_convention::compressed_tensors),
                   q * (scale / s_enc)));
      }
  }
}
