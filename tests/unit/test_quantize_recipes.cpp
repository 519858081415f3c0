// Bit-exact agreement of quantize<F> (fast path, 1-3 threads) and quantize_reference<F> with an
// independent re-statement of each recipe of the field (docs/quantization.md), written here from
// the published descriptions and not from the library's quantize code:
//
// - NVFP4 / UE5M3-FP4 (Transformer Engine's FP32 operation order, its reference_nvfp4.py
//   "Bit-compatibility"): s_enc = min(N / amax_t, FLT_MAX) (1 if that is 0), s_dec = 1 / s_enc,
//   m = s_enc · fp32(1/6), S_b = scale_round(clamp(min(amax_b · m, FLT_MAX), 0, S_max)),
//   f_b = min(1 / (float(S_b) · s_dec), FLT_MAX), q = e2m1_rne(clamp(x · f_b, -6, 6)); a block
//   whose scale is 0 or NaN stores zero codes (docs/quantization.md).
// - MXFP4 / MXFP8, OCP "floor": X = 2^clamp(floor(log2 amax_b) - emax(element), -127, 127);
//   q = element(x / X). cuBLAS "rceil": X = 2^clamp(ceil(log2(amax_b / 6)), -127, 127). Both are
//   computed here from the exponent of amax_b with exact integer/double arithmetic, not through
//   a float multiply and a directed conversion as the library does.
//
// Only the final scalar roundings use convert<> (verified exhaustively elsewhere).
#include <blockscale/blockscale.hpp>

#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "catch.hpp"
#include "quantized_bytes.hpp"
#include "splitmix64.hpp"

using namespace blockscale;

namespace {

// ---------------------------------------------------------------------------------------------
// Inputs

enum class distribution { normal, laplace, student_t3, uniform_outliers, binades40, row_scaled };

const distribution all_distributions[] = {distribution::normal,     distribution::laplace,
                                          distribution::student_t3, distribution::uniform_outliers,
                                          distribution::binades40,  distribution::row_scaled};

const char* name_of(distribution d) {
  switch (d) {
  case distribution::normal:
    return "N(0,1)";
  case distribution::laplace:
    return "Laplace";
  case distribution::student_t3:
    return "Student-t3";
  case distribution::uniform_outliers:
    return "uniform+outliers";
  case distribution::binades40:
    return "40 binades";
  case distribution::row_scaled:
    return "rows scaled by 2^k";
  }
  return "?";
}

// Per-row binary exponents for the row-scaled distribution: some rows land in float denormals
// (2^-140), some far above the rest, so that blocks underflow against the tensor scale.
const int row_exponents[] = {0, 37, -45, -80, 64, -126, -140, 12, -20, 90, -100, 5, -60};

template <class T>
T to_input(double v) {
  if (std::is_same<T, float16>::value) // keep float16 finite (max 65504)
    v = v > 60000.0 ? 60000.0 : (v < -60000.0 ? -60000.0 : v);
  return T(static_cast<float>(v));
}

template <class T>
std::vector<T> make_input(distribution d, std::size_t rows, std::size_t cols, std::uint64_t seed) {
  splitmix64 rng{seed};
  const bool half16 = std::is_same<T, float16>::value;
  std::vector<T> x(rows * cols);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      double v = 0;
      switch (d) {
      case distribution::normal:
        v = rng.normal();
        break;
      case distribution::laplace: {
        const double u = rng.uniform() - 0.5;
        v = (u < 0 ? 1.0 : -1.0) * std::log(1.0 - 2.0 * std::fabs(u) + 1e-300);
        break;
      }
      case distribution::student_t3: {
        const double z = rng.normal(), a = rng.normal(), b = rng.normal(), e = rng.normal();
        v = z / std::sqrt((a * a + b * b + e * e) / 3.0);
        break;
      }
      case distribution::uniform_outliers:
        v = 2.0 * rng.uniform() - 1.0;
        if (rng.next() % 61 == 0)
          v *= 3.0e5;
        break;
      case distribution::binades40:
        v = (rng.next() & 1 ? -1.0 : 1.0) * std::exp2(40.0 * rng.uniform() - 20.0);
        break;
      case distribution::row_scaled: {
        const int e = row_exponents[r % (sizeof row_exponents / sizeof row_exponents[0])];
        v = std::ldexp(rng.normal(), half16 ? e / 8 : e);
        break;
      }
      }
      x[r * cols + c] = to_input<T>(v);
    }
  }
  return x;
}

// ---------------------------------------------------------------------------------------------
// The independent model

enum class recipe_kind { te_order, mx_floor, mx_rceil };

struct recipe {
  const char* name;
  recipe_kind kind;
  bool default_rule;          // leave options.rule empty
  scale_rule rule;            // otherwise this
  scale_rounding scale_round; // for te_order: nearest_even or up
  float numerator;            // s_enc = numerator / amax_t; 0: no tensor scale (s_enc = 1)
};

// The model's result in the quantized orientation (rows × padded columns).
struct expected {
  std::size_t rows = 0, cols = 0, padded = 0, blocks = 0;
  std::vector<std::uint8_t> codes;  // rows × padded
  std::vector<std::uint8_t> scales; // rows × blocks
  float s_dec = 1.0f;
  std::uint64_t n_blocks = 0, zero_scales = 0, nan_scales = 0, saturated = 0;
  std::size_t mx_product_vs_division = 0;    // MX: x · (1/X) and x / X disagreed (must stay 0)
  std::size_t rceil_floatorder_mismatch = 0; // rceil: exact vs m = fp32(1/6) scale (must stay 0)
};

// s_enc from amax_t, Transformer Engine's reference quantizer, step 1.
float encode_scale(float numerator, float amax_t) {
  if (numerator == 0.0f)
    return 1.0f;
  float s = numerator / amax_t;
  s = s < FLT_MAX ? s : FLT_MAX;
  return s == 0.0f ? 1.0f : s;
}

int clamp_exponent(long e) {
  return static_cast<int>(e < -127 ? -127 : (e > 127 ? 127 : e));
}

// floor(log2 a) for finite a > 0, exact (ilogb handles denormals).
long floor_log2(float a) {
  return std::ilogb(a);
}

// The smallest k with a <= 6 · 2^k, exact (6 · 2^k is exact in double for the k that matter).
long rceil_exponent(float a) {
  long k = static_cast<long>(std::ilogb(a)) - 3;
  while (std::ldexp(6.0, static_cast<int>(k)) < static_cast<double>(a))
    ++k;
  return k;
}

template <class F>
expected model(const std::vector<float>& y, std::size_t rows, std::size_t cols, bool tile,
               float s_enc, const recipe& rc) {
  using E = typename F::element_type;
  using S = typename F::scale_type;
  constexpr std::size_t b = F::block_size;
  const float element_max = static_cast<float>(std::numeric_limits<E>::max());
  const float scale_max = static_cast<float>(std::numeric_limits<S>::max());
  const int element_emax = std::ilogb(element_max); // 2 for E2M1, 8 for E4M3

  expected ex;
  ex.rows = rows;
  ex.cols = cols;
  ex.padded = (cols + b - 1) / b * b;
  ex.blocks = ex.padded / b;
  ex.codes.assign(rows * ex.padded, 0);
  ex.scales.assign(rows * ex.blocks, 0);
  ex.s_dec = 1.0f / s_enc;
  const float s_dec = ex.s_dec;
  const float m = s_enc * (1.0f / 6.0f); // fp32(1/6) first, then one multiply
  const std::size_t group = tile ? b : 1;

  auto at = [&](std::size_t r, std::size_t c) { return c < cols ? y[r * cols + c] : 0.0f; };

  for (std::size_t r0 = 0; r0 < rows; r0 += group) {
    const std::size_t r1 = r0 + group < rows ? r0 + group : rows;
    for (std::size_t kb = 0; kb < ex.blocks; ++kb) {
      float amax = 0.0f;
      bool nan = false;
      for (std::size_t r = r0; r < r1; ++r)
        for (std::size_t j = 0; j < b; ++j) {
          const float v = at(r, kb * b + j);
          nan = nan || std::isnan(v);
          amax = std::fabs(v) > amax ? std::fabs(v) : amax;
        }
      ++ex.n_blocks;
      std::uint8_t scale_code = 0;
      float factor = 0.0f;
      bool store = false;
      float mx_x = 0.0f; // MX: the power of two X
      if (rc.kind == recipe_kind::te_order) {
        float scaled = nan ? std::numeric_limits<float>::quiet_NaN() : amax * m;
        if (scaled > FLT_MAX)
          scaled = FLT_MAX;
        // Saturated: the scale rounded with an unbounded exponent would exceed the max. Both
        // UE4M3 and UE5M3 have 3 mantissa bits and an even max code, so nearest-even saturates
        // strictly above the midpoint to the next (unbounded) value, round-up above the max.
        const double next = static_cast<double>(scale_max) +
                            std::ldexp(1.0, static_cast<int>(std::floor(std::log2(scale_max))) - 3);
        const double midpoint = (static_cast<double>(scale_max) + next) / 2;
        ex.saturated +=
            (rc.scale_round == scale_rounding::up ? scaled > scale_max : scaled > midpoint) ? 1 : 0;
        const float clamped = scaled > scale_max ? scale_max : scaled;
        const S sb = rc.scale_round == scale_rounding::up
                         ? convert<S>(clamped, round_up{})
                         : convert<S>(clamped, round_nearest_even{});
        scale_code = sb.bits();
        const float sv = static_cast<float>(sb);
        store = sv != 0.0f && !std::isnan(sv);
        ex.zero_scales += sv == 0.0f ? 1 : 0;
        ex.nan_scales += nan ? 1 : 0;
        const float inv = 1.0f / (sv * s_dec);
        factor = inv < FLT_MAX ? inv : FLT_MAX;
      } else {
        // UE8M0: code = exponent + 127, NaN = 0xFF, no zero.
        if (nan) {
          scale_code = 0xFF;
          ++ex.nan_scales;
        } else {
          long e = -127;
          if (amax > 0.0f && std::isfinite(amax))
            e = rc.kind == recipe_kind::mx_floor ? floor_log2(amax) - element_emax
                                                 : rceil_exponent(amax);
          else if (std::isinf(amax))
            e = 127;
          const int k = clamp_exponent(e);
          scale_code = static_cast<std::uint8_t>(k + 127);
          mx_x = std::ldexp(1.0f, k);
          // f_b = min(1 / (X · s_dec), FLT_MAX) with s_dec = 1: exactly 1/X for a power of two
          // X in [2^-127, 2^127], so x · f_b and x / X are the same real number rounded once.
          const float inv = 1.0f / (mx_x * s_dec);
          factor = inv < FLT_MAX ? inv : FLT_MAX;
          store = true;
          // The library derives X as convert<UE8M0>(amax · m, directed rounding) with m =
          // fp32(1/target); the exact exponent above must give the same code.
          if (rc.kind == recipe_kind::mx_rceil) {
            const float lib_order = static_cast<float>(convert<S>(amax * m, round_up{}));
            ex.rceil_floatorder_mismatch += lib_order != mx_x ? 1 : 0;
          }
          // Saturated: the power of two the rule asks for exceeds 2^127 (floor: the ideal scale
          // amax / 2^emax reaches 2^128; rceil: amax / 6 exceeds 2^127).
          const double ideal = rc.kind == recipe_kind::mx_rceil
                                   ? static_cast<double>(amax) / 6.0
                                   : static_cast<double>(amax) / std::ldexp(1.0, element_emax);
          ex.saturated += (rc.kind == recipe_kind::mx_rceil ? ideal > std::ldexp(1.0, 127)
                                                            : ideal >= std::ldexp(1.0, 128))
                              ? 1
                              : 0;
        }
      }
      for (std::size_t r = r0; r < r1; ++r) {
        ex.scales[r * ex.blocks + kb] = scale_code;
        for (std::size_t j = 0; j < b; ++j) {
          const std::size_t c = kb * b + j;
          const float x = at(r, c);
          std::uint8_t code = 0;
          if (store) {
            float t = x * factor;
            t = t > element_max ? element_max : (t < -element_max ? -element_max : t);
            code = convert<E>(t, round_nearest_even{}).bits();
            if (rc.kind != recipe_kind::te_order) {
              float d = x / mx_x;
              d = d > element_max ? element_max : (d < -element_max ? -element_max : d);
              ex.mx_product_vs_division += convert<E>(d, round_nearest_even{}).bits() != code;
            }
          }
          ex.codes[r * ex.padded + c] = code;
        }
      }
    }
  }
  return ex;
}

// cuBLASLt's VEC16_UE4M3 layout (CUTLASS Sm1xxBlockScaledConfig), written out here (not the
// library's function).
std::size_t tc_offset(std::size_t m, std::size_t kb, std::size_t blocks) {
  const std::size_t kb_tiles = (blocks + 3) / 4;
  const std::size_t tile = (m / 128) * kb_tiles + (kb / 4);
  return tile * 512 + (m % 32) * 16 + ((m % 128) / 32) * 4 + (kb % 4);
}

std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// Compares a library result with the model; returns "" or a description of the first
// mismatch and the number of mismatches.
template <class F>
std::string compare(const quantized_matrix<F>& q, const expected& ex, scale_layout layout,
                    bool columnwise) {
  std::string first;
  std::size_t bad = 0;
  auto note = [&](const std::string& what) {
    if (bad++ == 0)
      first = what;
  };
  if (q.rows() != ex.rows || q.cols() != ex.cols || q.padded_cols() != ex.padded ||
      q.blocks_per_row() != ex.blocks)
    return "shape " + std::to_string(q.rows()) + "x" + std::to_string(q.cols()) + " padded " +
           std::to_string(q.padded_cols()) + ", expected " + std::to_string(ex.rows) + "x" +
           std::to_string(ex.cols);
  if (q.layout() != layout || q.columnwise() != columnwise)
    note("layout or columnwise flag");
  if (float_bits(q.decode_scale()) != float_bits(ex.s_dec))
    note("tensor_scale " + std::to_string(q.decode_scale()) + " expected " +
         std::to_string(ex.s_dec));
  for (std::size_t r = 0; r < ex.rows; ++r)
    for (std::size_t c = 0; c < ex.padded; ++c) {
      const unsigned got = q.element(r, c).bits(), want = ex.codes[r * ex.padded + c];
      if (got != want)
        note("element (" + std::to_string(r) + "," + std::to_string(c) + ") code " +
             std::to_string(got) + " expected " + std::to_string(want));
      const unsigned gs = q.block_scale(r, c).bits(),
                     ws = ex.scales[r * ex.blocks + c / F::block_size];
      if (gs != ws)
        note("block_scale (" + std::to_string(r) + "," + std::to_string(c) + ") code " +
             std::to_string(gs) + " expected " + std::to_string(ws));
    }
  // The raw bytes at the documented offsets; padding bytes of the tensor-core layout are zero.
  const auto& bytes = scale_bytes(q);
  std::vector<bool> used;
  if (layout == scale_layout::row_major) {
    if (bytes.size() != ex.rows * ex.blocks)
      note("row-major scale_bytes size " + std::to_string(bytes.size()));
    else
      for (std::size_t i = 0; i < bytes.size(); ++i)
        if (bytes[i] != ex.scales[i])
          note("row-major scale byte " + std::to_string(i));
  } else {
    const std::size_t size = (ex.rows + 127) / 128 * 128 * ((ex.blocks + 3) / 4 * 4);
    if (bytes.size() != size) {
      note("tensor-core scale_bytes size " + std::to_string(bytes.size()) + " expected " +
           std::to_string(size));
    } else {
      used.assign(size, false);
      for (std::size_t r = 0; r < ex.rows; ++r)
        for (std::size_t kb = 0; kb < ex.blocks; ++kb) {
          const std::size_t o = tc_offset(r, kb, ex.blocks);
          used[o] = true;
          if (bytes[o] != ex.scales[r * ex.blocks + kb])
            note("tensor-core scale byte of (" + std::to_string(r) + "," + std::to_string(kb) +
                 ") at offset " + std::to_string(o));
        }
      for (std::size_t i = 0; i < size; ++i)
        if (!used[i] && bytes[i] != 0)
          note("tensor-core padding byte " + std::to_string(i) + " is not zero");
    }
  }
  const quantize_stats& st = q.stats();
  if (st.blocks != ex.n_blocks || st.zero_scales != ex.zero_scales ||
      st.nan_scales != ex.nan_scales || st.saturated_scales != ex.saturated)
    note("stats blocks/zero/nan/saturated " + std::to_string(st.blocks) + "/" +
         std::to_string(st.zero_scales) + "/" + std::to_string(st.nan_scales) + "/" +
         std::to_string(st.saturated_scales) + " expected " + std::to_string(ex.n_blocks) + "/" +
         std::to_string(ex.zero_scales) + "/" + std::to_string(ex.nan_scales) + "/" +
         std::to_string(ex.saturated));
  if (bad == 0)
    return "";
  return first + " (" + std::to_string(bad) + " mismatches)";
}

struct shape {
  std::size_t rows, cols;
};
const shape all_shapes[] = {{37, 45}, {1, 17}, {129, 33}, {128, 64}};

template <class T>
const char* type_name() {
  return std::is_same<T, float>::value
             ? "float"
             : (std::is_same<T, bfloat16>::value ? "bfloat16" : "float16");
}

// Runs every distribution, shape, direction and block shape of one recipe for input type T.
template <class F, class T>
void check_recipe(const recipe& rc, bool tiles) {
  std::uint64_t seed = 1000;
  std::uint64_t zero_scale_blocks = 0; // coverage: some blocks must underflow
  for (distribution d : all_distributions)
    for (const shape& sh : all_shapes)
      for (int columnwise = 0; columnwise < 2; ++columnwise)
        for (int tile = 0; tile < (tiles ? 2 : 1); ++tile) {
          const std::vector<T> x = make_input<T>(d, sh.rows, sh.cols, ++seed);
          const matrix_view<const T> view(x.data(), sh.rows, sh.cols, sh.cols);
          // The data as the quantizer sees it: float, in the quantized orientation.
          const std::size_t qr = columnwise ? sh.cols : sh.rows,
                            qc = columnwise ? sh.rows : sh.cols;
          std::vector<float> y(qr * qc);
          float amax_t = 0.0f;
          for (std::size_t r = 0; r < sh.rows; ++r)
            for (std::size_t c = 0; c < sh.cols; ++c) {
              const float v = static_cast<float>(x[r * sh.cols + c]);
              amax_t = std::fabs(v) > amax_t ? std::fabs(v) : amax_t;
              if (columnwise)
                y[c * qc + r] = v;
              else
                y[r * qc + c] = v;
            }
          const float s_enc = encode_scale(rc.numerator, amax_t);
          const expected ex = model<F>(y, qr, qc, tile != 0, s_enc, rc);
          zero_scale_blocks += ex.zero_scales;

          INFO(rc.name << ", " << type_name<T>() << ", " << name_of(d) << ", " << sh.rows << "x"
                       << sh.cols << (columnwise ? ", columnwise" : ", rowwise")
                       << (tile ? ", 16x16 tiles" : ", 1xB blocks") << ", s_enc " << s_enc);
          CHECK(ex.mx_product_vs_division == 0);
          CHECK(ex.rceil_floatorder_mismatch == 0);

          quantize_options options;
          options.columnwise = columnwise != 0;
          options.shape = tile ? block_shape::tile : block_shape::rowwise;
          options.encode_scale = s_enc;
          if (!rc.default_rule)
            options.rule = rc.rule;
          // The library's own policy gives the same s_enc from the same amax.
          if (rc.numerator != 0.0f) {
            current_tensor_scale policy = current_tensor_scale::make<F>();
            policy.numerator = rc.numerator;
            policy.observe_amax(measure_amax<F>(view, options));
            CHECK(float_bits(policy.encode_scale()) == float_bits(s_enc));
          }
          for (scale_layout layout : {scale_layout::row_major, scale_layout::tensor_core}) {
            options.layout = layout;
            options.threads = 1;
            const std::string ref =
                compare(quantize_reference<F>(view, options), ex, layout, options.columnwise);
            INFO("quantize_reference, layout " << static_cast<int>(layout) << ": " << ref);
            CHECK(ref.empty());
          }
          const struct {
            unsigned threads;
            scale_layout layout;
          } fast_runs[] = {{1, scale_layout::row_major},   {1, scale_layout::tensor_core},
                           {2, scale_layout::row_major},   {2, scale_layout::tensor_core},
                           {3, scale_layout::tensor_core}, {3, scale_layout::row_major}};
          for (const auto& run : fast_runs) {
            options.layout = run.layout;
            options.threads = run.threads;
            const quantized_matrix<F> q = quantize<F>(view, options);
            const std::string fast = compare(q, ex, run.layout, options.columnwise);
            INFO("quantize, " << run.threads << " threads, layout " << static_cast<int>(run.layout)
                              << ": " << fast);
            CHECK(fast.empty());
          }
        }
  // The row-scaled data spans 2^-140 .. 2^90: against amax_t some blocks flush to zero scales.
  if (rc.kind == recipe_kind::te_order && rc.numerator != 0.0f && !std::is_same<T, float16>::value)
    CHECK(zero_scale_blocks > 0);
}

const float te_numerator = 6.0f * 448.0f; // 2688

} // namespace

TEST_CASE("the model's constants are the documented ones", "[quantize][recipes]") {
  // UE5M3 periodic policy numerator: 6 · 114688 · 2^-8 = 2688, the same s_enc as NVFP4.
  CHECK(6.0f * 114688.0f * 0x1p-8f == te_numerator);
  CHECK(tensor_scale_numerator<ue5m3_fp4>(8) == te_numerator);
  CHECK(tensor_scale_numerator<nvfp4>(0) == te_numerator);
  CHECK(static_cast<float>(std::numeric_limits<ue4m3>::max()) == 448.0f);
  CHECK(static_cast<float>(std::numeric_limits<ue5m3>::max()) == 114688.0f);
  // Check values from the nvmath-python docs ( M = K = 128, NVFP4: 8 blocks per row).
  CHECK(tc_offset(5, 2, 8) == 82);
  CHECK(tc_offset(5, 5, 8) == 593);
  CHECK(tensor_core_scale_offset(5, 2, 8) == 82);
  CHECK(tensor_core_scale_offset(5, 5, 8) == 593);
  // floor(log2) and the rceil exponent on hand-picked values, denormals included.
  CHECK(floor_log2(1.0f) == 0);
  CHECK(floor_log2(0.75f) == -1);
  CHECK(floor_log2(std::ldexp(1.5f, -140)) == -140);
  CHECK(rceil_exponent(6.0f) == 0);
  CHECK(rceil_exponent(std::nextafter(6.0f, 7.0f)) == 1);
  CHECK(rceil_exponent(3.0f) == -1);
  CHECK(rceil_exponent(3.5f) == 0);
}

TEMPLATE_TEST_CASE("NVFP4 matches Transformer Engine's FP32 order bit for bit",
                   "[quantize][recipes]", float, bfloat16, float16) {
  check_recipe<nvfp4, TestType>({"NVFP4 s_enc=2688/amax", recipe_kind::te_order, true,
                                 scale_rules::nvfp4(), scale_rounding::nearest_even, te_numerator},
                                true);
  check_recipe<nvfp4, TestType>({"NVFP4 s_enc=1", recipe_kind::te_order, false,
                                 scale_rules::nvfp4(), scale_rounding::nearest_even, 0.0f},
                                false);
}

TEMPLATE_TEST_CASE("UE5M3-FP4 matches the documented recipe bit for bit", "[quantize][recipes]",
                   float, bfloat16, float16) {
  check_recipe<ue5m3_fp4, TestType>({"UE5M3 nearest, s_enc=2688/amax", recipe_kind::te_order, true,
                                     scale_rules::ue5m3_nearest(), scale_rounding::nearest_even,
                                     te_numerator},
                                    true);
  check_recipe<ue5m3_fp4, TestType>({"UE5M3 nearest, s_enc=1", recipe_kind::te_order, false,
                                     scale_rules::ue5m3_nearest(), scale_rounding::nearest_even,
                                     0.0f},
                                    true);
  check_recipe<ue5m3_fp4, TestType>({"UE5M3 up, s_enc=2688/amax", recipe_kind::te_order, false,
                                     scale_rules::ue5m3_up(), scale_rounding::up, te_numerator},
                                    true);
  check_recipe<ue5m3_fp4, TestType>({"UE5M3 up, s_enc=1", recipe_kind::te_order, false,
                                     scale_rules::ue5m3_up(), scale_rounding::up, 0.0f},
                                    false);
}

TEMPLATE_TEST_CASE("MXFP4 and MXFP8 match the OCP floor and cuBLAS rceil rules bit for bit",
                   "[quantize][recipes]", float, bfloat16, float16) {
  check_recipe<mxfp4, TestType>({"MXFP4 OCP floor", recipe_kind::mx_floor, true,
                                 scale_rules::ocp_floor(), scale_rounding::down, 0.0f},
                                false);
  check_recipe<mxfp4, TestType>(
      {"MXFP4 rceil", recipe_kind::mx_rceil, false, scale_rules::rceil(), scale_rounding::up, 0.0f},
      false);
  check_recipe<mxfp8, TestType>({"MXFP8 OCP floor", recipe_kind::mx_floor, true,
                                 scale_rules::ocp_floor(256.0f), scale_rounding::down, 0.0f},
                                false);
}

TEMPLATE_TEST_CASE("tile quantization of x columnwise is the transpose of the rowwise one",
                   "[quantize][recipes]", nvfp4, ue5m3_fp4) {
  for (distribution d : all_distributions)
    for (const shape& sh : all_shapes) {
      const std::vector<float> x = make_input<float>(d, sh.rows, sh.cols, 77);
      const matrix_view<const float> view(x.data(), sh.rows, sh.cols);
      quantize_options options;
      options.shape = block_shape::tile;
      options.encode_scale = encode_scale(te_numerator, measure_amax<TestType>(view));
      options.threads = 2;
      const auto rowwise = quantize<TestType>(view, options);
      options.columnwise = true;
      options.layout = scale_layout::tensor_core; // accessors are layout-independent
      const auto colwise = quantize<TestType>(view, options);
      INFO(name_of(d) << ", " << sh.rows << "x" << sh.cols);
      REQUIRE(colwise.rows() == sh.cols);
      REQUIRE(colwise.cols() == sh.rows);
      std::size_t element_mismatches = 0, scale_mismatches = 0;
      for (std::size_t r = 0; r < sh.rows; ++r)
        for (std::size_t c = 0; c < sh.cols; ++c) {
          element_mismatches += rowwise.element(r, c).bits() != colwise.element(c, r).bits();
          scale_mismatches += rowwise.block_scale(r, c).bits() != colwise.block_scale(c, r).bits();
        }
      CHECK(element_mismatches == 0);
      CHECK(scale_mismatches == 0);
      CHECK(float_bits(rowwise.decode_scale()) == float_bits(colwise.decode_scale()));
      CHECK(rowwise.stats().blocks == colwise.stats().blocks);
    }
}

TEMPLATE_TEST_CASE("padding past cols() is zero codes and never changes a scale",
                   "[quantize][recipes]", nvfp4, ue5m3_fp4, mxfp4, mxfp8) {
  // 17 columns pad to 32 for blocks of 16 and of 32.
  constexpr std::size_t b =
      (17 + TestType::block_size - 1) / TestType::block_size * TestType::block_size;
  splitmix64 rng{5};
  for (int trial = 0; trial < 50; ++trial) {
    // A 1x17 row, the same row padded to the block with explicit zeros, and the same row inside
    // a wider allocation whose extra columns hold huge values that must be ignored (ld > cols).
    std::vector<float> row(17), padded(b, 0.0f), wide(2 * 40, 0.0f);
    for (std::size_t c = 0; c < 17; ++c) {
      row[c] = static_cast<float>(rng.normal() * std::exp2(static_cast<double>(trial % 9) * 3));
      padded[c] = row[c];
      wide[c] = row[c];
      wide[40 + c] = row[c];
    }
    for (std::size_t c = 17; c < 40; ++c)
      wide[c] = wide[40 + c] = 1.0e30f;
    for (bool columnwise : {false, true}) {
      quantize_options options;
      options.encode_scale = 0.75f + 0.125f * static_cast<float>(trial % 5);
      options.columnwise = columnwise;
      // Columnwise, the 1×17 row is a 17×1 column: quantize its transpose view.
      const matrix_view<const float> a = columnwise
                                             ? matrix_view<const float>(row.data(), 17, 1, 1)
                                             : matrix_view<const float>(row.data(), 1, 17, 17);
      const matrix_view<const float> p = columnwise
                                             ? matrix_view<const float>(padded.data(), b, 1, 1)
                                             : matrix_view<const float>(padded.data(), 1, b, b);
      const auto qa = quantize<TestType>(a, options);
      const auto qp = quantize_reference<TestType>(p, options);
      INFO("trial " << trial << (columnwise ? " columnwise" : " rowwise"));
      REQUIRE(qa.rows() == 1);
      REQUIRE(qa.cols() == 17);
      REQUIRE(qa.padded_cols() == b);
      REQUIRE(qp.cols() == b);
      for (std::size_t c = 0; c < b; ++c) {
        INFO("column " << c);
        CHECK(qa.element(0, c).bits() == qp.element(0, c).bits());
        CHECK(qa.block_scale(0, c).bits() == qp.block_scale(0, c).bits());
        if (c >= 17)
          CHECK(qa.element(0, c).bits() == 0);
      }
      CHECK(qa.stats().blocks == b / TestType::block_size);
      if (!columnwise) {
        const auto qw =
            quantize<TestType>(matrix_view<const float>(wide.data(), 2, 17, 40), options);
        for (std::size_t r = 0; r < 2; ++r)
          for (std::size_t c = 0; c < b; ++c) {
            CHECK(qw.element(r, c).bits() == qa.element(0, c).bits());
            CHECK(qw.block_scale(r, c).bits() == qa.block_scale(0, c).bits());
          }
      }
    }
  }
}
